//! Compiled `pattern`s: ECMAScript semantics via `regress`, with a fast path
//! for the most common shape, a fully anchored run of one character class
//! (`^[A-Z0-9-]+$`, `^[0-9]{5}$`, `^[a-z_]{3,32}$`). That shape needs no
//! backtracking and no allocation; any other pattern goes to `regress`.

/// A pattern ready to match.
#[derive(Debug)]
pub struct Pattern {
    regex: regress::Regex,
    fast: Option<ClassRun>,
}

/// `^[class]{min,max}$` over ASCII characters.
#[derive(Debug)]
struct ClassRun {
    allowed: [bool; 128],
    min: usize,
    max: Option<usize>,
}

impl Pattern {
    /// Compiles an ECMAScript pattern (Unicode mode, as JSON Schema uses).
    pub fn new(source: &str) -> Result<Pattern, regress::Error> {
        let regex = regress::Regex::with_flags(source, "u")?;
        Ok(Pattern {
            regex,
            fast: ClassRun::parse(source),
        })
    }

    /// True when the pattern matches somewhere in `s` (JSON Schema's
    /// unanchored semantics; anchors are the pattern's own business).
    pub fn is_match(&self, s: &str) -> bool {
        match &self.fast {
            Some(run) => run.matches(s),
            None => self.regex.find(s).is_some(),
        }
    }
}

impl ClassRun {
    fn parse(p: &str) -> Option<ClassRun> {
        let body = p.strip_prefix("^[")?.strip_suffix('$')?;
        let close = body.find(']')?;
        let (class, quant) = (&body[..close], &body[close + 1..]);
        if class.is_empty() || class.starts_with('^') {
            return None;
        }
        let bytes = class.as_bytes();
        if !bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ')
            || bytes.iter().any(|b| matches!(b, b'\\' | b'['))
        {
            return None;
        }
        let mut allowed = [false; 128];
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if i + 2 < bytes.len() && bytes[i + 1] == b'-' {
                let hi = bytes[i + 2];
                if c > hi {
                    return None;
                }
                for x in c..=hi {
                    allowed[x as usize] = true;
                }
                i += 3;
            } else {
                allowed[c as usize] = true;
                i += 1;
            }
        }
        let (min, max) = match quant {
            "*" => (0, None),
            "+" => (1, None),
            q => {
                let inner = q.strip_prefix('{')?.strip_suffix('}')?;
                let digits = |s: &str| {
                    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                        .then(|| s.parse().ok())
                        .flatten()
                };
                match inner.split_once(',') {
                    None => {
                        let n = digits(inner)?;
                        (n, Some(n))
                    }
                    Some((lo, "")) => (digits(lo)?, None),
                    Some((lo, hi)) => (digits(lo)?, Some(digits(hi)?)),
                }
            }
        };
        if max.is_some_and(|m| m < min) {
            return None;
        }
        Some(ClassRun { allowed, min, max })
    }

    fn matches(&self, s: &str) -> bool {
        let mut n = 0usize;
        for b in s.bytes() {
            // Non-ASCII bytes never match an ASCII class.
            if b >= 128 || !self.allowed[b as usize] {
                return false;
            }
            n += 1;
        }
        n >= self.min && self.max.is_none_or(|m| n <= m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_agrees_with_regress() {
        let patterns = [
            "^[A-Z0-9-]+$",
            "^[0-9]{5}$",
            "^[a-z0-9_-]{3,32}$",
            "^[A-Za-z0-9 ,.-]*$",
            "^[-a-z]{2,}$",
            "^[a-z-]{1}$",
            "^[ -~]+$",
        ];
        let inputs = [
            "", "A", "AB-12", "ab", "12345", "1234", "123456", "abc_def", "ab", "a-b", "-",
            "x y, z.", "ñ", "é1", "A\n", "\n", "abc\n", "ABC$", "a]", "Z",
        ];
        for p in patterns {
            let fast = Pattern::new(p).unwrap();
            assert!(fast.fast.is_some(), "{p} should take the fast path");
            let slow = regress::Regex::with_flags(p, "u").unwrap();
            for s in inputs {
                assert_eq!(
                    fast.is_match(s),
                    slow.find(s).is_some(),
                    "pattern {p:?} on {s:?}"
                );
            }
        }
    }

    #[test]
    fn other_shapes_use_regress() {
        for p in [
            "[a-z]+",
            "^[^a]+$",
            "^[\\d]+$",
            "^[a-z]+?$",
            "^(ab)+$",
            "^[a-z]+$|^x$",
            "^[a-z]{3,1}$",
        ] {
            if let Ok(pat) = Pattern::new(p) {
                assert!(pat.fast.is_none(), "{p}");
            }
        }
    }
}
