//! Requests: the one handler behind both transports (routing, verbs,
//! content types), the HTTP/1.1 and TLS listener, and what clients look
//! up (discovery and OpenAPI).

pub mod discovery;
pub mod handler;
pub mod listener;
pub mod openapi;
