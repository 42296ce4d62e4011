//! Routing: from a client model name to a successful upstream dispatch, or to an error that
//! says why for every target.

pub mod dispatch;
pub mod last_resort;
pub mod limit_reset;
pub mod multi_call;
pub mod observe;
pub mod pipeline;
pub mod quota_share;
pub mod relay;
pub mod report;
pub mod select;
pub mod terminal;
pub mod translation;

pub use dispatch::{RouteRequest, Routed, RoutedBody, SideCall, route, with_side_usage};
pub use pipeline::Permits;

#[cfg(test)]
mod tests;
