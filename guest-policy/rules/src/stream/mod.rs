//! Single-pass validation and pruning of JSON text.
//!
//! The hot path of the sandbox: arguments are validated and endpoint results
//! pruned while they are scanned, driven by the compiled schema, without
//! building a `serde_json::Value` tree. The scanner is purpose-built and
//! works on the bytes of the text:
//!
//! - undeclared members are skipped (syntax checked, nothing decoded or
//!   allocated); array items past `maxItems` likewise;
//! - member names are compared as they stand in the text; only a name that
//!   holds an escape is decoded (into a fresh string, rare);
//! - declared names are matched against a table derived from the schema at
//!   compile time (first eight bytes as a masked word, the property after
//!   the last one matched tried first, a bitmap of first bytes to reject
//!   undeclared names at once), and the common scalar values (strings
//!   without escapes within a byte bound, canonical numbers) are taken in
//!   the member loop itself, which keeps its cursor in locals;
//! - the pruned output is made of **spans of the input copied verbatim**
//!   wherever the token needs no change (punctuation, member names and
//!   strings without escapes, integers, numbers already spelled as
//!   serde_json writes them, `true`/`false`/`null`), consecutive spans
//!   being merged into a single copy; only what would change is re-encoded
//!   (strings with escapes, other numbers, whitespace dropped). The output
//!   is byte for byte what serde_json writes for the pruned value, as
//!   before (`stream_reference.rs` is the previous, serde_json-driven pass;
//!   the tests compare both on many documents).
//!
//! Inside the sandbox this code runs as WebAssembly, where every turn of a
//! loop also pays the deadline (epoch) check: short loops are written out
//! (`digits_end`, `skip_plain`).
//!
//! It accepts exactly the JSON serde_json accepts where the previous pass
//! used it: strict RFC 8259 syntax, escapes and surrogate pairs checked in
//! the strings it reads (skipped strings: syntax only, as serde_json's
//! `IgnoredAny`), numbers that do not fit an `f64` refused where a value is
//! read, at most 127 nested arrays and objects on the read path (none on
//! skipped values, as serde_json), nothing but whitespace after the value.
//! Duplicate declared members are refused (`duplicate-key`), not resolved.
//!
//! Nodes whose keywords need the whole value (`enum`, `const`, combinators
//! other than the `required`-only branches of contract 2.6 rule 8, `required`
//! on a node without properties), and values no schema constrains, are
//! parsed into a `Value` by serde_json and checked by the tree walker of
//! `validate.rs`, so both paths give the same verdicts; the tests of
//! `validate.rs` run through both.

use std::borrow::Cow;

use serde_json::Value;

use crate::schema::{Node, Scalar, Schema, types};
use crate::validate::{Path, check_string_into, check_tree, prune_tree, type_names};
use crate::violation::{Violation, Violations};

mod float;
mod output;
mod scan;
mod seen;
#[cfg(test)]
mod tests;

use float::{POW10, fast_float};
use output::{NO_RUN, Out};
use scan::{hex4, ident_end, plain_scalar, skip, skip_plain, string_end};
use seen::{Seen, SeenSet};

/// serde_json refuses its 128th nested array or object.
const NESTING_LIMIT: usize = 128;

/// The pass stopped on a syntax error; what and where is in `Pass::syntax`.
struct Stop;

type R<T> = Result<T, Stop>;

/// Validates (`prune == false`) or prunes-and-validates JSON text.
pub(crate) fn run(schema: &Schema, text: &str, prune: bool) -> Result<String, Vec<Violation>> {
    if text.len() > crate::MAX_JSON_BYTES {
        return crate::parse_json(text).map(|_| String::new());
    }
    let mut p = Pass {
        text,
        b: text.as_bytes(),
        pos: 0,
        depth: 0,
        out: prune.then(|| Out::with_capacity(text.len())),
        errs: Violations::new(),
        syntax: None,
        scratch: Vec::new(),
    };
    let parsed = p
        .value(Some(&schema.root), &Path::Root)
        .and_then(|()| p.end());
    if parsed.is_err() {
        return Err(vec![Violation::new(
            "",
            "invalid-json",
            format!("not valid JSON: {}", p.syntax_message()),
        )]);
    }
    let out = p.out.take().map(|o| o.finish(text)).unwrap_or_default();
    p.errs.finish(out)
}

/// A number as serde_json reads it.
enum Num {
    /// An integer that fits `u64`: written back as it stands.
    U(u64),
    /// A negative integer that fits `i64`: written back as it stands.
    I(i64),
    /// Anything else (fraction, exponent, `-0`, out of the integer range):
    /// converted by serde_json itself, so the `f64` is the one it reads.
    F,
}

struct Pass<'t> {
    text: &'t str,
    b: &'t [u8],
    pos: usize,
    /// Arrays and objects open on the read path (serde_json's nesting count).
    depth: usize,
    /// Pruning writes the output here; validating writes nothing.
    out: Option<Out>,
    errs: Violations,
    /// The syntax error that stopped the pass: byte offset and what.
    syntax: Option<(usize, Cow<'static, str>)>,
    scratch: Vec<u8>,
}

impl<'t> Pass<'t> {
    // ---- plumbing -------------------------------------------------------

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    #[cold]
    #[inline(never)]
    fn bad<T>(&mut self, at: usize, what: impl Into<Cow<'static, str>>) -> R<T> {
        self.syntax = Some((at, what.into()));
        Err(Stop)
    }

    fn syntax_message(&self) -> String {
        let Some((at, what)) = &self.syntax else {
            return "syntax error".to_string();
        };
        let before = &self.b[..(*at).min(self.b.len())];
        let line = before.iter().filter(|&&c| c == b'\n').count() + 1;
        let column = before.len()
            - before
                .iter()
                .rposition(|&c| c == b'\n')
                .map_or(0, |i| i + 1);
        format!("{what} at line {line} column {}", column + 1)
    }

    fn fail(&mut self, at: &Path<'_>, rule: &str, message: String) {
        self.errs.push_at(at.render(), rule, message);
    }

    /// Writes `text[a..b]` to the output, when pruning.
    #[inline]
    fn emit(&mut self, a: usize, b: usize) {
        if let Some(o) = &mut self.out {
            o.span(self.text, a, b);
        }
    }

    /// The end of the pending output run (`NO_RUN` when not pruning).
    #[inline(always)]
    fn run_end(&self) -> usize {
        self.out.as_ref().map_or(NO_RUN, |o| o.end)
    }

    /// Stores the end of the pending output run a loop kept in a local
    /// (it only ever extends the run `Out::span` started).
    #[inline(always)]
    fn sync_run(&mut self, end: usize) {
        if let Some(o) = &mut self.out {
            o.end = end;
        }
    }

    /// Writes `s` as a JSON string, escaped as serde_json does.
    fn emit_json_str(&mut self, s: &str) {
        if let Some(o) = &mut self.out {
            self.scratch.clear();
            let _ = serde_json::to_writer(&mut self.scratch, s);
            o.literal(
                self.text,
                std::str::from_utf8(&self.scratch).unwrap_or_default(),
            );
        }
    }

    fn end(&mut self) -> R<()> {
        self.ws();
        if self.pos < self.b.len() {
            return self.bad(self.pos, "trailing characters");
        }
        Ok(())
    }

    /// Opens an array or object on the read path.
    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth >= NESTING_LIMIT {
            return self.bad(self.pos, "recursion limit exceeded");
        }
        Ok(())
    }

    /// Type check; false (and a violation) when `actual` is not allowed.
    #[inline]
    fn ty(&mut self, node: &Node, path: &Path<'_>, actual: u8) -> bool {
        let allowed = node.types;
        if allowed != 0 && allowed & actual == 0 {
            self.mismatch(path, allowed);
            return false;
        }
        true
    }

    #[cold]
    #[inline(never)]
    fn mismatch(&mut self, path: &Path<'_>, allowed: u8) {
        self.fail(
            path,
            "type-mismatch",
            format!("expected {}", type_names(allowed)),
        );
    }

    // ---- tokens ---------------------------------------------------------

    /// `pos` is just past an opening quote: finds the closing one (checking
    /// escapes' syntax and refusing control characters, as serde_json) and
    /// moves past it. Returns its index and whether the string holds an
    /// escape.
    #[inline(always)]
    fn scan_string(&mut self) -> R<(usize, bool)> {
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
    fn decode(&mut self, a: usize, e: usize) -> R<String> {
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
    fn ident(&mut self, word: &[u8]) -> R<()> {
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
    fn scan_number(&mut self) -> R<Num> {
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
    fn colon(&mut self) -> R<usize> {
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
    fn skip_value(&mut self) -> R<usize> {
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
    fn skip_items_after(&mut self) -> R<usize> {
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
    fn skip_items(&mut self) -> R<()> {
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
    fn skip_members(&mut self) -> R<()> {
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

    // ---- the read path --------------------------------------------------

    /// A member name at `pos` (after whitespace): the name (borrowed from
    /// the text; decoded, hence owned, only if it holds an escape), the index
    /// of its opening quote and of its closing quote.
    #[inline]
    fn key(&mut self) -> R<(Cow<'t, str>, usize, usize)> {
        let text = self.text;
        let ks = self.pos;
        match self.peek() {
            Some(b'"') => self.pos += 1,
            Some(_) => return self.bad(ks, "key must be a string"),
            None => return self.bad(ks, "EOF while parsing an object"),
        }
        let (ke, escaped) = self.scan_string()?;
        let name = if escaped {
            Cow::Owned(self.decode(ks + 1, ke)?)
        } else {
            Cow::Borrowed(&text[ks + 1..ke])
        };
        Ok((name, ks, ke))
    }

    /// After a member's value: `,` (returns its index; `pos` is then at the
    /// next name) or `}` (returns None; `pos` past it).
    #[inline]
    fn after_member(&mut self) -> R<Option<usize>> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                let comma = self.pos;
                self.pos += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    return self.bad(self.pos, "trailing comma");
                }
                Ok(Some(comma))
            }
            Some(b'}') => {
                self.pos += 1;
                Ok(None)
            }
            Some(_) => self.bad(self.pos, "expected `,` or `}`"),
            None => self.bad(self.pos, "EOF while parsing an object"),
        }
    }

    /// One value. Inlined where it is called, so scalars are handled in the
    /// loop of the enclosing object or array; containers are calls.
    #[inline(always)]
    fn value(&mut self, node: Option<&Node>, path: &Path<'_>) -> R<()> {
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
                self.check_number(node, path, f, actual);
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
                let f = if negative {
                    -(sig as i64) as f64
                } else {
                    sig as f64
                };
                self.check_number(node, path, f, types::NUMBER | types::INTEGER);
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
    fn check_number(&mut self, node: &Node, path: &Path<'_>, f: f64, actual: u8) {
        if self.ty(node, path, actual) && (node.minimum.is_some() || node.maximum.is_some()) {
            self.bounds(node, path, f);
        }
    }

    #[inline(never)]
    fn bounds(&mut self, node: &Node, path: &Path<'_>, f: f64) {
        if let Some(m) = node.minimum
            && f < m
        {
            self.fail(path, "number-too-small", format!("must be at least {m}"));
        }
        if let Some(m) = node.maximum
            && f > m
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
        let (f, actual) = match num {
            Num::U(v) => (v as f64, types::NUMBER | types::INTEGER),
            Num::I(v) => (v as f64, types::NUMBER | types::INTEGER),
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
                    (f, types::NUMBER | types::INTEGER)
                } else {
                    (f, types::NUMBER)
                }
            }
        };
        self.check_number(node, path, f, actual);
        if verbatim {
            self.emit(start, end);
        } else {
            self.emit_f64(start, end, f);
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

    #[inline(never)]
    fn object(&mut self, node: &Node, path: &Path<'_>) -> R<()> {
        let open = self.pos;
        self.enter()?;
        self.pos += 1;
        if !self.ty(node, path, types::OBJECT) {
            self.skip_members()?;
            self.depth -= 1;
            return Ok(());
        }
        if node.properties.len() <= 64 {
            self.members::<u64>(node, path, open)
        } else {
            self.wide_members(node, path, open)
        }
    }

    /// [`Pass::members`] for objects of more than 64 properties (rare; out
    /// of line so that the common loop stays small).
    #[inline(never)]
    fn wide_members(&mut self, node: &Node, path: &Path<'_>, open: usize) -> R<()> {
        self.members::<Seen>(node, path, open)
    }

    /// The members of an object, `pos` just past its `{` (written at
    /// `open`), then the keywords that depend on which are present.
    #[inline(always)]
    fn members<S: SeenSet>(&mut self, node: &Node, path: &Path<'_>, open: usize) -> R<()> {
        let mut seen = S::for_properties(node.properties.len());
        let mut first = true;
        // Pruning drops what is not declared.
        let skip_undeclared = self.out.is_some()
            && (node.types & types::OBJECT != 0 || !node.properties.is_empty())
            && node.plain_names();
        self.emit(open, open + 1);
        self.ws();
        let close = if self.peek() == Some(b'}') {
            self.pos += 1;
            self.pos - 1
        } else {
            // The member loop keeps its cursor (`i`), the text (`b`) and the
            // end of the pending output run (`run`) in locals, writing them
            // back only around calls that use `self.pos` / `self.out`.
            let b = self.b;
            let mut i = self.pos;
            let mut run = self.out.as_ref().map_or(NO_RUN, |o| o.end);
            let mut comma = 0;
            let mut hint = 0;
            loop {
                // Fast path: a declared name, as it stands in the text,
                // seen for the first time.
                let ks = i;
                let fast = match b.get(ks) {
                    Some(b'"') => node.match_plain(&b[ks + 1..], hint),
                    _ => None,
                };
                match fast {
                    Some(k) if !seen.get(k) => {
                        seen.set(k);
                        hint = k + 1;
                        let key = node.name_key(k);
                        let ke = ks + 1 + key.len;
                        // Compact text: `,"name":value` is one span.
                        let from = if first { ks } else { comma };
                        first = false;
                        let compact =
                            b.get(ke + 1) == Some(&b':') && (from == ks || comma + 1 == ks);
                        let scalar = if compact {
                            plain_scalar(b, ke + 2, key.scalar)
                        } else {
                            None
                        };
                        if let Some(end) = scalar {
                            i = end;
                            if from == run {
                                run = end;
                            } else {
                                self.sync_run(run);
                                self.emit(from, end);
                                run = self.run_end();
                            }
                        } else {
                            let (pname, child) = (&node.properties[k].0, &node.properties[k].1);
                            self.sync_run(run);
                            if compact {
                                self.pos = ke + 2;
                                self.emit(from, ke + 2);
                            } else {
                                self.pos = ke + 1;
                                let colon = self.colon()?;
                                if from != ks {
                                    self.emit(comma, comma + 1);
                                }
                                self.emit(ks, ke + 1);
                                self.emit(colon, colon + 1);
                            }
                            self.value(Some(child), &path.key(pname))?;
                            i = self.pos;
                            run = self.run_end();
                        }
                    }
                    None if skip_undeclared && b.get(ks) == Some(&b'"') => {
                        // An undeclared name (every declared one is plain
                        // and none matched): skipped with its value, unless
                        // it holds an escape (then it may still be one).
                        let end = skip_plain(b, ks + 1);
                        let scalar = if b.get(end) == Some(&b'"') && b.get(end + 1) == Some(&b':') {
                            plain_scalar(b, end + 2, Scalar::ANY)
                        } else {
                            None
                        };
                        if let Some(e) = scalar {
                            i = e;
                        } else {
                            self.sync_run(run);
                            if b.get(end) == Some(&b'"') {
                                self.pos = end + 1;
                                self.colon()?;
                                self.skip_value()?;
                            } else {
                                self.pos = ks;
                                self.member(node, path, &mut seen, &mut first, comma, None)?;
                            }
                            i = self.pos;
                            run = self.run_end();
                        }
                    }
                    _ => {
                        self.sync_run(run);
                        self.pos = ks;
                        self.member(node, path, &mut seen, &mut first, comma, fast)?;
                        i = self.pos;
                        run = self.run_end();
                    }
                }
                // Compact text: `,"` or `}` right after the value.
                match b.get(i) {
                    Some(b',') if b.get(i + 1) == Some(&b'"') => {
                        comma = i;
                        i += 1;
                    }
                    Some(b'}') => {
                        self.sync_run(run);
                        self.pos = i + 1;
                        break i;
                    }
                    _ => {
                        self.sync_run(run);
                        self.pos = i;
                        let next = self.after_member()?;
                        i = self.pos;
                        run = self.run_end();
                        match next {
                            Some(c) => comma = c,
                            None => break i - 1,
                        }
                    }
                }
            }
        };
        self.emit(close, close + 1);
        self.depth -= 1;
        if !node.required_present(seen.low())
            || !node.any_of.is_empty()
            || !node.one_of.is_empty()
            || node.not.is_some()
        {
            self.members_present(node, path, &seen);
        }
        Ok(())
    }

    /// A member other than a first-seen declared plain name: a name with
    /// escapes, an undeclared name, a repeated one. `pos` is at its name;
    /// `fast` is the declared property the fast path matched, if any.
    #[cold]
    #[inline(never)]
    fn member<S: SeenSet>(
        &mut self,
        node: &Node,
        path: &Path<'_>,
        seen: &mut S,
        first: &mut bool,
        comma: usize,
        fast: Option<usize>,
    ) -> R<()> {
        let declared_only =
            self.out.is_some() && (node.types & types::OBJECT != 0 || !node.properties.is_empty());
        let (name, ks, ke) = self.key()?;
        let colon = self.colon()?;
        let escaped = matches!(name, Cow::Owned(_));
        let found = match fast {
            Some(i) => Some(i),
            None if escaped || !node.plain_names() => node.lookup(&name),
            None => None,
        };
        match found {
            Some(i) => {
                let (pname, child) = (&node.properties[i].0, &node.properties[i].1);
                let at = path.key(pname);
                if seen.set(i) {
                    self.fail(
                        &at,
                        "duplicate-key",
                        format!("member \"{pname}\" appears twice"),
                    );
                    self.skip_value()?;
                } else {
                    self.emit_member_head(first, comma, pname, escaped, (ks, ke), colon);
                    self.value(Some(child), &at)?;
                }
            }
            None => {
                if declared_only {
                    self.skip_value()?;
                } else if node.closed {
                    self.fail(
                        &path.key(&name),
                        "property-not-allowed",
                        format!("property \"{name}\" is not declared"),
                    );
                    self.skip_value()?;
                } else {
                    // An open object keeps what it does not declare.
                    self.emit_member_head(first, comma, &name, escaped, (ks, ke), colon);
                    let at = path.key(&name);
                    self.value(None, &at)?;
                }
            }
        }
        Ok(())
    }

    /// Writes a kept member's separator, name and colon: the name's own
    /// span when it had no escapes, re-encoded otherwise.
    fn emit_member_head(
        &mut self,
        first: &mut bool,
        comma: usize,
        name: &str,
        escaped: bool,
        (ks, ke): (usize, usize),
        colon: usize,
    ) {
        if !*first {
            self.emit(comma, comma + 1);
        }
        *first = false;
        if escaped {
            self.emit_json_str(name);
        } else {
            self.emit(ks, ke + 1);
        }
        self.emit(colon, colon + 1);
    }

    /// The keywords decided by which members an object has: `required`,
    /// and the `required`-only branches of `anyOf` / `oneOf` / `not`.
    #[inline(never)]
    fn members_present<S: SeenSet>(&mut self, node: &Node, path: &Path<'_>, seen: &S) {
        for (k, name) in node.required.iter().enumerate() {
            if !node.required_seen(k, |i| seen.get(i)) {
                self.fail(
                    &path.key(name),
                    "required-missing",
                    format!("required property \"{name}\" is missing"),
                );
            }
        }
        let present = |name: &str| node.lookup(name).is_some_and(|i| seen.get(i));
        let branch_passes = |b: &Node| b.required.iter().all(|r| present(r));
        if !node.any_of.is_empty() && !node.any_of.iter().any(branch_passes) {
            self.fail(
                path,
                "any-of-no-match",
                "matches none of the anyOf alternatives".to_string(),
            );
        }
        if !node.one_of.is_empty() {
            let n = node.one_of.iter().filter(|b| branch_passes(b)).count();
            if n != 1 {
                self.fail(
                    path,
                    "one-of-not-exactly-one",
                    format!("must match exactly one oneOf alternative; matches {n}"),
                );
            }
        }
        if let Some(not) = &node.not
            && branch_passes(not)
        {
            self.fail(
                path,
                "not-matched",
                "matches a schema it must not match".to_string(),
            );
        }
    }
}
