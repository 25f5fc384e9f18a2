//! FNV-1a, 64 bits: the workspace's one stable, non-cryptographic hash
//! (stream names, client ids, ETags, KEP-5866 shards), whole or fed in
//! pieces.

/// FNV-1a, 64 bits: a stable, non-cryptographic hash of `bytes`.
#[must_use]
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::default();
    h.write_bytes(bytes);
    h.finish()
}

/// [`fnv1a`] fed in pieces, or written to with `write!` (the hash of a
/// value's `Display` text, without building the string).
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    /// The offset basis: the hash of nothing.
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Hash `bytes` after what was hashed so far.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        self.0 = bytes.iter().fold(self.0, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    }

    /// The hash of everything written.
    #[must_use]
    pub fn finish(self) -> u64 {
        self.0
    }
}

impl std::fmt::Write for Fnv1a {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.write_bytes(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(super::fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(super::fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fnv1a_in_pieces_and_through_write_is_the_same_hash() {
        use std::fmt::Write;
        let mut h = super::Fnv1a::default();
        h.write_bytes(b"foo");
        write!(h, "{}", 7).unwrap();
        assert_eq!(h.finish(), super::fnv1a(b"foo7"));
    }
}
