//! Bounds on the complexity of `pattern` regular expressions.
//!
//! `regress` is a backtracking engine (as ECMAScript engines are), so a
//! pattern with nested unbounded repetition such as `^(a+)+$` takes time
//! exponential in the input length. Three bounds keep matching cheap:
//!
//! 1. a pattern applies only to strings that passed `maxLength` (checked
//!    first, so the matcher never sees a string longer than the schema allows);
//! 2. this module rejects, at import, patterns whose star height is above one
//!    (a repeated group that itself contains a large repetition) and patterns
//!    with back-references (which make matching NP-hard);
//! 3. the host's per-call deadline stops whatever slips through.
//!
//! The scan is syntactic and conservative; the pattern has already been
//! parsed by `regress`, so it is well formed.

/// A repetition counts as "large" when its upper bound is above this.
const LARGE: u64 = 16;

struct Group {
    /// The group contains a large repetition (directly or nested).
    has_large: bool,
    /// The group has alternatives (`|` at its own level).
    has_alt: bool,
}

/// `Err(reason)` when the pattern is too complex to match in bounded time.
pub fn check(pattern: &str) -> Result<(), String> {
    let bytes: Vec<char> = pattern.chars().collect();
    let mut stack: Vec<Group> = vec![Group {
        has_large: false,
        has_alt: false,
    }];
    // Whether the last atom was a group, and that group's `has_large`.
    let mut last_group_large: Option<bool> = None;
    // Whether the last atom was a group with alternatives.
    let mut last_group_alt = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            '\\' => {
                let next = bytes.get(i + 1).copied().unwrap_or(' ');
                if next.is_ascii_digit() && next != '0' || next == 'k' {
                    return Err("back-references are not supported in patterns".into());
                }
                i += 2;
                last_group_large = None;
                continue;
            }
            '[' => {
                // Skip the class body, honouring escapes; ']' right after '[' or '[^' is literal in
                // some dialects but not in ECMAScript, where it ends an empty class.
                i += 1;
                while i < bytes.len() && bytes[i] != ']' {
                    if bytes[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                last_group_large = None;
                continue;
            }
            '(' => {
                stack.push(Group {
                    has_large: false,
                    has_alt: false,
                });
                // Skip a group prefix such as `?:`, `?=`, `?!`, `?<=`, `?<!`, `?<name>`.
                i += 1;
                if bytes.get(i) == Some(&'?') {
                    i += 1;
                    if bytes.get(i) == Some(&'<')
                        && !matches!(bytes.get(i + 1), Some('=') | Some('!'))
                    {
                        while i < bytes.len() && bytes[i] != '>' {
                            i += 1;
                        }
                    }
                    i += 1;
                }
                last_group_large = None;
                continue;
            }
            ')' => {
                let g = stack.pop().unwrap_or(Group {
                    has_large: false,
                    has_alt: false,
                });
                if stack.is_empty() {
                    stack.push(Group {
                        has_large: false,
                        has_alt: false,
                    });
                }
                last_group_large = Some(g.has_large);
                last_group_alt = g.has_alt;
                if g.has_large
                    && let Some(top) = stack.last_mut()
                {
                    top.has_large = true;
                }
                i += 1;
                continue;
            }
            '*' | '+' | '?' | '{' => {
                let (upper, len) = quantifier(&bytes[i..]);
                if len == 0 {
                    // A literal '{'.
                    last_group_large = None;
                    i += 1;
                    continue;
                }
                let large = upper.is_none_or(|u| u > LARGE);
                if large {
                    if last_group_large.is_some() && last_group_alt {
                        return Err(
                            "a repeated group of alternatives (like (a|aa)+) can take exponential time; \
                             use a character class or make the alternatives unambiguous without repetition"
                                .into(),
                        );
                    }
                    if last_group_large == Some(true) {
                        return Err(
                            "nested repetition (a repeated group that contains a repetition) can take \
                             exponential time; rewrite the pattern without it"
                                .into(),
                        );
                    }
                    if let Some(top) = stack.last_mut() {
                        top.has_large = true;
                    }
                }
                i += len;
                // A lazy modifier `?` after a quantifier.
                if bytes.get(i) == Some(&'?') {
                    i += 1;
                }
                last_group_large = None;
                continue;
            }
            '|' => {
                if let Some(top) = stack.last_mut() {
                    top.has_alt = true;
                }
                last_group_large = None;
                i += 1;
            }
            _ => {
                last_group_large = None;
                i += 1;
            }
        }
    }
    Ok(())
}

/// Parses a quantifier at the start of `s`: (upper bound, None = unbounded;
/// length in chars). Length 0 when `s` does not start with a quantifier.
fn quantifier(s: &[char]) -> (Option<u64>, usize) {
    match s.first() {
        Some('*') | Some('+') => (None, 1),
        Some('?') => (Some(1), 1),
        Some('{') => {
            let end = match s.iter().position(|&c| c == '}') {
                Some(e) => e,
                None => return (None, 0),
            };
            let body: String = s[1..end].iter().collect();
            let mut parts = body.splitn(2, ',');
            let lo = parts.next().unwrap_or("");
            if lo.is_empty() || !lo.chars().all(|c| c.is_ascii_digit()) {
                return (None, 0);
            }
            match parts.next() {
                None => (Some(lo.parse().unwrap_or(u64::MAX)), end + 1),
                Some("") => (None, end + 1),
                Some(hi) if hi.chars().all(|c| c.is_ascii_digit()) => {
                    (Some(hi.parse().unwrap_or(u64::MAX)), end + 1)
                }
                Some(_) => (None, 0),
            }
        }
        _ => (None, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn ordinary_patterns_pass() {
        for p in [
            "^[a-z0-9-]+$",
            "^\\d{4}-\\d{2}-\\d{2}$",
            "^(?:[A-Z]{2})?[0-9]{6,12}$",
            "^[^@]+@[^@]+\\.[a-z]{2,}$",
            "^(ab|cd){1,3}x*$",
            "^([a-z]+-)?[a-z]+$",
        ] {
            assert!(check(p).is_ok(), "{p}");
        }
    }

    #[test]
    fn nested_repetition_and_backrefs_are_rejected() {
        for p in [
            "^(a+)+$",
            "(a*)*",
            "((ab)*c)+",
            "(?:x+y?){2,}",
            "(a{1,100}){1,100}",
            "(a)\\1",
            "(?<n>a)\\k<n>",
            "^(a|aa)+$",
            "^(?:ab|a)*$",
        ] {
            assert!(check(p).is_err(), "{p}");
        }
    }
}
