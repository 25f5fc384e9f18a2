//! A watch of the slots a sharded controller gained, run beside the watch
//! it already has instead of restarting that one.
//!
//! A restart relists every object of every active slot: a replica holding
//! half of 100,000 objects that gains the other half lists all 100,000 to
//! reconcile the 50,000 that moved. An added watch lists and watches only
//! the gained slots (its own `shardSelector`, which the shard's client
//! leaves alone) and hands each object to the reflector as an `Apply` the
//! moment its page arrives — the store keeps what the first watch listed.
//!
//! It cannot tell the reflector which objects went while it was not
//! watching, so it never relists: when its watch expires (410 Gone) or a
//! request fails, it asks for a [`Step::Restart`], and the sharded watch
//! starts over with one relist of everything active. It asks for one too
//! when its watch ends (the server's timeout, 290 s by default): by then
//! the running watch has resumed with the shard client's selector for
//! every active slot, so the two would carry the same events. That relist
//! comes long after the hand-over and reconciles nothing again (see
//! `follow.rs`).

use std::collections::VecDeque;
use std::fmt::Debug;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::api::{Api, ListParams, ObjectList, VersionMatch, WatchEvent, WatchParams};
use kube::core::Request;
use kube::runtime::watcher::{self, Event, ListSemantic};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::query;

/// What an added watch yields.
pub(crate) enum Step<K> {
    /// An `Apply` or a `Delete` for the reflector.
    Event(Event<K>),
    /// It lost track of its slots, or its watch ended: the sharded watch
    /// must start over, with one watch of every active slot.
    Restart,
}

struct Watch<K> {
    target: Target,
    state: State<K>,
    ready: VecDeque<watcher::Result<Step<K>>>,
}

/// Where and how it lists and watches.
struct Target {
    client: Client,
    request: Request,
    /// The `shardSelector` of the gained slots.
    selector: String,
    wc: watcher::Config,
    /// `K` is read through the metadata API (`PartialObjectMeta`).
    metadata: bool,
}

enum State<K> {
    List(Option<String>),
    Open(String),
    Watching(BoxStream<'static, kube::Result<WatchEvent<K>>>),
    Done,
}

/// The objects of `api` that `selector` selects, listed then watched until
/// the watch ends, as `Apply` and `Delete` events, then a
/// [`Step::Restart`]; `wc`'s selectors, page size, list
/// semantic, timeout and bookmarks apply as they do to kube-runtime's
/// watcher (the list is always paged, never streamed).
pub(crate) fn watch<K>(
    api: &Api<K>,
    wc: &watcher::Config,
    selector: String,
) -> impl Stream<Item = watcher::Result<Step<K>>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let watch = Watch {
        target: Target {
            client: api.clone().into_client(),
            request: Request::new(api.resource_url()),
            selector,
            wc: wc.clone(),
            metadata: K::metadata_api(),
        },
        state: State::List(None),
        ready: VecDeque::new(),
    };
    futures::stream::unfold(watch, |mut w| async move {
        loop {
            if let Some(step) = w.ready.pop_front() {
                return Some((step, w));
            }
            if matches!(w.state, State::Done) {
                return None;
            }
            w.step().await;
        }
    })
}

impl<K> Watch<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// One request, or one watch event: what it yields goes to `ready`.
    async fn step(&mut self) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Done => {}
            State::List(continue_token) => match self.target.list(continue_token).await {
                Ok(list) => {
                    let rv = list.metadata.resource_version.filter(|s| !s.is_empty());
                    let next = list.metadata.continue_.filter(|s| !s.is_empty());
                    self.ready.extend(
                        list.items
                            .into_iter()
                            .map(|k| Ok(Step::Event(Event::Apply(k)))),
                    );
                    self.state = match (next, rv) {
                        (Some(next), _) => State::List(Some(next)),
                        (None, Some(rv)) => State::Open(rv),
                        (None, None) => self.restart(watcher::Error::NoResourceVersion),
                    };
                }
                Err(e) => self.state = self.restart(watcher::Error::InitialListFailed(e)),
            },
            State::Open(rv) => match self.target.open(&rv).await {
                Ok(stream) => self.state = State::Watching(stream),
                Err(e) => self.state = self.restart(watcher::Error::WatchStartFailed(e)),
            },
            State::Watching(mut stream) => {
                // kube-runtime's watcher counts a connection silent for
                // its timeout and 5 s more as dropped.
                let idle =
                    Duration::from_secs(u64::from(self.target.wc.timeout.unwrap_or(290)) + 5);
                match tokio::time::timeout(idle, stream.next()).await {
                    Ok(Some(Ok(WatchEvent::Added(k) | WatchEvent::Modified(k)))) => {
                        self.ready.push_back(Ok(Step::Event(Event::Apply(k))));
                    }
                    Ok(Some(Ok(WatchEvent::Deleted(k)))) => {
                        self.ready.push_back(Ok(Step::Event(Event::Delete(k))));
                    }
                    Ok(Some(Ok(WatchEvent::Bookmark(_)))) => {}
                    Ok(Some(Ok(WatchEvent::Error(status)))) if status.code == 410 => {
                        self.state = self.restart(watcher::Error::WatchError(status));
                        return;
                    }
                    Ok(Some(Ok(WatchEvent::Error(status)))) => {
                        self.ready
                            .push_back(Err(watcher::Error::WatchError(status)));
                    }
                    Ok(Some(Err(e))) => self.ready.push_back(Err(watcher::Error::WatchFailed(e))),
                    // Ended (its timeout) or silent: rather than watch
                    // again, fold into one watch — the running watch has
                    // by now resumed with a selector covering these slots
                    // too (the shard's client sends the active slots'),
                    // so both would carry their events.
                    Ok(None) | Err(_) => {
                        self.ready.push_back(Ok(Step::Restart));
                        return;
                    }
                }
                self.state = State::Watching(stream);
            }
        }
    }

    /// Yield `e`, then ask for a restart; the watch ends.
    fn restart(&mut self, e: watcher::Error) -> State<K> {
        self.ready.push_back(Err(e));
        self.ready.push_back(Ok(Step::Restart));
        State::Done
    }
}

impl Target {
    async fn list<K: Clone + DeserializeOwned>(
        &self,
        continue_token: Option<String>,
    ) -> kube::Result<ObjectList<K>> {
        let mut lp = ListParams::default();
        lp.label_selector.clone_from(&self.wc.label_selector);
        lp.field_selector.clone_from(&self.wc.field_selector);
        lp.limit = self.wc.page_size;
        lp.continue_token = continue_token;
        if self.wc.list_semantic == ListSemantic::Any {
            lp.resource_version = Some("0".into());
            lp.version_match = Some(VersionMatch::NotOlderThan);
        }
        let req = if self.metadata {
            self.request.list_metadata(&lp)
        } else {
            self.request.list(&lp)
        }
        .map_err(kube::Error::BuildRequest)?;
        self.client.request(self.selected(req)).await
    }

    async fn open<K: Clone + DeserializeOwned + Send + 'static>(
        &self,
        rv: &str,
    ) -> kube::Result<BoxStream<'static, kube::Result<WatchEvent<K>>>> {
        let mut wp = WatchParams::default();
        wp.label_selector.clone_from(&self.wc.label_selector);
        wp.field_selector.clone_from(&self.wc.field_selector);
        wp.timeout = self.wc.timeout;
        wp.bookmarks = self.wc.bookmarks;
        let req = if self.metadata {
            self.request.watch_metadata(&wp, rv)
        } else {
            self.request.watch(&wp, rv)
        }
        .map_err(kube::Error::BuildRequest)?;
        Ok(self
            .client
            .request_events(self.selected(req))
            .await?
            .boxed())
    }

    /// `req` with the added watch's `shardSelector`.
    fn selected(&self, mut req: http::Request<Vec<u8>>) -> http::Request<Vec<u8>> {
        *req.uri_mut() = query::with_param(req.uri(), &query::encode(&self.selector));
        req
    }
}
