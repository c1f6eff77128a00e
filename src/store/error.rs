//! What can go wrong in the store, classified here and only here: callers
//! see whether to retry (`Unavailable`, `Timeout`), which unique rule refused
//! a write (`Conflict`), or that something is wrong with the data or the
//! code (`Corrupt`, `Other`). No driver type crosses this boundary.

use std::fmt;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL {0:?}: use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
    /// A unique rule of the schema refused the write.
    #[error("the record already exists ({0})")]
    Conflict(Constraint),
    #[error("no such record")]
    NotFound,
    /// The database is unreachable, busy or shutting down: worth a retry.
    #[error("the database is unavailable: {0}")]
    Unavailable(DriverError),
    /// The database did not answer within the caller's deadline (or a
    /// connection did not free up in time).
    #[error("the database did not answer in time")]
    Timeout,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A bug or an unexpected driver failure: not worth a retry.
    #[error("database error: {0}")]
    Other(DriverError),
}

/// Which unique rule refused a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Constraint {
    /// Account names are unique.
    AccountName,
    /// A capability name is unique within its account.
    CapabilityName,
    /// Any other unique rule (a primary key or a generated identifier); the
    /// text names it, for logs.
    Other(String),
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Constraint::AccountName => f.write_str("account name"),
            Constraint::CapabilityName => f.write_str("capability name"),
            Constraint::Other(name) => f.write_str(name),
        }
    }
}

impl Constraint {
    /// PostgreSQL reports the constraint's name (`capabilities_account_id_name_key`),
    /// SQLite only a message (`UNIQUE constraint failed: capabilities.account_id,
    /// capabilities.name`); both name the table and columns.
    fn of(db: &dyn sqlx::error::DatabaseError) -> Self {
        Self::of_report(db.constraint().unwrap_or_else(|| db.message()))
    }

    pub(super) fn of_report(text: &str) -> Self {
        let columns = text
            .strip_prefix("UNIQUE constraint failed: ")
            .unwrap_or(text);
        match columns {
            "accounts_name_key" | "accounts.name" => Constraint::AccountName,
            "capabilities_account_id_name_key" | "capabilities.account_id, capabilities.name" => {
                Constraint::CapabilityName
            }
            other => Constraint::Other(other.to_owned()),
        }
    }
}

/// A driver's error, kept whole for logs but opaque to callers.
#[derive(Debug)]
pub struct DriverError(Box<dyn std::error::Error + Send + Sync>);

impl DriverError {
    /// A driver error other than sqlx's (the direct SQLite reads').
    pub(super) fn new(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        DriverError(Box::new(err))
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<sqlx::Error> for StoreError {
    /// Every failed statement of sqlx passes here once.
    fn from(err: sqlx::Error) -> Self {
        Self::classify(err).counted()
    }
}

impl StoreError {
    /// Counts a failed statement's error by class
    /// (`warden_db_statement_errors_total`): every driver's errors pass
    /// here once, as they become the store's.
    pub(super) fn counted(self) -> Self {
        crate::metrics::db_statement_error(self.class());
        self
    }

    /// The error's class, a closed set of words (the metric's label).
    pub fn class(&self) -> &'static str {
        match self {
            StoreError::UnsupportedUrl(_) => "unsupported_url",
            StoreError::Conflict(_) => "conflict",
            StoreError::NotFound => "not_found",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Timeout => "timeout",
            StoreError::Corrupt(_) => "corrupt",
            StoreError::Other(_) => "other",
        }
    }

    fn classify(err: sqlx::Error) -> Self {
        match &err {
            sqlx::Error::PoolTimedOut => StoreError::Timeout,
            sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::Tls(_) => {
                StoreError::Unavailable(DriverError(err.into()))
            }
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict(Constraint::of(db.as_ref()))
            }
            sqlx::Error::Database(db) if is_unavailable_code(db.code().as_deref()) => {
                StoreError::Unavailable(DriverError(err.into()))
            }
            // A stored word outside its closed set, or a column of the wrong type.
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
                StoreError::Corrupt(err.to_string())
            }
            _ => StoreError::Other(DriverError(err.into())),
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(err: sqlx::migrate::MigrateError) -> Self {
        match err {
            sqlx::migrate::MigrateError::Execute(inner) => inner.into(),
            other => StoreError::Other(DriverError(other.into())),
        }
    }
}

/// SQLite busy/locked and PostgreSQL shutdown / connection classes.
pub(super) fn is_unavailable_code(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("5" | "6" | "517" | "57P01" | "57P02" | "57P03" | "3D000")
    ) || code.is_some_and(|c| c.starts_with("08"))
}

impl StoreError {
    /// Whether a later retry may succeed (503), as opposed to a bug or
    /// corrupt data (500).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_) | StoreError::Timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_rules_are_told_apart_on_both_backends() {
        for (text, expected) in [
            ("accounts_name_key", Constraint::AccountName),
            (
                "UNIQUE constraint failed: accounts.name",
                Constraint::AccountName,
            ),
            (
                "capabilities_account_id_name_key",
                Constraint::CapabilityName,
            ),
            (
                "UNIQUE constraint failed: capabilities.account_id, capabilities.name",
                Constraint::CapabilityName,
            ),
            (
                "UNIQUE constraint failed: capabilities.id",
                Constraint::Other("capabilities.id".into()),
            ),
        ] {
            let got = Constraint::of_report(text);
            assert_eq!(got, expected, "{text}");
        }
    }
}
