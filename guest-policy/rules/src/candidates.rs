//! The `match-pattern` export: which candidate strings match the `pattern`
//! of one top-level property of a compiled `input_schema`.
//!
//! The server gathers candidate values from the user's words and asks the
//! guest which of them a tenant's pattern accepts, so a tenant's regular
//! expression only ever runs here, under the sandbox's deadline.

use crate::schema::Schema;
use crate::violation::{Pointer, Violation};

/// Indexes (ascending) of the `candidates` the property's pattern matches
/// (unanchored, as validation applies it); a violation when the property
/// is not declared at the top level or has no pattern.
pub fn match_pattern<S: AsRef<str>>(
    schema: &Schema,
    property: &str,
    candidates: &[S],
) -> Result<Vec<u32>, Vec<Violation>> {
    let Some(pattern) = schema
        .root
        .property(property)
        .and_then(|node| node.pattern.as_ref())
    else {
        return Err(vec![Violation::new(
            Pointer::root().key("properties").key(property).as_str(),
            "property-without-pattern",
            "the schema declares no top-level property with a pattern by this name",
        )]);
    };
    Ok(candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| pattern.is_match(c.as_ref()))
        .filter_map(|(i, _)| u32::try_from(i).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Dialect, compile_text};

    fn schema() -> Schema {
        compile_text(
            Dialect::Input,
            r#"{"type":"object","additionalProperties":false,"properties":{
                "order":{"type":"string","maxLength":20,"pattern":"^[A-Z]-[0-9]+$"},
                "note":{"type":"string","maxLength":20}}}"#,
        )
        .unwrap()
    }

    #[test]
    fn returns_the_indexes_of_the_matching_candidates() {
        let got = match_pattern(&schema(), "order", &["pedido", "A-1001", "a-1", "B-2", ""]);
        assert_eq!(got, Ok(vec![1, 3]));
        assert_eq!(
            match_pattern(&schema(), "order", &[] as &[&str]),
            Ok(vec![])
        );
    }

    #[test]
    fn a_property_without_a_pattern_is_a_violation() {
        for name in ["note", "missing", "a/b"] {
            let err = match_pattern(&schema(), name, &["x"]).unwrap_err();
            assert_eq!(err.len(), 1);
            assert_eq!(err[0].rule, "property-without-pattern");
            assert_eq!(
                err[0].pointer,
                format!("/properties/{}", name.replace('/', "~1"))
            );
        }
    }
}
