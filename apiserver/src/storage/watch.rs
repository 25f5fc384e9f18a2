//! Watch streams: newline-delimited `{"type","object"}` JSON, resumed from a
//! resourceVersion out of the store's history ring or started from a
//! snapshot, with bookmarks, timeouts and the real server's 410 answers.
//!
//! Each event's line is built once and shared by every watcher whose view
//! of the event is the plain one; a watcher that falls further behind than
//! the broadcast buffer is cut off with an ERROR 410 event, as the real
//! server does, so one slow client can never stall writers.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::json;
use std::collections::VecDeque;

use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

use crate::faults::{ClientId, ClientView, Faults};
use crate::registry::resources::{ResourceInfo, StorageKey};
use crate::storage::filter::ObjectFilter;
use crate::storage::store::{Event, EventType, Store, StoredObject};

/// How a watch starts and runs.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    /// The served resource (kind and apiVersion for bookmarks).
    pub info: Arc<ResourceInfo>,
    /// Which objects.
    pub filter: ObjectFilter,
    /// `resourceVersion`: None or `0` replays current state as ADDED first.
    pub from: Option<u64>,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`: replay current state and then send a BOOKMARK
    /// annotated `k8s.io/initial-events-end`.
    pub send_initial_events: bool,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// How often a BOOKMARK is sent when bookmarks are allowed.
    pub bookmark_interval: Duration,
    /// Render each object through this (e.g. as a kubectl Table row, or
    /// metadata only) instead of raw.
    pub render: Option<Render>,
    /// The fault settings and the client this watch belongs to: its view
    /// (delay, freeze, coalescing) applies.
    pub view: Option<(Faults, ClientId)>,
}

/// How a watch renders objects other than as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// `PartialObjectMetadata`, the object's metadata only: the same for
    /// every such watcher, so built once per event and shared.
    Metadata,
    /// A kubectl Table row, at the watch's apiVersion.
    Table,
}

/// Build one watch line.
#[must_use]
pub fn encode_line(kind: &str, object: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(object.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(kind.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(object);
    b.put_slice(b"}\n");
    b.freeze()
}

/// The 410 Expired ERROR event line.
#[must_use]
pub fn expired_line(message: &str) -> Bytes {
    let status = crate::machinery::status::ApiError::expired(message).to_status();
    encode_line("ERROR", status.to_string().as_bytes())
}

fn rendered(spec: &WatchSpec, o: &StoredObject) -> Bytes {
    match spec.render {
        // A webhook converts it as the event is sent (`handler::read`).
        None if spec
            .info
            .conversion
            .as_ref()
            .is_some_and(|c| c.by_webhook()) =>
        {
            o.raw.clone()
        }
        None => o.served_bytes(&spec.info, &spec.info.api_version()),
        Some(Render::Metadata) => crate::storage::partial::partial_of_one(o),
        Some(Render::Table) => crate::storage::table::table_line_of_one(&spec.info, o),
    }
}

/// How this watch sees `e`, if at all. A filtered watch sees an object that
/// stops matching as DELETED and one that starts matching as ADDED.
fn classify(spec: &WatchSpec, key: &StorageKey, e: &Event) -> Option<EventType> {
    if *e.key != *key {
        return None;
    }
    let now = spec.filter.matches(&e.object);
    let before = e.prev.as_ref().is_some_and(|p| spec.filter.matches(p));
    match (e.kind, before, now) {
        (EventType::Added, _, true) => Some(EventType::Added),
        (EventType::Deleted, true, _) => Some(EventType::Deleted),
        (EventType::Modified, true, true) => Some(EventType::Modified),
        (EventType::Modified, false, true) => Some(EventType::Added),
        (EventType::Modified, true, false) => Some(EventType::Deleted),
        _ => None,
    }
}

/// The line this watch sends for `e`, if any; the event's own shared line
/// whenever this watch sees it plainly or as metadata only.
#[cfg(test)]
fn line_for(spec: &WatchSpec, e: &Event) -> Option<Bytes> {
    let kind = classify(spec, &spec.info.storage_key(), e)?;
    Some(held_line(spec, kind, &e.object, Some(e)))
}

/// The event's shared rendering ([`crate::storage::store::Renderings`]) of its
/// watch line, as stored.
const PLAIN_LINE: usize = 0;
/// ... and as a `PartialObjectMetadata` (a metadata-only watch's line).
const METADATA_LINE: usize = 1;

fn held_line(
    spec: &WatchSpec,
    kind: EventType,
    obj: &StoredObject,
    shared: Option<&Event>,
) -> Bytes {
    if let Some(e) = shared
        && kind == e.kind
    {
        match spec.render {
            None if spec.info.is_api_version(obj.api_version()) => {
                let line = || encode_line(kind.as_str(), &e.object.raw);
                return e.renderings.get_or_init(PLAIN_LINE, line);
            }
            Some(Render::Metadata) => {
                let line = || {
                    encode_line(
                        kind.as_str(),
                        &crate::storage::partial::partial_of_one(&e.object),
                    )
                };
                return e.renderings.get_or_init(METADATA_LINE, line);
            }
            _ => {}
        }
    }
    encode_line(kind.as_str(), &rendered(spec, obj))
}

/// An event held back by the client's view (delay or freeze).
struct Held {
    release: Instant,
    rv: u64,
    kind: EventType,
    object: Arc<StoredObject>,
    /// The original event while unmerged (its line can be shared).
    shared: Option<Arc<Event>>,
}

/// What an object's held events add up to when only its latest state is
/// delivered: created-and-deleted unseen is nothing; deleted-and-recreated
/// looks like a change (as after an informer relist).
fn merge(first: EventType, last: EventType) -> Option<EventType> {
    match (first, last) {
        (EventType::Added, EventType::Deleted) => None,
        (EventType::Added, _) => Some(EventType::Added),
        (_, EventType::Deleted) => Some(EventType::Deleted),
        _ => Some(EventType::Modified),
    }
}

/// The delivery queue of one watch, shaped by its client's view.
struct Queue {
    held: VecDeque<Held>,
    view: ClientView,
}

impl Queue {
    fn push(&mut self, spec: &WatchSpec, kind: EventType, e: &Arc<Event>) {
        let delay = match &spec.view {
            Some((faults, _)) if !self.view.watch_delay.is_zero() => {
                faults.draw(self.view.watch_delay)
            }
            _ => Duration::ZERO,
        };
        let mut item = Held {
            release: Instant::now() + delay,
            rv: e.object.rv,
            kind,
            object: e.object.clone(),
            shared: Some(e.clone()),
        };
        if self.view.coalesce
            && let Some(i) = self.held.iter().position(|h| {
                h.object.namespace() == e.object.namespace() && h.object.name() == e.object.name()
            })
        {
            let earlier = self.held.remove(i).expect("index from position");
            item.release = earlier.release.min(item.release);
            item.shared = None;
            match merge(earlier.kind, kind) {
                Some(k) => item.kind = k,
                None => return,
            }
        }
        self.held.push_back(item);
    }

    /// The next item that may go out now, if any.
    fn pop_ready(&mut self) -> Option<Held> {
        let h = self.held.front()?;
        if h.release > Instant::now() || self.view.frozen_at.is_some_and(|f| h.rv > f) {
            return None;
        }
        self.held.pop_front()
    }

    /// When the front item may go out (None: nothing held, or frozen).
    fn next_release(&self) -> Option<Instant> {
        let h = self.held.front()?;
        if self.view.frozen_at.is_some_and(|f| h.rv > f) {
            return None;
        }
        Some(h.release)
    }

    /// The newest rv every event up to which has been delivered.
    fn delivered_through(&self, processed: u64) -> u64 {
        let mut rv = self.held.front().map_or(processed, |h| h.rv - 1);
        if let Some(f) = self.view.frozen_at {
            rv = rv.min(f);
        }
        rv
    }
}

fn bookmark_line(spec: &WatchSpec, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj =
        json!({"kind": spec.info.kind, "apiVersion": spec.info.api_version(), "metadata": meta});
    encode_line("BOOKMARK", obj.to_string().as_bytes())
}

/// The 410 line that ends a watch that fell `n` events behind.
fn fell_behind(spec: &WatchSpec, n: u64, processed: u64) -> Bytes {
    tracing::warn!(resource = %spec.info.plural, missed = n, "watcher fell behind; closing it with 410");
    expired_line(&format!(
        "watch of {} fell behind by {n} events; resourceVersion {processed} is too old",
        spec.info.plural
    ))
}

/// Most live events taken in per pass of a watch's loop.
const LIVE_BATCH: usize = 256;

/// Start a watch. Returns the receiving end of the body's lines; when the
/// starting resourceVersion is older than the history ring, the only line
/// is a 410 ERROR event (the caller still answers HTTP 200).
pub fn start(
    store: &Arc<Store>,
    spec: WatchSpec,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let key = spec.info.storage_key();
    let view = spec
        .view
        .as_ref()
        .map(|(f, c)| f.view(*c))
        .unwrap_or_default();
    let replay = spec.from.is_none_or(|rv| rv == 0) || spec.send_initial_events;
    // A frozen client starts from the frozen state.
    let from = match (replay, view.frozen_at) {
        (true, Some(f)) => f,
        (true, None) => store.current_rv(),
        (false, _) => spec.from.unwrap_or(0),
    };
    let (state, backlog, mut live) = match store.open_watch(&key, from, replay) {
        Ok(x) => x,
        Err(floor) => {
            let line = expired_line(&format!("too old resource version: {from} ({floor})"));
            let _ = tx.try_send(line);
            return rx;
        }
    };
    let initial: Vec<Bytes> = state
        .iter()
        .filter(|o| spec.filter.matches(o))
        .map(|o| encode_line("ADDED", &rendered(&spec, o)))
        .collect();
    tokio::spawn(async move {
        let mut processed = from;
        let mut changes = spec.view.as_ref().map(|(f, _)| f.subscribe());
        let mut queue = Queue {
            held: VecDeque::new(),
            view,
        };
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        if spec.send_initial_events
            && tx
                .send(bookmark_line(&spec, processed, true))
                .await
                .is_err()
        {
            return;
        }
        for e in backlog {
            processed = processed.max(e.object.rv);
            if let Some(kind) = classify(&spec, &key, &e) {
                queue.push(&spec, kind, &e);
            }
        }
        let deadline = spec.timeout.and_then(|t| Instant::now().checked_add(t));
        let mut bookmark =
            tokio::time::interval(spec.bookmark_interval.max(Duration::from_millis(10)));
        bookmark.tick().await;
        loop {
            while let Some(h) = queue.pop_ready() {
                let line = held_line(&spec, h.kind, &h.object, h.shared.as_deref());
                if tx.send(line).await.is_err() {
                    return;
                }
            }
            let release = queue.next_release();
            tokio::select! {
                biased;
                _ = shutdown.changed() => return,
                _ = crate::machinery::clock::sleep_until_opt(deadline) => return,
                _ = tx.closed() => return,
                changed = async { changes.as_mut().expect("guarded").changed().await }, if changes.is_some() => {
                    if changed.is_err() {
                        changes = None;
                    } else if let Some((f, c)) = &spec.view {
                        queue.view = f.view(*c);
                    }
                }
                _ = crate::machinery::clock::sleep_until_opt(release), if release.is_some() => {}
                ev = live.recv() => match ev {
                    Ok(mut e) => {
                        // Take in every event already published (up to a
                        // batch) before going round the select again: under
                        // write load, one pass of the loop per batch rather
                        // than per event.
                        let mut taken = 0;
                        loop {
                            if e.object.rv > processed {
                                processed = e.object.rv;
                                if let Some(kind) = classify(&spec, &key, &e) {
                                    queue.push(&spec, kind, &e);
                                }
                            }
                            taken += 1;
                            if taken == LIVE_BATCH {
                                break;
                            }
                            match live.try_recv() {
                                Ok(next) => e = next,
                                Err(broadcast::error::TryRecvError::Empty) => break,
                                // try_recv consumes the lag: report it here.
                                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                                    let _ = tx.send(fell_behind(&spec, n, processed)).await;
                                    return;
                                }
                                Err(broadcast::error::TryRecvError::Closed) => return,
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        let _ = tx.send(fell_behind(&spec, n, processed)).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = bookmark.tick(), if spec.bookmarks => {
                    let rv = queue.delivered_through(processed);
                    if tx.send(bookmark_line(&spec, rv, false)).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::machinery::clock::Clock;
    use crate::registry::resources::builtin_resources;
    use crate::storage::store::StoreConfig;

    fn cms() -> Arc<ResourceInfo> {
        Arc::new(
            builtin_resources()
                .into_iter()
                .find(|r| r.plural == "configmaps")
                .unwrap(),
        )
    }

    fn spec(filter: ObjectFilter) -> WatchSpec {
        WatchSpec {
            info: cms(),
            filter,
            from: None,
            bookmarks: false,
            send_initial_events: false,
            timeout: None,
            bookmark_interval: Duration::from_secs(5),
            render: None,
            view: None,
        }
    }

    fn cm(name: &str, tier: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "labels": {"tier": tier}}})
    }

    async fn next(rx: &mut mpsc::Receiver<Bytes>) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("a watch line arrives")
            .expect("the watch is open");
        assert_eq!(line.last(), Some(&b'\n'));
        serde_json::from_slice(&line).unwrap()
    }

    fn setup() -> (
        Arc<Store>,
        tokio::sync::watch::Sender<bool>,
        tokio::sync::watch::Receiver<bool>,
    ) {
        let store = Arc::new(Store::new(
            StoreConfig::default(),
            Clock::new(),
            Arc::new(crate::storage::strategy::KindRules),
        ));
        let (tx, rx) = tokio::sync::watch::channel(false);
        (store, tx, rx)
    }

    #[tokio::test(start_paused = true)]
    async fn replays_state_then_follows_with_selector_transitions() {
        let (store, _stop, stopped) = setup();
        let info = cms();
        store.create(&info, cm("a", "web")).unwrap();
        store.create(&info, cm("b", "db")).unwrap();
        let filter = ObjectFilter::new(&info, None, Some("tier=web"), None).unwrap();
        let mut rx = start(&store, spec(filter), stopped);
        let first = next(&mut rx).await;
        assert_eq!(first["type"], "ADDED");
        assert_eq!(first["object"]["metadata"]["name"], "a");
        // b starts matching: ADDED; a stops matching: DELETED.
        store
            .update(&info, "default", "b", |o| {
                let mut n = o.clone();
                n["metadata"]["labels"]["tier"] = "web".into();
                Ok(n)
            })
            .unwrap();
        let e = next(&mut rx).await;
        assert_eq!(
            (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
            (Some("ADDED"), Some("b"))
        );
        store
            .update(&info, "default", "a", |o| {
                let mut n = o.clone();
                n["metadata"]["labels"]["tier"] = "db".into();
                Ok(n)
            })
            .unwrap();
        let e = next(&mut rx).await;
        assert_eq!(
            (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
            (Some("DELETED"), Some("a"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn resumes_from_an_rv_and_sends_bookmarks() {
        let (store, _stop, stopped) = setup();
        let info = cms();
        store.create(&info, cm("a", "x")).unwrap();
        let from = store.current_rv();
        store.create(&info, cm("b", "x")).unwrap();
        let mut s = spec(ObjectFilter::default());
        s.from = Some(from);
        s.bookmarks = true;
        let mut rx = start(&store, s, stopped);
        let e = next(&mut rx).await;
        assert_eq!(e["type"], "ADDED");
        assert_eq!(e["object"]["metadata"]["name"], "b");
        let bm = next(&mut rx).await;
        assert_eq!(bm["type"], "BOOKMARK");
        assert_eq!(bm["object"]["kind"], "ConfigMap");
        assert_eq!(
            bm["object"]["metadata"]["resourceVersion"],
            store.current_rv().to_string()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn initial_events_end_with_an_annotated_bookmark() {
        let (store, _stop, stopped) = setup();
        let info = cms();
        store.create(&info, cm("a", "x")).unwrap();
        let mut s = spec(ObjectFilter::default());
        s.send_initial_events = true;
        s.bookmarks = true;
        let mut rx = start(&store, s, stopped);
        assert_eq!(next(&mut rx).await["type"], "ADDED");
        let bm = next(&mut rx).await;
        assert_eq!(bm["type"], "BOOKMARK");
        assert_eq!(
            bm["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_and_shutdown_end_the_stream() {
        let (store, stop, stopped) = setup();
        let mut s = spec(ObjectFilter::default());
        s.from = Some(store.current_rv());
        s.timeout = Some(Duration::from_secs(30));
        let mut rx = start(&store, s.clone(), stopped.clone());
        let t0 = tokio::time::Instant::now();
        assert!(rx.recv().await.is_none());
        assert_eq!(t0.elapsed(), Duration::from_secs(30));
        s.timeout = None;
        let mut rx = start(&store, s, stopped);
        stop.send(true).unwrap();
        assert!(rx.recv().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn too_old_rv_is_one_410_error_event() {
        let store = Arc::new(Store::new(
            StoreConfig {
                history: 2,
                watch_buffer: 16,
                compaction_interval: None,
            },
            Clock::new(),
            Arc::new(crate::storage::strategy::KindRules),
        ));
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let info = cms();
        for i in 0..5 {
            store.create(&info, cm(&format!("c{i}"), "x")).unwrap();
        }
        let mut s = spec(ObjectFilter::default());
        s.from = Some(1);
        let mut rx = start(&store, s, stopped);
        let e = next(&mut rx).await;
        assert_eq!(e["type"], "ERROR");
        assert_eq!(e["object"]["code"], 410);
        assert_eq!(e["object"]["reason"], "Expired");
        assert!(rx.recv().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_watcher_is_cut_off_with_410_and_writers_never_wait() {
        let store = Arc::new(Store::new(
            StoreConfig {
                history: 100,
                watch_buffer: 16,
                compaction_interval: None,
            },
            Clock::new(),
            Arc::new(crate::storage::strategy::KindRules),
        ));
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let info = cms();
        let mut s = spec(ObjectFilter::default());
        s.from = Some(store.current_rv());
        let mut rx = start(&store, s, stopped);
        // Nobody reads while 500 writes happen; they all complete.
        for i in 0..500 {
            store.create(&info, cm(&format!("c{i}"), "x")).unwrap();
        }
        let mut last = Value::Null;
        while let Some(line) = rx.recv().await {
            last = serde_json::from_slice(&line).unwrap();
        }
        assert_eq!(last["type"], "ERROR");
        assert_eq!(last["object"]["code"], 410);
    }

    #[test]
    fn one_line_per_event_is_shared() {
        let store = Store::new(
            StoreConfig::default(),
            Clock::new(),
            Arc::new(crate::storage::strategy::KindRules),
        );
        let info = cms();
        let (_, mut live) = store
            .watch_from(&info.storage_key(), store.current_rv())
            .unwrap();
        store.create(&info, cm("a", "x")).unwrap();
        let e = live.try_recv().unwrap();
        let s = spec(ObjectFilter::default());
        let l1 = line_for(&s, &e).unwrap();
        let l2 = line_for(&s, &e).unwrap();
        assert_eq!(
            l1.as_ptr(),
            l2.as_ptr(),
            "watchers share the serialized bytes"
        );
        let metadata = WatchSpec {
            render: Some(Render::Metadata),
            ..spec(ObjectFilter::default())
        };
        let m1 = line_for(&metadata, &e).unwrap();
        let m2 = line_for(&metadata, &e).unwrap();
        assert_eq!(m1.as_ptr(), m2.as_ptr(), "so do metadata-only watchers");
        let line: Value = serde_json::from_slice(&m1).unwrap();
        assert_eq!(line["type"], "ADDED");
        assert_eq!(line["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(line["object"]["metadata"]["name"], "a");
        assert!(line["object"].get("data").is_none(), "metadata only");
    }
}
