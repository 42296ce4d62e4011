//! The client-facing vocabulary: wire formats and the error envelope, the parsed request
//! body, client keys, and scrubbing of secrets from text.
//!
//! Why a module of its own: the request path, the upstream client, the leases and the admin
//! API all speak it, and none of them may depend on the HTTP listeners (`http`), which sit at
//! the top of the node. These files depend on nothing else in the node.

pub mod auth;
pub mod body;
pub mod errors;
pub mod scrub;
