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
//! other than the `required`-only branches of contract 2.6 rule 8, any
//! combinator on a node whose type admits more than objects, `required` on
//! a node without properties), and values no schema constrains, are
//! parsed into a `Value` by serde_json and checked by the tree walker of
//! `validate.rs`, so both paths give the same verdicts; the tests of
//! `validate.rs` run through both. That walker is all this module takes from
//! `validate.rs`, which does not depend on it.
//!
//! By role: this file holds the entry points ([`Schema::validate_text`],
//! [`Schema::prune_text`]), the pass's state and its plumbing; the pass reads
//! tokens and skips values in `tokens.rs`, one value (the dispatch, the tree
//! fallback, scalars, arrays) in `value.rs`, objects (member names, the
//! member loop, the keywords decided by which members are present) in
//! `object.rs`. Below them: the byte scanners (`scan.rs`), exact float
//! reading (`float.rs`), the output buffer (`output.rs`), the sets of seen
//! properties (`seen.rs`). The differential tests are in `tests.rs`.

use std::borrow::Cow;

use crate::schema::{Node, Schema};
use crate::validate::{Path, type_names};
use crate::violation::{Violation, Violations};

mod float;
mod object;
mod output;
mod scan;
mod seen;
#[cfg(test)]
mod tests;
mod tokens;
mod value;

use output::{NO_RUN, Out};

/// serde_json refuses its 128th nested array or object.
const NESTING_LIMIT: usize = 128;

/// The pass stopped on a syntax error; what and where is in `Pass::syntax`.
struct Stop;

type R<T> = Result<T, Stop>;

impl Schema {
    /// Validates JSON text in one pass.
    pub fn validate_text(&self, text: &str) -> Result<(), Vec<Violation>> {
        run(self, text, false).map(|_| ())
    }

    /// Prunes and validates JSON text in one pass; returns compact JSON
    /// text.
    pub fn prune_text(&self, text: &str) -> Result<String, Vec<Violation>> {
        run(self, text, true)
    }
}

/// Validates (`prune == false`) or prunes-and-validates JSON text.
fn run(schema: &Schema, text: &str, prune: bool) -> Result<String, Vec<Violation>> {
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
}
