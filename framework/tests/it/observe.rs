//! The metrics and health endpoint over real HTTP/1.1 on 127.0.0.1 (a
//! hand-written client on tokio's TcpStream): Prometheus text at /metrics,
//! /healthz, /readyz reporting its named checks, one global recorder per
//! process, a given recorder served as is, and shutdown.
//!
//! Real sockets, so real time: every wait is bounded by a timeout.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::net::TcpStream;
use ward_runtime::observe::{self, Observability, ObserveError, PROMETHEUS_CONTENT_TYPE};

const WAIT: Duration = Duration::from_secs(10);

/// An HTTP response: status, headers (names lowercased), body.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

async fn write_all(stream: &TcpStream, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        stream.writable().await?;
        match stream.try_write(buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn read_to_end(stream: &TcpStream) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        stream.readable().await?;
        match stream.try_read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// One request on a fresh connection (`Connection: close`, so the body
/// ends with the stream).
async fn request(addr: SocketAddr, method: &str, path: &str) -> Response {
    let exchange = async {
        let stream = TcpStream::connect(addr).await?;
        let req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        write_all(&stream, req.as_bytes()).await?;
        read_to_end(&stream).await
    };
    let raw = tokio::time::timeout(WAIT, exchange)
        .await
        .expect("answered in time")
        .expect("an HTTP exchange");
    let text = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Response {
        status,
        headers,
        body: body.to_string(),
    }
}

async fn get(addr: SocketAddr, path: &str) -> Response {
    request(addr, "GET", path).await
}

fn loopback_any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Wait until nothing accepts connections on `addr`.
async fn until_closed(addr: SocketAddr) {
    let closed = tokio::time::timeout(WAIT, async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(closed.is_ok(), "{addr} still accepts connections");
}

/// Run test `name` of this binary alone, in a child process (its own
/// global state), and check that it passed; whether the caller is that
/// child (and should run the test's body) otherwise.
fn alone(name: &str) -> bool {
    if ward_base::testing::is_child() {
        return true;
    }
    let _ = ward_base::testing::run_alone(name);
    false
}

/// The only test that installs the global recorder through
/// [`Observability::start`]: in a process of its own, since the other
/// tests of this binary share one (`crate::common::prometheus`).
#[tokio::test]
async fn the_endpoint_serves_metrics_health_and_readiness_from_the_global_recorder() {
    if !alone("observe::the_endpoint_serves_metrics_health_and_readiness_from_the_global_recorder")
    {
        return;
    }
    let obs = Observability::new()
        .listen(loopback_any_port())
        .start()
        .await
        .unwrap();
    let addr = obs.addr();
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0, "the bound port is reported");

    metrics::counter!("ward_reconciles_total", "result" => "success").increment(1);
    let m = get(addr, "/metrics").await;
    assert_eq!(m.status, 200);
    assert_eq!(m.header("content-type"), Some(PROMETHEUS_CONTENT_TYPE));
    assert!(
        m.header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    assert!(
        m.body
            .lines()
            .any(|l| l == r#"ward_reconciles_total{result="success"} 1"#),
        "{}",
        m.body
    );
    metrics::counter!("ward_reconciles_total", "result" => "success").increment(2);
    assert!(
        get(addr, "/metrics")
            .await
            .body
            .contains(r#"ward_reconciles_total{result="success"} 3"#)
    );

    let h = get(addr, "/healthz").await;
    assert_eq!((h.status, h.body.as_str()), (200, "ok"));

    let r = get(addr, "/readyz").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (503, "[-]no checks registered\nreadyz check failed\n")
    );
    let synced = obs.readiness().check("synced/ConfigMap");
    let leader = obs.readiness().check("leader-election");
    synced.set(true);
    let r = get(addr, "/readyz").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            503,
            "[-]leader-election failed\n[+]synced/ConfigMap ok\nreadyz check failed\n"
        )
    );
    leader.set(true);
    assert!(obs.is_ready());
    let r = get(addr, "/readyz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    assert!(
        get(addr, "/metrics")
            .await
            .body
            .contains(r#"ward_ready{check="leader-election"} 1"#)
    );
    synced.set(false);
    assert!(!obs.is_ready());
    assert_eq!(get(addr, "/readyz").await.status, 503);
    assert_eq!(
        get(addr, "/healthz").await.status,
        200,
        "alive while not ready"
    );

    // One recorder per process.
    let again = Observability::new()
        .listen(loopback_any_port())
        .start()
        .await
        .unwrap_err();
    assert!(matches!(again, ObserveError::RecorderInstalled), "{again}");
    assert!(matches!(
        observe::install_recorder(),
        Err(ObserveError::RecorderInstalled)
    ));

    obs.shutdown().await.unwrap();
    until_closed(addr).await;
}

#[tokio::test]
async fn a_given_recorder_is_served_and_dropping_the_handle_stops_the_server() {
    let recorder = PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        metrics::gauge!("ward_leader", "lease" => "default/x").set(1.0);
    });
    let obs = Observability::new()
        .listen(loopback_any_port())
        .prometheus(recorder.handle())
        .start()
        .await
        .unwrap();
    let addr = obs.addr();
    let m = get(addr, "/metrics").await;
    assert_eq!(m.status, 200);
    assert!(
        m.body.contains(r#"ward_leader{lease="default/x"} 1"#),
        "{}",
        m.body
    );
    assert_eq!(obs.prometheus().render(), recorder.handle().render());
    drop(obs);
    until_closed(addr).await;
}

#[tokio::test]
async fn only_get_on_the_three_paths_is_served() {
    let obs = Observability::new()
        .listen(loopback_any_port())
        .prometheus(PrometheusBuilder::new().build_recorder().handle())
        .start()
        .await
        .unwrap();
    let addr = obs.addr();
    assert_eq!(get(addr, "/nope").await.status, 404);
    assert_eq!(request(addr, "POST", "/metrics").await.status, 405);
    assert_eq!(request(addr, "DELETE", "/readyz").await.status, 405);
    obs.shutdown().await.unwrap();
}
