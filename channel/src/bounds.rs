//! Bounds shared by every user-supplied string (the server's domain uses
//! them too, as `warden::domain::text`).

use serde_json::Value;

/// Checks a string's length in characters and refuses control characters
/// other than tab, line feed and carriage return (they corrupt logs and prompts).
pub fn check_bounded(field: &str, value: &str, min: usize, max: usize) -> Result<(), String> {
    let len = value.chars().count();
    if len < min || len > max {
        return Err(format!(
            "{field} must be {min} to {max} characters long (got {len})"
        ));
    }
    if value
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    {
        return Err(format!("{field} must not contain control characters"));
    }
    Ok(())
}

/// Where a JSON document holds U+0000 in a string or a property name, as a
/// JSON pointer (the object's, for a name); `None` when nowhere. No stored
/// text may carry the character (PostgreSQL's text cannot), so every reader
/// of request JSON refuses it before anything else looks at the document.
pub fn find_nul(value: &Value) -> Option<String> {
    let mut at = String::new();
    walk(value, &mut at).then_some(at)
}

/// [`find_nul`] as a refusal naming where the character is.
pub fn refuse_nul(value: &Value) -> Result<(), String> {
    match find_nul(value) {
        None => Ok(()),
        Some(at) => Err(format!(
            "U+0000 is not accepted in request text (at JSON pointer {at:?})"
        )),
    }
}

/// `at` is left at the finding; serde_json's nesting limit (128) bounds the depth.
fn walk(value: &Value, at: &mut String) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().enumerate().any(|(i, item)| {
            let len = at.len();
            at.push_str(&format!("/{i}"));
            let found = walk(item, at);
            if !found {
                at.truncate(len);
            }
            found
        }),
        Value::Object(map) => {
            if map.keys().any(|k| k.contains('\0')) {
                return true;
            }
            map.iter().any(|(key, item)| {
                let len = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                let found = walk(item, at);
                if !found {
                    at.truncate(len);
                }
                found
            })
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_nul_in_strings_and_names_at_any_depth() {
        assert_eq!(find_nul(&json!({"a": ["x", {"b/c": "y"}]})), None);
        assert_eq!(find_nul(&json!("a\u{0}")), Some(String::new()));
        assert_eq!(
            find_nul(&json!({"a": ["x", {"b/c~": "y\u{0}"}]})),
            Some("/a/1/b~1c~0".into())
        );
        assert_eq!(find_nul(&json!({"a": {"k\u{0}": 1}})), Some("/a".into()));
        assert_eq!(
            find_nul(&json!([1, true, null, "\u{0}"])),
            Some("/3".into())
        );
    }

    #[test]
    fn counts_characters_not_bytes() {
        assert!(check_bounded("f", "ñññ", 1, 3).is_ok());
        assert!(check_bounded("f", "ññññ", 1, 3).is_err());
        assert!(check_bounded("f", "", 1, 3).is_err());
    }

    #[test]
    fn refuses_control_characters() {
        assert!(check_bounded("f", "a\u{0}b", 0, 10).is_err());
        assert!(check_bounded("f", "a\nb\tc", 0, 10).is_ok());
    }
}
