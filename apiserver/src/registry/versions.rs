//! How Kubernetes orders API versions.

/// Kubernetes version ordering (`CompareKubeAwareVersionStrings`): GA >
/// beta > alpha, higher numbers first; a version of another form below.
#[must_use]
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (level, n) = if tail.is_empty() {
        (3, 0)
    } else if let Some(b) = tail.strip_prefix("beta") {
        (2, b.parse().unwrap_or(0))
    } else if let Some(a) = tail.strip_prefix("alpha") {
        (1, a.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (level, major, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ga_then_beta_then_alpha() {
        let mut v = vec!["v1alpha1", "v1", "v2beta1", "v1beta1", "other"];
        v.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(v, ["v1", "v2beta1", "v1beta1", "v1alpha1", "other"]);
    }
}
