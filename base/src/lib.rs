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
pub mod hash;
pub mod out;
pub mod rng;
pub mod testing;

pub use backoff::Backoff;
pub use clock::Clock;
pub use hash::{Fnv1a, fnv1a};
pub use rng::Rng;
