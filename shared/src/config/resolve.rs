//! Client model name → routing targets.
//!
//! A client sends `provider/model` (the bare `model` goes upstream), a combo name, or a bare model
//! id that exactly one provider lists (several → ambiguous, answered with the candidates). The
//! rules are applied once, when the config is loaded, into a [`ModelIndex`], so resolving a
//! request is one hash lookup and a few reference-count increments.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use super::{
    ComboOptions, ComboTarget, Config, ContextRelayOptions, FusionOptions, PipelineOptions,
    split_provider_model,
};
use crate::strategy::Strategy;

/// One routing target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub provider: Arc<str>,
    /// The bare model id sent upstream.
    pub model: Arc<str>,
    /// A combo target's pin to one connection.
    pub connection: Option<Arc<str>>,
    /// A combo target's weight ([`ComboTarget::DEFAULT_WEIGHT`] otherwise).
    pub weight: u32,
}

impl Target {
    fn direct(provider: &str, model: &str) -> Self {
        Self {
            provider: provider.into(),
            model: model.into(),
            connection: None,
            weight: ComboTarget::DEFAULT_WEIGHT,
        }
    }
}

/// A combo, ready to route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComboRoute {
    pub name: String,
    pub strategy: Strategy,
    pub options: ComboOptions,
    /// `[combos.fusion]` and `[combos.pipeline]` (read by those strategies only).
    pub fusion: FusionOptions,
    pub pipeline: PipelineOptions,
    /// `[combos.context_relay]` (read by `context-relay` only).
    pub context_relay: ContextRelayOptions,
    /// In file order; the combo's strategy orders them per request.
    pub targets: Vec<Target>,
}

/// What a client model name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// `provider/model`, or a bare model id that one provider lists.
    Direct(Target),
    /// A combo name.
    Combo(Arc<ComboRoute>),
}

impl Resolved {
    pub fn targets(&self) -> &[Target] {
        match self {
            Self::Direct(target) => std::slice::from_ref(target),
            Self::Combo(combo) => &combo.targets,
        }
    }
}

/// Why a client model name has no route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// A bare model id listed by several providers; `candidates` are `provider/model` names.
    Ambiguous {
        model: String,
        candidates: Vec<String>,
    },
    /// `provider/model` where the provider lists its models and this is not one of them.
    NotListed { provider: String, model: String },
    /// Nothing matches.
    Unknown { model: String },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ambiguous { model, candidates } => write!(
                f,
                "model `{model}` is served by several providers; use one of: {}",
                candidates.join(", ")
            ),
            Self::NotListed { provider, model } => {
                write!(f, "provider `{provider}` does not serve model `{model}`")
            }
            Self::Unknown { model } => write!(f, "unknown model `{model}`"),
        }
    }
}

impl std::error::Error for ResolveError {}

#[derive(Debug, Clone)]
enum Entry {
    Route(Resolved),
    Ambiguous(Vec<String>),
}

/// Every client-visible model name of a config, precomputed.
#[derive(Debug, Clone, Default)]
pub struct ModelIndex {
    entries: HashMap<String, Entry>,
    /// Providers with an empty `models` list (they pass any model through) → `true`.
    providers: HashMap<String, bool>,
}

impl ModelIndex {
    /// Builds the index. Later rules shadow earlier ones: a combo shadows a bare model id of the
    /// same name (an operator may define a combo to disambiguate it), and `provider/model` names
    /// shadow both (validation forbids combos in that name space anyway).
    pub fn build(config: &Config) -> Self {
        let mut entries = HashMap::new();

        let mut bare: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for provider in &config.providers {
            for model in &provider.models {
                bare.entry(model).or_default().push(&provider.id);
            }
        }
        for (model, providers) in bare {
            let entry = match providers.as_slice() {
                [provider] => Entry::Route(Resolved::Direct(Target::direct(provider, model))),
                _ => Entry::Ambiguous(providers.iter().map(|p| format!("{p}/{model}")).collect()),
            };
            entries.insert(model.to_owned(), entry);
        }

        for combo in &config.combos {
            let targets = combo
                .targets
                .iter()
                .filter_map(|target| {
                    let (provider, model) = target.split()?;
                    Some(Target {
                        provider: provider.into(),
                        model: model.into(),
                        connection: target.connection.as_deref().map(Arc::from),
                        weight: target.weight(),
                    })
                })
                .collect();
            let route = ComboRoute {
                name: combo.name.clone(),
                strategy: combo.strategy,
                options: combo.config,
                fusion: combo.fusion.clone(),
                pipeline: combo.pipeline.clone(),
                context_relay: combo.context_relay.clone(),
                targets,
            };
            entries.insert(
                combo.name.clone(),
                Entry::Route(Resolved::Combo(Arc::new(route))),
            );
        }

        let mut providers = HashMap::new();
        for provider in &config.providers {
            providers.insert(provider.id.clone(), provider.models.is_empty());
            for model in &provider.models {
                entries.insert(
                    format!("{}/{model}", provider.id),
                    Entry::Route(Resolved::Direct(Target::direct(&provider.id, model))),
                );
            }
        }

        Self { entries, providers }
    }

    /// Resolves a client model name.
    pub fn resolve(&self, client_model: &str) -> Result<Resolved, ResolveError> {
        match self.entries.get(client_model) {
            Some(Entry::Route(resolved)) => return Ok(resolved.clone()),
            Some(Entry::Ambiguous(candidates)) => {
                return Err(ResolveError::Ambiguous {
                    model: client_model.to_owned(),
                    candidates: candidates.clone(),
                });
            }
            None => {}
        }
        if let Some((provider, model)) = split_provider_model(client_model) {
            match self.providers.get(provider) {
                Some(true) => return Ok(Resolved::Direct(Target::direct(provider, model))),
                Some(false) => {
                    return Err(ResolveError::NotListed {
                        provider: provider.to_owned(),
                        model: model.to_owned(),
                    });
                }
                None => {}
            }
        }
        Err(ResolveError::Unknown {
            model: client_model.to_owned(),
        })
    }

    /// Every name a client may send that resolves (`provider/model` of listed models, unique
    /// bare ids and combo names), sorted; for `GET /v1/models`.
    pub fn client_models(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .entries
            .iter()
            .filter(|(_, entry)| matches!(entry, Entry::Route(_)))
            .map(|(name, _)| name.as_str())
            .collect();
        names.sort_unstable();
        names
    }
}

/// Resolves one name against a config. Builds a [`ModelIndex`] on every call: for the request
/// path, build the index once and call [`ModelIndex::resolve`].
pub fn resolve_model(config: &Config, client_model: &str) -> Result<Resolved, ResolveError> {
    ModelIndex::build(config).resolve(client_model)
}
