//! Known keys: the account each API key this server has lately admitted
//! belongs to, so that a request whose account is at its bound on work in
//! progress (`admission`) is refused as soon as it arrives, before it waits
//! for a local place or reads its key from the store.
//!
//! Why: past capacity, an account with as many requests in progress as it
//! may was refused only after its request had waited for a local place
//! (up to the admission wait) and read its key — tens of milliseconds for
//! a 503 that needs none of it, and a local place taken from admitted work
//! (docs/benchmarks.md, "The account's bound before the wait"). The place
//! itself is still taken once the key is read: taken on arrival, it would
//! be held through the wait, and the account's bound, not the local
//! places, would decide how long a queue may grow.
//!
//! What the map may say is a hint, never an admission: every request still
//! reads and judges its key. A key enters only after the store has admitted
//! it, leaves as soon as the store refuses it, and is forgotten when it has
//! not been admitted for [`FRESH_FOR`]. So a key revoked elsewhere (another
//! replica) can for that long at most be refused 503 instead of 401 while
//! its account is at its bound (docs/contract-decisions.md). The map holds
//! at most [`CAPACITY`] keys; past that, new keys simply wait to be judged
//! as before.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::domain::account::AccountId;

/// How long a key stays known after its last admission.
pub const FRESH_FOR: Duration = Duration::from_secs(10);

/// The most keys known at once (a hash of 64 hex digits and an account
/// each: about 2 MiB).
pub const CAPACITY: usize = 16_384;

/// The keys and their accounts (`Account` is an [`AccountId`] but in this
/// module's tests: only the store makes one).
#[derive(Debug)]
pub struct KnownKeys<Account = AccountId> {
    keys: Mutex<HashMap<String, Known<Account>>>,
}

#[derive(Debug, Clone, Copy)]
struct Known<Account> {
    account: Account,
    admitted_at: Instant,
}

impl<Account> Default for KnownKeys<Account> {
    fn default() -> Self {
        KnownKeys {
            keys: Mutex::default(),
        }
    }
}

impl<Account: Copy> KnownKeys<Account> {
    /// The account of the key with this hash, if the store admitted it
    /// within [`FRESH_FOR`].
    pub fn account_of(&self, key_hash: &str) -> Option<Account> {
        let known = *self.keys().get(key_hash)?;
        (known.admitted_at.elapsed() < FRESH_FOR).then_some(known.account)
    }

    /// The store has just admitted this key for `account`.
    pub fn admitted(&self, key_hash: &str, account: Account) {
        let now = Instant::now();
        let mut keys = self.keys();
        if let Some(known) = keys.get_mut(key_hash) {
            *known = Known {
                account,
                admitted_at: now,
            };
            return;
        }
        if keys.len() >= CAPACITY {
            keys.retain(|_, known| now.duration_since(known.admitted_at) < FRESH_FOR);
            if keys.len() >= CAPACITY {
                return;
            }
        }
        keys.insert(
            key_hash.to_owned(),
            Known {
                account,
                admitted_at: now,
            },
        );
    }

    /// The store has just refused this key (unknown, revoked, or of
    /// another environment).
    pub fn refused(&self, key_hash: &str) {
        self.keys().remove(key_hash);
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<String, Known<Account>>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_known_from_its_admission_until_its_refusal() {
        let known = KnownKeys::<u32>::default();
        assert_eq!(known.account_of("h1"), None);
        known.admitted("h1", 7);
        assert_eq!(known.account_of("h1"), Some(7));
        assert_eq!(known.account_of("h2"), None);
        known.refused("h1");
        assert_eq!(known.account_of("h1"), None);
    }

    #[test]
    fn a_key_not_admitted_lately_is_not_known() {
        let known = KnownKeys::<u32>::default();
        known.admitted("old", 1);
        known.keys().get_mut("old").unwrap().admitted_at -= FRESH_FOR;
        assert_eq!(known.account_of("old"), None);
        known.admitted("old", 1);
        assert_eq!(known.account_of("old"), Some(1));
    }

    #[test]
    fn the_map_is_bounded_and_makes_room_from_stale_keys() {
        let known = KnownKeys::<u32>::default();
        for n in 0..CAPACITY {
            known.admitted(&format!("k{n}"), 1);
        }
        known.admitted("one-too-many", 2);
        assert_eq!(known.len(), CAPACITY);
        assert_eq!(known.account_of("one-too-many"), None);
        assert_eq!(known.account_of("k0"), Some(1));

        known.keys().get_mut("k0").unwrap().admitted_at -= FRESH_FOR;
        known.admitted("newcomer", 2);
        assert_eq!(known.len(), CAPACITY);
        assert_eq!(known.account_of("newcomer"), Some(2));
        assert_eq!(known.account_of("k0"), None);
    }
}
