//! Who is asking, and whether they may: authentication and authorization
//! as kube-apiserver does them.
//!
//! **Authentication.** A request names its user with a bearer token
//! (`Authorization: Bearer <token>`):
//! - a static token: the admin token every kubeconfig the server writes
//!   carries (user `ward-admin`, group `system:masters`), or one of the
//!   tokens of [`AuthConfig::static_tokens`] (kube-apiserver's
//!   `--token-auth-file`);
//! - a ServiceAccount token from `serviceaccounts/<name>/token` (a
//!   TokenRequest): a JWT signed ES256, valid until its expiry on the
//!   server's clock, for its audiences, and only while its ServiceAccount
//!   (and the Pod it was bound to, if any) still exists with the same uid —
//!   a deleted and recreated ServiceAccount's old tokens stop working.
//!
//! Over HTTPS, a client certificate the server's CA signed
//! (`ApiServer::client_kubeconfig`) names its user first: CN the user,
//! each O a group (kube-apiserver's `--client-ca-file`).
//!
//! A token none of these accepts is 401 (kube-apiserver's body). A request
//! without one is `system:anonymous` (group `system:unauthenticated`).
//! Authenticated users get the group `system:authenticated`;
//! ServiceAccounts also `system:serviceaccounts` and
//! `system:serviceaccounts:<namespace>`. In-process clients
//! (`ApiServer::client`) are the admin unless their request carries a
//! token.
//!
//! **Authorization** ([`AuthorizationMode`]): `AlwaysAllow` (the default,
//! what ward-apiserver always did) or `RBAC`, kube-apiserver's RBAC
//! authorizer over the cluster's Roles, ClusterRoles and bindings (see
//! [`rbac`]), its snapshot rebuilt only after one of them changed. A denied
//! request is 403 worded as kube-apiserver words it.

pub mod rbac;
pub mod tokens;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http::HeaderMap;
use serde_json::Value;

pub use rbac::{Attributes, Decision, Rbac, UserInfo};
use tokens::{Signer, TokenError};

use crate::machinery::status::ApiError;
use crate::registry::resources::StorageKey;
use crate::storage::store::Store;

/// The admin user every kubeconfig the server writes names.
pub const ADMIN_USER: &str = "ward-admin";

/// The group whose members may do anything, whatever RBAC holds: as
/// kube-apiserver's first authorizer (`NewPrivilegedGroups`), ahead of
/// RBAC, which allows them without a reason.
pub const MASTERS: &str = "system:masters";

/// How requests are authorized: kube-apiserver's `--authorization-mode`
/// (one mode; kube-apiserver's chains of several are not served).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every request is allowed (the default).
    #[default]
    AlwaysAllow,
    /// kube-apiserver's RBAC authorizer.
    Rbac,
}

impl std::str::FromStr for AuthorizationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "AlwaysAllow" => Ok(AuthorizationMode::AlwaysAllow),
            "RBAC" => Ok(AuthorizationMode::Rbac),
            _ => Err(format!(
                "unknown authorization mode {s:?}: AlwaysAllow or RBAC"
            )),
        }
    }
}

/// Authentication and authorization settings.
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    /// How requests are authorized.
    pub mode: AuthorizationMode,
    /// Bearer tokens and the users they name (`--token-auth-file`).
    pub static_tokens: HashMap<String, UserInfo>,
}

/// The identity an in-process request carries (a request extension): the
/// server takes it instead of authenticating the request's headers.
#[derive(Debug, Clone)]
pub struct Identity(pub Arc<UserInfo>);

/// The user a request's TLS client certificate names (a request extension
/// the HTTPS listener sets): kube-apiserver's x509 authenticator, which
/// runs before the token authenticators.
#[derive(Debug, Clone)]
pub(crate) struct CertificateUser(pub(crate) Arc<UserInfo>);

/// The user of a verified client certificate: `name` (its CN) in `groups`
/// (its Os) and `system:authenticated`.
pub(crate) fn certificate_user(name: String, groups: Vec<String>) -> UserInfo {
    authenticated(UserInfo {
        name,
        groups,
        ..UserInfo::default()
    })
}

/// A server's authenticator and authorizer.
#[derive(Debug)]
pub struct Auth {
    mode: AuthorizationMode,
    static_tokens: HashMap<String, UserInfo>,
    admin_token: String,
    signer: Signer,
    /// Bumped by the store on every write to an RBAC kind.
    rbac_writes: Arc<AtomicU64>,
    /// The RBAC snapshot and the write count it was built at.
    rbac: Mutex<Option<(u64, Arc<Rbac>)>>,
    /// The claims of ServiceAccount tokens whose signature was verified:
    /// checking an ES256 signature costs more than the rest of a request.
    /// Expiry and audience are checked every time, the bound objects after
    /// each write to their kinds.
    /// (Hashed with foldhash: SipHash over a ~900-byte JWT was a quarter of
    /// what authorizing a ServiceAccount's request cost, by callgrind; only
    /// verified tokens get in, so a weaker hash cannot be flooded.)
    verified: Mutex<HashMap<String, Arc<Verified>, foldhash::fast::RandomState>>,
    /// Bumped by the store on every write to a ServiceAccount, and to a
    /// Pod: a token's bound objects need reading again only after one.
    account_writes: Arc<AtomicU64>,
    pod_writes: Arc<AtomicU64>,
}

/// A ServiceAccount token whose signature was verified.
#[derive(Debug)]
struct Verified {
    claims: tokens::Claims,
    user: Arc<UserInfo>,
    /// 1 + the [`Auth::bound_writes`] at which its ServiceAccount (and
    /// Pod) were last read and found live; 0 before.
    live_at: AtomicU64,
}

/// The user a ServiceAccount token's claims name.
fn account_user(claims: &tokens::Claims) -> UserInfo {
    let bound = &claims.kubernetes;
    let mut extra = std::collections::BTreeMap::new();
    extra.insert(
        "authentication.kubernetes.io/credential-id".to_string(),
        vec![format!("JTI={}", claims.jti)],
    );
    if let Some(pod) = &bound.pod {
        extra.insert(
            "authentication.kubernetes.io/pod-name".into(),
            vec![pod.name.clone()],
        );
        extra.insert(
            "authentication.kubernetes.io/pod-uid".into(),
            vec![pod.uid.clone()],
        );
    }
    authenticated(UserInfo {
        name: claims.sub.clone(),
        uid: bound.serviceaccount.uid.clone(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", bound.namespace),
        ],
        extra,
    })
}

/// Verified tokens remembered before the memory is cleared.
const VERIFIED_TOKENS: usize = 4096;

impl Auth {
    /// An authenticator with a fresh admin token and signing key, over `store`.
    #[must_use]
    pub fn new(config: AuthConfig, store: &Store) -> Auth {
        Auth {
            mode: config.mode,
            static_tokens: config.static_tokens,
            admin_token: tokens::random_token(),
            signer: Signer::generate(),
            rbac_writes: store.writes_to_group("rbac.authorization.k8s.io"),
            rbac: Mutex::new(None),
            verified: Mutex::new(HashMap::default()),
            account_writes: store.writes_to(&key("", "serviceaccounts")),
            pod_writes: store.writes_to(&key("", "pods")),
        }
    }

    /// The admin user (one shared copy).
    #[must_use]
    pub fn admin() -> Arc<UserInfo> {
        static ADMIN: std::sync::LazyLock<Arc<UserInfo>> = std::sync::LazyLock::new(|| {
            Arc::new(authenticated(UserInfo {
                name: ADMIN_USER.into(),
                uid: String::new(),
                groups: vec![MASTERS.into()],
                extra: Default::default(),
            }))
        });
        ADMIN.clone()
    }

    /// The token that authenticates as [`Auth::admin`].
    #[must_use]
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// How requests are authorized.
    #[must_use]
    pub fn mode(&self) -> AuthorizationMode {
        self.mode
    }

    /// Who sent a request with `headers`: its bearer token's user, else
    /// `system:anonymous`; 401 for a token nobody issued.
    pub fn authenticate(
        &self,
        store: &Store,
        headers: &HeaderMap,
    ) -> Result<Arc<UserInfo>, ApiError> {
        static AUDIENCES: std::sync::LazyLock<[String; 1]> =
            std::sync::LazyLock::new(|| [tokens::ISSUER.to_string()]);
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Ok(Arc::new(anonymous()));
        };
        let token = value
            .as_bytes()
            .strip_prefix(b"Bearer ")
            .map(<[u8]>::trim_ascii)
            .filter(|t| !t.is_empty())
            .and_then(|t| std::str::from_utf8(t).ok());
        let Some(token) = token else {
            // Basic auth and other schemes are not served.
            return Err(ApiError::unauthorized());
        };
        self.authenticate_token(store, token, &*AUDIENCES)
            .map_err(|_| ApiError::unauthorized())
    }

    /// The user `token` names for `audiences` (TokenReview's question), or
    /// why it names none.
    pub fn authenticate_token(
        &self,
        store: &Store,
        token: &str,
        audiences: &[String],
    ) -> Result<Arc<UserInfo>, String> {
        if same(token.as_bytes(), self.admin_token.as_bytes()) {
            return Ok(Auth::admin());
        }
        if let Some(user) = self.static_tokens.get(token) {
            return Ok(Arc::new(authenticated(user.clone())));
        }
        let now = store.clock().now().as_second();
        let verified = self.verified(token)?;
        let claims = &verified.claims;
        tokens::check(claims, now, audiences).map_err(|e| e.to_string())?;
        let bound = &claims.kubernetes;
        // Read before the objects: a write after this read is seen next time.
        let writes = self.bound_writes(bound) + 1;
        if verified.live_at.load(Ordering::Acquire) == writes {
            return Ok(verified.user.clone());
        }
        let live = |plural: &str, name: &str, uid: &str| {
            store
                .get(&key("", plural), &bound.namespace, name)
                .is_some_and(|o| o.uid.is(uid))
        };
        let sa = &bound.serviceaccount;
        if !live("serviceaccounts", &sa.name, &sa.uid) {
            return Err(format!(
                "{}: serviceaccounts \"{}\" not found or replaced",
                TokenError::Invalid,
                sa.name
            ));
        }
        if let Some(pod) = &bound.pod
            && !live("pods", &pod.name, &pod.uid)
        {
            return Err(format!(
                "{}: pods \"{}\" not found or replaced",
                TokenError::Invalid,
                pod.name
            ));
        }
        verified.live_at.store(writes, Ordering::Release);
        Ok(verified.user.clone())
    }

    /// A count that grows with every write to the objects a token is bound
    /// to: its ServiceAccount's kind, and its Pod's when it has one.
    fn bound_writes(&self, bound: &tokens::Bound) -> u64 {
        let pods = match bound.pod {
            Some(_) => self.pod_writes.load(Ordering::Acquire),
            None => 0,
        };
        self.account_writes.load(Ordering::Acquire) + pods
    }

    /// The claims of `token` if this server signed it, and the user they
    /// name (remembered: the signature is verified once).
    fn verified(&self, token: &str) -> Result<Arc<Verified>, String> {
        let known = {
            let v = self.verified.lock().unwrap_or_else(|e| e.into_inner());
            v.get(token).cloned()
        };
        if let Some(verified) = known {
            return Ok(verified);
        }
        // Verified without the lock: other requests need not wait.
        let claims = self.signer.claims(token).map_err(|e| e.to_string())?;
        let verified = Arc::new(Verified {
            user: Arc::new(account_user(&claims)),
            claims,
            live_at: AtomicU64::new(0),
        });
        let mut all = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if all.len() >= VERIFIED_TOKENS {
            all.clear();
        }
        all.insert(token.to_string(), verified.clone());
        Ok(verified)
    }

    /// Sign a ServiceAccount token (a TokenRequest's answer).
    #[must_use]
    pub fn issue(&self, claims: &tokens::Claims) -> String {
        self.signer.sign(claims)
    }

    /// Whether `user` may do what `attrs` says: a member of
    /// [`MASTERS`] may, with no reason given; under RBAC anyone else as
    /// their bindings say.
    pub fn authorize(&self, store: &Store, user: &UserInfo, attrs: &Attributes) -> Decision {
        match self.mode {
            AuthorizationMode::AlwaysAllow => Decision::Allow(String::new()),
            AuthorizationMode::Rbac if user.groups.iter().any(|g| g == MASTERS) => {
                Decision::Allow(String::new())
            }
            AuthorizationMode::Rbac => self.rbac(store).authorize(user, attrs),
        }
    }

    /// [`authorize`](Self::authorize)'s answer, its reason worded only
    /// when it denies (a request's check: an allowed request pays for no
    /// reason).
    pub fn allows(&self, store: &Store, user: &UserInfo, attrs: &Attributes) -> Result<(), String> {
        match self.mode {
            AuthorizationMode::AlwaysAllow => Ok(()),
            AuthorizationMode::Rbac if user.groups.iter().any(|g| g == MASTERS) => Ok(()),
            AuthorizationMode::Rbac => {
                let rbac = self.rbac(store);
                if rbac.allows(user, attrs) {
                    return Ok(());
                }
                match rbac.authorize(user, attrs) {
                    Decision::Allow(_) => Ok(()),
                    Decision::Deny(reason) => Err(reason),
                }
            }
        }
    }

    /// The RBAC snapshot of the cluster now (rebuilt after an RBAC write).
    pub fn rbac(&self, store: &Store) -> Arc<Rbac> {
        let writes = self.rbac_writes.load(Ordering::Acquire);
        let mut cached = self.rbac.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, rbac)) = cached.as_ref()
            && *at == writes
        {
            return rbac.clone();
        }
        let all = |plural: &str| -> Vec<Value> {
            store
                .list(
                    &key("rbac.authorization.k8s.io", plural),
                    None,
                    None,
                    None,
                    |_| true,
                )
                .items
                .iter()
                .map(|o| o.value())
                .collect()
        };
        let rbac = Arc::new(Rbac::new(
            &all("roles"),
            &all("clusterroles"),
            &all("rolebindings"),
            &all("clusterrolebindings"),
        ));
        *cached = Some((writes, rbac.clone()));
        rbac
    }
}

/// `a == b`, in time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn key(group: &str, plural: &str) -> StorageKey {
    StorageKey {
        group: group.into(),
        plural: plural.into(),
    }
}

/// `user` with the group every authenticated user has.
fn authenticated(mut user: UserInfo) -> UserInfo {
    if !user.groups.iter().any(|g| g == "system:authenticated") {
        user.groups.push("system:authenticated".into());
    }
    user
}

/// The user of a request without credentials.
#[must_use]
pub fn anonymous() -> UserInfo {
    UserInfo {
        name: "system:anonymous".into(),
        uid: String::new(),
        groups: vec!["system:unauthenticated".into()],
        extra: Default::default(),
    }
}
