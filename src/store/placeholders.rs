//! `$n` placeholders in a statement's text, for statements made of several
//! copies of one: a batch of rows (`record_batches`) or of reads
//! (`read_batches`) numbers each copy's parameters on from the last one's.

/// The highest `$n` in `text`.
pub(crate) fn parameters_in(text: &str) -> usize {
    pieces(text)
        .filter_map(|(_, number)| number)
        .max()
        .unwrap_or(0)
}

/// `text` with every `$n` written as `$(n + offset)`, appended to `out`.
pub(crate) fn renumbered(text: &str, offset: usize, out: &mut String) {
    for (stretch, number) in pieces(text) {
        out.push_str(stretch);
        if let Some(number) = number {
            out.push('$');
            out.push_str(&(number + offset).to_string());
        }
    }
}

/// `text` as stretches of text, each followed by the number of the `$n`
/// after it (`None` after the last stretch).
fn pieces(text: &str) -> impl Iterator<Item = (&str, Option<usize>)> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut from = 0;
        while let Some(found) = rest[from..].find('$') {
            let at = from + found;
            let digits = rest[at + 1..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            // A `$` with no digits after it is text.
            if let Ok(number) = rest[at + 1..at + 1 + digits].parse::<usize>() {
                let stretch = &rest[..at];
                rest = &rest[at + 1 + digits..];
                return Some((stretch, Some(number)));
            }
            from = at + 1;
        }
        Some((std::mem::take(&mut rest), None))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_moved_on_and_a_bare_dollar_is_text() {
        let text = "SELECT $2, '$' || $10 FROM t WHERE a = $1 AND b = $x";
        assert_eq!(parameters_in(text), 10);
        let mut out = String::new();
        renumbered(text, 10, &mut out);
        assert_eq!(
            out,
            "SELECT $12, '$' || $20 FROM t WHERE a = $11 AND b = $x"
        );
    }

    #[test]
    fn a_text_without_placeholders_is_copied_whole() {
        let mut out = String::from("> ");
        renumbered("SELECT 1", 5, &mut out);
        assert_eq!(out, "> SELECT 1");
        assert_eq!(parameters_in("SELECT 1"), 0);
    }
}
