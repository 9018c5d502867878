//! What every handler of the main listener shares: the engine, the webhook's configuration, the
//! doors' rules, readiness, and the count of requests shutdown waits for.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::actor::Engine;
use crate::backend::Backend;

use super::access;

/// Counts requests that must finish before shutdown (binds in flight).
#[derive(Clone, Default)]
pub struct Inflight(Arc<AtomicUsize>);

pub struct InflightGuard(Arc<AtomicUsize>);

impl Inflight {
    pub fn enter(&self) -> InflightGuard {
        self.0.fetch_add(1, Ordering::SeqCst);
        InflightGuard(self.0.clone())
    }
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub use crate::backend::Readiness;

pub struct AppState<B: Backend> {
    pub engine: Engine<B>,
    pub max_body: usize,
    pub readiness: Readiness,
    pub inflight: Inflight,
    /// The admission webhook's flags and quota book.
    pub webhook: Arc<crate::admission::Config>,
    /// Who may call which door.
    pub access: access::Access,
}

impl<B: Backend> AppState<B> {
    /// The webhook starts with the flags' defaults and no quota; see [`AppState::with_webhook`].
    pub fn new(engine: Engine<B>, max_body: usize, readiness: Readiness) -> AppState<B> {
        AppState {
            engine,
            max_body,
            readiness,
            inflight: Inflight::default(),
            webhook: Arc::new(crate::admission::Config::default()),
            access: access::Access::default(),
        }
    }
    pub fn with_access(mut self, access: access::Access) -> AppState<B> {
        self.access = access;
        self
    }
    pub fn with_webhook(mut self, cfg: crate::admission::Config) -> AppState<B> {
        self.webhook = Arc::new(cfg);
        self
    }
    pub fn is_leader(&self) -> bool {
        self.readiness.is_ready()
    }
    /// HAMi's followers hang until the caller's timeout; hami-rs answers at once.
    pub fn not_leader_message(&self) -> String {
        if self.readiness.leader.load(Ordering::SeqCst) {
            "scheduler caches are not synced yet; retry shortly".into()
        } else {
            "this hami-rs replica is not the leader; kube-scheduler should call its own local extender".into()
        }
    }
}

impl<B: Backend> access::Doors for AppState<B> {
    fn access(&self) -> &access::Access {
        &self.access
    }
}
