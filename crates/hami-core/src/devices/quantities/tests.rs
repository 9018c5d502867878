use super::*;

fn text(s: &str) -> QuantityText {
    QuantityText(s.to_owned())
}

#[test]
fn counts_must_be_whole_numbers_within_int32() {
    // HAMi reads counts with AsInt64 into an int32 and skips anything else as "no request";
    // hami-rs refuses every count it cannot use, and reads 0 as no request.
    let cases: [(&str, Result<Option<u32>, &str>); 12] = [
        ("1", Ok(Some(1))),
        ("2k", Ok(Some(2000))),
        ("2147483647", Ok(Some(2_147_483_647))),
        ("0", Ok(None)),
        ("1000m", Ok(Some(1))),
        ("2147483648", Err("example.com/gpu: 2147483648 is out of range 0..=2147483647")),
        ("99999999999999999999", Err("example.com/gpu: 99999999999999999999 is out of range 0..=2147483647")),
        ("-1", Err("example.com/gpu: -1 is out of range 0..=2147483647")),
        ("1.5", Err("example.com/gpu: \"1.5\" is not an integer")),
        ("100m", Err("example.com/gpu: \"100m\" is not an integer")),
        ("one", Err("example.com/gpu: quantity \"one\" is not a valid Kubernetes quantity")),
        ("1e400", Err("example.com/gpu: quantity \"1e400\" is too large")),
    ];
    for (given, want) in cases {
        let got = count_of(Some(&text(given)), "example.com/gpu");
        assert_eq!(got.map_err(|e| e.to_string()), want.map_err(str::to_owned), "{given}");
    }
    assert_eq!(count_of(None, "example.com/gpu"), Ok(None));
}

#[test]
fn cores_take_the_default_only_when_absent() {
    let cases: [(Option<&str>, Result<u32, &str>); 7] = [
        (None, Ok(100)),
        (Some("30"), Ok(30)),
        (Some("0"), Ok(0)),
        (Some("2147483647"), Ok(2_147_483_647)),
        (Some("2147483648"), Err("example.com/cores: 2147483648 is out of range 0..=2147483647")),
        (Some("-5"), Err("example.com/cores: -5 is out of range 0..=2147483647")),
        (Some("1.5"), Err("example.com/cores: \"1.5\" is not an integer")),
    ];
    for (given, want) in cases {
        let q = given.map(text);
        assert_eq!(
            cores_of(q.as_ref(), "example.com/cores", 100).map_err(|e| e.to_string()),
            want.map_err(str::to_owned),
            "{given:?}"
        );
    }
}

#[test]
fn rounded_up_quantities_keep_their_range() {
    let cases: [(&str, Result<Option<i64>, &str>); 5] = [
        ("1.5", Ok(Some(2))),
        ("100m", Ok(Some(1))),
        ("0", Ok(Some(0))),
        ("-1", Err("example.com/mem: -1 is out of range 0..=100")),
        ("lots", Err("example.com/mem: quantity \"lots\" is not a valid Kubernetes quantity")),
    ];
    for (given, want) in cases {
        assert_eq!(
            ceil_in(Some(&text(given)), "example.com/mem", 0..=100).map_err(|e| e.to_string()),
            want.map_err(str::to_owned),
            "{given}"
        );
    }
}

/// One resource of one vendor with the counts it needs beside it, and unusable values for it with
/// what the refusal says.
type Row = (&'static str, Base, &'static str, &'static [(&'static str, &'static str)]);
type Base = &'static [(&'static str, &'static str)];

const R: &str = "is out of range 0..=2147483647";
const FRACTION: &str = "is not an integer";
const NOT_A_QUANTITY: &str = "is not a valid Kubernetes quantity";

/// Every count HAMi reads with AsInt64 into an int32: too big, not a number, negative, fractional.
const BAD_COUNTS: &[(&str, &str)] =
    &[("99999999999999999999", R), ("2147483648", R), ("one", NOT_A_QUANTITY), ("-1", R), ("1.5", FRACTION)];

#[rustfmt::skip]
const ROWS: &[Row] = &[
    ("NVIDIA", &[], "nvidia.com/gpu", BAD_COUNTS),
    ("MLU", &[], "cambricon.com/vmlu", BAD_COUNTS),
    ("DCU", &[], "hygon.com/dcunum", BAD_COUNTS),
    ("GCU", &[], "enflame.com/gcu", BAD_COUNTS),
    ("Enflame", &[], "enflame.com/drs-gcu", BAD_COUNTS),
    ("Mthreads", &[], "mthreads.com/vgpu", BAD_COUNTS),
    ("Metax-GPU", &[], "metax-tech.com/gpu", BAD_COUNTS),
    ("Metax-SGPU", &[], "metax-tech.com/sgpu", BAD_COUNTS),
    ("kunlun", &[], "kunlunxin.com/xpu", BAD_COUNTS),
    ("XPU", &[], "kunlunxin.com/vxpu", BAD_COUNTS),
    ("AMD", &[], "amd.com/gpu", BAD_COUNTS),
    ("Vastai", &[], "vastaitech.com/va", BAD_COUNTS),
    ("Biren", &[], "birentech.com/gpu", BAD_COUNTS),
    ("Ascend910B3", &[], "huawei.com/Ascend910B3", BAD_COUNTS),
    ("MR-V100", &[], "iluvatar.ai/MR-V100-vgpu", BAD_COUNTS),
    // NVIDIA memory, percentage (an integer; HAMi clamps it to 0–100) and cores.
    ("NVIDIA", &[("nvidia.com/gpu", "1")], "nvidia.com/gpumem",
        &[("16Gi", "17179869184 is out of range 0..=2147483647"), ("0.5", FRACTION), ("lots", NOT_A_QUANTITY)]),
    ("NVIDIA", &[("nvidia.com/gpu", "1")], "nvidia.com/gpumem-percentage",
        &[("50.5", FRACTION), ("half", NOT_A_QUANTITY), ("1e30", "is out of range")]),
    ("NVIDIA", &[("nvidia.com/gpu", "1")], "nvidia.com/gpucores", &[("1.5", FRACTION), ("-5", R), ("most", NOT_A_QUANTITY)]),
    // Cambricon, Hygon, Iluvatar, Mthreads: memory in units, cores default only when absent.
    ("MLU", &[("cambricon.com/vmlu", "1")], "cambricon.com/mlu.smlu.vmemory",
        &[("8388608", "8388608 is out of range 0..=8388607"), ("1.5", FRACTION)]),
    ("MLU", &[("cambricon.com/vmlu", "1")], "cambricon.com/mlu.smlu.vcore", &[("1.5", FRACTION), ("most", NOT_A_QUANTITY)]),
    ("DCU", &[("hygon.com/dcunum", "1")], "hygon.com/dcumem", &[("-1", R)]),
    ("DCU", &[("hygon.com/dcunum", "1")], "hygon.com/dcucores", &[("2.5", FRACTION), ("2147483648", R)]),
    ("MR-V100", &[("iluvatar.ai/MR-V100-vgpu", "1")], "iluvatar.ai/MR-V100.vMem", &[("0.5", FRACTION)]),
    ("MR-V100", &[("iluvatar.ai/MR-V100-vgpu", "1")], "iluvatar.ai/MR-V100.vCore", &[("0.5", FRACTION), ("-1", R)]),
    ("Mthreads", &[("mthreads.com/vgpu", "1")], "mthreads.com/sgpu-memory", &[("4194304", "4194304 is out of range 0..=4194303")]),
    ("Mthreads", &[("mthreads.com/vgpu", "1")], "mthreads.com/sgpu-core", &[("1.5", FRACTION)]),
    // Metax sGPU reads limits only.
    ("Metax-SGPU", &[("metax-tech.com/sgpu", "1")], "metax-tech.com/vcore", &[("30.5", FRACTION), ("-1", R)]),
    ("Metax-SGPU", &[("metax-tech.com/sgpu", "1")], "metax-tech.com/vmemory", &[("1.5", "is not an integer quantity")]),
    // Enflame DRS memory and cores round up (Go's Value), so only their sign and size count.
    ("Enflame", &[], "enflame.com/gcu-memory", &[("-1", R)]),
    ("Enflame", &[], "enflame.com/gcu-core", &[("lots", NOT_A_QUANTITY)]),
    // Kunlun vXPU memory, which HAMi reads as absent (the whole device) when not an integer.
    ("XPU", &[("kunlunxin.com/vxpu", "1")], "kunlunxin.com/vxpu-memory",
        &[("1.5", FRACTION), ("-1", "-1 is out of range"), ("lots", NOT_A_QUANTITY)]),
    // AMD: memory an int32 of MiB, cores a percentage 1–100.
    ("AMD", &[("amd.com/gpu", "1")], "amd.com/gpumem", &[("3000000000", R)]),
    ("AMD", &[("amd.com/gpu", "1")], "amd.com/gpucores",
        &[("101", "101 is out of range 1..=100"), ("0", "0 is out of range 1..=100"), ("12.5", FRACTION)]),
    // Ascend memory (MiB, an integer) and cores (rounded up).
    ("Ascend910B3", &[("huawei.com/Ascend910B3", "1")], "huawei.com/Ascend910B3-memory",
        &[("16Gi", "17179869184 is out of range"), ("1.5", FRACTION)]),
    ("Ascend910B3", &[("huawei.com/Ascend910B3", "1")], "huawei.com/Ascend910B3-core", &[("-1", "-1 is out of range")]),
];

#[test]
fn every_vendors_unusable_quantities_refuse_the_pod_naming_the_resource_and_the_value() {
    // HAMi drops such a container's request (or takes a default) and places the pod as if it
    // needed no device; hami-rs refuses it with the resource and the value in the message.
    let vendors = crate::testing::vendors();
    for &(vendor, base, resource, values) in ROWS {
        for &(value, says) in values {
            let mut p = crate::testing::pod();
            for (k, v) in base {
                p = p.limit(k, v);
            }
            let view = p.limit(resource, value).view();
            let what = format!("{resource} = {value}");
            let e = match vendors.pod_request(&view, &crate::testing::defaults()) {
                Ok(req) => panic!("{what}: accepted as {:?}", req.containers),
                Err(e) => e.to_string(),
            };
            let prefix = format!("container c: unusable {vendor} device request: {resource}: ");
            assert!(e.starts_with(&prefix), "{what}: {e}");
            assert!(e.to_string().contains(says), "{what}: {e}");
            // The value as given, or as the vendor read it (a number scaled out of its unit).
            let read = says.split(" is ").next().filter(|v| v.parse::<i64>().is_ok());
            assert!(e.to_string().contains(value) || read.is_some(), "{what}: {e}");
        }
    }
}

#[test]
fn a_zero_count_is_no_request_of_that_vendor() {
    let vendors = crate::testing::vendors();
    for count in ["nvidia.com/gpu", "cambricon.com/vmlu", "amd.com/gpu", "vastaitech.com/va", "enflame.com/gcu"] {
        let view = crate::testing::pod().limit(count, "0").view();
        let req = vendors.pod_request(&view, &crate::testing::defaults()).expect("a zero count is valid");
        assert!(!req.requests_devices(), "{count}");
    }
}

#[test]
fn refusals_say_which_rule_the_quantity_broke() {
    let name = "example.com/gpu";
    let cases: [(&str, Unusable); 3] = [
        ("1.5", Unusable::NotInteger { resource: name.into(), value: "1.5".into() }),
        ("-1", Unusable::OutOfRange { resource: name.into(), value: "-1".into(), min: 0, max: I32_MAX }),
        (
            "one",
            Unusable::Unparsable {
                resource: name.into(),
                detail: "quantity \"one\" is not a valid Kubernetes quantity".into(),
            },
        ),
    ];
    for (given, want) in cases {
        assert_eq!(count_of(Some(&text(given)), name), Err(want), "{given}");
    }
}
