//! The log's way to stderr: lines gathered in memory and written in batches, one `write` per
//! batch instead of one per line, so a request that logs a line pays a copy, not a system call.
//! Warnings and errors are written at once (with everything before them), as is a full buffer;
//! other lines within `FLUSH_EVERY`. [`LogWriter::flush`] at exit and before a panic's message
//! leaves nothing behind; a process killed outright loses at most that interval's info lines.
//! [`RateLimit`] keeps a flood of like lines (reservations lapsing by the thousand) to a few a second.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// How long an info line may wait in memory.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// A buffer this full is written at once, by the writer that filled it.
const MAX_BUFFERED: usize = 256 * 1024;

/// Buffered lines for `out` (stderr unless built with [`LogWriter::to`]).
#[derive(Clone)]
pub struct LogWriter {
    shared: Arc<Shared>,
}

struct Shared {
    lines: Mutex<Vec<u8>>,
    /// Held while a batch is taken and written, so batches reach `out` in the order taken.
    out: Mutex<Box<dyn Write + Send>>,
    /// Every line is written at once.
    immediate: bool,
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding either lock leaves whole lines (or none) behind: still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LogWriter {
    /// Lines for stderr, written by a background thread every `FLUSH_EVERY`, and flushed before
    /// a panic's message.
    pub fn stderr() -> LogWriter {
        let w = LogWriter::to(Box::new(io::stderr()));
        let flusher = w.clone();
        let spawned = std::thread::Builder::new().name("log-flush".into()).spawn(move || {
            loop {
                std::thread::sleep(FLUSH_EVERY);
                flusher.flush();
            }
        });
        if spawned.is_err() {
            // No thread to flush in the background: every line is written at once instead.
            return LogWriter::with(Box::new(io::stderr()), true);
        }
        let before_panic = w.clone();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            before_panic.flush();
            previous(info);
        }));
        w
    }

    /// Lines for `out`, written only when flushed (or urgent, or too many).
    pub fn to(out: Box<dyn Write + Send>) -> LogWriter {
        LogWriter::with(out, false)
    }

    fn with(out: Box<dyn Write + Send>, immediate: bool) -> LogWriter {
        let lines = Mutex::new(Vec::with_capacity(64 * 1024));
        LogWriter { shared: Arc::new(Shared { lines, out: Mutex::new(out), immediate }) }
    }

    /// Writes every line gathered so far.
    pub fn flush(&self) {
        let mut out = lock(&self.shared.out);
        let batch = std::mem::take(&mut *lock(&self.shared.lines));
        if !batch.is_empty() {
            // Nowhere to report a failing stderr: the lines are dropped, as an unbuffered write's would be.
            let _ = out.write_all(&batch);
            let _ = out.flush();
        }
    }
}

/// One event's text, appended to the buffer; an urgent one flushes when done.
pub struct Line<'a> {
    writer: &'a LogWriter,
    urgent: bool,
}

impl Write for Line<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let full = {
            let mut lines = lock(&self.writer.shared.lines);
            lines.extend_from_slice(buf);
            lines.len() >= MAX_BUFFERED
        };
        if full {
            self.writer.flush();
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Line<'_> {
    fn drop(&mut self) {
        if self.urgent {
            self.writer.flush();
        }
    }
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line { writer: self, urgent: self.shared.immediate }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Line<'a> {
        Line { writer: self, urgent: self.shared.immediate || *meta.level() <= Level::WARN }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `out` the test reads back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn written(s: &Sink) -> String {
        String::from_utf8(lock(&s.0).clone()).unwrap()
    }

    #[test]
    fn info_lines_wait_for_a_flush_and_a_warning_takes_everything_before_it_out_at_once() {
        let sink = Sink::default();
        let w = LogWriter::to(Box::new(sink.clone()));
        let subscriber = tracing_subscriber::fmt().with_writer(w.clone()).with_ansi(false).without_time().finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("first");
            tracing::info!("second");
            assert_eq!(written(&sink), "", "info lines wait in memory");
            tracing::warn!("third");
            let out = written(&sink);
            let at = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s} missing: {out}"));
            assert!(at("first") < at("second") && at("second") < at("third"), "in order: {out}");
            tracing::info!("fourth");
            assert!(!written(&sink).contains("fourth"));
            w.flush();
            assert!(written(&sink).ends_with("fourth\n"), "{}", written(&sink));
        });
    }

    #[test]
    fn a_full_buffer_is_written_at_once_and_concurrent_lines_stay_whole_and_in_order_per_thread() {
        let sink = Sink::default();
        let w = LogWriter::to(Box::new(sink.clone()));
        let line = "x".repeat(1000) + "\n";
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (w, line) = (w.clone(), line.clone());
                std::thread::spawn(move || {
                    for i in 0..200 {
                        // As the fmt layer writes an event: one formatted line, one write.
                        w.make_writer().write_all(format!("{t} {i:03} {line}").as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(written(&sink).len() >= MAX_BUFFERED, "written before any flush once the buffer filled");
        w.flush();
        let out = written(&sink);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 800);
        for t in 0..4 {
            let mine: Vec<&str> = lines.iter().filter(|l| l.starts_with(&format!("{t} "))).copied().collect();
            let want: Vec<String> = (0..200).map(|i| format!("{t} {i:03} {}", "x".repeat(1000))).collect();
            assert!(mine == want, "thread {t}'s lines are not whole and in order");
        }
    }
}

/// At most `n` events a second (by the caller's clock): `admit` says whether this one may be
/// logged and, if so, how many were refused since the last that was. Lock-free; a race at a second's
/// turn may let one more through, which is harmless for a log.
pub struct RateLimit {
    n: u64,
    /// The second the count is for, and how many were admitted in it (`second << 20 | count`).
    window: std::sync::atomic::AtomicU64,
    refused: std::sync::atomic::AtomicU64,
}

impl RateLimit {
    pub const fn per_second(n: u64) -> RateLimit {
        RateLimit { n, window: std::sync::atomic::AtomicU64::new(0), refused: std::sync::atomic::AtomicU64::new(0) }
    }

    /// `Some(refused since the last admitted)` when this event may be logged at `unix_s`.
    pub fn admit(&self, unix_s: i64) -> Option<u64> {
        use std::sync::atomic::Ordering::Relaxed;
        let second = (unix_s.max(0) as u64) & ((1 << 44) - 1);
        let w = self.window.load(Relaxed);
        let (at, count) = (w >> 20, w & ((1 << 20) - 1));
        let next = if at == second { count + 1 } else { 1 };
        if next > self.n {
            self.refused.fetch_add(1, Relaxed);
            return None;
        }
        self.window.store(second << 20 | next, Relaxed);
        Some(self.refused.swap(0, Relaxed))
    }
}

#[cfg(test)]
mod rate_tests {
    use super::RateLimit;

    #[test]
    fn a_rate_limit_admits_n_a_second_and_counts_the_rest_into_the_next_admitted() {
        let r = RateLimit::per_second(3);
        let admitted: Vec<Option<u64>> = (0..5).map(|_| r.admit(100)).collect();
        assert_eq!(admitted, [Some(0), Some(0), Some(0), None, None]);
        assert_eq!(r.admit(101), Some(2), "the next second's first says two were left out");
        assert_eq!(r.admit(101), Some(0));
    }
}
