//! The tokens of the streaming pass as the pass reads them (strings,
//! literals, numbers, the colon) and the values, items and members it
//! skips: the pass's side of the byte scanners of `scan.rs`.

use super::scan::{hex4, ident_end, skip, string_end};
use super::{Pass, R};

/// A number as serde_json reads it.
pub(super) enum Num {
    /// An integer that fits `u64`: written back as it stands.
    U(u64),
    /// A negative integer that fits `i64`: written back as it stands.
    I(i64),
    /// Anything else (fraction, exponent, `-0`, out of the integer range):
    /// converted by serde_json itself, so the `f64` is the one it reads.
    F,
}

impl<'t> Pass<'t> {
    /// `pos` is just past an opening quote: finds the closing one (checking
    /// escapes' syntax and refusing control characters, as serde_json) and
    /// moves past it. Returns its index and whether the string holds an
    /// escape.
    #[inline(always)]
    pub(super) fn scan_string(&mut self) -> R<(usize, bool)> {
        match string_end(self.b, self.pos) {
            Ok((end, escaped)) => {
                self.pos = end + 1;
                Ok((end, escaped))
            }
            Err((at, what)) => self.bad(at, what),
        }
    }

    /// Decodes the string `text[a..e]` (between its quotes, escape syntax
    /// already checked), refusing unpaired surrogates as serde_json does
    /// when it reads a string.
    #[cold]
    pub(super) fn decode(&mut self, a: usize, e: usize) -> R<String> {
        let raw = &self.b[a..e];
        let mut s = String::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            let run = raw[i..]
                .iter()
                .position(|&c| c == b'\\')
                .unwrap_or(raw.len() - i);
            s.push_str(&self.text[a + i..a + i + run]);
            i += run;
            if i == raw.len() {
                break;
            }
            let c = raw[i + 1];
            i += 2;
            let ch = match c {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\x08',
                b'f' => '\x0c',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                _ => {
                    // b'u': four hex digits follow (checked by scan_string).
                    let n = hex4(&raw[i..i + 4]);
                    i += 4;
                    let code = if (0xDC00..=0xDFFF).contains(&n) {
                        return self.bad(a + i, "lone leading surrogate in hex escape");
                    } else if (0xD800..=0xDBFF).contains(&n) {
                        if raw.get(i..i + 2) != Some(b"\\u") {
                            return self.bad(a + i, "unexpected end of hex escape");
                        }
                        let n2 = hex4(&raw[i + 2..i + 6]);
                        i += 6;
                        if !(0xDC00..=0xDFFF).contains(&n2) {
                            return self.bad(a + i, "lone leading surrogate in hex escape");
                        }
                        0x1_0000 + (((n - 0xD800) << 10) | (n2 - 0xDC00))
                    } else {
                        n
                    };
                    match char::from_u32(code) {
                        Some(ch) => ch,
                        None => return self.bad(a + i, "invalid escape"),
                    }
                }
            };
            s.push(ch);
        }
        Ok(s)
    }

    /// `true`, `false` or `null`, its first byte at `pos`.
    #[inline(always)]
    pub(super) fn ident(&mut self, word: &[u8]) -> R<()> {
        match ident_end(self.b, self.pos, word) {
            Ok(end) => {
                self.pos = end;
                Ok(())
            }
            Err((at, what)) => self.bad(at, what),
        }
    }

    /// A number at `pos`: checks its syntax (serde_json's grammar) and moves
    /// past it.
    #[inline]
    pub(super) fn scan_number(&mut self) -> R<Num> {
        let b = self.b;
        let mut i = self.pos;
        let negative = b[i] == b'-';
        if negative {
            i += 1;
        }
        let mut sig: u64 = 0;
        let mut exact = true;
        match b.get(i) {
            Some(b'0') => {
                i += 1;
                if let Some(b'0'..=b'9') = b.get(i) {
                    return self.bad(i, "invalid number");
                }
            }
            Some(&c @ b'1'..=b'9') => {
                sig = u64::from(c - b'0');
                let first = i;
                i += 1;
                while let Some(&c @ b'0'..=b'9') = b.get(i) {
                    // Up to 19 digits cannot overflow a u64.
                    sig = sig.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
                    i += 1;
                }
                if i - first > 19 {
                    // Past 19 digits it may not fit (serde_json then reads
                    // a float).
                    match b[first..i].iter().try_fold(0u64, |v, &c| {
                        v.checked_mul(10)?.checked_add(u64::from(c - b'0'))
                    }) {
                        Some(v) => sig = v,
                        None => exact = false,
                    }
                }
            }
            Some(_) => return self.bad(i, "invalid number"),
            None => return self.bad(i, "EOF while parsing a value"),
        }
        if let Some(b'.') = b.get(i) {
            exact = false;
            i += 1;
            let digits = i;
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
            if i == digits {
                return self.bad(i, "invalid number");
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            exact = false;
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let digits = i;
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
            if i == digits {
                return self.bad(i, "invalid number");
            }
        }
        self.pos = i;
        Ok(if !exact {
            Num::F
        } else if !negative {
            Num::U(sig)
        } else {
            // serde_json: `-0` and magnitudes past i64 are read as floats.
            let n = (sig as i64).wrapping_neg();
            if n >= 0 { Num::F } else { Num::I(n) }
        })
    }

    // ---- skipping -------------------------------------------------------

    /// After a member name: whitespace and the colon; returns its index.
    #[inline]
    pub(super) fn colon(&mut self) -> R<usize> {
        self.ws();
        match self.peek() {
            Some(b':') => {
                self.pos += 1;
                Ok(self.pos - 1)
            }
            Some(_) => self.bad(self.pos, "expected `:`"),
            None => self.bad(self.pos, "EOF while parsing an object"),
        }
    }

    /// Skips one value as serde_json's `IgnoredAny` does: syntax checked,
    /// escapes not decoded, numbers not converted, no nesting limit.
    /// Returns the deepest nesting of arrays and objects in it.
    pub(super) fn skip_value(&mut self) -> R<usize> {
        match skip(self.b, self.pos) {
            Ok((end, deepest)) => {
                self.pos = end;
                Ok(deepest)
            }
            Err((at, what)) => self.bad(at, what),
        }
    }

    /// After an item of an array being skipped: the rest of it, up to and
    /// including `]`; returns the index of `]`.
    pub(super) fn skip_items_after(&mut self) -> R<usize> {
        loop {
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                    if self.peek() == Some(b']') {
                        return self.bad(self.pos, "trailing comma");
                    }
                    self.skip_value()?;
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(self.pos - 1);
                }
                Some(_) => return self.bad(self.pos, "expected `,` or `]`"),
                None => return self.bad(self.pos, "EOF while parsing a list"),
            }
        }
    }

    /// The items of an array of the wrong type (`pos` past `[`).
    pub(super) fn skip_items(&mut self) -> R<()> {
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        self.skip_value()?;
        self.skip_items_after().map(|_| ())
    }

    /// The members of an object of the wrong type (`pos` past `{`). Their
    /// names are read (and checked) as serde_json reads map keys.
    pub(super) fn skip_members(&mut self) -> R<()> {
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let (_, _, _) = self.key()?;
            self.colon()?;
            self.skip_value()?;
            if self.after_member()?.is_none() {
                return Ok(());
            }
        }
    }
}
