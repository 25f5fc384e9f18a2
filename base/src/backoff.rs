//! Exponential backoff: `base`, `2 base`, `4 base`, … up to `max`; plain
//! (the controller's per-object error backoff) or with jitter drawn from a
//! seeded [`Rng`] (optimistic-concurrency retries), one arithmetic for both.

use std::time::Duration;

use crate::Rng;

/// Exponential backoff from `base` doubling up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay.
    pub base: Duration,
    /// The largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    /// 500 ms doubling to 5 min.
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(500),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay after the `n`th consecutive failure (n >= 1):
    /// `min(max, base * 2^(n-1))`.
    #[must_use]
    pub fn delay(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// [`Backoff::delay`] with jitter: uniform in `[d/2, d]`, in whole
    /// nanoseconds, drawn from `rng` (nothing drawn when `d` is 0).
    pub fn jittered(&self, n: u32, rng: &mut Rng) -> Duration {
        let d = self.delay(n);
        let half = d / 2;
        let span = u64::try_from((d - half).as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(rng.up_to(span))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_jitters_within_half() {
        let b = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        let plain: Vec<u128> = (1..=6).map(|n| b.delay(n).as_millis()).collect();
        assert_eq!(plain, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
        let mut rng = Rng::new(1);
        for n in 1..=8 {
            let d = b.jittered(n, &mut rng);
            assert!(d >= b.delay(n) / 2 && d <= b.delay(n), "{n}: {d:?}");
        }
        let zero = Backoff {
            base: Duration::ZERO,
            max: Duration::ZERO,
        };
        assert_eq!(zero.jittered(3, &mut rng), Duration::ZERO);
    }
}
