//! Opaque identifiers Warden makes: a prefix naming the kind (`cap_`,
//! `conv_`, `int_`, `msg_`, `run_`, `gap_`) and 24 random lowercase letters
//! or digits from the OS generator (about 124 bits).

use rand::Rng;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const RANDOM_CHARS: usize = 24;

/// The largest multiple of the alphabet's size a byte can hold: a byte at
/// or above it is skipped, so every character is equally likely.
const UNBIASED_BELOW: u8 = (256 / ALPHABET.len() * ALPHABET.len()) as u8;

pub fn random_id(prefix: &str) -> String {
    // ThreadRng is a CSPRNG seeded from the OS; OsRng made a getrandom call
    // per character (5 % of a turn's CPU, docs/benchmarks.md). The bytes
    // come a block at a time, not a `gen_range` call per character.
    let mut rng = rand::thread_rng();
    let mut id = String::with_capacity(prefix.len() + RANDOM_CHARS);
    id.push_str(prefix);
    let mut bytes = [0u8; 32];
    let mut left = RANDOM_CHARS;
    while left > 0 {
        rng.fill(&mut bytes);
        for b in bytes.iter().filter(|b| **b < UNBIASED_BELOW).take(left) {
            id.push(char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]));
            left -= 1;
        }
    }
    id
}

/// A random (version 4) UUID from the same generator: `Uuid::new_v4`
/// makes a getrandom system call per id, one of three a contract test
/// made (docs/benchmarks.md, "System calls per request").
pub fn random_uuid() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::thread_rng().r#gen()).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_prefix_and_24_characters_of_the_alphabet() {
        let id = random_id("conv_");
        assert_eq!(id.len(), "conv_".len() + RANDOM_CHARS);
        assert!(id.starts_with("conv_"));
        assert!(id[5..].bytes().all(|b| ALPHABET.contains(&b)), "{id}");
        assert_ne!(random_id("conv_"), random_id("conv_"));
    }

    #[test]
    fn uuids_are_random_version_4() {
        let id = random_uuid();
        assert_eq!(id.get_version(), Some(uuid::Version::Random));
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        assert_ne!(random_uuid(), id);
    }

    /// Every character about equally often: a byte taken modulo the
    /// alphabet without skipping the top four would draw `a`–`d` an eighth
    /// more often than the rest (8 bytes each against 7).
    #[test]
    fn every_character_is_equally_likely() {
        let mut seen = [0u32; 36];
        for _ in 0..20_000 {
            for b in random_id("").bytes() {
                let at = ALPHABET.iter().position(|a| *a == b).unwrap();
                seen[at] += 1;
            }
        }
        // 480,000 draws, 13,333 expected each, a standard deviation of 114:
        // ±700 is six of them (a false alarm about once in 10^7 runs); the
        // bias would put `a`–`d` at 15,000.
        let expected = 480_000.0 / 36.0;
        for (at, count) in seen.iter().enumerate() {
            let off = (f64::from(*count) - expected).abs();
            assert!(off < 700.0, "{}: {count}", char::from(ALPHABET[at]));
        }
    }
}
