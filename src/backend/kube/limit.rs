//! The client-side rate limit (`--kube-qps`/`--kube-burst`) every API call waits on, and the
//! backlog Filter reads to keep kube-scheduler from outrunning the binds' writes.

use std::time::{Duration, Instant};

use tokio::sync::Mutex as AsyncMutex;

/// A token bucket: `qps` tokens a second, at most `burst` saved up.
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: AsyncMutex<(f64, Instant)>,
}

impl RateLimiter {
    pub fn new(qps: f32, burst: u32) -> RateLimiter {
        let burst = f64::from(burst.max(1));
        RateLimiter { qps: f64::from(qps).max(0.1), burst, state: AsyncMutex::new((burst, Instant::now())) }
    }
    /// Waits for one token.
    pub async fn acquire(&self) {
        let wait = {
            let mut s = self.state.lock().await;
            let now = Instant::now();
            let refill = now.duration_since(s.1).as_secs_f64() * self.qps;
            s.0 = (s.0 + refill).min(self.burst);
            s.1 = now;
            s.0 -= 1.0;
            if s.0 >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-s.0 / self.qps) }
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// How long a request asked for now would wait for its token: the backlog of requests
    /// already granted a turn. Zero when the state is busy being updated.
    pub fn backlog(&self) -> Duration {
        let Ok(s) = self.state.try_lock() else { return Duration::ZERO };
        let tokens = s.0 + s.1.elapsed().as_secs_f64() * self.qps;
        if tokens >= 1.0 { Duration::ZERO } else { Duration::from_secs_f64((1.0 - tokens) / self.qps) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_rate_limiters_backlog_is_the_wait_a_new_request_would_have() {
        let l = RateLimiter::new(10.0, 2);
        assert_eq!(l.backlog(), Duration::ZERO, "a full bucket");
        for _ in 0..2 {
            l.acquire().await;
        }
        // The bucket is empty: the next request waits for one token, 100 ms.
        let b = l.backlog().as_secs_f64();
        assert!((b - 0.1).abs() < 0.01, "{b}");
        // Three more asked for and not yet served (each reserves its token on the first poll):
        // a new request waits behind them, 400 ms.
        for _ in 0..3 {
            let _ = futures::FutureExt::now_or_never(l.acquire());
        }
        let b = l.backlog().as_secs_f64();
        assert!((b - 0.4).abs() < 0.01, "{b}");
        // The bucket refills in real time: 100 ms later one request fewer is ahead.
        std::thread::sleep(Duration::from_millis(100));
        let b = l.backlog().as_secs_f64();
        assert!(b < 0.3 + 1e-3 && b > 0.2, "{b}");
    }
}
