//! What the tests of this binary share: one process-wide metrics
//! recorder, and waiting (in simulated time) for a future or a condition.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

use metrics_exporter_prometheus::PrometheusHandle;

/// The process's global recorder, installed on first use (one per
/// process; `observe`'s test of installing it runs in a child process of
/// its own).
pub fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        ward_runtime::observe::install_recorder()
            .expect("this test process installs the only recorder")
    })
}

/// How long (simulated time, under a paused clock) a test waits for
/// anything before it fails.
pub const WAIT: Duration = Duration::from_secs(600);

/// `fut`'s output, or a failure naming `what` after [`WAIT`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Wait until `cond` holds, checking it every 10 ms of simulated time (for
/// state no event announces); the instant it was seen to hold.
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) -> Instant {
    within(what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    Instant::now()
}
