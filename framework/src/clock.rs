//! The clock: Ward's one wall clock that follows tokio's (see
//! [`ward_base::clock`]), the same type ward-apiserver stamps objects with,
//! so guards comparing ages against grace bounds behave the same under
//! `#[tokio::test(start_paused = true)]` as in production.

pub use ward_base::clock::{Clock, format_time};
