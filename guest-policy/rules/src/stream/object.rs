//! Objects on the read path: member names, the member loop (with its fast
//! paths for declared plain names and compact text), and the keywords
//! decided by which members are present.

use std::borrow::Cow;

use super::output::NO_RUN;
use super::scan::{plain_scalar, skip_plain};
use super::seen::{Seen, SeenSet};
use super::{Pass, R};
use crate::schema::{Node, Scalar, types};
use crate::validate::{Path, keeps_declared_only};

impl<'t> Pass<'t> {
    /// A member name at `pos` (after whitespace): the name (borrowed from
    /// the text; decoded, hence owned, only if it holds an escape), the index
    /// of its opening quote and of its closing quote.
    #[inline]
    pub(super) fn key(&mut self) -> R<(Cow<'t, str>, usize, usize)> {
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
    pub(super) fn after_member(&mut self) -> R<Option<usize>> {
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

    #[inline(never)]
    pub(super) fn object(&mut self, node: &Node, path: &Path<'_>) -> R<()> {
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
        let skip_undeclared = self.out.is_some() && keeps_declared_only(node) && node.plain_names();
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
        let declared_only = self.out.is_some() && keeps_declared_only(node);
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
