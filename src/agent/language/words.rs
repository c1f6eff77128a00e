//! Words as the agent compares them: folded (lowercase, Spanish accents
//! removed) runs of letters and digits. A turn tokenises its message once
//! (`Said`); everything else reads those words.

/// Lowercase with Spanish accents and diaeresis removed (`ñ` stays `ñ`).
pub fn fold(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        .map(|c| match c {
            'á' | 'à' | 'ä' | 'â' => 'a',
            'é' | 'è' | 'ë' | 'ê' => 'e',
            'í' | 'ì' | 'ï' | 'î' => 'i',
            'ó' | 'ò' | 'ö' | 'ô' => 'o',
            'ú' | 'ù' | 'ü' | 'û' => 'u',
            other => other,
        })
        .collect()
}

/// Folded words: runs of letters and digits.
pub fn words(text: &str) -> Vec<String> {
    #[cfg(debug_assertions)]
    probe::count(text);
    fold(text)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `phrase` (folded words) occurs as consecutive words of `text`.
pub fn has_phrase(text_words: &[String], phrase: &str) -> bool {
    let needle: Vec<&str> = phrase.split(' ').collect();
    text_words
        .windows(needle.len())
        .any(|w| w.iter().zip(&needle).all(|(a, b)| a == b))
}

/// Words that carry no topic: never used to match capabilities or topics,
/// never taken as argument values.
pub fn is_stopword(word: &str) -> bool {
    const STOP: &[&str] = &[
        "a", "al", "como", "con", "cual", "cuales", "de", "del", "el", "en", "es", "esta", "este",
        "esto", "hay", "la", "las", "lo", "los", "me", "mi", "mis", "muy", "no", "para", "pero",
        "por", "que", "se", "si", "sin", "su", "sus", "te", "tengo", "tu", "un", "una", "uno", "y",
        "ya", "yo", "quiero", "saber", "dime", "puedes", "favor", "hola", "an", "and", "are",
        "can", "do", "does", "for", "from", "how", "i", "is", "it", "me", "my", "of", "on", "or",
        "please", "the", "this", "to", "what", "which", "who", "with", "you", "your", "want",
        "know", "tell", "about", "use", "user", "asks", "pregunta", "usuario", "there", "any",
        "some", "one", "have", "has", "had", "will", "was", "were", "been", "just", "also",
        "tambien", "alguna", "alguno", "algun", "tiene", "tienen", "teneis", "otros", "otras",
        "otro", "otra", "other", "others", "that", "dices",
    ];
    word.chars().count() < 3 || STOP.contains(&word)
}

/// How often a whole probe message was tokenised, in debug builds: a test
/// sends a message that starts and ends with [`probe::MARKER`] and reads
/// the count after its turn. Only texts holding the marker twice count (the
/// message, not its clauses or words), and other tests' texts never hold
/// it, so they do not disturb the count.
#[cfg(debug_assertions)]
pub mod probe {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A word no real message holds.
    pub const MARKER: &str = "zqxprobezqx";
    static TOKENISED: AtomicU64 = AtomicU64::new(0);

    pub(super) fn count(text: &str) {
        if text.matches(MARKER).nth(1).is_some() {
            TOKENISED.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Tokenisations of probe texts so far, in this process.
    pub fn tokenised() -> u64 {
        TOKENISED.load(Ordering::Relaxed)
    }
}
