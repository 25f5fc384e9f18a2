//! The pieces every Ward crate shares, kept in one place so that the API
//! server, the framework, the guards and the examples agree on them:
//!
//! - [`Clock`]: wall time that follows tokio's clock, so a test on a paused
//!   clock sees timestamps advance exactly as its simulated time does;
//!   hand one clock to the server and the controllers and they agree.
//! - [`Rng`]: a seeded SplitMix64, the source of every random choice of a
//!   simulation (and of backoff jitter), so a seed replays a run exactly.
//! - [`fnv1a`] (and [`Fnv1a`], fed in pieces): a stable 64-bit hash
//!   (stream names, client ids, ETags, KEP-5866 shards).
//! - [`Backoff`]: exponential backoff, plain or with seeded jitter.
//! - [`outln!`]: stdout for binaries that ends quietly when the reader goes
//!   away (`ward-demo | head`).
//!
//! ```
//! use std::time::Duration;
//! use ward_base::{Backoff, Clock, Rng};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // Under tokio's paused clock, wall time moves with simulated time.
//! let clock = Clock::on_the_second();
//! let t0 = clock.now();
//! tokio::time::sleep(Duration::from_secs(90)).await;
//! assert_eq!(clock.now().duration_since(t0).as_secs(), 90);
//!
//! // One seed, one sequence: a simulation's choices replay exactly.
//! let (mut a, mut b) = (Rng::new(7), Rng::new(7));
//! assert_eq!(a.next_u64(), b.next_u64());
//!
//! // 500 ms doubling to 5 min; with jitter in [d/2, d].
//! let backoff = Backoff::default();
//! assert_eq!(backoff.delay(3), Duration::from_secs(2));
//! let d = backoff.jittered(3, &mut a);
//! assert!(d >= Duration::from_secs(1) && d <= Duration::from_secs(2));
//! # }
//! ```
//!
//! Its own crate because the framework must not depend on the API server
//! (nor the server on the framework), yet both need the same clock and
//! generator.

#![warn(missing_docs)]

pub mod backoff;
pub mod clock;
pub mod out;
pub mod rng;

pub use backoff::Backoff;
pub use clock::Clock;
pub use rng::Rng;

/// FNV-1a, 64 bits: a stable, non-cryptographic hash of `bytes`.
#[must_use]
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::default();
    h.write_bytes(bytes);
    h.finish()
}

/// [`fnv1a`] fed in pieces, or written to with `write!` (the hash of a
/// value's `Display` text, without building the string).
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    /// The offset basis: the hash of nothing.
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Hash `bytes` after what was hashed so far.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        self.0 = bytes.iter().fold(self.0, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    }

    /// The hash of everything written.
    #[must_use]
    pub fn finish(self) -> u64 {
        self.0
    }
}

impl std::fmt::Write for Fnv1a {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.write_bytes(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(super::fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(super::fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fnv1a_in_pieces_and_through_write_is_the_same_hash() {
        use std::fmt::Write;
        let mut h = super::Fnv1a::default();
        h.write_bytes(b"foo");
        write!(h, "{}", 7).unwrap();
        assert_eq!(h.finish(), super::fnv1a(b"foo7"));
    }
}
