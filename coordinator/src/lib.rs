//! # switchyard-coordinator
//!
//! The cluster view of a Switchyard deployment: one place to ask "is the cluster healthy,
//! which providers are open, which keys are cooling, who holds leases", and to act on the
//! answer once instead of per pod. It reads the shared state nodes keep in Redis and their
//! heartbeats; it never sits on the request path, so a coordinator outage costs operators
//! their view, never a client request.
//!
//! - [`read`]: the state out of Redis in a few pipelines; [`health`]: the pure status rules
//!   and the health document; [`feed`]: recent events from the pub/sub channel.
//! - [`actions`]: cluster-wide operator actions through Redis, announced on the channel.
//! - [`leader`] and [`janitor`]: one replica holds a fenced leader lease and cleans up after
//!   dead nodes; the others stand by.
//! - [`history`]: per-provider rates over the last 15 minutes, sampled from the nodes'
//!   metrics, for the dashboard's charts.
//! - [`http`]: the listener (probes, metrics, `/api/cluster/*`, the [`dashboard`], the
//!   [`openapi`] document);
//!   [`status`]: the `status` command's terminal table.

pub mod actions;
pub mod auth;
pub mod config;
pub mod dashboard;
pub mod entry;
pub mod error;
pub mod feed;
pub mod health;
pub mod history;
pub mod http;
pub mod janitor;
pub mod leader;
pub mod leadership;
pub mod metrics;
pub mod node_state;
pub mod openapi;
pub mod read;
pub mod rows;
pub mod sampler;
pub mod scan;
pub mod server;
pub mod service;
pub mod settings_action;
pub mod status;
pub mod usage;
