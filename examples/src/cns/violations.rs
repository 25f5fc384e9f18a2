//! The CNS example's invariants by name, and the sink their violations go
//! to: what the kubelet (which checks I2 at every CNI ADD) and the checker
//! ([`super::invariants`]) both report into.

crate::journal::invariants! {
    "CNS":
    /// IP configs belong to NCs in state.
    I1 => "I1 (IP config of an NC not in state)",
    /// Requests succeed while IPs are Available.
    I2 => "I2 (request failed with IPs Available)",
    /// No IP assigned twice.
    I3 => "I3 (IP assigned to two pods)",
    /// The node recovers.
    I4 => "I4 (node never recovers)",
    /// No address leaks.
    I5 => "I5 (address held for no sandbox)",
}
