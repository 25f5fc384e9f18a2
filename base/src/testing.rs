//! A test of the current test binary run alone in a child process: for a
//! test that needs a process of its own (it installs a global) or that
//! proves a run replays identically in another process.
//!
//! ```no_run
//! #[test]
//! fn replays_in_another_process() {
//!     let digest = || "0123".to_string(); // what the run produced
//!     if ward_base::testing::is_child() {
//!         println!("digest {}", digest());
//!         return;
//!     }
//!     let out = ward_base::testing::run_alone("replays_in_another_process");
//!     assert_eq!(ward_base::testing::tagged(&out, "digest"), [digest()]);
//! }
//! ```

use std::process::Command;

/// The environment variable set in the child process [`run_alone`] starts.
pub const CHILD: &str = "WARD_TEST_CHILD";

/// Whether this process is a child [`run_alone`] started (the test should
/// do its part and return).
#[must_use]
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs test `name` (its path in the binary, e.g. `replay::a_test`) of
/// this test binary alone in a child process, with [`CHILD`] set, and
/// returns what it printed once it passed.
///
/// # Panics
/// When the child cannot start, fails, or does not pass exactly one test
/// (a wrong `name` runs none): in a test, the panic is the failure.
#[must_use]
pub fn run_alone(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name}, in a child process: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The values of the `<tag> <value>` lines a child printed, in order
/// (libtest may print the first on its own `test … ... ` line).
#[must_use]
pub fn tagged(stdout: &str, tag: &str) -> Vec<String> {
    let tag = format!("{tag} ");
    stdout
        .lines()
        .filter_map(|l| l.split_once(&tag).map(|(_, v)| v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_values_are_read_in_order_even_after_libtests_prefix() {
        let out = "test x ... digest 1 aa\ndigest 2 bb\nother\nok\n";
        assert_eq!(tagged(out, "digest"), ["1 aa", "2 bb"]);
        assert!(tagged(out, "missing").is_empty());
    }

    #[test]
    fn a_child_runs_the_named_test_alone() {
        if is_child() {
            println!("pid {}", std::process::id());
            return;
        }
        let out = run_alone("testing::tests::a_child_runs_the_named_test_alone");
        let pid = tagged(&out, "pid");
        assert_eq!(pid.len(), 1, "{out}");
        assert_ne!(pid[0], std::process::id().to_string());
    }

    #[test]
    #[should_panic(expected = "in a child process")]
    fn a_name_that_runs_no_test_fails() {
        let _ = run_alone("testing::tests::no_such_test");
    }
}
