//! Differential test of the schema language against a general JSON Schema
//! validator (the `jsonschema` crate, draft 2020-12).
//!
//! Random schemas that this crate's own checker admits (input, output and
//! prompt-integration dialects) and random instances biased to be near
//! them (right and wrong types, lengths and item counts at their bounds,
//! required members present or missing, undeclared members, enum members
//! and near misses, nested objects and arrays, combinators) are judged by
//! the rule library, through the tree walker ([`Schema::validate`]) and the
//! streaming pass ([`Schema::validate_text`], on text spelled in varied
//! ways: whitespace, `\u` escapes, number spellings), and by `jsonschema`:
//! the verdicts (valid or not) must be identical. Output schemas are also
//! pruned ([`Schema::prune_text`], [`Schema::prune`]): the result must be
//! the instance with every undeclared member removed (contract 2.6 rule 9,
//! computed here independently) and valid exactly when `jsonschema` finds
//! that pruned instance valid.
//!
//! `WARDEN_SCHEMA_DIFF_CASES` (default 2,000: a few seconds; the long run
//! is 100,000 or more, see guest-policy/README.md) sets the number of
//! schema-instance pairs, `WARDEN_SCHEMA_DIFF_SEED` the seed (default
//! fixed, so `make test` is deterministic). A disagreement is reported with
//! the seed, the case, and the schema and instance shrunk to a minimal pair
//! that still disagrees.
//!
//! Patterns are drawn from a fixed list of ECMAScript patterns with strings
//! that match or nearly match them: literals, classes and ranges (astral
//! ones too), anchors, groups, alternation, counted repetition, `.`, `\d`,
//! `\w`, `\s`, `\S`, `\p{L}`, `\u{...}`, `\cJ`, lookahead (U+00A0, U+FEFF,
//! U+2028 and other characters where `\s` differs between regex dialects
//! included). Three differences between the engines are known and kept
//! out, all `jsonschema`'s departures from ECMAScript (which `regress`, the
//! crate's engine, follows, as contract 2.6 rule 7 requires): its `.`
//! matches `\r`, U+2028 and U+2029; its `\b` takes non-ASCII letters for
//! word characters (`\bab\b` does not match "éab"); so does its `\w` in a
//! pattern with a lookaround (`(?=a)\w{2}` matches "aé"). So generated
//! strings never hold those three characters, no pattern uses `\b`, and the
//! lookahead patterns use classes. Backreferences are left out: the checker
//! refuses them (`regex_guard`).

use std::fmt::Write as _;
use std::time::Instant;

use serde_json::{Map, Number, Value, json};
use warden_policy_rules::schema::{Dialect, Schema, compile};

/// SplitMix64: small, seedable, good enough to explore.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Patterns with strings that match or nearly match them.
const PATTERNS: &[(&str, &[&str])] = &[
    ("^[a-z]+$", &["abc", "", "aBc", "a1", "é"]),
    ("^[A-Z0-9-]+$", &["A-1001", "a-1001", "A_1", "-"]),
    ("^[a-c]{1,3}$", &["a", "abc", "abca", "", "d"]),
    ("^[0-9]{2}$", &["12", "1", "123", "1a"]),
    ("^[a-z_]{2,4}$", &["ab", "a_b_", "a", "abcde", "A_"]),
    ("^[a-c-]*$", &["a-c", "-", "d", ""]),
    ("a", &["a", "bab", "b", ""]),
    ("^a", &["ab", "ba", "a"]),
    ("b$", &["ab", "ba", "b\n"]),
    ("^(ab|c)*$", &["abc", "cab", "abab", "a", "", "b"]),
    ("^[^x]*$", &["abc", "axc", "", "é"]),
    ("x|y", &["x", "zy", "z"]),
    ("^a.c$", &["abc", "aéc", "a\nc", "ac", "a😀c"]),
    ("^\\d+$", &["123", "12a", "", "٣"]),
    ("^.{2}$", &["ab", "é😀", "a", "abc", "a\n"]),
    ("é", &["é", "e", "aéb"]),
    ("^\\w+$", &["ab_1", "é", "a b", ""]),
    (
        "^\\s$",
        &[
            " ", "\u{a0}", "\u{feff}", "\u{2028}", "\t", "\u{85}", "\u{180e}", "a",
        ],
    ),
    ("^\\S+$", &["ab", "a\u{a0}", "a\u{feff}"]),
    ("^(?=a)[a-zé]{2}$", &["ab", "ba", "aé"]),
    ("^(?!b)[a-c]{2}$", &["ab", "ba"]),
    ("^\\p{L}+$", &["abé", "a1", "ñ"]),
    ("^[\\s\\S]{2}$", &["a\n", "ab", "a"]),
    ("^\\u{1F600}$", &["😀", "a"]),
    ("^[😀-😂]$", &["😁", "a"]),
    ("^\\cJ$", &["\n", "J"]),
    ("^[0-9]{3}-[A-Z]{2}$", &["123-AB", "12-AB", "123-ab"]),
    ("^(a|b)?c{0,2}$", &["", "acc", "bccc", "c", "ab"]),
];

/// Property names: short and long, sharing prefixes (the streaming pass
/// matches the first eight bytes as a word), and some that need escaping
/// or are not plain.
const NAMES: &[&str] = &[
    "a",
    "b",
    "c",
    "ab",
    "abc",
    "id",
    "identifier_one",
    "identifier_two",
    "q\"t",
    "back\\s",
    "ñu",
    "a b",
    "",
];

/// Characters of generated strings: ASCII, two- and four-byte UTF-8,
/// characters JSON escapes (`"`, `\`, newline, a control character).
const CHARS: &[char] = &[
    'a', 'b', 'c', 'x', 'z', 'A', 'Z', '0', '1', '9', '-', '_', ' ', 'é', 'ñ', '😀', '"', '\\',
    '\n', '\u{1}', '/',
];

struct Gen<'r> {
    rng: &'r mut Rng,
    dialect: Dialect,
}

impl Gen<'_> {
    // ---- schemas --------------------------------------------------------

    fn root(&mut self) -> Value {
        if self.dialect == Dialect::Output && self.rng.chance(15) {
            return if self.rng.chance(30) {
                json!({"additionalProperties": false})
            } else {
                self.member(1)
            };
        }
        self.object(0)
    }

    /// A property or item schema: says what it is (a type, or enum / const).
    fn member(&mut self, depth: usize) -> Value {
        let integration = self.dialect == Dialect::Integration;
        let kinds: &[u8] = if integration && depth >= 3 {
            b"sinb"
        } else if depth >= 3 {
            b"sinbl"
        } else if integration {
            b"sinbaoossaa"
        } else {
            b"sinblaoommEC"
        };
        let mut s = match *self.rng.pick(kinds) {
            b's' => self.string(),
            b'i' => self.number("integer"),
            b'n' => self.number("number"),
            b'b' => json!({"type": "boolean"}),
            b'l' => json!({"type": "null"}),
            b'a' => self.array(depth),
            b'o' => self.object(depth),
            b'm' => self.multi(depth),
            b'E' => {
                let n = 1 + self.rng.below(4);
                json!({"enum": self.values(n)})
            }
            _ => json!({"const": self.value(2)}),
        };
        if self.rng.chance(10) {
            s["description"] = json!("annotation only");
        }
        if self.dialect == Dialect::Input && self.rng.chance(20) {
            let names = declared(&s);
            self.combinators(&mut s, &names, depth);
        }
        s
    }

    fn string(&mut self) -> Value {
        let max = if self.rng.chance(85) {
            self.rng.below(7) as u64
        } else {
            20 + self.rng.below(40) as u64
        };
        let mut s = json!({"type": "string", "maxLength": max});
        if self.rng.chance(25) {
            s["minLength"] = json!(self.rng.below(max as usize + 1));
        }
        if self.dialect == Dialect::Input && self.rng.chance(45) {
            s["pattern"] = json!(self.rng.pick(PATTERNS).0);
        }
        if self.rng.chance(20) {
            let n = 1 + self.rng.below(4);
            let list: Vec<Value> = (0..n).map(|_| json!(self.text(max as usize))).collect();
            s["enum"] = Value::Array(list);
        } else if self.dialect != Dialect::Integration && self.rng.chance(8) {
            s["const"] = json!(self.text(max as usize));
        }
        s
    }

    fn number(&mut self, ty: &str) -> Value {
        let mut s = json!({ "type": ty });
        if self.dialect == Dialect::Integration {
            let lo = self.bound();
            if self.rng.chance(40) {
                s["minimum"] = lo.clone();
            }
            if self.rng.chance(40) {
                let hi = self.bound();
                let ok = lo.as_f64() <= hi.as_f64();
                s["maximum"] = if ok { hi } else { lo };
            }
            if self.rng.chance(5) {
                s["enum"] = json!(["1"]);
            }
        } else if self.rng.chance(20) {
            s["enum"] = Value::Array(
                (0..1 + self.rng.below(3))
                    .map(|_| self.number_value())
                    .collect(),
            );
        } else if self.rng.chance(8) {
            s["const"] = self.number_value();
        }
        s
    }

    fn bound(&mut self) -> Value {
        match self.rng.below(5) {
            0 => json!(self.rng.below(7) as i64 - 3),
            1 => json!((self.rng.below(13) as f64 - 6.0) / 4.0),
            2 => json!(9_007_199_254_740_993_u64),
            3 => json!(1e20),
            _ => json!(self.rng.below(3)),
        }
    }

    fn array(&mut self, depth: usize) -> Value {
        let max = self.rng.below(4);
        let mut s = json!({"type": "array", "maxItems": max, "items": self.member(depth + 1)});
        if self.dialect == Dialect::Integration && self.rng.chance(40) {
            s["minItems"] = json!(self.rng.below(max + 1));
        }
        s
    }

    fn object(&mut self, depth: usize) -> Value {
        let n = match self.rng.below(40) {
            0 => 13 + self.rng.below(8),
            1 if depth == 0 => 65 + self.rng.below(6),
            _ => self.rng.below(5),
        };
        let mut props = Map::new();
        for i in 0..n {
            let name = if n > 12 {
                format!("p{i}")
            } else {
                self.rng.pick(NAMES).to_string()
            };
            let child = self.member(depth + 1);
            props.insert(name, child);
        }
        let names: Vec<String> = props.keys().cloned().collect();
        let mut s = json!({"type": "object", "additionalProperties": false, "properties": props});
        if depth > 0 && self.dialect != Dialect::Integration && self.rng.chance(15) {
            s["type"] = json!(["object", "null"]);
        }
        if !names.is_empty() && self.rng.chance(50) {
            s["required"] = json!(self.subset(&names));
        }
        if names.is_empty() && self.rng.chance(50) {
            // No `properties` at all: then `required` may name anything.
            s.as_object_mut().unwrap().remove("properties");
            if self.rng.chance(50) {
                let pool: Vec<String> = NAMES[..4].iter().map(|n| n.to_string()).collect();
                s["required"] = json!(self.subset(&pool));
            }
        }
        if self.dialect == Dialect::Input && depth == 0 && self.rng.chance(40) {
            self.combinators(&mut s, &names, depth);
        }
        s
    }

    /// A node of several types (the input and output dialects only).
    fn multi(&mut self, depth: usize) -> Value {
        let mut all = vec![
            "string", "integer", "number", "boolean", "null", "object", "array",
        ];
        let mut types = Vec::new();
        for _ in 0..2 + self.rng.below(2) {
            let t = all.remove(self.rng.below(all.len()));
            types.push(t);
        }
        let mut s = json!({ "type": types });
        if types.contains(&"string") {
            s["maxLength"] = json!(self.rng.below(6));
        }
        if types.contains(&"array") {
            s["maxItems"] = json!(self.rng.below(3));
            s["items"] = self.member(depth + 1);
        }
        if types.contains(&"object") {
            s["additionalProperties"] = json!(false);
            let mut props = Map::new();
            for _ in 0..self.rng.below(3) {
                props.insert(self.rng.pick(NAMES).to_string(), self.member(depth + 1));
            }
            let names: Vec<String> = props.keys().cloned().collect();
            s["properties"] = Value::Object(props);
            if !names.is_empty() && self.rng.chance(40) {
                s["required"] = json!(self.subset(&names));
            }
        }
        s
    }

    /// anyOf / oneOf / not (contract 2.6 rule 8) on `s`, whose declared
    /// properties are `names`.
    fn combinators(&mut self, s: &mut Value, names: &[String], depth: usize) {
        for kw in ["anyOf", "oneOf"] {
            if self.rng.chance(45) {
                let n = if self.rng.chance(5) {
                    8
                } else {
                    1 + self.rng.below(3)
                };
                s[kw] = Value::Array((0..n).map(|_| self.branch(names, depth)).collect());
            }
        }
        if self.rng.chance(45) {
            s["not"] = self.branch(names, depth);
        }
    }

    /// A branch: mostly the `required`-only form of rule 8 (or empty),
    /// otherwise any schema (it may omit `type`).
    fn branch(&mut self, names: &[String], depth: usize) -> Value {
        let r = self.rng.below(100);
        if r < 45 {
            return if names.is_empty() {
                json!({})
            } else {
                json!({"required": self.subset(names)})
            };
        }
        if r < 55 {
            return json!({});
        }
        match self.rng.below(15) {
            0 => json!({"type": *self.rng.pick(&["integer", "number", "boolean", "null"])}),
            1 => json!({"type": "string", "maxLength": self.rng.below(5)}),
            2 => json!({"maxLength": self.rng.below(4)}),
            3 => json!({"minLength": self.rng.below(4)}),
            4 => {
                let n = 1 + self.rng.below(3);
                json!({"enum": self.values(n)})
            }
            5 => json!({"const": self.value(1)}),
            6 => {
                let mut pool: Vec<String> = names.to_vec();
                pool.push("undeclared".into());
                json!({"required": self.subset(&pool)})
            }
            7 => json!({"maxItems": self.rng.below(3)}),
            8 if depth < 3 => self.object(depth + 1),
            9 if depth < 3 => json!({"not": self.branch(names, depth + 1)}),
            10 if depth < 3 => {
                let n = 1 + self.rng.below(2);
                let kw = if self.rng.chance(50) {
                    "anyOf"
                } else {
                    "oneOf"
                };
                json!({ kw: (0..n).map(|_| self.branch(names, depth + 1)).collect::<Vec<_>>() })
            }
            11 if depth < 3 => self.array(depth + 1),
            12 => {
                let (p, _) = *self.rng.pick(PATTERNS);
                json!({"type": "string", "maxLength": 3 + self.rng.below(4), "pattern": p})
            }
            13 => json!({"additionalProperties": false}),
            _ => json!({"description": "only an annotation"}),
        }
    }

    fn subset(&mut self, names: &[String]) -> Vec<String> {
        let mut out: Vec<String> = names
            .iter()
            .filter(|_| self.rng.chance(40))
            .cloned()
            .collect();
        out.dedup();
        out
    }

    // ---- values ---------------------------------------------------------

    fn values(&mut self, n: usize) -> Vec<Value> {
        (0..n).map(|_| self.value(2)).collect()
    }

    /// Any small value.
    fn value(&mut self, depth: usize) -> Value {
        match self.rng.below(if depth == 0 { 4 } else { 6 }) {
            0 => Value::Null,
            1 => json!(self.rng.chance(50)),
            2 => self.number_value(),
            3 => json!(self.text(4)),
            4 => Value::Array(
                (0..self.rng.below(3))
                    .map(|_| self.value(depth - 1))
                    .collect(),
            ),
            _ => {
                let mut m = Map::new();
                for _ in 0..self.rng.below(3) {
                    m.insert(self.rng.pick(NAMES).to_string(), self.value(depth - 1));
                }
                Value::Object(m)
            }
        }
    }

    fn number_value(&mut self) -> Value {
        match self.rng.below(12) {
            0 => json!(0),
            1 => json!(1),
            2 => json!(1.0),
            3 => json!(-1),
            4 => json!(2.5),
            5 => json!(-0.5),
            6 => json!(9_007_199_254_740_993_u64),
            7 => json!(9_007_199_254_740_992.0),
            8 => json!(u64::MAX),
            9 => json!(1e20),
            10 => json!(0.1),
            _ => json!(self.rng.below(7) as i64 - 3),
        }
    }

    fn text(&mut self, around: usize) -> String {
        let len = match self.rng.below(5) {
            0 => around,
            1 => around + 1,
            2 => around.saturating_sub(1),
            _ => self.rng.below(around + 2),
        };
        (0..len).map(|_| *self.rng.pick(CHARS)).collect()
    }

    /// An instance near `s`.
    fn instance(&mut self, s: &Value, depth: usize) -> Value {
        let Some(obj) = s.as_object() else {
            return self.value(2);
        };
        if depth > 6 || self.rng.chance(5) {
            return self.value(2);
        }
        if let Some(c) = obj.get("const")
            && self.rng.chance(60)
        {
            return self.near(c);
        }
        if let Some(Value::Array(list)) = obj.get("enum")
            && self.rng.chance(60)
        {
            let v = self.rng.pick(list).clone();
            return self.near(&v);
        }
        let mut types: Vec<&str> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if types.is_empty() || self.rng.chance(10) {
            types = vec![
                "string", "integer", "number", "boolean", "null", "object", "array",
            ];
        }
        let len = |k: &str| obj.get(k).and_then(Value::as_u64).map(|n| n as usize);
        match *self.rng.pick(&types) {
            "string" => {
                if let Some(Value::String(p)) = obj.get("pattern")
                    && self.rng.chance(60)
                {
                    let examples = PATTERNS
                        .iter()
                        .find(|(q, _)| q == p)
                        .map_or(&[][..], |e| e.1);
                    if !examples.is_empty() {
                        return json!(*self.rng.pick(examples));
                    }
                }
                let around = if self.rng.chance(50) {
                    len("maxLength").unwrap_or(3)
                } else {
                    len("minLength").unwrap_or(0)
                };
                json!(self.text(around))
            }
            "integer" => {
                let v = self.number_value();
                if self.rng.chance(40) {
                    let b = obj.get("minimum").or(obj.get("maximum"));
                    if let Some(b) = b.and_then(Value::as_f64) {
                        return json!((b + self.rng.below(3) as f64 - 1.0).round());
                    }
                }
                v
            }
            "number" => {
                if self.rng.chance(40) {
                    let b = obj.get("minimum").or(obj.get("maximum"));
                    if let Some(b) = b.and_then(Value::as_f64) {
                        return json!(b + (self.rng.below(5) as f64 - 2.0) / 4.0);
                    }
                }
                self.number_value()
            }
            "boolean" => json!(self.rng.chance(50)),
            "null" => Value::Null,
            "array" => {
                let max = len("maxItems").unwrap_or(2);
                let n = match self.rng.below(4) {
                    0 => max,
                    1 => max + 1,
                    2 => len("minItems").unwrap_or(0).saturating_sub(1),
                    _ => self.rng.below(max + 2),
                };
                let item = obj.get("items").cloned().unwrap_or(json!({}));
                Value::Array((0..n).map(|_| self.instance(&item, depth + 1)).collect())
            }
            _ => {
                let required: Vec<&str> = obj
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut m = Map::new();
                if let Some(Value::Object(props)) = obj.get("properties") {
                    for (k, sub) in props {
                        let p = if required.contains(&k.as_str()) {
                            90
                        } else {
                            50
                        };
                        if self.rng.chance(p) {
                            let v = self.instance(sub, depth + 1);
                            m.insert(k.clone(), v);
                        }
                    }
                }
                if self.rng.chance(15) {
                    let k = if self.rng.chance(50) {
                        "undeclared".to_string()
                    } else {
                        self.rng.pick(NAMES).to_string()
                    };
                    let v = self.value(1);
                    m.insert(k, v);
                }
                Value::Object(m)
            }
        }
    }

    /// `v`, or a value close to it.
    fn near(&mut self, v: &Value) -> Value {
        if self.rng.chance(50) {
            return v.clone();
        }
        match v {
            Value::String(s) => {
                let mut s = s.clone();
                if s.pop().is_none() || self.rng.chance(50) {
                    s.push(*self.rng.pick(CHARS));
                }
                json!(s)
            }
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) if self.rng.chance(50) => json!(i as f64),
                (Some(i), _) => json!(i.wrapping_add(1)),
                (_, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => json!(f as i64),
                (_, Some(f)) => json!(f + 1.0),
                _ => json!(0),
            },
            Value::Array(items) => {
                let mut items = items.clone();
                if items.pop().is_none() {
                    items.push(Value::Null);
                }
                Value::Array(items)
            }
            Value::Object(m) => {
                let mut m = m.clone();
                match m.keys().next().cloned() {
                    Some(k) if self.rng.chance(50) => {
                        m.remove(&k);
                    }
                    Some(k) => {
                        m.insert(k, json!(1));
                    }
                    None => {
                        m.insert("a".into(), Value::Null);
                    }
                }
                Value::Object(m)
            }
            Value::Bool(b) => json!(!b),
            Value::Null => json!(0),
        }
    }
}

/// The property names `s` declares.
fn declared(s: &Value) -> Vec<String> {
    s.get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

// ---- JSON text, spelled in varied ways ---------------------------------

struct Spelling {
    spaces: bool,
    escapes: bool,
    numbers: bool,
}

fn spell(v: &Value, how: &Spelling, rng: &mut Rng, out: &mut String) {
    let ws = |rng: &mut Rng, out: &mut String| {
        if how.spaces && rng.chance(30) {
            out.push_str(rng.pick::<&str>(&[" ", "\n", "\t ", "\r\n  "]));
        }
    };
    ws(rng, out);
    match v {
        Value::Null | Value::Bool(_) => out.push_str(&v.to_string()),
        Value::Number(n) => spell_number(n, how, rng, out),
        Value::String(s) => spell_string(s, how, rng, out),
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                spell(x, how, rng, out);
            }
            ws(rng, out);
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                ws(rng, out);
                spell_string(k, how, rng, out);
                ws(rng, out);
                out.push(':');
                spell(x, how, rng, out);
            }
            ws(rng, out);
            out.push('}');
        }
    }
    ws(rng, out);
}

fn spell_string(s: &str, how: &Spelling, rng: &mut Rng, out: &mut String) {
    if !how.escapes {
        out.push_str(&Value::from(s).to_string());
        return;
    }
    out.push('"');
    for c in s.chars() {
        if rng.chance(25) || c == '"' || c == '\\' || (c as u32) < 0x20 {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{u:04x}");
            }
        } else if c == '/' && rng.chance(50) {
            out.push_str("\\/");
        } else {
            out.push(c);
        }
    }
    out.push('"');
}

fn spell_number(n: &Number, how: &Spelling, rng: &mut Rng, out: &mut String) {
    let plain = n.to_string();
    if !how.numbers || rng.chance(40) {
        out.push_str(&plain);
        return;
    }
    let f = n.as_f64().unwrap_or(0.0);
    let integral = !plain.contains(['.', 'e', 'E']);
    match rng.below(5) {
        0 if integral => {
            let _ = write!(out, "{plain}.0");
        }
        1 => {
            let _ = write!(out, "{f:e}");
        }
        2 if !plain.contains(['e', 'E']) => {
            let _ = write!(out, "{plain}E+0");
        }
        3 if integral && f != 0.0 => {
            let _ = write!(out, "{plain}0e-1");
        }
        4 if f == 0.0 => out.push_str(rng.pick::<&str>(&["-0", "-0.0", "0e5", "-0E-2"])),
        _ => out.push_str(&plain),
    }
}

// ---- the oracles -------------------------------------------------------

/// Contract 2.6 rule 9, independently of the crate: every member of an
/// object that an object schema (one that says `type: object`, declares
/// `properties` or closes the object) does not declare is removed, at any
/// depth, inside array items too.
fn prune_oracle(s: &Value, v: &mut Value) {
    let Some(obj) = s.as_object() else { return };
    match v {
        Value::Object(map) => {
            let is_object = obj.contains_key("properties")
                || obj.contains_key("additionalProperties")
                || match obj.get("type") {
                    Some(Value::String(t)) => t == "object",
                    Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
                    _ => false,
                };
            if !is_object {
                return;
            }
            let props = obj.get("properties").and_then(Value::as_object);
            map.retain(|k, _| props.is_some_and(|p| p.contains_key(k)));
            for (k, x) in map.iter_mut() {
                if let Some(sub) = props.and_then(|p| p.get(k)) {
                    prune_oracle(sub, x);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = obj.get("items") {
                for x in items {
                    prune_oracle(item, x);
                }
            }
        }
        _ => {}
    }
}

/// How the rule library and `jsonschema` judge `text` against `schema`:
/// `jsonschema`'s verdict on the text, and None when they agree, else what
/// differs. Err when the case does not apply (the checker refuses the
/// schema, or the text is not JSON).
fn judge(dialect: Dialect, schema: &Value, text: &str) -> Result<(bool, Option<String>), ()> {
    let compiled: Schema = compile(dialect, schema).map_err(|_| ())?;
    let value: Value = serde_json::from_str(text).map_err(|_| ())?;
    let oracle = match jsonschema::draft202012::new(schema) {
        Ok(v) => v,
        Err(e) => {
            let why = format!("jsonschema refuses a schema the checker admits: {e}");
            return Ok((false, Some(why)));
        }
    };
    let expected = oracle.is_valid(&value);
    let mut wrong = Vec::new();
    let mut compare = |how: &str, got: bool, expected: bool| {
        if got != expected {
            wrong.push(format!("{how} says valid={got}, jsonschema {expected}"));
        }
    };
    let tree = compiled.validate(&value).is_ok();
    compare("validate (tree)", tree, expected);
    compare(
        "validate_text",
        compiled.validate_text(text).is_ok(),
        expected,
    );
    if dialect == Dialect::Output {
        let mut pruned = value.clone();
        prune_oracle(schema, &mut pruned);
        let pruned_valid = oracle.is_valid(&pruned);
        let streamed = compiled.prune_text(text);
        compare("prune_text", streamed.is_ok(), pruned_valid);
        let tree = compiled.prune(value.clone());
        compare("prune (tree)", tree.is_ok(), pruned_valid);
        if let Ok(out) = &streamed
            && serde_json::from_str::<Value>(out).ok().as_ref() != Some(&pruned)
        {
            wrong.push(format!("prune_text gives {out}, the contract {pruned}"));
        }
        if let Ok(out) = &tree
            && out != &pruned
        {
            wrong.push(format!("prune (tree) gives {out}, the contract {pruned}"));
        }
    }
    Ok((expected, (!wrong.is_empty()).then(|| wrong.join("; "))))
}

// ---- shrinking ---------------------------------------------------------

/// Values one step smaller than `v`: a member or item removed, a part
/// replaced by one of its own smaller values, a string shortened, a number
/// made simpler.
fn smaller(v: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    match v {
        Value::Object(m) => {
            for k in m.keys() {
                let mut w = m.clone();
                w.remove(k);
                out.push(Value::Object(w));
            }
            for (k, x) in m {
                for y in smaller(x) {
                    let mut w = m.clone();
                    w.insert(k.clone(), y);
                    out.push(Value::Object(w));
                }
            }
        }
        Value::Array(items) => {
            for i in 0..items.len() {
                let mut w = items.clone();
                w.remove(i);
                out.push(Value::Array(w));
            }
            for (i, x) in items.iter().enumerate() {
                for y in smaller(x) {
                    let mut w = items.clone();
                    w[i] = y;
                    out.push(Value::Array(w));
                }
            }
        }
        Value::String(s) if !s.is_empty() => {
            let chars: Vec<char> = s.chars().collect();
            for i in 0..chars.len() {
                let mut c = chars.clone();
                c.remove(i);
                out.push(Value::String(c.into_iter().collect()));
            }
        }
        Value::Number(n) if n.as_u64() != Some(0) => out.push(json!(0)),
        _ => {}
    }
    out
}

/// Shrinks `x` greedily while `still` holds.
fn shrink(mut x: Value, still: impl Fn(&Value) -> bool) -> Value {
    'outer: for _ in 0..10_000 {
        for y in smaller(&x) {
            if still(&y) {
                x = y;
                continue 'outer;
            }
        }
        break;
    }
    x
}

/// The smallest schema and instance (as text) that still disagree: the
/// instance and the schema shrunk in turn until neither shrinks further.
fn minimal(dialect: Dialect, schema: &Value, text: &str) -> (Value, String, String) {
    let fails = |s: &Value, t: &str| matches!(judge(dialect, s, t), Ok((_, Some(_))));
    let mut text = text.to_string();
    let mut schema = schema.clone();
    loop {
        let before = (schema.clone(), text.clone());
        // The canonical spelling, if it disagrees too: then the instance
        // shrinks (else the text stays as generated).
        let value: Value = serde_json::from_str(&text).unwrap();
        if fails(&schema, &value.to_string()) {
            text = shrink(value, |v| fails(&schema, &v.to_string())).to_string();
        }
        schema = shrink(schema, |s| fails(s, &text));
        if before == (schema.clone(), text.clone()) {
            break;
        }
    }
    let why = judge(dialect, &schema, &text)
        .ok()
        .and_then(|(_, why)| why)
        .unwrap_or_default();
    (schema, text, why)
}

/// Keywords counted over the admitted schemas (how many schemas use each),
/// to show what a run exercised.
const COUNTED: &[&str] = &[
    "anyOf",
    "oneOf",
    "not",
    "pattern",
    "enum",
    "const",
    "minLength",
    "items",
    "minimum",
    "maximum",
    "minItems",
];

fn count_keywords(s: &Value, found: &mut [bool]) {
    match s {
        Value::Object(m) => {
            for (k, v) in m {
                if let Some(i) = COUNTED.iter().position(|c| c == k) {
                    found[i] = true;
                }
                // Keywords only: not inside enum / const values.
                if k != "enum" && k != "const" {
                    count_keywords(v, found);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| count_keywords(x, found)),
        _ => {}
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .replace(['_', ','], "")
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// Instances judged against each generated schema.
const PER_SCHEMA: u64 = 8;
/// Disagreements collected before the test stops.
const MAX_REPORTS: usize = 4;

#[test]
fn schema_verdicts_match_jsonschema() {
    let cases = env_u64("WARDEN_SCHEMA_DIFF_CASES", 2_000);
    let seed = env_u64("WARDEN_SCHEMA_DIFF_SEED", 0x5EED_2026);
    let started = Instant::now();
    let mut reports = Vec::new();
    let (mut done, mut schemas, mut refused, mut valid) = (0u64, 0u64, 0u64, 0u64);
    let mut used = [0u64; COUNTED.len()];
    let dialects = [Dialect::Input, Dialect::Output, Dialect::Integration];
    while done < cases && reports.len() < MAX_REPORTS {
        // Each schema's cases depend on the seed and its number alone.
        let mut rng = Rng(seed ^ schemas.wrapping_mul(0xA24B_AED4_963E_E407));
        let dialect = dialects[(schemas % 3) as usize];
        schemas += 1;
        let schema = Gen {
            rng: &mut rng,
            dialect,
        }
        .root();
        if compile(dialect, &schema).is_err() {
            refused += 1;
            continue;
        }
        let mut found = [false; COUNTED.len()];
        count_keywords(&schema, &mut found);
        for (n, f) in used.iter_mut().zip(found) {
            *n += u64::from(f);
        }
        for _ in 0..PER_SCHEMA.min(cases - done) {
            let value = Gen {
                rng: &mut rng,
                dialect,
            }
            .instance(&schema, 0);
            let how = Spelling {
                spaces: rng.chance(30),
                escapes: rng.chance(20),
                numbers: rng.chance(30),
            };
            let mut text = String::new();
            spell(&value, &how, &mut rng, &mut text);
            done += 1;
            match judge(dialect, &schema, &text) {
                Ok((expected, None)) => valid += u64::from(expected),
                Ok((_, Some(_))) => {
                    let (small, small_text, why) = minimal(dialect, &schema, &text);
                    reports.push(format!(
                        "case {done} (schema {}, {dialect:?}; WARDEN_SCHEMA_DIFF_CASES={done} reaches it): {why}\n  minimal schema:   {small}\n  minimal instance: {small_text}\n  original schema:   {schema}\n  original instance: {text}",
                        schemas - 1
                    ));
                    break;
                }
                Err(()) => panic!("generated text is not JSON: {text}"),
            }
        }
    }
    let elapsed = started.elapsed();
    eprintln!(
        "schema differential: {done} cases over {} admitted schemas ({refused} generated schemas refused by the checker), {valid} valid instances, seed {seed}, {:.1} s",
        schemas - refused,
        elapsed.as_secs_f64()
    );
    let usage: Vec<String> = COUNTED
        .iter()
        .zip(used)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    eprintln!("schemas using: {}", usage.join(", "));
    assert!(
        reports.is_empty(),
        "the rule library and jsonschema disagree (WARDEN_SCHEMA_DIFF_SEED={seed}):\n{}",
        reports.join("\n")
    );
    // The generator stays useful: most schemas are admitted, and the
    // instances are neither all valid nor all invalid.
    assert!(
        refused * 4 < schemas,
        "{refused} of {schemas} schemas refused"
    );
    assert!(
        valid * 10 > done && valid * 10 < done * 9,
        "{valid} of {done} valid"
    );
}
