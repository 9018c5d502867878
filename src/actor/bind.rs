//! kube-scheduler's bind call: the pipeline over one call's `BindCx` (`run.rs`) and HAMi's node
//! lock helpers (`locks.rs`).

pub(crate) mod locks;
pub(crate) mod run;
