//! The HTTP edge: listeners, handlers, ingress checks, authentication and error envelopes.

pub mod admin_routes;
pub mod auth;
pub mod body;
pub mod client_routes;
pub mod count_tokens;
pub mod errors;
pub mod fallback;
pub mod ingress;
pub mod scrub;
pub mod server;
