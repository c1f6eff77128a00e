//! The pruned output of the streaming pass: spans of the input, merged
//! while contiguous, and the little that is re-encoded.

/// The pruned output: a string, plus a pending run `text[start..end]` of
/// input copied verbatim, extended while the spans written are contiguous.
pub(super) struct Out {
    s: String,
    start: usize,
    pub(super) end: usize,
}

pub(super) const NO_RUN: usize = usize::MAX;

impl Out {
    pub(super) fn with_capacity(n: usize) -> Self {
        Out {
            s: String::with_capacity(n),
            start: NO_RUN,
            end: NO_RUN,
        }
    }

    /// Writes `text[a..b]` (a whole token, so on character boundaries).
    #[inline]
    pub(super) fn span(&mut self, text: &str, a: usize, b: usize) {
        if a == self.end {
            self.end = b;
        } else {
            self.flush(text);
            self.start = a;
            self.end = b;
        }
    }

    fn flush(&mut self, text: &str) {
        if self.end != NO_RUN {
            self.s.push_str(&text[self.start..self.end]);
            self.start = NO_RUN;
            self.end = NO_RUN;
        }
    }

    /// Writes text that is not a span of the input.
    pub(super) fn literal(&mut self, text: &str, s: &str) {
        self.flush(text);
        self.s.push_str(s);
    }

    pub(super) fn finish(mut self, text: &str) -> String {
        self.flush(text);
        self.s
    }
}
