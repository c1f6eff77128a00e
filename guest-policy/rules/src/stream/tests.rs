//! Tests of the streaming pass: differential tests against the previous,
//! serde_json-driven pass (`stream_reference.rs`) on many documents, and
//! the fast float path against serde_json.

use serde_json::{Value, json};

use super::float::fast_float;
use crate::bench_cases::{closed, string};
use crate::schema::{Dialect, Schema, compile};
use crate::stream_reference;

/// Runs both passes, validating and pruning, and asserts they agree:
/// byte-identical output, the same violations (for invalid JSON, the
/// same single `invalid-json`; the message quotes the parser). Returns
/// the pruned text (or the rules of the violations).
fn same(schema: &Schema, text: &str) -> Result<String, Vec<String>> {
    let mut last = Ok(String::new());
    for prune in [false, true] {
        let new = super::run(schema, text, prune);
        let old = stream_reference::run(schema, text, prune);
        match (&new, &old) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "output differs (prune {prune}) on {text:?}"),
            (Err(a), Err(b)) => {
                let key = |v: &crate::Violation| {
                    if v.rule == "invalid-json" {
                        (v.pointer.clone(), v.rule.clone(), String::new())
                    } else {
                        (v.pointer.clone(), v.rule.clone(), v.message.clone())
                    }
                };
                let a: Vec<_> = a.iter().map(key).collect();
                let b: Vec<_> = b.iter().map(key).collect();
                assert_eq!(a, b, "violations differ (prune {prune}) on {text:?}");
            }
            _ => panic!("verdicts differ (prune {prune}) on {text:?}:\n new {new:?}\n old {old:?}"),
        }
        last = new.map_err(|v| v.into_iter().map(|v| v.rule).collect());
    }
    last
}

/// The output schema and result of the host benchmark's large case.
fn large() -> (Schema, String) {
    let case = crate::bench_cases::case("large");
    let schema = serde_json::from_str(&case.output_schema).unwrap();
    (compile(Dialect::Output, &schema).unwrap(), case.result)
}

/// A schema that exercises every path: enum / const (whole values),
/// nullable types, nested arrays, names that need escaping.
fn mixed() -> Schema {
    compile(
        Dialect::Output,
        &closed(
            json!({
                "a": {"type": "array", "maxItems": 4, "items": closed(json!({
                    "x": {"type": ["integer", "null"]}, "y": string(6), "z": {"type": "number"}}), &["x"])},
                "b": string(9),
                "k": {"type": "string", "maxLength": 5, "enum": ["on", "off"]},
                "c": {"const": {"deep": [1, 2.5, "s"]}},
                "f": {"type": "boolean"},
                "n": {"type": "null"},
                "q\"uote": {"type": "string", "maxLength": 8},
                "back\\slash": {"type": "integer"},
                "ünï": {"type": "string", "maxLength": 3},
                "identifier_longer_than_eight": {"type": "integer"},
                "m": {"type": "array", "maxItems": 3, "items": {"type": "array", "maxItems": 2, "items": {"type": "integer"}}}
            }),
            &["b"],
        ),
    )
    .unwrap()
}

/// A schema whose names are all plain (the fast paths for names).
fn plain() -> Schema {
    compile(
        Dialect::Output,
        &closed(
            json!({
                "a": {"type": "array", "maxItems": 4, "items": closed(json!({
                    "x": {"type": ["integer", "null"]}, "z": {"type": "number"}}), &["x"])},
                "b": string(9),
                "f": {"type": "boolean"},
                "n": {"type": "null"},
                "identifier_longer_than_eight": {"type": "integer"},
                "o": closed(json!({"p": string(3)}), &[])
            }),
            &["b"],
        ),
    )
    .unwrap()
}

#[test]
fn the_bench_documents_prune_identically() {
    let (schema, text) = large();
    let out = same(&schema, &text).unwrap();
    assert_eq!(out.len(), 6571);
    assert!(!out.contains("margin") && !out.contains("cost") && !out.contains("trace"));
    // Pretty-printed, the same output.
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<Value>(&text).unwrap()).unwrap();
    assert_eq!(same(&schema, &pretty).unwrap(), out);
    // With an undeclared member first, last, everywhere.
    let v: Value = serde_json::from_str(&text).unwrap();
    let mut w = v.clone();
    w["orders"][3]["aaa"] = json!({"nested": [1, {"x": "y"}]});
    w["orders"][3]["zzz"] = json!(null);
    w["orders"][3]["shipping"]["a"] = json!("\u{1F600}");
    assert_eq!(same(&schema, &w.to_string()).unwrap(), out);
}

#[test]
fn documents_prune_identically_to_the_previous_pass() {
    let s = mixed();
    let docs = [
        r#"{"b":"x"}"#,
        r#"{"b":"x","a":[{"x":1,"y":"ab","z":1.5,"w":[1,2]},{"x":null,"z":10}],"junk":{"a":[1,2,{"b":null}]}}"#,
        r#"{"junk":1,"b":"x","k":"on","c":{"deep":[1,2.5,"s"]},"f":true,"n":null}"#,
        r#"{"b":"x","c":{"deep":[1.0,2.5,"s"]}}"#,
        r#"{"b":"x","c":{"deep":[1,2.5,"t"]}}"#,
        r#"{"b":"x","k":"no"}"#,
        "{ \"b\" : \"x\" ,\n\t\"f\" : false , \"a\" : [ ] , \"m\" : [ [ 1 , 2 ] , [ ] ] }\r\n",
        r#"{"q\"uote":"a\"b","back\\slash":7,"ünï":"ñññ","b":"é"}"#,
        r#"{"q\u0022uote":"a","back\u005cslash":-7,"\u00fcn\u00ef":"abc","b":"x"}"#,
        r#"{"\u0062":"esc\/aped\n\t\u0001\u00e9\ud83d\ude00","\u0061":[{"\u0078":0}]}"#,
        r#"{"b":"x","identifier_longer_than_eight":1,"identifier_longer_than_eighty":2,"identifier_longer_than_eigh":3}"#,
        r#"{"b":"x","b":"y"}"#,
        r#"{"b":"x","\u0062":"y"}"#,
        r#"{"b":"x","junk":1,"junk":2}"#,
        r#"{"b":"x","a":[{"x":1,"x":2}]}"#,
        r#"{"b":"x","a":[{"x":1},{"x":2},{"x":3},{"x":4},{"x":5},{"x":6}]}"#,
        r#"{"b":"x","a":[{"y":"far too long"},{"x":"one"}]}"#,
        r#"{"b":"0123456789"}"#,
        r#"{"b":"ñññññññññ"}"#,
        r#"{"b":"x","f":"true","n":0,"a":{},"m":[[1,2,3]]}"#,
        r#"[1,2]"#,
        r#""b""#,
        r#"{"b":"x","a":[{"x":1,"z":-0},{"x":-0.0,"z":1e2},{"x":1E+2,"z":0.000001},{"x":2.50,"z":123456789012345678901234567890}]}"#,
        r#"{"b":"x","a":[{"x":18446744073709551615,"z":18446744073709551616},{"x":-9223372036854775808,"z":-9223372036854775809},{"x":10.0,"z":1.5e-7}]}"#,
        r#"{"b":"x","a":[{"x":1,"z":0.1},{"x":2,"z":99.90},{"x":3,"z":1234567890123456.5},{"x":4,"z":5e-324}]}"#,
        r#"{"b":"x","a":[{"x":1,"z":1e400}]}"#,
        r#"{"b":"x","junk":1e400,"junk2":-1e999999999999}"#,
        r#"{"b":"x","junk":"\ud800","junk2":{"\udc00":1}}"#,
        r#"{"b":"\ud800"}"#,
        r#"{"b":"\udc00x"}"#,
        r#"{"b":"\ud800\u0041"}"#,
        r#"{"b":"\ud800\n"}"#,
        r#"{"\ud800":1,"b":"x"}"#,
        r#"{"b":"x","f":1}"#,
    ];
    for doc in docs {
        same(&s, doc).ok();
    }
    // A duplicate declared member is refused even though both copies
    // would be copied verbatim.
    assert_eq!(
        same(&s, r#"{"b":"x","f":true,"f":true}"#).unwrap_err(),
        ["duplicate-key"]
    );
    // Escapes are decoded, checked and written as serde_json writes them.
    assert_eq!(
        same(&s, r#"{"\u0062":"\/\u00e9\u0009\ud83d\ude00"}"#).unwrap(),
        "{\"b\":\"/é\\t\u{1F600}\"}"
    );
    assert_eq!(
        same(&s, r#"{"b":"é\"","q\"uote":"\\"}"#).unwrap(),
        r#"{"b":"é\"","q\"uote":"\\"}"#
    );
}

#[test]
fn invalid_json_is_refused_exactly_where_serde_json_refuses_it() {
    let s = mixed();
    let open = compile(Dialect::Output, &json!({})).unwrap();
    let docs = [
        "",
        " ",
        "{",
        "}",
        "[",
        "]",
        "{\"b\"",
        "{\"b\":",
        "{\"b\":\"x\"",
        "{\"b\":\"x\",}",
        "{\"b\":\"x\",,\"f\":true}",
        "{\"b\" \"x\"}",
        "{b:\"x\"}",
        "{\"b\":\"x\"}}",
        "{\"b\":\"x\"} x",
        "{\"b\":\"x\"} ",
        "\u{feff}{\"b\":\"x\"}",
        "{\"b\":\"x\u{1}\"}",
        "{\"b\":\"\\x\"}",
        "{\"b\":\"\\u12\"}",
        "{\"b\":\"\\u12G4\"}",
        "{\"b\":\"x",
        "{\"b\":\"x\",\"f\":tru}",
        "{\"b\":\"x\",\"f\":truex}",
        "{\"b\":\"x\",\"n\":nul}",
        "{\"b\":\"x\",\"n\":nulll}",
        "{\"b\":\"x\",\"junk\":01}",
        "{\"b\":\"x\",\"junk\":1.}",
        "{\"b\":\"x\",\"junk\":.5}",
        "{\"b\":\"x\",\"junk\":+1}",
        "{\"b\":\"x\",\"junk\":-}",
        "{\"b\":\"x\",\"junk\":1e}",
        "{\"b\":\"x\",\"junk\":1e+}",
        "{\"b\":\"x\",\"junk\":[1,]}",
        "{\"b\":\"x\",\"junk\":[,1]}",
        "{\"b\":\"x\",\"junk\":{,}}",
        "{\"b\":\"x\",\"junk\":{\"a\"}}",
        "{\"b\":\"x\",\"junk\":{\"a\":1,}}",
        "{\"b\":\"x\",\"junk\":[1 2]}",
        "{\"b\":\"x\",\"junk\":[}",
        "{\"b\":\"x\",\"junk\":{]}",
        "{\"b\":\"x\",\"junk\":\"\\ud800\"}",
        "{\"b\":\"x\",\"a\":[1,]}",
        "{\"b\":\"x\",\"a\":[{\"x\":01}]}",
        "{\"b\":\"x\",\"f\":[1,}",
        "{\"b\":\"x\",\"f\":{\"a\":}}",
        "{\"b\":\"x\",\"f\":{\"\\ud800\":1}}",
        "{\"b\":\"x\",\"f\":{\"a\":\"\\ud800\"}}",
        "{\"b\":\"x\",\"a\":[{\"x\":1,\"y\":\"a\"}],\"m\":[[1,2],[3,]]}",
        "{\"b\":\"x\",\"c\":{\"deep\":[1,2.5,\"s\"],}}",
        "{\"b\":\"x\",\"c\":1e400}",
        "{\"b\":\"x\",\"c\":\"\\ud800\"}",
        "{\"b\":\"x\"\n,\n}",
        "nul",
        "tru",
        "1.5e",
        "-0x1",
    ];
    let p = plain();
    let names = [
        "{\"b\":\"x\",x\"y\":1}",
        "{\"b\":\"x\", y:1}",
        "{\"b\":\"x\",\"junk\":1,x\"b\":1}",
        "{\"b\":\"x\",1:2}",
        "{\"b\":\"x\",\"b\\\":1}",
        "{\"b\":\"x\",\"junk\" 1}",
        "{\"b\":\"x\",\"junk\"",
        "{\"b\":\"x\",\"ju\u{1}nk\":1}",
        "{\"b\":\"x\",\"ju\u{1}\":1}",
        "{\"b\":\"x\",\"f\"\u{1}:1}",
        "{\"b\":\"x\",\"junk\":1,}",
        "{\"b\":\"x\",\"o\":{\"q\":1,}}",
        "{\"b\":\"x\",\"o\":{\"q\":1 \"p\":\"a\"}}",
        "{\"b\":\"x\",\"o\":{\"p\":\"a\",\"p\":\"a\"}}",
        "{\"b\":\"x\",\"o\":{q:1}}",
        "{\"b\":\"x\",\"o\":{\"\\u0070\":\"a\"}}",
        "{\"b\":\"x\",\"o\":{\"\\ud800\":1}}",
        "{\"b\":\"x\",\"o\":{\"p\\ud800\":1}}",
    ];
    for doc in docs.iter().chain(&names) {
        same(&s, doc).ok();
        same(&open, doc).ok();
        same(&p, doc).ok();
    }
    assert_eq!(same(&s, "{\"b\":\"x\",}").unwrap_err(), ["invalid-json"]);
    assert_eq!(
        same(&p, "{\"b\":\"x\",x\"y\":1}").unwrap_err(),
        ["invalid-json"]
    );
}

#[test]
fn nesting_is_bounded_where_serde_json_bounds_it() {
    let s = mixed();
    let open = compile(Dialect::Output, &json!({})).unwrap();
    for n in [1usize, 64, 65, 126, 127, 128, 129, 200] {
        let deep = format!("{}{}", "[".repeat(n), "]".repeat(n));
        same(&open, &deep).ok();
        // Skipped values have no nesting bound in serde_json either.
        same(&s, &format!("{{\"b\":\"x\",\"junk\":{deep}}}")).ok();
        // Whole values (const) count from where they start.
        same(&s, &format!("{{\"b\":\"x\",\"c\":{deep}}}")).ok();
        same(
            &s,
            &format!("{{\"b\":\"x\",\"a\":[{{\"x\":1,\"z\":{deep}}}]}}"),
        )
        .ok();
        let objects = format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
        same(&open, &objects).ok();
        same(&s, &format!("{{\"b\":\"x\",\"junk\":{objects}}}")).ok();
    }
    assert!(same(&open, &format!("{}{}", "[".repeat(127), "]".repeat(127))).is_ok());
    assert!(same(&open, &format!("{}{}", "[".repeat(128), "]".repeat(128))).is_err());
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    assert!(same(&s, &format!("{{\"b\":\"x\",\"junk\":{deep}}}")).is_ok());
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn mutated_documents_get_the_same_verdicts() {
    let (large_schema, large_text) = large();
    let mixed = mixed();
    let open = compile(Dialect::Output, &json!({})).unwrap();
    let input = compile(
        Dialect::Input,
        &json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "boolean"}, "b": {"type": "string", "maxLength": 4, "pattern": "^[a-z]*$"},
                "n": {"type": "integer"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
    )
    .unwrap();
    let plain = plain();
    let seeds: Vec<(&Schema, String)> = vec![
        (&large_schema, large_text[..1500].to_string() + "]}"),
        (&plain, r#"{"junk":[1,{"a":2}],"b":"x","a":[{"x":1,"z":2.5,"w":0},{"x":null,"z":-1e3}],"o":{"q":"r","p":"s"},"f":true,"n":null,"identifier_longer_than_eight":7}"#.to_string()),
        (&plain, r#"{ "b" : "\u0041\n" , "o" : { "p" : "" } , "junk" : "\ud83d\ude00" , "a" : [ ] }"#.to_string()),
        (&mixed, r#"{"b":"x","a":[{"x":1,"y":"ab","z":1.5}],"c":{"deep":[1,2.5,"s"]},"k":"on","junk":{"p":[true,null,-1.5e3,"\u00e9"]},"m":[[1],[2,3]]}"#.to_string()),
        (&mixed, r#"{ "q\"uote" : "a\\b" , "b" : "\ud83d\ude00" , "f" : false , "n" : null }"#.to_string()),
        (&open, r#"{"z":[1,{"b":2,"a":1.0}],"a":"s\n","a":0.5e1}"#.to_string()),
        (&input, r#"{"a":true,"b":"abc","n":-12,"x":[{}]}"#.to_string()),
    ];
    let alphabet = b"{}[]\",:\\ \n0123456789-+.eEtrufalsnbxyzq\x01u";
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut accepted = 0;
    for round in 0..40_000 {
        let (schema, seed) = &seeds[round % seeds.len()];
        let mut doc = seed.as_bytes().to_vec();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(doc.len() + 1);
            let c = alphabet[rng.below(alphabet.len())];
            match rng.below(3) {
                0 => doc.insert(at, c),
                1 if at < doc.len() => {
                    doc.remove(at);
                }
                _ if at < doc.len() => doc[at] = c,
                _ => doc.push(c),
            }
        }
        if let Ok(text) = String::from_utf8(doc)
            && same(schema, &text).is_ok()
        {
            accepted += 1;
        }
    }
    // Enough of the mutants stay valid to exercise the output path.
    assert!(accepted > 2000, "only {accepted} mutants accepted");
}

#[test]
fn floats_read_and_written_as_serde_json_does() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let digits = |rng: &mut Rng, n: usize| -> String {
        (0..n)
            .map(|_| char::from(b'0' + rng.below(10) as u8))
            .collect()
    };
    let mut tokens: Vec<String> = [
        "0.0",
        "-0.0",
        "10.0",
        "0.5",
        "99.9",
        "24.9",
        "4.2",
        "12.5",
        "1.50",
        "0.10",
        "0.00001",
        "0.000001",
        "0.0001234",
        "123456789012345.0",
        "999999999999999.9",
        "1234567890123456.0",
        "100000000000000.5",
        "1e2",
        "1E2",
        "1e-2",
        "2.5e+3",
        "9007199254740993.0",
        "0.30000000000000004",
        "1.7976931348623157e308",
        "5e-324",
        "1e22",
        "1e23",
        "123.456e-20",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for _ in 0..20000 {
        let int = match rng.below(4) {
            0 => "0".to_string(),
            _ => {
                let n = 1 + rng.below(17);
                let mut d = digits(&mut rng, n);
                if d.starts_with('0') {
                    d.replace_range(..1, "7");
                }
                d
            }
        };
        let n = 1 + rng.below(17);
        let mut t = format!("{int}.{}", digits(&mut rng, n));
        if rng.below(4) == 0 {
            t += &format!("e{}{}", ["", "+", "-"][rng.below(3)], rng.below(30));
        }
        if rng.below(2) == 0 {
            t.insert(0, '-');
        }
        tokens.push(t);
    }
    let mut fast = 0;
    for t in &tokens {
        let want: f64 = serde_json::from_str(t).unwrap();
        let Some((f, canonical)) = fast_float(t.as_bytes()) else {
            continue;
        };
        fast += 1;
        assert_eq!(f.to_bits(), want.to_bits(), "{t}");
        if canonical {
            assert_eq!(serde_json::to_string(&f).unwrap(), *t, "{t}");
        }
    }
    assert!(fast > 5000);
    // End to end, through both passes (inline fast paths included).
    let s = plain();
    for t in tokens.iter().step_by(7) {
        for doc in [
            format!(r#"{{"b":"x","a":[{{"x":1,"z":{t}}}]}}"#),
            format!(r#"{{"b":"x","a":[{{"x":{t},"z":0}}]}}"#),
            format!(r#"{{"b":"x","junk":{t}}}"#),
        ] {
            same(&s, &doc).ok();
        }
    }
}
