//! Seeded entropy: why a simulation's run is a pure function of its seed
//! and the code, whatever hash maps the controller (or kube-runtime) uses
//! and however the runtime orders wake-ups.
//!
//! Tokio's paused clock makes time deterministic, and a current-thread
//! runtime polls ready tasks in the order they were woken. What is left is
//! the randomness a process draws, through which iteration and wake-up
//! order leak into behaviour:
//!
//! 1. std's `HashMap`/`HashSet` take their `RandomState` keys from a
//!    per-thread pair drawn once per thread with the `getrandom` call (and
//!    stepped at each `RandomState::new`). kube-runtime's runner keeps the
//!    reconciles in flight in one (it polls them in the map's order, so two
//!    reconciles ending at one instant write in that order), its scheduler
//!    the requests it holds back in another.
//! 2. ahash (kube-runtime's reflector stores) mixes process-wide keys drawn
//!    with `getrandom` with a per-map seed from a global counter stepped by
//!    the address of a static (which ASLR moves).
//! 3. fastrand (backon's jitter in kube-runtime's watcher backoff) seeds a
//!    per-thread generator from the monotonic clock and the thread's id.
//! 4. Tokio's runtime has a random number generator of its own, seeded
//!    from a process-wide counter (each runtime built steps it). It picks
//!    which of a watch channel's eight wait lists a receiver waits on —
//!    and a send wakes the lists in order, so it decides which receiver
//!    runs first (ward-apiserver's watches, the fault knobs, every
//!    `tokio::sync::watch` a controller uses) — and the branch order of an
//!    unbiased `tokio::select!`. Found by measurement: two runs of one
//!    seed in one process, a plain kube-runtime controller and a guarded
//!    one in turn, parted at a send that woke two watch streams in the
//!    other order ([`polls`](crate::polls) is the tool that showed it).
//!
//! [`crate::simulate`] therefore runs each simulation on a fresh thread,
//! marked as simulating, and this module answers that thread's `getrandom`
//! calls from a fixed SplitMix64 stream instead of the kernel: the crate
//! defines the C symbol `getrandom`, which std (and the getrandom crate)
//! look up at run time in preference to libc's, and which forwards to the
//! kernel on every other thread. Before the runtime starts, the simulation
//! primes each source in a fixed order from a fresh stream: ahash's keys
//! (installing a per-map seed source that counts per simulation), std's
//! per-thread keys, and fastrand's per-thread generator. Tokio's generator
//! can be seeded only through its unstable API: built with `--cfg
//! tokio_unstable` (this workspace's `.cargo/config.toml` sets it), every
//! simulation's runtime gets the same seed; built without, the first
//! simulation says on stderr that a seed may replay differently within a
//! process (across processes it does not, when they run the same
//! simulations in the same order).
//!
//! Not covered: the random branch order of a `futures::select!` (not
//! tokio's) in the controller — it draws from a process-wide counter;
//! write `select_biased!`; threads the controller spawns itself (not
//! marked as simulating); and ahash maps created before the process's
//! first simulation (their keys came from the kernel; the first simulation
//! says so on stderr when it can tell — it cannot when the early use never
//! asked ahash for a random source, e.g. `AHasher::default()`). Turn the
//! `seeded-entropy` feature off to leave `getrandom` to libc.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};

use ward_base::Rng;

/// Where every simulation's stream starts.
const STREAM_START: u64 = 0x5741_5244_5345_4544;

thread_local! {
    /// This thread's stream, while it simulates.
    static STREAM: RefCell<Option<Rng>> = const { RefCell::new(None) };
    /// Per-map seeds handed to ahash on this thread while it simulates.
    static AHASH_SEEDS: Cell<usize> = const { Cell::new(0) };
}

/// The next word of this thread's stream, if it simulates.
fn next() -> Option<u64> {
    STREAM
        .try_with(|s| s.try_borrow_mut().ok()?.as_mut().map(Rng::next_u64))
        .ok()
        .flatten()
}

/// Whether this thread simulates.
fn simulating() -> bool {
    STREAM
        .try_with(|s| s.try_borrow().is_ok_and(|r| r.is_some()))
        .unwrap_or(false)
}

/// Fill `buf` from this thread's stream; false if it does not simulate.
fn fill(buf: &mut [u8]) -> bool {
    for chunk in buf.chunks_mut(8) {
        let Some(word) = next() else {
            return false;
        };
        chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
    }
    true
}

/// Restart this thread's stream.
fn reset() {
    STREAM.with(|s| *s.borrow_mut() = Some(Rng::new(STREAM_START)));
}

/// Mark this (fresh) thread as simulating and prime every covered source
/// from a fresh stream, in a fixed order.
pub(crate) fn enter() {
    reset();
    AHASH_SEEDS.with(|c| c.set(STREAM_START as usize));
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        if ahash::random_state::set_random_source(PerSimulation).is_err() {
            eprintln!(
                "ward-campaign: an ahash map was made before the first simulation; \
                 maps of kube-runtime's reflector stores will not iterate in a seeded order"
            );
        }
    });
    // ahash draws its process-wide keys at its first map; from here if
    // nothing drew them before.
    let _ = ahash::RandomState::new();
    reset();
    // std draws this thread's keys at its first `RandomState`.
    let _ = std::collections::hash_map::RandomState::new();
    reset();
    fastrand::seed(STREAM_START);
}

/// Seed the random number generator of a simulation's runtime (the same
/// seed for every simulation; see the module docs), and install the
/// [`polls`](crate::polls) hooks — with `--cfg tokio_unstable`. Without
/// it, say once on stderr that tokio seeds it from a process-wide counter.
pub(crate) fn seed_runtime(builder: &mut tokio::runtime::Builder) {
    #[cfg(tokio_unstable)]
    {
        builder.rng_seed(tokio::runtime::RngSeed::from_bytes(b"ward-simulation"));
        crate::polls::install(builder);
    }
    #[cfg(not(tokio_unstable))]
    {
        let _ = builder;
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "ward-campaign: built without --cfg tokio_unstable, tokio seeds each runtime's \
                 random number generator from a process-wide counter: two runs of a seed in one \
                 process may wake watch receivers in another order. For exact replay, add \
                 rustflags = [\"--cfg\", \"tokio_unstable\"] under [build] in .cargo/config.toml"
            );
        });
    }
}

/// ahash's per-map seeds: counted per simulation on a simulating thread,
/// from a process-wide counter elsewhere (as ahash's default does).
struct PerSimulation;

impl ahash::random_state::RandomSource for PerSimulation {
    fn gen_hasher_seed(&self) -> usize {
        static ELSEWHERE: AtomicUsize = AtomicUsize::new(0);
        if simulating() {
            AHASH_SEEDS.with(|c| {
                let seed = c.get().wrapping_add(0x9e37_79b9);
                c.set(seed);
                seed
            })
        } else {
            ELSEWHERE.fetch_add(
                0x9e37_79b9 ^ (&ELSEWHERE as *const _ as usize),
                Ordering::Relaxed,
            )
        }
    }
}

/// `getrandom(2)` as libc declares it: from this thread's stream while it
/// simulates, from the kernel otherwise (flags and errors as the system
/// call's).
///
/// # Safety
/// `buf` must be valid for writes of `len` bytes, as for libc's.
#[cfg(all(feature = "seeded-entropy", target_os = "linux"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(
    buf: *mut libc::c_void,
    len: libc::size_t,
    flags: libc::c_uint,
) -> libc::ssize_t {
    if simulating() && !buf.is_null() {
        // SAFETY: the caller gives a buffer valid for `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        if fill(bytes) {
            return len as libc::ssize_t;
        }
    }
    // SAFETY: the arguments are the caller's, passed on unchanged.
    unsafe { libc::syscall(libc::SYS_getrandom, buf, len, flags) as libc::ssize_t }
}

/// Keep the `getrandom` definition in every binary that simulates (an
/// archive member nothing names is not linked).
pub(crate) fn linked() -> usize {
    #[cfg(all(feature = "seeded-entropy", target_os = "linux"))]
    {
        getrandom as *const () as usize
    }
    #[cfg(not(all(feature = "seeded-entropy", target_os = "linux")))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_stream_is_the_same_stream() {
        let draw = || {
            std::thread::spawn(|| {
                reset();
                let mut b = [0u8; 13];
                assert!(fill(&mut b));
                b
            })
            .join()
            .unwrap()
        };
        assert_eq!(draw(), draw());
        assert!(!fill(&mut [0u8; 4]), "this thread does not simulate");
    }

    #[test]
    #[cfg(all(feature = "seeded-entropy", target_os = "linux"))]
    fn std_keys_on_simulating_threads_repeat() {
        let order = || {
            std::thread::spawn(|| {
                enter();
                let m: std::collections::HashMap<u32, ()> = (0..64).map(|i| (i, ())).collect();
                m.into_keys().collect::<Vec<_>>()
            })
            .join()
            .unwrap()
        };
        assert_eq!(order(), order());
    }
}
