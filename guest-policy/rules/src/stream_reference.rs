//! The previous streaming pass, driven by serde_json's deserializer, kept
//! unchanged (test builds only) as the oracle of the differential tests of
//! the streaming pass (`stream/tests.rs`): same verdicts, same violations,
//! byte-identical output.
//!
//! Undeclared members are skipped by serde_json's `IgnoredAny`; the pruned
//! output is re-encoded by serde_json token by token. Nodes whose keywords
//! need the whole value are parsed into a `Value` and checked by the tree
//! walker of `validate.rs`.

use std::io::Write;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::number::Exact;
use crate::schema::{Node, Schema, types};
use crate::validate::{Path, check_tree, keeps_declared_only, prune_tree};
use crate::violation::{Violation, Violations};

struct State {
    /// Pruning writes the output here; validating writes nothing.
    out: Option<Vec<u8>>,
    errs: Violations,
}

impl State {
    fn write(&mut self, bytes: &[u8]) {
        if let Some(o) = &mut self.out {
            o.extend_from_slice(bytes);
        }
    }

    fn fail(&mut self, at: &Path<'_>, rule: &str, message: String) {
        self.errs.push_at(at.render(), rule, message);
    }
}

/// Validates (`prune == false`) or prunes-and-validates JSON text.
pub(crate) fn run(schema: &Schema, text: &str, prune: bool) -> Result<String, Vec<Violation>> {
    if text.len() > crate::MAX_JSON_BYTES {
        return crate::parse_json(text).map(|_| String::new());
    }
    let mut st = State {
        out: prune.then(|| Vec::with_capacity(text.len())),
        errs: Violations::new(),
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Seed {
        node: Some(&schema.root),
        st: &mut st,
        path: &Path::Root,
        prune,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    if let Err(e) = parsed {
        return Err(vec![Violation::new(
            "",
            "invalid-json",
            format!("not valid JSON: {e}"),
        )]);
    }
    let out = st
        .out
        .take()
        .map(|o| String::from_utf8(o).unwrap_or_default())
        .unwrap_or_default();
    st.errs.finish(out)
}

/// A branch that only lists required properties, all declared by `parent`:
/// decidable from the set of members present.
fn required_only(branch: &Node, parent: &Node) -> bool {
    branch.types == 0
        && branch.properties.is_empty()
        && !branch.closed
        && branch.items.is_none()
        && branch.min_items.is_none()
        && branch.max_items.is_none()
        && branch.min_length.is_none()
        && branch.max_length.is_none()
        && branch.minimum.is_none()
        && branch.maximum.is_none()
        && branch.enumeration.is_none()
        && branch.constant.is_none()
        && branch.pattern.is_none()
        && branch.any_of.is_empty()
        && branch.one_of.is_empty()
        && branch.not.is_none()
        && branch.required.iter().all(|r| parent.property(r).is_some())
}

/// As `Node::needs_whole_value`: combinators are decided here only on an
/// object's members, so a node with combinators that admits other values
/// needs the whole value too (this pass had skipped them there, as the
/// streaming pass did).
fn needs_value(node: &Node) -> bool {
    let combinators = !node.any_of.is_empty() || !node.one_of.is_empty() || node.not.is_some();
    node.enumeration.is_some()
        || node.constant.is_some()
        || (!node.required.is_empty() && node.properties.is_empty())
        || (combinators && node.types != types::OBJECT)
        || !node
            .any_of
            .iter()
            .chain(node.one_of.iter())
            .chain(node.not.as_deref())
            .all(|b| required_only(b, node))
}

struct Seed<'a, 's, 'p> {
    node: Option<&'a Node>,
    st: &'s mut State,
    path: &'p Path<'p>,
    prune: bool,
}

impl<'de> DeserializeSeed<'de> for Seed<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        let Some(node) = self.node else {
            // Unconstrained: keep as is.
            let v = Value::deserialize(d)?;
            if let Some(o) = &mut self.st.out {
                let _ = serde_json::to_writer(o, &v);
            }
            return Ok(());
        };
        if needs_value(node) {
            let mut v = Value::deserialize(d)?;
            if self.prune {
                prune_tree(node, &mut v);
            }
            check_tree(node, &v, self.path, &mut self.st.errs);
            if let Some(o) = &mut self.st.out {
                let _ = serde_json::to_writer(o, &v);
            }
            return Ok(());
        }
        d.deserialize_any(NodeVisitor {
            node,
            st: self.st,
            path: self.path,
            prune: self.prune,
        })
    }
}

struct NodeVisitor<'a, 's, 'p> {
    node: &'a Node,
    st: &'s mut State,
    path: &'p Path<'p>,
    prune: bool,
}

impl NodeVisitor<'_, '_, '_> {
    /// Type check; false (and a violation) when `actual` is not allowed.
    fn ty(&mut self, actual: u8) -> bool {
        let allowed = self.node.types;
        if allowed != 0 && allowed & actual == 0 {
            self.st.fail(
                self.path,
                "type-mismatch",
                format!("expected {}", crate::validate::type_names(allowed)),
            );
            return false;
        }
        true
    }

    fn number(&mut self, x: Exact, actual: u8) {
        if !self.ty(actual) {
            return;
        }
        if let Some(m) = self.node.minimum
            && x.compare(m).is_lt()
        {
            self.st.fail(
                self.path,
                "number-too-small",
                format!("must be at least {m}"),
            );
        }
        if let Some(m) = self.node.maximum
            && x.compare(m).is_gt()
        {
            self.st.fail(
                self.path,
                "number-too-large",
                format!("must be at most {m}"),
            );
        }
    }
}

impl<'de> Visitor<'de> for NodeVisitor<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(mut self, v: bool) -> Result<(), E> {
        if self.ty(types::BOOLEAN) {
            self.st.write(if v { b"true" } else { b"false" });
        }
        Ok(())
    }

    fn visit_unit<E>(mut self) -> Result<(), E> {
        if self.ty(types::NULL) {
            self.st.write(b"null");
        }
        Ok(())
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_i64<E>(mut self, v: i64) -> Result<(), E> {
        self.number(Exact::Int(v.into()), types::NUMBER | types::INTEGER);
        if let Some(o) = &mut self.st.out {
            let _ = write!(o, "{v}");
        }
        Ok(())
    }

    fn visit_u64<E>(mut self, v: u64) -> Result<(), E> {
        self.number(Exact::Int(v.into()), types::NUMBER | types::INTEGER);
        if let Some(o) = &mut self.st.out {
            let _ = write!(o, "{v}");
        }
        Ok(())
    }

    fn visit_f64<E>(mut self, v: f64) -> Result<(), E> {
        let actual = if v.fract() == 0.0 {
            types::NUMBER | types::INTEGER
        } else {
            types::NUMBER
        };
        self.number(Exact::Float(v), actual);
        if let Some(o) = &mut self.st.out {
            let _ = serde_json::to_writer(o, &v);
        }
        Ok(())
    }

    fn visit_str<E>(mut self, v: &str) -> Result<(), E> {
        if self.ty(types::STRING) {
            crate::validate::check_string_into(self.node, v, self.path, &mut self.st.errs);
            if let Some(o) = &mut self.st.out {
                let _ = serde_json::to_writer(o, v);
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        if !self.ty(types::ARRAY) {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        }
        let node = self.node;
        let max = node.max_items.unwrap_or(u64::MAX);
        self.st.write(b"[");
        let mut n: u64 = 0;
        loop {
            if n == max {
                // One past the bound: report, then skip the rest unparsed.
                if seq.next_element::<IgnoredAny>()?.is_none() {
                    break;
                }
                self.st.fail(
                    self.path,
                    "array-too-long",
                    format!("must hold at most {max} items"),
                );
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                break;
            }
            if n > 0 {
                // The comma is written before we know another item follows;
                // it is removed below if none does.
                self.st.write(b",");
            }
            let item_path = self.path.index(n as usize);
            let seed = Seed {
                node: node.items.as_deref(),
                st: &mut *self.st,
                path: &item_path,
                prune: self.prune,
            };
            if seq.next_element_seed(seed)?.is_none() {
                if n > 0
                    && let Some(o) = &mut self.st.out
                {
                    o.pop();
                }
                break;
            }
            n += 1;
        }
        self.st.write(b"]");
        if let Some(min) = node.min_items
            && n < min
        {
            self.st.fail(
                self.path,
                "array-too-short",
                format!("must hold at least {min} items"),
            );
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        if !self.ty(types::OBJECT) {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        }
        let node = self.node;
        let declared_only = self.prune && keeps_declared_only(node);
        let mut seen = vec![false; node.properties.len()];
        let mut first = true;
        self.st.write(b"{");
        while let Some(key) = map.next_key_seed(KeySeed {
            node,
            keep_name: !declared_only,
        })? {
            match key {
                Key::Declared(i) => {
                    let name = node.properties[i].0.as_str();
                    let at = self.path.key(name);
                    if seen[i] {
                        self.st.fail(
                            &at,
                            "duplicate-key",
                            format!("member \"{name}\" appears twice"),
                        );
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    seen[i] = true;
                    if !first {
                        self.st.write(b",");
                    }
                    first = false;
                    if let Some(o) = &mut self.st.out {
                        let _ = serde_json::to_writer(&mut *o, name);
                        o.push(b':');
                    }
                    let child = Some(&node.properties[i].1);
                    map.next_value_seed(Seed {
                        node: child,
                        st: &mut *self.st,
                        path: &at,
                        prune: self.prune,
                    })?;
                }
                Key::Undeclared(name) => {
                    if declared_only {
                        map.next_value::<IgnoredAny>()?;
                    } else if node.closed {
                        let name = name.unwrap_or_default();
                        self.st.fail(
                            &self.path.key(&name),
                            "property-not-allowed",
                            format!("property \"{name}\" is not declared"),
                        );
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        // An open object keeps what it does not declare.
                        let name = name.unwrap_or_default();
                        if !first {
                            self.st.write(b",");
                        }
                        first = false;
                        if let Some(o) = &mut self.st.out {
                            let _ = serde_json::to_writer(&mut *o, &name);
                            o.push(b':');
                        }
                        let at = self.path.key(&name);
                        map.next_value_seed(Seed {
                            node: None,
                            st: &mut *self.st,
                            path: &at,
                            prune: self.prune,
                        })?;
                    }
                }
            }
        }
        self.st.write(b"}");
        let present = |name: &str| node.lookup(name).is_some_and(|i| seen[i]);
        for name in &node.required {
            if !present(name) {
                self.st.fail(
                    &self.path.key(name),
                    "required-missing",
                    format!("required property \"{name}\" is missing"),
                );
            }
        }
        let branch_passes = |b: &Node| b.required.iter().all(|r| present(r));
        if !node.any_of.is_empty() && !node.any_of.iter().any(branch_passes) {
            self.st.fail(
                self.path,
                "any-of-no-match",
                "matches none of the anyOf alternatives".to_string(),
            );
        }
        if !node.one_of.is_empty() {
            let n = node.one_of.iter().filter(|b| branch_passes(b)).count();
            if n != 1 {
                self.st.fail(
                    self.path,
                    "one-of-not-exactly-one",
                    format!("must match exactly one oneOf alternative; matches {n}"),
                );
            }
        }
        if let Some(not) = &node.not
            && branch_passes(not)
        {
            self.st.fail(
                self.path,
                "not-matched",
                "matches a schema it must not match".to_string(),
            );
        }
        Ok(())
    }
}

enum Key {
    Declared(usize),
    /// The name is kept only when it may be reported or written.
    Undeclared(Option<String>),
}

struct KeySeed<'a> {
    node: &'a Node,
    keep_name: bool,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, k: &str) -> Result<Key, E> {
        Ok(match self.node.lookup(k) {
            Some(i) => Key::Declared(i),
            None => Key::Undeclared(self.keep_name.then(|| k.to_string())),
        })
    }
}
