//! What a failed write means: a conflict to re-decide on, or an error.

use super::error::GENERIC_INVALID_PATCH;

/// What a failed write means to the retry loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// 409, or a 422 naming one of our tested paths: re-read and re-decide.
    Conflict,
    /// 422 with kube-apiserver's detail-less patch message: a conflict only
    /// if a re-read shows one of our tests failing.
    MaybeConflict,
    /// 404: the object is gone.
    NotFound,
    /// Anything else (validation, auth, server errors): not retried here.
    Other,
}

/// Classify `err` from a write whose patch tested `tested` paths.
///
/// ward-apiserver (and the Go json-patch library) name the failed test:
/// `testing value /metadata/resourceVersion failed: test failed`, or `test
/// operation does not apply: is missing path: /x`. A real kube-apiserver
/// drops that detail and answers [`GENERIC_INVALID_PATCH`].
#[must_use]
pub fn classify(err: &kube::Error, tested: &[String]) -> ErrorClass {
    let kube::Error::Api(status) = err else {
        return ErrorClass::Other;
    };
    match status.code {
        409 => ErrorClass::Conflict,
        404 => ErrorClass::NotFound,
        422 if tested.iter().any(|p| names_failed_test(&status.message, p)) => ErrorClass::Conflict,
        422 if status.message.trim() == GENERIC_INVALID_PATCH => ErrorClass::MaybeConflict,
        _ => ErrorClass::Other,
    }
}

fn names_failed_test(msg: &str, path: &str) -> bool {
    // Old kube-apiservers (json-patch v1) capitalise "Testing".
    if ["testing", "Testing"]
        .iter()
        .any(|t| msg.contains(&format!("{t} value {path} failed")))
    {
        return true;
    }
    let needle = format!("is missing path: {path}");
    msg.match_indices(&needle).any(|(i, _)| {
        msg[i + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| matches!(c, ':' | ' ' | '"' | ',' | '\n'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn conflict_classification() {
        use ErrorClass::*;
        let tested = ["/metadata/resourceVersion", "/data/47"].map(String::from);
        let modified = "Operation cannot be fulfilled on configmaps \"pool\": the object has been modified; please apply your changes to the latest version and try again";
        #[rustfmt::skip]
        let rows = [
            (409, modified, Conflict),
            (409, "Precondition failed: UID in precondition: a, UID in object meta: b", Conflict),
            // ward-apiserver's text, and the Go json-patch library's.
            (422, "ConfigMap \"pool\" is invalid: testing value /metadata/resourceVersion failed: test failed", Conflict),
            (422, "testing value /data/47 failed: test failed", Conflict),
            (500, "Testing value /metadata/resourceVersion failed", Other),
            (422, "Testing value /metadata/resourceVersion failed", Conflict),
            (422, "test operation does not apply: is missing path: /data/47: missing value", Conflict),
            // Not one of our tests: a prefix of a tested path, another path.
            (422, "test operation does not apply: is missing path: /data/4: missing value", Other),
            (422, "testing value /data/48 failed: test failed", Other),
            // Other 422s: a failed remove, validation.
            (422, "ConfigMap \"pool\" is invalid: unable to remove nonexistent key: /data/46: missing value", Other),
            (422, "ConfigMap \"pool\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters", Other),
            // kube-apiserver's detail-less answer needs a re-read.
            (422, GENERIC_INVALID_PATCH, MaybeConflict),
            (404, "configmaps \"pool\" not found", NotFound),
            (500, "testing value /data/47 failed", Other),
            (429, "slow down", Other),
        ];
        for (code, msg, want) in rows {
            let err = kube::Error::Api(Status::failure(msg, "").with_code(code).boxed());
            assert_eq!(classify(&err, &tested), want, "{code} {msg}");
        }
    }
}
