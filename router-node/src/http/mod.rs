//! The HTTP edge: listeners, handlers, ingress checks, authentication and error envelopes.

pub mod admin_routes;
pub mod client_routes;
pub mod count_tokens;
pub mod fallback;
pub mod ingress;
pub mod leases;
pub mod request_end;
mod seam_log;
pub mod seamed;
pub mod server;
pub mod trace;

// The client-facing vocabulary moved below the request path; kept reachable here for the
// listeners.
pub use crate::api::{auth, body, errors, scrub};
