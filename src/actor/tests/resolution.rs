//! Filter's resolved candidate lists: a list kube-scheduler repeats is looked up in the address
//! book once, and what changed since (nodes joining or leaving, usage) is still seen.

use crate::actor::tests::*;

fn whole(name: &str) -> PodBuilder {
    pod().gpu(1).mem_mib(12000).name(name)
}

#[actix::test]
async fn a_node_registered_after_its_list_was_resolved_is_a_candidate_the_next_time() {
    let (e, b) = engine(&[node("x").gpus(1, 16384)]).await;
    assert!(matches!(filter(&e, &b, &whole("p1"), &["y"]).await, FilterOutcome::NoFit { .. }));
    let y = node("y").gpus(1, 16384);
    b.insert_node(y.view());
    assert!(matches!(e.register_node(Arc::new(y.view())).await, Registration::Ok { .. }));
    assert_eq!(chosen(&filter(&e, &b, &whole("p2"), &["y"]).await), "y");
}

#[actix::test]
async fn a_node_removed_after_its_list_was_resolved_is_no_candidate() {
    let (e, b) = engine(&[node("x").gpus(1, 16384), node("y").gpus(1, 16384)]).await;
    let running = pod().gpu(1).mem_mib(1024).name("running").placed("x", "GPU-x-0,NVIDIA,1024,0:;").bound_to("x");
    observe(&e, &b, &running).await;
    // Binpack prefers the node already in use.
    assert_eq!(chosen(&filter(&e, &b, &small("p1"), &["x", "y"]).await), "x");
    e.remove_node("x");
    b.remove_node("x");
    match filter(&e, &b, &small("p2"), &["x", "y"]).await {
        FilterOutcome::Chosen { node, failed, .. } => {
            assert_eq!(node.as_str(), "y");
            assert!(failed.render().contains_key("x"), "{:?}", failed.render());
        }
        other => panic!("expected y, got {other:?}"),
    }
}

#[actix::test]
async fn usage_changed_since_the_list_was_resolved_is_seen() {
    // The resolution keeps each node's snapshot handle, not the snapshot it found: the second pod
    // sees the first one's reservation.
    let (e, b) = engine(&[node("x").gpus(1, 16384)]).await;
    assert_eq!(chosen(&filter(&e, &b, &whole("p1"), &["x"]).await), "x");
    assert!(matches!(filter(&e, &b, &whole("p2"), &["x"]).await, FilterOutcome::NoFit { .. }));
    assert_eq!(used(&e, "x"), (1, 12000, 0));
}

fn small(name: &str) -> PodBuilder {
    pod().gpu(1).mem_mib(2048).name(name)
}
