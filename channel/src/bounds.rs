//! Bounds shared by every user-supplied string (the server's domain uses
//! them too, as `warden::domain::text`).

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

#[cfg(test)]
mod tests {
    use super::*;

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
