//! Ward: the guarded reconcile loop. Nothing is public yet: the `Guard` trait, the
//! guarded controller, identity, metrics and leader election land with issue #4.
