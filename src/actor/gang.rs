//! Pod groups placed all or none through the extender. A member's filter makes one decision for
//! its group: while fewer members exist than the group's minimum, no node and nothing held; then
//! every member the group still needs is planned at once on one view (the published snapshots,
//! which count every other claim), and either each of them gets a claim on its node through the
//! coordinator's all-or-nothing `TakeAll`, or none does and the member is told what is missing.
//! Each later filter of a member is answered from its claim, the same node every time; a
//! member's reservation borrows its claim, which comes back if the reservation is let go
//! unbound (a failed bind), so one failed bind never leaves the group short. Claims go back when
//! they lapse (the group's timeout), a member is deleted, the group falls below its minimum
//! before it is whole, or its PodGroup is deleted or reported failed (`release.rs`). With
//! `--preemption=on`, a group that fits only by evicting lower-priority pods evicts for all the
//! members it needs or for none (`preempt.rs`).
//!
//! A restart loses the claims (they live in the node actors) but nothing else: bound and
//! reserved members are counted from their pods' annotations, and the next member filtered plans
//! the rest of the group again on that usage before any member is answered.

mod filter;
mod preempt;
mod release;

use release::Released;
