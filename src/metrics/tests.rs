use super::*;

#[test]
fn rejection_counts_sum_over_nodes_before_recording() {
    use crate::model::reason::Tally;
    let mut c = RejectionCounts::default();
    let mut t = Tally::new(2);
    t.add(Reason::CardInsufficientMemory, 2);
    c.add(&Rejection::Devices(t));
    c.add(&Rejection::Devices(t));
    c.add(&Rejection::NodeUnregistered);
    c.add(&Rejection::NodeInsufficientDevice { requested: 2, available: 1 });
    assert_eq!(c.devices[Reason::CardInsufficientMemory as usize], 4);
    assert_eq!((c.unregistered, c.insufficient_device, c.other), (1, 1, 0));
}

#[test]
fn the_hot_handles_are_indexed_by_declaration_order() {
    // `Hot` indexes its handles with `as usize`: each list must follow its enum's order.
    for (k, o) in OUTCOMES.iter().enumerate() {
        assert_eq!(*o as usize, k, "{o:?}");
    }
    for (k, p) in PHASES.iter().enumerate() {
        assert_eq!(*p as usize, k, "{p:?}");
    }
    // The rejection handles follow `Reason::ALL`, which `RejectionCounts` indexes `as usize`.
    for (k, r) in crate::model::reason::Reason::ALL.iter().enumerate() {
        assert_eq!(*r as usize, k, "{r:?}");
    }
}
