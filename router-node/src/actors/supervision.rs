//! The process-wide record of supervised tasks and actors, and their restart backoff.
//!
//! Why: a task or actor that dies silently leaves the node serving on a frozen view (a breaker
//! that never leaves OPEN, changes that queue for ever), so every long-lived one is restarted by
//! its supervisor, and each restart is recorded here for `/api/monitoring/health`
//! (`supervision`) and the `switchyard_task_restarts_total{task}` metric. The record is
//! process-wide because the cluster tasks outlive a runtime swapped by a config reload.

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// What is known about one supervised task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskRecord {
    pub task: String,
    pub restarts: u64,
    pub last_reason: Option<String>,
    /// Wall-clock epoch ms of the last restart.
    pub last_restart_ms: Option<u64>,
    pub running: bool,
}

static TASKS: LazyLock<Mutex<BTreeMap<String, TaskRecord>>> =
    LazyLock::new(|| Mutex::new(BTreeMap::new()));

fn with(task: &str, f: impl FnOnce(&mut TaskRecord)) {
    if let Ok(mut tasks) = TASKS.lock() {
        let record = tasks.entry(task.to_owned()).or_insert_with(|| TaskRecord {
            task: task.to_owned(),
            ..TaskRecord::default()
        });
        f(record);
    }
}

/// `task` runs (first start or after a restart).
pub fn running(task: &str) {
    with(task, |r| r.running = true);
}

/// `task` died for `reason`; its supervisor restarts it (`running` turns true again then).
pub fn died(task: &str, reason: &str, wall_ms: u64) {
    with(task, |r| {
        r.running = false;
        r.restarts += 1;
        r.last_reason = Some(reason.to_owned());
        r.last_restart_ms = Some(wall_ms);
    });
}

/// `task` stopped for good (its runtime was retired): not a fault.
pub fn retired(task: &str) {
    with(task, |r| r.running = false);
}

/// Every task recorded so far, by name.
pub fn snapshot() -> Vec<TaskRecord> {
    TASKS
        .lock()
        .map(|t| t.values().cloned().collect())
        .unwrap_or_default()
}

/// The delay before restart number `recent + 1` within a burst: 100 ms doubling up to 10 s,
/// so a crash loop costs little while a single crash heals at once.
pub fn backoff(recent: u32) -> Duration {
    let ms = 100u64.saturating_mul(1u64 << recent.min(7));
    Duration::from_millis(ms.min(10_000))
}

/// The message of a panic payload, for `last_reason`.
pub fn panic_reason(payload: &(dyn std::any::Any + Send)) -> String {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown".to_owned());
    format!("panic: {msg}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(6), Duration::from_millis(6_400));
        assert_eq!(backoff(7), Duration::from_secs(10));
        assert_eq!(backoff(40), Duration::from_secs(10));
    }

    #[test]
    fn deaths_are_counted_with_their_reason() {
        running("unit-test-task");
        died("unit-test-task", "panic: boom", 5);
        let r = snapshot()
            .into_iter()
            .find(|r| r.task == "unit-test-task")
            .unwrap_or_default();
        assert_eq!(r.restarts, 1);
        assert!(!r.running);
        assert_eq!(r.last_reason.as_deref(), Some("panic: boom"));
        assert_eq!(r.last_restart_ms, Some(5));
        running("unit-test-task");
        assert!(
            snapshot()
                .iter()
                .any(|r| r.task == "unit-test-task" && r.running)
        );
    }
}
