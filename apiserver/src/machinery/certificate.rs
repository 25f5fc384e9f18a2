//! The fields of an X.509 certificate the server reads itself, with yasna
//! (the DER reader rcgen already links): a client certificate's subject,
//! a webhook certificate's validity period.

/// The untagged elements of `der`'s tbsCertificate, in order (the tagged
/// ones, version, unique ids and extensions, left out): serialNumber,
/// signature, issuer, validity, subject, subjectPublicKeyInfo. None when
/// `der` is not a certificate.
#[must_use]
pub fn tbs_elements(der: &[u8]) -> Option<Vec<Vec<u8>>> {
    let tbs = yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            let tbs = r.next().read_der()?;
            // signatureAlgorithm, signatureValue
            r.next().read_der()?;
            r.next().read_der()?;
            Ok(tbs)
        })
    })
    .ok()?;
    yasna::parse_der(&tbs, |r| {
        r.read_sequence(|r| {
            let mut untagged = Vec::new();
            while let Some(element) = r.read_optional(|r| r.read_der())? {
                // Context-specific tags (version, unique ids, extensions).
                if element.first().is_some_and(|t| t & 0xc0 != 0x80) {
                    untagged.push(element);
                }
            }
            Ok(untagged)
        })
    })
    .ok()
}

/// The index of the validity in [`tbs_elements`].
pub const VALIDITY: usize = 3;
/// The index of the subject in [`tbs_elements`].
pub const SUBJECT: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_has_its_elements_and_other_bytes_none() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["x".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let elements = tbs_elements(cert.der()).unwrap();
        assert_eq!(elements.len(), 6);
        assert!(tbs_elements(b"not a certificate").is_none());
    }
}
