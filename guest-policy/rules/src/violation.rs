//! Violations and JSON pointers.

use std::fmt;

/// At most this many violations are reported per call; the last slot then
/// says `too-many-violations`.
pub const MAX_VIOLATIONS: usize = 100;

/// One broken rule at one place (mirrors the WIT record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// RFC 6901 JSON pointer into the document that was checked.
    pub pointer: String,
    /// Stable kebab-case rule identifier.
    pub rule: String,
    /// Human-readable sentence; not stable.
    pub message: String,
}

impl Violation {
    pub fn new(pointer: impl Into<String>, rule: &str, message: impl Into<String>) -> Self {
        Violation {
            pointer: pointer.into(),
            rule: rule.to_string(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at '{}': {}", self.rule, self.pointer, self.message)
    }
}

/// A bounded collector of violations.
#[derive(Debug, Default)]
pub struct Violations {
    list: Vec<Violation>,
    overflowed: bool,
}

impl Violations {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, pointer: &Pointer, rule: &str, message: impl Into<String>) {
        self.push_at(pointer.as_str().to_string(), rule, message);
    }

    pub fn push_at(&mut self, pointer: String, rule: &str, message: impl Into<String>) {
        if self.list.len() < MAX_VIOLATIONS - 1 {
            self.list.push(Violation {
                pointer,
                rule: rule.to_string(),
                message: message.into(),
            });
        } else {
            self.overflowed = true;
        }
    }

    /// True when no more violations will be recorded (callers may stop early).
    pub fn is_full(&self) -> bool {
        self.overflowed
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty() && !self.overflowed
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn extend(&mut self, other: Vec<Violation>) {
        for v in other {
            self.push_at(v.pointer, &v.rule, v.message);
        }
    }

    pub fn into_vec(mut self) -> Vec<Violation> {
        if self.overflowed {
            self.list.push(Violation::new(
                "",
                "too-many-violations",
                format!(
                    "more than {} violations; the rest are not reported",
                    MAX_VIOLATIONS - 1
                ),
            ));
        }
        self.list
    }

    /// `Ok(value)` when nothing was recorded.
    pub fn finish<T>(self, value: T) -> Result<T, Vec<Violation>> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(self.into_vec())
        }
    }
}

/// A JSON pointer built while walking a document.
#[derive(Debug, Clone, Default)]
pub struct Pointer(String);

impl Pointer {
    pub fn root() -> Self {
        Pointer(String::new())
    }

    pub fn parse(s: &str) -> Self {
        Pointer(s.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// This pointer extended by one reference token (escaped per RFC 6901).
    pub fn key(&self, token: &str) -> Pointer {
        let mut s = String::with_capacity(self.0.len() + token.len() + 1);
        s.push_str(&self.0);
        s.push('/');
        for c in token.chars() {
            match c {
                '~' => s.push_str("~0"),
                '/' => s.push_str("~1"),
                c => s.push(c),
            }
        }
        Pointer(s)
    }

    pub fn index(&self, i: usize) -> Pointer {
        Pointer(format!("{}/{}", self.0, i))
    }

    /// `prefix` followed by this pointer.
    pub fn under(&self, prefix: &str) -> String {
        format!("{prefix}{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_escapes_tilde_and_slash() {
        assert_eq!(
            Pointer::root().key("a/b").key("c~d").index(2).as_str(),
            "/a~1b/c~0d/2"
        );
    }

    #[test]
    fn violations_are_capped() {
        let mut v = Violations::new();
        for _ in 0..500 {
            v.push(&Pointer::root(), "x", "y");
        }
        let list = v.into_vec();
        assert_eq!(list.len(), MAX_VIOLATIONS);
        assert_eq!(list.last().unwrap().rule, "too-many-violations");
    }
}
