//! Concurrency gates: a semaphore with a bounded, timed waiting line.
//!
//! A cap of 0 means unlimited (no semaphore at all, so the common case costs nothing). Over the
//! cap a request waits at most `timeout_ms` in a line of at most `max_queue`; otherwise it gets
//! the typed `SEMAPHORE_TIMEOUT` / `SEMAPHORE_QUEUE_FULL` rejection. A saturated gate never
//! cools or disables anything: the caller just tries another connection.
//!
//! In redis mode a capped connection's gate is resizable: its limit is the block of permits
//! this node leased from the cluster (`caps`), so it grows and shrinks with the grant. A
//! request that finds the gate full signals demand, so the leasing task asks for more at once.
//!
//! A wait ends at its deadline even when the process could not run at that moment (SIGSTOP,
//! a frozen VM, a starved runtime): on resume the freed permit and the expired timer are both
//! ready, and the timer future polls the permit first, so the late permit is checked against
//! the deadline ([`admitted_in_time`]) and refused with the same timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use switchyard_shared::admission::{GateLevel, SemaphoreError};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// One concurrency cap.
#[derive(Debug)]
pub struct Gate {
    level: GateLevel,
    sem: Option<Arc<Semaphore>>,
    cap: u32,
    waiting: AtomicU32,
    /// Permits in existence (held + available); `cap` until a cluster lease resizes the gate.
    limit: AtomicU32,
    /// Signalled when a request has to wait for a permit.
    demand: Notify,
}

impl Gate {
    /// A gate with `cap` permits (0 = unlimited).
    pub fn new(level: GateLevel, cap: u32) -> Self {
        Self {
            level,
            sem: (cap > 0).then(|| Arc::new(Semaphore::new(cap as usize))),
            cap,
            waiting: AtomicU32::new(0),
            limit: AtomicU32::new(cap),
            demand: Notify::new(),
        }
    }

    /// Permits in existence now (the configured cap unless resized).
    pub fn limit(&self) -> u32 {
        self.limit.load(Ordering::Acquire)
    }

    /// Raises the limit by `n` permits.
    pub fn grow(&self, n: u32) {
        if let Some(sem) = &self.sem
            && n > 0
        {
            sem.add_permits(n as usize);
            self.limit.fetch_add(n, Ordering::AcqRel);
        }
    }

    /// Lowers the limit by up to `n` permits, taking only free ones (a held permit is never
    /// revoked); returns how many were removed.
    pub fn shrink(&self, n: u32) -> u32 {
        let Some(sem) = &self.sem else {
            return 0;
        };
        let gone = u32::try_from(sem.forget_permits(n as usize)).unwrap_or(0);
        self.limit.fetch_sub(gone, Ordering::AcqRel);
        gone
    }

    /// Waits until a request finds the gate full (see [`Gate::acquire`]).
    pub async fn demanded(&self) {
        self.demand.notified().await;
    }

    pub fn cap(&self) -> u32 {
        self.cap
    }

    /// Requests currently waiting for a permit.
    pub fn waiting(&self) -> u32 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Permits currently held.
    pub fn in_use(&self) -> u32 {
        match &self.sem {
            Some(s) => self
                .limit()
                .saturating_sub(u32::try_from(s.available_permits()).unwrap_or(u32::MAX)),
            None => 0,
        }
    }

    /// Acquires a permit, waiting in line up to `timeout_ms` when the gate is full.
    pub async fn acquire(
        &self,
        max_queue: u32,
        timeout_ms: u64,
    ) -> Result<Option<OwnedSemaphorePermit>, SemaphoreError> {
        let Some(sem) = &self.sem else {
            return Ok(None);
        };
        // Nobody waiting and a permit free: take it without joining the line.
        if self.waiting.load(Ordering::Acquire) == 0
            && let Ok(p) = sem.clone().try_acquire_owned()
        {
            return Ok(Some(p));
        }
        let before = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _line = WaitingGuard(&self.waiting);
        self.demand.notify_one();
        if before >= max_queue {
            return Err(SemaphoreError::QueueFull {
                level: self.level,
                max_queue,
            });
        }
        let budget = Duration::from_millis(timeout_ms);
        let started = Instant::now();
        match tokio::time::timeout(budget, sem.clone().acquire_owned()).await {
            // Dropping the late permit hands it to the next in line.
            Ok(Ok(p)) if admitted_in_time(started.elapsed(), budget) => Ok(Some(p)),
            // The semaphore is never closed; treat it like a timeout if it ever is.
            Ok(_) | Err(_) => Err(SemaphoreError::Timeout {
                level: self.level,
                waited_ms: timeout_ms,
            }),
        }
    }
}

/// Whether a permit obtained after waiting `waited` still counts: a wait that outlived its
/// `budget` (the process was paused, or the runtime did not get to the timer in time) is a
/// timeout, whatever became free meanwhile.
pub fn admitted_in_time(waited: Duration, budget: Duration) -> bool {
    waited <= budget
}

/// Leaves the waiting line exactly once, however the wait ends (permit, timeout, cancel).
struct WaitingGuard<'a>(&'a AtomicU32);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unlimited_gate_has_no_permits() {
        let g = Gate::new(GateLevel::Connection, 0);
        assert!(g.acquire(0, 1).await.unwrap().is_none());
        assert_eq!(g.in_use(), 0);
    }

    #[tokio::test]
    async fn full_gate_times_out_then_queue_full() {
        let g = Gate::new(GateLevel::Connection, 1);
        let p = g.acquire(1, 10).await.unwrap();
        assert!(p.is_some());
        assert_eq!(g.in_use(), 1);
        assert!(matches!(
            g.acquire(1, 20).await,
            Err(SemaphoreError::Timeout { .. })
        ));
        assert_eq!(g.waiting(), 0);
        assert!(matches!(
            g.acquire(0, 20).await,
            Err(SemaphoreError::QueueFull { .. })
        ));
        assert_eq!(g.waiting(), 0);
        drop(p);
        assert!(g.acquire(0, 20).await.unwrap().is_some());
    }

    #[test]
    fn a_wait_past_its_budget_is_not_admitted() {
        let budget = Duration::from_millis(100);
        assert!(admitted_in_time(Duration::ZERO, budget));
        assert!(admitted_in_time(budget, budget));
        assert!(!admitted_in_time(Duration::from_millis(101), budget));
        assert!(!admitted_in_time(Duration::from_secs(30), budget));
    }

    /// The runtime cannot run while the "process is paused" (the thread sleeps, as under
    /// SIGSTOP); the permit frees just before it resumes, past the waiter's deadline.
    #[tokio::test(flavor = "current_thread")]
    async fn a_permit_freed_after_a_pause_past_the_deadline_is_refused() {
        let g = Arc::new(Gate::new(GateLevel::Connection, 1));
        let held = g.acquire(1, 10).await.unwrap();
        let waiter = {
            let g = Arc::clone(&g);
            tokio::spawn(async move { g.acquire(1, 100).await.map(|p| p.is_some()) })
        };
        tokio::task::yield_now().await;
        assert_eq!(g.waiting(), 1, "the waiter is in line");
        drop(held);
        std::thread::sleep(Duration::from_millis(250));
        assert!(matches!(
            waiter.await.unwrap(),
            Err(SemaphoreError::Timeout { .. })
        ));
        assert_eq!(g.in_use(), 0, "the late permit went back");
        assert!(g.acquire(0, 10).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_resized_gate_never_revokes_held_permits() {
        let g = Gate::new(GateLevel::Connection, 2);
        let held = g.acquire(1, 10).await.unwrap();
        assert_eq!(g.shrink(2), 1, "only the free permit goes");
        assert_eq!((g.limit(), g.in_use()), (1, 1));
        assert!(matches!(
            g.acquire(1, 20).await,
            Err(SemaphoreError::Timeout { .. })
        ));
        drop(held);
        assert_eq!(g.shrink(5), 1);
        assert_eq!(g.limit(), 0);
        g.grow(3);
        assert_eq!((g.limit(), g.in_use()), (3, 0));
        assert!(g.acquire(0, 10).await.unwrap().is_some());
    }
}
