//! The NUMA refit's pure pieces: the `hami.io/numa-alignment` pod annotation, the text forms
//! HAMi's Go code gives its messages (`%q`, `%v` of a string list, `json.Marshal` of a string),
//! and the positional rewrite of one container's entry in an allocation annotation. No I/O.

use std::fmt::Write as _;

use super::annotations as keys;
use super::device::ContainerDevice;
use super::pod::Annotations;

/// How a pod wants the device plugin to reconcile kubelet's NUMA-aligned device choice with the
/// devices the scheduler annotated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumaAlignment {
    /// Ask the scheduler to refit; keep kubelet's own choice when that fails.
    BestEffort,
    /// Fail the allocation when the refit cannot reconcile them.
    Strict,
}

/// The annotation's value is neither `best-effort` nor `strict` (an explicit empty value
/// included). The text is HAMi's, quoting the raw value as Go's `%q` does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {key} annotation {quoted}: expected \"best-effort\" or \"strict\"", key = keys::NUMA_ALIGNMENT, quoted = go_quote(.raw))]
pub struct InvalidNumaAlignment {
    pub raw: String,
}

/// Parses a value of `hami.io/numa-alignment`: trimmed and case-insensitive, as HAMi reads it.
pub fn parse_numa_alignment(raw: &str) -> Result<NumaAlignment, InvalidNumaAlignment> {
    match raw.trim().to_lowercase().as_str() {
        "best-effort" => Ok(NumaAlignment::BestEffort),
        "strict" => Ok(NumaAlignment::Strict),
        _ => Err(InvalidNumaAlignment { raw: raw.to_owned() }),
    }
}

/// The pod's alignment mode: `None` when the annotation is absent. Present, it must parse: an
/// explicitly empty value is an error, as in HAMi.
pub fn numa_alignment(annotations: &Annotations) -> Result<Option<NumaAlignment>, InvalidNumaAlignment> {
    annotations.get(keys::NUMA_ALIGNMENT).map(|v| parse_numa_alignment(v)).transpose()
}

/// Whether Go's `strconv.IsPrint` holds, closely enough for the messages quoted here: control
/// characters, and the Unicode spaces other than U+0020 that Go does not print, are escaped.
fn go_printable(c: char) -> bool {
    !(c.is_control() || (c.is_whitespace() && c != ' ') || matches!(c, '\u{ad}' | '\u{feff}'))
}

/// A string as Go's `%q` (`strconv.Quote`) writes it.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if go_printable(c) => out.push(c),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) <= 0xffff => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// A list of strings as Go's `%v` writes a `[]string`: `[a b]`.
pub fn go_list<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::from("[");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(s.as_ref());
    }
    out.push(']');
    out
}

/// Appends `s` as a JSON string the way Go's `json.Marshal` writes it: `<`, `>` and `&` escaped
/// as `\u003c`, `\u003e`, `\u0026`, U+2028 and U+2029 escaped, control characters as `\n`,
/// `\r`, `\t`, `\b`, `\f` or `\u00XX`.
pub fn push_go_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// One container's devices as HAMi's `EncodeContainerDevices` writes them: `uuid,type,mem,cores:`
/// per device.
pub fn encode_container_devices(devs: &[ContainerDevice]) -> String {
    let mut s = String::new();
    for d in devs {
        let _ = write!(s, "{},{},{},{}:", d.uuid, d.ty, d.usedmem.get(), d.usedcores);
    }
    s
}

/// The container entry at `index` of an allocation annotation is missing or empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("annotation has no container entry at index {index}")]
pub struct NoEntry {
    pub index: usize,
}

/// Replaces the `;`-separated entry `index` of an allocation annotation with `entry`, leaving
/// every other byte as it was (consumed blank entries, the trailing `;`, other containers): the
/// device plugin reads the entries by position, so nothing else may move.
pub fn replace_entry(raw: &str, index: usize, entry: &str) -> Result<String, NoEntry> {
    let mut parts: Vec<&str> = raw.split(';').collect();
    match parts.get_mut(index) {
        Some(p) if !p.is_empty() => *p = entry,
        _ => return Err(NoEntry { index }),
    }
    Ok(parts.join(";"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numa_alignment_reads_as_hami_reads_it() {
        // HAMi's GetNumaAlignmentModeByPod table: trimmed, case-insensitive, explicit empty refused.
        type Want = Result<Option<NumaAlignment>, ()>;
        let rows: [(Option<&str>, Want); 10] = [
            (None, Ok(None)),
            (Some("best-effort"), Ok(Some(NumaAlignment::BestEffort))),
            (Some(" best-effort "), Ok(Some(NumaAlignment::BestEffort))),
            (Some("BEST-EFFORT"), Ok(Some(NumaAlignment::BestEffort))),
            (Some("strict"), Ok(Some(NumaAlignment::Strict))),
            (Some("Strict"), Ok(Some(NumaAlignment::Strict))),
            (Some(""), Err(())),
            (Some("required"), Err(())),
            (Some("true"), Err(())),
            (Some("best effort"), Err(())),
        ];
        for (value, want) in rows {
            let mut a = Annotations::default();
            a.insert("other".into(), "value".into());
            if let Some(v) = value {
                a.insert(keys::NUMA_ALIGNMENT.into(), v.into());
            }
            assert_eq!(numa_alignment(&a).map_err(|_| ()), want, "{value:?}");
        }
    }

    #[test]
    fn invalid_numa_alignment_quotes_the_raw_value_as_go_does() {
        let text = |raw: &str| parse_numa_alignment(raw).unwrap_err().to_string();
        assert_eq!(
            text("bogus"),
            r#"invalid hami.io/numa-alignment annotation "bogus": expected "best-effort" or "strict""#
        );
        assert_eq!(text(""), r#"invalid hami.io/numa-alignment annotation "": expected "best-effort" or "strict""#);
        assert_eq!(
            text(" best effort "),
            r#"invalid hami.io/numa-alignment annotation " best effort ": expected "best-effort" or "strict""#
        );
        assert!(text("a\tb").contains(r#""a\tb""#));
        assert!(text("\u{1}").contains(r#""\x01""#));
        assert!(text("\"q\"").contains(r#""\"q\"""#));
        assert!(text("é\u{85}").contains(r#""é\u0085""#));
    }

    #[test]
    fn go_json_strings_escape_html_and_controls() {
        let mut s = String::new();
        push_go_json_string(&mut s, "a<b>&\"c\"\\\n\u{1}\u{8}\u{2028}é");
        assert_eq!(s, r#""a\u003cb\u003e\u0026\"c\"\\\n\u0001\b\u2028é""#);
    }

    #[test]
    fn go_lists_print_as_v_does() {
        assert_eq!(go_list(&["GPU-a", "GPU-b"]), "[GPU-a GPU-b]");
        assert_eq!(go_list::<&str>(&[]), "[]");
    }

    #[test]
    fn replacing_an_entry_keeps_every_other_byte() {
        assert_eq!(
            replace_entry("GPU-a,NVIDIA,20000,30:;", 0, "GPU-b,NVIDIA,20000,30:").unwrap(),
            "GPU-b,NVIDIA,20000,30:;"
        );
        assert_eq!(
            replace_entry(";GPU-a,NVIDIA,20000,30:;", 1, "GPU-b,NVIDIA,20000,30:").unwrap(),
            ";GPU-b,NVIDIA,20000,30:;"
        );
        assert_eq!(replace_entry(";GPU-a,NVIDIA,1,2:;", 0, "x"), Err(NoEntry { index: 0 }));
        assert_eq!(replace_entry("GPU-a,NVIDIA,1,2:;", 2, "x"), Err(NoEntry { index: 2 }));
        assert_eq!(NoEntry { index: 2 }.to_string(), "annotation has no container entry at index 2");
    }
}
