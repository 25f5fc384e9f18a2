//! The clock: Ward's one wall clock that follows tokio's (see
//! [`ward_base::clock`]), shared with the framework so a test can hand the
//! same clock to the server ([`crate::ServerConfig::clock`]) and to its
//! controllers.

pub use ward_base::clock::{Clock, format_time, sleep_until_opt};
