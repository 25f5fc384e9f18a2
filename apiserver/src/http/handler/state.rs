//! What every request shares: the store, the served kinds, the settings,
//! the fault settings.

use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::controllers::alloc::{DEFAULT_NODE_PORTS, ServiceAllocator, ServiceCidr};

use crate::registry::resources::Registry;
use crate::storage::store::Store;

/// Handler settings.
#[derive(Debug, Clone)]
pub struct HandlerConfig {
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// `host:port` advertised by `/api` (empty when there is no listener).
    pub server_address: String,
    /// Serve `shardSelector` on lists and watches (KEP-5866's feature gate
    /// `ShardedListAndWatch`); off, the option is ignored.
    pub sharded_list_and_watch: bool,
    /// The range Services' cluster IPs come from.
    pub service_cidr: ServiceCidr,
    /// The range Services' node ports come from.
    pub node_ports: RangeInclusive<u16>,
    /// Authentication and authorization settings.
    pub auth: crate::auth::AuthConfig,
}

impl Default for HandlerConfig {
    fn default() -> Self {
        HandlerConfig {
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(15),
            server_address: String::new(),
            sharded_list_and_watch: false,
            service_cidr: ServiceCidr::default(),
            node_ports: DEFAULT_NODE_PORTS,
            auth: crate::auth::AuthConfig::default(),
        }
    }
}

/// Everything a request needs: the store, the served kinds, settings.
#[derive(Debug)]
pub struct State {
    /// The object store.
    pub store: Arc<Store>,
    /// The served kinds.
    pub registry: Arc<Registry>,
    /// Settings.
    pub config: HandlerConfig,
    /// Flips to true when the server stops: open watches end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Fault settings: write faults and per-client views apply to requests.
    pub faults: crate::faults::Faults,
    /// Services' cluster IPs and node ports.
    pub services: ServiceAllocator,
    /// The /openapi documents of the served kinds, built once per change.
    pub openapi: crate::http::openapi::Cache,
    /// Who requests are and what they may do.
    pub auth: crate::auth::Auth,
    /// The admission webhooks registered in the store.
    pub webhooks: crate::admission::Registered,
    /// The `shardSelector`s parsed so far.
    pub(crate) shard_selectors: crate::machinery::shard::SelectorCache,
    /// State of the generateName suffix generator (seeded, deterministic).
    names: Mutex<crate::faults::Rng>,
}

impl State {
    /// Build the handler state.
    #[must_use]
    pub fn new(
        store: Arc<Store>,
        registry: Arc<Registry>,
        config: HandlerConfig,
        shutdown: tokio::sync::watch::Receiver<bool>,
        faults: crate::faults::Faults,
        seed: u64,
    ) -> Self {
        let services = ServiceAllocator::new(config.service_cidr, config.node_ports.clone());
        let auth = crate::auth::Auth::new(config.auth.clone(), &store);
        let webhooks = crate::admission::Registered::new(&store);
        State {
            auth,
            webhooks,
            services,
            store,
            registry,
            config,
            shutdown,
            faults,
            openapi: crate::http::openapi::Cache::default(),
            shard_selectors: crate::machinery::shard::SelectorCache::default(),
            names: Mutex::new(crate::faults::Rng::new(seed)),
        }
    }

    /// A random 5-character suffix for `generateName`.
    pub(super) fn random_suffix(&self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut rng = self.names.lock().unwrap_or_else(|e| e.into_inner());
        (0..5)
            .map(|_| ALPHABET[(rng.next_u64() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }
}
