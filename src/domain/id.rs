//! Opaque identifiers Warden makes: a prefix naming the kind (`cap_`,
//! `conv_`, `int_`, `msg_`, `run_`, `gap_`) and 24 random lowercase letters
//! or digits from the OS generator (about 124 bits).

use rand::Rng;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const RANDOM_CHARS: usize = 24;

pub fn random_id(prefix: &str) -> String {
    // ThreadRng is a CSPRNG seeded from the OS; OsRng made a getrandom call
    // per character (5 % of a turn's CPU, docs/benchmarks.md).
    let mut rng = rand::thread_rng();
    let mut id = String::with_capacity(prefix.len() + RANDOM_CHARS);
    id.push_str(prefix);
    id.extend((0..RANDOM_CHARS).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char));
    id
}
