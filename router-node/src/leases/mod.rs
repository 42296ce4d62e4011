//! Exclusive session leases (a hard pin with fencing).
//!
//! Why: an agent that keeps a provider-side session (a prompt cache, a sandbox, a stateful
//! conversation) needs every request of that session to reach the same credential and nobody
//! else's requests to reach it meanwhile. A soft affinity pin cannot promise that; a lease can,
//! and a fence makes the promise hold even when a holder stalls past its TTL: every dispatch
//! first checks that the caller's generation is still the live one.
//!
//! - [`policy`]: the pure rules (token and generation formats, which lease is the owner's,
//!   `Retry-After` clamping, the acquire plan).
//! - [`backend`]: the two stores behind one set of operations — the in-process table in
//!   embedded mode and the Lua scripts in Redis in cluster mode. With Redis unreachable every
//!   operation fails, and callers fail **closed** (503 `LEASE_SERVICE_UNAVAILABLE`).
//! - `POST /api/v1/session-leases` (acquire, renew, release) is served by
//!   [`crate::http::leases`].
//! - [`fence`]: the inference side: the lease headers become a [`LeaseClaim`] at ingress, and
//!   the claim is fenced right before every upstream dispatch.
//! - [`moves`]: when the leased connection becomes ineligible (cooling, terminal, locked out
//!   for the model, failed in this request), the lease moves to another free eligible
//!   connection of the key with the same generation, in one store step.
//! - [`errors`]: the `lease_error` bodies clients see.
//!
//! The owner token is a secret of the client: it is kept only as its SHA-256 by the store,
//! never logged, never echoed, never forwarded upstream (the node forwards an allow-list of
//! headers only) and redacted from `Debug` output.

pub mod backend;
pub mod errors;
pub mod fence;
pub mod moves;
pub mod policy;

use std::sync::{Arc, Mutex};

pub use crate::state::LeasePolicy;

/// The header that carries the client's lease owner token.
pub const OWNER_HEADER: &str = "x-switchyard-lease-owner";
/// The header that carries the lease generation on inference requests.
pub const GENERATION_HEADER: &str = "x-switchyard-lease-generation";

/// A leased inference request: who claims which lease. Built at ingress, fenced before every
/// dispatch.
#[derive(Clone)]
pub struct LeaseClaim {
    /// The client's owner token (a secret; see the module docs).
    pub owner_token: String,
    pub generation: u64,
    /// The authenticated key that holds the lease.
    pub api_key_id: String,
    /// Where the lease is: its connection when the request arrived, or where this request
    /// moved it. Shared by the request's clones, since a move is the request's, not a copy's.
    seat: Arc<Mutex<Seat>>,
}

#[derive(Debug)]
struct Seat {
    connection: String,
    moves: u32,
}

impl LeaseClaim {
    pub fn new(
        owner_token: String,
        generation: u64,
        connection: String,
        api_key_id: String,
    ) -> Self {
        Self {
            owner_token,
            generation,
            api_key_id,
            seat: Arc::new(Mutex::new(Seat {
                connection,
                moves: 0,
            })),
        }
    }

    /// The connection the lease is on, as far as this request knows.
    pub fn connection(&self) -> String {
        self.with_seat(|s| s.connection.clone())
    }

    /// How many times this request moved its lease.
    pub fn moves(&self) -> u32 {
        self.with_seat(|s| s.moves)
    }

    /// Records that the store moved the lease to `connection`.
    fn moved_to(&self, connection: &str) {
        self.with_seat(|s| {
            s.connection = connection.to_owned();
            s.moves += 1;
        });
    }

    fn with_seat<T>(&self, f: impl FnOnce(&mut Seat) -> T) -> T {
        // A poisoned seat only means a panic elsewhere while holding it; its fields are
        // written in one assignment each, so they are still whole.
        let mut seat = self
            .seat
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut seat)
    }
}

impl std::fmt::Debug for LeaseClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseClaim")
            .field("owner_token", &"<redacted>")
            .field("generation", &self.generation)
            .field("connection", &self.connection())
            .field("api_key_id", &self.api_key_id)
            .finish()
    }
}
