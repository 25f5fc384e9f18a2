//! What the tests of this binary share: one process-wide metrics recorder.

use std::sync::OnceLock;

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
