//! The byte scanners of the streaming pass: free functions over the bytes
//! of the text, from an index to the index past a token, checking JSON's
//! syntax as serde_json does and reporting what is wrong and where
//! ([`Bad`]). They decode nothing; [`skip`] passes over a whole value.

use crate::schema::Scalar;

/// A syntax error: where and what.
pub(super) type Bad = (usize, &'static str);

/// Past whitespace from `i` (compact text has none: one comparison).
#[inline(always)]
fn ws_at(b: &[u8], mut i: usize) -> usize {
    if let Some(&c) = b.get(i)
        && c > b' '
    {
        return i;
    }
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// The string whose opening quote is just before `i`: the index of its
/// closing quote, and whether it holds an escape. Escapes' syntax is
/// checked and control characters refused, as serde_json does; nothing is
/// decoded.
#[inline(always)]
pub(super) fn string_end(b: &[u8], i: usize) -> Result<(usize, bool), Bad> {
    let end = skip_plain(b, i);
    if b.get(end) == Some(&b'"') {
        return Ok((end, false));
    }
    string_end_slow(b, end)
}

#[inline(never)]
fn string_end_slow(b: &[u8], mut i: usize) -> Result<(usize, bool), Bad> {
    let mut escaped = false;
    loop {
        i = skip_plain(b, i);
        match b.get(i) {
            Some(b'"') => return Ok((i, escaped)),
            Some(b'\\') => {
                escaped = true;
                match b.get(i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(b'u') => match b.get(i + 2..i + 6) {
                        Some(h) if h.iter().all(u8::is_ascii_hexdigit) => i += 6,
                        Some(_) => return Err((i, "invalid escape")),
                        None => return Err((b.len(), "EOF while parsing a string")),
                    },
                    Some(_) => return Err((i + 1, "invalid escape")),
                    None => return Err((b.len(), "EOF while parsing a string")),
                }
            }
            Some(_) => {
                return Err((
                    i,
                    "control character (\\u0000-\\u001F) found while parsing a string",
                ));
            }
            None => return Err((b.len(), "EOF while parsing a string")),
        }
    }
}

/// Past the digits from `i`. The first four are tested without a loop:
/// inside the sandbox every loop iteration also pays the deadline check,
/// and most runs of digits are short.
#[inline(always)]
fn digits_end(b: &[u8], i: usize) -> usize {
    let digit = |k: usize| matches!(b.get(k), Some(b'0'..=b'9'));
    if !digit(i) {
        return i;
    }
    if !digit(i + 1) {
        return i + 1;
    }
    if !digit(i + 2) {
        return i + 2;
    }
    if !digit(i + 3) {
        return i + 3;
    }
    let mut j = i + 4;
    while digit(j) {
        j += 1;
    }
    j
}

/// Past the number at `i` (its first byte is `-` or a digit): JSON's
/// grammar, as serde_json checks it when it skips one.
#[inline(always)]
fn number_end(b: &[u8], mut i: usize) -> Result<usize, Bad> {
    if b[i] == b'-' {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => {
            i += 1;
            if let Some(b'0'..=b'9') = b.get(i) {
                return Err((i, "invalid number"));
            }
        }
        Some(b'1'..=b'9') => i = digits_end(b, i + 1),
        Some(_) => return Err((i, "invalid number")),
        None => return Err((i, "EOF while parsing a value")),
    }
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = digits_end(b, start);
        if i == start {
            return Err((i, "invalid number"));
        }
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let start = i;
        i = digits_end(b, start);
        if i == start {
            return Err((i, "invalid number"));
        }
    }
    Ok(i)
}

/// Past `word` (`true`, `false`, `null`) at `i`.
#[inline(always)]
pub(super) fn ident_end(b: &[u8], i: usize, word: &[u8]) -> Result<usize, Bad> {
    match b.get(i..i + word.len()) {
        Some(w) if w == word => Ok(i + word.len()),
        _ => {
            for (k, &c) in word.iter().enumerate() {
                match b.get(i + k) {
                    None => return Err((b.len(), "EOF while parsing a value")),
                    Some(&x) if x != c => return Err((i + k, "expected ident")),
                    Some(_) => {}
                }
            }
            Err((i, "expected ident"))
        }
    }
}

/// A member name at `i` (after whitespace) of a skipped object, and its
/// colon: the index past the colon.
#[inline(always)]
fn skip_key_at(b: &[u8], i: usize) -> Result<usize, Bad> {
    match b.get(i) {
        Some(b'"') => {}
        Some(_) => return Err((i, "key must be a string")),
        None => return Err((i, "EOF while parsing an object")),
    }
    let (end, _) = string_end(b, i + 1)?;
    let i = ws_at(b, end + 1);
    match b.get(i) {
        Some(b':') => Ok(i + 1),
        Some(_) => Err((i, "expected `:`")),
        None => Err((i, "EOF while parsing an object")),
    }
}

/// Skips one value at `i` (whitespace before it allowed) as serde_json's
/// `IgnoredAny` does: syntax checked, escapes not decoded, numbers not
/// converted, no nesting limit (iterative). Returns the index past it and
/// the deepest nesting of arrays and objects in it.
pub(super) fn skip(b: &[u8], mut i: usize) -> Result<(usize, usize), Bad> {
    let mut frames = Frames::default();
    let mut deepest = 0;
    loop {
        // A value starts here.
        i = ws_at(b, i);
        match b.get(i) {
            Some(b'"') => i = string_end(b, i + 1)?.0 + 1,
            Some(b'-' | b'0'..=b'9') => i = number_end(b, i)?,
            Some(&c @ (b'{' | b'[')) => {
                deepest = deepest.max(frames.depth + 1);
                i = ws_at(b, i + 1);
                let close = if c == b'{' { b'}' } else { b']' };
                if b.get(i) == Some(&close) {
                    i += 1;
                } else {
                    frames.push(c == b'{');
                    if c == b'{' {
                        i = skip_key_at(b, i)?;
                    }
                    continue;
                }
            }
            Some(b't') => i = ident_end(b, i, b"true")?,
            Some(b'f') => i = ident_end(b, i, b"false")?,
            Some(b'n') => i = ident_end(b, i, b"null")?,
            Some(_) => return Err((i, "expected value")),
            None => return Err((i, "EOF while parsing a value")),
        }
        // A value ended: close what it completes, up to the next one.
        loop {
            let Some(object) = frames.top() else {
                return Ok((i, deepest));
            };
            i = ws_at(b, i);
            match b.get(i) {
                Some(b',') => {
                    i += 1;
                    if object {
                        i = skip_key_at(b, ws_at(b, i))?;
                    }
                    break;
                }
                Some(b'}') if object => {
                    i += 1;
                    frames.pop();
                }
                Some(b']') if !object => {
                    i += 1;
                    frames.pop();
                }
                Some(_) if object => return Err((i, "expected `,` or `}`")),
                Some(_) => return Err((i, "expected `,` or `]`")),
                None if object => return Err((i, "EOF while parsing an object")),
                None => return Err((i, "EOF while parsing a list")),
            }
        }
    }
}

/// The end of the scalar at `i` when it needs nothing but to be copied as
/// it stands for a node that accepts it as `kind` says: a string without
/// escapes within the byte bound, or a number whose text is already how
/// serde_json writes it (an integer of at most 18 digits, not `-0`; a
/// `-?D.F` of at most 15 digits as
/// [`fast_float`](super::float::fast_float) deems canonical). None: read
/// it the general way (which also reports what is wrong).
#[inline(always)]
pub(super) fn plain_scalar(b: &[u8], i: usize, kind: Scalar) -> Option<usize> {
    match b.get(i) {
        Some(b'"') => {
            let end = skip_plain(b, i + 1);
            (b.get(end) == Some(&b'"') && ((end - i - 1) as u64) < kind.str_below)
                .then_some(end + 1)
        }
        Some(&c) if kind.num && (c == b'-' || c.is_ascii_digit()) => plain_number(b, i),
        _ => None,
    }
}

/// [`plain_scalar`] for a number at `i` (out of line: the member loop stays
/// small).
#[inline(never)]
fn plain_number(b: &[u8], i: usize) -> Option<usize> {
    let negative = b[i] == b'-';
    let first = i + usize::from(negative);
    let int_end = digits_end(b, first);
    let digits = int_end - first;
    if digits == 0 || (digits > 1 && b[first] == b'0') {
        return None;
    }
    match b.get(int_end) {
        Some(b'e' | b'E') => None,
        Some(b'.') => {
            let frac_start = int_end + 1;
            let end = digits_end(b, frac_start);
            let frac = end - frac_start;
            if frac == 0 || digits + frac > 15 || matches!(b.get(end), Some(b'e' | b'E')) {
                return None;
            }
            let canonical = if frac == 1 && b[frac_start] == b'0' {
                true
            } else if b[end - 1] == b'0' {
                false
            } else if b[first] == b'0' {
                b[frac_start..end]
                    .iter()
                    .take_while(|&&c| c == b'0')
                    .count()
                    <= 4
            } else {
                true
            };
            canonical.then_some(end)
        }
        _ => (digits <= 18 && !(negative && digits == 1 && b[first] == b'0')).then_some(int_end),
    }
}

/// Four hex digits (already checked) as a number.
pub(super) fn hex4(h: &[u8]) -> u32 {
    h.iter().fold(0, |n, &c| {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => c - b'A' + 10,
        };
        (n << 4) | u32::from(d)
    })
}

/// From `i`, the index of the first `"`, `\` or control character (or the
/// end): eight bytes at a time, then one by one. The first two words are
/// tested without a loop (most strings end within them, and inside the
/// sandbox every loop iteration also pays the deadline check).
#[inline(always)]
pub(super) fn skip_plain(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES << 7;
    let hits = |chunk: &[u8]| {
        let x = u64::from_le_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]);
        let ctrl = x.wrapping_sub(ONES * 0x20) & !x;
        let q = x ^ (ONES * u64::from(b'"'));
        let quote = q.wrapping_sub(ONES) & !q;
        let s = x ^ (ONES * u64::from(b'\\'));
        let backslash = s.wrapping_sub(ONES) & !s;
        (ctrl | quote | backslash) & HIGH
    };
    if let Some(chunk) = b.get(i..i + 8) {
        let hit = hits(chunk);
        if hit != 0 {
            return i + (hit.trailing_zeros() / 8) as usize;
        }
        i += 8;
        if let Some(chunk) = b.get(i..i + 8) {
            let hit = hits(chunk);
            if hit != 0 {
                return i + (hit.trailing_zeros() / 8) as usize;
            }
            i += 8;
        }
    }
    while let Some(chunk) = b.get(i..i + 8) {
        let hit = hits(chunk);
        if hit != 0 {
            return i + (hit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

/// The open arrays (0) and objects (1) of a skipped value, innermost in the
/// low bit; deeper than 64 levels spills to the heap.
#[derive(Default)]
struct Frames {
    bits: u64,
    depth: usize,
    spill: Vec<u64>,
}

impl Frames {
    fn push(&mut self, object: bool) {
        if self.depth > 0 && self.depth.is_multiple_of(64) {
            self.spill.push(self.bits);
            self.bits = 0;
        }
        self.bits = (self.bits << 1) | u64::from(object);
        self.depth += 1;
    }

    fn pop(&mut self) {
        self.bits >>= 1;
        self.depth -= 1;
        if self.depth > 0 && self.depth.is_multiple_of(64) {
            self.bits = self.spill.pop().unwrap_or(0);
        }
    }

    /// Whether the innermost open frame is an object; None when none is open.
    fn top(&self) -> Option<bool> {
        (self.depth > 0).then_some(self.bits & 1 == 1)
    }
}
