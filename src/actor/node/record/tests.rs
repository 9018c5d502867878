use proptest::prelude::*;

use crate::actor::node::record::*;
use crate::testing;

fn base(gpus: usize) -> Vec<DeviceUsage> {
    testing::node("n").gpus(gpus, 16384).snapshot(&testing::vendors()).devices
}

fn device(uuid: &str, ty: &str, mem: u64, cores: u32) -> ContainerDevice {
    ContainerDevice::new(uuid, ty, mem, cores)
}

fn no_init() -> Layout {
    Layout { n_init: 0, sidecars: Vec::new(), init_released: false }
}

fn parts(devices: PodDevices, layout: Layout, tags: Vec<Tag>) -> Parts {
    Parts { namespace: Arc::from("team-a"), name: Arc::from("trainer-0"), devices, layout, tags }
}

fn write(p: &Parts, base: &[DeviceUsage], words: &mut Vec<Arc<str>>) -> Record {
    Record::write(&p.namespace, &p.name, &p.devices, &p.layout, &p.tags, base, words)
}

#[test]
fn a_usual_pod_takes_a_few_bytes_and_reads_back_with_the_nodes_own_strings() {
    let base = base(4);
    let id = base[2].info.id.to_string();
    let p = parts(PodDevices(vec![(VendorId(0), vec![vec![device(&id, "NVIDIA", 4000, 30)]])]), no_init(), vec![]);
    let mut words = Vec::new();
    let r = write(&p, &base, &mut words);
    // Beside the name's text: its length, the namespace's code, one vendor of one container of one
    // entry (device position, type code, memory, cores, index, no MIG), the layout and no tags.
    assert_eq!(r.len() - p.name.len(), 17);
    let back = r.read(&base, &words).expect("reads");
    assert_eq!(back, p);
    // The id is the node's own copy, not one of its own.
    let got = &back.devices.0[0].1[0][0].uuid;
    assert!(std::ptr::eq(got.as_str().as_ptr(), base[2].info.id.as_str().as_ptr()));
    assert_eq!(r.namespace(&words).as_deref(), Some("team-a"));
    // A second pod of the namespace and type word adds no word.
    let _ = write(&p, &base, &mut words);
    assert_eq!(words.len(), 2);
}

#[test]
fn every_field_reads_back_including_devices_the_node_does_not_list() {
    let base = base(2);
    let on = base[0].info.id.to_string();
    let mut mig = device("GPU-gone", "NVIDIA", 10_000, 0);
    mig.mig = Some(MigSlot { profile: Arc::from("2g.10gb"), placement: MigPlacement { start: 4, size: 2 } });
    mig.idx = 7;
    let p = parts(
        PodDevices(vec![
            (VendorId(0), vec![vec![], vec![device(&on, "NVIDIA", 1, 2), mig], vec![device(&on, "NVIDIA", 3, 4)]]),
            (VendorId(5), vec![vec![device("MLU-1", "MLU", u64::MAX, u32::MAX)], vec![], vec![]]),
        ]),
        Layout { n_init: 2, sidecars: vec![false, true], init_released: true },
        vec![
            (VendorId(0), TaskClass::Online, Some(Arc::from("high"))),
            (VendorId(5), TaskClass::Offline, None),
            (VendorId(6), TaskClass::Plain, None),
        ],
    );
    let mut words = Vec::new();
    let r = write(&p, &base, &mut words);
    assert_eq!(r.read(&base, &words), Some(p));
}

#[test]
fn words_past_the_nodes_share_are_written_out() {
    let base = base(1);
    let mut words: Vec<Arc<str>> = (0..WORDS_KEPT).map(|i| Arc::from(format!("w{i}").as_str())).collect();
    let p = parts(
        PodDevices(vec![(VendorId(0), vec![vec![device("x", "NEW-TYPE", 1, 1)]])]),
        no_init(),
        vec![(VendorId(0), TaskClass::Plain, Some(Arc::from("new-qos")))],
    );
    let r = write(&p, &base, &mut words);
    assert_eq!(words.len(), WORDS_KEPT);
    assert_eq!(r.read(&base, &words), Some(p));
}

#[test]
fn a_record_rewritten_against_new_devices_names_the_same_ids() {
    let old = base(4);
    let p = parts(
        PodDevices(vec![(VendorId(0), vec![vec![device(old[3].info.id.as_str(), "NVIDIA", 5, 5)]])]),
        no_init(),
        vec![],
    );
    let mut words = Vec::new();
    let r = write(&p, &old, &mut words);
    // The device moved to the front, another went: positions differ, ids must not.
    let new: Vec<DeviceUsage> = vec![old[3].clone(), old[0].clone()];
    let read = r.read(&old, &words).expect("reads against the list it was written with");
    let again = write(&read, &new, &mut words);
    assert_eq!(again.read(&new, &words), Some(p));
    // Read against a list too short for the position it names, it does not read.
    assert_eq!(r.read(&new, &words), None);
}

#[test]
fn a_broken_record_does_not_read() {
    let base = base(2);
    let p = parts(
        PodDevices(vec![(VendorId(0), vec![vec![device(base[1].info.id.as_str(), "NVIDIA", 300, 3)]])]),
        Layout { n_init: 1, sidecars: vec![true], init_released: false },
        vec![(VendorId(0), TaskClass::Online, None)],
    );
    let mut words = Vec::new();
    let r = write(&p, &base, &mut words);
    for n in 0..r.len() {
        assert_eq!(Record(r.0[..n].into()).read(&base, &words), None, "prefix of {n} bytes");
    }
    let mut longer = r.0.to_vec();
    longer.push(0);
    assert_eq!(Record(longer.into()).read(&base, &words), None);
    // A word code past the node's words.
    assert_eq!(r.read(&base, &words[..1]), None);
    // What an allocation keeps once its record stopped reading reads against no list.
    assert_eq!(Record::unreadable().read(&base, &words), None);
    assert_eq!(Record::unreadable().read(&[], &[]), None);
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z0-9-]{1,12}", "\\PC{0,6}"]
}

fn arb_entry(ids: Vec<String>) -> impl Strategy<Value = ContainerDevice> {
    let uuid = prop_oneof![proptest::sample::select(ids), arb_text()];
    let mig = proptest::option::of((arb_text(), any::<u32>(), any::<u32>()));
    (uuid, prop_oneof![Just("NVIDIA".to_owned()), arb_text()], any::<u64>(), any::<u32>(), any::<u32>(), mig).prop_map(
        |(uuid, ty, mem, cores, idx, mig)| {
            let mut d = ContainerDevice::new(&uuid, &ty, mem, cores);
            d.idx = idx;
            d.mig = mig.map(|(p, start, size)| MigSlot {
                profile: Arc::from(p.as_str()),
                placement: MigPlacement { start, size },
            });
            d
        },
    )
}

fn arb_parts(ids: Vec<String>) -> impl Strategy<Value = Parts> {
    let containers = proptest::collection::vec(proptest::collection::vec(arb_entry(ids), 0..3), 0..4);
    let devices = proptest::collection::vec((any::<u8>(), containers), 0..3)
        .prop_map(|v| PodDevices(v.into_iter().map(|(id, c)| (VendorId(id), c)).collect()));
    let layout = (0usize..300, proptest::collection::vec(any::<bool>(), 0..4), any::<bool>())
        .prop_map(|(n_init, sidecars, init_released)| Layout { n_init, sidecars, init_released });
    let class = prop_oneof![Just(TaskClass::Plain), Just(TaskClass::Online), Just(TaskClass::Offline)];
    let tags = proptest::collection::vec((any::<u8>(), class, proptest::option::of(arb_text())), 0..3).prop_map(|v| {
        v.into_iter().map(|(id, c, q)| (VendorId(id), c, q.map(|q| Arc::from(q.as_str())))).collect::<Vec<Tag>>()
    });
    (arb_text(), arb_text(), devices, layout, tags).prop_map(|(ns, name, devices, layout, tags)| Parts {
        namespace: Arc::from(ns.as_str()),
        name: Arc::from(name.as_str()),
        devices,
        layout,
        tags,
    })
}

proptest! {
    #[test]
    fn any_pod_reads_back_after_any_pods_before_it(
        pods in proptest::collection::vec(arb_parts(base(3).iter().map(|d| d.info.id.to_string()).collect()), 1..6),
    ) {
        let base = base(3);
        let mut words = Vec::new();
        let records: Vec<Record> = pods.iter().map(|p| write(p, &base, &mut words)).collect();
        for (p, r) in pods.iter().zip(&records) {
            prop_assert_eq!(r.read(&base, &words), Some(p.clone()));
            prop_assert_eq!(r.namespace(&words), Some(p.namespace.clone()));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let words: Vec<Arc<str>> = vec![Arc::from("a")];
        let r = Record(bytes.into());
        let _ = r.read(&base(2), &words);
        let _ = r.namespace(&words);
    }
}
