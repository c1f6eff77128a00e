//! Where a message's questions are: its sentences, the clauses a sentence
//! is cut into before a new question ("¿Dónde está mi pedido y qué pedidos
//! tiene Luis?" asks two things), and so its *focus*: the parts a planner
//! selects a capability for, most telling first.

use super::clauses::is_interrogative;
use super::words::{fold, words};

/// The parts of a message to select for, most telling first: with several
/// clauses, the questions in the order asked; then the whole message.
pub fn focus(message: &str) -> Vec<&str> {
    let mut questions = Vec::new();
    let mut clauses = 0;
    for (sentence, asked) in sentences(message) {
        for clause in split_before_questions(sentence) {
            clauses += 1;
            // Only its first word that is not a conjunction is read.
            let first = clause
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(fold)
                .find(|w| !matches!(w.as_str(), "y" | "and" | "e" | "pero" | "but"));
            if asked || first.as_deref().is_some_and(is_interrogative) {
                questions.push(clause);
            }
        }
    }
    let mut out = Vec::new();
    if clauses > 1 {
        out.extend(questions);
    }
    out.push(message);
    out
}

/// Sentences, each with whether it was asked (`¿…?` or ending in `?`).
fn sentences(message: &str) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut opened = false;
    for (at, ch) in message.char_indices() {
        match ch {
            '¿' => {
                let before = message[start..at].trim();
                if !before.is_empty() {
                    out.push((before, false));
                }
                start = at + ch.len_utf8();
                opened = true;
            }
            '?' | '.' | '!' | ';' | '\n' => {
                let text = message[start..at].trim();
                if !text.is_empty() {
                    out.push((text, opened || ch == '?'));
                }
                start = at + ch.len_utf8();
                opened = false;
            }
            _ => {}
        }
    }
    let rest = message[start..].trim();
    if !rest.is_empty() {
        out.push((rest, opened));
    }
    out
}

/// "¿Dónde está mi pedido y qué pedidos tiene Luis?" → two clauses: a
/// sentence is cut before "y"/"and" (or a comma) followed by a question word.
fn split_before_questions(sentence: &str) -> Vec<&str> {
    let mut cuts = Vec::new();
    let tokens: Vec<(usize, &str)> = sentence
        .split_whitespace()
        .map(|t| (t.as_ptr() as usize - sentence.as_ptr() as usize, t))
        .collect();
    for (i, (at, token)) in tokens.iter().enumerate() {
        let folded = fold(token.trim_matches(|c: char| !c.is_alphanumeric()));
        let joins = matches!(folded.as_str(), "y" | "and" | "e");
        // "y qué…", "and what…", "y a qué hora…", "and at what time…".
        let asks_at = |j: usize| {
            tokens
                .get(j)
                .is_some_and(|(_, t)| words(t).first().is_some_and(|w| is_interrogative(w)))
        };
        let preposition = tokens.get(i + 1).is_some_and(|(_, t)| {
            matches!(
                fold(t).as_str(),
                "a" | "de" | "en" | "por" | "para" | "con" | "at" | "in" | "for" | "on" | "to"
            )
        });
        let next_asks = asks_at(i + 1) || (preposition && asks_at(i + 2));
        let after_comma = i > 0 && tokens[i - 1].1.ends_with(',');
        let asks_here = words(token).first().is_some_and(|w| is_interrogative(w));
        if (i > 0 && next_asks && joins) || (after_comma && asks_here) {
            cuts.push(*at);
        }
    }
    let mut out = Vec::new();
    let mut start = 0;
    for cut in cuts {
        let part = sentence[start..cut].trim().trim_end_matches(',').trim();
        if !part.is_empty() {
            out.push(part);
        }
        start = cut;
    }
    let last = sentence[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out.into_iter()
        .map(|part| {
            ["y ", "Y ", "and ", "And ", "e "]
                .iter()
                .find_map(|c| part.strip_prefix(c))
                .unwrap_or(part)
                .trim()
        })
        .collect()
}
