//! Wall-clock time as stored (Unix milliseconds) and as shown (RFC 3339, UTC),
//! and a [`Clock`] that work judged by age (retention) reads, so a test can
//! move time forward instead of waiting for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Milliseconds since the Unix epoch; the storage form of every timestamp.
pub fn now_millis() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// Where "now" comes from: the system's clock, or one that moves only when
/// told (tests of what expires).
#[derive(Clone, Debug, Default)]
pub enum Clock {
    #[default]
    System,
    Manual(Arc<AtomicI64>),
}

impl Clock {
    /// A clock stopped at `at` (Unix milliseconds).
    pub fn manual(at: i64) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(at)))
    }

    pub fn now_millis(&self) -> i64 {
        match self {
            Clock::System => now_millis(),
            Clock::Manual(at) => at.load(Ordering::SeqCst),
        }
    }

    /// Sets a manual clock (the system clock is not ours to set).
    pub fn set(&self, at: i64) {
        if let Clock::Manual(now) = self {
            now.store(at, Ordering::SeqCst);
        }
    }
}

/// RFC 3339 in UTC with millisecond precision, ending in `Z`.
pub fn to_rfc3339(millis: i64) -> String {
    let nanos = i128::from(millis) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned())
}

/// Parses an RFC 3339 UTC timestamp that ends in `Z` into milliseconds.
pub fn parse_rfc3339_utc(text: &str) -> Option<i64> {
    if !text.ends_with('Z') {
        return None;
    }
    let t = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_utc_with_z_and_round_trips() {
        assert_eq!(
            parse_rfc3339_utc("2023-11-14T22:13:20.123Z"),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            parse_rfc3339_utc(&to_rfc3339(1_700_000_000_123)),
            Some(1_700_000_000_123)
        );
        assert_eq!(parse_rfc3339_utc("2023-11-14T22:13:20+00:00"), None);
        assert_eq!(parse_rfc3339_utc("yesterday"), None);
    }

    #[test]
    fn formats_utc_with_z() {
        assert_eq!(to_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(to_rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
