//! The byte primitives of the crate's compact records (`packed`, a node actor's allocation
//! records): varints, length-prefixed strings and counted lists, and a reader that answers `None`
//! at the first byte that does not fit instead of panicking.

/// Appends fields to a buffer.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn byte(&mut self, b: u8) {
        self.0.push(b);
    }
    pub fn varint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.0.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.0.push(n as u8);
    }
    pub fn str(&mut self, s: &str) {
        self.varint(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
    /// 0 for none, else the length plus one.
    pub fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.byte(0),
            Some(s) => {
                self.varint(s.len() as u64 + 1);
                self.0.extend_from_slice(s.as_bytes());
            }
        }
    }
    pub fn list<T>(&mut self, items: &[T], mut item: impl FnMut(&mut Self, &T)) {
        self.varint(items.len() as u64);
        for t in items {
            item(self, t);
        }
    }
}

/// Reads what `Writer` wrote; `None` at the first byte that does not fit.
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }
    pub fn varint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(n);
            }
        }
        None
    }
    /// A varint that must fit a `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.varint()?).ok()
    }
    pub fn bytes(&mut self, len: u64) -> Option<&'a str> {
        let len = usize::try_from(len).ok()?;
        if len > self.0.len() {
            return None;
        }
        let (s, rest) = self.0.split_at(len);
        self.0 = rest;
        std::str::from_utf8(s).ok()
    }
    pub fn str(&mut self) -> Option<&'a str> {
        let len = self.varint()?;
        self.bytes(len)
    }
    /// `Some(None)` for an absent field; `None` when the buffer is broken.
    pub fn opt_str(&mut self) -> Option<Option<&'a str>> {
        match self.varint()? {
            0 => Some(None),
            n => self.bytes(n - 1).map(Some),
        }
    }
    pub fn count(&mut self) -> Option<usize> {
        let n = usize::try_from(self.varint()?).ok()?;
        // Every entry takes at least a byte: a count past the bytes left is a broken buffer.
        (n <= self.0.len()).then_some(n)
    }
    pub fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let n = self.count()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(item(self)?);
        }
        Some(out)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
