//! A small seeded generator (SplitMix64): every random choice of a
//! scenario comes from its seed.

use std::time::Duration;

/// A deterministic random generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded with `seed`, for the component named `stream` (so components
    /// draw independently of each other's order).
    #[must_use]
    pub fn new(seed: u64, stream: &str) -> Self {
        let h = stream.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Rng(seed ^ h)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let (lo, hi) = (lo.as_millis() as u64, hi.as_millis() as u64);
        if hi <= lo {
            return Duration::from_millis(lo);
        }
        Duration::from_millis(lo + self.next_u64() % (hi - lo + 1))
    }
}
