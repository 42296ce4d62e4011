//! The runtime settings document (what `PATCH /api/resilience` changes), shared by all nodes.
//!
//! Why: an operator's change on one node must reach every node, and a node that missed the
//! event must find it on resync. One hash ([`KeySpace::settings`](super::KeySpace::settings)):
//! `version` (bumped atomically with each write; the highest wins) and `doc` (JSON, readable
//! with `redis-cli HGET <prefix>settings doc`). Nodes write with compare-and-set on the
//! version ([`RedisStore::settings_write_if`]), so two concurrent patches never silently
//! overwrite each other.

use std::sync::LazyLock;

use redis::{Script, Value};

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies::{array_of, int, opt_string, uint_or_zero};

static WRITE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/settings_write_v1.lua")));
static WRITE_CAS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/settings_write_cas_v1.lua")));

/// What a compare-and-set write of the settings did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsWrite {
    /// Stored with this new version.
    Written(u64),
    /// The stored version was not the expected one (another writer got there first): nothing
    /// was written; this is the stored version.
    Conflict(u64),
}

impl RedisStore {
    /// The stored `(version, doc)`, or `None` when nothing was ever written.
    pub async fn settings_read(&self) -> Result<Option<(u64, String)>, StoreError> {
        const CMD: &str = "settings_read";
        let key = self.keys().settings();
        let reply: Value = self
            .run(CMD, |mut con| async move {
                redis::cmd("HMGET")
                    .arg(key)
                    .arg("version")
                    .arg("doc")
                    .query_async(&mut con)
                    .await
            })
            .await?;
        let v = array_of(CMD, reply, 2)?;
        match opt_string(CMD, &v[1])? {
            Some(doc) => Ok(Some((uint_or_zero(CMD, &v[0])?, doc))),
            None => Ok(None),
        }
    }

    /// Stores `doc_json` and returns its new version (previous + 1).
    pub async fn settings_write(&self, doc_json: &str) -> Result<u64, StoreError> {
        const CMD: &str = "settings_write";
        let key = self.keys().settings();
        let doc = doc_json.to_owned();
        let reply: Value = self
            .run(CMD, |mut con| async move {
                WRITE.key(key).arg(doc).invoke_async(&mut con).await
            })
            .await?;
        uint_or_zero(CMD, &reply)
    }

    /// Stores `doc_json` only if the stored version is `expected` (0: nothing stored yet).
    pub async fn settings_write_if(
        &self,
        expected: u64,
        doc_json: &str,
    ) -> Result<SettingsWrite, StoreError> {
        const CMD: &str = "settings_write_if";
        let key = self.keys().settings();
        let doc = doc_json.to_owned();
        let reply: Value = self
            .run(CMD, |mut con| async move {
                WRITE_CAS
                    .key(key)
                    .arg(expected)
                    .arg(doc)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let v = array_of(CMD, reply, 2)?;
        let version = uint_or_zero(CMD, &v[1])?;
        Ok(if int(CMD, &v[0])? == 1 {
            SettingsWrite::Written(version)
        } else {
            SettingsWrite::Conflict(version)
        })
    }
}
