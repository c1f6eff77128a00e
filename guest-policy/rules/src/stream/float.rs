//! Numbers with a fraction or an exponent, read without serde_json when
//! the result is exact (and known to be spelled as serde_json writes it).

/// Powers of ten that are exact in an `f64`.
pub(super) const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The `f64` of a number token with a fraction or an exponent (syntax
/// already checked), when it can be had exactly without serde_json: at most
/// 2^53 as an integer significand and a power of ten of at most 22 apart, so
/// one exactly-rounded multiplication or division gives it (serde_json
/// computes the same product or quotient, with or without its
/// `float_roundtrip` feature, which rounds exactly too). Also says whether
/// the token is spelled as serde_json writes that `f64` (shortest
/// round-trip digits, plain notation), so it may be copied as it stands:
/// `-?D.F` with at most 15 significant digits (two different decimals of at
/// most 15 digits never round to the same `f64`, so these digits are the
/// shortest), no trailing zero in `F` unless `F` is `0`, and a magnitude in
/// [1e-5, 1e15) or zero. Checked against serde_json by the tests.
pub(super) fn fast_float(t: &[u8]) -> Option<(f64, bool)> {
    let (negative, t) = match t.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, t),
    };
    let int_len = t
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(t.len());
    let (int, rest) = t.split_at(int_len);
    let (frac, rest) = match rest.split_first() {
        Some((b'.', r)) => {
            let n = r
                .iter()
                .position(|c| !c.is_ascii_digit())
                .unwrap_or(r.len());
            r.split_at(n)
        }
        _ => (&[][..], rest),
    };
    let exp: i32 = match rest.split_first() {
        None => 0,
        Some((_, e)) => {
            let (neg, digits) = match e.split_first() {
                Some((b'-', d)) => (true, d),
                Some((b'+', d)) => (false, d),
                _ => (false, e),
            };
            if digits.len() > 4 {
                return None;
            }
            let v = digits
                .iter()
                .fold(0i32, |v, c| v * 10 + i32::from(c - b'0'));
            if neg { -v } else { v }
        }
    };
    if int.len() + frac.len() > 19 {
        return None;
    }
    let sig = int
        .iter()
        .chain(frac)
        .fold(0u64, |v, c| v * 10 + u64::from(c - b'0'));
    if sig > 1 << 53 {
        return None;
    }
    let e10 = exp - frac.len() as i32;
    let mut f = sig as f64;
    if e10 >= 0 {
        f *= *POW10.get(e10 as usize)?;
    } else {
        f /= *POW10.get(e10.unsigned_abs() as usize)?;
    }
    if negative {
        f = -f;
    }
    let canonical = rest.is_empty()
        && !frac.is_empty()
        && if frac == b"0" {
            int.len() <= 15
        } else if frac.last() == Some(&b'0') {
            false
        } else if int != b"0" {
            int.len() + frac.len() <= 15
        } else {
            let zeros = frac.iter().take_while(|&&c| c == b'0').count();
            zeros <= 4 && frac.len() - zeros <= 15
        };
    Some((f, canonical))
}
