//! Filter's answer tables per pod shape over a resolved candidate list, and the ranking of the
//! best candidates selected from them.

use proptest::prelude::*;

use super::candidates::{Placed, Resolution, Table};
use super::evaluate::{Evaluation, RANKED_FIRST};
use super::*;
use crate::actor::node::{NodeActor, SnapCell};
use crate::model::request::NodePolicy;

fn owned(names: &[String]) -> Vec<Cow<'static, str>> {
    names.iter().map(|n| Cow::Owned(n.clone())).collect()
}

/// The list the engine resolved for `names`.
fn list_of(e: &Mem, names: &[Cow<'_, str>]) -> Arc<Resolution> {
    let list = e.inner.nodes.resolve(&Candidates::names(names));
    assert!(list.is_for(names));
    list
}

#[actix::test]
async fn only_the_node_that_changed_is_answered_again_and_unchanged_ones_keep_their_generation() {
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384), node("c").gpus(1, 16384)]).await;
    let like = |n: &str| pod().gpu(1).mem_mib(10000).name(n);
    assert_eq!(chosen(&filter(&e, &b, &like("p1"), &["a", "b", "c"]).await), "a");
    let list = list_of(&e, &names(&["a", "b", "c"]));
    let key = like("p2").request_with(&vendors()).fit_key;
    let table = list.take_table(key);
    let generation = |k: u32| list.generation(k).unwrap();
    // The board holds the generation of each handle's snapshot.
    assert!((0..3).all(|k| list.cell(k).unwrap().load().generation == generation(k)));
    // `a` took the reservation after it was answered: its answer is for an older snapshot.
    assert!(!table.current(0, generation(0)));
    assert!(table.current(1, generation(1)) && table.current(2, generation(2)));
    list.put_table(table);
    assert_eq!(chosen(&filter(&e, &b, &like("p2"), &["a", "b", "c"]).await), "b", "a is full now");
    let table = list.take_table(key);
    assert!((0..3).all(|k| table.current(k, generation(k)) == (k != 1)), "b took p2 after it was answered");
}

#[actix::test]
async fn a_filter_that_finds_its_table_in_use_answers_every_node_itself() {
    // Another filter of the same shape holds the table: this one starts a fresh one.
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384)]).await;
    let like = |n: &str| pod().gpu(1).mem_mib(10000).name(n);
    assert_eq!(chosen(&filter(&e, &b, &like("p1"), &["a", "b"]).await), "a");
    let list = list_of(&e, &names(&["a", "b"]));
    let held = list.take_table(like("p2").request_with(&vendors()).fit_key);
    assert_eq!(chosen(&filter(&e, &b, &like("p2"), &["a", "b"]).await), "b");
    assert!(matches!(filter(&e, &b, &like("p3"), &["a", "b"]).await, FilterOutcome::NoFit { .. }));
    // The stale table handed back later is replaced by the next filter's, never read as current.
    list.put_table(held);
    let FilterOutcome::NoFit { failed } = filter(&e, &b, &like("p4"), &["a", "b"]).await else {
        panic!("both nodes are full");
    };
    assert_eq!(failed.hami()["a"], "1/1 CardInsufficientMemory", "{failed:?}");
}

#[actix::test]
async fn when_the_best_ranked_nodes_are_all_locked_a_free_node_further_down_is_chosen() {
    // Equal scores rank by name; the first RANKED_FIRST are held by other pods' binds.
    let n = RANKED_FIRST + 6;
    let nodes: Vec<NodeBuilder> = (0..n).map(|i| node(&format!("n{i:03}")).gpus(1, 16384)).collect();
    let (e, b) = engine(&nodes).await;
    for i in 0..RANKED_FIRST {
        let addr = e.inner.nodes.book.get(format!("n{i:03}").as_str()).map(|n| n.addr.clone()).unwrap();
        assert!(addr.send(Lock { uid: PodUid::new(&format!("uid-other-{i}")), queue: false }).await.unwrap());
    }
    let all: Vec<String> = (0..n).map(|i| format!("n{i:03}")).collect();
    let p = pod().gpu(1).mem_mib(2048).name("p1");
    b.insert_pod(p.view());
    let out = e.filter(&p.view(), &owned(&all)).await;
    assert_eq!(chosen(&out), format!("n{RANKED_FIRST:03}"), "the first free node, not a locked one");
}

#[test]
fn a_table_taken_twice_is_fresh_the_second_time_and_kept_once() {
    let list = Resolution::new(0, &names(&["a", "b"]), None, Default::default(), |_| None);
    let key = pod().gpu(1).name("p").request_with(&vendors()).fit_key;
    let mut first = list.take_table(key);
    let snap = crate::sched::NodeSnapshot {
        generation: 7,
        ..NodeActor::initial_snapshot(&NodeName::new("a"), &vendors()).as_ref().clone()
    };
    first.set(0, &snap, Ok(1.0), 0);
    let second = list.take_table(key);
    assert!(!second.current(0, 7), "a table in use is not shared");
    list.put_table(second);
    list.put_table(first);
    let kept = list.take_table(key);
    assert!(kept.current(0, 7), "the table put back last is kept");
    assert!(!list.take_table(key).current(0, 7), "and only once");
    assert_eq!(Table::fresh(key, 2).answer(1), Ok(0.0));
}

/// A few answers of each kind: fits, device tallies of different reasons, node-level rejections.
fn any_answer() -> impl Strategy<Value = Result<f32, Rejection>> {
    use crate::sched::reason::{Need, Reason, Tally};
    prop_oneof![
        (0.0f32..10.0).prop_map(Ok),
        (1usize..8, 0usize..4).prop_map(|(total, r)| {
            let mut t = Tally::new(total);
            let reason = [
                Reason::CardInsufficientMemory,
                Reason::CardInsufficientCore,
                Reason::NumaNotFit,
                Reason::CardTypeMismatch,
            ][r];
            t.reject(reason, 0, Need::None);
            t.add(Reason::CardInsufficientMemory, total - 1);
            Err(Rejection::Devices(t))
        }),
        Just(Err(Rejection::NodeInsufficientDevice { requested: 2, available: 1 })),
        Just(Err(Rejection::NodeUnusable)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// The rejection counts a table keeps as answers change are those of the answers it holds.
    #[test]
    fn a_tables_rejection_counts_follow_its_answers(sets in prop::collection::vec((0u32..6, any_answer()), 0..40)) {
        let key = pod().gpu(1).name("p").request_with(&vendors()).fit_key;
        let mut table = Table::fresh(key, 6);
        let base = NodeActor::initial_snapshot(&NodeName::new("a"), &vendors());
        let mut held: Vec<Option<Result<f32, Rejection>>> = vec![None; 6];
        for (g, (k, answer)) in sets.into_iter().enumerate() {
            let snap = crate::sched::NodeSnapshot { generation: g as u64, ..base.as_ref().clone() };
            table.set(k, &snap, answer, k);
            held[k as usize] = Some(answer);
        }
        let mut want = crate::metrics::RejectionCounts::default();
        for r in held.iter().flatten().filter_map(|a| a.err()) {
            want.add(&r);
        }
        prop_assert_eq!(*table.counts(), want);
    }

    /// The best candidates a table keeps in order, as answers change turn after turn, and the
    /// best selected from a list answered afresh, rank as sorting every fitting node would; ranking
    /// everything afterwards gives that whole order.
    #[test]
    fn the_best_kept_or_selected_rank_as_a_full_sort(
        first in prop::collection::vec(any_score_or_rejection(), 1..200),
        turns in prop::collection::vec(prop::collection::vec((any::<prop::sample::Index>(), any_score_or_rejection()), 0..12), 1..6),
        spread in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let policy = if spread { NodePolicy::Spread } else { NodePolicy::Binpack };
        // Names in an order unrelated to the list's, so ties are broken by name, not by place.
        let names: Vec<String> =
            (0..first.len()).map(|i| format!("n{:016x}", (i as u64 ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15))).collect();
        let board = Arc::new(read_side::Board::default());
        let cells: std::collections::HashMap<String, Arc<SnapCell>> = names
            .iter()
            .map(|n| (n.clone(), SnapCell::on_board(NodeActor::initial_snapshot(&NodeName::new(n), &vendors()), &board)))
            .collect();
        let list = Arc::new(Resolution::new(0, &owned(&names), None, board, |n| cells.get(n).cloned()));
        let key = pod().gpu(1).name("p").request_with(&vendors()).fit_key;
        let base = NodeActor::initial_snapshot(&NodeName::new("a"), &vendors());
        let mut table = Table::fresh(key, names.len());
        let mut held = first.clone();
        let mut generation = 0;
        let mut set = |table: &mut Table, k: usize, answer: Result<f32, Rejection>| {
            generation += 1;
            let snap = crate::sched::NodeSnapshot { generation, ..base.as_ref().clone() };
            table.set(k as u32, &snap, answer, list.name_rank(k as u32));
        };
        for (k, a) in first.iter().enumerate() {
            set(&mut table, k, *a);
        }
        for turn in turns {
            for (at, answer) in turn {
                let k = at.index(names.len());
                set(&mut table, k, answer);
                held[k] = answer;
            }
            let mut want: Vec<(NodeName, f32, ())> = held
                .iter()
                .enumerate()
                .filter_map(|(k, a)| a.ok().map(|s| (list.name(k as u32).clone(), s, ())))
                .collect();
            score::rank_nodes(&mut want, policy);
            let (best, n_fit) = table.best(&list, policy, RANKED_FIRST);
            prop_assert_eq!(n_fit, want.len());
            let named = |p: &[Placed]| p.iter().map(|(_, s, k)| (list.name(*k).clone(), *s, ())).collect::<Vec<_>>();
            let cut = RANKED_FIRST.min(want.len());
            prop_assert_eq!(&named(&best)[..], &want[..cut]);
            let selected = Evaluation::select_best(list.placed(&table.answers(), policy));
            prop_assert_eq!(&named(&selected)[..], &want[..cut]);
            let mut eval = Evaluation::of_list(list.clone(), table.answers(), best, n_fit, policy);
            prop_assert_eq!(&eval.ranked[..], &want[..cut]);
            eval.rank_all();
            prop_assert_eq!(&eval.ranked[..], &want[..]);
        }
    }
}

/// A score, or a rejection (which takes a candidate out of the ranking).
fn any_score_or_rejection() -> impl Strategy<Value = Result<f32, Rejection>> {
    prop_oneof![
        4 => prop_oneof![Just(0.0f32), Just(-0.0), Just(1.0), Just(2.5), 0.0f32..10.0, -10.0f32..0.0, Just(f32::MAX)].prop_map(Ok),
        1 => Just(Err(Rejection::NodeUnusable)),
    ]
}

#[test]
fn a_list_is_recognised_only_by_the_same_names_in_the_same_order() {
    let list = Resolution::new(1, &names(&["ab", "c", "node-10"]), None, Default::default(), |_| None);
    assert!(list.is_for(&names(&["ab", "c", "node-10"])));
    for other in [
        &["a", "bc", "node-10"][..],
        &["ab", "c", "node-1"],
        &["ab", "c", "node-100"],
        &["c", "ab", "node-10"],
        &["ab", "c"],
        &["ab", "c", "node-10", "d"],
        &["", "abc", "node-10"],
    ] {
        assert!(!list.is_for(&names(other)), "{other:?}");
    }
    let empty = Resolution::new(1, &[], None, Default::default(), |_| None);
    assert!(empty.is_for(&[]) && !empty.is_for(&names(&[""])));
}

#[actix::test]
async fn a_filters_failures_stay_as_answered_while_later_filters_change_the_table() {
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384), node("c").gpus(1, 4096)]).await;
    let like = |n: &str| pod().gpu(1).mem_mib(10000).name(n);
    let first = filter(&e, &b, &like("p1"), &["a", "b", "c"]).await;
    let FilterOutcome::Chosen { node, failed, .. } = &first else { panic!("fits: {first:?}") };
    assert_eq!(node.as_str(), "a");
    let FilterOutcome::Chosen { failed: later, .. } = filter(&e, &b, &like("p2"), &["a", "b", "c"]).await else {
        panic!("b fits");
    };
    // The second filter answered `a` again (full now) in the same table.
    assert_eq!(later.render().keys().collect::<Vec<_>>(), ["a", "c"]);
    assert_eq!(failed.len(), 1);
    let first_failed = failed.render();
    assert_eq!(first_failed.keys().collect::<Vec<_>>(), ["c"], "the first filter's answers are its own");
    assert!(first_failed["c"].starts_with("1/1 CardInsufficientMemory"), "{first_failed:?}");
}

#[test]
fn a_table_changed_while_its_answers_are_held_copies_them_first() {
    let key = pod().gpu(1).name("p").request_with(&vendors()).fit_key;
    let mut table = Table::fresh(key, 2);
    let base = NodeActor::initial_snapshot(&NodeName::new("a"), &vendors());
    let at = |g: u64| crate::sched::NodeSnapshot { generation: g, ..base.as_ref().clone() };
    table.set(0, &at(1), Err(Rejection::NodeUnusable), 0);
    table.set(1, &at(1), Ok(2.0), 1);
    let held = table.answers();
    table.set(0, &at(2), Ok(3.0), 0);
    table.set(1, &at(2), Err(Rejection::NodeUnusable), 1);
    assert_eq!(held.scores(), [None, Some(2.0)]);
    assert_eq!(table.answers().scores(), [Some(3.0), None]);
    assert_eq!((table.answer(0), table.answer(1)), (Ok(3.0), Err(Rejection::NodeUnusable)));
}

#[actix::test]
async fn a_list_sent_again_in_the_same_text_is_known_without_reading_its_names() {
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 4096)]).await;
    let raw = r#"["a","b"]"#;
    assert!(e.known_candidates(raw).is_none(), "a text never seen is read");
    let like = |n: &str| pod().gpu(1).mem_mib(9000).name(n);
    let read = Candidates::read(names(&["a", "b"]), Some(raw));
    b.insert_pod(like("p1").view());
    assert_eq!(chosen(&e.filter_candidates(&like("p1").view(), &read).await), "a");
    let Some(known @ Candidates::Known(_)) = e.known_candidates(raw) else { panic!("the text is known now") };
    assert_eq!(known.iter().collect::<Vec<_>>(), ["a", "b"]);
    assert!(e.known_candidates(r#"["a", "b"]"#).is_none(), "another text of the same names is read again");
    // A node joining or leaving outdates every resolution: the known list is resolved again from
    // its names, and answers on the nodes as they are now.
    e.inner.nodes.outdate();
    b.insert_pod(like("p2").view());
    let FilterOutcome::NoFit { failed } = e.filter_candidates(&like("p2").view(), &known).await else {
        panic!("a holds p1, b is too small");
    };
    assert_eq!(failed.len(), 2, "{failed:?}");
    let Some(Candidates::Known(again)) = e.known_candidates(raw) else { panic!("still known") };
    assert_eq!(again.generation, e.inner.nodes.generation());
}
