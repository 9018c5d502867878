//! Filter's answer tables per pod shape and node, the directory candidate lists are resolved
//! against, and the ranking of the best candidates selected from their answers.

use proptest::prelude::*;

use crate::actor::filter::candidates::{Directory, NO_SLOT, Placed, Resolution};
use crate::actor::filter::evaluate::{Evaluation, RANKED_FIRST};
use crate::actor::filter::tables::{Listed, Rejections, Table, Tables};
use crate::actor::node::{NodeActor, SnapCell};
use crate::actor::tests::*;
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

/// Candidate `k`'s board slot in `list`.
fn slot(list: &Resolution, k: u32) -> u32 {
    list.known().find(|(at, _, _)| *at == k).map(|(_, _, s)| s).unwrap()
}

#[actix::test]
async fn only_the_node_that_changed_is_answered_again_and_unchanged_ones_keep_their_generation() {
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384), node("c").gpus(1, 16384)]).await;
    let like = |n: &str| pod().gpu(1).mem_mib(10000).name(n);
    assert_eq!(chosen(&filter(&e, &b, &like("p1"), &["a", "b", "c"]).await), "a");
    let list = list_of(&e, &names(&["a", "b", "c"]));
    let key = like("p2").request_with(&vendors()).fit_key;
    let tables = &e.inner.nodes.tables;
    let table = tables.take(key);
    let generation = |k: u32| list.generation_of(k).unwrap();
    // The board holds the generation of each handle's snapshot.
    assert!((0..3).all(|k| list.cell(k).unwrap().load().generation == generation(k)));
    // `a` took the reservation after it was answered: its answer is for an older snapshot.
    assert!(!table.current(slot(&list, 0), generation(0)));
    assert!(table.current(slot(&list, 1), generation(1)) && table.current(slot(&list, 2), generation(2)));
    tables.put(table);
    assert_eq!(chosen(&filter(&e, &b, &like("p2"), &["a", "b", "c"]).await), "b", "a is full now");
    let table = tables.take(key);
    assert!(
        (0..3).all(|k| table.current(slot(&list, k), generation(k)) == (k != 1)),
        "b took p2 after it was answered"
    );
}

#[actix::test]
async fn a_filter_that_finds_its_table_in_use_answers_every_node_itself() {
    // Another filter of the same shape holds the table: this one starts a fresh one.
    let (e, b) = engine(&[node("a").gpus(1, 16384), node("b").gpus(1, 16384)]).await;
    let like = |n: &str| pod().gpu(1).mem_mib(10000).name(n);
    assert_eq!(chosen(&filter(&e, &b, &like("p1"), &["a", "b"]).await), "a");
    let tables = &e.inner.nodes.tables;
    let held = tables.take(like("p2").request_with(&vendors()).fit_key);
    assert_eq!(chosen(&filter(&e, &b, &like("p2"), &["a", "b"]).await), "b");
    assert!(matches!(filter(&e, &b, &like("p3"), &["a", "b"]).await, FilterOutcome::NoFit { .. }));
    // The stale table handed back later is used by the next filter, but only where its
    // generations are current: a and b changed since, and are answered again.
    tables.put(held);
    let FilterOutcome::NoFit { failed } = filter(&e, &b, &like("p4"), &["a", "b"]).await else {
        panic!("both nodes are full");
    };
    assert_eq!(failed.hami()["a"], "1/1 CardInsufficientMemory", "{failed:?}");
    assert_eq!(failed.hami()["b"], "1/1 CardInsufficientMemory", "{failed:?}");
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
    let tables = Tables::default();
    let key = pod().gpu(1).name("p").request_with(&vendors()).fit_key;
    let mut first = tables.take(key);
    first.set(0, 7, Ok(1.0));
    let second = tables.take(key);
    assert!(!second.current(0, 7), "a table in use is not shared");
    tables.put(second);
    tables.put(first);
    assert_eq!(tables.len(), 2, "both are kept");
    let kept = tables.take(key);
    assert!(kept.current(0, 7), "the table put back last is taken first");
    assert!(!tables.take(key).current(0, 7), "and only once");
    let other = pod().gpu(2).name("p").request_with(&vendors()).fit_key;
    assert!(!tables.take(other).current(0, 7), "another shape has its own");
    assert_eq!(Table::fresh(key).score(1), None, "a fresh table knows no answer");
    assert!(!Table::fresh(key).current(NO_SLOT, 0), "a node without a slot is never current");
}

#[test]
fn tables_kept_are_bounded_and_the_least_recently_used_makes_room() {
    let tables = Tables::default();
    let keys: Vec<_> =
        (1..=40u64).map(|g| pod().gpu(1).mem_mib(g * 100).name("p").request_with(&vendors()).fit_key).collect();
    for (g, key) in keys.iter().enumerate() {
        let mut t = tables.take(*key);
        t.set(0, g as u64, Ok(0.0));
        tables.put(t);
    }
    assert!(tables.len() < keys.len(), "{} tables kept", tables.len());
    assert!(tables.take(keys[keys.len() - 1]).current(0, keys.len() as u64 - 1), "the newest is kept");
    assert!(!tables.take(keys[0]).current(0, 0), "the oldest made room");
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

    /// A table answers each slot with the last answer set there, for the generation it was set
    /// at; a slot never set is unanswered.
    #[test]
    fn a_tables_answers_are_the_last_set(
        sets in prop::collection::vec((prop_oneof![0u32..6, 60u32..200], any_answer()), 0..40),
        shared_at in 0usize..40,
    ) {
        let key = pod().gpu(1).name("p").request_with(&vendors()).fit_key;
        let mut table = Table::fresh(key);
        let mut held: Vec<Option<(u64, Result<f32, Rejection>)>> = vec![None; 200];
        // The rejections shared part way (as a filter's failures keep them) stay as they were.
        let mut shared = None;
        for (g, (slot, answer)) in sets.into_iter().enumerate() {
            if g == shared_at {
                shared = Some((table.rejections(), held.clone()));
            }
            table.set(slot, g as u64, answer);
            held[slot as usize] = Some((g as u64, answer));
        }
        if let Some((rejections, then)) = shared {
            for (slot, h) in then.iter().enumerate() {
                if let Some((_, Err(r))) = h {
                    prop_assert_eq!(rejections.get(slot as u32), *r);
                }
            }
        }
        table.set(NO_SLOT, 99, Ok(1.0));
        for (slot, h) in held.iter().enumerate() {
            let slot = slot as u32;
            match h {
                None => prop_assert_eq!(table.score(slot), None),
                Some((g, answer)) => {
                    prop_assert!(table.current(slot, *g) && !table.current(slot, g + 1));
                    let score = table.score(slot).unwrap();
                    match answer {
                        Ok(s) => prop_assert_eq!(score, *s),
                        Err(r) => prop_assert!(score.is_nan() && table.rejection(slot) == *r),
                    }
                }
            }
        }
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
        let board = Arc::new(crate::actor::books::read_side::Board::default());
        let cells: Vec<(NodeName, Arc<SnapCell>)> = names
            .iter()
            .map(|n| (NodeName::new(n), SnapCell::on_board(NodeActor::initial_snapshot(&NodeName::new(n), &vendors()), &board)))
            .collect();
        let dir = Arc::new(Directory::new(0, cells, board));
        let list = Arc::new(Resolution::new(dir, &owned(&names), None));
        let mut held = first.clone();
        for turn in std::iter::once(Vec::new()).chain(turns) {
            for (at, answer) in turn {
                held[at.index(names.len())] = answer;
            }
            let mut want: Vec<(NodeName, f32, ())> = held
                .iter()
                .enumerate()
                .filter_map(|(k, a)| a.ok().map(|s| (list.name(k as u32).clone(), s, ())))
                .collect();
            score::rank_nodes(&mut want, policy);
            let fits: Vec<Placed> = list
                .known()
                .filter_map(|(k, r, _)| held[k as usize].ok().map(|s| (score::rank_key(policy, s, r), s, k)))
                .collect();
            let named = |p: &[Placed]| p.iter().map(|(_, s, k)| (list.name(*k).clone(), *s, ())).collect::<Vec<_>>();
            let cut = RANKED_FIRST.min(want.len());
            let mut selected = fits.clone();
            let first = Evaluation::select_best(&mut selected);
            prop_assert_eq!(first, cut);
            prop_assert_eq!(&named(&selected[..first])[..], &want[..cut]);
            let mut eval = Evaluation::of_list(list.clone(), fits, Listed::new(list.clone(), Vec::new(), Rejections::default(), Vec::new()));
            prop_assert_eq!(eval.n_fit, want.len());
            prop_assert_eq!(&eval.ranked[..], &want[..cut]);
            prop_assert_eq!(eval.partly_ranked(), want.len() > cut);
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
    let board = Arc::new(crate::actor::books::read_side::Board::default());
    let dir = Arc::new(Directory::new(1, Vec::new(), board));
    let list = Resolution::new(dir.clone(), &names(&["ab", "c", "node-10"]), None);
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
    let empty = Resolution::new(dir, &[], None);
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
    assert_eq!(again.generation(), e.inner.nodes.generation());
}

/// A directory of `known` over a fresh board.
fn directory_of(known: &[&str]) -> Arc<Directory> {
    let board = Arc::new(crate::actor::books::read_side::Board::default());
    let cells = known
        .iter()
        .map(|n| {
            let name = NodeName::new(n);
            let cell = SnapCell::on_board(NodeActor::initial_snapshot(&name, &vendors()), &board);
            (name, cell)
        })
        .collect();
    Arc::new(Directory::new(0, cells, board))
}

/// What reading `raw` with the JSON parser and resolving the names gives.
fn parsed(dir: &Arc<Directory>, raw: &str) -> Option<Resolution> {
    let names: Vec<String> = serde_json::from_str(raw).ok()?;
    Some(Resolution::new(dir.clone(), &owned(&names), Some(raw)))
}

fn same(a: &Resolution, b: &Resolution) -> bool {
    a.len() == b.len() && (0..a.len() as u32).all(|k| a.name(k) == b.name(k) && a.rank(k) == b.rank(k))
}

#[test]
fn a_json_array_is_read_and_resolved_in_one_pass_as_the_parser_reads_it() {
    let dir = directory_of(&["a", "b", "node-1", "node-10", "ü"]);
    for raw in [
        r#"["a","b"]"#,
        r#" [ "node-10" , "node-1","zz", "a" ] "#,
        "[\n\"ü\",\t\"b\"\r]",
        "[]",
        " [ ] ",
        r#"["node-1","node-1"]"#,
        r#"[""]"#,
    ] {
        let read = Resolution::from_json(dir.clone(), raw).unwrap_or_else(|| panic!("{raw} is plain"));
        assert!(same(&read, &parsed(&dir, raw).unwrap()), "{raw}");
        assert!(read.was_read_from(raw));
    }
    // Escapes, and whatever is not an array of strings, are left to the parser.
    for raw in [
        r#"["a\u0062"]"#,
        r#"["a\"b"]"#,
        r#"["a","b"#,
        r#"["a",]"#,
        r#"["a" "b"]"#,
        r#"["a"]x"#,
        r#"[1]"#,
        r#"{"a":1}"#,
        "[\"a\tb\"]",
        "",
        "[",
    ] {
        assert!(Resolution::from_json(dir.clone(), raw).is_none(), "{raw:?} is not read in one pass");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Lists of known, unknown and escaped names, in any order and spacing, read again and again
    /// (so the successor guesses of earlier lists are tried, right or wrong): each is read as
    /// the parser reads it, or left to the parser where it holds an escape.
    #[test]
    fn lists_read_in_one_pass_resolve_as_parsed_ones(
        lists in prop::collection::vec(prop::collection::vec(0usize..12, 0..20), 1..6),
        pretty in any::<bool>(),
    ) {
        let known = ["n0", "n1", "n2", "n3", "n10", "n11", "gpu-a"];
        let dir = directory_of(&known);
        let pool = ["n0", "n1", "n2", "n3", "n10", "n11", "gpu-a", "n", "n1x", "a\"b", "tab\tname", ""];
        for list in lists {
            let names: Vec<&str> = list.iter().map(|i| pool[*i]).collect();
            let raw = if pretty { serde_json::to_string_pretty(&names) } else { serde_json::to_string(&names) }.unwrap();
            let want = parsed(&dir, &raw).unwrap();
            match Resolution::from_json(dir.clone(), &raw) {
                Some(read) => prop_assert!(same(&read, &want), "{}", raw),
                None => prop_assert!(raw.contains('\\'), "{} is plain", raw),
            }
        }
    }
}
