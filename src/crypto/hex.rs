//! Lower-case hex, for hashes, MACs and ids on every request. Two table
//! look-ups a byte: a `format!` per byte was a tenth of what hashing an API
//! key cost.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lower-case hex.
pub fn encode(bytes: &[u8]) -> String {
    let mut text = vec![0; bytes.len() * 2];
    encode_into(&mut text, bytes);
    String::from_utf8(text).expect("hex digits are UTF-8")
}

/// Writes `bytes` as lower-case hex into `out`, which holds exactly two
/// bytes for each.
pub fn encode_into(out: &mut [u8], bytes: &[u8]) {
    assert_eq!(out.len(), bytes.len() * 2, "two hex digits a byte");
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0x0f)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_case_two_digits_a_byte() {
        assert_eq!(encode(&[0x00, 0x0f, 0xa0, 0xff, 0x5c]), "000fa0ff5c");
        assert_eq!(encode(&[]), "");
        let mut out = [0u8; 4];
        encode_into(&mut out, &[0xbe, 0x07]);
        assert_eq!(&out, b"be07");
    }
}
