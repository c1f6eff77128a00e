//! Bounds on the complexity of `pattern` regular expressions.
//!
//! `regress` is a backtracking engine (as ECMAScript engines are): a pattern
//! that can match the same text in more than one way makes it try every
//! way before it gives up, which takes time exponential (or polynomial of a
//! high degree) in the input length. Three bounds keep matching cheap:
//!
//! 1. a pattern applies only to strings that passed `maxLength` (checked
//!    first, so the matcher never sees a string longer than the schema allows);
//! 2. this module refuses, at import, the shapes that make backtracking blow
//!    up (below);
//! 3. every match runs inside the guest, under the sandbox's deadline (the
//!    server asks the guest through `match-pattern`; no tenant pattern runs
//!    natively), which stops whatever slips through.
//!
//! The refused shapes, judged on a small syntax tree with conservative
//! character sets (every rule errs on the side of refusing):
//!
//! - back-references (they make matching NP-hard);
//! - a repeated sub-pattern (`*`, `+`, `{n,}`, `{n,m}` with `m > 1`) that can
//!   match the empty string (`(a*)*`), or whose match can be extended by a
//!   character that can also start the next repetition (`(a+)+`, `(?:aa?)+`,
//!   `(\w{1,16})+`): the boundary between repetitions is then ambiguous;
//! - inside a repeated sub-pattern, alternatives that can start with the same
//!   character (`(a|aa)+`, `((a|a))*`), and a variable-length part followed
//!   by a part that can match its characters (`(?:x*x)+`);
//! - anywhere, more than [`MAX_ADJACENT_UNBOUNDED`] unbounded quantifiers
//!   over overlapping characters with nothing to separate them
//!   (`a*a*a*a*b`: each can take any share of a run of `a`s).
//!
//! Ordinary patterns (`^[A-Z]-[0-9]+$`, `^[a-z0-9]+(-[a-z0-9]+)*$`, dates,
//! e-mail-like and domain-like shapes, `(?:\d{1,3}\.){3}\d{1,3}`) pass. The
//! pattern has already been parsed by `regress`, so it is well formed; what
//! this parser does not understand it treats as "any character".

/// A repetition counts as unbounded when its upper bound is above this.
const LARGE: u64 = 16;
/// Longest accepted run of adjacent unbounded quantifiers over overlapping
/// characters (`.*a.*b.*` is three).
pub const MAX_ADJACENT_UNBOUNDED: usize = 3;
/// Deepest group nesting analysed (the pattern is at most 1 KiB anyway).
const MAX_DEPTH: usize = 64;

/// `Err(reason)` when the pattern is too complex to match in bounded time.
pub fn check(pattern: &str) -> Result<(), String> {
    let mut parser = Parser {
        s: pattern.chars().collect(),
        i: 0,
        depth: 0,
    };
    let tree = parser.alternation()?;
    analyse(&tree, false).map(|_| ())
}

/// A set of characters: ASCII exactly, everything else as one bit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Chars {
    ascii: u128,
    other: bool,
}

impl Chars {
    const NONE: Chars = Chars {
        ascii: 0,
        other: false,
    };
    const ANY: Chars = Chars {
        ascii: u128::MAX,
        other: true,
    };

    fn one(c: char) -> Chars {
        Chars::range(c, c)
    }

    fn range(lo: char, hi: char) -> Chars {
        let mut set = Chars::NONE;
        let (lo, hi) = (lo as u32, hi as u32);
        for c in lo..=hi.min(127) {
            set.ascii |= 1u128 << c;
        }
        set.other = hi >= 128;
        set
    }

    fn union(self, o: Chars) -> Chars {
        Chars {
            ascii: self.ascii | o.ascii,
            other: self.other || o.other,
        }
    }

    fn complement(self) -> Chars {
        // Non-ASCII characters are one bit here: assume some remain.
        Chars {
            ascii: !self.ascii,
            other: true,
        }
    }

    fn overlaps(self, o: Chars) -> bool {
        self.ascii & o.ascii != 0 || (self.other && o.other)
    }

    fn digits() -> Chars {
        Chars::range('0', '9')
    }

    fn word() -> Chars {
        Chars::range('a', 'z')
            .union(Chars::range('A', 'Z'))
            .union(Chars::digits())
            .union(Chars::one('_'))
    }

    fn space() -> Chars {
        let mut s = Chars::range('\t', '\r').union(Chars::one(' '));
        s.other = true; // NBSP, line separators, ...
        s
    }
}

/// The syntax tree: groups are their content (capturing or not).
#[derive(Debug)]
enum Node {
    /// One character of a set.
    Chars(Chars),
    /// Zero width: anchors, word boundaries, lookarounds (their content is
    /// still checked).
    Assert(Option<Box<Node>>),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u64,
        max: Option<u64>,
    },
}

struct Parser {
    s: Vec<char>,
    i: usize,
    depth: usize,
}

const BACKREF: &str = "back-references are not supported in patterns";

impl Parser {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        self.i += 1;
        c
    }

    fn alternation(&mut self) -> Result<Node, String> {
        let mut branches = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.i += 1;
            branches.push(self.sequence()?);
        }
        Ok(if branches.len() == 1 {
            branches.pop().unwrap_or(Node::Concat(Vec::new()))
        } else {
            Node::Alt(branches)
        })
    }

    fn sequence(&mut self) -> Result<Node, String> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || (c == ')' && self.depth > 0) {
                break;
            }
            let mut atom = self.atom()?;
            while let Some((min, max)) = self.quantifier() {
                if self.peek() == Some('?') {
                    self.i += 1; // lazy: the same work on failure
                }
                atom = Node::Repeat {
                    node: Box::new(atom),
                    min,
                    max,
                };
            }
            // A group of one branch is just a sequence: splice it, so runs
            // of quantifiers are seen across group boundaries.
            match atom {
                Node::Concat(inner) => items.extend(inner),
                other => items.push(other),
            }
        }
        Ok(Node::Concat(items))
    }

    /// `(min, max)` of a quantifier at the cursor (consumed), if any.
    fn quantifier(&mut self) -> Option<(u64, Option<u64>)> {
        let q = match self.peek()? {
            '*' => (0, None),
            '+' => (1, None),
            '?' => (0, Some(1)),
            '{' => {
                let end = self.s[self.i..].iter().position(|&c| c == '}')?;
                let body: String = self.s[self.i + 1..self.i + end].iter().collect();
                let number = |t: &str| {
                    (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                        .then(|| t.parse::<u64>().unwrap_or(u64::MAX))
                };
                let q = match body.split_once(',') {
                    None => {
                        let n = number(&body)?;
                        (n, Some(n))
                    }
                    Some((lo, "")) => (number(lo)?, None),
                    Some((lo, hi)) => (number(lo)?, Some(number(hi)?)),
                };
                self.i += end;
                q
            }
            _ => return None,
        };
        self.i += 1;
        Some(q)
    }

    fn atom(&mut self) -> Result<Node, String> {
        let Some(c) = self.next() else {
            return Ok(Node::Concat(Vec::new()));
        };
        Ok(match c {
            '(' => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(format!(
                        "groups nested more than {MAX_DEPTH} deep are not supported in patterns"
                    ));
                }
                let mut look = false;
                if self.peek() == Some('?') {
                    self.i += 1;
                    match self.next() {
                        Some('=') | Some('!') => look = true,
                        Some('<') if matches!(self.peek(), Some('=') | Some('!')) => {
                            self.i += 1;
                            look = true;
                        }
                        Some('<') => while !matches!(self.next(), Some('>') | None) {},
                        _ => {} // `?:`
                    }
                }
                let inner = self.alternation()?;
                if self.peek() == Some(')') {
                    self.i += 1;
                }
                self.depth -= 1;
                if look {
                    Node::Assert(Some(Box::new(inner)))
                } else {
                    inner
                }
            }
            '[' => Node::Chars(self.class()),
            '.' => Node::Chars(Chars::ANY),
            '^' | '$' => Node::Assert(None),
            '\\' => match self.next() {
                Some(d) if d.is_ascii_digit() && d != '0' => return Err(BACKREF.into()),
                Some('k') => return Err(BACKREF.into()),
                Some('b') | Some('B') => Node::Assert(None),
                e => Node::Chars(self.escape(e)),
            },
            other => Node::Chars(Chars::one(other)),
        })
    }

    /// The set of an escape (after the backslash) outside or inside a class.
    fn escape(&mut self, e: Option<char>) -> Chars {
        let hex = |p: &mut Parser, n: usize| -> Option<char> {
            let digits: String = p.s.get(p.i..p.i + n)?.iter().collect();
            let c = char::from_u32(u32::from_str_radix(&digits, 16).ok()?)?;
            p.i += n;
            Some(c)
        };
        match e {
            Some('d') => Chars::digits(),
            Some('D') => Chars::digits().complement(),
            Some('w') => Chars::word(),
            Some('W') => Chars::word().complement(),
            Some('s') => Chars::space(),
            Some('S') => Chars::space().complement(),
            Some('n') => Chars::one('\n'),
            Some('r') => Chars::one('\r'),
            Some('t') => Chars::one('\t'),
            Some('f') => Chars::one('\u{c}'),
            Some('v') => Chars::one('\u{b}'),
            Some('0') => Chars::one('\0'),
            Some('p') | Some('P') => {
                if self.peek() == Some('{') {
                    while !matches!(self.next(), Some('}') | None) {}
                }
                Chars::ANY
            }
            Some('x') => hex(self, 2).map_or(Chars::ANY, Chars::one),
            Some('u') if self.peek() == Some('{') => {
                let end = self.s[self.i..].iter().position(|&c| c == '}');
                match end {
                    Some(end) => {
                        let digits: String = self.s[self.i + 1..self.i + end].iter().collect();
                        self.i += end + 1;
                        u32::from_str_radix(&digits, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .map_or(Chars::ANY, Chars::one)
                    }
                    None => Chars::ANY,
                }
            }
            Some('u') => hex(self, 4).map_or(Chars::ANY, Chars::one),
            Some('c') => match self.next() {
                Some(l) if l.is_ascii_alphabetic() => Chars::one((l as u8 % 32) as char),
                _ => Chars::ANY,
            },
            Some(other) => Chars::one(other),
            None => Chars::ANY,
        }
    }

    /// A character class, after its `[`.
    fn class(&mut self) -> Chars {
        let negated = self.peek() == Some('^');
        if negated {
            self.i += 1;
        }
        let mut set = Chars::NONE;
        // One member: a single character (usable in a range) or a set.
        let member = |p: &mut Parser| -> (Chars, Option<char>) {
            match p.next() {
                Some('\\') => {
                    let e = p.next();
                    if e == Some('b') {
                        return (Chars::one('\u{8}'), Some('\u{8}'));
                    }
                    let chars = p.escape(e);
                    let single = match e {
                        Some('d' | 'D' | 'w' | 'W' | 's' | 'S' | 'p' | 'P') => None,
                        _ if chars.other || chars.ascii.count_ones() != 1 => None,
                        _ => Some(char::from(chars.ascii.trailing_zeros() as u8)),
                    };
                    (chars, single)
                }
                Some(c) => (Chars::one(c), Some(c)),
                None => (Chars::NONE, None),
            }
        };
        while let Some(c) = self.peek() {
            if c == ']' {
                self.i += 1;
                break;
            }
            let (lo_set, lo) = member(self);
            if self.peek() == Some('-') && self.s.get(self.i + 1).is_some_and(|&c| c != ']') {
                self.i += 1;
                let (hi_set, hi) = member(self);
                set = match (lo, hi) {
                    (Some(lo), Some(hi)) if lo <= hi => set.union(Chars::range(lo, hi)),
                    _ => set.union(lo_set).union(hi_set).union(Chars::one('-')),
                };
            } else {
                set = set.union(lo_set);
            }
        }
        if negated { set.complement() } else { set }
    }
}

/// What the analysis knows of a sub-pattern.
#[derive(Debug, Clone, Copy)]
struct Info {
    nullable: bool,
    min_len: u64,
    /// `None`: unbounded.
    max_len: Option<u64>,
    /// Characters a match can start with.
    first: Chars,
    /// Characters a match can contain.
    all: Chars,
    /// Characters that can extend a complete match into a longer one.
    ext: Chars,
}

impl Info {
    fn variable(&self) -> bool {
        Some(self.min_len) != self.max_len
    }

    fn unbounded(&self) -> bool {
        self.max_len.is_none_or(|m| m > LARGE)
    }

    fn zero_width(&self) -> bool {
        self.max_len == Some(0)
    }
}

/// Analyses `node`; `repeated` when an enclosing quantifier allows more
/// than one repetition (ambiguity there multiplies).
fn analyse(node: &Node, repeated: bool) -> Result<Info, String> {
    match node {
        Node::Chars(c) => Ok(Info {
            nullable: false,
            min_len: 1,
            max_len: Some(1),
            first: *c,
            all: *c,
            ext: Chars::NONE,
        }),
        Node::Assert(inner) => {
            if let Some(inner) = inner {
                analyse(inner, repeated)?;
            }
            Ok(Info {
                nullable: true,
                min_len: 0,
                max_len: Some(0),
                first: Chars::NONE,
                all: Chars::NONE,
                ext: Chars::NONE,
            })
        }
        Node::Alt(branches) => {
            let infos = branches
                .iter()
                .map(|b| analyse(b, repeated))
                .collect::<Result<Vec<_>, _>>()?;
            if repeated {
                let nullable = infos.iter().filter(|i| i.nullable).count();
                let overlap = infos
                    .iter()
                    .enumerate()
                    .any(|(k, a)| infos[k + 1..].iter().any(|b| a.first.overlaps(b.first)));
                if overlap || nullable > 1 {
                    return Err(
                        "a repeated group of alternatives that can start with the same character \
                         (like (a|aa)+ or (a|a)*) can take exponential time; use a character class \
                         or make the alternatives start differently"
                            .into(),
                    );
                }
            }
            let mut out = Info {
                nullable: false,
                min_len: u64::MAX,
                max_len: Some(0),
                first: Chars::NONE,
                all: Chars::NONE,
                ext: Chars::NONE,
            };
            for i in &infos {
                out.nullable |= i.nullable;
                out.min_len = out.min_len.min(i.min_len);
                out.max_len = match (out.max_len, i.max_len) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                out.first = out.first.union(i.first);
                out.all = out.all.union(i.all);
                out.ext = out.ext.union(i.ext);
            }
            if out.nullable {
                // The empty branch's match extends into any other branch.
                out.ext = out.ext.union(out.first);
            }
            Ok(out)
        }
        Node::Concat(items) => {
            let infos = items
                .iter()
                .map(|n| analyse(n, repeated))
                .collect::<Result<Vec<_>, _>>()?;
            if repeated {
                deterministic(&infos)?;
            } else {
                adjacent_unbounded(&infos)?;
            }
            let mut out = Info {
                nullable: true,
                min_len: 0,
                max_len: Some(0),
                first: Chars::NONE,
                all: Chars::NONE,
                ext: Chars::NONE,
            };
            for i in &infos {
                if out.nullable {
                    out.first = out.first.union(i.first);
                }
                out.nullable &= i.nullable;
                out.min_len = out.min_len.saturating_add(i.min_len);
                out.max_len = match (out.max_len, i.max_len) {
                    (Some(a), Some(b)) => Some(a.saturating_add(b)),
                    _ => None,
                };
                out.all = out.all.union(i.all);
            }
            // A complete match extends through its last item, or through
            // an earlier one when everything after it matched nothing.
            let mut after = Chars::NONE;
            for i in infos.iter().rev() {
                out.ext = out.ext.union(i.ext).union(after);
                if !i.nullable {
                    break;
                }
                after = after.union(i.first);
            }
            Ok(out)
        }
        Node::Repeat { node, min, max } => {
            let many = max.is_none_or(|m| m > 1);
            let inner = analyse(node, repeated || many)?;
            if many && !inner.zero_width() {
                if inner.nullable {
                    return Err(
                        "a repeated group that can match the empty string (like (a*)*) can take \
                         exponential time; rewrite the pattern without it"
                            .into(),
                    );
                }
                if inner.ext.overlaps(inner.first) {
                    return Err(
                        "nested quantifiers over a sub-pattern that can match the same text in more \
                         than one way (like (a+)+, (?:aa?)+ or (\\w{1,16})+) can take exponential \
                         time; make each repetition start with a character the previous one cannot \
                         continue with"
                            .into(),
                    );
                }
            }
            let times = |len: u64, n: u64| len.saturating_mul(n);
            let fixed_count = *max == Some(*min);
            Ok(Info {
                nullable: *min == 0 || inner.nullable,
                min_len: times(inner.min_len, *min),
                max_len: match (inner.max_len, max) {
                    (Some(0), _) => Some(0),
                    (Some(l), Some(m)) => Some(times(l, *m)),
                    _ => None,
                },
                first: if *max == Some(0) {
                    Chars::NONE
                } else {
                    inner.first
                },
                all: inner.all,
                ext: if fixed_count {
                    inner.ext
                } else {
                    inner.ext.union(inner.first)
                },
            })
        }
    }
}

/// Inside a repetition: every variable-length item is followed by items
/// that cannot start with a character it could also take, so each match
/// has one parse (the item knows where to stop by the next character).
fn deterministic(items: &[Info]) -> Result<(), String> {
    for (k, item) in items.iter().enumerate() {
        if !item.variable() || item.zero_width() {
            continue;
        }
        let mut follow = Chars::NONE;
        for next in &items[k + 1..] {
            follow = follow.union(next.first);
            if !next.nullable {
                break;
            }
        }
        if item.all.overlaps(follow) {
            return Err(
                "inside a repeated group, a variable-length part followed by a part that can match \
                 the same characters (like (?:x*x)+ or (?:\\w+\\d?)+) can take exponential time; \
                 separate them with a character neither can match"
                    .into(),
            );
        }
    }
    Ok(())
}

/// Anywhere: no more than [`MAX_ADJACENT_UNBOUNDED`] unbounded items over
/// overlapping characters without a required item between them that none
/// of them can match.
fn adjacent_unbounded(items: &[Info]) -> Result<(), String> {
    let mut run = 0usize;
    let mut seen = Chars::NONE;
    for item in items {
        if item.zero_width() {
            continue;
        }
        if item.unbounded() {
            if run == 0 || seen.overlaps(item.all) {
                run += 1;
                seen = seen.union(item.all);
            } else if item.nullable {
                seen = seen.union(item.all);
            } else {
                run = 1;
                seen = item.all;
            }
            if run > MAX_ADJACENT_UNBOUNDED {
                return Err(format!(
                    "more than {MAX_ADJACENT_UNBOUNDED} adjacent unbounded quantifiers over \
                     overlapping characters (like a*a*a*a*) can take time polynomial of a high \
                     degree; merge them into one"
                ));
            }
        } else if !item.nullable && !seen.overlaps(item.all) {
            // A required separator none of the run can take.
            run = 0;
            seen = Chars::NONE;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn ordinary_patterns_pass() {
        for p in [
            "^[a-z0-9-]+$",
            "^[A-Z]-[0-9]+$",
            "^[A-Z]-[0-9]{4}$",
            "^[A-Z0-9-]+$",
            "^[a-z][a-z0-9_]*$",
            "^[\\x21-\\x7e]+$",
            "^[A-Za-z0-9 ,.-]*$",
            "^\\d{4}-\\d{2}-\\d{2}$",
            "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})$",
            "^(?:[A-Z]{2})?[0-9]{6,12}$",
            "^[^@]+@[^@]+\\.[a-z]{2,}$",
            "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$",
            "^[a-z0-9]+(-[a-z0-9]+)*$",
            "^[a-z0-9-]+(\\.[a-z0-9-]+)+$",
            "^[a-z]+(\\s*,\\s*[a-z]+)*$",
            "^(?:\\d{1,3}\\.){3}\\d{1,3}$",
            "^(?:[A-Z]{2}-)+[0-9]+$",
            "^(ab|cd){1,3}x*$",
            "^([a-z]+-)?[a-z]+$",
            "^\\+?[0-9 ]{6,20}$",
            "^.*foo.*bar.*$",
            "^(?=.*\\d)[a-z0-9]{8,}$",
            "^\\p{L}+$",
            "^[\\u0041-\\u005A]+$",
            "^(?<code>[A-Z]{3})-\\d+$",
            "((ab)*c)+",
            "a{2,1}x",
        ] {
            assert_eq!(check(p), Ok(()), "{p}");
        }
    }

    fn refused(p: &str, why: &str) {
        match check(p) {
            Err(reason) => assert!(reason.contains(why), "{p}: {reason}"),
            Ok(()) => panic!("{p} should be refused ({why})"),
        }
    }

    #[test]
    fn back_references_are_refused() {
        for p in ["(a)\\1", "(?<n>a)\\k<n>"] {
            refused(p, "back-references");
        }
    }

    #[test]
    fn nested_quantifiers_over_ambiguous_sub_patterns_are_refused() {
        for p in [
            "^(a+)+$",
            "^(?:aa?)+$",
            "^(\\w{1,16})+$",
            "(?:x+y?){2,}",
            "(a{1,100}){1,100}",
            "^(\\d+\\.?)+$",
            "^(?:(?:a+)b?)*c$",
        ] {
            refused(p, "nested quantifiers");
        }
        for p in ["(a*)*", "^(a?)+$", "(?:a|b*)+"] {
            refused(p, "empty string");
        }
        for p in [
            "^(?:[ab]*b)+$",
            "^(?:x*x)+$",
            "^(?:\\w+\\d?)+$",
            "^(?:-a*a*)+$",
        ] {
            refused(p, "variable-length part");
        }
    }

    #[test]
    fn overlapping_alternations_under_a_quantifier_are_refused() {
        for p in [
            "^((a|a))*$",
            "^(a|aa)+$",
            "^(?:ab|a)*$",
            "^(?:[a-z]|[a-z0-9])+$",
            "^(?:-(?:x|xy))+$",
        ] {
            refused(p, "alternatives");
        }
        // Not under a quantifier, overlapping alternatives are cheap.
        assert_eq!(check("^(?:http|https)://[a-z.]+$"), Ok(()));
    }

    #[test]
    fn long_runs_of_adjacent_unbounded_quantifiers_are_refused() {
        for p in [
            "a*a*a*a*a*a*a*a*a*a*a*a*b",
            "a*a*a*a*",
            "^.*a.*b.*c.*$",
            "(?:a*)(?:a*)(?:a*a*)",
            "a*x*a*x*a*",
            "\\w+\\w{17,}[a-z]*\\d*",
        ] {
            refused(p, "adjacent unbounded");
        }
        // Separated by a required character none of them takes.
        assert_eq!(check("a*b a*b a*b a*b"), Ok(()));
        assert_eq!(check("a*a*a*b"), Ok(()));
    }

    #[test]
    fn odd_syntax_does_not_break_the_guard() {
        for p in [
            "",
            "(",
            ")",
            "[",
            "[^]",
            "\\",
            "a{",
            "a{1,",
            "(?<",
            "\\u{",
            "\\p{",
            "[a-",
            "\\c",
            "((((((((((a))))))))))",
        ] {
            let _ = check(p);
        }
        let deep = format!("{}a{}", "(".repeat(100), ")".repeat(100));
        assert!(check(&deep).is_err());
    }
}
