//! The management API on the admin listener (`/api/*`).

pub mod store;
