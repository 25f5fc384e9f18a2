//! What runs inside the server besides requests, as a cluster's
//! controllers would: the garbage collector, the pod stages kubelet and
//! the scheduler would drive, and Services' IP and port allocation.

pub mod alloc;
pub mod gc;
pub mod pods;
