//! The churn generator: creates, updates and deletes at a set rate while a
//! phase runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ward_apiserver::store::ResourceInfo;
use ward_apiserver::store::{DeleteSpec, Store};
use ward_base::Rng;

use crate::bench::objects::{self, NAMESPACE, Owner, now_micros};

/// The churn generator: writes straight to the store at a set rate.
#[derive(Debug)]
pub struct Churner {
    store: Arc<Store>,
    cms: Arc<ResourceInfo>,
    owners: Vec<Owner>,
    live: Vec<String>,
    next: u64,
    rng: Rng,
}

impl Churner {
    /// A generator over `store`, owning objects to `owners`, with `live` objects already there.
    #[must_use]
    pub fn new(store: Arc<Store>, owners: Vec<Owner>, live: Vec<String>, seed: u64) -> Self {
        Churner {
            store,
            cms: objects::core("configmaps"),
            owners,
            next: live.len() as u64,
            live,
            rng: Rng::stream(seed, "churn"),
        }
    }

    /// Objects alive now.
    #[must_use]
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// One write: 20% create, 20% delete, 60% update (index 0, 2, 1).
    pub fn step(&mut self) -> usize {
        let r = self.rng.next_u64() % 10;
        if r < 2 || self.live.is_empty() {
            let i = self.next;
            self.next += 1;
            let name = objects::name(i);
            let owner = &self.owners[i as usize % self.owners.len()];
            let obj = objects::configmap(&name, i, owner, now_micros());
            if self.store.create(&self.cms, obj).is_ok() {
                self.live.push(name);
            }
            0
        } else if r < 4 {
            let at = (self.rng.next_u64() % self.live.len() as u64) as usize;
            let name = self.live.swap_remove(at);
            let _ = self
                .store
                .delete(&self.cms, NAMESPACE, &name, &DeleteSpec::default());
            2
        } else {
            let at = (self.rng.next_u64() % self.live.len() as u64) as usize;
            let stamp = now_micros();
            let _ = self
                .store
                .update(&self.cms, NAMESPACE, &self.live[at], |old| {
                    Ok(objects::touched(old, stamp))
                });
            1
        }
    }

    /// Write at `rate` per second for `length` on the calling thread; the
    /// counts of creates, updates and deletes. The writes are paced by the
    /// OS clock, not tokio's timer, each at a random point of its slot
    /// (`(i + U[0,1)) / rate`), so that write times are spread evenly
    /// against the 1 ms timer wheel the controllers' schedulers run on
    /// (writes on timer ticks would make every latency a whole number of
    /// ticks, and the percentiles flip between them).
    pub fn run_blocking(&mut self, rate: f64, length: Duration) -> [u64; 3] {
        let mut counts = [0u64; 3];
        let start = Instant::now();
        let total = (rate * length.as_secs_f64()) as u64;
        for i in 0..total {
            let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let at = start + Duration::from_secs_f64((i as f64 + u) / rate);
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            counts[self.step()] += 1;
        }
        let end = start + length;
        let now = Instant::now();
        if end > now {
            std::thread::sleep(end - now);
        }
        counts
    }
}
