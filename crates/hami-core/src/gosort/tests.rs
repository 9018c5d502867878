use proptest::prelude::*;

use super::sort;

/// Inputs and the order Go's `sort.Sort` left them in (`gen_vectors.go` writes the file).
const VECTORS: &str = include_str!("vectors.txt");

fn parse(list: &str) -> Vec<u32> {
    list.split_whitespace().map(|x| x.parse().unwrap_or_else(|e| panic!("bad vector item {x:?}: {e}"))).collect()
}

#[test]
fn ties_land_exactly_where_go_sort_puts_them() {
    let mut cases = 0;
    for line in VECTORS.lines().filter(|l| !l.starts_with('#')) {
        let (keys, ids) = line.split_once('|').unwrap_or_else(|| panic!("bad vector line {line:?}"));
        let keys = parse(keys);
        let want = parse(ids);
        let mut items: Vec<(u32, u32)> = keys.iter().enumerate().map(|(i, k)| (*k, i as u32)).collect();
        sort(&mut items, |a, b| a.0 < b.0);
        let got: Vec<u32> = items.iter().map(|it| it.1).collect();
        assert_eq!(got, want, "keys {keys:?}");
        cases += 1;
    }
    assert!(cases > 700, "only {cases} vectors read");
}

#[test]
fn short_lists_keep_equal_items_in_input_order() {
    // Twelve or fewer items go through insertion sort, which is stable.
    let mut v = vec![(1, 'a'), (0, 'b'), (1, 'c'), (0, 'd')];
    sort(&mut v, |a, b| a.0 < b.0);
    assert_eq!(v, vec![(0, 'b'), (0, 'd'), (1, 'a'), (1, 'c')]);
}

proptest! {
    #[test]
    fn any_input_comes_out_sorted_and_complete(keys in proptest::collection::vec(0u8..6, 0..300)) {
        let mut v: Vec<(u8, usize)> = keys.iter().copied().zip(0..).collect();
        sort(&mut v, |a, b| a.0 < b.0);
        prop_assert!(v.windows(2).all(|w| w[0].0 <= w[1].0));
        let mut ids: Vec<usize> = v.iter().map(|x| x.1).collect();
        ids.sort_unstable();
        prop_assert_eq!(ids, (0..keys.len()).collect::<Vec<_>>());
    }
}
