//! The process the benchmarks run in: its measurements — CPU time,
//! resident memory (current and peak) and heap bytes in use (Linux only;
//! elsewhere every reading is `None`) — and the tokio runtime they run on.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Clock ticks per second of `/proc/self/stat` (USER_HZ, 100 on Linux).
const TICKS_PER_SEC: f64 = 100.0;

/// User + system CPU time of the whole process so far, in seconds
/// (`/proc/self/stat` utime + stime; 10 ms resolution).
#[must_use]
pub fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start at
    // field 3 (state); utime and stime are fields 14 and 15.
    let rest = s.get(s.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SEC)
}

fn status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Resident set size now, in bytes (`VmRSS`).
#[must_use]
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k * 1024)
}

/// Peak resident set size since start or the last [`reset_peak_rss`], in
/// bytes (`VmHWM`).
#[must_use]
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k * 1024)
}

/// Reset the peak resident set size to the current one (writes `5` to
/// `/proc/self/clear_refs`); false where that is not possible.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A global allocator that counts the bytes the program holds, around
/// the allocator `A` that does the work, from the start of the process
/// until [`stop_counting`]. The benchmark binary installs
/// `Counting<MiMalloc>`: [`heap_bytes`] then reads the count, exact and
/// independent of how the allocator keeps its free memory. One shared
/// counter costs the write path a third of its speed on 2 cores, so the
/// benchmarks stop counting after the memory part, which runs first.
#[derive(Debug)]
pub struct Counting<A>(pub A);

/// Bytes live through [`Counting`] (requested sizes).
static LIVE: AtomicU64 = AtomicU64::new(0);
/// Whether [`Counting`] still counts.
static COUNTING: AtomicBool = AtomicBool::new(true);

/// Stop [`Counting`] (for good: its count is no longer exact after this),
/// so that the speed measurements run on the bare allocator.
pub fn stop_counting() {
    COUNTING.store(false, Ordering::Relaxed);
    LIVE.store(0, Ordering::Relaxed);
}

fn count_up(n: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_add(n as u64, Ordering::Relaxed);
    }
}

fn count_down(n: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_sub(n as u64, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `A` unchanged; the counter only
// observes the sizes of the calls that succeeded.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is forwarded as is.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            count_up(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for alloc.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            count_up(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count_down(layout.size());
        // SAFETY: as for alloc.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for alloc.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count_up(new_size);
            count_down(layout.size());
        }
        p
    }
}

/// Heap bytes in use: the [`Counting`] allocator's count when it is the
/// global allocator and still counting, else glibc's `mallinfo2` (allocated arena chunks plus
/// mmapped ones) — unlike RSS, neither is hidden by freed memory the
/// allocator keeps and reuses. `None` with neither.
#[must_use]
pub fn heap_bytes() -> Option<u64> {
    match LIVE.load(Ordering::Relaxed) {
        0 => heap::in_use(),
        live => Some(live),
    }
}

/// Give the memory a finished run freed back to the system (glibc
/// `malloc_trim`), so that the next run does not start on the heap
/// fragments of the last one; a no-op off glibc (and for memory glibc
/// does not manage).
pub fn trim_heap() {
    heap::trim();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod heap {
    /// glibc's `struct mallinfo2` (glibc 2.33 and later).
    #[repr(C)]
    struct Mallinfo2 {
        arena: usize,
        ordblks: usize,
        smblks: usize,
        hblks: usize,
        hblkhd: usize,
        usmblks: usize,
        fsmblks: usize,
        uordblks: usize,
        fordblks: usize,
        keepcost: usize,
    }

    unsafe extern "C" {
        fn mallinfo2() -> Mallinfo2;
        fn malloc_trim(pad: usize) -> i32;
    }

    pub(super) fn trim() {
        // SAFETY: malloc_trim takes a byte count and only reorganizes the
        // allocator's free lists under its locks.
        unsafe {
            malloc_trim(0);
        }
    }

    pub(super) fn in_use() -> Option<u64> {
        // SAFETY: mallinfo2 takes no arguments and returns a plain struct
        // by value; it only reads the allocator's statistics under its locks.
        let m = unsafe { mallinfo2() };
        Some((m.uordblks + m.hblkhd) as u64)
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod heap {
    pub(super) fn in_use() -> Option<u64> {
        None
    }

    pub(super) fn trim() {}
}

/// A short description of the machine: architecture, cores, memory, OS.
#[must_use]
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kib| kib as f64 / (1024.0 * 1024.0));
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
    });
    let mut out = format!(
        "{} {}, {cores} cores",
        std::env::consts::ARCH,
        std::env::consts::OS
    );
    if let Some(m) = mem_gib {
        out.push_str(&format!(", {m:.1} GiB"));
    }
    if let Some(c) = cpu {
        out.push_str(&format!(" ({c})"));
    }
    out
}

/// Today's date (UTC) as `YYYY-MM-DD`.
#[must_use]
pub fn today() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d").to_string()
}

/// A multi-thread tokio runtime (one worker per core), as a controller runs on.
#[must_use]
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_plausible_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(cpu_seconds().is_some());
            assert!(rss_bytes().unwrap() > 0);
            assert!(peak_rss_bytes().unwrap() >= rss_bytes().unwrap() / 2);
        }
        assert_eq!(today().len(), 10);
    }
}
