//! Checking that text a guest returned is JSON.
//!
//! A guest is untrusted: the pruned result and the shaped interaction it
//! returns must be JSON, or the call is a contract fault. This runs on every
//! `prune-output` call, over the whole pruned result, so it is a purpose-built
//! syntax check (no value is built) that accepts exactly what
//! `serde_json::from_str::<IgnoredAny>` accepts: one RFC 8259 value with
//! optional surrounding whitespace; strings without control characters whose
//! escapes are well formed (unpaired surrogates in `\u` escapes pass, as
//! there); numbers by their grammar; any nesting depth (iterative, no
//! recursion). The tests compare it with serde_json on many documents.
//!
//! On x86_64 (`indexed`) SIMD (SSE2, or SSSE3 / AVX2 when the CPU has
//! them) classifies 64 bytes at a time and only the tokens are walked (string contents are never looked at one by one); the
//! portable version (`portable`) walks token by token, strings eight
//! bytes at a time.

use std::fmt;

/// Why text is not JSON, and where (byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotJson {
    pub what: &'static str,
    pub at: usize,
}

impl fmt::Display for NotJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

type R<T> = Result<T, NotJson>;

fn bad<T>(what: &'static str, at: usize) -> R<T> {
    Err(NotJson { what, at })
}

/// Open arrays (0) and objects (1), innermost in the low bit of `bits`;
/// deeper than 64 levels spills to the heap.
#[derive(Default)]
struct Frames {
    bits: u64,
    depth: usize,
    spill: Vec<u64>,
}

impl Frames {
    fn push(&mut self, object: bool) {
        if self.depth > 0 && self.depth % 64 == 0 {
            self.spill.push(self.bits);
            self.bits = 0;
        }
        self.bits = (self.bits << 1) | u64::from(object);
        self.depth += 1;
    }

    fn pop(&mut self) {
        self.bits >>= 1;
        self.depth -= 1;
        if self.depth > 0 && self.depth % 64 == 0 {
            self.bits = self.spill.pop().unwrap_or(0);
        }
    }

    /// Pops the innermost frame; returns the bit it was pushed with.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn pop_bit(&mut self) -> bool {
        let bit = self.bits & 1 == 1;
        self.pop();
        bit
    }

    /// Whether the innermost open frame is an object; None when none is.
    #[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
    fn top(&self) -> Option<bool> {
        (self.depth > 0).then_some(self.bits & 1 == 1)
    }
}

/// Checks that `text` is one JSON value, whitespace around it allowed.
pub(crate) fn check(text: &str) -> R<()> {
    #[cfg(target_arch = "x86_64")]
    {
        indexed::check(text)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        portable::check(text)
    }
}

/// [`check`] token by token: the version for other targets, and the
/// reference the indexed one is tested against (and the source of the
/// number and literal checks it uses).
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
mod portable {
    use super::{Frames, R, bad};

    /// [`check`](super::check) token by token.
    pub(crate) fn check(text: &str) -> R<()> {
        let b = text.as_bytes();
        let mut frames = Frames::default();
        let mut i = 0;
        loop {
            // A value starts here.
            i = ws(b, i);
            match b.get(i) {
                Some(&c @ (b'{' | b'[')) => {
                    i = ws(b, i + 1);
                    let close = if c == b'{' { b'}' } else { b']' };
                    if b.get(i) == Some(&close) {
                        i += 1;
                    } else {
                        frames.push(c == b'{');
                        if c == b'{' {
                            i = key(b, i)?;
                        }
                        continue;
                    }
                }
                Some(b'"') => i = string(b, i + 1)?,
                Some(b't') => i = ident(b, i, b"true")?,
                Some(b'f') => i = ident(b, i, b"false")?,
                Some(b'n') => i = ident(b, i, b"null")?,
                Some(b'-' | b'0'..=b'9') => i = number(b, i)?,
                Some(_) => return bad("expected value", i),
                None => return bad("EOF while parsing a value", i),
            }
            // A value ended: close what it completes, up to the next value.
            loop {
                i = ws(b, i);
                let Some(object) = frames.top() else {
                    return if i == b.len() {
                        Ok(())
                    } else {
                        bad("trailing characters", i)
                    };
                };
                match b.get(i) {
                    Some(b',') => {
                        i += 1;
                        if object {
                            i = key(b, ws(b, i))?;
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
                    Some(_) if object => return bad("expected `,` or `}`", i),
                    Some(_) => return bad("expected `,` or `]`", i),
                    None => return bad("EOF while parsing a list or object", i),
                }
            }
        }
    }

    /// Past whitespace from `i` (compact JSON has none: one comparison).
    #[inline(always)]
    fn ws(b: &[u8], mut i: usize) -> usize {
        if matches!(b.get(i), Some(&c) if c > b' ') {
            return i;
        }
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = b.get(i) {
            i += 1;
        }
        i
    }

    /// A member name at `i` and its colon; returns the index past the colon.
    #[inline(always)]
    fn key(b: &[u8], i: usize) -> R<usize> {
        match b.get(i) {
            Some(b'"') => {}
            Some(_) => return bad("key must be a string", i),
            None => return bad("EOF while parsing an object", i),
        }
        let i = ws(b, string(b, i + 1)?);
        match b.get(i) {
            Some(b':') => Ok(i + 1),
            Some(_) => bad("expected `:`", i),
            None => bad("EOF while parsing an object", i),
        }
    }

    pub(super) fn ident(b: &[u8], i: usize, word: &[u8]) -> R<usize> {
        match b.get(i..i + word.len()) {
            Some(w) if w == word => Ok(i + word.len()),
            _ => bad("expected ident", i),
        }
    }

    /// A string whose opening quote is just before `i`; returns the index past
    /// its closing quote.
    #[inline(always)]
    fn string(b: &[u8], mut i: usize) -> R<usize> {
        loop {
            i = skip_plain(b, i);
            match b.get(i) {
                Some(b'"') => return Ok(i + 1),
                Some(b'\\') => match b.get(i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(b'u') => match b.get(i + 2..i + 6) {
                        Some(h) if h.iter().all(u8::is_ascii_hexdigit) => i += 6,
                        Some(_) => return bad("invalid escape", i),
                        None => return bad("EOF while parsing a string", b.len()),
                    },
                    Some(_) => return bad("invalid escape", i),
                    None => return bad("EOF while parsing a string", b.len()),
                },
                Some(_) => return bad("control character in a string", i),
                None => return bad("EOF while parsing a string", i),
            }
        }
    }

    /// From `i`, the index of the first `"`, `\` or control character (or the
    /// end): eight bytes at a time, then one by one.
    #[inline(always)]
    fn skip_plain(b: &[u8], mut i: usize) -> usize {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = ONES << 7;
        while let Some(chunk) = b.get(i..i + 8) {
            let x = u64::from_le_bytes([
                chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
            ]);
            let ctrl = x.wrapping_sub(ONES * 0x20) & !x;
            let q = x ^ (ONES * u64::from(b'"'));
            let quote = q.wrapping_sub(ONES) & !q;
            let s = x ^ (ONES * u64::from(b'\\'));
            let backslash = s.wrapping_sub(ONES) & !s;
            let hit = (ctrl | quote | backslash) & HIGH;
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

    /// A number at `i` (JSON's grammar; its value is not computed).
    pub(super) fn number(b: &[u8], mut i: usize) -> R<usize> {
        let digits = |b: &[u8], mut i: usize| {
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
            i
        };
        if b[i] == b'-' {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => {
                i += 1;
                if let Some(b'0'..=b'9') = b.get(i) {
                    return bad("invalid number", i);
                }
            }
            Some(b'1'..=b'9') => i = digits(b, i + 1),
            Some(_) => return bad("invalid number", i),
            None => return bad("EOF while parsing a value", i),
        }
        if b.get(i) == Some(&b'.') {
            let start = i + 1;
            i = digits(b, start);
            if i == start {
                return bad("invalid number", i);
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let start = i;
            i = digits(b, start);
            if i == start {
                return bad("invalid number", i);
            }
        }
        Ok(i)
    }
}

/// The x86_64 version: SSE2 classifies 64 bytes at a time into bit masks
/// (quotes, backslashes, control bytes, whitespace, structural characters),
/// strings are found with a prefix-XOR of their unescaped quotes, and only
/// the tokens (structural characters, opening quotes, first bytes of
/// numbers and literals) are walked one by one: string contents are never
/// looked at byte by byte.
#[cfg(target_arch = "x86_64")]
mod indexed {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8, _mm_setr_epi8, _mm_shuffle_epi8,
    };

    use super::portable::{ident, number};
    use super::{Frames, R, bad};

    /// Bit masks of one 64-byte block (bit `k` is byte `k`).
    struct Masks {
        quote: u64,
        backslash: u64,
        ctrl: u64,
        ws: u64,
        op: u64,
    }

    /// Classifies 64 bytes. With `SSSE3`, whitespace and structural
    /// characters are found with two table lookups (`pshufb`) instead of
    /// ten comparisons; the caller must then run with SSSE3 enabled. With
    /// `AVX2` (and SSSE3), the same on 32 bytes at a time; the caller must
    /// run with AVX2 enabled.
    #[inline(always)]
    fn classify<const SSSE3: bool, const AVX2: bool>(chunk: &[u8; 64]) -> Masks {
        if AVX2 {
            // SAFETY: only reached from `check_avx2`, after AVX2 was
            // detected.
            return unsafe { classify_avx2(chunk) };
        }
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            ctrl: 0,
            ws: 0,
            op: 0,
        };
        // SAFETY: SSE2 is part of the x86_64 baseline; `_mm_shuffle_epi8`
        // (SSSE3) is only reached when `SSSE3` is true, which `check` only
        // does after detecting SSSE3. Each load reads 16 bytes at offset 0,
        // 16, 32 or 48 of the 64-byte array `chunk`, in bounds.
        unsafe {
            let splat = |c: u8| _mm_set1_epi8(c as i8);
            let eq = |v: __m128i, c: u8| _mm_cmpeq_epi8(v, splat(c));
            // By low nibble: the whitespace byte with that low nibble (a
            // byte that matches no input with it elsewhere), and the
            // structural character with that low nibble once `| 0x20`
            // (`[`, `]` fold onto `{`, `}`; 0 elsewhere). A byte with its
            // high bit set looks up 0 and matches neither.
            let ws_table = _mm_setr_epi8(
                b' ' as i8,
                100,
                100,
                100,
                17,
                100,
                113,
                2,
                100,
                b'\t' as i8,
                b'\n' as i8,
                112,
                100,
                b'\r' as i8,
                100,
                100,
            );
            let op_table = _mm_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b':' as i8, b'{' as i8, b',' as i8, b'}' as i8, 0, 0,
            );
            for k in 0..4 {
                let v = _mm_loadu_si128(chunk.as_ptr().add(16 * k).cast());
                let bits = |x: __m128i| u64::from(_mm_movemask_epi8(x) as u16) << (16 * k);
                m.quote |= bits(eq(v, b'"'));
                m.backslash |= bits(eq(v, b'\\'));
                // v <= 0x1f (unsigned)
                m.ctrl |= bits(_mm_cmpeq_epi8(_mm_max_epu8(v, splat(0x1f)), splat(0x1f)));
                let folded = _mm_or_si128(v, splat(0x20));
                if SSSE3 {
                    m.ws |= bits(_mm_cmpeq_epi8(_mm_shuffle_epi8(ws_table, v), v));
                    m.op |= bits(_mm_cmpeq_epi8(_mm_shuffle_epi8(op_table, v), folded));
                } else {
                    m.ws |= bits(_mm_or_si128(
                        _mm_or_si128(eq(v, b' '), eq(v, b'\n')),
                        _mm_or_si128(eq(v, b'\t'), eq(v, b'\r')),
                    ));
                    // `[` | 0x20 is `{`, `]` | 0x20 is `}`.
                    m.op |= bits(_mm_or_si128(
                        _mm_or_si128(eq(folded, b'{'), eq(folded, b'}')),
                        _mm_or_si128(eq(v, b','), eq(v, b':')),
                    ));
                }
            }
        }
        m
    }

    /// [`classify`] with AVX2.
    #[inline(always)]
    unsafe fn classify_avx2(chunk: &[u8; 64]) -> Masks {
        use std::arch::x86_64::{
            __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_max_epu8, _mm256_movemask_epi8,
            _mm256_or_si256, _mm256_set1_epi8, _mm256_setr_epi8, _mm256_shuffle_epi8,
        };
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            ctrl: 0,
            ws: 0,
            op: 0,
        };
        // SAFETY: the caller runs with AVX2 enabled; each load reads 32
        // bytes at offset 0 or 32 of the 64-byte array `chunk`.
        unsafe {
            let splat = |c: u8| _mm256_set1_epi8(c as i8);
            let eq = |v: __m256i, c: u8| _mm256_cmpeq_epi8(v, splat(c));
            // The tables of `classify`, once per 128-bit lane.
            let ws_table = _mm256_setr_epi8(
                b' ' as i8,
                100,
                100,
                100,
                17,
                100,
                113,
                2,
                100,
                b'\t' as i8,
                b'\n' as i8,
                112,
                100,
                b'\r' as i8,
                100,
                100,
                b' ' as i8,
                100,
                100,
                100,
                17,
                100,
                113,
                2,
                100,
                b'\t' as i8,
                b'\n' as i8,
                112,
                100,
                b'\r' as i8,
                100,
                100,
            );
            let op_table = _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b':' as i8, b'{' as i8, b',' as i8, b'}' as i8, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b':' as i8, b'{' as i8, b',' as i8, b'}' as i8, 0, 0,
            );
            for k in 0..2 {
                let v = _mm256_loadu_si256(chunk.as_ptr().add(32 * k).cast());
                let bits = |x: __m256i| u64::from(_mm256_movemask_epi8(x) as u32) << (32 * k);
                m.quote |= bits(eq(v, b'"'));
                m.backslash |= bits(eq(v, b'\\'));
                m.ctrl |= bits(_mm256_cmpeq_epi8(
                    _mm256_max_epu8(v, splat(0x1f)),
                    splat(0x1f),
                ));
                let folded = _mm256_or_si256(v, splat(0x20));
                m.ws |= bits(_mm256_cmpeq_epi8(_mm256_shuffle_epi8(ws_table, v), v));
                m.op |= bits(_mm256_cmpeq_epi8(_mm256_shuffle_epi8(op_table, v), folded));
            }
        }
        m
    }

    /// Bit `k` of the result is the XOR of bits `0..=k` of `x`.
    #[inline(always)]
    fn prefix_xor(mut x: u64) -> u64 {
        x ^= x << 1;
        x ^= x << 2;
        x ^= x << 4;
        x ^= x << 8;
        x ^= x << 16;
        x ^= x << 32;
        x
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum State {
        /// A value must come (start, after `:`, after `,` in an array).
        Value,
        /// After `[`: a value or `]`.
        ValueOrClose,
        /// After `{`: a name or `}`.
        KeyOrClose,
        /// After `,` in an object: a name.
        Key,
        /// After a name: `:`.
        Colon,
        /// After a value in an array or object: `,` or the close.
        CommaOrClose,
        /// After the top-level value: nothing more.
        Done,
    }

    pub(crate) fn check(text: &str) -> R<()> {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 (and so SSSE3) was just detected.
            unsafe { check_avx2(text) }
        } else if std::is_x86_feature_detected!("ssse3") {
            // SAFETY: SSSE3 was just detected.
            unsafe { check_ssse3(text) }
        } else {
            check_with::<false, false>(text)
        }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn check_avx2(text: &str) -> R<()> {
        check_with::<true, true>(text)
    }

    #[target_feature(enable = "ssse3")]
    pub(super) unsafe fn check_ssse3(text: &str) -> R<()> {
        check_with::<true, false>(text)
    }

    #[inline(always)]
    pub(super) fn check_with<const SSSE3: bool, const AVX2: bool>(text: &str) -> R<()> {
        let b = text.as_bytes();
        let mut frames = Frames::default();
        // Kind of the innermost open container (true: object).
        let mut object = false;
        let mut state = State::Value;
        // What follows a value, and a comma, at the current depth.
        let mut after = State::Done;
        let mut comma = State::Value;
        let mut in_string = 0u64; // all ones when a string runs into the block
        let mut escape_carry = 0u64; // 1 when the block's first byte is escaped
        let mut scalar_carry = 0u64; // 1 when a scalar runs into the block
        let mut base = 0;
        while base < b.len() {
            let chunk: [u8; 64] = match b.get(base..base + 64).and_then(|c| c.try_into().ok()) {
                Some(c) => c,
                None => {
                    // The tail, padded with spaces (whitespace: no token).
                    let mut c = [b' '; 64];
                    c[..b.len() - base].copy_from_slice(&b[base..]);
                    c
                }
            };
            let m = classify::<SSSE3, AVX2>(&chunk);
            // Escaped bytes: each follows a backslash that is not itself
            // escaped. Escapes are checked here (strings are not walked).
            let mut escaped = escape_carry;
            escape_carry = 0;
            let mut starts = m.backslash & !escaped;
            while starts != 0 {
                let k = starts.trailing_zeros();
                if k == 63 {
                    escape_carry = 1;
                } else {
                    escaped |= 1 << (k + 1);
                }
                // A backslash that is escaped starts nothing.
                starts &= !(1u64 << k) & !escaped;
                let p = base + k as usize;
                match b.get(p + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {}
                    Some(b'u') => match b.get(p + 2..p + 6) {
                        Some(h) if h.iter().all(u8::is_ascii_hexdigit) => {}
                        Some(_) => return bad("invalid escape", p),
                        None => return bad("EOF while parsing a string", b.len()),
                    },
                    Some(_) => return bad("invalid escape", p),
                    None => return bad("EOF while parsing a string", b.len()),
                }
            }
            let quotes = m.quote & !escaped;
            // Inside a string: from its opening quote up to (not including)
            // its closing one.
            let inside = prefix_xor(quotes) ^ in_string;
            in_string = ((inside as i64) >> 63) as u64;
            if m.ctrl & inside != 0 {
                let at = base + (m.ctrl & inside).trailing_zeros() as usize;
                return bad("control character in a string", at);
            }
            // Bytes of numbers and literals (and of anything invalid).
            let scalar = !inside & !(m.op | m.ws | m.quote);
            let scalar_start = scalar & !((scalar << 1) | scalar_carry);
            scalar_carry = scalar >> 63;
            let mut tokens = (m.op & !inside) | (quotes & inside) | scalar_start;
            while tokens != 0 {
                let p = base + tokens.trailing_zeros() as usize;
                tokens &= tokens - 1;
                let c = b[p];
                state = match c {
                    b'"' => match state {
                        State::Value | State::ValueOrClose => after,
                        State::Key | State::KeyOrClose => {
                            // A name; its colon is usually the next token.
                            if tokens != 0 && b[base + tokens.trailing_zeros() as usize] == b':' {
                                tokens &= tokens - 1;
                                State::Value
                            } else {
                                State::Colon
                            }
                        }
                        _ => return bad("unexpected string", p),
                    },
                    b':' if state == State::Colon => State::Value,
                    b',' if state == State::CommaOrClose => {
                        // In an object, a name (and its colon) usually follow.
                        if object
                            && tokens != 0
                            && b[base + tokens.trailing_zeros() as usize] == b'"'
                        {
                            tokens &= tokens - 1;
                            if tokens != 0 && b[base + tokens.trailing_zeros() as usize] == b':' {
                                tokens &= tokens - 1;
                                State::Value
                            } else {
                                State::Colon
                            }
                        } else {
                            comma
                        }
                    }
                    b'{' | b'[' if matches!(state, State::Value | State::ValueOrClose) => {
                        frames.push(object);
                        object = c == b'{';
                        after = State::CommaOrClose;
                        comma = if object { State::Key } else { State::Value };
                        if object {
                            State::KeyOrClose
                        } else {
                            State::ValueOrClose
                        }
                    }
                    b'}' | b']'
                        if (c == b'}') == object
                            && (state == State::CommaOrClose
                                || state
                                    == if object {
                                        State::KeyOrClose
                                    } else {
                                        State::ValueOrClose
                                    }) =>
                    {
                        object = frames.pop_bit();
                        after = if frames.depth == 0 {
                            State::Done
                        } else {
                            State::CommaOrClose
                        };
                        comma = if object { State::Key } else { State::Value };
                        after
                    }
                    b't' | b'f' | b'n' | b'-' | b'0'..=b'9'
                        if matches!(state, State::Value | State::ValueOrClose) =>
                    {
                        let end = match c {
                            b't' => ident(b, p, b"true")?,
                            b'f' => ident(b, p, b"false")?,
                            b'n' => ident(b, p, b"null")?,
                            _ => number(b, p)?,
                        };
                        // It must end where its run of bytes ends.
                        match b.get(end) {
                            None
                            | Some(
                                b' ' | b'\n' | b'\t' | b'\r' | b'"' | b',' | b':' | b'{' | b'}'
                                | b'[' | b']',
                            ) => {}
                            Some(_) => return bad("invalid value", end),
                        }
                        after
                    }
                    _ => return bad("unexpected character", p),
                };
            }
            base += 64;
        }
        if in_string != 0 {
            return bad("EOF while parsing a string", b.len());
        }
        if state != State::Done {
            return bad("EOF while parsing a value", b.len());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::check;
    use super::portable::check as check_scalar;

    fn serde_accepts(text: &str) -> bool {
        serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
    }

    /// Every version (indexed on x86_64: SSE2, SSSE3, and AVX2 through
    /// `check` where the machine has it; and the portable one) gives
    /// serde_json's verdict.
    fn agree(text: &str) {
        let want = serde_accepts(text);
        assert_eq!(
            check(text).is_ok(),
            want,
            "check on {text:?}: {:?}",
            check(text)
        );
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(
                super::indexed::check_with::<false, false>(text).is_ok(),
                want,
                "SSE2 check on {text:?}"
            );
            if std::is_x86_feature_detected!("ssse3") {
                // SAFETY: SSSE3 was just detected.
                let ssse3 = unsafe { super::indexed::check_ssse3(text) };
                assert_eq!(ssse3.is_ok(), want, "SSSE3 check on {text:?}");
            }
        }
        assert_eq!(
            check_scalar(text).is_ok(),
            want,
            "check_scalar on {text:?}: {:?}",
            check_scalar(text)
        );
    }

    #[test]
    fn accepts_what_serde_json_accepts() {
        let docs = [
            "{}",
            "[]",
            " {} ",
            "\n[ ]\t",
            "0",
            "-0",
            "1.5e-3",
            "1E+2",
            "-12.0",
            "true",
            "false",
            "null",
            "\"\"",
            "\"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u00e9\\ud800\"",
            "\"é😀\"",
            r#"{"a":[1,{"b":null}],"c":"d","a":2}"#,
            r#"{ "a" : [ 1 , 2 ] , "b" : { } }"#,
            "",
            " ",
            "{",
            "}",
            "[",
            "]",
            "{,}",
            "[,]",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\" 1}",
            "{a:1}",
            "{1:2}",
            "[1 2]",
            "[}",
            "{]",
            "{\"a\":1}}",
            "{} x",
            "{}{}",
            "\u{feff}{}",
            "01",
            "-",
            "1.",
            ".5",
            "+1",
            "1e",
            "1e+",
            "--1",
            "tru",
            "truex",
            "nul",
            "nulll",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\u12G4\"",
            "\"a",
            "\"\u{1}\"",
            "\"a\u{1f}b\"",
            "\"\u{7f}\"",
            "[\"a\\",
            "{\"a\":\"b\\u00\"}",
            "[1,2,3,[4,[5,{}]]]",
            "1 2",
            "[-]",
            "[-a]",
            "[0x1]",
            "[1e5.5]",
            "[1.5.5]",
        ];
        for d in docs {
            agree(d);
        }
        // Strings, escapes and numbers across the 64-byte blocks.
        for n in 50..80 {
            let a = "a".repeat(n);
            for d in [
                format!("[\"{a}\",1]"),
                format!("[\"{a}\\\\\\\"x\",1]"),
                format!("[\"{a}\\\\\",1]"),
                format!("[\"{a}\\\\\\\\\",1]"),
                format!("[\"{a}\\u00e9\",1]"),
                format!("[\"{a}\\u00\",1]"),
                format!("[\"{a}\u{1}\"]"),
                format!("{{\"{a}\":12345.678e-9}}"),
                format!("[{}123,4]", " ".repeat(n)),
                format!("[{}tru,4]", " ".repeat(n)),
                format!("[\"{a}"),
                format!("[\"{a}\\"),
            ] {
                agree(&d);
            }
        }
        for n in [1, 63, 64, 65, 128, 129, 5000] {
            agree(&format!("{}{}", "[".repeat(n), "]".repeat(n)));
            agree(&format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n)));
            agree(&format!("{}{}", "[".repeat(n), "]".repeat(n - 1)));
            agree(&format!("{}]", "[{\"a\":".repeat(n)));
        }
    }

    #[test]
    fn mutated_documents_get_the_same_verdict() {
        let seeds = [
            r#"{"orders":[{"id":"ORD-000001","total":99.9,"lines":[{"sku":"SKU-0","qty":1,"price":24.9}],"shipping":{"carrier":"UPS"}}],"page":1}"#,
            r#"[{"a\\\"b":"a long string value \\\\ that crosses the sixty-four byte blocks \" yes","n":[1,-2.5e+3,true,null,false,{}]}]"#,
            r#"{ "a" : [ true , false , null , -1.5e+3 , "x\"\\\/\u00e9" ] , "b" : { "c" : [ ] , "d" : { } } }"#,
            r#"[{"k":"\ud83d\ude00 long string value with some text in it","n":-0.0},[[[]]],"",0]"#,
        ];
        let alphabet = b"{}[]\",:\\ \n0123456789-+.eEtrufalsnbxyzu\x01";
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let mut accepted = 0;
        for round in 0..150_000 {
            let mut doc = seeds[round % seeds.len()].as_bytes().to_vec();
            for _ in 0..1 + next(3) {
                let at = next(doc.len() + 1);
                let c = alphabet[next(alphabet.len())];
                match next(3) {
                    0 => doc.insert(at, c),
                    1 if at < doc.len() => {
                        doc.remove(at);
                    }
                    _ if at < doc.len() => doc[at] = c,
                    _ => doc.push(c),
                }
            }
            if let Ok(text) = String::from_utf8(doc) {
                agree(&text);
                accepted += usize::from(serde_accepts(&text));
            }
        }
        assert!(accepted > 8000, "{accepted}");
    }
}
