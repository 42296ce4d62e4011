//! Which connections are reserved for exclusive session leases, derived once from the config.
//!
//! Why here and not in `leases`: connection eligibility (the request path's selection) reads
//! it on every request, and it is plain data derived from the config, like the handles.

use std::collections::BTreeSet;
use std::sync::Arc;

use switchyard_shared::config::{Config, SCOPE_LEASE_EXCLUSIVE};

/// What the config says about leases, computed once per runtime.
#[derive(Debug, Clone, Default)]
pub struct LeasePolicy {
    /// Connections listed by any `lease:exclusive` key: only leased requests may use them.
    managed: BTreeSet<Arc<str>>,
    /// The same set as a list, for looking up an owner's lease in one store round trip.
    managed_list: Vec<String>,
}

impl LeasePolicy {
    pub fn from_config(config: &Config) -> Self {
        let managed: BTreeSet<Arc<str>> = config
            .api_keys
            .iter()
            .filter(|k| k.scopes.iter().any(|s| s == SCOPE_LEASE_EXCLUSIVE))
            .flat_map(|k| k.allowed_connections.iter())
            .map(|c| Arc::from(c.as_str()))
            .collect();
        let managed_list = managed.iter().map(|c| c.to_string()).collect();
        Self {
            managed,
            managed_list,
        }
    }

    /// Whether ordinary (non-leased) routing must leave this connection alone.
    pub fn is_managed(&self, connection: &str) -> bool {
        !self.managed.is_empty() && self.managed.contains(connection)
    }

    /// Every managed connection id.
    pub fn managed(&self) -> &[String] {
        &self.managed_list
    }
}
