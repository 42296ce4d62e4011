//! The log writer: lines are appended to a shared buffer and written out by one thread in
//! batches, every [`FLUSH_EVERY`] or sooner when the buffer fills.
//!
//! Why not a queue with a thread woken per line (tracing-appender's non-blocking writer):
//! at a low request rate every access line woke the log thread, a context switch per request
//! on the gateway's own core, often ahead of the response write. Here a line costs a lock and
//! a copy; nothing is woken until [`WAKE_AT`] bytes are waiting. Nothing is dropped: when
//! [`MAX_PENDING`] bytes are waiting (the output is stuck), writers wait for the thread.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::Duration;

/// The longest a line waits in the buffer.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Waiting bytes that wake the log thread before its next round.
pub const WAKE_AT: usize = 256 << 10;
/// Waiting bytes at which writers wait for the log thread instead of dropping lines.
pub const MAX_PENDING: usize = 8 << 20;

#[derive(Debug, Default)]
struct Pending {
    buf: Vec<u8>,
    closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    pending: Mutex<Pending>,
    /// Wakes the log thread (buffer past [`WAKE_AT`], or closing).
    wake: Condvar,
    /// Wakes writers waiting for room.
    room: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves a byte buffer, still usable.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The `MakeWriter` handed to the tracing subscriber.
#[derive(Debug, Clone)]
pub struct BatchWriter(Arc<Shared>);

/// How long dropping the [`FlushGuard`] waits for the log thread to write out the rest (a
/// stuck log pipe must not hold up the exit).
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// Writes out what is left and stops the log thread when dropped: keep it for the process.
#[derive(Debug)]
pub struct FlushGuard {
    shared: Arc<Shared>,
    /// Disconnected when the log thread has returned.
    done: mpsc::Receiver<()>,
}

/// Starts the log thread writing to `out`.
pub fn start(out: impl Write + Send + 'static) -> std::io::Result<(BatchWriter, FlushGuard)> {
    let shared = Arc::new(Shared::default());
    let worker = shared.clone();
    let (done_tx, done) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("switchyard-log".to_owned())
        .spawn(move || {
            let _done = done_tx;
            run(&worker, out);
        })?;
    Ok((BatchWriter(shared.clone()), FlushGuard { shared, done }))
}

fn run(shared: &Shared, mut out: impl Write) {
    let mut batch = Vec::new();
    loop {
        let closed = {
            let mut p = shared.lock();
            if !p.closed && p.buf.len() < WAKE_AT {
                p = shared
                    .wake
                    .wait_timeout(p, FLUSH_EVERY)
                    .map_or_else(|e| e.into_inner().0, |(g, _)| g);
            }
            std::mem::swap(&mut p.buf, &mut batch);
            shared.room.notify_all();
            p.closed
        };
        if !batch.is_empty() {
            // Nowhere to report a failed log write; the next batch tries again.
            let _ = out.write_all(&batch).and_then(|()| out.flush());
            batch.clear();
        }
        if closed && shared.lock().buf.is_empty() {
            return;
        }
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_all();
        let _ = self.done.recv_timeout(SHUTDOWN_WAIT);
    }
}

impl BatchWriter {
    /// Appends whole lines to the buffer (waits while it is full).
    pub fn append(&self, lines: &[u8]) {
        let mut p = self.0.lock();
        while p.buf.len() >= MAX_PENDING && !p.closed {
            p = self.0.room.wait(p).unwrap_or_else(PoisonError::into_inner);
        }
        let was_below = p.buf.len() < WAKE_AT;
        p.buf.extend_from_slice(lines);
        if was_below && p.buf.len() >= WAKE_AT {
            self.0.wake.notify_one();
        }
    }
}

impl Write for BatchWriter {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        self.append(line);
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BatchWriter {
    type Writer = BatchWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_land_within_a_round_and_all_at_shutdown() {
        let sink = Sink::default();
        let (mut w, guard) = start(sink.clone()).unwrap();
        w.write_all(b"one\n").unwrap();
        std::thread::sleep(FLUSH_EVERY * 5);
        assert_eq!(sink.0.lock().unwrap().as_slice(), b"one\n");
        for i in 0..10_000 {
            w.write_all(format!("line {i}\n").as_bytes()).unwrap();
        }
        drop(guard);
        let out = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(out.lines().count(), 10_001);
        assert!(out.ends_with("line 9999\n"));
    }
}
