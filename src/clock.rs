//! The wall clock the engine stamps decisions and pending pods with and the console reads its
//! "now" from. Tests move it forward on their own thread, so an hour of traffic plays in seconds;
//! in the program it is the system clock, nothing more.

use std::time::{SystemTime, UNIX_EPOCH};

#[cfg(test)]
thread_local! {
    /// How far this test thread's clock runs ahead of the system's.
    static AHEAD: std::cell::Cell<std::time::Duration> = const { std::cell::Cell::new(std::time::Duration::ZERO) };
}

/// Seconds and nanoseconds since the Unix epoch.
pub fn unix_now() -> (i64, i128) {
    let now = SystemTime::now();
    #[cfg(test)]
    let now = now + AHEAD.with(|a| a.get());
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as i64, d.as_nanos() as i128)
}

/// Moves this thread's clock `by` forward.
#[cfg(test)]
pub fn advance(by: std::time::Duration) {
    AHEAD.with(|a| a.set(a.get() + by));
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_test_moves_its_own_threads_clock_and_no_other() {
        let before = super::unix_now().0;
        super::advance(std::time::Duration::from_secs(3600));
        assert!(super::unix_now().0 >= before + 3600);
        let other = std::thread::spawn(|| super::unix_now().0).join().unwrap_or_default();
        assert!(other < before + 3600, "another thread keeps the system's time");
    }
}
