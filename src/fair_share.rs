//! A fair share: at most `limit` places per key (a client address, an
//! account), each given back when the `Place` holding it is dropped. The
//! per-client connection limit and the per-account bound on work in
//! progress are both this.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// The places each key holds now; `limit` 0 means no limit (and nothing is
/// counted).
pub struct FairShare<K> {
    limit: usize,
    held: Mutex<HashMap<K, usize>>,
}

/// One place of one key, given back when dropped.
pub struct Place<K: Copy + Eq + Hash> {
    owner: Option<(Arc<FairShare<K>>, K)>,
}

impl<K: Copy + Eq + Hash> FairShare<K> {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(FairShare {
            limit,
            held: Mutex::new(HashMap::new()),
        })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// One more place for `key`, or `None` when it holds `limit` already.
    pub fn take(self: &Arc<Self>, key: K) -> Option<Place<K>> {
        if self.limit == 0 {
            return Some(Place { owner: None });
        }
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.entry(key).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(Place {
            owner: Some((self.clone(), key)),
        })
    }

    /// Whether `key` holds `limit` places now (a look: [`Self::take`]
    /// decides).
    pub fn full(&self, key: K) -> bool {
        self.limit != 0
            && self
                .held
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .is_some_and(|count| *count >= self.limit)
    }

    /// How many keys hold a place now.
    pub fn holders(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl<K: Copy + Eq + Hash> Drop for Place<K> {
    fn drop(&mut self) {
        let Some((share, key)) = self.owner.take() else {
            return;
        };
        let mut held = share.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = held.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&key);
            }
        }
    }
}

impl<K: Copy + Eq + Hash> std::fmt::Debug for Place<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Place")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_the_limit_and_gets_its_places_back() {
        let share = FairShare::new(2);
        let first = share.take('a').unwrap();
        assert!(!share.full('a'));
        let second = share.take('a').unwrap();
        assert!(share.full('a'));
        assert!(share.take('a').is_none());
        assert!(share.take('b').is_some(), "another key is not affected");
        assert!(!share.full('b'));
        drop(first);
        assert!(!share.full('a'));
        let third = share.take('a').unwrap();
        drop((second, third));
        assert_eq!(share.holders(), 0, "a key with no place is forgotten");
    }

    #[test]
    fn zero_is_no_limit_and_counts_nothing() {
        let share = FairShare::new(0);
        let held: Vec<_> = (0..100).map(|_| share.take('a').unwrap()).collect();
        assert_eq!(share.holders(), 0);
        assert!(!share.full('a'));
        drop(held);
    }
}
