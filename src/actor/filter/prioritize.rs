//! kube-scheduler's prioritize call (`--filter-result=all`): hami-rs's node-policy score of each
//! node on the extender scale kube-scheduler accepts (0 to 10). The filter keeps the scores it
//! ranked by, taken before its own reservation changed the best node's usage, so both calls
//! agree; a pod the filter did not score here (a restart between the two calls, a forgotten
//! entry) is evaluated afresh, read-only.

use std::borrow::Cow;
use std::sync::Arc;

#[cfg(test)]
use crate::actor::books::scores::KEPT_MAX;
pub use crate::actor::books::scores::{FIT_FLOOR, MAX_EXTENDER_PRIORITY, ScoreBook, Scored, extender_scores};
use crate::actor::filter::cycle::FilterCycle;
use crate::actor::{Candidates, FilterError, Inner};
use crate::model::{NodeName, PodRequest, PodView};
use crate::port::{Backend, PodRef};

impl<B: Backend> Inner<B> {
    /// kube-scheduler's prioritize call: each of `names` scored for the pod (see
    /// [`extender_scores`]). A pod that asks for no device scores 0 everywhere, leaving the
    /// choice to kube-scheduler's own plugins.
    pub async fn prioritize(
        self: &Arc<Self>,
        pod: &PodView,
        names: &[Cow<'_, str>],
    ) -> Result<Vec<(String, i64)>, FilterError> {
        let req = self.request_of(pod)?;
        if !req.requests_devices() {
            return Ok(names.iter().map(|n| (n.to_string(), 0)).collect());
        }
        let scored = match self.pods.scores.get(&req.uid) {
            Some(s) => s,
            None => {
                // Not scored by a filter here: the published snapshots, reserving nothing.
                let names = Candidates::names(names);
                let cycle = FilterCycle { e: self, pod, pref: PodRef::of(pod), req, names: &names };
                let mut eval = cycle.evaluate().await.ok_or(FilterError::Stopping)?;
                eval.rank_all();
                Arc::new(self.scored(&eval.ranked, None, &cycle.pref, &cycle.req))
            }
        };
        Ok(extender_scores(names, &scored).into_iter().map(|(n, s)| (n.to_owned(), s)).collect())
    }
}

impl<B: Backend> Inner<B> {
    /// What the filter ranked, with the nodes whose lock another pod's bind holds.
    pub(in crate::actor) fn scored(
        self: &Arc<Self>,
        fits: &[(NodeName, f32, ())],
        reserved: Option<NodeName>,
        pref: &PodRef,
        req: &PodRequest,
    ) -> Scored {
        let kinds = self.lock_kinds(req);
        let mut s = Scored::new(req.node_policy, reserved, fits.iter().map(|(n, s, _)| (n.clone(), *s)).collect());
        s.locked = fits
            .iter()
            .filter(|(n, ..)| self.lock_taken(n.as_str(), pref, &kinds).is_some())
            .map(|(n, ..)| n.clone())
            .collect();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PodUid;
    use crate::model::request::NodePolicy;

    fn scored(policy: NodePolicy, reserved: Option<&str>, scores: &[(&str, f32)], locked: &[&str]) -> Scored {
        let mut s = Scored::new(
            policy,
            reserved.map(NodeName::new),
            scores.iter().map(|(n, s)| (NodeName::new(n), *s)).collect(),
        );
        s.locked = locked.iter().map(|n| NodeName::new(n)).collect();
        s
    }

    fn names(n: &[&'static str]) -> Vec<Cow<'static, str>> {
        n.iter().map(|s| Cow::Borrowed(*s)).collect()
    }

    #[test]
    fn scores_follow_the_policy_with_the_reserved_node_on_top() {
        let all = names(&["a", "b", "c", "d", "gone"]);
        // (policy, reserved, scores, locked, expected per name)
        type Row<'a> = (NodePolicy, Option<&'a str>, &'a [(&'a str, f32)], &'a [&'a str], &'a [i64]);
        let table: &[Row] = &[
            // binpack: the fuller the higher; the reserved node 10 although its score is lower.
            (
                NodePolicy::Binpack,
                Some("b"),
                &[("a", 30.0), ("b", 20.0), ("c", 10.0), ("d", 20.0)],
                &[],
                &[9, 10, 7, 8, 0],
            ),
            // spread: the emptier the higher.
            (
                NodePolicy::Spread,
                Some("c"),
                &[("a", 30.0), ("b", 20.0), ("c", 10.0), ("d", 20.0)],
                &[],
                &[7, 8, 10, 8, 0],
            ),
            // equal scores: all just below the reserved node.
            (NodePolicy::Binpack, Some("a"), &[("a", 5.0), ("b", 5.0), ("c", 5.0)], &[], &[10, 9, 9, 0, 0]),
            // a locked node scores the floor and leaves the scale to the others.
            (NodePolicy::Binpack, Some("b"), &[("a", 90.0), ("b", 20.0), ("c", 10.0)], &["a"], &[7, 10, 7, 0, 0]),
            // nothing reserved (scored afresh): the best of the policy gets 9.
            (NodePolicy::Binpack, None, &[("a", 1.0), ("b", 3.0)], &[], &[7, 9, 0, 0, 0]),
        ];
        for (policy, reserved, scores, locked, want) in table {
            let s = scored(*policy, *reserved, scores, locked);
            let got: Vec<i64> = extender_scores(&all, &s).into_iter().map(|(_, v)| v).collect();
            assert_eq!(&got[..], *want, "{policy:?} reserved {reserved:?} scores {scores:?} locked {locked:?}");
        }
    }

    #[test]
    fn every_score_is_within_the_fitting_band_and_keeps_the_order() {
        // Property: for any scores, a fitting node's answer is within the band below the
        // reserved node's 10 and never ranks a worse node (by the policy) above a better one.
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as f32 / 1e6
        };
        let list: Vec<&'static str> = vec!["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"];
        let all = names(&list);
        for policy in [NodePolicy::Binpack, NodePolicy::Spread] {
            for _ in 0..500 {
                let scores: Vec<(&str, f32)> = list.iter().map(|n| (*n, next())).collect();
                let s = scored(policy, None, &scores, &[]);
                let got = extender_scores(&all, &s);
                for (i, (_, a)) in got.iter().enumerate() {
                    assert!((FIT_FLOOR..MAX_EXTENDER_PRIORITY).contains(a), "{got:?}");
                    for (j, (_, b)) in got.iter().enumerate() {
                        let better = match policy {
                            NodePolicy::Spread => scores[i].1 < scores[j].1,
                            _ => scores[i].1 > scores[j].1,
                        };
                        assert!(!better || a >= b, "{policy:?}: {scores:?} -> {got:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_book_forgets_and_stays_bounded() {
        let book = ScoreBook::default();
        for k in 0..KEPT_MAX + 10 {
            book.note(PodUid::new(&format!("u{k}")), scored(NodePolicy::Binpack, None, &[], &[]));
        }
        assert!(book.len() <= KEPT_MAX);
        let last = PodUid::new(&format!("u{}", KEPT_MAX + 9));
        assert!(book.get(&last).is_some());
        book.forget(&last);
        assert!(book.get(&last).is_none());
    }
}
