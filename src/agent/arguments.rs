//! Arguments from the user's own words (contract 1, rules 2 and 3): the
//! candidate values a text holds for one input property, and whether a
//! proposed value is grounded in what the user wrote.
//!
//! Only top-level properties of the input schema are filled; a value is a
//! candidate when it is an `enum` value named in the text, a token matching
//! the property's `pattern`, a quoted or clearly delimited value
//! (`pedido: A-1`, `name = "Ana"`), or a number for numeric properties.
//!
//! This module never runs a tenant's `pattern`: it offers the tokens
//! ([`Property::pattern_tokens`]) and takes the policy guest's verdict on
//! them ([`PatternMatches`], gathered once per turn by `patterns`).

use serde_json::{Map, Value};

use super::language::{
    Said, clauses, fold, has_phrase, is_stopword, lexicon, without_lead_in, words,
};
use super::verdicts::PatternMatches;

/// A whole message taken as a free-text answer has at most this many words.
const MAX_ANSWER_WORDS: usize = 8;

/// A top-level input property.
pub struct Property<'a> {
    pub name: &'a str,
    pub schema: &'a Value,
    /// The schema's only free-text property: a proper name the user writes
    /// ("la Tienda Triana") can only be meant for it.
    takes_names: bool,
}

pub fn properties(input_schema: &Value) -> Vec<Property<'_>> {
    let mut found: Vec<Property<'_>> = input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(name, schema)| Property {
                    name,
                    schema,
                    takes_names: false,
                })
                .collect()
        })
        .unwrap_or_default();
    let free_text: Vec<usize> = (0..found.len())
        .filter(|&i| found[i].is_free_text())
        .collect();
    if let [only] = free_text.as_slice() {
        found[*only].takes_names = true;
    }
    found
}

pub fn required(input_schema: &Value) -> Vec<&str> {
    input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

impl Property<'_> {
    fn kind(&self) -> Option<&str> {
        match self.schema.get("type") {
            Some(Value::String(t)) => Some(t),
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
            _ => None,
        }
    }

    pub fn description(&self) -> Option<&str> {
        self.schema.get("description").and_then(Value::as_str)
    }

    /// A free-text string: no enum, const or pattern narrows it.
    pub fn is_free_text(&self) -> bool {
        self.kind() == Some("string")
            && self.schema.get("enum").is_none()
            && self.schema.get("const").is_none()
            && self.schema.get("pattern").is_none()
    }

    fn max_length(&self) -> usize {
        self.schema
            .get("maxLength")
            .and_then(Value::as_u64)
            .map_or(256, |n| n as usize)
    }

    fn min_length(&self) -> usize {
        self.schema
            .get("minLength")
            .and_then(Value::as_u64)
            .map_or(1, |n| n.max(1) as usize)
    }

    fn fits_length(&self, s: &str) -> bool {
        let n = s.chars().count();
        n >= self.min_length() && n <= self.max_length()
    }

    /// A string property narrowed by a `pattern` (and no `enum` or
    /// `const`, which decide first): its candidates are tokens the policy
    /// guest judged to match.
    pub fn is_patterned(&self) -> bool {
        self.kind() == Some("string")
            && self.schema.get("const").is_none()
            && self.schema.get("enum").is_none()
            && self.schema.get("pattern").is_some_and(Value::is_string)
    }

    /// The tokens of `text` that could be this patterned property's value:
    /// within its length bounds and not a stopword, each also in capitals
    /// when it has a lowercase letter and a digit ("a-1001" is how people
    /// type "A-1001"). Whether each matches the pattern is the guest's call.
    pub fn pattern_tokens(&self, text: &str) -> Vec<String> {
        if !self.is_patterned() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for token in tokens(text) {
            if !self.fits_length(&token) || is_stopword(&fold(&token)) {
                continue;
            }
            let upper = token.to_uppercase();
            let code_like = token.chars().any(|c| c.is_ascii_digit())
                && token.chars().any(|c| c.is_lowercase());
            if !out.contains(&token) {
                out.push(token);
            }
            if code_like && !out.contains(&upper) {
                out.push(upper);
            }
        }
        out
    }

    /// Distinct candidate values for this property in `text`; `patterns`
    /// holds the guest's verdicts on the tokens of patterned properties.
    pub fn candidates(&self, text: &str, patterns: &PatternMatches) -> Vec<Value> {
        let mut found: Vec<Value> = Vec::new();
        let mut push = |v: Value| {
            if !found.contains(&v) {
                found.push(v);
            }
        };
        if let Some(c) = self.schema.get("const") {
            push(c.clone());
            return found;
        }
        if let Some(options) = self.schema.get("enum").and_then(Value::as_array) {
            let text_words = words(text);
            for option in options {
                let named = match option {
                    Value::String(s) => {
                        let phrase = words(s).join(" ");
                        !phrase.is_empty() && has_phrase(&text_words, &phrase)
                    }
                    Value::Number(n) => text_words.contains(&n.to_string()),
                    _ => false,
                };
                if named {
                    push(option.clone());
                }
            }
            return found;
        }
        match self.kind() {
            Some("string") => {
                if self.is_patterned() {
                    let judged: Vec<String> = self
                        .pattern_tokens(text)
                        .into_iter()
                        .filter(|t| patterns.matches(self.name, t))
                        .collect();
                    for token in &judged {
                        // "a-1001" and "A-1001" both matching: one value.
                        let twin = judged
                            .iter()
                            .any(|o| o != token && o.to_uppercase() == *token);
                        if !twin || token.to_uppercase() == *token {
                            push(Value::String(token.clone()));
                        }
                    }
                } else if self.schema.get("pattern").is_none() {
                    let mut delimited = delimited_values(text, self.name);
                    if delimited.is_empty() && self.takes_names {
                        delimited = proper_names(text)
                            .into_iter()
                            .filter(|n| self.could_name(&n.text, n.place))
                            .map(|n| n.text)
                            .collect();
                    }
                    for value in delimited {
                        if self.fits_length(&value) {
                            push(Value::String(value));
                        }
                    }
                }
            }
            Some("integer") | Some("number") => {
                for token in tokens(text) {
                    let number = token.trim_end_matches('.').replace(',', ".");
                    if let Ok(n) = number.parse::<i64>() {
                        push(Value::from(n));
                    } else if self.kind() == Some("number")
                        && let Some(n) = number
                            .parse::<f64>()
                            .ok()
                            .and_then(serde_json::Number::from_f64)
                    {
                        push(Value::Number(n));
                    }
                }
            }
            _ => {}
        }
        found
    }

    /// The candidates an earlier message of the user holds (rule 3). For
    /// a free-text property only a value labelled as one: written as
    /// `name: value` or in quotes, or a name that says what it is ("Tienda
    /// Triana" for a store). "Manchester", the city of an earlier search,
    /// is not a store's name.
    pub fn remembered(&self, text: &str, patterns: &PatternMatches) -> Vec<Value> {
        if !self.is_free_text() {
            return self.candidates(text, patterns);
        }
        let label = self.label_concepts();
        let mut found: Vec<Value> = Vec::new();
        let named = proper_names(text)
            .into_iter()
            .filter(|n| {
                self.takes_names
                    && self.could_name(&n.text, n.place)
                    && lexicon::concepts(&n.text)
                        .iter()
                        .any(|c| label.contains(&c.key))
            })
            .map(|n| n.text);
        for value in delimited_values(text, self.name).into_iter().chain(named) {
            let value = Value::String(value);
            if self.fits_length(value.as_str().unwrap_or_default()) && !found.contains(&value) {
                found.push(value);
            }
        }
        found
    }

    /// The concepts this property's name and description speak of.
    fn label_concepts(&self) -> Vec<&'static str> {
        let label = format!(
            "{} {}",
            self.name.replace(['_', '-'], " "),
            self.description().unwrap_or_default()
        );
        lexicon::concepts(&label)
            .into_iter()
            .map(|c| c.key)
            .collect()
    }

    /// Whether a name could be this property's value: it says it is
    /// nothing else ("Covent Garden Store" names a store, not a city), and
    /// one introduced as a place ("en Madrid") names no store or person
    /// unless it says so ("en la Tienda Centro").
    fn could_name(&self, name: &str, place: bool) -> bool {
        let label = self.label_concepts();
        let says = lexicon::concepts(name);
        if !says.iter().all(|c| label.contains(&c.key)) {
            return false;
        }
        !(place && says.is_empty() && label.iter().any(|k| matches!(*k, "#store" | "#customer")))
    }

    /// The answer to "what is <property>?" when the whole message is the
    /// value: a free-text property asked for by name (rule 12 clarifications).
    pub fn whole_answer(&self, said: &Said) -> Option<Value> {
        let trimmed = said.text().trim().trim_end_matches('.').trim();
        // A short statement, not a new question, request or paragraph, and
        // not thanks, a yes or a no ("Vale, muchas gracias" names no store).
        let answer_like = trimmed.split_whitespace().count() <= MAX_ANSWER_WORDS
            && !trimmed.contains('\n')
            && !said.asks_something()
            && !said.is_closing()
            && !said.is_yes()
            && !said.is_no()
            && !said.is_greeting();
        // "En Madrid" answers "which city?" with "Madrid".
        let value = without_lead_in(trimmed);
        let place = said.words().first().is_some_and(|w| is_place_word(w));
        (self.is_free_text()
            && answer_like
            && self.fits_length(value)
            && self.could_name(value, place))
        .then(|| Value::String(value.to_owned()))
    }
}

/// Whitespace-separated tokens with surrounding punctuation removed.
fn tokens(text: &str) -> Vec<String> {
    const EDGE: &[char] = &[
        ',', '.', ';', ':', '!', '?', '¿', '¡', '(', ')', '[', ']', '{', '}', '"', '\'', '«', '»',
        '“', '”', '‘', '’',
    ];
    text.split_whitespace()
        .map(|t| t.trim_matches(EDGE).to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

/// A proper name the user wrote.
struct Name {
    text: String,
    /// Introduced as a place: "en Madrid", "in London".
    place: bool,
}

/// Words that introduce a place.
fn is_place_word(word: &str) -> bool {
    matches!(
        word,
        "en" | "in" | "at" | "desde" | "from" | "near" | "cerca"
    )
}

/// Proper names the user wrote: runs of capitalised words ("Tienda
/// Triana", "San Sebastián de los Reyes"), not a sentence's lone first
/// word ("Qué", "When"), never a token with digits (an identifier) and
/// without a leading article or place word ("En Madrid" is "Madrid").
fn proper_names(text: &str) -> Vec<Name> {
    const CONNECTORS: &[&str] = &["de", "del", "la", "las", "los", "el", "y", "of", "the"];
    const ARTICLES: &[&str] = &[
        "El", "La", "Los", "Las", "The", "Un", "Una", "A", "Y", "And",
    ];
    let mut out: Vec<Name> = Vec::new();
    for sentence in text.split(['.', '?', '!', '¿', '¡', '\n', ',', ';', ':']) {
        let words: Vec<&str> = sentence
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .filter(|w| !w.is_empty())
            .collect();
        let capital = |w: &str| {
            w.chars().next().is_some_and(char::is_uppercase)
                && !w.chars().any(|c| c.is_ascii_digit())
                && w.chars().count() > 1
        };
        let mut at = 0;
        while at < words.len() {
            if !capital(words[at]) {
                at += 1;
                continue;
            }
            let start = at;
            let mut end = at + 1;
            loop {
                if end < words.len() && capital(words[end]) {
                    end += 1;
                } else if end + 1 < words.len()
                    && CONNECTORS.contains(&words[end])
                    && capital(words[end + 1])
                {
                    end += 2;
                } else {
                    break;
                }
            }
            at = end;
            let mut run = &words[start..end];
            let mut place = start > 0 && is_place_word(&fold(words[start - 1]));
            let mut placed_first = false;
            while let [first, rest @ ..] = run {
                if rest.is_empty() {
                    break;
                }
                if is_place_word(&fold(first)) {
                    place = true;
                    placed_first = true;
                    run = rest;
                } else if ARTICLES.contains(first) {
                    run = rest;
                } else {
                    break;
                }
            }
            // A sentence's lone first word is capitalised by grammar; "En
            // Madrid" is not that.
            if start == 0 && run.len() == 1 && !placed_first {
                continue;
            }
            let name = run.join(" ");
            let folded = fold(&name);
            let name_words = super::language::words(&name);
            if run.len() > 5
                || is_stopword(&folded)
                || clauses::is_greeting(&name_words)
                || clauses::is_closing(&name_words)
            {
                continue;
            }
            if !out.iter().any(|n| n.text == name) {
                out.push(Name { text: name, place });
            }
        }
    }
    out
}

/// Quoted values, and `name: value` / `name = value` where `name` is the
/// property name (underscores as spaces), up to the end of the clause.
fn delimited_values(text: &str, property: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (open, close) in [('"', '"'), ('“', '”'), ('«', '»'), ('\'', '\'')] {
        let mut rest = text;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            let inner = after[..end].trim();
            if !inner.is_empty() {
                out.push(inner.to_owned());
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    let label = fold(&property.replace(['_', '-'], " "));
    let folded = fold(text);
    // Folding keeps byte offsets only for ASCII; search the folded text and
    // cut the original at the same char position.
    if let Some(at) = folded.find(&label) {
        let char_at = folded[..at].chars().count() + label.chars().count();
        let tail: String = text.chars().skip(char_at).collect();
        let tail = tail.trim_start();
        if let Some(value) = tail.strip_prefix(':').or_else(|| tail.strip_prefix('=')) {
            let value = value
                .split(['\n', ';', ',', '?', '!'])
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches(['"', '\'', '.'])
                .trim();
            if !value.is_empty() {
                out.push(value.to_owned());
            }
        }
    }
    out
}

/// Whether `value` appears in one of `sources` (folded, as words or as a
/// substring for strings). Objects and arrays are grounded when every
/// scalar inside is.
pub fn is_grounded(value: &Value, sources: &[&str]) -> bool {
    match value {
        Value::String(s) => {
            let needle = fold(s.trim());
            !needle.is_empty() && sources.iter().any(|src| fold(src).contains(&needle))
        }
        Value::Number(n) => {
            let needle = n.to_string();
            sources
                .iter()
                .any(|src| tokens(src).iter().any(|t| t.replace(',', ".") == needle))
        }
        Value::Array(items) => items.iter().all(|v| is_grounded(v, sources)),
        Value::Object(map) => map.values().all(|v| is_grounded(v, sources)),
        Value::Bool(_) | Value::Null => false,
    }
}

/// Every candidate found in `text` for each property: the built-in
/// planner's argument filling. A property with several distinct candidates
/// is left out (the engine asks which one).
pub fn extract(input_schema: &Value, patterns: &PatternMatches, text: &str) -> Map<String, Value> {
    let mut out = Map::new();
    for property in properties(input_schema) {
        let mut candidates = property.candidates(text, patterns);
        if candidates.len() == 1 {
            out.insert(property.name.to_owned(), candidates.remove(0));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "additionalProperties": false, "required": ["order"],
        "properties": {
            "order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z]-[0-9]+$"},
            "channel": {"type": "string", "maxLength": 10, "enum": ["web", "tienda física"]},
            "customer": {"type": "string", "maxLength": 60},
            "count": {"type": "integer"}
        }})
    }

    /// The guest's verdicts for the tokens these tests use.
    fn judged() -> PatternMatches {
        PatternMatches::default().with("order", &["A-1001", "A-1", "B-2"])
    }

    #[test]
    fn fills_only_from_the_users_words() {
        let got = extract(
            &schema(),
            &judged(),
            "¿Dónde está mi pedido A-1001? Lo compré en la tienda física, customer: Ana Pérez",
        );
        assert_eq!(got["order"], "A-1001");
        assert_eq!(got["channel"], "tienda física");
        assert_eq!(got["customer"], "Ana Pérez");
        assert!(!got.contains_key("count"));
        assert!(extract(&schema(), &judged(), "¿Dónde está mi pedido?").is_empty());
    }

    #[test]
    fn several_candidates_are_ambiguous() {
        let got = extract(&schema(), &judged(), "pedidos A-1 y B-2");
        assert!(!got.contains_key("order"));
    }

    #[test]
    fn a_pattern_is_never_run_here_only_the_guests_verdict_counts() {
        let s = schema();
        let order = properties(&s)
            .into_iter()
            .find(|p| p.name == "order")
            .unwrap();
        assert!(order.is_patterned());
        assert_eq!(
            order.pattern_tokens("¿Dónde está mi pedido A-1001?"),
            ["Dónde", "pedido", "A-1001"]
        );
        // Not judged: no candidate, whatever the token looks like.
        assert!(
            order
                .candidates("pedido A-1001", &PatternMatches::default())
                .is_empty()
        );
        // Judged to match: taken, even if a native engine would disagree.
        let odd = PatternMatches::default().with("order", &["pedido"]);
        assert_eq!(order.candidates("mi pedido", &odd), vec![json!("pedido")]);
    }

    #[test]
    fn a_whole_answer_is_a_short_statement() {
        let s = schema();
        let customer = properties(&s)
            .into_iter()
            .find(|p| p.name == "customer")
            .unwrap();
        assert_eq!(
            customer.whole_answer(&Said::new(" Ana Pérez. ")),
            Some(json!("Ana Pérez"))
        );
        assert_eq!(
            customer.whole_answer(&Said::new("¿Dónde está mi pedido A-1001?")),
            None
        );
        let order = properties(&s)
            .into_iter()
            .find(|p| p.name == "order")
            .unwrap();
        assert_eq!(
            order.whole_answer(&Said::new("A-1001")),
            None,
            "patterned values come from candidates"
        );
    }

    #[test]
    fn a_proper_name_fills_the_only_free_text_property() {
        let s = json!({"type": "object", "properties": {
            "store": {"type": "string", "maxLength": 60},
            "day": {"type": "string", "maxLength": 10, "enum": ["lunes", "monday"]}}});
        let none = PatternMatches::default();
        assert_eq!(
            extract(&s, &none, "¿Y a qué hora abre la Tienda Triana?")["store"],
            "Tienda Triana"
        );
        assert_eq!(
            extract(&s, &none, "What time does Tienda Centro open on monday?")["store"],
            "Tienda Centro"
        );
        assert!(extract(&s, &none, "¿A qué hora abre?").is_empty());
        assert!(extract(&s, &none, "When does it close?").is_empty());
        // With two free-text properties a name is not guessed.
        let two = json!({"type": "object", "properties": {
            "store": {"type": "string"}, "city": {"type": "string"}}});
        assert!(extract(&two, &none, "la Tienda Triana").is_empty());
    }

    #[test]
    fn a_lowercase_code_is_offered_in_capitals_too() {
        let s = schema();
        let order = properties(&s)
            .into_iter()
            .find(|p| p.name == "order")
            .unwrap();
        assert_eq!(order.pattern_tokens("a-1001"), ["a-1001", "A-1001"]);
        assert_eq!(order.candidates("a-1001", &judged()), vec![json!("A-1001")]);
    }

    #[test]
    fn thanks_and_yes_are_not_answers() {
        let s = schema();
        let customer = properties(&s)
            .into_iter()
            .find(|p| p.name == "customer")
            .unwrap();
        for not_an_answer in ["Vale, muchas gracias", "gracias", "sí", "no", "Hola"] {
            assert_eq!(
                customer.whole_answer(&Said::new(not_an_answer)),
                None,
                "{not_an_answer}"
            );
        }
    }

    #[test]
    fn grounding() {
        assert!(is_grounded(&json!("A-1001"), &["mi pedido a-1001"]));
        assert!(!is_grounded(&json!("A-9999"), &["mi pedido A-1001"]));
        assert!(is_grounded(&json!(3), &["quiero 3 unidades"]));
        assert!(!is_grounded(&json!(30), &["quiero 3 unidades"]));
        assert!(!is_grounded(&json!(true), &["sí"]));
    }

    fn property<'s>(schema: &'s Value, name: &str) -> Property<'s> {
        properties(schema)
            .into_iter()
            .find(|p| p.name == name)
            .unwrap()
    }

    #[test]
    fn a_place_names_a_city_not_a_store_and_a_store_is_no_city() {
        let none = PatternMatches::default();
        let store = json!({"type": "object", "properties": {
            "store": {"type": "string", "maxLength": 60, "description": "el nombre de la tienda"}}});
        let city = json!({"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 60, "description": "the city"}}});
        assert!(extract(&store, &none, "¿Qué tienda hay en Madrid?").is_empty());
        assert_eq!(
            extract(&city, &none, "¿Qué tienda hay en Madrid?")["city"],
            "Madrid"
        );
        assert_eq!(
            extract(&city, &none, "Which store is there in London?")["city"],
            "London"
        );
        assert!(extract(&city, &none, "What time does Covent Garden Store open?").is_empty());
        assert_eq!(
            extract(&store, &none, "What time does Covent Garden Store open?")["store"],
            "Covent Garden Store"
        );
        assert_eq!(
            extract(&store, &none, "¿Abre hoy en la Tienda Centro?")["store"],
            "Tienda Centro"
        );
    }

    #[test]
    fn history_gives_a_free_text_value_only_when_it_says_what_it_is() {
        let none = PatternMatches::default();
        let store = json!({"type": "object", "properties": {
            "store": {"type": "string", "maxLength": 60, "description": "el nombre de la tienda"}}});
        let p = property(&store, "store");
        assert!(
            p.remembered("Which stores are there in Manchester?", &none)
                .is_empty()
        );
        assert!(
            p.remembered("Tengo una duda sobre Luis Gómez", &none)
                .is_empty()
        );
        assert_eq!(
            p.remembered("Quería preguntar por la Tienda Triana", &none),
            vec![json!("Tienda Triana")]
        );
        assert_eq!(p.remembered("store: Centro", &none), vec![json!("Centro")]);
    }

    #[test]
    fn a_whole_answer_without_its_lead_in_and_never_a_new_request() {
        let city = json!({"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 60, "description": "la ciudad"}}});
        let store = json!({"type": "object", "properties": {
            "store": {"type": "string", "maxLength": 60, "description": "el nombre de la tienda"}}});
        assert_eq!(
            property(&city, "city").whole_answer(&Said::new("En Madrid")),
            Some(json!("Madrid"))
        );
        assert_eq!(
            property(&city, "city").whole_answer(&Said::new("in London.")),
            Some(json!("London"))
        );
        assert_eq!(
            property(&store, "store").whole_answer(&Said::new("Es la Tienda Diagonal")),
            Some(json!("Tienda Diagonal"))
        );
        assert_eq!(
            property(&store, "store").whole_answer(&Said::new("El Corte Inglés")),
            Some(json!("El Corte Inglés"))
        );
        assert_eq!(
            property(&store, "store").whole_answer(&Said::new("En Madrid")),
            None
        );
        assert_eq!(
            property(&store, "store")
                .whole_answer(&Said::new("Mejor dime dónde está mi pedido A-1001")),
            None
        );
        assert_eq!(
            property(&store, "store").whole_answer(&Said::new("Tell me where my order is")),
            None
        );
    }
}
