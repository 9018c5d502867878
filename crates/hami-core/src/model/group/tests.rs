use super::*;
use crate::model::pod::SchedulingGroupView;
use proptest::prelude::*;
use serde_json::json;

fn pod(f: impl FnOnce(&mut PodView)) -> PodView {
    let mut p = PodView::default();
    p.metadata.namespace = "ml".into();
    p.metadata.name = "a-0".into();
    f(&mut p);
    p
}

fn kind_and_name(p: &PodView) -> Option<(GroupKind, String)> {
    group_of(p).map(|(id, _)| (id.kind, id.name.to_string()))
}

#[test]
fn the_first_way_a_pod_is_linked_names_its_group() {
    let native =
        |p: &mut PodView| p.spec.scheduling_group = Some(SchedulingGroupView { pod_group_name: Some("nat".into()) });
    let label = |p: &mut PodView| {
        p.metadata.labels.insert(COSCHEDULING_LABEL.into(), "cos".into());
    };
    let volcano = |p: &mut PodView| {
        p.metadata.annotations.insert(VOLCANO_ANNOTATION.into(), "vol".into());
    };
    let koord = |p: &mut PodView| {
        p.metadata.annotations.insert(KOORDINATOR_NAME.into(), "koo".into());
        p.metadata.annotations.insert(KOORDINATOR_MIN.into(), "3".into());
    };
    type Case = (&'static str, PodView, Option<(GroupKind, &'static str)>);
    let cases: Vec<Case> = vec![
        ("no group", pod(|_| {}), None),
        ("native", pod(native), Some((GroupKind::Native, "nat"))),
        ("coscheduling", pod(label), Some((GroupKind::Coscheduling, "cos"))),
        ("volcano", pod(volcano), Some((GroupKind::Volcano, "vol"))),
        ("koordinator", pod(koord), Some((GroupKind::Koordinator, "koo"))),
        (
            "native before all",
            pod(|p| {
                native(p);
                label(p);
                volcano(p);
                koord(p)
            }),
            Some((GroupKind::Native, "nat")),
        ),
        (
            "label before annotations",
            pod(|p| {
                label(p);
                volcano(p);
                koord(p)
            }),
            Some((GroupKind::Coscheduling, "cos")),
        ),
        (
            "empty values link nothing",
            pod(|p| {
                p.spec.scheduling_group = Some(SchedulingGroupView { pod_group_name: Some(String::new()) });
                p.metadata.labels.insert(COSCHEDULING_LABEL.into(), String::new());
                volcano(p)
            }),
            Some((GroupKind::Volcano, "vol")),
        ),
        (
            "a koordinator gang without a minimum is none",
            pod(|p| {
                p.metadata.annotations.insert(KOORDINATOR_NAME.into(), "koo".into());
                p.metadata.annotations.insert(KOORDINATOR_MIN.into(), "many".into());
            }),
            None,
        ),
    ];
    for (what, p, want) in cases {
        assert_eq!(kind_and_name(&p), want.map(|(k, n)| (k, n.to_owned())), "{what}");
    }
    let (id, spec) = group_of(&pod(|p| {
        koord(p);
        p.metadata.annotations.insert(KOORDINATOR_WAIT.into(), "90s".into());
    }))
    .expect("a gang");
    assert_eq!(id.to_string(), "ml/koo");
    assert_eq!(spec, Some(GroupSpec { min: 3, timeout: Some(Duration::from_secs(90)), failed: false }));
}

#[test]
fn group_objects_of_each_kind_give_their_minimum_and_timeout() {
    let cases = [
        (
            json!({"apiVersion":"scheduling.x-k8s.io/v1alpha1","kind":"PodGroup","metadata":{"name":"train-a","namespace":"ml"},
                   "spec":{"minMember":4,"scheduleTimeoutSeconds":120}}),
            GroupKind::Coscheduling,
            Some(GroupSpec { min: 4, timeout: Some(Duration::from_secs(120)), failed: false }),
        ),
        (
            json!({"apiVersion":"scheduling.k8s.io/v1beta1","kind":"PodGroup","metadata":{"name":"train-b","namespace":"ml"},
                   "spec":{"schedulingPolicy":{"gang":{"minCount":2}}}}),
            GroupKind::Native,
            Some(GroupSpec { min: 2, timeout: None, failed: false }),
        ),
        (
            json!({"apiVersion":"scheduling.k8s.io/v1beta1","kind":"PodGroup","metadata":{"name":"basic","namespace":"ml"},
                   "spec":{"schedulingPolicy":{"basic":{}}}}),
            GroupKind::Native,
            None,
        ),
        (
            json!({"apiVersion":"scheduling.k8s.io/v1beta1","kind":"PodGroup","metadata":{"name":"failed","namespace":"ml"},
                   "spec":{"schedulingPolicy":{"gang":{"minCount":2}}},
                   "status":{"conditions":[{"type":"PodGroupInitiallyScheduled","status":"False","reason":"Unschedulable"}]}}),
            GroupKind::Native,
            Some(GroupSpec { min: 2, timeout: None, failed: true }),
        ),
        (
            json!({"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"PodGroup","metadata":{"name":"v","namespace":"ml"},
                   "spec":{"minMember":3}}),
            GroupKind::Volcano,
            Some(GroupSpec { min: 3, timeout: None, failed: false }),
        ),
        (
            json!({"apiVersion":"scheduling.x-k8s.io/v1alpha1","kind":"PodGroup","metadata":{"name":"zero","namespace":"ml"},
                   "spec":{"minMember":0}}),
            GroupKind::Coscheduling,
            None,
        ),
    ];
    for (v, kind, spec) in cases {
        let o = PodGroupObject::from_value(&v).expect("reads");
        assert_eq!((o.id.kind, o.spec), (kind, spec), "{v}");
        assert_eq!(&*o.id.namespace, "ml");
    }
    let other = json!({"apiVersion":"v1","kind":"PodGroup","metadata":{"name":"x"}});
    assert_eq!(PodGroupObject::from_value(&other), Err(GroupError::Kind("v1".into())));
    let nameless = json!({"apiVersion":"scheduling.x-k8s.io/v1alpha1","kind":"PodGroup","metadata":{}});
    assert_eq!(PodGroupObject::from_value(&nameless), Err(GroupError::Name));
}

#[test]
fn durations_read_as_go_writes_them() {
    let cases = [
        ("90", Some(90_000)),
        ("90s", Some(90_000)),
        ("5m", Some(300_000)),
        ("1h30m", Some(5_400_000)),
        ("500ms", Some(500)),
        ("", None),
        ("s", None),
        ("3d", None),
        ("-5s", None),
    ];
    for (text, millis) in cases {
        assert_eq!(parse_duration(text).map(|d| d.as_millis() as u64), millis, "{text:?}");
    }
}

proptest! {
    #[test]
    fn no_text_panics_a_reader(s in ".{0,24}", v in any::<u64>()) {
        let _ = parse_duration(&s);
        let obj = json!({"apiVersion": s, "metadata": {"name": s}, "spec": {"minMember": v}});
        let _ = PodGroupObject::from_value(&obj);
    }

    #[test]
    fn hours_minutes_and_seconds_add_up(h in 0u64..100, m in 0u64..60, s in 0u64..60) {
        prop_assert_eq!(parse_duration(&format!("{h}h{m}m{s}s")), Some(Duration::from_secs(h * 3600 + m * 60 + s)));
    }
}
