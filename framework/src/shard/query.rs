//! The client side of KEP-5866: a `shardSelector` added to the LISTs and
//! WATCHes of sharded collections, and the probe that learns whether the
//! server honours it.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response};
use kube::Client;
use kube::client::Body;

use super::ring::Slots;
use super::view::Shard;

/// A [`Client`] as a service, adding the shard's selector on the way.
#[derive(Clone)]
pub(crate) struct ShardQuery {
    client: Client,
    shard: Shard,
    /// The encoded selector of the last active slots seen: made again only
    /// when they change (made for every request, it was a fifth of a
    /// sharded simulation's instructions, #61).
    param: Arc<Mutex<LastParam>>,
}

/// The active slots a selector was last encoded for, and that encoding.
type LastParam = Option<(Slots, Option<Arc<str>>)>;

impl ShardQuery {
    pub(crate) fn new(client: Client, shard: Shard) -> Self {
        ShardQuery {
            client,
            shard,
            param: Arc::default(),
        }
    }

    /// The active slots' selector, percent-encoded (`None` while there are
    /// none).
    fn param(&self) -> Option<Arc<str>> {
        let slots = self.shard.slots();
        let mut last = self.param.lock().unwrap_or_else(|e| e.into_inner());
        match &*last {
            Some((seen, param)) if *seen == slots => param.clone(),
            _ => {
                let param = slots
                    .selector(self.shard.key().field())
                    .map(|s| Arc::from(encode(&s)));
                *last = Some((slots, param.clone()));
                param
            }
        }
    }
}

impl tower::Service<Request<Body>> for ShardQuery {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        if req.method() == http::Method::GET
            && self.shard.filters(req.uri().path())
            && !names_selector(req.uri())
            && let Some(param) = self.param()
        {
            *req.uri_mut() = with_param(req.uri(), &param);
        }
        let client = self.client.clone();
        Box::pin(async move { client.send(req).await })
    }
}

impl Shard {
    /// `client`, with the shard's `shardSelector` added to every LIST and
    /// WATCH of a collection a sharded controller registered (unless the
    /// request names one already): build the controller's `Api` on it so
    /// the server filters (see the module docs).
    #[must_use]
    pub fn client(&self, client: Client) -> Client {
        let default_ns = client.default_namespace().to_string();
        Client::new(ShardQuery::new(client, self.clone()), default_ns)
    }
}

/// Whether `uri` already names a `shardSelector` (an added watch's: see
/// `added.rs`), which the shard's client leaves as it is.
fn names_selector(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|p| p.starts_with("shardSelector=")))
}

/// `uri` with `shardSelector=<encoded>` added to its query (`encoded`:
/// a selector as [`encode`] writes it).
pub(crate) fn with_param(uri: &http::Uri, encoded: &str) -> http::Uri {
    let sep = if uri.query().is_some() { "&" } else { "?" };
    let with = format!("{uri}{sep}shardSelector={encoded}");
    with.parse().unwrap_or_else(|_| uri.clone())
}

/// Percent-encode a selector for a query (its characters are letters,
/// digits, `._()',|` and spaces).
pub(crate) fn encode(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    out
}

/// Whether the server applied `shard`'s selector to a one-item LIST of
/// `path` sent through `client`: its `metadata.shardInfo.selector` echoes
/// it. `false` when it does not (the server ignores the option, or the
/// client does not add it), or the LIST fails.
pub(crate) async fn server_filters(client: &Client, path: &str) -> bool {
    let Ok(req) = Request::get(format!("{path}?limit=1")).body(Vec::new()) else {
        return false;
    };
    let Ok(text) = client.request_text(req).await else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| {
        v.pointer("/metadata/shardInfo/selector")
            .and_then(|s| s.as_str())
            .is_some_and(|s| !s.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_is_added_percent_encoded() {
        let uri: http::Uri = "/api/v1/configmaps?watch=true".parse().unwrap();
        let sel = "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')";
        let out = with_param(&uri, &encode(sel));
        assert_eq!(
            out.to_string(),
            "/api/v1/configmaps?watch=true&shardSelector=shardRange%28object.metadata.uid%2C%20%270x0000000000000000%27%2C%20%270x10000000000000000%27%29"
        );
        let bare: http::Uri = "/api/v1/configmaps".parse().unwrap();
        assert!(
            with_param(&bare, &encode("a || b"))
                .to_string()
                .ends_with("?shardSelector=a%20%7C%7C%20b")
        );
        assert!(names_selector(&out));
        assert!(!names_selector(&uri) && !names_selector(&bare));
        let lookalike: http::Uri = "/api/v1/configmaps?xshardSelector=1".parse().unwrap();
        assert!(!names_selector(&lookalike));
    }
}
