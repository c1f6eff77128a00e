//! Validating and pruning JSON values with a compiled [`Schema`].
//!
//! This is the tree walker, on parsed values. The text entry points
//! ([`Schema::validate_text`], [`Schema::prune_text`]) are the streaming
//! pass's, in `stream/`, which calls this walker for the nodes it does not
//! stream: the streaming pass depends on this module, never the reverse.

use serde_json::{Map, Value};

use crate::number::Exact;
use crate::schema::{Node, Schema, types};
use crate::violation::{Pointer, Violation, Violations};

/// Where a value sits, as a chain of borrowed segments: built for free while
/// walking, rendered to a JSON pointer only when a violation is reported.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    pub(crate) fn key(&'a self, k: &'a str) -> Path<'a> {
        Path::Key(self, k)
    }

    pub(crate) fn index(&'a self, i: usize) -> Path<'a> {
        Path::Index(self, i)
    }

    pub(crate) fn render(&self) -> String {
        match self {
            Path::Root => String::new(),
            Path::Key(parent, k) => Pointer::parse(&parent.render()).key(k).as_str().to_string(),
            Path::Index(parent, i) => format!("{}/{i}", parent.render()),
        }
    }
}

impl Schema {
    /// Validates a parsed value. Violations point into the value.
    pub fn validate(&self, value: &Value) -> Result<(), Vec<Violation>> {
        let mut out = Violations::new();
        check(&self.root, value, &Path::Root, &mut Sink::Report(&mut out));
        out.finish(())
    }

    /// Removes every property the schema does not declare (at any depth,
    /// inside array items too), then validates what remains (2.6 rule 9).
    pub fn prune(&self, mut value: Value) -> Result<Value, Vec<Violation>> {
        prune(&self.root, &mut value);
        self.validate(&value)?;
        Ok(value)
    }
}

/// Tree walker entry points for the streaming pass (`stream/`: nodes it does
/// not stream).
pub(crate) fn prune_tree(node: &Node, value: &mut Value) {
    prune(node, value)
}

pub(crate) fn check_tree(node: &Node, value: &Value, at: &Path<'_>, out: &mut Violations) {
    check(node, value, at, &mut Sink::Report(out))
}

pub(crate) fn check_string_into(node: &Node, s: &str, at: &Path<'_>, out: &mut Violations) {
    check_string(node, s, at, &mut Sink::Report(out))
}

/// Whether pruning keeps only the declared members of an object value at
/// `node`: an object schema (its type says object, it declares properties,
/// or it closes the object, as 2.6 rule 1 has every object schema do).
/// Any other schema (`{}`, a bare `enum` or `const`) keeps the value whole.
pub(crate) fn keeps_declared_only(node: &Node) -> bool {
    node.types & types::OBJECT != 0 || !node.properties.is_empty() || node.closed
}

fn prune(node: &Node, value: &mut Value) {
    match value {
        Value::Object(map) if keeps_declared_only(node) => {
            map.retain(|k, _| node.property(k).is_some());
            for (k, v) in map.iter_mut() {
                if let Some(child) = node.property(k) {
                    prune(child, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &node.items {
                for v in items.iter_mut() {
                    prune(item, v);
                }
            }
        }
        _ => {}
    }
}

/// Where failures go: reported, or only counted (inside anyOf/oneOf/not,
/// where a branch failing is not itself a violation).
enum Sink<'a> {
    Report(&'a mut Violations),
    Probe(bool),
}

impl Sink<'_> {
    fn fail(&mut self, at: &Path<'_>, rule: &str, message: impl FnOnce() -> String) {
        match self {
            Sink::Report(out) => out.push_at(at.render(), rule, message()),
            Sink::Probe(failed) => *failed = true,
        }
    }

    /// Stop walking: nothing more can be recorded, or a probe already failed.
    fn done(&self) -> bool {
        match self {
            Sink::Report(out) => out.is_full(),
            Sink::Probe(failed) => *failed,
        }
    }
}

fn passes(node: &Node, value: &Value, at: &Path<'_>) -> bool {
    let mut probe = Sink::Probe(false);
    check(node, value, at, &mut probe);
    matches!(probe, Sink::Probe(false))
}

fn type_of(value: &Value) -> u8 {
    match value {
        Value::Null => types::NULL,
        Value::Bool(_) => types::BOOLEAN,
        Value::Object(_) => types::OBJECT,
        Value::Array(_) => types::ARRAY,
        Value::String(_) => types::STRING,
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                types::NUMBER | types::INTEGER
            } else {
                types::NUMBER
            }
        }
    }
}

pub(crate) fn type_names(t: u8) -> String {
    let names = [
        (types::OBJECT, "object"),
        (types::ARRAY, "array"),
        (types::STRING, "string"),
        (types::INTEGER, "integer"),
        (types::NUMBER, "number"),
        (types::BOOLEAN, "boolean"),
        (types::NULL, "null"),
    ];
    names
        .iter()
        .filter(|(b, _)| t & b != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(" or ")
}

/// JSON equality with numbers compared by value (1 == 1.0), exactly, as
/// JSON Schema compares them (2^64 does not equal u64::MAX, though both
/// round to the same f64).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Exact::of(x).equals(Exact::of(y)),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn check(node: &Node, value: &Value, at: &Path<'_>, sink: &mut Sink<'_>) {
    if sink.done() {
        return;
    }
    let actual = type_of(value);
    if node.types != 0 && node.types & actual == 0 {
        sink.fail(at, "type-mismatch", || {
            format!("expected {}", type_names(node.types))
        });
        return;
    }
    if let Some(c) = &node.constant
        && !json_eq(c, value)
    {
        sink.fail(at, "const-mismatch", || format!("must equal {c}"));
    }
    if let Some(list) = &node.enumeration
        && !list.iter().any(|e| json_eq(e, value))
    {
        sink.fail(at, "enum-mismatch", || {
            "is not one of the allowed values".to_string()
        });
    }
    match value {
        Value::String(s) => check_string(node, s, at, sink),
        Value::Array(items) => check_array(node, items, at, sink),
        Value::Object(map) => check_object(node, map, at, sink),
        Value::Number(n) => {
            let x = Exact::of(n);
            if let Some(m) = node.minimum
                && x.compare(m).is_lt()
            {
                sink.fail(at, "number-too-small", || format!("must be at least {m}"));
            }
            if let Some(m) = node.maximum
                && x.compare(m).is_gt()
            {
                sink.fail(at, "number-too-large", || format!("must be at most {m}"));
            }
        }
        _ => {}
    }
    if !node.any_of.is_empty() && !node.any_of.iter().any(|b| passes(b, value, at)) {
        sink.fail(at, "any-of-no-match", || {
            "matches none of the anyOf alternatives".to_string()
        });
    }
    if !node.one_of.is_empty() {
        let n = node.one_of.iter().filter(|b| passes(b, value, at)).count();
        if n != 1 {
            sink.fail(at, "one-of-not-exactly-one", || {
                format!("must match exactly one oneOf alternative; matches {n}")
            });
        }
    }
    if let Some(not) = &node.not
        && passes(not, value, at)
    {
        sink.fail(at, "not-matched", || {
            "matches a schema it must not match".to_string()
        });
    }
}

fn check_string(node: &Node, s: &str, at: &Path<'_>, sink: &mut Sink<'_>) {
    // Lengths count Unicode code points; a byte count bounds them from above,
    // so the common case needs no scan.
    let mut chars: Option<usize> = None;
    let mut count = || *chars.get_or_insert_with(|| s.chars().count());
    let mut length_ok = true;
    if let Some(max) = node.max_length
        && s.len() as u64 > max
        && count() as u64 > max
    {
        sink.fail(at, "string-too-long", || {
            format!("must be at most {max} characters")
        });
        length_ok = false;
    }
    if let Some(min) = node.min_length
        && ((s.len() as u64) < min || (count() as u64) < min)
    {
        sink.fail(at, "string-too-short", || {
            format!("must be at least {min} characters")
        });
    }
    // The pattern runs only on strings within maxLength (bounded work).
    if let Some(re) = &node.pattern
        && length_ok
        && !re.is_match(s)
    {
        sink.fail(at, "pattern-mismatch", || {
            "does not match the required pattern".to_string()
        });
    }
}

fn check_array(node: &Node, items: &[Value], at: &Path<'_>, sink: &mut Sink<'_>) {
    if let Some(max) = node.max_items
        && items.len() as u64 > max
    {
        sink.fail(at, "array-too-long", || {
            format!("must hold at most {max} items")
        });
        return;
    }
    if let Some(min) = node.min_items
        && (items.len() as u64) < min
    {
        sink.fail(at, "array-too-short", || {
            format!("must hold at least {min} items")
        });
    }
    if let Some(item) = &node.items {
        for (i, v) in items.iter().enumerate() {
            if sink.done() {
                return;
            }
            check(item, v, &at.index(i), sink);
        }
    }
}

fn check_object(node: &Node, map: &Map<String, Value>, at: &Path<'_>, sink: &mut Sink<'_>) {
    for name in &node.required {
        if !map.contains_key(name) {
            sink.fail(&at.key(name), "required-missing", || {
                format!("required property \"{name}\" is missing")
            });
        }
    }
    for (k, v) in map {
        if sink.done() {
            return;
        }
        match node.property(k) {
            Some(child) => check(child, v, &at.key(k), sink),
            None if node.closed => sink.fail(&at.key(k), "property-not-allowed", || {
                format!("property \"{k}\" is not declared")
            }),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::schema::{Dialect, compile};
    use serde_json::{Value, json};

    /// Validates through the tree walker and through the streaming pass,
    /// asserts they agree (as sets), and returns the tree walker's list.
    fn errs(schema: Value, value: Value) -> Vec<(String, String)> {
        let s = compile(Dialect::Input, &schema).expect("schema compiles");
        let pairs = |r: Result<(), Vec<crate::Violation>>| match r {
            Ok(()) => vec![],
            Err(v) => v
                .into_iter()
                .map(|v| (v.pointer, v.rule))
                .collect::<Vec<_>>(),
        };
        let tree = pairs(s.validate(&value));
        let streamed = pairs(s.validate_text(&value.to_string()));
        let (mut a, mut b) = (tree.clone(), streamed);
        a.sort();
        b.sort();
        assert_eq!(a, b, "tree walker and streaming pass disagree");
        tree
    }

    fn e(p: &str, r: &str) -> (String, String) {
        (p.into(), r.into())
    }

    fn schema() -> Value {
        json!({"type": "object", "additionalProperties": false, "required": ["q"],
        "properties": {
            "q": {"type": "string", "maxLength": 5, "minLength": 2, "pattern": "^[a-z]+$"},
            "k": {"type": "string", "maxLength": 3, "enum": ["a", "b"]},
            "n": {"type": "integer"},
            "c": {"const": 1},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 2}}
        }})
    }

    #[test]
    fn valid_arguments_pass() {
        assert!(
            errs(
                schema(),
                json!({"q": "abc", "k": "a", "n": 3, "c": 1.0, "tags": ["x"]})
            )
            .is_empty()
        );
    }

    #[test]
    fn each_keyword_is_enforced() {
        assert_eq!(errs(schema(), json!({})), vec![e("/q", "required-missing")]);
        assert_eq!(
            errs(schema(), json!({"q": "abcdef"})),
            vec![e("/q", "string-too-long")]
        );
        assert_eq!(
            errs(schema(), json!({"q": "a"})),
            vec![e("/q", "string-too-short")]
        );
        assert_eq!(
            errs(schema(), json!({"q": "AB"})),
            vec![e("/q", "pattern-mismatch")]
        );
        assert_eq!(
            errs(schema(), json!({"q": "ab", "k": "z"})),
            vec![e("/k", "enum-mismatch")]
        );
        assert_eq!(
            errs(schema(), json!({"q": "ab", "n": 1.5})),
            vec![e("/n", "type-mismatch")]
        );
        assert_eq!(
            errs(schema(), json!({"q": "ab", "c": 2})),
            vec![e("/c", "const-mismatch")]
        );
        assert_eq!(
            errs(schema(), json!({"q": "ab", "x": 1})),
            vec![e("/x", "property-not-allowed")]
        );
        assert_eq!(
            errs(schema(), json!({"q": "ab", "tags": ["a", "b", "c"]})),
            vec![e("/tags", "array-too-long")]
        );
        assert_eq!(
            errs(schema(), json!({"q": "ab", "tags": ["abc"]})),
            vec![e("/tags/0", "string-too-long")]
        );
        assert_eq!(errs(schema(), json!([])), vec![e("", "type-mismatch")]);
    }

    #[test]
    fn lengths_count_code_points() {
        assert!(
            errs(schema(), json!({"q": "ab", "k": "ñ"}))
                .iter()
                .all(|(_, r)| r == "enum-mismatch")
        );
        let s = json!({"type": "object", "additionalProperties": false, "properties": {"s": {"type": "string", "maxLength": 2}}});
        assert!(errs(s, json!({"s": "ññ"})).is_empty());
    }

    #[test]
    fn exactly_one_of_two_required() {
        let base = json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert!(errs(base.clone(), json!({"a": true})).is_empty());
        assert_eq!(
            errs(base.clone(), json!({"a": true, "b": true})),
            vec![e("", "one-of-not-exactly-one")]
        );
        assert_eq!(errs(base, json!({})), vec![e("", "one-of-not-exactly-one")]);
        let any_not = json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}], "not": {"required": ["a", "b"]}});
        assert!(errs(any_not.clone(), json!({"b": false})).is_empty());
        assert_eq!(
            errs(any_not.clone(), json!({})),
            vec![e("", "any-of-no-match")]
        );
        assert_eq!(
            errs(any_not, json!({"a": true, "b": true})),
            vec![e("", "not-matched")]
        );
    }

    #[test]
    fn pruning_drops_undeclared_fields_then_validates() {
        let out = compile(Dialect::Output, &json!({"type": "object", "additionalProperties": false,
            "properties": {"name": {"type": "string", "maxLength": 10},
                "items": {"type": "array", "maxItems": 3, "items": {"type": "object", "additionalProperties": false,
                    "properties": {"id": {"type": "integer"}}}}}})).unwrap();
        let pruned = out
            .prune(json!({"name": "x", "secret": "s", "items": [{"id": 1, "internal": true}]}))
            .unwrap();
        assert_eq!(pruned, json!({"name": "x", "items": [{"id": 1}]}));
        let err = out
            .prune(json!({"name": "far too long a name", "junk": 1}))
            .unwrap_err();
        assert_eq!(err[0].rule, "string-too-long");
        assert_eq!(err.len(), 1);
    }

    /// Contract 2.6 rule 9: undeclared output fields are removed, also
    /// under an object schema that only closes the object (no `type`, no
    /// `properties`: every member is undeclared; an output root, or a
    /// member that says `enum` or `const`). Both pruners once kept them and
    /// then refused the result as `property-not-allowed`.
    #[test]
    fn a_closed_schema_without_type_prunes_every_member() {
        let nested = json!({"type": "object", "additionalProperties": false,
            "properties": {"o": {"enum": [{}, 1], "additionalProperties": false}}});
        for (schema, input, pruned) in [
            (
                json!({"additionalProperties": false}),
                json!({"x": 1, "y": [2]}),
                json!({}),
            ),
            (
                nested,
                json!({"o": {"x": {"y": 1}}, "z": 2}),
                json!({"o": {}}),
            ),
        ] {
            let s = compile(Dialect::Output, &schema).unwrap();
            assert_eq!(s.prune(input.clone()).unwrap(), pruned, "{schema}");
            let text = s.prune_text(&input.to_string()).unwrap();
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), pruned);
            assert_eq!(
                serde_json::from_str::<Value>(&s.prune_text(&input.to_string()).unwrap()).unwrap(),
                serde_json::from_str::<Value>(
                    &crate::stream_reference::run(&s, &input.to_string(), true).unwrap()
                )
                .unwrap()
            );
            // Not pruned, the members are refused.
            assert!(s.validate(&input).is_err());
        }
    }

    /// Numbers compare by value, exactly, as JSON Schema compares them:
    /// through `f64` alone, integers past 2^53 were rounded, so 2^64 (a
    /// float) equalled u64::MAX and 9007199254740992.0 passed a `minimum` of
    /// 9007199254740993.
    #[test]
    fn numbers_compare_exactly_past_f64_precision() {
        let s = json!({"type": "object", "additionalProperties": false, "properties": {
            "e": {"enum": [18_446_744_073_709_551_615_u64, 2]},
            "c": {"const": 9_007_199_254_740_993_u64}}});
        assert_eq!(
            errs(s.clone(), json!({"e": 18_446_744_073_709_551_616.0})),
            vec![e("/e", "enum-mismatch")]
        );
        assert_eq!(
            errs(s.clone(), json!({"c": 9_007_199_254_740_992.0})),
            vec![e("/c", "const-mismatch")]
        );
        assert!(errs(s, json!({"e": 2.0, "c": 9_007_199_254_740_993_u64})).is_empty());

        let bounded = compile(
            Dialect::Integration,
            &json!({"type": "object",
            "additionalProperties": false, "properties": {
                "lo": {"type": "integer", "minimum": 9_007_199_254_740_993_u64},
                "hi": {"type": "number", "maximum": 9_007_199_254_740_992.0}}}),
        )
        .unwrap();
        for (doc, rule) in [
            (r#"{"lo":9007199254740992.0}"#, Some("number-too-small")),
            (r#"{"lo":9007199254740992}"#, Some("number-too-small")),
            (r#"{"lo":9007199254740993}"#, None),
            (r#"{"hi":9007199254740993}"#, Some("number-too-large")),
            (r#"{"hi":9007199254740992}"#, None),
            (r#"{"hi":-1e300}"#, None),
        ] {
            let tree = bounded.validate(&serde_json::from_str(doc).unwrap());
            for got in [tree, bounded.validate_text(doc)] {
                let got = got.err().map(|v| v[0].rule.clone());
                assert_eq!(got.as_deref(), rule, "{doc}");
            }
        }
    }

    #[test]
    fn streaming_handles_what_the_tree_cannot_see() {
        let s = compile(Dialect::Input, &schema()).unwrap();
        // Duplicate members: a tree keeps the last; the stream refuses them.
        assert_eq!(
            s.validate_text(r#"{"q":"ab","q":"cd"}"#).unwrap_err()[0].rule,
            "duplicate-key"
        );
        // Items past maxItems are not even parsed into values.
        let many = format!(
            "{{\"q\":\"ab\",\"tags\":[{}]}}",
            vec!["\"a\""; 10_000].join(",")
        );
        let v = s.validate_text(&many).unwrap_err();
        assert_eq!(
            (v[0].pointer.as_str(), v[0].rule.as_str()),
            ("/tags", "array-too-long")
        );
        assert_eq!(v.len(), 1);
        // Arrays and objects in every position, nested.
        assert_eq!(
            errs(
                schema(),
                json!({"q": "ab", "tags": [[], {}], "k": ["a"], "n": {}})
            )
            .len(),
            4
        );
        assert_eq!(
            errs(schema(), json!([1, 2, {"q": 1}])),
            vec![e("", "type-mismatch")]
        );
    }

    #[test]
    fn streaming_prune_matches_pruning_a_parsed_value() {
        let out = compile(Dialect::Output, &json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "array", "maxItems": 5, "items": {"type": "object", "additionalProperties": false,
                "properties": {"x": {"type": ["integer", "null"]}, "y": {"type": "string", "maxLength": 9}}}},
                "b": {"type": "string", "maxLength": 9}}})).unwrap();
        let input = json!({"a": [{"x": 1, "z": {"deep": [1, 2]}}, {"y": "k\"q", "x": null}], "b": "s", "c": [1, {"d": 2}]});
        let streamed: Value =
            serde_json::from_str(&out.prune_text(&input.to_string()).unwrap()).unwrap();
        assert_eq!(streamed, out.prune(input).unwrap());
        assert_eq!(
            streamed,
            json!({"a": [{"x": 1}, {"y": "k\"q", "x": null}], "b": "s"})
        );
        assert_eq!(
            out.prune_text("{\"a\": [} ").unwrap_err()[0].rule,
            "invalid-json"
        );
        assert_eq!(
            out.prune_text("{} trailing").unwrap_err()[0].rule,
            "invalid-json"
        );
    }

    #[test]
    fn invalid_json_is_one_violation() {
        let s = compile(Dialect::Input, &schema()).unwrap();
        let err = s.validate_text("{nope").unwrap_err();
        assert_eq!(
            (err[0].pointer.as_str(), err[0].rule.as_str()),
            ("", "invalid-json")
        );
        let deep = "[".repeat(10_000);
        assert_eq!(s.validate_text(&deep).unwrap_err()[0].rule, "invalid-json");
    }

    /// How `value`, as property `v` of an input object whose `v` is `prop`,
    /// is judged by the tree walker, and by the streaming pass on compact and
    /// on spaced text, validating and pruning: one line for each of them
    /// that does not say `expected`.
    fn misjudged(prop: Value, value: Value, expected: bool) -> Vec<String> {
        let schema = json!({"type": "object", "additionalProperties": false,
            "properties": {"v": prop}});
        let s = compile(Dialect::Input, &schema)
            .unwrap_or_else(|e| panic!("{schema} does not compile: {e:?}"));
        let doc = json!({ "v": value });
        let compact = doc.to_string();
        let spaced = serde_json::to_string_pretty(&doc).unwrap();
        [
            ("tree", s.validate(&doc).is_ok()),
            ("text", s.validate_text(&compact).is_ok()),
            ("spaced text", s.validate_text(&spaced).is_ok()),
            ("prune text", s.prune_text(&compact).is_ok()),
        ]
        .into_iter()
        .filter(|&(_, ok)| ok != expected)
        .map(|(how, ok)| format!("{how} says valid={ok}: {value} against {schema}"))
        .collect()
    }

    /// Contract 2.6 rule 8's combinators constrain every value, not only
    /// objects: on a value that is not an object a branch that only lists
    /// `required` (or nothing) holds (JSON Schema's `required` ignores
    /// non-objects), so `not` of it refuses the value, `oneOf` of two such
    /// branches refuses it, `anyOf` and a single `oneOf` branch accept it.
    /// The streaming pass once skipped them on anything but an object.
    #[test]
    fn combinators_judge_values_that_are_not_objects() {
        let mut wrong = Vec::new();
        let mut judged = |prop, value, expected| wrong.extend(misjudged(prop, value, expected));
        let s5 = json!({"type": "string", "maxLength": 5});
        let with = |base: &Value, kw: &str, v: Value| {
            let mut b = base.clone();
            b[kw] = v;
            b
        };
        // The issue's cases: an empty `not` refuses everything.
        let not_empty = json!({});
        judged(
            with(&json!({"type": "integer"}), "not", not_empty.clone()),
            json!(1),
            false,
        );
        judged(
            with(&json!({"type": "number"}), "not", not_empty.clone()),
            json!(1.5),
            false,
        );
        judged(with(&s5, "not", not_empty.clone()), json!("foo"), false);
        judged(
            with(
                &json!({"type": "array", "maxItems": 3, "items": {"type": "integer"}}),
                "not",
                not_empty.clone(),
            ),
            json!([]),
            false,
        );
        judged(
            with(&json!({"type": "null"}), "not", not_empty.clone()),
            json!(null),
            false,
        );
        judged(
            with(&json!({"type": "boolean"}), "not", not_empty.clone()),
            json!(true),
            false,
        );
        judged(
            json!({"type": "string", "maxLength": 10, "oneOf": [{}, {}]}),
            json!("x"),
            false,
        );
        // A single branch, anyOf: the value passes.
        judged(with(&s5, "oneOf", json!([{}])), json!("x"), true);
        judged(with(&s5, "anyOf", json!([{}, {}])), json!("x"), true);
        // Branches listing required properties, on a value that may be an
        // object or not.
        let either = json!({"type": ["object", "string", "integer"], "maxLength": 5,
            "additionalProperties": false,
            "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}});
        let two = json!([{"required": ["a"]}, {"required": ["b"]}]);
        for v in [json!("x"), json!(7)] {
            judged(
                with(&either, "not", json!({"required": ["a"]})),
                v.clone(),
                false,
            );
            judged(with(&either, "oneOf", two.clone()), v.clone(), false);
            judged(with(&either, "anyOf", two.clone()), v.clone(), true);
            judged(
                with(&either, "oneOf", json!([{"required": ["a"]}])),
                v,
                true,
            );
        }
        judged(
            with(&either, "not", json!({"required": ["a"]})),
            json!({"b": true}),
            true,
        );
        judged(
            with(&either, "not", json!({"required": ["a"]})),
            json!({"a": true}),
            false,
        );
        judged(
            with(&either, "oneOf", two.clone()),
            json!({"a": true}),
            true,
        );
        judged(
            with(&either, "oneOf", two.clone()),
            json!({"a": true, "b": true}),
            false,
        );
        // In array items, where scalars take the array's own fast path.
        judged(
            json!({"type": "array", "maxItems": 3, "items": with(&json!({"type": "integer"}), "not", json!({}))}),
            json!([1]),
            false,
        );
        judged(
            json!({"type": "array", "maxItems": 3, "items": with(&s5, "oneOf", json!([{}, {}]))}),
            json!(["x"]),
            false,
        );
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
