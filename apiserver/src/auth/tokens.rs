//! Bearer tokens: the static ones (kube-apiserver's `--token-auth-file`,
//! and the admin token the server's kubeconfigs carry) and ServiceAccount
//! tokens — JWTs signed ES256 with a key made at start, bound to the
//! ServiceAccount's uid and, when asked, a Pod's.

use std::collections::HashMap;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde::{Deserialize, Serialize};

use super::UserInfo;

/// The issuer (and default audience) of ServiceAccount tokens, as kind's
/// and kubeadm's clusters name it.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Why a token file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// A line is not `token,user,uid[,"group1,group2"]`.
    #[error("token file line {line}: {message}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Parse a static token file as kube-apiserver's `--token-auth-file`
/// reads it: CSV lines `token,user,uid`, optionally a fourth column of
/// groups (`"group1,group2"`, quoted when it holds commas). Blank lines
/// are skipped; a repeated token is an error.
pub fn parse_token_file(text: &str) -> Result<HashMap<String, UserInfo>, TokenFileError> {
    let mut out = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |message: &str| TokenFileError::Line {
            line: i + 1,
            message: message.to_string(),
        };
        let fields = csv_fields(line).ok_or_else(|| bad("unbalanced quotes"))?;
        if fields.len() < 3 {
            return Err(bad("want at least token, user name and uid"));
        }
        let (token, name, uid) = (&fields[0], &fields[1], &fields[2]);
        if token.is_empty() || name.is_empty() {
            return Err(bad("empty token or user name"));
        }
        let groups = fields
            .get(3)
            .map(|g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let user = UserInfo {
            name: name.clone(),
            uid: uid.clone(),
            groups,
            extra: Default::default(),
        };
        if out.insert(token.clone(), user).is_some() {
            return Err(bad("duplicate token"));
        }
    }
    Ok(out)
}

/// The fields of one CSV line (double quotes group, `""` is a quote).
fn csv_fields(line: &str) -> Option<Vec<String>> {
    let (mut fields, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur).trim().to_string()),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return None;
    }
    fields.push(cur.trim().to_string());
    Some(fields)
}

/// A fresh random token: 32 bytes from the system's generator, hex.
#[must_use]
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The system generator fails only where nothing could run.
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random generator works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The claims of a ServiceAccount token, as kube-apiserver writes them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// Not before.
    pub nbf: i64,
    /// Issuer.
    pub iss: String,
    /// Token id.
    pub jti: String,
    /// `system:serviceaccount:<namespace>:<name>`.
    pub sub: String,
    /// What the token is bound to.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: Bound,
}

/// The objects a token is bound to.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Bound {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount.
    pub serviceaccount: ObjectRef,
    /// The Pod, when the token was asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
}

/// A name and a uid.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ObjectRef {
    /// Name.
    pub name: String,
    /// Uid.
    pub uid: String,
}

/// Signs and verifies ServiceAccount tokens with one ES256 key.
pub struct Signer {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer { .. }")
    }
}

/// Why a ServiceAccount token is not accepted (kube-apiserver answers 401
/// whatever the reason; TokenReview reports it).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    /// Not a JWT this server signed (malformed, or another signature).
    #[error("invalid bearer token")]
    Invalid,
    /// Past its expiry (or not yet valid).
    #[error("invalid bearer token, token has expired")]
    Expired,
    /// None of its audiences is one the request accepts.
    #[error(
        "invalid bearer token, token audiences {0:?} is invalid for the target audiences {1:?}"
    )]
    Audience(Vec<String>, Vec<String>),
}

impl Signer {
    /// A signer with a fresh P-256 key.
    #[must_use]
    pub fn generate() -> Signer {
        let rng = SystemRandom::new();
        // Generating and parsing a P-256 key fails only without randomness.
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("the system random generator works");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("a key ring generated parses");
        Signer {
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
            decoding: DecodingKey::from_ec_der(pair.public_key().as_ref()),
        }
    }

    /// The signed token for `claims`.
    #[must_use]
    pub fn sign(&self, claims: &Claims) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::ES256), claims, &self.encoding)
            .expect("ES256 signing with a generated key works")
    }

    /// The claims of `token` if this signer signed it, it is valid at
    /// `now` (seconds since the epoch; the server's clock, not the
    /// machine's) and one of its audiences is in `audiences`.
    #[cfg(test)]
    pub(crate) fn verify(
        &self,
        token: &str,
        now: i64,
        audiences: &[String],
    ) -> Result<Claims, TokenError> {
        let claims = self.claims(token)?;
        check(&claims, now, audiences)?;
        Ok(claims)
    }

    /// The claims of `token` if this signer signed it (for this issuer),
    /// whatever its time and audiences ([`check`] those).
    pub fn claims(&self, token: &str) -> Result<Claims, TokenError> {
        let mut v = Validation::new(Algorithm::ES256);
        // Time and audience are checked by `check`, on the server's clock.
        v.validate_exp = false;
        v.validate_aud = false;
        v.required_spec_claims.clear();
        v.set_issuer(&[ISSUER]);
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &v)
            .map(|t| t.claims)
            .map_err(|_| TokenError::Invalid)
    }
}

/// Whether `claims` are valid at `now` (seconds since the epoch) for one
/// of `audiences`.
pub fn check(claims: &Claims, now: i64, audiences: &[String]) -> Result<(), TokenError> {
    if now >= claims.exp || now < claims.nbf {
        return Err(TokenError::Expired);
    }
    if !claims.aud.iter().any(|a| audiences.contains(a)) {
        return Err(TokenError::Audience(claims.aud.clone(), audiences.to_vec()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: i64) -> Claims {
        Claims {
            aud: vec![ISSUER.into()],
            exp,
            iat: 100,
            nbf: 100,
            iss: ISSUER.into(),
            jti: "j".into(),
            sub: "system:serviceaccount:ns:sa".into(),
            kubernetes: Bound {
                namespace: "ns".into(),
                serviceaccount: ObjectRef {
                    name: "sa".into(),
                    uid: "u".into(),
                },
                pod: None,
            },
        }
    }

    #[test]
    fn tokens_verify_only_with_their_signer_in_time_and_for_their_audience() {
        let (signer, other) = (Signer::generate(), Signer::generate());
        let token = signer.sign(&claims(1000));
        let aud = [ISSUER.to_string()];
        assert_eq!(signer.verify(&token, 500, &aud).unwrap(), claims(1000));
        assert_eq!(other.verify(&token, 500, &aud), Err(TokenError::Invalid));
        assert_eq!(signer.verify(&token, 1000, &aud), Err(TokenError::Expired));
        assert_eq!(signer.verify(&token, 99, &aud), Err(TokenError::Expired));
        assert!(matches!(
            signer.verify(&token, 500, &["vault".to_string()]),
            Err(TokenError::Audience(..))
        ));
        assert_eq!(
            signer.verify("not.a.jwt", 500, &aud),
            Err(TokenError::Invalid)
        );
        let mut tampered = token.clone();
        tampered.insert(tampered.len() / 2, 'x');
        assert_eq!(
            signer.verify(&tampered, 500, &aud),
            Err(TokenError::Invalid)
        );
    }

    #[test]
    fn token_files_read_as_kube_apiserver_reads_them() {
        let users =
            parse_token_file("t1,alice,u1\n\n t2 , bob , u2 , \"dev,ops\"\nt3,carol,u3,solo\n")
                .unwrap();
        assert_eq!(users["t1"].name, "alice");
        assert!(users["t1"].groups.is_empty());
        assert_eq!(users["t2"].groups, ["dev", "ops"]);
        assert_eq!(users["t3"].groups, ["solo"]);
        let err = |text: &str| parse_token_file(text).unwrap_err().to_string();
        assert_eq!(
            err("t1,alice"),
            "token file line 1: want at least token, user name and uid"
        );
        assert_eq!(err("a,b,c\na,d,e"), "token file line 2: duplicate token");
        assert_eq!(err("a,b,c,\"x"), "token file line 1: unbalanced quotes");
        assert_eq!(err(",b,c"), "token file line 1: empty token or user name");
    }
}
