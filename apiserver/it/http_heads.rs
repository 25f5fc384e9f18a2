//! Request heads over HTTP as kube-apiserver takes them: request lines and
//! headers up to 1 MiB (so a request target past the 64 KiB that hyper and
//! `http::Uri` take), and a `metav1.Status` for any head that cannot be
//! served, never a bare status. Raw bytes on a loopback socket, because no
//! Rust HTTP client can even build a URI that long.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use ward_apiserver::{ApiServer, ServerConfig};

/// A listening server holding configmaps `default/a` (app=x) and `default/b` (app=y).
async fn server() -> ApiServer {
    let config = ServerConfig::default().listen("127.0.0.1:0".parse().unwrap());
    let s = ApiServer::start(config).await.unwrap();
    let mut c = connect(&s).await;
    for (name, app) in [("a", "x"), ("b", "y")] {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"app": app}}})
        .to_string();
        let req = format!(
            "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nhost: t\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(exchange(&mut c, req.as_bytes()).await.0, 201);
    }
    s
}

async fn connect(s: &ApiServer) -> TcpStream {
    TcpStream::connect(s.addr().unwrap()).await.unwrap()
}

/// Send `req`, read one response (it must carry a content-length): its
/// status and JSON body.
async fn exchange(c: &mut TcpStream, req: &[u8]) -> (u16, Value) {
    c.write_all(req).await.unwrap();
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = c.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "connection closed before a response: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let code: u16 = head[9..12].parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap_or_else(|| panic!("no content-length in {head}"))
        .trim()
        .parse()
        .unwrap();
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let mut chunk = vec![0u8; len - body.len()];
        let n = c.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed inside a body");
        body.extend_from_slice(&chunk[..n]);
    }
    assert!(head.contains("content-type: application/json"), "{head}");
    (code, serde_json::from_slice(&body).unwrap())
}

/// The names in a list answer.
fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect()
}

/// A set-based selector `app in (x, v000000, ...)` of at least `bytes` bytes, URL-encoded.
fn long_selector(bytes: usize) -> String {
    let mut s = String::from("app%20in%20(x");
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(&format!(",v{i:06}"));
        i += 1;
    }
    s.push(')');
    s
}

/// The connection was closed by the server.
async fn closed(c: &mut TcpStream) {
    let mut rest = Vec::new();
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), c.read_to_end(&mut rest))
        .await
        .expect("the server kept the connection open")
        .unwrap_or(0);
    assert_eq!(
        n,
        0,
        "unexpected bytes: {:?}",
        String::from_utf8_lossy(&rest)
    );
}

fn assert_status(code: u16, body: &Value, want: u16, reason: &str) {
    assert_eq!(code, want, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["code"], want, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

#[tokio::test]
async fn a_100_kb_label_selector_is_served_and_the_connection_kept() {
    let s = server().await;
    let rv = s.store().current_rv();
    let mut c = connect(&s).await;
    for size in [100_000, 500_000, 1_000_000] {
        let selector = long_selector(size);
        let req = format!(
            "GET /api/v1/namespaces/default/configmaps?labelSelector={selector}&limit=10 HTTP/1.1\r\nhost: t\r\n\r\n"
        );
        let (code, list) = exchange(&mut c, req.as_bytes()).await;
        assert_eq!(code, 200, "{size}: {list}");
        assert_eq!(names(&list), ["a"], "{size}");
        // The same connection serves the next request as usual.
        let req = b"GET /api/v1/namespaces/default/configmaps/b HTTP/1.1\r\nhost: t\r\n\r\n";
        let (code, cm) = exchange(&mut c, req).await;
        assert_eq!((code, cm["metadata"]["name"].as_str()), (200, Some("b")));
    }
    // A long query is checked like a short one.
    let req = format!(
        "DELETE /api/v1/configmaps?labelSelector={} HTTP/1.1\r\nhost: t\r\n\r\n",
        long_selector(80_000)
    );
    let (code, body) = exchange(&mut c, req.as_bytes()).await;
    assert_status(code, &body, 405, "MethodNotAllowed");
    assert_eq!(s.store().current_rv(), rv, "nothing was written");
}

#[tokio::test]
async fn heads_that_cannot_be_served_get_a_status_and_a_close() {
    let s = server().await;
    let rv = s.store().current_rv();
    let many: String = (0..300).map(|i| format!("h{i}: v\r\n")).collect();
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (
            format!("GET /api/v1/namespaces?labelSelector={} HTTP/1.1\r\n\r\n", long_selector(1 << 20))
                .into_bytes(),
            431,
            "RequestHeaderFieldsTooLarge",
        ),
        (
            format!("GET / HTTP/1.1\r\nx-big: {}\r\n\r\n", "v".repeat(1 << 20)).into_bytes(),
            431,
            "RequestHeaderFieldsTooLarge",
        ),
        (format!("GET / HTTP/1.1\r\n{many}\r\n").into_bytes(), 431, "RequestHeaderFieldsTooLarge"),
        (
            format!("GET /{} HTTP/1.1\r\n\r\n", "p".repeat(70_000)).into_bytes(),
            414,
            "RequestURITooLong",
        ),
        (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n".to_vec(), 400, "BadRequest"),
        (
            b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n{}".to_vec(),
            400,
            "BadRequest",
        ),
    ];
    for (req, want, reason) in cases {
        let mut c = connect(&s).await;
        let (code, body) = exchange(&mut c, &req).await;
        assert_status(code, &body, want, reason);
        closed(&mut c).await;
    }
    assert_eq!(s.store().current_rv(), rv, "nothing was written");
    // The server serves new connections as before.
    let mut c = connect(&s).await;
    let req = b"GET /api/v1/namespaces/default/configmaps/a HTTP/1.1\r\nhost: t\r\n\r\n";
    assert_eq!(exchange(&mut c, req).await.0, 200);
}
