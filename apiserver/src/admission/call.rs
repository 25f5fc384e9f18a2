//! The HTTPS client that calls a webhook: a POST of the review, the
//! server's certificate verified against the webhook's `caBundle` for the
//! URL's host (or `<service>.<namespace>.svc`), `?timeout=<n>s` on the
//! path as client-go adds it, the whole call bounded by `timeoutSeconds`.
//! Errors read as Go's HTTP client words them, after `Post "<url>": `.
//!
//! A 307 or 308 answer is followed with the same POST, up to 10 times, as
//! Go's client follows it (envtest registers `https://host:port//path`,
//! and Go's `ServeMux` redirects it to `/path`); other redirects are
//! answers that are not 2xx.
//!
//! One connection per call (kube-apiserver pools them); HTTP/1.1 only.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{self, pki_types};

/// The largest answer read from a webhook.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Where one call goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The address dialled (`host:port`, IPv6 in brackets).
    pub dial: String,
    /// The name the certificate must be valid for.
    pub server_name: String,
    /// The path, with `?timeout=`.
    pub path: String,
    /// The URL as errors show it.
    pub url: String,
}

impl Target {
    /// The target of a `clientConfig.url` called with this timeout.
    ///
    /// # Errors
    ///
    /// A URL that registration would have refused.
    pub fn of_url(url: &str, timeout: Duration) -> Result<Target, String> {
        let (host, port, path) = split_url(url)?;
        Ok(Target::new(&host, port, &host, path, timeout))
    }

    /// The target of a Service's endpoint `address:port`, verified as
    /// `<name>.<namespace>.svc`.
    #[must_use]
    pub fn of_service(
        address: &str,
        port: u16,
        name: &str,
        namespace: &str,
        path: &str,
        timeout: Duration,
    ) -> Target {
        let server_name = format!("{name}.{namespace}.svc");
        let mut t = Target::new(address, port, &server_name, path, timeout);
        t.url = format!("https://{server_name}:{port}{}", t.path);
        t
    }

    /// Where a redirect's `Location` sends a call to this target: a path
    /// on the same server, or another `https://` URL (its query kept as
    /// it is, as Go's client does).
    fn redirected(&self, location: &str) -> Result<Target, String> {
        if location.starts_with('/') {
            let origin = self
                .url
                .strip_suffix(self.path.as_str())
                .unwrap_or(&self.url);
            return Ok(Target {
                path: location.to_owned(),
                url: format!("{origin}{location}"),
                ..self.clone()
            });
        }
        let (host, port, path) = split_url(location)?;
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        Ok(Target {
            dial: format!("{host}:{port}"),
            server_name: host.trim_matches(['[', ']']).to_owned(),
            path: path.to_owned(),
            url: location.to_owned(),
        })
    }

    fn new(host: &str, port: u16, server_name: &str, path: &str, timeout: Duration) -> Target {
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        let path = format!("{path}?timeout={}s", timeout.as_secs());
        Target {
            dial: format!("{host}:{port}"),
            server_name: server_name.to_owned(),
            url: format!("https://{host}:{port}{path}"),
            path,
        }
    }
}

/// An `https://` URL's host, port (443 when absent) and path (`/` when
/// absent), query included.
fn split_url(url: &str) -> Result<(String, u16, &str), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("unsupported protocol scheme in {url:?}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = split_host_port(authority)?;
    Ok((host, port, path))
}

fn split_host_port(authority: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, rest) = v6
            .split_once(']')
            .ok_or_else(|| format!("invalid host {authority:?}"))?;
        (h, rest.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| format!("invalid port {p:?} in {authority:?}"))?,
        None => 443,
    };
    Ok((host.to_owned(), port))
}

/// POSTs `body` to `target`, trusting the PEM certificates in
/// `ca_bundle`; the answer's body when it is 2xx.
///
/// # Errors
///
/// Go's words for what failed: `dial tcp ...: connect: connection
/// refused`, `tls: failed to verify certificate: ...`, `context deadline
/// exceeded`, or the server's answer when it is not 2xx; each prefixed
/// with `Post "<url>": ` where Go's client does.
pub async fn post(
    target: &Target,
    ca_bundle: &[u8],
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Bytes, String> {
    let calls = async {
        let mut at = std::borrow::Cow::Borrowed(target);
        for _ in 0..=MAX_REDIRECTS {
            match exchange(&at, ca_bundle, body.clone()).await? {
                Answer::Body(bytes) => return Ok(bytes),
                Answer::Redirect(location) => {
                    let next = at
                        .redirected(&location)
                        .map_err(|e| format!("Post {:?}: {e}", at.url))?;
                    at = std::borrow::Cow::Owned(next);
                }
            }
        }
        Err(format!(
            "Post {:?}: stopped after {MAX_REDIRECTS} redirects",
            at.url
        ))
    };
    match tokio::time::timeout(timeout, calls).await {
        Ok(r) => r,
        Err(_) => Err(format!("Post {:?}: context deadline exceeded", target.url)),
    }
}

/// The redirects followed before a call fails (Go's client's limit).
const MAX_REDIRECTS: usize = 10;

/// What one exchange got: the body of a 2xx, or where a 307/308 sends it.
enum Answer {
    Body(Bytes),
    Redirect(String),
}

async fn exchange(target: &Target, ca_bundle: &[u8], body: Vec<u8>) -> Result<Answer, String> {
    let post = |e: String| format!("Post {:?}: {e}", target.url);
    let config = client_config(ca_bundle).map_err(post)?;
    let tcp = tokio::net::TcpStream::connect(&target.dial)
        .await
        .map_err(|e| {
            post(format!(
                "dial tcp {}: connect: {}",
                target.dial,
                io_words(&e)
            ))
        })?;
    let name = pki_types::ServerName::try_from(target.server_name.clone())
        .map_err(|e| post(format!("invalid server name: {e}")))?;
    let tls = TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| post(tls_words(&e)))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| post(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "webhook connection ended");
        }
    });
    let host = target.dial.clone();
    let req = http::Request::post(&target.path)
        .header(http::header::HOST, host)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .header(http::header::USER_AGENT, "ward-apiserver")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| post(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| post(e.to_string()))?;
    let status = resp.status();
    if matches!(status.as_u16(), 307 | 308)
        && let Some(location) = resp.headers().get(http::header::LOCATION)
    {
        let location = location.to_str().map_err(|e| post(e.to_string()))?;
        return Ok(Answer::Redirect(location.to_owned()));
    }
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| post(e.to_string()))?
        .to_bytes();
    if !status.is_success() {
        return Err(not_success(status.as_u16(), &bytes));
    }
    if bytes.is_empty() {
        return Err(format!(
            "0-length response with status code: {} and content type: {content_type}",
            status.as_u16()
        ));
    }
    Ok(Answer::Body(bytes))
}

/// client-go's words for an answer that is not 2xx: a Failure Status's
/// message, else one by the code.
fn not_success(code: u16, body: &[u8]) -> String {
    if let Ok(s) = serde_json::from_slice::<serde_json::Value>(body)
        && s["kind"] == "Status"
        && s["status"] == "Failure"
        && let Some(m) = s["message"].as_str()
    {
        return m.to_owned();
    }
    match code {
        400 => "the server rejected our request for an unknown reason".into(),
        404 => "the server could not find the requested resource".into(),
        500.. => {
            let text = String::from_utf8_lossy(body);
            let text: String = text.trim().chars().take(2048).collect();
            format!("an error on the server ({text:?}) has prevented the request from succeeding")
        }
        _ => format!(
            "the server responded with the status code {code} but did not return more information"
        ),
    }
}

fn client_config(ca_bundle: &[u8]) -> Result<Arc<rustls::ClientConfig>, String> {
    use pki_types::pem::PemObject as _;
    let certificates = pki_types::CertificateDer::pem_slice_iter(ca_bundle)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("invalid caBundle: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let trust = super::trust::Bundle::new(certificates, provider.clone())?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(trust))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// An I/O error as Go's `syscall.Errno` prints it.
fn io_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::ConnectionReset => "connection reset by peer".into(),
        _ => e.to_string(),
    }
}

/// A TLS error as Go's crypto/tls and x509 word the usual ones.
fn tls_words(e: &std::io::Error) -> String {
    let inner = e.to_string();
    // rustls finds an issuer by name: another CA of the same name fails
    // its signature check, where Go finds no issuer at all.
    if inner.contains("UnknownIssuer") || inner.contains("BadSignature") {
        "tls: failed to verify certificate: x509: certificate signed by unknown authority".into()
    } else if inner.contains("NotValidForName") {
        format!(
            "tls: failed to verify certificate: x509: certificate is not valid for the name asked ({inner})"
        )
    } else {
        format!("remote error: tls: {inner}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_split_into_what_is_dialled_verified_and_shown() {
        let t = Target::of_url("https://127.0.0.1:8443/mutate", Duration::from_secs(10)).unwrap();
        assert_eq!(t.dial, "127.0.0.1:8443");
        assert_eq!(t.server_name, "127.0.0.1");
        assert_eq!(t.path, "/mutate?timeout=10s");
        assert_eq!(t.url, "https://127.0.0.1:8443/mutate?timeout=10s");
        let t = Target::of_url("https://[::1]/x", Duration::from_secs(3)).unwrap();
        assert_eq!(
            (t.dial.as_str(), t.server_name.as_str()),
            ("[::1]:443", "::1")
        );
        let s = Target::of_service("127.0.0.1", 9443, "hook", "d", "/v", Duration::from_secs(5));
        assert_eq!(s.server_name, "hook.d.svc");
        assert_eq!(s.url, "https://hook.d.svc:9443/v?timeout=5s");
        assert!(Target::of_url("http://x/", Duration::from_secs(1)).is_err());
    }

    #[test]
    fn a_redirect_goes_to_a_path_of_the_same_server_or_to_another_url() {
        let t = Target::of_url("https://127.0.0.1:8443//mutate", Duration::from_secs(10)).unwrap();
        let r = t.redirected("/mutate?timeout=10s").unwrap();
        assert_eq!(
            (r.dial.as_str(), r.server_name.as_str()),
            ("127.0.0.1:8443", "127.0.0.1")
        );
        assert_eq!(r.path, "/mutate?timeout=10s");
        assert_eq!(r.url, "https://127.0.0.1:8443/mutate?timeout=10s");
        let s = Target::of_service("10.0.0.1", 9443, "hook", "d", "//v", Duration::from_secs(5));
        let r = s.redirected("/v?timeout=5s").unwrap();
        assert_eq!(
            (r.dial.as_str(), r.server_name.as_str()),
            ("10.0.0.1:9443", "hook.d.svc")
        );
        assert_eq!(r.url, "https://hook.d.svc:9443/v?timeout=5s");
        let r = t.redirected("https://[::1]:9000/x").unwrap();
        assert_eq!(
            (r.dial.as_str(), r.server_name.as_str(), r.path.as_str()),
            ("[::1]:9000", "::1", "/x")
        );
        assert!(t.redirected("http://elsewhere/").is_err());
    }

    #[tokio::test]
    async fn a_refused_connection_reads_as_gos() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let t = Target::of_url(
            &format!("https://127.0.0.1:{port}/"),
            Duration::from_secs(5),
        )
        .unwrap();
        let e = post(&t, b"", Vec::new(), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(
            e,
            format!(
                "Post \"https://127.0.0.1:{port}/?timeout=5s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            )
        );
    }
}
