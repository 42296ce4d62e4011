//! The persisted layer of the resilience settings: what `PATCH /api/resilience` accumulated.
//!
//! Operators expect a runtime change to survive a restart, so every accepted patch is merged
//! into one [`Persisted`] document. In embedded mode that document is a JSON file in the
//! directory named by `SWITCHYARD_STATE_DIR` (written to a temporary file, flushed, then
//! renamed, so a crash never leaves half a file); without that variable the layer lives in
//! memory only, and the API says so instead of pretending. [`SettingsStore::load`] reads the
//! file when the runtime is built, before the effective settings are computed.
//!
//! Readers (`GET /api/resilience`) load an `ArcSwap` and never wait; writers take an async
//! mutex so two concurrent patches cannot lose each other's fields.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use switchyard_shared::settings::{EnvLayer, Persisted};

/// The environment variable naming the node's state directory.
pub const STATE_DIR_ENV: &str = "SWITCHYARD_STATE_DIR";
/// The settings file inside the state directory.
pub const SETTINGS_FILE: &str = "resilience-settings.json";
/// The version of the file layout; a file with another version is ignored with a warning.
pub const FILE_VERSION: u32 = 1;

/// The settings file as stored.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    version: u32,
    resilience: Persisted,
}

/// The persisted settings layer and where it is kept.
pub struct SettingsStore {
    path: Option<PathBuf>,
    env: EnvLayer,
    persisted: ArcSwap<Persisted>,
    writer: tokio::sync::Mutex<()>,
}

/// How the persisted layer is kept, for API responses.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Persistence {
    /// `file` (survives a restart) or `memory` (lost on restart).
    pub mode: &'static str,
    pub durable: bool,
    /// Why the layer is not durable, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

impl SettingsStore {
    /// Reads the persisted layer from the state directory named by `env` (if any). A missing
    /// file is an empty layer; an unreadable or invalid one is ignored with a warning (the node
    /// still starts, on the lower layers) and is replaced by the next accepted patch.
    pub fn load(env: &dyn Fn(&str) -> Option<String>, env_layer: EnvLayer) -> (Self, Vec<String>) {
        let path = env(STATE_DIR_ENV)
            .filter(|dir| !dir.trim().is_empty())
            .map(|dir| Path::new(&dir).join(SETTINGS_FILE));
        let mut warnings = Vec::new();
        let persisted = match &path {
            Some(path) => read_file(path).unwrap_or_else(|message| {
                warnings.push(format!(
                    "{STATE_DIR_ENV}/{SETTINGS_FILE}: {message}; persisted settings ignored"
                ));
                Persisted::default()
            }),
            None => Persisted::default(),
        };
        let store = Self {
            path,
            env: env_layer,
            persisted: ArcSwap::from_pointee(persisted),
            writer: tokio::sync::Mutex::new(()),
        };
        (store, warnings)
    }

    /// A store without a state directory (memory only), for tests and tools.
    pub fn in_memory(env_layer: EnvLayer) -> Self {
        Self {
            path: None,
            env: env_layer,
            persisted: ArcSwap::from_pointee(Persisted::default()),
            writer: tokio::sync::Mutex::new(()),
        }
    }

    /// The environment layer the settings were built with.
    pub fn env(&self) -> &EnvLayer {
        &self.env
    }

    /// The current persisted layer.
    pub fn persisted(&self) -> Arc<Persisted> {
        self.persisted.load_full()
    }

    /// How the layer is kept.
    pub fn persistence(&self) -> Persistence {
        match self.path {
            Some(_) => Persistence {
                mode: "file",
                durable: true,
                reason: None,
            },
            None => Persistence {
                mode: "memory",
                durable: false,
                reason: Some("SWITCHYARD_STATE_DIR is not set: changes are lost on restart"),
            },
        }
    }

    /// Serialises writers: hold the guard from reading the layer to storing the new one.
    pub async fn lock_writer(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.writer.lock().await
    }

    /// Writes `next` to the state file (when there is one), off the async workers, then makes
    /// it the current layer. Nothing changes when the write fails.
    pub async fn store(&self, next: Persisted) -> std::io::Result<()> {
        if let Some(path) = self.path.clone() {
            let body = serde_json::to_vec_pretty(&StateFile {
                version: FILE_VERSION,
                resilience: next.clone(),
            })
            .map_err(std::io::Error::other)?;
            tokio::task::spawn_blocking(move || write_atomically(&path, &body))
                .await
                .map_err(std::io::Error::other)??;
        }
        self.persisted.store(Arc::new(next));
        Ok(())
    }
}

fn read_file(path: &Path) -> Result<Persisted, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Persisted::default()),
        Err(e) => return Err(format!("cannot read: {e}")),
    };
    let file: StateFile =
        serde_json::from_str(&text).map_err(|e| format!("not a valid settings file: {e}"))?;
    if file.version != FILE_VERSION {
        return Err(format!(
            "unsupported version {} (expected {FILE_VERSION})",
            file.version
        ));
    }
    Ok(file.resilience)
}

/// Temporary file, flush to disk, rename: readers see the old or the new file, never half.
fn write_atomically(path: &Path, body: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(body)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_shared::settings::SettingsPatch;

    fn env_with(dir: &Path) -> impl Fn(&str) -> Option<String> + '_ {
        move |k| (k == STATE_DIR_ENV).then(|| dir.to_string_lossy().into_owned())
    }

    #[tokio::test]
    async fn a_stored_layer_is_read_back_by_the_next_load() {
        let dir = tempfile::tempdir().unwrap();
        let (store, warnings) = SettingsStore::load(&env_with(dir.path()), EnvLayer::default());
        assert!(warnings.is_empty());
        assert!(store.persistence().durable);
        let patch =
            SettingsPatch::from_json(r#"{"provider_breaker":{"apikey":{"failure_threshold":3}}}"#)
                .unwrap();
        store.store(Persisted(patch.clone())).await.unwrap();
        let (again, warnings) = SettingsStore::load(&env_with(dir.path()), EnvLayer::default());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(again.persisted().0, patch);
    }

    #[test]
    fn a_broken_file_is_ignored_with_a_warning_and_no_dir_means_memory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SETTINGS_FILE), "{not json").unwrap();
        let (store, warnings) = SettingsStore::load(&env_with(dir.path()), EnvLayer::default());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(*store.persisted(), Persisted::default());
        let (memory, _) = SettingsStore::load(&|_| None, EnvLayer::default());
        assert!(!memory.persistence().durable);
        assert_eq!(memory.persistence().mode, "memory");
    }
}
