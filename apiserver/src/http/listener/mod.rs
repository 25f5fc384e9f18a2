//! The HTTP/1.1 listener: hyper serving the request handler, one task per
//! connection, with request heads of up to 1 MiB (see [`head`]) and a
//! graceful stop that lets open responses end (watches end when the server
//! stops).

pub mod head;
pub mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::auth::{CertificateUser, UserInfo};
use crate::faults::CLIENT_HEADER;
use crate::http::handler::{self, ClientId, PeerAddr, RawQuery, State, UnnamedClient};
use crate::machinery::status::ApiError;
use head::{FramedIo, HEAD_ERROR, LONG_QUERY, MAX_HEAD_BYTES, MAX_HEADERS};

/// Accept connections until `stopped` flips, then let each connection
/// finish its open responses and close.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<tls::Tls>,
    state: Arc<State>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stopped.wait_for(|s| *s) => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((tcp, peer)) => {
                // Watch events are small writes that should leave at once.
                let _ = tcp.set_nodelay(true);
                let (state, stopped) = (state.clone(), stopped.clone());
                match tls.clone() {
                    None => {
                        connections.spawn(connection(tcp, peer, None, state, stopped));
                    }
                    Some(tls) => {
                        connections.spawn(async move {
                            match tls.acceptor.accept(tcp).await {
                                Ok(io) => {
                                    let user = io
                                        .get_ref()
                                        .1
                                        .peer_certificates()
                                        .and_then(|chain| chain.first())
                                        .and_then(|leaf| tls::certificate_user(leaf))
                                        .map(|(name, groups)| {
                                            Arc::new(crate::auth::certificate_user(name, groups))
                                        });
                                    connection(io, peer, user, state, stopped).await;
                                }
                                Err(e) => {
                                    tracing::debug!(error = %e, %peer, "TLS handshake failed");
                                }
                            }
                        });
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "accepting a connection failed"),
        }
        // Reap the connections that ended.
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
}

/// Serve one connection until it closes or the server stops; `user` is
/// the user its client certificate names, if it presented one.
async fn connection<IO>(
    io: IO,
    peer: SocketAddr,
    user: Option<Arc<UserInfo>>,
    state: Arc<State>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let (state, user) = (state.clone(), user.clone());
        async move { Ok::<_, Infallible>(request(state, peer, user, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        // Room for the largest head the framer lets through, rewritten.
        .max_buf_size(MAX_HEAD_BYTES + 64 * 1024)
        .max_headers(MAX_HEADERS + 1)
        .serve_connection(TokioIo::new(FramedIo::new(io)), service);
    tokio::pin!(conn);
    let stop = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stop => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, %peer, "HTTP connection ended with an error");
    }
}

/// One HTTP request: a stand-in for a head that could not be served is
/// answered with its Status; any other goes to the handler with its client
/// identity, peer address, and a query moved out of an over-long target.
async fn request(
    state: Arc<State>,
    peer: SocketAddr,
    user: Option<Arc<UserInfo>>,
    mut req: Request<Incoming>,
) -> Response<Body> {
    if let Some(code) = req.headers().get(HEAD_ERROR) {
        let code = code
            .to_str()
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(400);
        return handler::error_response(&head_error(code));
    }
    if let Some(q) = req.headers_mut().remove(LONG_QUERY) {
        let q = String::from_utf8_lossy(q.as_bytes()).into_owned();
        req.extensions_mut().insert(RawQuery(q));
    }
    let named = req
        .headers()
        .get(CLIENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let client = named.unwrap_or_else(|| {
        // Its user's, once authenticated (see `faults::user_client`).
        req.extensions_mut().insert(UnnamedClient);
        connection_id(peer)
    });
    req.extensions_mut().insert(PeerAddr(peer));
    if let Some(user) = user {
        req.extensions_mut().insert(CertificateUser(user));
    }
    handler::handle(state, client, req).await
}

/// The error for a request head the framer could not pass on.
fn head_error(code: u16) -> ApiError {
    match code {
        431 => ApiError::head_too_large(format!(
            "request head too large: the request line and headers may hold at most {MAX_HEAD_BYTES} bytes in at most {MAX_HEADERS} header lines"
        )),
        414 => ApiError::uri_too_long(),
        _ => ApiError::bad_request("malformed HTTP/1.1 request head"),
    }
}

/// HTTP clients get ids with the top bit set, derived from the peer address.
fn connection_id(peer: SocketAddr) -> ClientId {
    ward_base::fnv1a(peer.to_string().as_bytes()) | (1 << 63)
}
