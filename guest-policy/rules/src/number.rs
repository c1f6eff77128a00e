//! JSON numbers compared exactly, as JSON Schema compares them (by
//! mathematical value): `enum` / `const` equality and `minimum` / `maximum`.
//!
//! serde_json reads an integer that fits `i64` or `u64` as that integer and
//! anything else as an `f64`; comparing through `f64` alone would round
//! integers past 2^53 (9007199254740993 would equal 9007199254740992.0 and
//! pass a `minimum` of 9007199254740993 written as an integer).

use std::cmp::Ordering;
use std::fmt;

/// A number as serde_json reads it: an integer kept exactly, or a float
/// (finite: serde_json refuses the others).
#[derive(Debug, Clone, Copy)]
pub enum Exact {
    Int(i128),
    Float(f64),
}

impl Exact {
    pub fn of(n: &serde_json::Number) -> Exact {
        match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Exact::Int(i.into()),
            (None, Some(u)) => Exact::Int(u.into()),
            (None, None) => Exact::Float(n.as_f64().unwrap_or(f64::NAN)),
        }
    }

    /// Orders two numbers by value, exactly.
    pub fn compare(self, other: Exact) -> Ordering {
        match (self, other) {
            (Exact::Int(a), Exact::Int(b)) => a.cmp(&b),
            (Exact::Int(a), Exact::Float(f)) => int_float(a, f),
            (Exact::Float(f), Exact::Int(b)) => int_float(b, f).reverse(),
            (Exact::Float(a), Exact::Float(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        }
    }

    pub fn equals(self, other: Exact) -> bool {
        self.compare(other) == Ordering::Equal
    }
}

/// `i` (an i64 or u64, so below 2^64 in magnitude) against the float `f`.
fn int_float(i: i128, f: f64) -> Ordering {
    // 2^65: past it the float decides alone; below it, its integral part
    // converts to i128 exactly.
    const LIMIT: f64 = 36_893_488_147_419_103_232.0;
    if f >= LIMIT {
        return Ordering::Less;
    }
    if f <= -LIMIT {
        return Ordering::Greater;
    }
    let whole = f.trunc();
    match i.cmp(&(whole as i128)) {
        Ordering::Equal => 0f64.partial_cmp(&(f - whole)).unwrap_or(Ordering::Equal),
        o => o,
    }
}

impl fmt::Display for Exact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exact::Int(i) => write!(f, "{i}"),
            Exact::Float(x) => write!(f, "{x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(v: serde_json::Value) -> Exact {
        Exact::of(v.as_number().unwrap())
    }

    #[test]
    fn integers_and_floats_compare_by_value_exactly() {
        use Ordering::*;
        let cases = [
            (json!(1), json!(1.0), Equal),
            (json!(-1), json!(-0.5), Less),
            (json!(0), json!(-0.0), Equal),
            (json!(0), json!(0.5), Less),
            (json!(0), json!(-0.5), Greater),
            (
                json!(9_007_199_254_740_993_u64),
                json!(9_007_199_254_740_992.0),
                Greater,
            ),
            (
                json!(9_007_199_254_740_992_u64),
                json!(9_007_199_254_740_992.0),
                Equal,
            ),
            (json!(u64::MAX), json!(18_446_744_073_709_551_616.0), Less),
            (json!(i64::MIN), json!(-9_223_372_036_854_775_808.0), Equal),
            (json!(i64::MIN), json!(-1e30), Greater),
            (json!(u64::MAX), json!(1e30), Less),
            (json!(u64::MAX), json!(u64::MAX), Equal),
            (json!(-3), json!(u64::MAX), Less),
            (json!(1.5), json!(2.5), Less),
        ];
        for (a, b, want) in cases {
            assert_eq!(of(a.clone()).compare(of(b.clone())), want, "{a} vs {b}");
            assert_eq!(
                of(b.clone()).compare(of(a.clone())),
                want.reverse(),
                "{b} vs {a}"
            );
        }
    }
}
