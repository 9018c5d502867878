//! The fit buffers of the thread a fit runs on: one set per thread that fits (HTTP workers,
//! arbiters), not one per node.

use std::cell::RefCell;

use crate::sched::Scratch;

thread_local! {
    /// Filter evaluation buffers, one set per HTTP worker thread.
    pub(crate) static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's fit buffers: one set per thread that fits (HTTP workers,
/// arbiters), not one per node, whichever node's fit runs on it. The buffers are taken out while
/// `f` runs, so a fit further up the stack cannot clash with it (it gets a fresh set).
pub(crate) fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let take = |c: &RefCell<Scratch>| c.try_borrow_mut().map(|mut s| std::mem::take(&mut *s)).ok();
    let mut s = SCRATCH.try_with(take).ok().flatten().unwrap_or_default();
    let r = f(&mut s);
    let _ = SCRATCH.try_with(|c| {
        if let Ok(mut slot) = c.try_borrow_mut() {
            *slot = s;
        }
    });
    r
}
