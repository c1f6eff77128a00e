//! What the offered capabilities speak of, derived once per offered set and
//! kept across turns: each capability's keys (concepts or stems of its
//! name, description, `when_to_use`, examples and returned fields) and
//! words, how rare each key is, which capabilities share each key or word;
//! and the score of a focus against one capability.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use super::super::{CapabilityOffer, Offered};
use crate::agent::language::lexicon::{self, Concept, keys};
use crate::agent::language::words;

/// Below this, the words a focus shares with a capability select nothing.
pub(super) const MIN_WORD_SCORE: f64 = 0.5;

/// What the words of a focus say for capability `i`: each shared key
/// weighs by its rarity, double in the name, half when only a returned
/// field names it; the very word a little more.
pub(super) fn word_score(index: &Index, i: usize, focus_words: &[(String, String)]) -> f64 {
    let entry = &index.entries[i];
    let mut score = 0.0;
    for (key, word) in focus_words {
        let weight = index.weight(key);
        if entry.name_keys.contains(key) {
            score += 2.0 * weight;
        } else if entry.keys.contains(key) {
            score += weight;
        } else if entry.returned.contains(key) {
            score += 0.5 * weight;
        }
        // The very word, not only its stem or concept: "my order" is
        // closer to `order_status` than to `customer_orders`.
        if entry.words.contains(word) {
            score += 0.25;
        }
    }
    score
}

/// What the offered capabilities speak of, how rare each key is, and which
/// capabilities share each key or word. It depends only on the offers, so
/// it is kept across turns, keyed by their fingerprints in order
/// ([`Index::of`]): a turn with 1,000 unchanged capabilities derives
/// nothing and scores only the few sharing a word with the message.
pub(super) struct Index {
    /// The fingerprints of the offers it was derived from, in order.
    pub(super) fingerprints: Vec<[u64; 2]>,
    pub(super) entries: Vec<Arc<Entry>>,
    /// How many capabilities mention each key.
    pub(super) mentions: HashMap<String, usize>,
    /// Capabilities (ascending) whose name, text or returned fields hold
    /// each key.
    pub(super) by_key: HashMap<String, Vec<usize>>,
    /// Capabilities (ascending) whose text holds each folded word.
    pub(super) by_word: HashMap<String, Vec<usize>>,
    /// Indexes of the preparation capabilities.
    pub(super) preparations: Vec<usize>,
}

/// What one capability speaks of. It depends only on the capability's
/// words (name, description, `when_to_use`, examples, returned fields), so
/// it is kept across turns, keyed by the offer's fingerprint ([`entry`]).
pub(super) struct Entry {
    /// Keys (concepts or stems) of the capability's name.
    pub(super) name_keys: HashSet<String>,
    /// Keys of its name, description, `when_to_use` and examples.
    pub(super) keys: HashSet<String>,
    /// Keys only its output schema's fields speak of.
    pub(super) returned: HashSet<String>,
    /// Its folded words as written.
    pub(super) words: HashSet<String>,
}

/// Entries kept at most (all accounts); cleared whole when full.
const MAX_ENTRIES: usize = 20_000;
/// Indexes kept at most (one per distinct offered set); cleared whole when full.
const MAX_INDEXES: usize = 256;

fn entry(capability: &CapabilityOffer) -> Arc<Entry> {
    static ENTRIES: OnceLock<Mutex<HashMap<[u64; 2], Arc<Entry>>>> = OnceLock::new();
    let memo = ENTRIES.get_or_init(Default::default);
    let key = capability.fingerprint();
    if let Some(found) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return found;
    }
    let name = capability.name.replace(['_', '-'], " ");
    let mut text = format!(
        "{name} {} {}",
        capability.description, capability.when_to_use
    );
    for example in capability.examples.iter() {
        collect_strings(example, &mut text);
    }
    // The fields it returns are what it can also answer (a preparation
    // returns the closed interaction, which says nothing).
    let mut fields = String::new();
    if !capability.preparation {
        collect_fields(&capability.output_schema, &mut fields);
    }
    let mut all = keys(&text);
    // "devolver" finds `prepare_return`; "refund" does not (lexicon::widen).
    lexicon::widen(&mut all);
    let returned: HashSet<String> = keys(&fields)
        .into_iter()
        .filter(|k| !all.contains(k))
        .collect();
    let made = Arc::new(Entry {
        name_keys: keys(&name),
        keys: all,
        returned,
        words: words(&text).into_iter().collect(),
    });
    if let Ok(mut m) = memo.lock() {
        if m.len() >= MAX_ENTRIES {
            m.clear();
        }
        m.insert(key, made.clone());
    }
    made
}

impl Index {
    /// The index of these offers, derived once per distinct offered set:
    /// found by a hash of the offers' fingerprints in order, and taken only
    /// when its own fingerprints are those (a 64-bit hash may collide; the
    /// comparison of 16-byte fingerprints cannot be fooled).
    pub(super) fn of(capabilities: &[Offered<'_>]) -> Arc<Index> {
        static INDEXES: OnceLock<Mutex<HashMap<u64, Arc<Index>>>> = OnceLock::new();
        let memo = INDEXES.get_or_init(Default::default);
        let fingerprints: Vec<[u64; 2]> = capabilities.iter().map(|c| c.fingerprint()).collect();
        let key = crate::agent::planner::fingerprint_keys()[0].hash_one(&fingerprints);
        if let Some(found) = memo
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
            .filter(|index| index.fingerprints == fingerprints)
        {
            return found;
        }
        let made = Arc::new(Index::new(capabilities, fingerprints));
        if let Ok(mut m) = memo.lock() {
            if m.len() >= MAX_INDEXES {
                m.clear();
            }
            m.insert(key, made.clone());
        }
        made
    }

    fn new(capabilities: &[Offered<'_>], fingerprints: Vec<[u64; 2]>) -> Index {
        let mut index = Index {
            fingerprints,
            entries: Vec::with_capacity(capabilities.len()),
            mentions: HashMap::new(),
            by_key: HashMap::new(),
            by_word: HashMap::new(),
            preparations: Vec::new(),
        };
        for (i, capability) in capabilities.iter().enumerate() {
            let entry = entry(capability);
            for key in entry.keys.iter().chain(&entry.returned) {
                *index.mentions.entry(key.clone()).or_default() += 1;
            }
            let mut shared: HashSet<&String> = entry.name_keys.iter().collect();
            shared.extend(entry.keys.iter().chain(&entry.returned));
            for key in shared {
                index.by_key.entry(key.clone()).or_default().push(i);
            }
            for word in &entry.words {
                index.by_word.entry(word.clone()).or_default().push(i);
            }
            if capability.preparation {
                index.preparations.push(i);
            }
            index.entries.push(entry);
        }
        index
    }

    /// Capabilities sharing a key or a word with `focus_words`, ascending.
    pub(super) fn sharing(&self, focus_words: &[(String, String)]) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for (key, word) in focus_words {
            out.extend(self.by_key.get(key).into_iter().flatten());
            out.extend(self.by_word.get(word).into_iter().flatten());
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Rarer is weightier: a key every capability mentions says little.
    pub(super) fn weight(&self, key: &str) -> f64 {
        let total = self.entries.len().max(1) as f64;
        let mentions = self.mentions.get(key).copied().unwrap_or(0).max(1) as f64;
        (1.0 + total / mentions).ln()
    }

    /// Words of these concepts ask for something specific no offered
    /// capability speaks of.
    pub(super) fn has_uncovered_topic(&self, concepts: &[&'static Concept]) -> bool {
        concepts
            .iter()
            .any(|c| c.topic && !self.mentions.contains_key(c.key))
    }
}

/// The names (in words) and descriptions of a schema's properties, nested
/// ones included.
fn collect_fields(schema: &Value, out: &mut String) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            out.push(' ');
            out.push_str(&name.replace(['_', '-'], " "));
            if let Some(description) = property.get("description").and_then(Value::as_str) {
                out.push(' ');
                out.push_str(description);
            }
            collect_fields(property, out);
        }
    }
    if let Some(items) = schema.get("items") {
        collect_fields(items, out);
    }
}

fn collect_strings(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push(' ');
            out.push_str(s);
        }
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}
