//! HTTPS when asked: a certificate authority and a serving certificate
//! made at start (for `localhost`, `127.0.0.1`, `::1` and the listen
//! address), served over TLS 1.2/1.3 with HTTP/1.1. Clients trust the CA
//! from the kubeconfig the server writes (`certificate-authority-data`),
//! as kind's and envtest's kubeconfigs carry theirs. kubectl (client-go)
//! sends credentials — tokens, impersonation — only over TLS.

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use tokio_rustls::TlsAcceptor;
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
}

/// The server's CA and the acceptor serving with its certificate.
#[derive(Clone)]
pub struct Tls {
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// Accepts TLS connections with the serving certificate.
    pub acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// A fresh CA and a certificate it signs for `addr` (and localhost).
    pub fn generate(addr: SocketAddr) -> Result<Tls, TlsError> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "ward-apiserver-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
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
        let cert = serving.signed_by(&key, &ca)?;
        let chain = vec![cert.der().clone(), ca.der().clone()];
        let key = pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            ca_pem: ca.pem(),
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }
}
