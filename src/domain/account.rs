//! The account a request acts for.

/// An account's number, as the store knows it. Only the store makes one
/// (from a row it read or wrote, or from an authenticated API key), so a
/// handler holding an `AccountId` holds proof that the account exists and
/// that the request acts for it: the field is private on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AccountId(i64);

impl AccountId {
    /// For the store only: the number of a row it has just read or written.
    pub(crate) fn from_stored(number: i64) -> Self {
        AccountId(number)
    }

    /// The number, for keys and labels derived from the account (associated
    /// data, cache keys, the sandbox's tenant label, raw SQL in tests).
    pub fn number(self) -> i64 {
        self.0
    }
}
