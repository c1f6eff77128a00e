//! One value on the read path: the dispatch on its first byte, the
//! fallback to a parsed `Value` for nodes checked as a whole, scalars
//! (with their inline fast paths) and arrays. Objects are in `object.rs`.

use std::borrow::Cow;

use serde_json::Value;

use super::float::{POW10, fast_float};
use super::scan::skip_plain;
use super::tokens::Num;
use super::{NESTING_LIMIT, Pass, R};
use crate::number::Exact;
use crate::schema::{Node, types};
use crate::validate::{Path, check_string_into, check_tree, prune_tree};

impl<'t> Pass<'t> {
    /// One value. Inlined where it is called, so scalars are handled in the
    /// loop of the enclosing object or array; containers are calls.
    #[inline(always)]
    pub(super) fn value(&mut self, node: Option<&Node>, path: &Path<'_>) -> R<()> {
        self.ws();
        let node = match node {
            Some(n) if !n.whole() => n,
            other => return self.tree(other, path),
        };
        match self.peek() {
            Some(b'{') => self.object(node, path),
            Some(b'[') => self.array(node, path),
            Some(b'"') => self.string(node, path),
            Some(b't') => self.literal(node, path, b"true", types::BOOLEAN),
            Some(b'f') => self.literal(node, path, b"false", types::BOOLEAN),
            Some(b'n') => self.literal(node, path, b"null", types::NULL),
            Some(b'-' | b'0'..=b'9') => self.number(node, path),
            Some(_) => self.bad(self.pos, "expected value"),
            None => self.bad(self.pos, "EOF while parsing a value"),
        }
    }

    /// A value checked as a whole: parsed into a `Value` by serde_json.
    #[inline(never)]
    fn tree(&mut self, node: Option<&Node>, path: &Path<'_>) -> R<()> {
        let start = self.pos;
        let nesting = self.skip_value()?;
        if self.depth + nesting >= NESTING_LIMIT {
            return self.bad(start, "recursion limit exceeded");
        }
        let mut v: Value = match serde_json::from_str(&self.text[start..self.pos]) {
            Ok(v) => v,
            Err(e) => {
                let what = e.to_string();
                let what = match what.rsplit_once(" at line ") {
                    Some((w, _)) => w.to_string(),
                    None => what,
                };
                return self.bad(start, what);
            }
        };
        if let Some(node) = node {
            if self.out.is_some() {
                prune_tree(node, &mut v);
            }
            check_tree(node, &v, path, &mut self.errs);
        }
        if let Some(o) = &mut self.out {
            o.literal(self.text, &v.to_string());
        }
        Ok(())
    }

    fn literal(&mut self, node: &Node, path: &Path<'_>, word: &[u8], actual: u8) -> R<()> {
        let start = self.pos;
        self.ident(word)?;
        if self.ty(node, path, actual) {
            self.emit(start, self.pos);
        }
        Ok(())
    }

    /// A number. Inline fast paths: an integer of at most 18 digits, and
    /// `-?D.F` with at most 15 digits in all (exactly one division by a
    /// power of ten, as serde_json computes it; see [`fast_float`]); anything
    /// else is `number_slow`.
    #[inline(always)]
    fn number(&mut self, node: &Node, path: &Path<'_>) -> R<()> {
        let b = self.b;
        let start = self.pos;
        let negative = b[start] == b'-';
        let first = start + usize::from(negative);
        let mut i = first;
        let mut sig: u64 = 0;
        while let Some(&c) = b.get(i) {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            sig = sig.wrapping_mul(10).wrapping_add(u64::from(d));
            i += 1;
        }
        let digits = i - first;
        if digits == 0 || digits > 18 || (digits > 1 && b[first] == b'0') {
            return self.number_slow(node, path);
        }
        match b.get(i) {
            Some(b'.') => {
                let frac_start = i + 1;
                let mut j = frac_start;
                while let Some(&c) = b.get(j) {
                    let d = c.wrapping_sub(b'0');
                    if d > 9 {
                        break;
                    }
                    sig = sig.wrapping_mul(10).wrapping_add(u64::from(d));
                    j += 1;
                }
                let frac = j - frac_start;
                if frac == 0 || digits + frac > 15 || matches!(b.get(j), Some(b'e' | b'E')) {
                    return self.number_slow(node, path);
                }
                self.pos = j;
                let mut f = sig as f64 / POW10[frac];
                if negative {
                    f = -f;
                }
                let actual = if f.fract() == 0.0 {
                    types::NUMBER | types::INTEGER
                } else {
                    types::NUMBER
                };
                self.check_number(node, path, Exact::Float(f), actual);
                // Spelled as serde_json writes this f64 (see fast_float)?
                let canonical = if frac == 1 && b[frac_start] == b'0' {
                    true
                } else if b[j - 1] == b'0' {
                    false
                } else if b[first] == b'0' {
                    b[frac_start..j].iter().take_while(|&&c| c == b'0').count() <= 4
                } else {
                    true
                };
                if canonical {
                    self.emit(start, j);
                } else {
                    self.emit_f64(start, j, f);
                }
                Ok(())
            }
            Some(b'e' | b'E') => self.number_slow(node, path),
            _ if negative && sig == 0 => self.number_slow(node, path),
            _ => {
                self.pos = i;
                // serde_json reads it as a u64 or i64 and writes it back so.
                let n = if negative {
                    -i128::from(sig)
                } else {
                    i128::from(sig)
                };
                self.check_number(node, path, Exact::Int(n), types::NUMBER | types::INTEGER);
                self.emit(start, i);
                Ok(())
            }
        }
    }

    /// Writes `f` (the number `text[start..end]`) as serde_json writes an
    /// f64.
    #[inline(never)]
    fn emit_f64(&mut self, start: usize, end: usize, f: f64) {
        if let Some(o) = &mut self.out {
            self.scratch.clear();
            let _ = serde_json::to_writer(&mut self.scratch, &f);
            if self.scratch == self.b[start..end] {
                o.span(self.text, start, end);
            } else {
                o.literal(
                    self.text,
                    std::str::from_utf8(&self.scratch).unwrap_or_default(),
                );
            }
        }
    }

    #[inline(always)]
    fn check_number(&mut self, node: &Node, path: &Path<'_>, x: Exact, actual: u8) {
        if self.ty(node, path, actual) && (node.minimum.is_some() || node.maximum.is_some()) {
            self.bounds(node, path, x);
        }
    }

    /// `minimum` / `maximum`, compared exactly (integers as integers).
    #[inline(never)]
    fn bounds(&mut self, node: &Node, path: &Path<'_>, x: Exact) {
        if let Some(m) = node.minimum
            && x.compare(m).is_lt()
        {
            self.fail(path, "number-too-small", format!("must be at least {m}"));
        }
        if let Some(m) = node.maximum
            && x.compare(m).is_gt()
        {
            self.fail(path, "number-too-large", format!("must be at most {m}"));
        }
    }

    #[inline(never)]
    fn number_slow(&mut self, node: &Node, path: &Path<'_>) -> R<()> {
        let start = self.pos;
        let num = self.scan_number()?;
        let end = self.pos;
        // Integers are written back as they stand (serde_json writes a u64
        // or i64 exactly so); other numbers only when the text is already
        // how serde_json writes their f64.
        let mut verbatim = !matches!(num, Num::F);
        let (x, actual) = match num {
            Num::U(v) => (Exact::Int(v.into()), types::NUMBER | types::INTEGER),
            Num::I(v) => (Exact::Int(v.into()), types::NUMBER | types::INTEGER),
            Num::F => {
                let f = match fast_float(&self.b[start..end]) {
                    Some((f, canonical)) => {
                        verbatim = canonical;
                        f
                    }
                    None => match serde_json::from_str::<f64>(&self.text[start..end]) {
                        Ok(f) => f,
                        Err(_) => return self.bad(start, "number out of range"),
                    },
                };
                if f.fract() == 0.0 {
                    (Exact::Float(f), types::NUMBER | types::INTEGER)
                } else {
                    (Exact::Float(f), types::NUMBER)
                }
            }
        };
        self.check_number(node, path, x, actual);
        match x {
            Exact::Float(f) if !verbatim => self.emit_f64(start, end, f),
            _ => self.emit(start, end),
        }
        Ok(())
    }

    /// A string. Inline fast path: no escape, within a `maxLength` counted
    /// in bytes, no other keyword; anything else is `string_slow`.
    #[inline(always)]
    fn string(&mut self, node: &Node, path: &Path<'_>) -> R<()> {
        let start = self.pos;
        let end = skip_plain(self.b, start + 1);
        if self.b.get(end) != Some(&b'"') {
            return self.string_slow(node, path);
        }
        if node.types != 0 && node.types & types::STRING == 0 {
            self.pos = end + 1;
            self.mismatch(path, node.types);
            return Ok(());
        }
        let simple = node.pattern.is_none()
            && node.min_length.is_none()
            && node
                .max_length
                .is_none_or(|m| (end - start - 1) as u64 <= m);
        if !simple {
            return self.string_slow(node, path);
        }
        self.pos = end + 1;
        self.emit(start, end + 1);
        Ok(())
    }

    #[inline(never)]
    fn string_slow(&mut self, node: &Node, path: &Path<'_>) -> R<()> {
        let text = self.text;
        let start = self.pos;
        self.pos += 1;
        let (end, escaped) = self.scan_string()?;
        let s: Cow<'t, str> = if escaped {
            Cow::Owned(self.decode(start + 1, end)?)
        } else {
            Cow::Borrowed(&text[start + 1..end])
        };
        if self.ty(node, path, types::STRING) {
            check_string_into(node, &s, path, &mut self.errs);
            if escaped {
                self.emit_json_str(&s);
            } else {
                self.emit(start, end + 1);
            }
        }
        Ok(())
    }

    #[inline(never)]
    fn array(&mut self, node: &Node, path: &Path<'_>) -> R<()> {
        let open = self.pos;
        self.enter()?;
        self.pos += 1;
        if !self.ty(node, path, types::ARRAY) {
            self.skip_items()?;
            self.depth -= 1;
            return Ok(());
        }
        let max = node.max_items.unwrap_or(u64::MAX);
        let items = node.items.as_deref();
        self.emit(open, open + 1);
        let mut n: u64 = 0;
        let mut comma = 0;
        self.ws();
        let close = if self.peek() == Some(b']') {
            self.pos += 1;
            self.pos - 1
        } else {
            loop {
                if n == max {
                    // One past the bound: report, then skip the rest.
                    self.fail(
                        path,
                        "array-too-long",
                        format!("must hold at most {max} items"),
                    );
                    self.skip_value()?;
                    break self.skip_items_after()?;
                }
                if n > 0 {
                    self.emit(comma, comma + 1);
                }
                let at = path.index(n as usize);
                self.value(items, &at)?;
                n += 1;
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        comma = self.pos;
                        self.pos += 1;
                        self.ws();
                        if self.peek() == Some(b']') {
                            return self.bad(self.pos, "trailing comma");
                        }
                    }
                    Some(b']') => {
                        self.pos += 1;
                        break self.pos - 1;
                    }
                    Some(_) => return self.bad(self.pos, "expected `,` or `]`"),
                    None => return self.bad(self.pos, "EOF while parsing a list"),
                }
            }
        };
        self.emit(close, close + 1);
        self.depth -= 1;
        if let Some(min) = node.min_items
            && n < min
        {
            self.fail(
                path,
                "array-too-short",
                format!("must hold at least {min} items"),
            );
        }
        Ok(())
    }
}
