//! A small seeded generator (SplitMix64): every random choice of a
//! scenario comes from its seed.

use std::time::Duration;

/// A deterministic random generator: ward-apiserver's SplitMix64, seeded
/// per component.
#[derive(Debug, Clone)]
pub struct Rng(ward_apiserver::faults::Rng);

impl Rng {
    /// Seeded with `seed`, for the component named `stream` (so components
    /// draw independently of each other's order).
    #[must_use]
    pub fn new(seed: u64, stream: &str) -> Self {
        let h = stream.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Rng(ward_apiserver::faults::Rng::new(seed ^ h))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let (lo, hi) = (lo.as_millis() as u64, hi.as_millis() as u64);
        if hi <= lo {
            return Duration::from_millis(lo);
        }
        Duration::from_millis(lo + self.0.up_to(hi - lo))
    }
}
