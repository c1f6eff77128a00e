//! Compiled schemas kept by key, as one guest instance keeps them.
//!
//! The host passes `(key, text)` on every call (WIT `schema-ref`). An entry is
//! reused only when the text is byte-for-byte the text it was compiled from,
//! so a host that reuses a key for a new schema gets a recompile, never a
//! stale validator. The cache is bounded: past [`MAX_ENTRIES`] entries or
//! [`MAX_TEXT_BYTES`] of schema text the oldest entry is evicted.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::rc::Rc;

use crate::schema::{Dialect, Fnv, Schema, compile_text};
use crate::violation::Violation;

pub const MAX_ENTRIES: usize = 256;
pub const MAX_TEXT_BYTES: usize = 8 * 1024 * 1024;

struct Entry {
    dialect: Dialect,
    text: String,
    schema: Rc<Schema>,
    stamp: u64,
}

/// A bounded map from key to compiled schema. Not `Send`: one per instance.
#[derive(Default)]
pub struct SchemaCache {
    /// By key, hashed with a fixed hasher (std's default one asks the host
    /// for a random seed, which the sandbox does not give).
    entries: HashMap<String, Entry, BuildHasherDefault<Fnv>>,
    bytes: usize,
    clock: u64,
    hits: u64,
    misses: u64,
}

impl SchemaCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The compiled schema for `(key, text)`, compiling on a miss. A schema
    /// that does not compile is not cached; its violations are returned.
    pub fn get(
        &mut self,
        dialect: Dialect,
        key: &str,
        text: &str,
    ) -> Result<Rc<Schema>, Vec<Violation>> {
        self.clock += 1;
        if let Some(e) = self.entries.get_mut(key)
            && e.dialect == dialect
            && same_bytes(e.text.as_bytes(), text.as_bytes())
        {
            e.stamp = self.clock;
            self.hits += 1;
            return Ok(e.schema.clone());
        }
        self.misses += 1;
        let schema = Rc::new(compile_text(dialect, text)?);
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= old.text.len();
        }
        while !self.entries.is_empty()
            && (self.entries.len() >= MAX_ENTRIES || self.bytes + text.len() > MAX_TEXT_BYTES)
        {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.stamp)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest
                && let Some(e) = self.entries.remove(&k)
            {
                self.bytes -= e.text.len();
            }
        }
        if text.len() <= MAX_TEXT_BYTES {
            self.bytes += text.len();
            self.entries.insert(
                key.to_string(),
                Entry {
                    dialect,
                    text: text.to_string(),
                    schema: schema.clone(),
                    stamp: self.clock,
                },
            );
        }
        Ok(schema)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// (hits, misses) since creation.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

/// Byte-for-byte equality, eight bytes at a time: inside the guest,
/// `==` on slices calls the C library's `memcmp`, a byte loop there, and
/// every call compares a whole schema text.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (ca, ta) = a.as_chunks::<8>();
    let (cb, tb) = b.as_chunks::<8>();
    ca.iter()
        .zip(cb)
        .all(|(x, y)| u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y))
        && ta == tb
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str =
        r#"{"type":"object","additionalProperties":false,"properties":{"a":{"type":"boolean"}}}"#;
    const B: &str =
        r#"{"type":"object","additionalProperties":false,"properties":{"b":{"type":"boolean"}}}"#;

    #[test]
    fn same_key_same_text_hits_and_new_text_recompiles() {
        let mut c = SchemaCache::new();
        c.get(Dialect::Input, "k", A).unwrap();
        c.get(Dialect::Input, "k", A).unwrap();
        assert_eq!(c.stats(), (1, 1));
        let s = c.get(Dialect::Input, "k", B).unwrap();
        assert!(s.root.property("b").is_some());
        assert_eq!(c.stats(), (1, 2));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn texts_are_compared_byte_for_byte() {
        let t = "0123456789abcdefXYZ";
        assert!(same_bytes(t.as_bytes(), t.as_bytes()));
        for i in 0..t.len() {
            let mut u = t.as_bytes().to_vec();
            u[i] ^= 1;
            assert!(!same_bytes(t.as_bytes(), &u), "{i}");
        }
        assert!(!same_bytes(b"abc", b"abcd"));
        assert!(same_bytes(b"", b""));
        let mut c = SchemaCache::new();
        c.get(Dialect::Input, "k", A).unwrap();
        let near = A.replace("boolean", "booleaN");
        assert!(c.get(Dialect::Input, "k", &near).is_err());
        assert_eq!(c.stats(), (0, 2));
    }

    #[test]
    fn bounded() {
        let mut c = SchemaCache::new();
        for i in 0..(MAX_ENTRIES + 10) {
            c.get(Dialect::Input, &format!("k{i}"), A).unwrap();
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        // The most recent entries are still served; the oldest went.
        let (hits, misses) = c.stats();
        c.get(Dialect::Input, &format!("k{}", MAX_ENTRIES + 9), A)
            .unwrap();
        assert_eq!(c.stats(), (hits + 1, misses));
        c.get(Dialect::Input, "k0", A).unwrap();
        assert_eq!(c.stats(), (hits + 1, misses + 1));
    }
}
