//! Filter's answers kept per pod shape and node: like pods are answered from the kept answers of
//! nodes that did not change, never from before a change.

use proptest::prelude::*;

use crate::actor::tests::*;

#[actix::test]
async fn a_pod_under_a_namespace_quota_is_always_evaluated() {
    // The quota changes with allocations on other nodes, which a node's snapshot does not show.
    let v = Arc::new(vendors());
    let book = Arc::new(quota::QuotaBook::new(&v));
    book.set_quota("default", "q", &[("limits.nvidia.com/gpumem".into(), 12_000)]);
    let b = MemoryBackend::new(Duration::from_secs(300));
    let e = Engine::start(EngineConfig { arbiters: 2, ..Default::default() }, v, b.clone(), Some(book));
    for n in [node("a").gpus(1, 16384), node("b").gpus(1, 16384)] {
        b.insert_node(n.view());
        e.register_node(Arc::new(n.view())).await;
    }
    let like = |n: &str| pod().gpu(1).mem_mib(8000).name(n);
    assert_eq!(chosen(&filter(&e, &b, &like("p1"), &["a", "b"]).await), "a");
    assert!(matches!(filter(&e, &b, &like("p2"), &["a", "b"]).await, FilterOutcome::NoFit { .. }), "over quota");
    let _ = e.reports().await;
    // Neither answered from nor kept in a table.
    assert_eq!(e.inner.nodes.tables.len(), 0);
    // A pod of the same shape in a namespace without a quota is answered from a kept table.
    let free = |n: &str| pod().gpu(1).mem_mib(8000).name(n).namespace("free");
    assert_eq!(chosen(&filter(&e, &b, &free("f1"), &["a", "b"]).await), "a", "binpack: a has room");
    assert_eq!(e.inner.nodes.tables.len(), 1);
}

/// One step of a random run: filter a pod of one of four shapes (and bind it), or delete the
/// pod created `back` steps earlier.
#[derive(Clone, Debug)]
enum Step {
    Place { shape: usize, bind: bool },
    Delete { back: usize },
}

fn any_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..4, any::<bool>()).prop_map(|(shape, bind)| Step::Place { shape, bind }),
        1 => (1usize..6).prop_map(|back| Step::Delete { back }),
    ]
}

fn shape(i: usize, name: &str) -> PodBuilder {
    match i {
        0 => pod().gpu(1).mem_mib(6000).name(name),
        1 => pod().gpu(1).mem_mib(2000).cores(30).name(name),
        2 => pod().gpu(2).mem_mib(3000).name(name),
        _ => pod().gpu(1).mem_mib(1000).name(name).annotation(keys::NODE_SCHEDULER_POLICY, "spread"),
    }
}

/// Per node and device: (uuid, slots, MiB, cores).
type Usage = Vec<(String, Vec<(String, u32, u64, u32)>)>;

/// Runs `steps` on a fresh engine evaluating in `mode`: every outcome, and the usage at the end.
fn run(mode: FilterMode, steps: &[Step]) -> (Vec<FilterOutcome>, Usage) {
    actix::System::new().block_on(async {
        let nodes = [node("a").gpus(2, 16384), node("b").gpus(1, 16384), node("c").gpus(2, 8192)];
        let (e, b) = engine_with(EngineConfig { arbiters: 2, filter_mode: mode, ..Default::default() }, &nodes).await;
        let mut made: Vec<PodBuilder> = Vec::new();
        let mut outcomes = Vec::new();
        for (k, s) in steps.iter().enumerate() {
            match s {
                Step::Place { shape: i, bind } => {
                    let p = shape(*i, &format!("p{k}"));
                    let out = filter(&e, &b, &p, &["a", "b", "c"]).await;
                    if let (FilterOutcome::Chosen { node, .. }, true) = (&out, *bind) {
                        e.bind(&pref(&p), node.as_str()).await.unwrap();
                    }
                    outcomes.push(out);
                    made.push(p);
                }
                Step::Delete { back } => {
                    if let Some(p) = made.len().checked_sub(*back).map(|i| made.remove(i)) {
                        b.remove_pod("default", &p.view.metadata.name);
                        e.delete_pod(&PodUid::new(&p.view.metadata.uid));
                        let _ = e.reports().await;
                    }
                }
            }
        }
        (outcomes, usage(&e).await)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn filters_answered_from_kept_answers_decide_as_the_node_actors_do(steps in prop::collection::vec(any_step(), 1..30)) {
        // Messages mode asks each node actor, which evaluates its own state afresh: the oracle.
        prop_assert_eq!(run(FilterMode::Snapshot, &steps), run(FilterMode::Messages, &steps));
    }
}
