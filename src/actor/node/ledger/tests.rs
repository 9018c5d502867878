//! The ledger on its own: reservations checked against the invariant, commits, removals with
//! their tombstones, deadlines that lapse only the reservation they were set for; and, as a
//! property, no sequence of operations ever leaves a device beyond its count, memory or cores.

use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use tokio::time::Instant as Deadline;

use crate::actor::node::ledger::*;
use crate::model::{DeviceInfo, VendorId};
use crate::sched::accounting::NO_INIT;
use crate::testing;

const NV: VendorId = VendorId(0);
const DEVICES: usize = 3;

/// Three NVIDIA devices: 4 slots, 1000 MiB and 100 cores each.
fn base() -> Vec<DeviceUsage> {
    (0..DEVICES)
        .map(|i| {
            DeviceUsage::idle(Arc::new(DeviceInfo::new(&format!("GPU-{i}"), i as u32, 4, 1000, 100, "NVIDIA")), NV)
        })
        .collect()
}

fn charge(dev: usize, slots: u32, mem: u64, cores: u32) -> Charge {
    testing::charge(&format!("GPU-{dev}"), slots, mem, cores)
}

fn uid(i: usize) -> PodUid {
    PodUid::new(&format!("uid-{i}"))
}

fn reserve(l: &mut Ledger, u: &PodUid, charges: Vec<Charge>, at: Deadline) -> Result<Vec<DeviceUsage>, Rejection> {
    let base = base();
    let without = l.usage(&base, std::slice::from_ref(u));
    let devices = PodDevices::default();
    let w = Written { namespace: "default", name: u.as_str(), devices: &devices, layout: &NO_INIT, tags: &[] };
    l.try_reserve(&base, without, Reservation { uid: u, charges, pod: &w, deadline: at }, |_, _| Ok(()))
}

fn within(l: &Ledger) -> bool {
    l.usage(&base(), &[]).iter().all(DeviceUsage::within_capacity)
}

#[test]
fn a_reservation_beyond_a_devices_memory_is_refused_and_changes_nothing() {
    let mut l = Ledger::default();
    let at = Deadline::now() + Duration::from_secs(30);
    assert!(reserve(&mut l, &uid(1), vec![charge(0, 1, 600, 10)], at).is_ok());
    let r = reserve(&mut l, &uid(2), vec![charge(0, 1, 500, 10)], at);
    assert!(matches!(r, Err(Rejection::Devices(_))), "{r:?}");
    assert!(!l.contains(&uid(2)));
    assert_eq!(l.usage(&base(), &[])[0].used_mem.get(), 600);
    assert_eq!(l.reserved(), 1);
}

#[test]
fn a_pod_reserving_again_replaces_what_it_held() {
    let mut l = Ledger::default();
    let at = Deadline::now() + Duration::from_secs(30);
    reserve(&mut l, &uid(1), vec![charge(0, 1, 900, 10)], at).unwrap();
    // Beside its own 900 MiB this would not fit; in their place it does.
    reserve(&mut l, &uid(1), vec![charge(0, 1, 800, 10)], at).unwrap();
    assert_eq!(l.usage(&base(), &[])[0].used_mem.get(), 800);
}

#[test]
fn quota_refusal_leaves_the_ledger_unchanged() {
    let mut l = Ledger::default();
    let base = base();
    let devices = PodDevices::default();
    let w = Written { namespace: "default", name: "p", devices: &devices, layout: &NO_INIT, tags: &[] };
    let no = |_: Option<&[Charge]>, _: &[Charge]| Err(Rejection::NodeUnusable);
    let at = Deadline::now();
    let one = uid(1);
    let r = l.try_reserve(
        &base,
        base.clone(),
        Reservation { uid: &one, charges: vec![charge(0, 1, 10, 1)], pod: &w, deadline: at },
        no,
    );
    assert_eq!(r.err(), Some(Rejection::NodeUnusable));
    assert!(!l.contains(&uid(1)));
    assert_eq!(l.next_deadline(), None);
}

#[test]
fn a_deadline_lapses_only_the_reservation_it_was_set_for() {
    let mut l = Ledger::default();
    let t0 = Deadline::now();
    reserve(&mut l, &uid(1), vec![charge(0, 1, 10, 1)], t0 + Duration::from_secs(1)).unwrap();
    reserve(&mut l, &uid(2), vec![charge(1, 1, 10, 1)], t0 + Duration::from_secs(1)).unwrap();
    // Reserved again later: the first deadline is stale for it.
    reserve(&mut l, &uid(1), vec![charge(0, 1, 10, 1)], t0 + Duration::from_secs(5)).unwrap();
    assert!(l.commit(&uid(2)));
    assert_eq!(l.due(t0 + Duration::from_secs(2)), Vec::<PodUid>::new(), "one renewed, one committed");
    assert_eq!(l.due(t0 + Duration::from_secs(6)), vec![uid(1)]);
    assert_eq!(l.next_deadline(), None);
}

#[test]
fn a_removed_pod_leaves_a_tombstone_until_it_reserves_again() {
    let mut l = Ledger::default();
    let at = Deadline::now() + Duration::from_secs(30);
    reserve(&mut l, &uid(1), vec![charge(0, 1, 10, 1)], at).unwrap();
    assert!(l.remove(&uid(1), Instant::now()).is_some());
    assert!(l.was_released(&uid(1)));
    assert!(l.remove(&uid(1), Instant::now()).is_none(), "removed once");
    reserve(&mut l, &uid(1), vec![charge(0, 1, 10, 1)], at).unwrap();
    assert!(!l.was_released(&uid(1)));
}

#[test]
fn a_held_pod_keeps_a_committed_state_and_an_unbound_one_gets_a_deadline() {
    let mut l = Ledger::default();
    let at = Deadline::now();
    let rec = || Record::unreadable();
    l.hold(&uid(1), false, (vec![charge(0, 1, 10, 1)].into(), rec()), at);
    assert!(!l.is_committed(&uid(1)));
    assert_eq!(l.next_deadline(), Some(at));
    l.hold(&uid(1), true, (vec![charge(0, 1, 10, 1)].into(), rec()), at);
    assert!(l.is_committed(&uid(1)));
    l.hold(&uid(1), false, (vec![charge(0, 1, 20, 1)].into(), rec()), at);
    assert!(l.is_committed(&uid(1)), "an unbound echo does not undo a commit");
    assert_eq!(l.due(at), Vec::<PodUid>::new());
}

#[derive(Clone, Debug)]
enum Op {
    Reserve { pod: usize, dev: usize, slots: u32, mem: u64, cores: u32, ttl: u64 },
    Commit(usize),
    Remove(usize),
    Lapse(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..8usize, 0..DEVICES, 0..3u32, 0..700u64, 0..70u32, 1..10u64)
            .prop_map(|(pod, dev, slots, mem, cores, ttl)| Op::Reserve { pod, dev, slots, mem, cores, ttl }),
        1 => (0..8usize).prop_map(Op::Commit),
        1 => (0..8usize).prop_map(Op::Remove),
        1 => (0..10u64).prop_map(Op::Lapse),
    ]
}

proptest! {
    /// Whatever the order of reservations, commits, removals and lapses, every device stays
    /// within its count, memory and cores, and an accepted reservation is exactly what the pod
    /// then holds.
    #[test]
    fn no_sequence_of_operations_over_commits_a_device(ops in proptest::collection::vec(op(), 1..60)) {
        let mut l = Ledger::default();
        let t0 = Deadline::now();
        let mut now = 0;
        for op in ops {
            match op {
                Op::Reserve { pod, dev, slots, mem, cores, ttl } => {
                    let c = charge(dev, slots, mem, cores);
                    let before = l.usage(&base(), &[]);
                    match reserve(&mut l, &uid(pod), vec![c.clone()], t0 + Duration::from_secs(now + ttl)) {
                        Ok(after) => {
                            prop_assert_eq!(l.get(&uid(pod)).map(|a| a.charges.to_vec()), Some(vec![c]));
                            prop_assert_eq!(&after, &l.usage(&base(), &[]));
                        }
                        Err(_) => prop_assert_eq!(before, l.usage(&base(), &[])),
                    }
                }
                Op::Commit(pod) => {
                    let had = l.contains(&uid(pod));
                    prop_assert_eq!(l.commit(&uid(pod)), had);
                }
                Op::Remove(pod) => {
                    l.remove(&uid(pod), Instant::now());
                    prop_assert!(!l.contains(&uid(pod)));
                }
                Op::Lapse(by) => {
                    now += by;
                    for u in l.due(t0 + Duration::from_secs(now)) {
                        prop_assert!(!l.is_committed(&u), "a committed pod never lapses");
                        l.remove(&u, Instant::now());
                    }
                }
            }
            prop_assert!(within(&l), "over-committed: {:?}", l.usage(&base(), &[]));
        }
    }
}
