//! The admin toolkit: what a node's management API and the coordinator's cluster API must
//! answer the same way, kept in one place so the two cannot drift apart.
//!
//! - [`error`]: the error envelope, `{"error": {"message", "type", "code", "details"?}}` with a
//!   matching status, so tooling written against a node works against the coordinator;
//! - [`auth`]: the management-key check (SHA-256 digests compared in constant time, distinct
//!   answers for a missing, a wrong and a client key);
//! - [`body`]: strict JSON bodies (content type, size, unknown fields, the field to blame) and
//!   id checks;
//! - [`clear`]: validation of the cooldown- and lockout-clear request bodies;
//! - [`settings`]: validation of a settings patch and the list of fields it changes;
//! - [`routes`]: the 404/405 fallback answer for a list of route templates.
//!
//! Why pure: the node and the coordinator are both actix servers today, but nothing here
//! needs one. Each binary keeps a thin adapter (an extractor, a `ResponseError`) that hands
//! header values and body bytes in and turns an [`AdminError`] into its response type.

pub mod auth;
pub mod body;
pub mod clear;
pub mod error;
pub mod routes;
pub mod settings;

pub use error::{AdminError, FieldDetail};

/// Largest admin request body; a bigger one is refused with 413 before parsing.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Most ids one request may name (and most rows a list answer carries).
pub const MAX_IDS: usize = 1000;
