//! What a webhook's `caBundle` trusts, as Go's `crypto/x509` decides it:
//! a chain to one of its certificates, or the server's certificate itself
//! when the bundle holds it. envtest writes the webhook server's own
//! certificate as the `caBundle` of every webhook configuration it
//! installs; kube-apiserver trusts it, and so does ward-apiserver.
//! rustls' WebPKI verifier only trusts a certificate's issuers, so a
//! certificate found in the bundle is checked here instead: its names
//! and its validity period (its signature on the handshake, as always).

use std::sync::Arc;

use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::client::{WebPkiServerVerifier, verify_server_name};
use tokio_rustls::rustls::crypto::{
    CryptoProvider, verify_tls12_signature, verify_tls13_signature,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::server::ParsedCertificate;
use tokio_rustls::rustls::{
    self, CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

/// A caBundle's trust: WebPKI chains, and the bundle's own certificates
/// as servers' certificates.
#[derive(Debug)]
pub(super) struct Bundle {
    /// None for an empty bundle: no chain is trusted.
    chains: Option<Arc<WebPkiServerVerifier>>,
    certificates: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl Bundle {
    /// The trust of `certificates` (a caBundle's, parsed).
    pub(super) fn new(
        certificates: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Bundle, String> {
        let mut roots = RootCertStore::empty();
        for cert in &certificates {
            roots
                .add(cert.clone())
                .map_err(|e| format!("invalid caBundle: {e}"))?;
        }
        let chains = if certificates.is_empty() {
            None
        } else {
            let builder =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            Some(
                builder
                    .build()
                    .map_err(|e| format!("invalid caBundle: {e}"))?,
            )
        };
        Ok(Bundle {
            chains,
            certificates,
            provider,
        })
    }
}

impl ServerCertVerifier for Bundle {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let chained = match &self.chains {
            Some(chains) => chains.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ),
            None => Err(CertificateError::UnknownIssuer.into()),
        };
        match chained {
            Err(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer))
                if self.certificates.iter().any(|c| c == end_entity) =>
            {
                verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
                match validity(end_entity) {
                    Some((from, until)) if (from..=until).contains(&now.as_secs()) => {
                        Ok(ServerCertVerified::assertion())
                    }
                    Some(_) => Err(CertificateError::Expired.into()),
                    None => Err(CertificateError::BadEncoding.into()),
                }
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A certificate's validity period (notBefore, notAfter) in Unix seconds.
fn validity(der: &[u8]) -> Option<(u64, u64)> {
    use yasna::tags::{TAG_GENERALIZEDTIME, TAG_UTCTIME};
    let validity = crate::machinery::certificate::tbs_elements(der)?
        .into_iter()
        .nth(crate::machinery::certificate::VALIDITY)?;
    let seconds = |t: i64| u64::try_from(t).ok();
    yasna::parse_der(&validity, |r| {
        r.read_sequence(|r| {
            let mut time = || -> yasna::ASN1Result<i64> {
                let r = r.next();
                if r.lookahead_tag()? == TAG_UTCTIME {
                    Ok(r.read_utctime()?.datetime().unix_timestamp())
                } else if r.lookahead_tag()? == TAG_GENERALIZEDTIME {
                    Ok(r.read_generalized_time()?.datetime().unix_timestamp())
                } else {
                    Err(yasna::ASN1Error::new(yasna::ASN1ErrorKind::Invalid))
                }
            };
            Ok((time()?, time()?))
        })
    })
    .ok()
    .and_then(|(from, until)| Some((seconds(from)?, seconds(until)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(days: (i32, i32)) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let now = rcgen::date_time_ymd(2026, 12, 7);
        params.not_before = now + time_days(days.0);
        params.not_after = now + time_days(days.1);
        let key = rcgen::KeyPair::generate().unwrap();
        // Signed by a CA of another name: no chain to anything in a bundle.
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "envtest-environment");
        let ca = rcgen::Issuer::new(ca, ca_key);
        params.signed_by(&key, &ca).unwrap().der().clone()
    }

    fn time_days(d: i32) -> std::time::Duration {
        std::time::Duration::from_secs(86_400 * d.unsigned_abs() as u64)
    }

    fn at(y: i32, m: u8, d: u8) -> UnixTime {
        let t = rcgen::date_time_ymd(y, m, d).unix_timestamp();
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(t as u64))
    }

    #[test]
    fn a_server_certificate_in_the_bundle_is_trusted_for_its_names_and_period() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let leaf = certificate((0, 7));
        let bundle = Bundle::new(vec![leaf.clone()], provider.clone()).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let during = at(2026, 12, 8);
        assert!(
            bundle
                .verify_server_cert(&leaf, &[], &name, &[], during)
                .is_ok()
        );
        // Another name, another period, another certificate: refused.
        let other = ServerName::try_from("example.com").unwrap();
        assert!(
            bundle
                .verify_server_cert(&leaf, &[], &other, &[], during)
                .is_err()
        );
        let after = at(2027, 1, 1);
        assert!(matches!(
            bundle.verify_server_cert(&leaf, &[], &name, &[], after),
            Err(rustls::Error::InvalidCertificate(
                CertificateError::Expired | CertificateError::ExpiredContext { .. }
            ))
        ));
        let stranger = certificate((0, 7));
        assert!(matches!(
            bundle.verify_server_cert(&stranger, &[], &name, &[], during),
            Err(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer
            ))
        ));
    }
}
