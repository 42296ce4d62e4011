//! The HTTP/2 connections of one thread, by upstream, and which one a new stream goes on.
//!
//! Why a module: with HTTP/2 many requests share a connection, so the questions differ from
//! HTTP/1.1's idle set (`idle`): which connection still has room for a stream, whether a
//! connection is being made that a request should wait for instead of making its own (1,000
//! streams arriving at once must not open 1,000 connections), and whether the host answered
//! ALPN without `h2`, so that requests go the HTTP/1.1 way without trying again. This is
//! policy with time passed in; the thread-local holder and the sockets are in `pooled`.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::io::ErrorKind;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustc_hash::FxHasher;
use tokio::sync::Notify;

use super::idle::PoolKey;

/// Streams opened on one connection at most. A stream beyond the peer's
/// `SETTINGS_MAX_CONCURRENT_STREAMS` would wait inside hyper for another to end, where a new
/// connection serves it at once, and hyper's sender does not tell the peer's limit: 100 is
/// at or below what servers allow by default (HAProxy and Google 100, nginx 128, Cloudflare
/// 256). A peer that allows fewer makes the streams past its limit wait for a free one.
pub(super) const MAX_STREAMS_PER_CONNECTION: usize = 100;

/// What the set needs to know of an HTTP/2 connection.
pub(super) trait Multiplexed: Clone {
    /// It is gone for good (the peer sent GOAWAY or closed it, or its task ended).
    fn is_closed(&self) -> bool;
}

/// One open stream on a connection, counted until this is dropped (its response ended or
/// was abandoned).
#[derive(Debug)]
pub(super) struct Stream(Arc<AtomicUsize>);

impl Stream {
    fn open(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(count))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection being made for a host; requests that find it wait for it to end.
#[derive(Debug, Default)]
pub(super) struct Connecting {
    done: AtomicBool,
    /// How the connect failed, if it did.
    failed: Mutex<Option<ErrorKind>>,
    notify: Notify,
}

impl Connecting {
    /// The connect ended: made (`None`), failed, or abandoned (`None`: a waiter tries).
    pub fn finish(&self, failed: Option<ErrorKind>) {
        *self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = failed;
        self.done.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Returns once [`Connecting::finish`] was called, with how the connect failed: the
    /// waiters of a failed connect fail with it rather than each try in turn (1,000 streams
    /// behind a provider that does not answer would otherwise wait 1,000 connect timeouts).
    pub async fn wait(&self) -> Option<ErrorKind> {
        let notified = self.notify.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the flag is read: a finish in between still wakes this.
        notified.as_mut().enable();
        if !self.done.load(Ordering::Acquire) {
            notified.await;
        }
        *self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

/// Where a request goes.
pub(super) enum Pick<C> {
    /// On this connection, as this stream.
    Stream(C, Stream),
    /// A connection is being made: wait for it, then pick again.
    Wait(Arc<Connecting>),
    /// Make a connection; finish the flag when done (and report what was made).
    Connect(Arc<Connecting>),
    /// The host chose HTTP/1.1 by ALPN: use the HTTP/1.1 pool.
    Http1,
}

struct Conn<C> {
    conn: C,
    open: Arc<AtomicUsize>,
    last_used: Instant,
}

struct Host<C> {
    conns: Vec<Conn<C>>,
    connecting: Option<Arc<Connecting>>,
    /// When the host last answered ALPN without `h2`.
    http1_since: Option<Instant>,
}

impl<C> Default for Host<C> {
    fn default() -> Self {
        Self {
            conns: Vec::new(),
            connecting: None,
            http1_since: None,
        }
    }
}

/// HTTP/2 connections by key.
pub(super) struct H2Set<C> {
    by_key: HashMap<PoolKey, Host<C>, BuildHasherDefault<FxHasher>>,
    idle_for: Duration,
}

impl<C: Multiplexed> H2Set<C> {
    /// Connections without streams for `idle_for` are dropped, and a host's HTTP/1.1 answer
    /// is remembered that long.
    pub fn new(idle_for: Duration) -> Self {
        Self {
            by_key: HashMap::default(),
            idle_for,
        }
    }

    /// Where the next request for `key` goes: the first open connection with room for a
    /// stream; else the connection being made; else a new one.
    pub fn pick(&mut self, key: &PoolKey, now: Instant) -> Pick<C> {
        let host = match self.by_key.get_mut(key) {
            Some(host) => host,
            None => self.by_key.entry(key.clone()).or_default(),
        };
        if let Some(since) = host.http1_since {
            if now.saturating_duration_since(since) < self.idle_for {
                return Pick::Http1;
            }
            host.http1_since = None;
        }
        host.conns.retain(|c| !c.conn.is_closed());
        let room = host
            .conns
            .iter_mut()
            .find(|c| c.open.load(Ordering::Relaxed) < MAX_STREAMS_PER_CONNECTION);
        if let Some(c) = room {
            c.last_used = now;
            return Pick::Stream(c.conn.clone(), Stream::open(&c.open));
        }
        if let Some(flag) = &host.connecting
            && !flag.is_done()
        {
            return Pick::Wait(Arc::clone(flag));
        }
        let flag = Arc::new(Connecting::default());
        host.connecting = Some(Arc::clone(&flag));
        Pick::Connect(flag)
    }

    /// A connection made for `key` that chose HTTP/2.
    pub fn add(&mut self, key: &PoolKey, conn: C, now: Instant) {
        let host = self.by_key.entry(key.clone()).or_default();
        host.http1_since = None;
        host.conns.push(Conn {
            conn,
            open: Arc::new(AtomicUsize::new(0)),
            last_used: now,
        });
    }

    /// A connection made for `key` chose HTTP/1.1.
    pub fn speaks_http1(&mut self, key: &PoolKey, now: Instant) {
        self.by_key.entry(key.clone()).or_default().http1_since = Some(now);
    }

    /// The connect of `flag` ended; the host may start another.
    pub fn connect_ended(&mut self, key: &PoolKey, flag: &Arc<Connecting>) {
        if let Some(host) = self.by_key.get_mut(key)
            && host
                .connecting
                .as_ref()
                .is_some_and(|f| Arc::ptr_eq(f, flag))
        {
            host.connecting = None;
        }
    }

    /// Drops closed connections, connections without streams for the idle time, expired
    /// HTTP/1.1 answers and hosts left with nothing.
    pub fn sweep(&mut self, now: Instant) {
        let idle_for = self.idle_for;
        self.by_key.retain(|_, host| {
            host.conns.retain(|c| {
                !c.conn.is_closed()
                    && (c.open.load(Ordering::Relaxed) > 0
                        || now.saturating_duration_since(c.last_used) < idle_for)
            });
            if host
                .http1_since
                .is_some_and(|since| now.saturating_duration_since(since) >= idle_for)
            {
                host.http1_since = None;
            }
            !host.conns.is_empty() || host.connecting.is_some() || host.http1_since.is_some()
        });
    }

    /// Nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// How many open connections are kept, over all keys.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_key.values().map(|h| h.conns.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[derive(Clone, Debug)]
    struct Fake {
        id: u32,
        closed: Rc<Cell<bool>>,
    }

    impl Fake {
        fn new(id: u32) -> Self {
            Self {
                id,
                closed: Rc::new(Cell::new(false)),
            }
        }
    }

    impl Multiplexed for Fake {
        fn is_closed(&self) -> bool {
            self.closed.get()
        }
    }

    fn key() -> PoolKey {
        PoolKey {
            client: 1,
            https: true,
            authority: "api.example:443".parse().unwrap(),
        }
    }

    fn stream(pick: Pick<Fake>) -> (u32, Stream) {
        match pick {
            Pick::Stream(c, s) => (c.id, s),
            _ => panic!("not a stream"),
        }
    }

    #[test]
    fn concurrent_requests_wait_for_the_one_connect_then_share_its_connection() {
        let now = Instant::now();
        let mut set = H2Set::new(Duration::from_secs(90));
        let Pick::Connect(flag) = set.pick(&key(), now) else {
            panic!("the first request connects");
        };
        // While it connects, the others wait instead of making their own.
        for _ in 0..50 {
            assert!(matches!(set.pick(&key(), now), Pick::Wait(f) if Arc::ptr_eq(&f, &flag)));
        }
        set.add(&key(), Fake::new(1), now);
        set.connect_ended(&key(), &flag);
        flag.finish(None);
        let streams: Vec<_> = (0..MAX_STREAMS_PER_CONNECTION)
            .map(|_| stream(set.pick(&key(), now)))
            .collect();
        assert!(streams.iter().all(|(id, _)| *id == 1));
        assert_eq!(set.len(), 1);
        // The connection is full (our own cap): the next request makes a second one.
        let Pick::Connect(second) = set.pick(&key(), now) else {
            panic!("a full connection takes no more streams");
        };
        // That connect fails; a stream that ends makes room on the first.
        set.connect_ended(&key(), &second);
        second.finish(Some(ErrorKind::TimedOut));
        drop(streams);
        assert_eq!(stream(set.pick(&key(), now)).0, 1);
    }

    #[test]
    fn closed_connections_are_dropped_and_the_next_open_one_is_used() {
        let now = Instant::now();
        let mut set = H2Set::new(Duration::from_secs(90));
        let one = Fake::new(1);
        set.add(&key(), one.clone(), now);
        set.add(&key(), Fake::new(2), now);
        assert_eq!(stream(set.pick(&key(), now)).0, 1);
        one.closed.set(true);
        assert_eq!(stream(set.pick(&key(), now)).0, 2);
        assert_eq!(set.len(), 1);
    }

    #[tokio::test]
    async fn waiters_learn_how_the_connect_they_waited_for_ended() {
        let flag = Arc::new(Connecting::default());
        let waiter = tokio::spawn({
            let flag = Arc::clone(&flag);
            async move { flag.wait().await }
        });
        tokio::task::yield_now().await;
        flag.finish(Some(ErrorKind::TimedOut));
        assert_eq!(waiter.await.unwrap(), Some(ErrorKind::TimedOut));
        // A wait that starts after the end returns at once.
        assert_eq!(flag.wait().await, Some(ErrorKind::TimedOut));
    }

    #[test]
    fn a_finished_connect_is_not_waited_for() {
        let now = Instant::now();
        let mut set: H2Set<Fake> = H2Set::new(Duration::from_secs(90));
        let Pick::Connect(flag) = set.pick(&key(), now) else {
            panic!("connects");
        };
        // Finished without `connect_ended` (a task that moved threads): not a wait.
        flag.finish(None);
        assert!(matches!(set.pick(&key(), now), Pick::Connect(f) if !Arc::ptr_eq(&f, &flag)));
    }

    #[test]
    fn a_host_that_chose_http1_goes_the_http1_way_until_the_idle_time_passes() {
        let now = Instant::now();
        let idle = Duration::from_secs(90);
        let mut set: H2Set<Fake> = H2Set::new(idle);
        set.speaks_http1(&key(), now);
        assert!(matches!(set.pick(&key(), now + idle / 2), Pick::Http1));
        assert!(matches!(set.pick(&key(), now + idle), Pick::Connect(_)));
    }

    #[test]
    fn a_sweep_keeps_busy_connections_and_drops_idle_ones() {
        let now = Instant::now();
        let idle = Duration::from_secs(90);
        let mut set = H2Set::new(idle);
        set.add(&key(), Fake::new(1), now);
        set.add(&key(), Fake::new(2), now);
        let (id, busy) = stream(set.pick(&key(), now));
        assert_eq!(id, 1);
        set.sweep(now + idle);
        assert_eq!(set.len(), 1, "the idle one went, the busy one stayed");
        drop(busy);
        set.sweep(now + idle);
        assert!(set.is_empty());
    }
}
