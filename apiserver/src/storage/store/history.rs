//! History: watches resumed from the event ring, and stale views rebuilt
//! from it (the state as of an older resourceVersion).

use std::sync::Arc;

use tokio::sync::broadcast;

use super::*;

impl Store {
    /// Compact the history when [`StoreConfig::compaction_interval`] has
    /// passed since the last compaction: what is not newer than the
    /// resourceVersion that one saw is dropped (the floor rises to it), as
    /// kube-apiserver's compactor does every interval. Run lazily, at
    /// every write and every read of the history, with the store's clock.
    pub(super) fn compact_if_due(&self, inner: &mut Inner) {
        let Some(every) = self.config.compaction_interval else {
            return;
        };
        let now = self.clock.now();
        match inner.compaction {
            None => inner.compaction = Some((now, inner.rv)),
            Some((at, to)) => {
                let since = now.duration_since(at);
                if since
                    < jiff::SignedDuration::try_from(every).unwrap_or(jiff::SignedDuration::MAX)
                {
                    return;
                }
                while inner.history.front().is_some_and(|e| e.object.rv <= to) {
                    inner.history.pop_front();
                }
                inner.floor = inner.floor.max(to);
                inner.compaction = Some((now, inner.rv));
            }
        }
    }

    /// [`Store::list`] as of resourceVersion `at`: a page of one snapshot
    /// (a continued list, an exact read, a stale view), whatever was written
    /// since. `Err` carries the oldest rv still served when `at` is too old.
    ///
    /// The page is the current collection from `after` on, merged with the
    /// retained events newer than `at` undone — for each object they
    /// touched, the state before the oldest of them (none when that one
    /// created it) — so a page costs its length plus the events since `at`,
    /// not the size of the collection.
    pub fn list_at(
        &self,
        at: u64,
        key: &StorageKey,
        ns: Option<&str>,
        after: Option<&(String, String)>,
        limit: Option<usize>,
        filter: impl Fn(&StoredObject) -> bool,
    ) -> Result<ListPage, u64> {
        use std::cmp::Ordering;
        use std::ops::Bound;
        let mut inner = self.lock();
        self.compact_if_due(&mut inner);
        if at < inner.floor {
            return Err(inner.floor);
        }
        // What each object written since `at` was at `at` (newest first,
        // so the oldest event's answer stays).
        let mut undone: BTreeMap<(&str, &str), Option<&Arc<StoredObject>>> = BTreeMap::new();
        for e in inner.history.iter().rev() {
            if e.object.rv <= at {
                break;
            }
            if *e.key != *key {
                continue;
            }
            let was = match e.kind {
                EventType::Added => None,
                _ => e.prev.as_ref(),
            };
            undone.insert((e.object.namespace(), e.object.name()), was);
        }
        let start: (&str, &str) = match (after, ns) {
            (Some(a), _) => (a.0.as_str(), a.1.as_str()),
            (None, Some(ns)) => (ns, ""),
            (None, None) => ("", ""),
        };
        let from = Id::new(start.0, start.1);
        let lower: Bound<&dyn Named> = Bound::Included(&from);
        let mut current = inner
            .collections
            .get(key)
            .into_iter()
            .flat_map(|c| c.range::<dyn Named, _>((lower, Bound::Unbounded)))
            .map(|s| &s.0)
            .peekable();
        let mut past = undone.range(start..).peekable();
        let merged = std::iter::from_fn(|| {
            loop {
                let order = match (current.peek(), past.peek()) {
                    (None, None) => return None,
                    (Some(_), None) => Ordering::Less,
                    (None, Some(_)) => Ordering::Greater,
                    (Some(c), Some((k, _))) => (c.namespace(), c.name()).cmp(k),
                };
                if order != Ordering::Greater {
                    let c = current.next();
                    if order == Ordering::Less {
                        return c;
                    }
                }
                // This object was written since `at`: as it was then.
                if let Some((_, Some(was))) = past.next() {
                    return Some(*was);
                }
            }
        });
        Ok(paginate(merged, ns, after, limit, filter, at))
    }

    /// Start a watch of `key` at resourceVersion `from`: when `replay`, the
    /// collection's state as of `from` (rebuilt from the history ring when
    /// `from` is in the past); the retained events newer than `from`; and a
    /// receiver for live ones — all read under one lock, so nothing is
    /// missed or doubled. `Err` carries the oldest rv still served when
    /// `from` is older than the retained history (the caller answers 410).
    #[allow(clippy::type_complexity)]
    pub fn open_watch(
        &self,
        key: &StorageKey,
        from: u64,
        replay: bool,
    ) -> Result<
        (
            Vec<Arc<StoredObject>>,
            Vec<Arc<Event>>,
            broadcast::Receiver<Arc<Event>>,
        ),
        u64,
    > {
        let mut inner = self.lock();
        self.compact_if_due(&mut inner);
        if from < inner.floor {
            return Err(inner.floor);
        }
        let state = if replay {
            Self::state_at_locked(&inner, key, from)
        } else {
            Vec::new()
        };
        let backlog = inner
            .history
            .iter()
            .filter(|e| e.object.rv > from && *e.key == *key)
            .cloned()
            .collect();
        Ok((state, backlog, self.events.subscribe()))
    }

    /// Start a watch of `key` from resourceVersion `from` (no replay).
    #[allow(clippy::type_complexity)]
    pub fn watch_from(
        &self,
        key: &StorageKey,
        from: u64,
    ) -> Result<(Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>), u64> {
        self.open_watch(key, from, false).map(|(_, b, r)| (b, r))
    }

    /// The objects of `key` as they were at resourceVersion `at` (a stale
    /// view), rebuilt by undoing the retained events newer than `at`.
    /// `Err` carries the oldest rv still served when `at` is too old.
    pub fn state_at(&self, key: &StorageKey, at: u64) -> Result<Vec<Arc<StoredObject>>, u64> {
        let mut inner = self.lock();
        self.compact_if_due(&mut inner);
        if at < inner.floor {
            return Err(inner.floor);
        }
        Ok(Self::state_at_locked(&inner, key, at))
    }

    fn state_at_locked(inner: &Inner, key: &StorageKey, at: u64) -> Vec<Arc<StoredObject>> {
        let mut state: Collection = inner.collections.get(key).cloned().unwrap_or_default();
        let take = |state: &mut Collection, o: &StoredObject| {
            let id: &dyn Named = &Id::new(o.namespace(), o.name());
            state.take(id)
        };
        for e in inner.history.iter().rev() {
            if e.object.rv <= at {
                break;
            }
            if *e.key != *key {
                continue;
            }
            match (&e.kind, &e.prev) {
                (EventType::Added, _) => {
                    take(&mut state, &e.object);
                }
                (_, Some(prev)) => {
                    state.replace(Slot::new(prev.clone()));
                }
                (_, None) => {}
            }
        }
        state.into_iter().map(|s| s.0).collect()
    }

    /// A consistent snapshot of every object of every collection, the
    /// resourceVersion it was taken at, and a receiver for every later event
    /// (what the garbage collector starts from).
    #[allow(clippy::type_complexity)]
    pub fn snapshot_all_and_subscribe(&self) -> (Vec<Keyed>, u64, broadcast::Receiver<Arc<Event>>) {
        let inner = self.lock();
        let items = inner
            .collections
            .iter()
            .flat_map(|(k, c)| c.iter().map(move |o| ((**k).clone(), o.0.clone())))
            .collect();
        (items, inner.rv, self.events.subscribe())
    }

    /// A consistent snapshot of a collection (for a watch from "now" that
    /// first replays current state) and a receiver for every later event.
    pub fn snapshot_and_subscribe(
        &self,
        key: &StorageKey,
    ) -> (Vec<Arc<StoredObject>>, u64, broadcast::Receiver<Arc<Event>>) {
        let inner = self.lock();
        let items = inner
            .collections
            .get(key)
            .map(|c| c.iter().map(|s| s.0.clone()).collect())
            .unwrap_or_default();
        (items, inner.rv, self.events.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use crate::storage::store::testing::*;

    #[test]
    fn watch_history_is_a_bounded_ring() {
        let s = store();
        let cms = info("configmaps");
        let start = s.current_rv();
        for i in 0..20 {
            s.create(&cms, cm(&format!("c{i}"))).unwrap();
        }
        assert!(s.watch_from(&cms.storage_key(), start).is_err());
        let recent = s.current_rv() - 3;
        let (backlog, _) = s.watch_from(&cms.storage_key(), recent).unwrap();
        assert_eq!(backlog.len(), 3);
        assert!(backlog.iter().all(|e| e.object.rv > recent));
    }
}
