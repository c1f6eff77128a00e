//! Which of an object's declared properties the member loop has seen.

/// Which of an object's declared properties were seen (by index in
/// `properties`): a plain word for objects of at most 64 properties (the
/// member loop is compiled for both, so the common case keeps no heap
/// state), [`Seen`] beyond.
pub(super) trait SeenSet {
    fn for_properties(n: usize) -> Self;
    /// Marks `i`; true if it was already marked.
    fn set(&mut self, i: usize) -> bool;
    fn get(&self, i: usize) -> bool;
    /// The marks of the first 64 properties.
    fn low(&self) -> u64;
}

impl SeenSet for u64 {
    #[inline(always)]
    fn for_properties(n: usize) -> Self {
        debug_assert!(n <= 64);
        0
    }

    #[inline(always)]
    fn set(&mut self, i: usize) -> bool {
        let bit = 1u64 << i;
        let was = *self & bit != 0;
        *self |= bit;
        was
    }

    #[inline(always)]
    fn get(&self, i: usize) -> bool {
        *self & (1u64 << i) != 0
    }

    #[inline(always)]
    fn low(&self) -> u64 {
        *self
    }
}

impl SeenSet for Seen {
    fn for_properties(n: usize) -> Self {
        Seen::new(n)
    }

    fn set(&mut self, i: usize) -> bool {
        Seen::set(self, i)
    }

    fn get(&self, i: usize) -> bool {
        Seen::get(self, i)
    }

    fn low(&self) -> u64 {
        self.low
    }
}

/// Which of an object's declared properties were seen: the first 64 in a
/// word, any others (at most `limits::MAX_PROPERTIES` = 256 by
/// construction) on the heap.
pub(super) struct Seen {
    low: u64,
    more: Vec<u64>,
}

impl Seen {
    #[inline]
    fn new(n: usize) -> Self {
        Seen {
            low: 0,
            more: if n > 64 {
                vec![0; (n - 64).div_ceil(64)]
            } else {
                Vec::new()
            },
        }
    }

    /// Marks `i`; true if it was already marked.
    #[inline]
    fn set(&mut self, i: usize) -> bool {
        let (word, bit) = if i < 64 {
            (&mut self.low, 1u64 << i)
        } else {
            (&mut self.more[(i - 64) / 64], 1u64 << (i % 64))
        };
        let was = *word & bit != 0;
        *word |= bit;
        was
    }

    #[inline]
    fn get(&self, i: usize) -> bool {
        if i < 64 {
            self.low & (1u64 << i) != 0
        } else {
            self.more[(i - 64) / 64] & (1u64 << (i % 64)) != 0
        }
    }
}
