//! The HTTP client the node talks to providers with, and what its responses are made of.
//!
//! Why a module of its own, at the bottom: the connection handles (`actors`) hold a client
//! and the provider handles a pre-parsed endpoint, while the attempt (`upstream`) and the
//! token-count forwarder (`http`) send with them. This module knows nothing of the node.

mod body;
mod client;
mod h2set;
mod idle;
mod io;
mod pooled;

pub use body::{DRAIN_MAX_BYTES, RespBody, TransportError};
pub use client::{BuildError, ClientSettings, UpstreamClient, build_client, build_client_with};
pub use switchyard_shared::endpoint::Endpoint;

#[cfg(test)]
pub(crate) use pooled::idle_ready;
#[cfg(test)]
pub(crate) mod test_wire;
#[cfg(test)]
mod tests;
