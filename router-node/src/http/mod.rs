//! The HTTP edge: body reading, authentication and error envelopes.

pub mod auth;
pub mod body;
pub mod errors;
