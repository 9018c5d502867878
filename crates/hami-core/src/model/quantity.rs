//! Kubernetes resource quantities (`1`, `3000`, `16Gi`, `1.5`, `100m`, `2e3`), parsed exactly.
//! Request derivation needs Go's `AsInt64` (exact integers only) and `Value` (rounded up).

use std::fmt;

/// An exactly parsed quantity: `mantissa × 10^dec_exp × 2^bin_exp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    dec_exp: i32,
    bin_exp: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("quantity {0:?} is not a valid Kubernetes quantity")]
    Syntax(String),
    #[error("quantity {0:?} is too large")]
    TooLarge(String),
}

/// Why a valid quantity is not an exact i64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotI64 {
    /// Not a whole number (`1.5`, `100m`).
    Fraction,
    /// A whole number beyond the i64 range (`99999999999999999999`, `1e30`).
    OutOfRange,
}

const MAX_DIGITS: usize = 36;

impl Quantity {
    /// Parses the canonical and non-canonical forms kube-apiserver accepts.
    pub fn parse(s: &str) -> Result<Quantity, Error> {
        let syntax = || Error::Syntax(s.to_owned());
        let t = s.trim();
        if t.is_empty() {
            return Err(syntax());
        }
        let (neg, rest) = match t.as_bytes()[0] {
            b'+' => (false, &t[1..]),
            b'-' => (true, &t[1..]),
            _ => (false, t),
        };
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, suffix) = rest.split_at(num_end);
        let (int_part, frac_part) = match num.split_once('.') {
            Some((i, f)) => (i, f),
            None => (num, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(syntax());
        }
        if frac_part.contains('.') {
            return Err(syntax());
        }
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > MAX_DIGITS {
            return Err(Error::TooLarge(s.to_owned()));
        }
        let mut mantissa: i128 = 0;
        for b in digits.bytes() {
            mantissa = mantissa * 10 + i128::from(b - b'0');
        }
        if neg {
            mantissa = -mantissa;
        }
        let mut dec_exp = -(frac_part.len() as i32);
        let mut bin_exp = 0u32;
        match suffix {
            "" => {}
            "Ki" => bin_exp = 10,
            "Mi" => bin_exp = 20,
            "Gi" => bin_exp = 30,
            "Ti" => bin_exp = 40,
            "Pi" => bin_exp = 50,
            "Ei" => bin_exp = 60,
            "n" => dec_exp -= 9,
            "u" => dec_exp -= 6,
            "m" => dec_exp -= 3,
            "k" => dec_exp += 3,
            "M" => dec_exp += 6,
            "G" => dec_exp += 9,
            "T" => dec_exp += 12,
            "P" => dec_exp += 15,
            "E" => dec_exp += 18,
            x if x.starts_with('e') || x.starts_with('E') => {
                let e: i32 = x[1..].parse().map_err(|_| syntax())?;
                if !(-100..=100).contains(&e) {
                    return Err(Error::TooLarge(s.to_owned()));
                }
                dec_exp += e;
            }
            _ => return Err(syntax()),
        }
        Ok(Quantity { mantissa, dec_exp, bin_exp })
    }

    /// The value as an i64 when it is exactly an integer in range (Go's `AsInt64`).
    pub fn as_i64_exact(&self) -> Option<i64> {
        self.to_i64().ok()
    }

    /// The value as an i64, or why it is not one: a fraction, or a whole number past the i64
    /// range. Go's `AsInt64` answers `false` for both; a caller that must explain a refusal needs
    /// to tell them apart (`99999999999999999999` is too big, not fractional).
    pub fn to_i64(&self) -> Result<i64, NotI64> {
        if self.mantissa == 0 {
            return Ok(0);
        }
        match self.ratio() {
            Some((num, den)) if num % den != 0 => Err(NotI64::Fraction),
            Some((num, den)) => i64::try_from(num / den).map_err(|_| NotI64::OutOfRange),
            None if self.below_one() => Err(NotI64::Fraction),
            // Past i128 either way: far beyond any i64.
            None => Err(NotI64::OutOfRange),
        }
    }

    /// The value rounded up to an integer (Go's `Value`), saturating at the i64 range.
    pub fn value_ceil(&self) -> i64 {
        if self.mantissa == 0 {
            return 0;
        }
        match self.ratio() {
            Some((num, den)) => {
                let q = num.div_euclid(den) + i128::from(num.rem_euclid(den) != 0);
                q.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
            }
            // Only the denominator is out of range: 0 < |value| < 1.
            None if self.below_one() => i64::from(self.mantissa > 0),
            None if self.mantissa < 0 => i64::MIN,
            None => i64::MAX,
        }
    }

    /// The numerator fits in i128 but the power-of-ten denominator does not (`1e-40`).
    fn below_one(&self) -> bool {
        self.dec_exp < 0
            && 1i128.checked_shl(self.bin_exp).and_then(|p| self.mantissa.checked_mul(p)).is_some()
            && 10i128.checked_pow(self.dec_exp.unsigned_abs()).is_none()
    }

    pub fn is_negative(&self) -> bool {
        self.mantissa < 0
    }

    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// `(numerator, denominator)` with denominator a power of ten, or None when out of i128 range.
    fn ratio(&self) -> Option<(i128, i128)> {
        let mut num = self.mantissa.checked_mul(1i128.checked_shl(self.bin_exp)?)?;
        let mut den: i128 = 1;
        if self.dec_exp >= 0 {
            num = num.checked_mul(10i128.checked_pow(self.dec_exp as u32)?)?;
        } else {
            den = 10i128.checked_pow(self.dec_exp.unsigned_abs())?;
        }
        Some((num, den))
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_i64_exact() {
            Some(v) => write!(f, "{v}"),
            None => write!(f, "{}e{}*2^{}", self.mantissa, self.dec_exp, self.bin_exp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_exact_and_fractions_are_not() {
        // Go's AsInt64: "1", "3000", "2k" are integers; "1.5" and "100m" are not.
        let cases = [
            ("1", Some(1)),
            ("3000", Some(3000)),
            ("2k", Some(2000)),
            ("16Gi", Some(17_179_869_184)),
            ("1Ki", Some(1024)),
            ("1.5", None),
            ("100m", None),
            ("1000m", Some(1)),
            ("2e3", Some(2000)),
            ("1.0", Some(1)),
            ("-3", Some(-3)),
            ("0", Some(0)),
            ("+7", Some(7)),
            ("0.5Ki", Some(512)),
        ];
        for (s, want) in cases {
            assert_eq!(Quantity::parse(s).unwrap().as_i64_exact(), want, "{s}");
        }
    }

    #[test]
    fn values_that_are_not_an_i64_say_whether_they_are_fractions_or_too_big() {
        let cases = [
            ("99999999999999999999", Err(NotI64::OutOfRange)),
            ("9223372036854775808", Err(NotI64::OutOfRange)),
            ("-9223372036854775809", Err(NotI64::OutOfRange)),
            ("1e30", Err(NotI64::OutOfRange)),
            ("1e100", Err(NotI64::OutOfRange)),
            ("8Ei", Err(NotI64::OutOfRange)),
            ("1.5", Err(NotI64::Fraction)),
            ("100m", Err(NotI64::Fraction)),
            ("-0.5", Err(NotI64::Fraction)),
            ("1e-40", Err(NotI64::Fraction)),
            ("9223372036854775807", Ok(i64::MAX)),
            ("-9223372036854775808", Ok(i64::MIN)),
            ("0e50", Ok(0)),
        ];
        for (s, want) in cases {
            assert_eq!(Quantity::parse(s).unwrap().to_i64(), want, "{s}");
        }
    }

    #[test]
    fn value_rounds_up_like_go() {
        assert_eq!(Quantity::parse("1.5").unwrap().value_ceil(), 2);
        assert_eq!(Quantity::parse("100m").unwrap().value_ceil(), 1);
        assert_eq!(Quantity::parse("-1.5").unwrap().value_ceil(), -1);
        assert_eq!(Quantity::parse("9E").unwrap().value_ceil(), 9_000_000_000_000_000_000);
        assert_eq!(Quantity::parse("10E").unwrap().value_ceil(), i64::MAX);
    }

    #[test]
    fn malformed_quantities_are_errors() {
        for s in ["", "abc", "1.2.3", "1Zi", "--1", ".", "1e", "1e999", "1 Gi"] {
            assert!(Quantity::parse(s).is_err(), "{s:?} should not parse");
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            if let Ok(q) = Quantity::parse(&s) {
                let _ = q.as_i64_exact();
                let _ = q.value_ceil();
            }
        }

        #[test]
        fn plain_integers_round_trip(n in proptest::num::i64::ANY) {
            proptest::prop_assert_eq!(Quantity::parse(&n.to_string()).unwrap().as_i64_exact(), Some(n));
        }
    }
}
