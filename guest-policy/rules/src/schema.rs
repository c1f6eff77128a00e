//! The restricted schema language (contract 2.6, and the prompt-integration
//! subset of 2.13): checking a schema and compiling it in one pass.
//!
//! A purpose-built compiler: the language is small and closed, so compiling a
//! schema is a single walk that records every violation and, when there is
//! none, yields a [`Schema`] tree that [`crate::validate`] interprets. No
//! meta-schema, no `$ref` resolution, no dynamic scopes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde_json::{Map, Value};

use crate::regex_guard;
use crate::violation::{Pointer, Violation, Violations};

/// Which schema language a schema is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A capability's `input_schema` (2.6 rule 4).
    Input,
    /// A capability's `output_schema` (2.6 rule 5).
    Output,
    /// A prompt integration's input or output schema (2.13 subset).
    Integration,
}

impl Dialect {
    fn allowed(self, keyword: &str) -> bool {
        const COMMON: &[&str] = &[
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "maxItems",
            "minLength",
            "maxLength",
            "enum",
            "description",
        ];
        if COMMON.contains(&keyword) {
            return true;
        }
        match self {
            Dialect::Input => matches!(keyword, "const" | "anyOf" | "oneOf" | "not" | "pattern"),
            Dialect::Output => keyword == "const",
            Dialect::Integration => matches!(keyword, "minItems" | "minimum" | "maximum"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dialect::Input => "input_schema",
            Dialect::Output => "output_schema",
            Dialect::Integration => "a prompt-integration schema",
        }
    }
}

/// Bounds of the language, beyond the contract, that keep the work of the
/// checker and the validator bounded on hostile schemas. Documented in
/// docs/sandbox.md.
pub mod limits {
    /// Nesting of schema objects.
    pub const MAX_DEPTH: usize = 32;
    /// Schema objects in one schema.
    pub const MAX_NODES: usize = 2_000;
    /// Properties of one object schema.
    pub const MAX_PROPERTIES: usize = 256;
    /// Values of one `enum`.
    pub const MAX_ENUM: usize = 256;
    /// Largest `maxLength`.
    pub const MAX_LENGTH: u64 = 1_048_576;
    /// Largest `maxItems`.
    pub const MAX_ITEMS: u64 = 10_000;
    /// Branches of one `anyOf` / `oneOf` (contract 2.6 rule 8).
    pub const MAX_BRANCHES: usize = 8;
    /// Length of a `pattern` in bytes.
    pub const MAX_PATTERN: usize = 1_024;
}

/// JSON types as a bit set.
pub mod types {
    pub const NULL: u8 = 1;
    pub const BOOLEAN: u8 = 2;
    pub const OBJECT: u8 = 4;
    pub const ARRAY: u8 = 8;
    pub const NUMBER: u8 = 16;
    pub const STRING: u8 = 32;
    pub const INTEGER: u8 = 64;

    pub fn parse(name: &str) -> Option<u8> {
        Some(match name {
            "null" => NULL,
            "boolean" => BOOLEAN,
            "object" => OBJECT,
            "array" => ARRAY,
            "number" => NUMBER,
            "string" => STRING,
            "integer" => INTEGER,
            _ => return None,
        })
    }
}

/// A compiled schema.
#[derive(Debug)]
pub struct Schema {
    pub root: Node,
    pub dialect: Dialect,
}

/// One compiled schema object. `types == 0` means "any type".
#[derive(Debug, Default)]
pub struct Node {
    pub types: u8,
    /// Declared properties, sorted by name.
    pub properties: Vec<(String, Node)>,
    pub required: Vec<String>,
    /// `additionalProperties: false`.
    pub closed: bool,
    pub items: Option<Box<Node>>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub minimum: Option<crate::number::Exact>,
    pub maximum: Option<crate::number::Exact>,
    pub enumeration: Option<Vec<Value>>,
    pub constant: Option<Value>,
    pub pattern: Option<crate::pattern::Pattern>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    /// Name -> index into `properties`, built only for large objects.
    index: Option<HashMap<String, usize, BuildHasherDefault<Fnv>>>,
    /// Derived at compile time for the streaming pass (`stream/`), like
    /// `index`: one [`NameKey`] per property (in `properties` order), and
    /// whether every name is plain. A compiled node is not to be changed.
    keys: Vec<NameKey>,
    all_plain: bool,
    /// Bit `c` set when a plain name begins with byte `c`.
    firsts: [u64; 4],
    /// Index in `properties` of each `required` name (`usize::MAX` if it is
    /// not declared there).
    required_at: Vec<usize>,
    /// Bit `i` set when property `i` (< 64) is required; `required_small`
    /// when that covers every `required` name.
    required_mask: u64,
    required_small: bool,
    /// [`Node::needs_whole_value`], and whether the fields above were derived.
    whole: bool,
    derived: bool,

    /// [`Scalar`]: what a value of this node needs checked when it is a
    /// plain scalar (derived).
    scalar: Scalar,
}

/// For the streaming pass: which scalars a node accepts with no check
/// beyond their syntax (and, for strings, a length in bytes), so they can
/// be copied without a closer look.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scalar {
    /// Any string without escapes of fewer bytes than this (0: none): the
    /// type allows strings, no pattern, no `minLength`, and `maxLength`
    /// (which counts code points, bounded from above by bytes) plus one.
    pub(crate) str_below: u64,
    /// Any number: the type allows numbers (not only integers), no bounds.
    pub(crate) num: bool,
}

impl Scalar {
    /// Nothing decided in advance.
    pub(crate) const OTHER: Scalar = Scalar {
        str_below: 0,
        num: false,
    };
    /// Any string or number (what a skipped value may be, syntax aside).
    pub(crate) const ANY: Scalar = Scalar {
        str_below: u64::MAX,
        num: true,
    };
}

/// A declared name as the streaming pass matches it: the first (up to)
/// eight bytes of the name followed by its closing quote, as a
/// little-endian word with the mask of the bytes that count; and what the
/// property's node needs checked of a plain scalar (so the hot path reads
/// this array only). Only "plain" names (non-empty, without `"`, `\` or
/// control characters, so they stand in JSON text as themselves) get one;
/// others never match (`mask == 0`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NameKey {
    word: u64,
    mask: u64,
    /// Length of the name in bytes.
    pub(crate) len: usize,
    /// The property node's [`Node::scalar`].
    pub(crate) scalar: Scalar,
}

impl NameKey {
    fn new(name: &str, scalar: Scalar) -> Self {
        let plain = !name.is_empty() && !name.bytes().any(|c| c == b'"' || c == b'\\' || c < 0x20);
        if !plain {
            return NameKey {
                word: 1,
                mask: 0,
                len: name.len(),
                scalar,
            };
        }
        let mut quoted = name.as_bytes().to_vec();
        quoted.push(b'"');
        let n = quoted.len().min(8);
        let mut bytes = [0u8; 8];
        bytes[..n].copy_from_slice(&quoted[..n]);
        NameKey {
            word: u64::from_le_bytes(bytes),
            mask: if n == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * n)) - 1
            },
            len: name.len(),
            scalar,
        }
    }
}

/// Objects with more properties than this get a hash index; smaller ones
/// are scanned (comparing lengths first), which is faster for few keys.
const SCAN_MAX: usize = 12;

impl Node {
    /// Index of the declared property `name` in `properties`.
    pub fn lookup(&self, name: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(name).copied(),
            None => {
                let b = name.as_bytes();
                self.properties
                    .iter()
                    .position(|(k, _)| k.len() == b.len() && k.as_bytes() == b)
            }
        }
    }

    pub fn property(&self, name: &str) -> Option<&Node> {
        self.lookup(name).map(|i| &self.properties[i].1)
    }

    /// The declared property whose name stands, unescaped and followed by
    /// its closing quote, at the start of `rest` (the text just past a
    /// member name's opening quote). None means "not found this way": the
    /// caller then reads the name and calls [`Node::lookup`], unless
    /// [`Node::plain_names`] says no declared name could match otherwise.
    ///
    /// A bitmap of first bytes rejects most undeclared names at once; then
    /// property `hint` is tried first (the one after the last match, since
    /// members tend to come in the same order every time), then all.
    #[inline(always)]
    pub(crate) fn match_plain(&self, rest: &[u8], hint: usize) -> Option<usize> {
        let n = self.keys.len();
        if n != self.properties.len() {
            return None;
        }
        if let Some(head) = rest.first_chunk::<8>() {
            // No declared name begins with this byte: undeclared.
            let c = head[0];
            if self.firsts[usize::from(c >> 6)] & (1u64 << (c & 63)) == 0 {
                return None;
            }
            let x = u64::from_le_bytes(*head);
            let is = |i: usize| {
                let k = &self.keys[i];
                // A name of up to seven bytes (and its quote) is compared
                // whole by the word.
                x & k.mask == k.word
                    && (k.len < 8
                        || (rest.get(k.len) == Some(&b'"')
                            && rest[8..k.len] == self.properties[i].0.as_bytes()[8..]))
            };
            if hint < n && is(hint) {
                return Some(hint);
            }
            return (0..n).find(|&i| is(i));
        }
        // Near the end of the text.
        self.keys
            .iter()
            .zip(&self.properties)
            .position(|(k, (name, _))| {
                k.mask != 0
                    && rest.get(name.len()) == Some(&b'"')
                    && rest[..name.len()] == *name.as_bytes()
            })
    }

    /// The name table entry of property `k` (after a [`Node::match_plain`]
    /// match).
    #[inline(always)]
    pub(crate) fn name_key(&self, k: usize) -> &NameKey {
        &self.keys[k]
    }

    /// True when every declared name is plain: a member name without
    /// escapes that [`Node::match_plain`] did not match is then undeclared.
    #[inline]
    pub(crate) fn plain_names(&self) -> bool {
        self.keys.len() == self.properties.len() && self.all_plain
    }

    /// Whether the `k`-th `required` name is among the properties `seen`
    /// (by index in `properties`).
    #[inline]
    pub(crate) fn required_seen(&self, k: usize, seen: impl Fn(usize) -> bool) -> bool {
        match self.required_at.get(k) {
            Some(&i) if self.required_at.len() == self.required.len() => i != usize::MAX && seen(i),
            _ => self.lookup(&self.required[k]).is_some_and(seen),
        }
    }

    /// Whether the streaming pass must read this node's value whole (into a
    /// `serde_json::Value`, checked by the tree walker): `enum`, `const`,
    /// `required` without `properties`, combinators other than branches
    /// that only list required properties declared here (contract 2.6 rule
    /// 8, decidable from the members present), and any combinator on a
    /// node whose type admits more than objects (the pass decides
    /// combinators only from an object's members; on other values such
    /// branches hold, so `not` and `oneOf` of two refuse them).
    #[inline]
    pub(crate) fn whole(&self) -> bool {
        if self.derived {
            self.whole
        } else {
            self.needs_whole_value()
        }
    }

    fn needs_whole_value(&self) -> bool {
        let combinators = !self.any_of.is_empty() || !self.one_of.is_empty() || self.not.is_some();
        self.enumeration.is_some()
            || self.constant.is_some()
            || (!self.required.is_empty() && self.properties.is_empty())
            || (combinators && self.types != types::OBJECT)
            || !self
                .any_of
                .iter()
                .chain(self.one_of.iter())
                .chain(self.not.as_deref())
                .all(|b| b.required_only(self))
    }

    /// A branch that only lists required properties, all declared by
    /// `parent`.
    fn required_only(&self, parent: &Node) -> bool {
        self.types == 0
            && self.properties.is_empty()
            && !self.closed
            && self.items.is_none()
            && self.min_items.is_none()
            && self.max_items.is_none()
            && self.min_length.is_none()
            && self.max_length.is_none()
            && self.minimum.is_none()
            && self.maximum.is_none()
            && self.enumeration.is_none()
            && self.constant.is_none()
            && self.pattern.is_none()
            && self.any_of.is_empty()
            && self.one_of.is_empty()
            && self.not.is_none()
            && self.required.iter().all(|r| parent.property(r).is_some())
    }

    /// True when every `required` name is known to be among the first 64
    /// properties and marked in `seen` (bit `i` for property `i`). False
    /// means "check one by one" ([`Node::required_seen`]).
    #[inline]
    pub(crate) fn required_present(&self, seen: u64) -> bool {
        if self.required.is_empty() {
            return true;
        }
        self.derived && self.required_small && seen & self.required_mask == self.required_mask
    }

    /// What a plain scalar value of this node needs checked (see
    /// [`Scalar`]); `Other` unless derived at compile time.
    #[inline(always)]
    pub(crate) fn scalar(&self) -> Scalar {
        if self.derived {
            self.scalar
        } else {
            Scalar::OTHER
        }
    }

    /// Derives what the streaming pass uses; once the node is complete.
    fn derive(&mut self) {
        self.whole = self.needs_whole_value();
        let any = self.types == 0;
        self.scalar = if self.whole {
            Scalar::OTHER
        } else {
            Scalar {
                str_below: if (any || self.types & types::STRING != 0)
                    && self.pattern.is_none()
                    && self.min_length.is_none()
                {
                    self.max_length.map_or(u64::MAX, |m| m.saturating_add(1))
                } else {
                    0
                },
                num: (any || self.types & types::NUMBER != 0)
                    && self.minimum.is_none()
                    && self.maximum.is_none(),
            }
        };
        self.derived = true;
        self.keys = self
            .properties
            .iter()
            .map(|(k, child)| NameKey::new(k, child.scalar()))
            .collect();
        self.all_plain = self.keys.iter().all(|k| k.mask != 0);

        self.firsts = [0; 4];
        for (k, (name, _)) in self.keys.iter().zip(&self.properties) {
            if k.mask != 0 {
                let c = name.as_bytes()[0];
                self.firsts[usize::from(c >> 6)] |= 1u64 << (c & 63);
            }
        }
        self.required_at = (0..self.required.len())
            .map(|k| self.lookup(&self.required[k]).unwrap_or(usize::MAX))
            .collect();
        self.required_small = self.required_at.iter().all(|&i| i < 64);

        self.required_mask = self
            .required_at
            .iter()
            .filter(|&&i| i < 64)
            .fold(0, |m, &i| m | (1u64 << i));
    }

    fn build_index(&mut self) {
        if self.properties.len() > SCAN_MAX {
            self.index = Some(
                self.properties
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.clone(), i))
                    .collect(),
            );
        }
    }
}

/// FNV-1a: a fixed, seedless hasher. (std's default hasher asks the host
/// for a random seed, and the sandbox gives a guest none. Property names
/// come from the schema author, who gains nothing from collisions.)
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Checks `text` as a schema of `dialect` and compiles it.
pub fn compile_text(dialect: Dialect, text: &str) -> Result<Schema, Vec<Violation>> {
    let value = crate::parse_json(text)?;
    compile(dialect, &value)
}

/// Checks a parsed schema of `dialect` and compiles it. Violations point into
/// the schema ("" is its root).
pub fn compile(dialect: Dialect, schema: &Value) -> Result<Schema, Vec<Violation>> {
    let mut out = Violations::new();
    let root = check(dialect, schema, &Pointer::root(), &mut out);
    out.finish(Schema { root, dialect })
}

/// Checks a schema embedded in a larger document; violations are pushed with
/// their pointers prefixed by `at`.
pub fn check(dialect: Dialect, schema: &Value, at: &Pointer, out: &mut Violations) -> Node {
    let mut c = Compiler {
        dialect,
        nodes: 0,
        out,
    };
    let root = c.node(schema, at, 0, Role::Root);
    if dialect != Dialect::Output && schema.is_object() && root.types != types::OBJECT {
        c.out.push(
            at,
            "root-type-object-required",
            format!(
                "the root of {} must declare \"type\": \"object\"",
                dialect.name()
            ),
        );
    }
    root
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Root,
    /// A property or array item: must say what it is.
    Member,
    /// A branch of anyOf / oneOf / not: constrains its parent, may omit `type`.
    Branch,
}

struct Compiler<'a> {
    dialect: Dialect,
    nodes: usize,
    out: &'a mut Violations,
}

fn as_bound(v: &Value) -> Option<u64> {
    v.as_u64()
}

impl Compiler<'_> {
    fn node(&mut self, value: &Value, at: &Pointer, depth: usize, role: Role) -> Node {
        let mut node = Node::default();
        if self.out.is_full() {
            return node;
        }
        let Some(obj) = value.as_object() else {
            self.out
                .push(at, "schema-not-object", "a schema must be a JSON object");
            return node;
        };
        self.nodes += 1;
        if self.nodes > limits::MAX_NODES {
            if self.nodes == limits::MAX_NODES + 1 {
                self.out.push(
                    at,
                    "schema-too-large",
                    format!(
                        "a schema may hold at most {} schema objects",
                        limits::MAX_NODES
                    ),
                );
            }
            return node;
        }
        if depth > limits::MAX_DEPTH {
            self.out.push(
                at,
                "schema-too-deep",
                format!("schemas may nest at most {} levels", limits::MAX_DEPTH),
            );
            return node;
        }

        // Keywords: reject what the dialect does not allow, by name.
        for key in obj.keys() {
            if self.dialect.allowed(key) {
                continue;
            }
            let p = at.key(key);
            if key == "pattern" && self.dialect == Dialect::Output {
                self.out.push(
                    &p,
                    "pattern-not-allowed-in-output",
                    "pattern is supported only in input_schema, never in output_schema",
                );
            } else {
                self.out.push(
                    &p,
                    "keyword-not-allowed",
                    format!(
                        "keyword \"{key}\" is not allowed in {}",
                        self.dialect.name()
                    ),
                );
            }
        }

        // type
        match obj.get("type") {
            None => {
                if role == Role::Member && !obj.contains_key("enum") && !obj.contains_key("const") {
                    self.out.push(
                        at,
                        "type-required",
                        "every property and item schema must declare \"type\" (or enum / const)",
                    );
                }
            }
            Some(Value::String(s)) => match types::parse(s) {
                Some(t) if !(self.dialect == Dialect::Integration && t == types::NULL) => {
                    node.types = t
                }
                _ => self.out.push(
                    &at.key("type"),
                    "keyword-value-invalid",
                    format!("unknown type \"{s}\""),
                ),
            },
            Some(Value::Array(list)) if self.dialect != Dialect::Integration => {
                if list.is_empty() {
                    self.out.push(
                        &at.key("type"),
                        "keyword-value-invalid",
                        "type must not be an empty list",
                    );
                }
                for (i, t) in list.iter().enumerate() {
                    match t.as_str().and_then(types::parse) {
                        Some(bit) if node.types & bit == 0 => node.types |= bit,
                        _ => self.out.push(
                            &at.key("type").index(i),
                            "keyword-value-invalid",
                            "type entries must be distinct JSON type names",
                        ),
                    }
                }
            }
            Some(_) => self.out.push(
                &at.key("type"),
                "keyword-value-invalid",
                "type must be a JSON type name",
            ),
        }
        if node.types & types::INTEGER != 0 && node.types & types::NUMBER != 0 {
            node.types &= !types::INTEGER;
        }

        let is_object = node.types & types::OBJECT != 0 || obj.contains_key("properties");
        let is_array = node.types & types::ARRAY != 0 || obj.contains_key("items");
        let is_string = node.types & types::STRING != 0;

        // Objects: closed (2.6 rule 1).
        match obj.get("additionalProperties") {
            Some(Value::Bool(false)) => node.closed = true,
            Some(_) => self.out.push(
                &at.key("additionalProperties"),
                "additional-properties-false-required",
                "additionalProperties must be exactly false",
            ),
            None if is_object => self.out.push(
                at,
                "additional-properties-false-required",
                "every object schema must declare \"additionalProperties\": false",
            ),
            None => {}
        }
        if let Some(props) = obj.get("properties") {
            match props.as_object() {
                Some(map) => {
                    if map.len() > limits::MAX_PROPERTIES {
                        self.out.push(
                            &at.key("properties"),
                            "too-many-properties",
                            format!(
                                "an object schema may declare at most {} properties",
                                limits::MAX_PROPERTIES
                            ),
                        );
                    }
                    let pp = at.key("properties");
                    for (name, sub) in map.iter().take(limits::MAX_PROPERTIES) {
                        let child = self.node(sub, &pp.key(name), depth + 1, Role::Member);
                        node.properties.push((name.clone(), child));
                    }
                    node.properties.sort_by(|a, b| a.0.cmp(&b.0));
                    node.build_index();
                }
                None => self.out.push(
                    &at.key("properties"),
                    "keyword-value-invalid",
                    "properties must be an object of schemas",
                ),
            }
        }
        if let Some(req) = obj.get("required") {
            self.required(req, obj, &at.key("required"), &mut node);
        }

        // Arrays: bounded (2.6 rule 3), with one item schema.
        if let Some(items) = obj.get("items") {
            if items.is_object() {
                node.items = Some(Box::new(self.node(
                    items,
                    &at.key("items"),
                    depth + 1,
                    Role::Member,
                )));
            } else {
                self.out.push(
                    &at.key("items"),
                    "keyword-value-invalid",
                    "items must be one schema object (tuple forms are not supported)",
                );
            }
        } else if is_array {
            self.out.push(
                at,
                "array-items-required",
                "every array schema must declare items",
            );
        }
        node.max_items = self.bound(obj, "maxItems", at, limits::MAX_ITEMS);
        node.min_items = self.bound(obj, "minItems", at, limits::MAX_ITEMS);
        if is_array && node.max_items.is_none() && !obj.contains_key("maxItems") {
            self.out.push(
                at,
                "array-max-items-required",
                "every array schema must declare maxItems",
            );
        }
        if let (Some(lo), Some(hi)) = (node.min_items, node.max_items)
            && lo > hi
        {
            self.out.push(
                &at.key("minItems"),
                "bounds-inconsistent",
                "minItems is greater than maxItems",
            );
        }

        // Strings: bounded (2.6 rule 2). In a prompt-integration schema a
        // string enum is bounded by its longest value (2.13 lists "string
        // enum" in its subset); a capability's string still needs maxLength.
        node.max_length = self.bound(obj, "maxLength", at, limits::MAX_LENGTH);
        node.min_length = self.bound(obj, "minLength", at, limits::MAX_LENGTH);
        let enum_bound = match self.dialect {
            Dialect::Integration => string_enum_bound(obj),
            Dialect::Input | Dialect::Output => None,
        };
        if is_string && !obj.contains_key("maxLength") && enum_bound.is_none() {
            self.out.push(
                at,
                "string-max-length-required",
                "every string schema must declare maxLength",
            );
        }
        if let (Some(lo), Some(hi)) = (node.min_length, node.max_length)
            && lo > hi
        {
            self.out.push(
                &at.key("minLength"),
                "bounds-inconsistent",
                "minLength is greater than maxLength",
            );
        }
        if is_string && node.max_length.is_none() {
            node.max_length = enum_bound;
        }

        // Numbers (integration subset only; other dialects reject the keywords above).
        if self.dialect == Dialect::Integration {
            for (kw, slot) in [
                ("minimum", &mut node.minimum),
                ("maximum", &mut node.maximum),
            ] {
                if let Some(v) = obj.get(kw) {
                    match v.as_number().map(crate::number::Exact::of) {
                        Some(n) if node.types & (types::NUMBER | types::INTEGER) != 0 => {
                            *slot = Some(n)
                        }
                        Some(_) => self.out.push(
                            &at.key(kw),
                            "keyword-value-invalid",
                            format!("{kw} applies only to integer and number schemas"),
                        ),
                        None => self.out.push(
                            &at.key(kw),
                            "keyword-value-invalid",
                            format!("{kw} must be a number"),
                        ),
                    }
                }
            }
            if let (Some(lo), Some(hi)) = (node.minimum, node.maximum)
                && lo.compare(hi).is_gt()
            {
                self.out.push(
                    &at.key("minimum"),
                    "bounds-inconsistent",
                    "minimum is greater than maximum",
                );
            }
        }

        // enum / const
        if let Some(e) = obj.get("enum") {
            match e.as_array() {
                Some(list) if !list.is_empty() && list.len() <= limits::MAX_ENUM => {
                    if self.dialect == Dialect::Integration && !list.iter().all(Value::is_string) {
                        self.out.push(
                            &at.key("enum"),
                            "keyword-value-invalid",
                            "prompt-integration schemas support string enums only",
                        );
                    }
                    node.enumeration = Some(list.clone());
                }
                _ => self.out.push(
                    &at.key("enum"),
                    "keyword-value-invalid",
                    format!("enum must be an array of 1 to {} values", limits::MAX_ENUM),
                ),
            }
        }
        if let Some(c) = obj.get("const") {
            node.constant = Some(c.clone());
        }
        if let Some(d) = obj.get("description")
            && !d.is_string()
        {
            self.out.push(
                &at.key("description"),
                "keyword-value-invalid",
                "description must be a string",
            );
        }

        // pattern (2.6 rule 7); only reached for the input dialect.
        if let Some(p) = obj.get("pattern")
            && self.dialect == Dialect::Input
        {
            node.pattern = self.pattern(p, &at.key("pattern"), is_string, obj);
        }

        // Combinators (2.6 rule 8); only the input dialect allows them.
        if self.dialect == Dialect::Input {
            for kw in ["anyOf", "oneOf"] {
                let Some(v) = obj.get(kw) else { continue };
                let p = at.key(kw);
                let Some(list) = v.as_array() else {
                    self.out.push(
                        &p,
                        "keyword-value-invalid",
                        format!("{kw} must be an array of schemas"),
                    );
                    continue;
                };
                if list.is_empty() || list.len() > limits::MAX_BRANCHES {
                    self.out.push(
                        &p,
                        "combinator-branch-count",
                        format!(
                            "{kw} must hold between 1 and {} schemas; it holds {}",
                            limits::MAX_BRANCHES,
                            list.len()
                        ),
                    );
                }
                let branches: Vec<Node> = list
                    .iter()
                    .take(limits::MAX_BRANCHES)
                    .enumerate()
                    .map(|(i, b)| self.node(b, &p.index(i), depth + 1, Role::Branch))
                    .collect();
                if kw == "anyOf" {
                    node.any_of = branches
                } else {
                    node.one_of = branches
                }
            }
            if let Some(n) = obj.get("not") {
                node.not = Some(Box::new(self.node(
                    n,
                    &at.key("not"),
                    depth + 1,
                    Role::Branch,
                )));
            }
        }
        node.derive();
        node
    }

    fn bound(&mut self, obj: &Map<String, Value>, kw: &str, at: &Pointer, max: u64) -> Option<u64> {
        let v = obj.get(kw)?;
        match as_bound(v) {
            Some(n) if n <= max => Some(n),
            Some(_) => {
                self.out.push(
                    &at.key(kw),
                    "bound-too-large",
                    format!("{kw} may be at most {max}"),
                );
                None
            }
            None => {
                self.out.push(
                    &at.key(kw),
                    "keyword-value-invalid",
                    format!("{kw} must be a non-negative integer"),
                );
                None
            }
        }
    }

    fn required(&mut self, req: &Value, obj: &Map<String, Value>, at: &Pointer, node: &mut Node) {
        let Some(list) = req.as_array() else {
            self.out.push(
                at,
                "keyword-value-invalid",
                "required must be an array of property names",
            );
            return;
        };
        let declared = obj.get("properties").and_then(Value::as_object);
        for (i, name) in list.iter().enumerate().take(limits::MAX_PROPERTIES) {
            let Some(name) = name.as_str() else {
                self.out.push(
                    &at.index(i),
                    "keyword-value-invalid",
                    "required entries must be strings",
                );
                continue;
            };
            if node.required.iter().any(|r| r == name) {
                self.out.push(
                    &at.index(i),
                    "keyword-value-invalid",
                    format!("\"{name}\" is listed twice"),
                );
                continue;
            }
            if let Some(props) = declared
                && !props.contains_key(name)
            {
                self.out.push(
                    &at.index(i),
                    "required-property-undeclared",
                    format!("\"{name}\" is required but not declared in properties"),
                );
            }
            node.required.push(name.to_string());
        }
    }

    fn pattern(
        &mut self,
        p: &Value,
        at: &Pointer,
        is_string: bool,
        obj: &Map<String, Value>,
    ) -> Option<crate::pattern::Pattern> {
        let Some(src) = p.as_str() else {
            self.out
                .push(at, "keyword-value-invalid", "pattern must be a string");
            return None;
        };
        let mut ok = true;
        if !is_string {
            self.out.push(
                at,
                "pattern-requires-string",
                "pattern is allowed only on string schemas",
            );
            ok = false;
        }
        if !obj.contains_key("maxLength") {
            self.out.push(
                at,
                "pattern-requires-max-length",
                "pattern is allowed only together with maxLength",
            );
            ok = false;
        }
        if src.len() > limits::MAX_PATTERN {
            self.out.push(
                at,
                "pattern-too-long",
                format!("a pattern may be at most {} bytes", limits::MAX_PATTERN),
            );
            return None;
        }
        let compiled = match crate::pattern::Pattern::new(src) {
            Ok(r) => Some(r),
            Err(e) => {
                self.out.push(
                    at,
                    "pattern-invalid",
                    format!("not a valid ECMAScript regular expression: {e}"),
                );
                return None;
            }
        };
        if let Err(why) = regex_guard::check(src) {
            self.out.push(at, "pattern-too-complex", why);
            return None;
        }
        if ok { compiled } else { None }
    }
}

/// The length in characters of the longest value of a well-formed string
/// `enum` (1 to [`limits::MAX_ENUM`] strings), which bounds every value the
/// schema accepts; `None` when `obj` has no such enum.
fn string_enum_bound(obj: &Map<String, Value>) -> Option<u64> {
    let list = obj.get("enum")?.as_array()?;
    if list.is_empty() || list.len() > limits::MAX_ENUM {
        return None;
    }
    list.iter()
        .map(|v| v.as_str().map(|s| s.chars().count() as u64))
        .try_fold(0, |longest, len| Some(longest.max(len?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(d: Dialect, s: Value) -> Vec<(String, String)> {
        match compile(d, &s) {
            Ok(_) => vec![],
            Err(v) => v.into_iter().map(|v| (v.pointer, v.rule)).collect(),
        }
    }

    fn one(d: Dialect, s: Value, pointer: &str, rule: &str) {
        let got = rules(d, s);
        assert_eq!(
            got,
            vec![(pointer.to_string(), rule.to_string())],
            "got {got:?}"
        );
    }

    fn obj(props: Value) -> Value {
        json!({"type": "object", "additionalProperties": false, "properties": props})
    }

    #[test]
    fn a_complete_input_schema_compiles() {
        let s = json!({
            "type": "object", "additionalProperties": false, "description": "x",
            "required": ["q"],
            "properties": {
                "q": {"type": "string", "maxLength": 40, "minLength": 1, "pattern": "^[a-z]+$"},
                "kind": {"type": "string", "maxLength": 8, "enum": ["a", "b"]},
                "fixed": {"const": 3},
                "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 5}},
                "n": {"type": ["integer", "null"]},
                "sub": {"type": "object", "additionalProperties": false, "properties": {"b": {"type": "boolean"}}}
            },
            "oneOf": [{"required": ["q"]}, {"required": ["kind"]}],
            "anyOf": [{"required": ["q"]}],
            "not": {"required": ["q", "kind"]}
        });
        assert!(rules(Dialect::Input, s).is_empty());
    }

    #[test]
    fn forbidden_keywords_are_rejected_by_name() {
        for &kw in crate::fixtures::FORBIDDEN_KEYWORDS {
            let mut s = obj(json!({}));
            s[kw] = json!(1);
            let got = rules(Dialect::Input, s);
            assert!(
                got.contains(&(
                    format!("/{}", kw.replace('/', "~1")),
                    "keyword-not-allowed".into()
                )),
                "{kw}: {got:?}"
            );
        }
    }

    #[test]
    fn output_rejects_input_only_keywords() {
        for kw in ["anyOf", "oneOf", "not"] {
            let mut s = obj(json!({}));
            s[kw] = json!([{"required": []}]);
            one(Dialect::Output, s, &format!("/{kw}"), "keyword-not-allowed");
        }
        one(
            Dialect::Output,
            obj(json!({"a": {"type": "string", "maxLength": 3, "pattern": "a"}})),
            "/properties/a/pattern",
            "pattern-not-allowed-in-output",
        );
    }

    #[test]
    fn objects_must_be_closed() {
        one(
            Dialect::Input,
            json!({"type": "object", "properties": {}}),
            "",
            "additional-properties-false-required",
        );
        one(
            Dialect::Input,
            json!({"type": "object", "additionalProperties": true}),
            "/additionalProperties",
            "additional-properties-false-required",
        );
        one(
            Dialect::Input,
            obj(json!({"s": {"type": "object"}})),
            "/properties/s",
            "additional-properties-false-required",
        );
        one(
            Dialect::Output,
            obj(
                json!({"s": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {}}}}),
            ),
            "/properties/s/items",
            "additional-properties-false-required",
        );
    }

    #[test]
    fn strings_need_max_length() {
        one(
            Dialect::Input,
            obj(json!({"s": {"type": "string"}})),
            "/properties/s",
            "string-max-length-required",
        );
        one(
            Dialect::Output,
            obj(json!({"s": {"type": ["string", "null"]}})),
            "/properties/s",
            "string-max-length-required",
        );
        one(
            Dialect::Input,
            obj(json!({"s": {"type": "string", "enum": ["a"]}})),
            "/properties/s",
            "string-max-length-required",
        );
    }

    #[test]
    fn arrays_need_max_items_and_items() {
        one(
            Dialect::Input,
            obj(json!({"a": {"type": "array", "items": {"type": "boolean"}}})),
            "/properties/a",
            "array-max-items-required",
        );
        one(
            Dialect::Input,
            obj(json!({"a": {"type": "array", "maxItems": 2}})),
            "/properties/a",
            "array-items-required",
        );
        one(
            Dialect::Input,
            obj(json!({"a": {"type": "array", "maxItems": 2, "items": [{"type": "boolean"}]}})),
            "/properties/a/items",
            "keyword-value-invalid",
        );
    }

    #[test]
    fn pattern_rules() {
        assert_eq!(
            rules(
                Dialect::Input,
                obj(json!({"s": {"type": "string", "pattern": "^a$"}}))
            ),
            vec![
                (
                    "/properties/s".to_string(),
                    "string-max-length-required".to_string()
                ),
                (
                    "/properties/s/pattern".to_string(),
                    "pattern-requires-max-length".to_string()
                ),
            ]
        );
        one(
            Dialect::Input,
            obj(json!({"s": {"type": "integer", "maxLength": 3, "pattern": "^a$"}})),
            "/properties/s/pattern",
            "pattern-requires-string",
        );
        one(
            Dialect::Input,
            obj(json!({"s": {"type": "string", "maxLength": 3, "pattern": "(a"}})),
            "/properties/s/pattern",
            "pattern-invalid",
        );
        one(
            Dialect::Input,
            obj(json!({"s": {"type": "string", "maxLength": 3, "pattern": "a{2,1}"}})),
            "/properties/s/pattern",
            "pattern-invalid",
        );
        // Not ECMAScript: possessive quantifiers and inline flags are Perl/PCRE.
        one(
            Dialect::Input,
            obj(json!({"s": {"type": "string", "maxLength": 3, "pattern": "(?i)a"}})),
            "/properties/s/pattern",
            "pattern-invalid",
        );
        one(
            Dialect::Input,
            obj(json!({"s": {"type": "string", "maxLength": 30, "pattern": "^(a+)+$"}})),
            "/properties/s/pattern",
            "pattern-too-complex",
        );
    }

    #[test]
    fn branch_counts() {
        let mut s = obj(json!({"a": {"type": "boolean"}}));
        s["anyOf"] = json!([]);
        one(
            Dialect::Input,
            s.clone(),
            "/anyOf",
            "combinator-branch-count",
        );
        s["anyOf"] = Value::Array((0..9).map(|_| json!({"required": ["a"]})).collect());
        one(
            Dialect::Input,
            s.clone(),
            "/anyOf",
            "combinator-branch-count",
        );
        s["anyOf"] = Value::Array((0..8).map(|_| json!({"required": ["a"]})).collect());
        assert!(rules(Dialect::Input, s).is_empty());
    }

    #[test]
    fn members_need_a_type_and_the_root_is_an_object() {
        one(
            Dialect::Input,
            obj(json!({"a": {"description": "x"}})),
            "/properties/a",
            "type-required",
        );
        one(
            Dialect::Input,
            json!({"type": "string", "maxLength": 3}),
            "",
            "root-type-object-required",
        );
        assert!(rules(Dialect::Output, json!({"type": "string", "maxLength": 3})).is_empty());
    }

    #[test]
    fn hostile_schemas_are_bounded() {
        let mut s = json!({"type": "boolean"});
        for _ in 0..60 {
            s = obj(json!({"x": s}));
        }
        assert!(
            rules(Dialect::Input, s)
                .iter()
                .any(|(_, r)| r == "schema-too-deep")
        );
        let wide: Map<String, Value> = (0..300)
            .map(|i| (format!("p{i}"), json!({"type": "boolean"})))
            .collect();
        assert!(
            rules(Dialect::Input, obj(Value::Object(wide)))
                .iter()
                .any(|(_, r)| r == "too-many-properties")
        );
        one(
            Dialect::Input,
            obj(json!({"s": {"type": "string", "maxLength": 10_000_000}})),
            "/properties/s/maxLength",
            "bound-too-large",
        );
    }

    #[test]
    fn integration_subset() {
        let good = json!({"type": "object", "additionalProperties": false, "required": ["n"],
            "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5},
                           "t": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "maxLength": 4, "enum": ["a"]}}}});
        assert!(rules(Dialect::Integration, good).is_empty());
        for kw in ["oneOf", "anyOf", "allOf", "$ref", "pattern", "const", "not"] {
            let mut s = obj(json!({}));
            s[kw] = json!([]);
            one(
                Dialect::Integration,
                s,
                &format!("/{kw}"),
                "keyword-not-allowed",
            );
        }
        one(
            Dialect::Integration,
            obj(json!({"e": {"type": "integer", "enum": [1]}})),
            "/properties/e/enum",
            "keyword-value-invalid",
        );
    }

    #[test]
    fn an_integration_string_enum_is_bounded_by_its_longest_value() {
        let schema = obj(json!({"size": {"type": "string", "enum": ["S", "M", "XLñ"]}}));
        assert!(rules(Dialect::Integration, schema.clone()).is_empty());
        let compiled = compile(Dialect::Integration, &schema).expect("accepted");
        let (_, size) = &compiled.root.properties[0];
        assert_eq!(size.max_length, Some(3), "the longest value, in characters");
        // Not a bound: no enum, an empty one, or one with a non-string.
        for bad in [
            json!({"type": "string"}),
            json!({"type": "string", "enum": []}),
            json!({"type": "string", "enum": ["a", 1]}),
        ] {
            assert!(
                rules(Dialect::Integration, obj(json!({"s": bad.clone()})))
                    .iter()
                    .any(|(_, r)| r == "string-max-length-required"),
                "{bad}"
            );
        }
        // A capability's schema keeps 2.6 rule 2: maxLength, enum or not.
        for dialect in [Dialect::Input, Dialect::Output] {
            one(
                dialect,
                obj(json!({"size": {"type": "string", "enum": ["S", "M"]}})),
                "/properties/size",
                "string-max-length-required",
            );
        }
    }
}
