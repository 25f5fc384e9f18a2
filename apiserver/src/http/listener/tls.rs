//! HTTPS when asked: a certificate authority and a serving certificate
//! made at start (for `localhost`, `127.0.0.1`, `::1` and the listen
//! address), served over TLS 1.2/1.3 with HTTP/1.1. Clients trust the CA
//! from the kubeconfig the server writes (`certificate-authority-data`),
//! as kind's and envtest's kubeconfigs carry theirs. kubectl (client-go)
//! sends credentials — tokens, impersonation — only over TLS. A client may
//! present a certificate the CA signed ([`Ca::client_certificate`]): it is
//! then the user its subject names ([`certificate_user`]: CN the user, each
//! O a group), as kube-apiserver's `--client-ca-file` authenticates.

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, pki_types};

/// Why the server's certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen could not make a key or a certificate.
    #[error("making the server's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused them.
    #[error("configuring TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// rustls refused the CA as the root of client certificates.
    #[error("configuring client certificates: {0}")]
    ClientVerifier(#[from] rustls::server::VerifierBuilderError),
}

/// The server's certificate authority: it signs the serving certificate
/// and the client certificates [`Ca::client_certificate`] hands out, and
/// the HTTPS listener accepts client certificates it signed. Its
/// certificate is what every namespace's `kube-root-ca.crt` ConfigMap
/// holds.
#[derive(Clone)]
pub struct Ca {
    issuer: Arc<CertifiedIssuer<'static, KeyPair>>,
    pem: Arc<str>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

/// A client certificate and its private key, both PEM: what a kubeconfig's
/// `client-certificate-data` and `client-key-data` carry (base64).
#[derive(Clone)]
pub struct ClientCertificate {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key (PKCS#8), PEM.
    pub key_pem: String,
}

impl std::fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertificate").finish_non_exhaustive()
    }
}

impl Ca {
    /// A fresh CA (`CN=ward-apiserver-ca`, an ECDSA P-256 key).
    pub fn generate() -> Result<Ca, TlsError> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "ward-apiserver-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
        Ok(Ca {
            pem: issuer.pem().into(),
            issuer: Arc::new(issuer),
        })
    }

    /// Its certificate, PEM.
    #[must_use]
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A client certificate it signs for `user` (the subject's CN) in
    /// `group` (its O), as kubeadm's and kind's admin certificates are
    /// made; the HTTPS listener authenticates a client presenting it as
    /// that user, in that group and `system:authenticated`.
    pub fn client_certificate(
        &self,
        user: &str,
        group: Option<&str>,
    ) -> Result<ClientCertificate, TlsError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, user);
        if let Some(group) = group {
            params
                .distinguished_name
                .push(DnType::OrganizationName, group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(ClientCertificate {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The acceptor serving the server's certificate, asking clients for
/// theirs (optional: a client without one authenticates otherwise).
#[derive(Clone)]
pub struct Tls {
    /// Accepts TLS connections with the serving certificate.
    pub acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// A certificate `ca` signs for `addr` (and localhost), served, and
    /// client certificates `ca` signed accepted.
    pub fn generate(addr: SocketAddr, ca: &Ca) -> Result<Tls, TlsError> {
        let mut names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        let ip = addr.ip().to_string();
        if !names.contains(&ip) && !addr.ip().is_unspecified() {
            names.push(ip);
        }
        let mut serving = CertificateParams::new(names)?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "ward-apiserver");
        let key = KeyPair::generate()?;
        let cert = serving.signed_by(&key, &ca.issuer)?;
        let chain = vec![cert.der().clone(), ca.issuer.der().clone()];
        let key = pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.issuer.der().clone())?;
        let clients = WebPkiClientVerifier::builder_with_provider(roots.into(), provider.clone())
            .allow_unauthenticated()
            .build()?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(clients)
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// The user a client certificate names, as kube-apiserver's x509
/// authenticator reads it: the subject's CommonName is the user, each
/// Organization a group. None when the certificate does not parse or has
/// no CommonName (rustls has already verified it chains to the CA).
#[must_use]
pub fn certificate_user(der: &[u8]) -> Option<(String, Vec<String>)> {
    const CN: &[u64] = &[2, 5, 4, 3];
    const O: &[u64] = &[2, 5, 4, 10];
    let subject = crate::machinery::certificate::tbs_elements(der)?
        .into_iter()
        .nth(crate::machinery::certificate::SUBJECT)?;
    let mut attributes = Vec::new();
    yasna::parse_der(&subject, |r| {
        r.read_sequence_of(|r| {
            r.read_set_of(|r| {
                r.read_sequence(|r| {
                    let oid = r.next().read_oid()?;
                    let value = r.next().read_tagged_der()?;
                    attributes.push((oid, value.value().to_vec()));
                    Ok(())
                })
            })
        })
    })
    .ok()?;
    let text = |v: &[u8]| String::from_utf8(v.to_vec()).ok();
    let user = attributes
        .iter()
        .find(|(oid, _)| oid.components().as_slice() == CN)
        .and_then(|(_, v)| text(v))?;
    let groups = attributes
        .iter()
        .filter(|(oid, _)| oid.components().as_slice() == O)
        .filter_map(|(_, v)| text(v))
        .collect();
    Some((user, groups))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(pem: &str) -> Vec<u8> {
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    }

    #[test]
    fn a_client_certificate_names_its_user_by_cn_and_its_group_by_o() {
        let ca = Ca::generate().unwrap();
        let admin = ca
            .client_certificate("kind-admin", Some("system:masters"))
            .unwrap();
        assert_eq!(
            certificate_user(&der(&admin.cert_pem)),
            Some(("kind-admin".into(), vec!["system:masters".into()]))
        );
        let plain = ca.client_certificate("jane", None).unwrap();
        assert_eq!(
            certificate_user(&der(&plain.cert_pem)),
            Some(("jane".into(), vec![]))
        );
        // The CA's own certificate has a CN too; garbage has none.
        assert_eq!(
            certificate_user(&der(ca.pem())).map(|u| u.0),
            Some("ward-apiserver-ca".into())
        );
        assert_eq!(certificate_user(b"\x30\x03\x02\x01\x00"), None);
        assert_eq!(certificate_user(&[]), None);
    }
}
