// Table and property tests for the annotation codecs. Every expectation is HAMi's wire format:
// what its scheduler and its unchanged node-side device plugins write and accept. Where hami-rs
// accepts more (both registration forms on every key, older MIG suffixes), the comment says so.

use std::time::Duration;

use chrono::{NaiveDate, TimeDelta, TimeZone};
use proptest::collection::vec;
use proptest::prelude::*;

use super::*;

/// A predicate on a decoder error, for error tables.
type Check = fn(&Error) -> bool;

const I32_MAX_U32: u32 = i32::MAX as u32;
const I32_MAX_U64: u64 = i32::MAX as u64;

// =============================================================================================
// Fixtures

const V100: &str = "NVIDIA-Tesla V100-PCIE-32GB";
const V100_A: &str = "GPU-1d0c8a42-7be1-4c1e-9a3e-111111111111";
const V100_B: &str = "GPU-1d0c8a42-7be1-4c1e-9a3e-222222222222";

/// HAMi's documented NVIDIA registration example (two V100s, the second on NUMA 1), as printed
/// (line breaks and indentation included).
const V100_PAIR_JSON_PRETTY: &str = r#"[{"id":"GPU-1d0c8a42-7be1-4c1e-9a3e-111111111111","count":10,"devmem":32768,"devcore":100,
  "type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},
 {"id":"GPU-1d0c8a42-7be1-4c1e-9a3e-222222222222","index":1,"count":10,"devmem":32768,"devcore":100,
  "type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}]"#;

/// The same value on one line: what HAMi's plugin writes.
const V100_PAIR_JSON: &str = concat!(
    r#"[{"id":"GPU-1d0c8a42-7be1-4c1e-9a3e-111111111111","count":10,"devmem":32768,"devcore":100,"#,
    r#""type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},"#,
    r#"{"id":"GPU-1d0c8a42-7be1-4c1e-9a3e-222222222222","index":1,"count":10,"devmem":32768,"devcore":100,"#,
    r#""type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}]"#,
);

/// HAMi's documented MIG registration example (one A100 in MIG mode, profiles shortened), as
/// printed.
const A100_MIG_JSON_PRETTY: &str = r#"[{"id":"GPU-aa11","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA A100-SXM4-40GB","mode":"mig",
  "migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,
                  "placements":[{"start":0,"size":1},{"start":1,"size":1},{"start":2,"size":1}]},
                 {"name":"3g.20gb","memoryMB":19968,"core":43,"sliceCount":3,
                  "placements":[{"start":0,"size":4},{"start":4,"size":4}]}],
  "health":true}]"#;

const A100_MIG_JSON: &str = concat!(
    r#"[{"id":"GPU-aa11","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA A100-SXM4-40GB","mode":"mig","#,
    r#""migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,"#,
    r#""placements":[{"start":0,"size":1},{"start":1,"size":1},{"start":2,"size":1}]},"#,
    r#"{"name":"3g.20gb","memoryMB":19968,"core":43,"sliceCount":3,"#,
    r#""placements":[{"start":0,"size":4},{"start":4,"size":4}]}],"#,
    r#""health":true}]"#,
);

/// The same two V100s in HAMi's legacy colon form (the second in 9-field form).
const V100_PAIR_COLON: &str = concat!(
    "GPU-1d0c8a42-7be1-4c1e-9a3e-111111111111,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:",
    "GPU-1d0c8a42-7be1-4c1e-9a3e-222222222222,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,1,true,1,hami-core:",
);

fn v100_pair() -> Vec<DeviceInfo> {
    vec![
        DeviceInfo { mode: Arc::from("hami-core"), ..DeviceInfo::new(V100_A, 0, 10, 32768, 100, V100) },
        DeviceInfo { numa: 1, mode: Arc::from("hami-core"), ..DeviceInfo::new(V100_B, 1, 10, 32768, 100, V100) },
    ]
}

fn profile(name: &str, memory_mb: u32, core: u32, slice_count: u32, placements: &[(u32, u32)]) -> MigProfile {
    MigProfile {
        name: Arc::from(name),
        memory_mb,
        core,
        slice_count,
        placements: placements.iter().map(|&(start, size)| MigPlacement { start, size }).collect(),
    }
}

/// A seven-field colon device with the given health field.
fn colon7(health: &str) -> String {
    format!("GPU-a,10,16384,100,NVIDIA-T4,0,{health}:")
}

fn cd(uuid: &str, ty: &str, mem: u64, cores: u32) -> ContainerDevice {
    ContainerDevice::new(uuid, ty, mem, cores)
}

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn naive(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(y, mo, d).unwrap().and_hms_opt(h, mi, s).unwrap()
}

// =============================================================================================
// 1. Node registration, JSON list

#[test]
fn json_list_decodes_the_v100_pair_example_field_by_field() {
    // The two-V100 example; missing index/numa read as 0.
    let d = decode_node_devices_json(V100_PAIR_JSON_PRETTY).unwrap();
    assert_eq!(d.len(), 2);

    assert_eq!(d[0].id.as_str(), V100_A);
    assert_eq!(d[0].index, 0);
    assert_eq!(d[0].count, 10);
    assert_eq!(d[0].devmem, MemMiB(32768));
    assert_eq!(d[0].devcore, 100);
    assert_eq!(&*d[0].ty, V100);
    assert_eq!(d[0].numa, 0);
    assert_eq!(&*d[0].mode, "hami-core");
    assert!(d[0].mig_profiles.is_empty());
    assert!(d[0].health);
    assert_eq!(d[0].custom, None);

    assert_eq!(d[1].id.as_str(), V100_B);
    assert_eq!(d[1].index, 1);
    assert_eq!(d[1].count, 10);
    assert_eq!(d[1].devmem, MemMiB(32768));
    assert_eq!(d[1].devcore, 100);
    assert_eq!(&*d[1].ty, V100);
    assert_eq!(d[1].numa, 1);
    assert_eq!(&*d[1].mode, "hami-core");
    assert!(d[1].mig_profiles.is_empty());
    assert!(d[1].health);
    assert_eq!(d[1].custom, None);

    assert_eq!(d, v100_pair());
}

#[test]
fn json_list_decodes_the_a100_mig_example_field_by_field() {
    // The A100 MIG example; MIG profiles with every key present.
    let d = decode_node_devices_json(A100_MIG_JSON_PRETTY).unwrap();
    assert_eq!(d.len(), 1);
    let a = &d[0];
    assert_eq!(a.id.as_str(), "GPU-aa11");
    assert_eq!(a.index, 0);
    assert_eq!(a.count, 7);
    assert_eq!(a.devmem, MemMiB(40960));
    assert_eq!(a.devcore, 100);
    assert_eq!(&*a.ty, "NVIDIA A100-SXM4-40GB");
    assert_eq!(a.numa, 0);
    assert_eq!(&*a.mode, "mig");
    assert!(a.is_mig());
    assert!(a.health);
    assert_eq!(a.custom, None);
    assert_eq!(
        &*a.mig_profiles,
        &[
            profile("1g.5gb", 4864, 15, 1, &[(0, 1), (1, 1), (2, 1)]),
            profile("3g.20gb", 19968, 43, 3, &[(0, 4), (4, 4)]),
        ][..]
    );
}

#[test]
fn json_list_encodes_the_worked_examples_byte_for_byte() {
    // HAMi's key order: id, index, count, devmem, devcore, type, numa, mode,
    // migProfiles, health; index 0, numa 0, mode "" and health false are omitted.
    assert_eq!(encode_node_devices_json(&v100_pair()), V100_PAIR_JSON);
    let a100 = decode_node_devices_json(A100_MIG_JSON).unwrap();
    assert_eq!(encode_node_devices_json(&a100), A100_MIG_JSON);
}

#[test]
fn json_list_encoding_omits_zero_index_numa_mode_and_false_health() {
    let cases: &[(DeviceInfo, &str)] = &[
        // Index 0, numa 0, mode "" and health false are absent; count, devmem,
        // devcore and type are always written.
        (
            DeviceInfo { health: false, ..DeviceInfo::new("GPU-z", 0, 0, 0, 0, "") },
            r#"[{"id":"GPU-z","count":0,"devmem":0,"devcore":0,"type":""}]"#,
        ),
        // Non-zero values keep their place in the key order (negative NUMA too).
        (
            DeviceInfo { numa: -1, mode: Arc::from("mps"), ..DeviceInfo::new("GPU-y", 3, 4, 1024, 50, "NVIDIA-T4") },
            r#"[{"id":"GPU-y","index":3,"count":4,"devmem":1024,"devcore":50,"type":"NVIDIA-T4","numa":-1,"mode":"mps","health":true}]"#,
        ),
    ];
    for (dev, want) in cases {
        assert_eq!(encode_node_devices_json(std::slice::from_ref(dev)), *want);
    }
}

#[test]
fn json_list_missing_health_means_unhealthy() {
    // HAMi's plugin omits health when false, so a missing key reads as unhealthy.
    let d = decode_node_devices_json(r#"[{"id":"GPU-a","count":10,"devmem":16384,"devcore":100,"type":"NVIDIA"}]"#)
        .unwrap();
    assert!(!d[0].health);
    // A null reads as the zero value too.
    let d = decode_node_devices_json(r#"[{"id":"GPU-a","health":null}]"#).unwrap();
    assert!(!d[0].health);
}

#[test]
fn json_list_every_key_is_optional_and_reads_as_its_zero_value() {
    // Every key is optional on input; a missing key means the zero value.
    let d = decode_node_devices_json("[{}]").unwrap();
    assert_eq!(d, vec![DeviceInfo { health: false, ..DeviceInfo::new("", 0, 0, 0, 0, "") }]);
}

#[test]
fn json_list_matches_keys_case_insensitively() {
    // HAMi's Go decoder matches keys case-insensitively.
    let s = r#"[{"ID":"GPU-a","Index":2,"COUNT":4,"DevMem":8192,"devCore":50,"Type":"NVIDIA-T4","NUMA":1,"Mode":"mps","Health":true}]"#;
    let want = DeviceInfo { numa: 1, mode: Arc::from("mps"), ..DeviceInfo::new("GPU-a", 2, 4, 8192, 50, "NVIDIA-T4") };
    assert_eq!(decode_node_devices_json(s).unwrap(), vec![want]);
}

#[test]
fn json_list_passes_custominfo_through_untouched() {
    // `custominfo` holds vendor extras, passed through untouched.
    let s = concat!(
        r#"[{"id":"vastai-0","count":1,"devmem":16384,"devcore":100,"type":"Vastai","health":true,"#,
        r#""custominfo":{"AIC":"2","DeviceStrategy":"shared","Nested":{"a":[1,null,true]},"NetworkID":3}}]"#,
    );
    let d = decode_node_devices_json(s).unwrap();
    let custom = d[0].custom.as_ref().unwrap();
    assert_eq!(custom.len(), 4);
    assert_eq!(d[0].custom_str("AIC"), Some("2"));
    assert_eq!(d[0].custom_str("DeviceStrategy"), Some("shared"));
    assert_eq!(custom["NetworkID"], serde_json::json!(3));
    assert_eq!(custom["Nested"], serde_json::json!({"a": [1, null, true]}));
    // Written back after health, unchanged (keys in sorted order, as Go writes a map).
    assert_eq!(encode_node_devices_json(&d), s);
}

#[test]
fn json_list_rejects_malformed_values_with_a_typed_error() {
    let cases: &[(&str, Check)] = &[
        // An empty array means no devices, which every HAMi vendor reads as an error.
        ("[]", |e| *e == Error::NoDevices),
        // A null is "no devices" too.
        ("null", |e| *e == Error::NoDevices),
        ("  null  ", |e| *e == Error::NoDevices),
        // A parse error makes the read fail.
        ("", |e| matches!(e, Error::Json(_))),
        ("not json", |e| matches!(e, Error::Json(_))),
        ("[{\"id\":\"GPU-a\"}", |e| matches!(e, Error::Json(_))),
        // The value is an array, not an object or a scalar.
        ("{}", |e| matches!(e, Error::Json(_))),
        (r#""GPU-a""#, |e| matches!(e, Error::Json(_))),
        ("42", |e| matches!(e, Error::Json(_))),
        // Each element is an object.
        ("[1]", |e| matches!(e, Error::Field { device: 0, .. })),
        (r#"["GPU-a"]"#, |e| matches!(e, Error::Field { device: 0, .. })),
        // Wrong field types fail.
        (r#"[{"id":5}]"#, |e| matches!(e, Error::Field { device: 0, field: "id", .. })),
        (r#"[{"count":"10"}]"#, |e| matches!(e, Error::Field { field: "count", .. })),
        (r#"[{"devmem":true}]"#, |e| matches!(e, Error::Field { field: "devmem", .. })),
        (r#"[{"type":["NVIDIA"]}]"#, |e| matches!(e, Error::Field { field: "type", .. })),
        (r#"[{"mode":1}]"#, |e| matches!(e, Error::Field { field: "mode", .. })),
        (r#"[{"health":"true"}]"#, |e| matches!(e, Error::Field { field: "health", .. })),
        (r#"[{"health":1}]"#, |e| matches!(e, Error::Field { field: "health", .. })),
        (r#"[{"migProfiles":{}}]"#, |e| matches!(e, Error::Field { field: "migProfiles", .. })),
        (r#"[{"migProfiles":[{"name":7}]}]"#, |e| matches!(e, Error::Field { field: "migProfiles", .. })),
        (r#"[{"custominfo":[]}]"#, |e| matches!(e, Error::Field { field: "custominfo", .. })),
        // `count`, `devmem`, `devcore` are int32; `index` is unsigned.
        (r#"[{"count":-1}]"#, |e| matches!(e, Error::Field { field: "count", .. })),
        (r#"[{"count":2147483648}]"#, |e| matches!(e, Error::Field { field: "count", .. })),
        (r#"[{"count":1.5}]"#, |e| matches!(e, Error::Field { field: "count", .. })),
        (r#"[{"devmem":-32768}]"#, |e| matches!(e, Error::Field { field: "devmem", .. })),
        (r#"[{"devmem":4294967296}]"#, |e| matches!(e, Error::Field { field: "devmem", .. })),
        (r#"[{"devcore":2147483648}]"#, |e| matches!(e, Error::Field { field: "devcore", .. })),
        (r#"[{"index":-1}]"#, |e| matches!(e, Error::Field { field: "index", .. })),
        (r#"[{"numa":2147483648}]"#, |e| matches!(e, Error::Field { field: "numa", .. })),
        // The error names the failing device's position.
        (r#"[{"id":"GPU-a"},{"id":"GPU-b","count":-1}]"#, |e| {
            matches!(e, Error::Field { device: 1, field: "count", .. })
        }),
    ];
    for (input, check) in cases {
        let got = decode_node_devices_json(input);
        match got {
            Err(ref e) if check(e) => {}
            other => panic!("{input:?}: unexpected {other:?}"),
        }
    }
}

#[test]
fn json_list_accepts_int32_boundaries() {
    // `count`, `devmem` and `devcore` are int32, so i32::MAX is still valid.
    let d = decode_node_devices_json(
        r#"[{"count":2147483647,"devmem":2147483647,"devcore":2147483647,"numa":-2147483648}]"#,
    )
    .unwrap();
    assert_eq!(
        (d[0].count, d[0].devmem, d[0].devcore, d[0].numa),
        (I32_MAX_U32, MemMiB(I32_MAX_U64), I32_MAX_U32, i32::MIN)
    );
}

#[test]
fn node_devices_auto_detects_json_and_colon_forms() {
    let cases: &[(&str, std::result::Result<Vec<DeviceInfo>, Error>)] = &[
        // NVIDIA registrations are JSON (the only form current HAMi reads for NVIDIA) …
        (V100_PAIR_JSON, Ok(v100_pair())),
        (" \n\t[{\"id\":\"GPU-a\",\"health\":true}]", Ok(vec![DeviceInfo::new("GPU-a", 0, 0, 0, 0, "")])),
        // A null is "no devices".
        ("null", Err(Error::NoDevices)),
        ("[]", Err(Error::NoDevices)),
        // … and the colon form is accepted too (HAMi reads it for Hygon and Iluvatar only; hami-rs
        // accepts both forms on every key).
        (V100_PAIR_COLON, Ok(v100_pair())),
        // The colon form needs at least one ':'.
        ("GPU-a,10,32768,100,NVIDIA,0,true", Err(Error::NoSeparator)),
        // A separator but no device is "no devices", as the JSON form's empty array.
        (":", Err(Error::NoDevices)),
        (":::", Err(Error::NoDevices)),
        ("", Err(Error::NoSeparator)),
    ];
    for (input, want) in cases {
        assert_eq!(&decode_node_devices(input), want, "{input:?}");
    }
}

// =============================================================================================
// 2. Node registration, legacy colon list (HAMi's Hygon and Iluvatar form)

#[test]
fn colon_list_decodes_the_worked_example_like_the_json_form() {
    // The colon example lists the same two V100s as the JSON one.
    assert_eq!(decode_node_devices_colon(V100_PAIR_COLON).unwrap(), v100_pair());
}

#[test]
fn colon_list_seven_field_form_defaults_mode_to_hami_core_and_index_to_zero() {
    // The 7-field form: mode is hami-core and index is 0.
    // A single device still needs its ':'.
    let d = decode_node_devices_colon("GPU-a,4,16384,80,NVIDIA-T4,1,false").unwrap_err();
    assert_eq!(d, Error::NoSeparator);
    let d = decode_node_devices_colon("GPU-a,4,16384,80,NVIDIA-T4,1,false:").unwrap();
    let want = DeviceInfo {
        numa: 1,
        mode: Arc::from("hami-core"),
        health: false,
        ..DeviceInfo::new("GPU-a", 0, 4, 16384, 80, "NVIDIA-T4")
    };
    assert_eq!(d, vec![want]);
}

#[test]
fn colon_list_nine_field_form_carries_index_and_mode() {
    // The 9-field form carries index and mode.
    // A single device still needs its ':'.
    let d = decode_node_devices_colon("GPU-a,4,16384,100,NVIDIA A100,0,true,3,mig").unwrap_err();
    assert_eq!(d, Error::NoSeparator);
    let d = decode_node_devices_colon("GPU-a,4,16384,100,NVIDIA A100,0,true,3,mig:").unwrap();
    let want = DeviceInfo { mode: Arc::from("mig"), ..DeviceInfo::new("GPU-a", 3, 4, 16384, 100, "NVIDIA A100") };
    assert_eq!(d, vec![want]);
    // An empty mode in the 9-field form stays empty.
    let d = decode_node_devices_colon("GPU-a,4,16384,100,DCU,0,true,0,:").unwrap();
    assert_eq!(&*d[0].mode, "");
}

#[test]
fn colon_list_skips_empty_segments() {
    // Empty segments between colons are skipped; a trailing ':' is optional.
    let cases: &[(&str, &[&str])] = &[
        ("GPU-a,1,2,3,T,0,true:GPU-b,1,2,3,T,0,true", &["GPU-a", "GPU-b"]),
        ("GPU-a,1,2,3,T,0,true:GPU-b,1,2,3,T,0,true:", &["GPU-a", "GPU-b"]),
        (":::GPU-a,1,2,3,T,0,true::::GPU-b,1,2,3,T,0,true,1,mig:::", &["GPU-a", "GPU-b"]),
    ];
    for (input, ids) in cases {
        let d = decode_node_devices_colon(input).unwrap();
        let got: Vec<&str> = d.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(&got, ids, "{input:?}");
    }
}

#[test]
fn colon_list_treats_whitespace_as_significant() {
    // Whitespace is significant; nothing is trimmed.
    let d = decode_node_devices_colon(" GPU-a,1,2,3,NVIDIA T4 ,0,true,0, mig:").unwrap();
    assert_eq!(d[0].id.as_str(), " GPU-a");
    assert_eq!(&*d[0].ty, "NVIDIA T4 ");
    assert_eq!(&*d[0].mode, " mig");

    let cases: &[(&str, Check)] = &[
        // A padded number is not a decimal int32.
        ("GPU-a, 1,2,3,T,0,true:", |e| matches!(e, Error::Field { field: "count", .. })),
        ("GPU-a,1,2 ,3,T,0,true:", |e| matches!(e, Error::Field { field: "devmem", .. })),
        ("GPU-a,1,2,3,T, 0,true:", |e| matches!(e, Error::Field { field: "numa", .. })),
        // A padded boolean is not a Go boolean literal.
        ("GPU-a,1,2,3,T,0,true :", |e| matches!(e, Error::Field { field: "health", .. })),
        ("GPU-a,1,2,3,T,0,true,1 ,mig:", |e| matches!(e, Error::Field { field: "index", .. })),
        // A trailing newline is a non-empty segment without a comma.
        ("GPU-a,1,2,3,T,0,true:\n", |e| *e == Error::FieldCount { segment: "\n".into(), found: 1 }),
        ("GPU-a,1,2,3,T,0,true: ", |e| *e == Error::FieldCount { segment: " ".into(), found: 1 }),
    ];
    for (input, check) in cases {
        match decode_node_devices_colon(input) {
            Err(ref e) if check(e) => {}
            other => panic!("{input:?}: unexpected {other:?}"),
        }
    }
}

#[test]
fn colon_list_rejects_malformed_values_with_a_typed_error() {
    let cases: &[(&str, Check)] = &[
        // The value must contain at least one ':'.
        ("", |e| *e == Error::NoSeparator),
        ("GPU-a,1,2,3,T,0,true", |e| *e == Error::NoSeparator),
        ("GPU-a;GPU-b", |e| *e == Error::NoSeparator),
        // A segment without a comma fails the whole annotation.
        ("GPU-a:", |e| *e == Error::FieldCount { segment: "GPU-a".into(), found: 1 }),
        ("GPU-a,1,2,3,T,0,true:junk", |e| *e == Error::FieldCount { segment: "junk".into(), found: 1 }),
        // A segment with neither 7 nor 9 fields fails the whole annotation.
        ("GPU-a,1,2,3,T,0:", |e| matches!(e, Error::FieldCount { found: 6, .. })),
        ("GPU-a,1,2,3,T,0,true,1:", |e| matches!(e, Error::FieldCount { found: 8, .. })),
        ("GPU-a,1,2,3,T,0,true,1,mig,x:", |e| matches!(e, Error::FieldCount { found: 10, .. })),
        ("GPU-a,1,2,3,T,0,true:GPU-b,1:", |e| matches!(e, Error::FieldCount { found: 2, .. })),
        // `count`, `devmem`, `devcore` are decimal int32.
        ("GPU-a,x,2,3,T,0,true:", |e| matches!(e, Error::Field { field: "count", .. })),
        ("GPU-a,2147483648,2,3,T,0,true:", |e| matches!(e, Error::Field { field: "count", .. })),
        ("GPU-a,1,32768.5,3,T,0,true:", |e| matches!(e, Error::Field { field: "devmem", .. })),
        ("GPU-a,1,,3,T,0,true:", |e| matches!(e, Error::Field { field: "devmem", .. })),
        ("GPU-a,1,2,0x64,T,0,true:", |e| matches!(e, Error::Field { field: "devcore", .. })),
        // `numa` is a decimal int.
        ("GPU-a,1,2,3,T,one,true:", |e| matches!(e, Error::Field { field: "numa", .. })),
        // `health` is a Go boolean literal.
        ("GPU-a,1,2,3,T,0,yes:", |e| matches!(e, Error::Field { field: "health", .. })),
        ("GPU-a,1,2,3,T,0,:", |e| matches!(e, Error::Field { field: "health", .. })),
        // `index` must be >= 0.
        ("GPU-a,1,2,3,T,0,true,-1,hami-core:", |e| matches!(e, Error::Field { field: "index", .. })),
        ("GPU-a,1,2,3,T,0,true,x,hami-core:", |e| matches!(e, Error::Field { field: "index", .. })),
        // The error names the failing device's position among the non-empty segments.
        ("::GPU-a,1,2,3,T,0,true::GPU-b,1,2,3,T,0,maybe:", |e| {
            matches!(e, Error::Field { device: 1, field: "health", .. })
        }),
    ];
    for (input, check) in cases {
        match decode_node_devices_colon(input) {
            Err(ref e) if check(e) => {}
            other => panic!("{input:?}: unexpected {other:?}"),
        }
    }
}

#[test]
fn colon_list_accepts_negative_numa() {
    // `numa` is a decimal int (sign allowed).
    let d = decode_node_devices_colon("GPU-a,1,2,3,T,-1,true:").unwrap();
    assert_eq!(d[0].numa, -1);
}

#[test]
fn colon_list_health_accepts_every_go_boolean_literal() {
    // `health` is any Go boolean literal.
    let cases = [
        ("1", true),
        ("t", true),
        ("T", true),
        ("TRUE", true),
        ("true", true),
        ("True", true),
        ("0", false),
        ("f", false),
        ("F", false),
        ("FALSE", false),
        ("false", false),
        ("False", false),
    ];
    for (lit, want) in cases {
        let d = decode_node_devices_colon(&colon7(lit)).unwrap();
        assert_eq!(d[0].health, want, "{lit:?}");
    }
    for bad in ["yes", "TRue", "", "2", "on"] {
        assert!(decode_node_devices_colon(&colon7(bad)).is_err(), "{bad:?}");
    }
}

#[test]
fn colon_list_encodes_the_nine_field_form_with_a_trailing_colon_per_device() {
    // HAMi writes the 9-field form, each device followed by ':'.
    assert_eq!(
        encode_node_devices_colon(&v100_pair()),
        concat!(
            "GPU-1d0c8a42-7be1-4c1e-9a3e-111111111111,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true,0,hami-core:",
            "GPU-1d0c8a42-7be1-4c1e-9a3e-222222222222,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,1,true,1,hami-core:",
        )
    );
    // `health` is written as a Go boolean; an empty mode stays empty.
    let sick = DeviceInfo { health: false, numa: -1, ..DeviceInfo::new("DCU-0", 2, 4, 16384, 100, "DCU") };
    assert_eq!(encode_node_devices_colon(&[sick]), "DCU-0,4,16384,100,DCU,-1,false,2,:");
    assert_eq!(encode_node_devices_colon(&[]), "");
}

// =============================================================================================
// 3. Pod device encoding (`uuid,type,mem,cores:` per device, `;` after each container)

const POD_ONE_GPU: &str = "GPU-1d0c-1111,NVIDIA,3000,30:;";
const POD_INIT_AND_TWO_GPUS: &str = "GPU-1111,NVIDIA,2000,30:;;GPU-1111,NVIDIA,4000,50:GPU-2222,NVIDIA,4000,50:;";
const POD_AFTER_INIT_SERVED: &str = ";;GPU-1111,NVIDIA,4000,50:GPU-2222,NVIDIA,4000,50:;;";

fn app_two_gpus() -> ContainerDevices {
    vec![cd("GPU-1111", "NVIDIA", 4000, 50), cd("GPU-2222", "NVIDIA", 4000, 50)]
}

#[test]
fn pod_devices_decode_one_container_one_gpu_plus_the_trailing_empty_entry() {
    // One container, one GPU; k containers decode to k+1 entries, the last (after the final ';')
    // empty.
    let d = decode_pod_devices(POD_ONE_GPU).unwrap();
    assert_eq!(d, vec![vec![cd("GPU-1d0c-1111", "NVIDIA", 3000, 30)], vec![]]);
    assert_eq!(d[0][0].idx, 0, "the device index is not encoded");
    assert_eq!(d[0][0].mig, None);
    assert_eq!(encode_pod_devices(&d[..1]), POD_ONE_GPU);
}

#[test]
fn pod_devices_keep_empty_entries_in_position() {
    // Init container, app without GPU, app with two GPUs: the empty entry keeps its position.
    let d = decode_pod_devices(POD_INIT_AND_TWO_GPUS).unwrap();
    assert_eq!(d, vec![vec![cd("GPU-1111", "NVIDIA", 2000, 30)], vec![], app_two_gpus(), vec![]]);
    assert_eq!(encode_pod_devices(&d[..3]), POD_INIT_AND_TWO_GPUS);
}

#[test]
fn pod_devices_plugin_rewrite_adds_one_trailing_semicolon() {
    // The device plugin empties the served entry and re-encodes every
    // decoded entry, so each rewrite appends one ';'.
    let mut d = decode_pod_devices(POD_INIT_AND_TWO_GPUS).unwrap();
    d[0].clear();
    assert_eq!(encode_pod_devices(&d), POD_AFTER_INIT_SERVED);

    let again = decode_pod_devices(POD_AFTER_INIT_SERVED).unwrap();
    assert_eq!(again, vec![vec![], vec![], app_two_gpus(), vec![], vec![]]);
    // Readers tolerate any number of trailing empty entries.
    assert_eq!(trim_trailing_empty(again), vec![vec![], vec![], app_two_gpus()]);
}

#[test]
fn pod_devices_decode_table() {
    let cases: &[(&str, Vec<ContainerDevices>)] = &[
        // An empty value is no containers.
        ("", vec![]),
        // The device plugin leaves ";;" after serving a pod's only container.
        (";;", vec![vec![], vec![], vec![]]),
        (";", vec![vec![], vec![]]),
        // One container given 3000 MiB of one GPU and no cores, as HAMi writes it.
        ("GPU-1111,NVIDIA,3000,0:;", vec![vec![cd("GPU-1111", "NVIDIA", 3000, 0)], vec![]]),
        // A value without a final ';' still yields its container.
        ("GPU-a,NVIDIA,1,2:", vec![vec![cd("GPU-a", "NVIDIA", 1, 2)]]),
        ("GPU-a,NVIDIA,1,2", vec![vec![cd("GPU-a", "NVIDIA", 1, 2)]]),
        // Sub-pieces without a comma are ignored.
        ("GPU-a:GPU-b,NVIDIA,1,2:junk;", vec![vec![cd("GPU-b", "NVIDIA", 1, 2)], vec![]]),
        ("::;:;", vec![vec![], vec![], vec![]]),
        // Extra fields are ignored.
        ("GPU-a,NVIDIA,3000,30,extra,more:;", vec![vec![cd("GPU-a", "NVIDIA", 3000, 30)], vec![]]),
        // HAMi's AMD vendor writes the product string as the type.
        ("GPU-m,AMD Instinct MI300X,196608,100:;", vec![vec![cd("GPU-m", "AMD Instinct MI300X", 196608, 100)], vec![]]),
        // Memory and cores are int32.
        ("GPU-a,NVIDIA,2147483647,2147483647:", vec![vec![cd("GPU-a", "NVIDIA", I32_MAX_U64, I32_MAX_U32)]]),
        // hami-rs strips older HAMi's MIG suffix `[<geometry>-<slot>]` when reading old pods
        // (current HAMi does not understand it).
        ("GPU-aa11[1-2],NVIDIA,5120,0:;", vec![vec![cd("GPU-aa11", "NVIDIA", 5120, 0)], vec![]]),
    ];
    for (input, want) in cases {
        assert_eq!(&decode_pod_devices(input).unwrap(), want, "{input:?}");
    }
}

#[test]
fn pod_devices_reject_short_or_non_int32_entries() {
    let cases: &[(&str, usize)] = &[
        // Fewer than 4 fields is an error.
        ("GPU-a,NVIDIA,3000:;", 0),
        ("GPU-a,NVIDIA:;", 0),
        (";GPU-a,NVIDIA,1:", 1),
        // Fields 3 and 4 (memory and cores) must parse as int32.
        ("GPU-a,NVIDIA,abc,30:;", 0),
        ("GPU-a,NVIDIA,2147483648,30:;", 0),
        ("GPU-a,NVIDIA,1.5,30:;", 0),
        ("GPU-a,NVIDIA, 3000,30:;", 0),
        ("GPU-a,NVIDIA,,30:;", 0),
        ("GPU-a,NVIDIA,3000,abc:;", 0),
        ("GPU-a,NVIDIA,3000,2147483648:;", 0),
        ("GPU-a,NVIDIA,3000,:;", 0),
        // Usage cannot be negative.
        ("GPU-a,NVIDIA,-1,30:;", 0),
        ("GPU-a,NVIDIA,3000,-30:;", 0),
        // Any such error rejects the value as a whole, wherever it is.
        ("GPU-a,NVIDIA,1,2:;;GPU-b,NVIDIA,x,2:;", 2),
    ];
    for (input, container) in cases {
        match decode_pod_devices(input) {
            Err(Error::PodDevice { container: c, .. }) if c == *container => {}
            other => panic!("{input:?}: unexpected {other:?}"),
        }
    }
}

#[test]
fn pod_devices_encode_table() {
    let cases: &[(Vec<ContainerDevices>, &str)] = &[
        // Zero containers encode to nothing.
        (vec![], ""),
        // An empty container is the empty string, still followed by ';'.
        (vec![vec![]], ";"),
        (vec![vec![], vec![cd("GPU-a", "NVIDIA", 3000, 30)]], ";GPU-a,NVIDIA,3000,30:;"),
        // A whole-card request: all 32768 MiB and 100 cores.
        (vec![vec![cd("GPU-1111", "NVIDIA", 32768, 100)]], "GPU-1111,NVIDIA,32768,100:;"),
        // A Cambricon allocation: vendor word MLU, memory in MiB.
        (vec![vec![cd("n1-cambricon-mlu-2", "MLU", 4096, 50)]], "n1-cambricon-mlu-2,MLU,4096,50:;"),
    ];
    for (input, want) in cases {
        assert_eq!(encode_pod_devices(input), *want);
    }
}

#[test]
fn trim_trailing_empty_drops_only_trailing_empty_entries() {
    let a = vec![cd("GPU-a", "NVIDIA", 1, 1)];
    let cases: Vec<(Vec<ContainerDevices>, Vec<ContainerDevices>)> = vec![
        (vec![], vec![]),
        // Every trailing empty entry (one per plugin rewrite) goes.
        (vec![vec![], vec![], vec![]], vec![]),
        (vec![a.clone(), vec![], vec![]], vec![a.clone()]),
        // Empty entries before a used one keep positions.
        (vec![vec![], a.clone(), vec![]], vec![vec![], a.clone()]),
        (vec![vec![], a.clone()], vec![vec![], a.clone()]),
    ];
    for (input, want) in cases {
        assert_eq!(trim_trailing_empty(input.clone()), want, "{input:?}");
    }
}

#[test]
fn strip_legacy_mig_suffix_removes_the_bracket_part() {
    let cases = [
        // Older HAMi's MIG form: `<gpu uuid>[<geometry>-<slot>]`.
        ("GPU-aa11[1-2]", "GPU-aa11"),
        ("GPU-aa11[0-0]", "GPU-aa11"),
        // Current pods carry plain GPU UUIDs.
        ("GPU-aa11", "GPU-aa11"),
        ("", ""),
        ("[1-2]", ""),
    ];
    for (input, want) in cases {
        assert_eq!(strip_legacy_mig_suffix(input), want, "{input:?}");
    }
}

// =============================================================================================
// 4. MIG allocations (`hami.io/vgpu-mig-allocations`)

const MIG_RESERVED: &str = r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-aa11","profile":"1g.5gb","placement":{"start":6,"size":1}}]"#;
const MIG_ENRICHED: &str = concat!(
    r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-aa11","profile":"1g.5gb","placement":{"start":6,"size":1},"#,
    r#""migUUID":"MIG-5c2e","gpuInstanceID":13,"computeInstanceID":0}]"#,
);

fn reserved() -> MigAllocation {
    MigAllocation {
        container_index: 0,
        device_index: 0,
        gpu_uuid: "GPU-aa11".into(),
        profile: "1g.5gb".into(),
        placement: MigPlacement { start: 6, size: 1 },
        mig_uuid: None,
        gpu_instance_id: None,
        compute_instance_id: None,
    }
}

#[test]
fn mig_allocations_round_trip_the_example_before_enrichment() {
    // The scheduler writes index, parent GPU, profile and placement only.
    assert_eq!(decode_mig_allocations(MIG_RESERVED).unwrap(), vec![reserved()]);
    assert_eq!(encode_mig_allocations(&[reserved()]), MIG_RESERVED);
}

#[test]
fn mig_allocations_round_trip_the_example_after_enrichment() {
    // The device plugin adds migUUID, gpuInstanceID and computeInstanceID
    // (a CI id of 0 is present, not absent).
    let enriched = MigAllocation {
        mig_uuid: Some("MIG-5c2e".into()),
        gpu_instance_id: Some(13),
        compute_instance_id: Some(0),
        ..reserved()
    };
    assert_eq!(decode_mig_allocations(MIG_ENRICHED).unwrap(), vec![enriched.clone()]);
    assert_eq!(encode_mig_allocations(&[enriched]), MIG_ENRICHED);
}

#[test]
fn mig_allocations_empty_values_decode_to_nothing() {
    // A JSON null or empty array lists no MIG devices.
    assert_eq!(decode_mig_allocations("null").unwrap(), vec![]);
    assert_eq!(decode_mig_allocations("[]").unwrap(), vec![]);
    assert_eq!(encode_mig_allocations(&[]), "[]");
}

#[test]
fn mig_allocations_missing_indexes_read_as_zero() {
    // A missing index reads as 0 and passes validation.
    let d = decode_mig_allocations(r#"[{"gpuUUID":"GPU-a","profile":"2g.10gb","placement":{"start":2,"size":2}}]"#)
        .unwrap();
    assert_eq!((d[0].container_index, d[0].device_index), (0, 0));
    assert_eq!(d[0].placement, MigPlacement { start: 2, size: 2 });
}

#[test]
fn mig_allocations_allow_one_container_several_devices() {
    // Only an identical (containerIndex, deviceIndex) pair is a duplicate.
    let s = concat!(
        r#"[{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0,"size":1}},"#,
        r#"{"containerIndex":1,"deviceIndex":1,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":1,"size":1}},"#,
        r#"{"containerIndex":0,"deviceIndex":1,"gpuUUID":"GPU-b","profile":"1g.5gb","placement":{"start":0,"size":1}}]"#,
    );
    let d = decode_mig_allocations(s).unwrap();
    assert_eq!(d.len(), 3);
    assert_eq!(encode_mig_allocations(&d), s);
}

#[test]
fn mig_allocations_enforce_every_validation_rule() {
    const OK: &str =
        r#"{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0,"size":1}}"#;
    let cases: Vec<(String, usize, &str)> = vec![
        // `containerIndex` and `deviceIndex` must be >= 0.
        (r#"[{"containerIndex":-1,"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1}}]"#.into(), 0, "containerIndex"),
        (r#"[{"deviceIndex":-1,"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1}}]"#.into(), 0, "deviceIndex"),
        // `gpuUUID` must be non-empty; a missing key reads as "".
        (r#"[{"gpuUUID":"","profile":"p","placement":{"start":0,"size":1}}]"#.into(), 0, "gpuUUID"),
        (r#"[{"profile":"p","placement":{"start":0,"size":1}}]"#.into(), 0, "gpuUUID"),
        // `profile` must be non-empty; a missing key reads as "".
        (r#"[{"gpuUUID":"G","profile":"","placement":{"start":0,"size":1}}]"#.into(), 0, "profile"),
        (r#"[{"gpuUUID":"G","placement":{"start":0,"size":1}}]"#.into(), 0, "profile"),
        // A missing placement reads as size 0 and fails.
        (r#"[{"gpuUUID":"G","profile":"p"}]"#.into(), 0, "placement"),
        (r#"[{"gpuUUID":"G","profile":"p","placement":null}]"#.into(), 0, "placement"),
        // `placement.size` must be > 0.
        (r#"[{"gpuUUID":"G","profile":"p","placement":{"start":3,"size":0}}]"#.into(), 0, "placement"),
        // The three runtime fields are all present or all absent.
        (r#"[{"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1},"migUUID":"MIG-1"}]"#.into(), 0, "all present"),
        (r#"[{"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1},"gpuInstanceID":1}]"#.into(), 0, "all present"),
        (r#"[{"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1},"computeInstanceID":0}]"#.into(), 0, "all present"),
        (
            r#"[{"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1},"migUUID":"MIG-1","gpuInstanceID":1}]"#.into(),
            0,
            "all present",
        ),
        (
            r#"[{"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1},"gpuInstanceID":1,"computeInstanceID":0}]"#.into(),
            0,
            "all present",
        ),
        // `migUUID` is omitted when empty, so "" counts as absent.
        (
            r#"[{"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1},"migUUID":"","gpuInstanceID":1,"computeInstanceID":0}]"#.into(),
            0,
            "all present",
        ),
        // No two entries with the same (containerIndex, deviceIndex).
        (format!("[{OK},{OK}]"), 1, "duplicate"),
        // The error names the failing entry's position.
        (format!(r#"[{OK},{{"containerIndex":0,"deviceIndex":1,"gpuUUID":"G","profile":""}}]"#), 1, "profile"),
    ];
    for (input, entry, why) in &cases {
        match decode_mig_allocations(input) {
            Err(Error::MigAllocation { entry: e, why: w }) if e == *entry && w.contains(why) => {}
            other => panic!("{input}: unexpected {other:?}"),
        }
    }
}

#[test]
fn mig_allocations_all_runtime_fields_absent_or_empty_mig_uuid_alone_is_valid() {
    // An empty migUUID with no ids is the same as no runtime fields.
    let d = decode_mig_allocations(r#"[{"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1},"migUUID":""}]"#)
        .unwrap();
    assert_eq!(d[0].mig_uuid, None);
    assert_eq!(
        encode_mig_allocations(&d),
        r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1}}]"#
    );
}

#[test]
fn mig_allocations_reject_non_json_with_a_typed_error() {
    // The value is a JSON array.
    for input in [
        "",
        "[",
        "{}",
        r#"{"containerIndex":0}"#,
        "[1]",
        r#"[{"containerIndex":"0"}]"#,
        r#"[{"placement":{"start":-1,"size":1}}]"#,
    ] {
        match decode_mig_allocations(input) {
            Err(Error::Json(_)) => {}
            other => panic!("{input:?}: unexpected {other:?}"),
        }
    }
}

// =============================================================================================
// 5. Node lock (`hami.io/mutex.lock`)

#[test]
fn node_lock_decodes_time_namespace_and_name() {
    // HAMi's lock value: `<RFC3339 lock time>,<pod namespace>,<pod name>`.
    let l = decode_node_lock("2026-08-21T06:20:39Z,default,train-0").unwrap();
    assert_eq!(l.time, utc(2026, 8, 21, 6, 20, 39));
    assert_eq!(l.owner, Some(("default".into(), "train-0".into())));
    assert!(l.is_held_by("default", "train-0"));
    assert!(!l.is_held_by("default", "train-1"));
    assert!(!l.is_held_by("kube-system", "train-0"));
    assert!(!l.is_held_by("", ""));
}

#[test]
fn node_lock_legacy_bare_time_has_no_owner() {
    // Older HAMi wrote a bare RFC3339 time: a value without ',' has no known owner.
    let l = decode_node_lock("2024-03-01T10:00:00+08:00").unwrap();
    assert_eq!(l.owner, None);
    assert_eq!(l.time, utc(2024, 3, 1, 2, 0, 0));
    assert!(!l.is_held_by("default", "train-0"));
}

#[test]
fn node_lock_accepts_fractional_seconds_and_offsets() {
    let cases = [
        // HAMi's Go RFC3339 parser accepts fractional seconds on input.
        ("2026-08-21T06:20:39.5Z,default,train-0", utc(2026, 8, 21, 6, 20, 39) + TimeDelta::milliseconds(500)),
        ("2026-08-21T06:20:39.123456789Z,ns,p", utc(2026, 8, 21, 6, 20, 39) + TimeDelta::nanoseconds(123_456_789)),
        ("2026-08-21T06:20:39.25+02:00", utc(2026, 8, 21, 4, 20, 39) + TimeDelta::milliseconds(250)),
        // Any RFC3339 offset.
        ("2026-08-21T08:20:39+02:00,default,train-0", utc(2026, 8, 21, 6, 20, 39)),
    ];
    for (input, want) in cases {
        assert_eq!(decode_node_lock(input).unwrap().time, want, "{input:?}");
    }
}

#[test]
fn node_lock_rejects_malformed_values() {
    let cases = [
        // With a comma, exactly three parts.
        "2026-08-21T06:20:39Z,default",
        "2026-08-21T06:20:39Z,default,train-0,extra",
        "2026-08-21T06:20:39Z,",
        ",,,",
        // The first part is RFC3339.
        "garbage,default,train-0",
        ",default,train-0",
        "1787293239,default,train-0",
        "2026-08-21T06:20:39,default,train-0",
        "2026/08/21T06:20:39Z,default,train-0",
        // A comma-less value must be an RFC3339 time.
        "",
        "garbage",
        "2026-08-21",
    ];
    for input in cases {
        match decode_node_lock(input) {
            Err(Error::NodeLock { value, .. }) if value == input => {}
            other => panic!("{input:?}: unexpected {other:?}"),
        }
    }
}

#[test]
fn node_lock_encodes_whole_seconds_in_utc() {
    // As HAMi writes it, e.g. 2026-08-21T06:20:39Z,default,train-0; HAMi never writes fractions.
    let now = utc(2026, 8, 21, 6, 20, 39) + TimeDelta::milliseconds(987);
    assert_eq!(encode_node_lock(now, "default", "train-0"), "2026-08-21T06:20:39Z,default,train-0");
    // The Cambricon lock (`cambricon.com/dsmlu.lock`) is a bare RFC3339 time.
    assert_eq!(encode_rfc3339(now), "2026-08-21T06:20:39Z");
}

#[test]
fn node_lock_expires_only_when_older_than_the_timeout() {
    // A lock older than --node-lock-timeout (default 5 min) may be broken.
    let five_min = Duration::from_secs(300);
    let lock = decode_node_lock("2026-08-21T06:20:39Z,default,train-0").unwrap();
    let at = utc(2026, 8, 21, 6, 20, 39);
    let cases = [
        (TimeDelta::zero(), false),
        (TimeDelta::seconds(299), false),
        // Exactly the timeout is not older than it.
        (TimeDelta::seconds(300), false),
        (TimeDelta::seconds(300) + TimeDelta::milliseconds(1), true),
        (TimeDelta::seconds(301), true),
        (TimeDelta::days(400), true),
        // A lock from the future (clock skew) is not expired.
        (TimeDelta::seconds(-3600), false),
    ];
    for (age, want) in cases {
        assert_eq!(lock.is_expired(at + age, five_min), want, "age {age}");
    }
    // A legacy lock (no owner) is breakable after expiry; its offset is honoured.
    let legacy = decode_node_lock("2024-03-01T10:00:00+08:00").unwrap();
    assert!(!legacy.is_expired(utc(2024, 3, 1, 2, 4, 59), five_min));
    assert!(legacy.is_expired(utc(2024, 3, 1, 2, 5, 1), five_min));
}

// =============================================================================================
// 6. Handshake (`hami.io/node-handshake` and the vendors' variants)

#[test]
fn handshake_decode_table() {
    let cases = [
        // What the scheduler writes: `Requesting_` and a local DateTime.
        ("Requesting_2026-08-21 06:20:39", Handshake::Requesting(Some(naive(2026, 8, 21, 6, 20, 39)))),
        // Older HAMi's `2024.01.10` date format does not parse: HAMi then keeps the node healthy
        // forever and writes nothing.
        ("Requesting_2024.01.10 04:06:57", Handshake::Requesting(None)),
        // No '_' after Requesting.
        ("Requesting", Handshake::Requesting(None)),
        ("Requesting_", Handshake::Requesting(None)),
        ("Requesting_2026-08-21T06:20:39Z", Handshake::Requesting(None)),
        // The text after the *first* '_' is parsed.
        ("x_Requesting_2026-08-21 06:20:39", Handshake::Requesting(None)),
        // Old plugins wrote `Reported <Go time>`; that is not Requesting.
        ("Reported 2024-01-10 04:06:57.123 +0000 UTC", Handshake::Other),
        ("Reported_2026-08-21 06:20:39", Handshake::Other),
        // An absent annotation reads as empty.
        ("", Handshake::Other),
        ("Deleted_2026-08-21 06:20:39", Handshake::Other),
        // The `Requesting` substring test is case-sensitive.
        ("requesting_2026-08-21 06:20:39", Handshake::Other),
    ];
    for (input, want) in cases {
        assert_eq!(decode_handshake(input), want, "{input:?}");
    }
}

#[test]
fn handshake_encodes_requesting_and_deleted_values() {
    // HAMi writes `Requesting_<DateTime now>`, e.g. Requesting_2026-08-21 06:20:39.
    let t = naive(2026, 8, 21, 6, 20, 39);
    assert_eq!(encode_handshake_requesting(t), "Requesting_2026-08-21 06:20:39");
    assert_eq!(encode_handshake_deleted(t), "Deleted_2026-08-21 06:20:39");
    // A Deleted_ value is not a request.
    assert_eq!(decode_handshake(&encode_handshake_deleted(t)), Handshake::Other);
    // Sub-second precision is not written.
    let t = t + TimeDelta::milliseconds(750);
    assert_eq!(encode_handshake_requesting(t), "Requesting_2026-08-21 06:20:39");
}

// =============================================================================================
// 7. Go booleans (colon-list health, `nvidia.com/numa-bind` and the like)

#[test]
fn parse_go_bool_accepts_the_twelve_literals_only() {
    // Go's ParseBool literals: 1 t T TRUE true True 0 f F FALSE false False.
    let cases = [
        ("1", Ok(true)),
        ("t", Ok(true)),
        ("T", Ok(true)),
        ("TRUE", Ok(true)),
        ("true", Ok(true)),
        ("True", Ok(true)),
        ("0", Ok(false)),
        ("f", Ok(false)),
        ("F", Ok(false)),
        ("FALSE", Ok(false)),
        ("false", Ok(false)),
        ("False", Ok(false)),
        // Anything else is not a Go boolean literal.
        ("yes", Err(Error::Bool("yes".into()))),
        ("TRue", Err(Error::Bool("TRue".into()))),
        ("", Err(Error::Bool(String::new()))),
        (" true", Err(Error::Bool(" true".into()))),
        ("2", Err(Error::Bool("2".into()))),
        ("on", Err(Error::Bool("on".into()))),
    ];
    for (input, want) in cases {
        assert_eq!(parse_go_bool(input), want, "{input:?}");
    }
}

// =============================================================================================
// 8. Selection lists (use/nouse pod annotations, `hami.io/device-cordon`)

#[test]
fn parse_list_trims_entries_and_skips_empties() {
    let cases: &[(&str, &[&str])] = &[
        // A value empty after trimming means no constraint.
        ("", &[]),
        ("   ", &[]),
        (" , ,, ", &[]),
        ("GPU-a", &["GPU-a"]),
        // A cordon list as HAMi documents it: `GPU-a, GPU-c` (spaces tolerated).
        ("GPU-a, GPU-c", &["GPU-a", "GPU-c"]),
        // Entries trimmed, empties skipped.
        ("  GPU-a ,,\tGPU-b\t,", &["GPU-a", "GPU-b"]),
        ("A100,a100", &["A100", "a100"]),
    ];
    for (input, want) in cases {
        assert_eq!(&parse_list(input), want, "{input:?}");
    }
}

#[test]
fn type_selection_is_a_case_insensitive_substring_match() {
    const A100: &str = "NVIDIA A100-SXM4-40GB";
    let cases: &[(Option<&str>, Option<&str>, &str, bool)] = &[
        // Absent keys are no constraint.
        (None, None, A100, true),
        // A blank value is no constraint.
        (Some("  "), Some(""), A100, true),
        (Some(" , ,"), Some(","), V100, true),
        // `use` fails when no entry is a substring of the upper-cased type.
        (Some("A100"), None, A100, true),
        (Some("a100"), None, A100, true),
        (Some("tesla v100"), None, V100, true),
        (Some("A100"), None, V100, false),
        (Some(" h100 , a100 "), None, A100, true),
        (Some("A100-SXM4-80GB"), None, A100, false),
        // `nouse` fails when any entry matches.
        (None, Some("V100"), V100, false),
        (None, Some("v100"), A100, true),
        (None, Some("h100, sxm4"), A100, false),
        // Both lists apply; `nouse` wins over `use`.
        (Some("NVIDIA"), Some("V100"), V100, false),
        (Some("NVIDIA"), Some("V100"), A100, true),
    ];
    for (use_v, nouse_v, ty, want) in cases {
        assert_eq!(Selection::types(*use_v, *nouse_v).allows(ty), *want, "use {use_v:?} nouse {nouse_v:?} type {ty:?}");
    }
    assert!(TypeList::parse(None).is_empty());
    assert!(TypeList::parse(Some(" ")).is_empty());
    assert!(TypeList::parse(Some("a100")).matches("nvidia a100"));
    assert!(!TypeList::parse(None).matches(A100));
}

#[test]
fn uuid_selection_is_an_exact_match_after_trimming() {
    let cases: &[(Option<&str>, Option<&str>, &str, bool)] = &[
        // Absent or blank is no constraint.
        (None, None, "GPU-a", true),
        (Some(""), Some("  "), "GPU-a", true),
        // Exact equality after trimming each entry.
        (Some("GPU-a"), None, "GPU-a", true),
        (Some(" GPU-b , GPU-a "), None, "GPU-a", true),
        (Some("GPU-a"), None, "GPU-ab", false),
        (Some("GPU-ab"), None, "GPU-a", false),
        (Some("gpu-a"), None, "GPU-a", false),
        // `nouse` fails when any entry matches.
        (None, Some("GPU-a,GPU-c"), "GPU-c", false),
        (None, Some("GPU-a,GPU-c"), "GPU-b", true),
        (None, Some("GPU-a"), "GPU-ab", true),
        (Some("GPU-a,GPU-b"), Some("GPU-b"), "GPU-b", false),
        (Some("GPU-a,GPU-b"), Some("GPU-b"), "GPU-a", true),
    ];
    for (use_v, nouse_v, id, want) in cases {
        assert_eq!(Selection::uuids(*use_v, *nouse_v).allows(id), *want, "use {use_v:?} nouse {nouse_v:?} id {id:?}");
    }
    assert!(Selection::uuids(None, None).is_empty());
    assert!(Selection::uuids(Some(" , "), Some("")).is_empty());
    assert!(!Selection::uuids(None, Some("GPU-a")).is_empty());
    assert!(UuidList::parse(Some("GPU-a ")).matches("GPU-a"));
    assert!(!UuidList::parse(Some("GPU-a")).matches(" GPU-a"));
}

// =============================================================================================
// 9. Scoring weights (`hami.io/device-scoring-weights`)

#[test]
fn parse_weights_accepts_three_distinct_keys() {
    let w = |slot, core, memory| Weights { slot, core, memory };
    let cases = [
        // HAMi's documented valid example.
        ("slot=1, core=1, memory=3", w(1.0, 1.0, 3.0)),
        // Whitespace around items, keys and values is trimmed.
        ("  slot = 2 ,core= 0,\tmemory =1 ", w(2.0, 0.0, 1.0)),
        // Any order; zeros allowed while not all zero.
        ("memory=3,slot=0,core=0", w(0.0, 0.0, 3.0)),
        ("core=5,memory=0,slot=0", w(0.0, 5.0, 0.0)),
        // Base-10 int64 (Go's ParseInt takes a leading '+').
        ("slot=+1,core=1,memory=1", w(1.0, 1.0, 1.0)),
        ("slot=007,core=1,memory=1", w(7.0, 1.0, 1.0)),
        ("slot=9223372036854775807,core=0,memory=0", w(9_223_372_036_854_775_807_i64 as f32, 0.0, 0.0)),
    ];
    for (input, want) in cases {
        assert_eq!(parse_weights(input).unwrap(), want, "{input:?}");
    }
    // The default weights are 1/1/1.
    assert_eq!(Weights::default(), w(1.0, 1.0, 1.0));
}

#[test]
fn parse_weights_rejects_everything_else_with_hamis_message() {
    // HAMi's parser, check for check: the item count, key=value, a duplicate key, the value's
    // integer and sign (before the key's name is looked at), the key's name, not all zero.
    let cases: &[(&str, &str)] = &[
        ("slot=1,core=1", "expected slot, core, and memory weights"),
        ("bogus=weights", "expected slot, core, and memory weights"),
        ("", "expected slot, core, and memory weights"),
        ("slot=1,core=1,memory=1,", "expected slot, core, and memory weights"),
        ("slot=1;core=1;memory=1", "expected slot, core, and memory weights"),
        ("slot,core=1,memory=1", "expected key=value entries"),
        ("slot:1,core=1,memory=1", "expected key=value entries"),
        ("slot=1,slot=1,core=1", r#"duplicate "slot" weight"#),
        ("memory=1,core=1,memory=2", r#"duplicate "memory" weight"#),
        ("slot=x,core=1,memory=1", r#""slot" weight must be an integer"#),
        ("foo=x,core=1,memory=1", r#""foo" weight must be an integer"#),
        ("slot=1.5,core=1,memory=1", r#""slot" weight must be an integer"#),
        ("slot=,core=1,memory=1", r#""slot" weight must be an integer"#),
        ("slot=0x10,core=1,memory=1", r#""slot" weight must be an integer"#),
        ("slot=1 2,core=1,memory=1", r#""slot" weight must be an integer"#),
        ("slot=9223372036854775808,core=1,memory=1", r#""slot" weight must be an integer"#),
        ("slot=-1,core=1,memory=1", r#""slot" weight must not be negative"#),
        ("slot=1,core=1,memory=-3", r#""memory" weight must not be negative"#),
        ("slot=1,core=1,mem=1", r#"unknown weight "mem""#),
        ("Slot=1,core=1,memory=1", r#"unknown weight "Slot""#),
        ("slot=1,core=1,=1", r#"unknown weight """#),
        ("foo=1,foo=2,core=1", r#"unknown weight "foo""#),
        ("slot=0,core=0,memory=0", "at least one weight must be positive"),
        ("slot=0, core=00, memory=+0", "at least one weight must be positive"),
    ];
    for (input, why) in cases {
        let e = parse_weights(input).unwrap_err();
        assert!(matches!(&e, Error::Weights { value, .. } if value == input), "{input:?}: {e:?}");
        let want = format!(
            "invalid hami.io/device-scoring-weights annotation {}: {why}",
            crate::model::numa_alignment::go_quote(input)
        );
        assert_eq!(e.to_string(), want, "{input:?}");
    }
    // Go's %q for the value: a tab is escaped, printable text kept.
    let e = parse_weights("slot=1\tcore").unwrap_err().to_string();
    assert_eq!(
        e,
        r#"invalid hami.io/device-scoring-weights annotation "slot=1\tcore": expected slot, core, and memory weights"#
    );
}

// =============================================================================================
// 10. NVIDIA pair scores (`hami.io/node-nvidia-score`)

const PAIR_SCORES: &str = concat!(
    r#"[{"uuid":"GPU-a","score":{"GPU-b":400,"GPU-c":20}},"#,
    r#"{"uuid":"GPU-b","score":{"GPU-a":400,"GPU-c":20}},"#,
    r#"{"uuid":"GPU-c","score":{"GPU-a":20,"GPU-b":20}}]"#,
);

#[test]
fn pair_scores_decode_the_worked_example() {
    // HAMi's documented hami.io/node-nvidia-score example.
    let p = decode_pair_scores(PAIR_SCORES).unwrap();
    assert_eq!(p.0.len(), 3);
    let cases = [
        ("GPU-a", "GPU-b", 400),
        ("GPU-a", "GPU-c", 20),
        ("GPU-b", "GPU-a", 400),
        ("GPU-b", "GPU-c", 20),
        ("GPU-c", "GPU-a", 20),
        ("GPU-c", "GPU-b", 20),
        // Missing entries score 0: a GPU towards itself, unknown GPUs either side.
        ("GPU-a", "GPU-a", 0),
        ("GPU-a", "GPU-x", 0),
        ("GPU-x", "GPU-a", 0),
        ("", "", 0),
    ];
    for (a, b, want) in cases {
        assert_eq!(p.score(a, b), want, "{a} -> {b}");
    }
}

#[test]
fn pair_scores_encode_the_worked_example_byte_for_byte() {
    // `[{"uuid": …, "score": {…}}, …]`, uuid first.
    let p = decode_pair_scores(PAIR_SCORES).unwrap();
    assert_eq!(encode_pair_scores(&p), PAIR_SCORES);
    assert_eq!(encode_pair_scores(&PairScores::default()), "[]");
}

#[test]
fn pair_scores_empty_values_and_missing_keys() {
    // A null or [] lists no scores.
    assert_eq!(decode_pair_scores("null").unwrap(), PairScores::default());
    assert_eq!(decode_pair_scores("[]").unwrap(), PairScores::default());
    // A missing or null score map is empty; every lookup is 0.
    let p = decode_pair_scores(r#"[{"uuid":"GPU-a"},{"uuid":"GPU-b","score":null}]"#).unwrap();
    assert_eq!(p.0, vec![("GPU-a".to_owned(), vec![]), ("GPU-b".to_owned(), vec![])]);
    assert_eq!(p.score("GPU-a", "GPU-b"), 0);
}

#[test]
fn pair_scores_reject_malformed_json() {
    // In HAMi a parse error here makes the node's whole NVIDIA registration fail.
    for input in [
        "",
        "[",
        "{}",
        "not json",
        r#"{"uuid":"GPU-a"}"#,
        r#"[{"uuid":1}]"#,
        r#"[{"uuid":"a","score":{"b":"400"}}]"#,
        r#"[{"uuid":"a","score":{"b":1.5}}]"#,
        r#"[{"uuid":"a","score":[]}]"#,
    ] {
        match decode_pair_scores(input) {
            Err(Error::PairScores(_)) => {}
            other => panic!("{input:?}: unexpected {other:?}"),
        }
    }
}

// =============================================================================================
// Property tests

fn i32_range_u32() -> impl Strategy<Value = u32> {
    0..=I32_MAX_U32
}

fn any_mig_profile() -> impl Strategy<Value = MigProfile> {
    ("\\PC{0,8}", any::<u32>(), any::<u32>(), any::<u32>(), vec((any::<u32>(), any::<u32>()), 0..4)).prop_map(
        |(name, memory_mb, core, slice_count, ps)| MigProfile {
            name: Arc::from(name),
            memory_mb,
            core,
            slice_count,
            placements: ps.into_iter().map(|(start, size)| MigPlacement { start, size }).collect(),
        },
    )
}

fn any_json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
    ]
}

fn any_custom() -> impl Strategy<Value = Option<Arc<serde_json::Map<String, Value>>>> {
    proptest::option::of(vec(("\\PC{0,8}", any_json_value()), 0..4).prop_map(|kv| Arc::new(kv.into_iter().collect())))
}

/// Any device the JSON list can carry (int32 count, memory and cores, u32 index, i32 NUMA).
fn any_json_device() -> impl Strategy<Value = DeviceInfo> {
    (
        ("\\PC{0,16}", any::<u32>(), i32_range_u32(), i32_range_u32(), i32_range_u32()),
        ("\\PC{0,16}", any::<i32>(), "\\PC{0,8}", vec(any_mig_profile(), 0..3), any::<bool>(), any_custom()),
    )
        .prop_map(|((id, index, count, devmem, devcore), (ty, numa, mode, mig, health, custom))| DeviceInfo {
            id: DeviceUuid::new(&id),
            index,
            count,
            devmem: MemMiB(devmem.into()),
            devcore,
            ty: Arc::from(ty),
            numa,
            mode: Arc::from(mode),
            mig_profiles: Arc::from(mig),
            health,
            custom,
        })
}

/// Any device the colon list can carry: text fields without ',' or ':'.
fn any_colon_device() -> impl Strategy<Value = DeviceInfo> {
    (
        ("[^,:]{0,16}", any::<u32>(), i32_range_u32(), i32_range_u32(), i32_range_u32()),
        ("[^,:]{0,16}", any::<i32>(), "[^,:]{0,8}", any::<bool>()),
    )
        .prop_map(|((id, index, count, devmem, devcore), (ty, numa, mode, health))| DeviceInfo {
            numa,
            mode: Arc::from(mode),
            health,
            ..DeviceInfo::new(&id, index, count, devmem.into(), devcore, &ty)
        })
}

/// Any pod device entry: uuid without `, : ; [`, type without `, : ;`, int32 usage.
fn any_container_device() -> impl Strategy<Value = ContainerDevice> {
    ("[^,:;\\[]{0,16}", "[^,:;]{0,12}", i32_range_u32(), i32_range_u32())
        .prop_map(|(uuid, ty, mem, cores)| cd(&uuid, &ty, mem.into(), cores))
}

/// Valid MIG allocations: unique index pairs, non-empty ids, size > 0.
fn any_mig_allocations() -> impl Strategy<Value = Vec<MigAllocation>> {
    let one = (
        (any::<u32>(), any::<u32>(), "\\PC{1,16}", "\\PC{1,8}", any::<u32>(), 1..=u32::MAX),
        proptest::option::of(("\\PC{1,16}", any::<u32>(), any::<u32>())),
    )
        .prop_map(|((ci, di, gpu, profile, start, size), runtime)| MigAllocation {
            container_index: ci,
            device_index: di,
            gpu_uuid: gpu,
            profile,
            placement: MigPlacement { start, size },
            mig_uuid: runtime.as_ref().map(|r| r.0.clone()),
            gpu_instance_id: runtime.as_ref().map(|r| r.1),
            compute_instance_id: runtime.as_ref().map(|r| r.2),
        });
    vec(one, 0..6).prop_map(|v| {
        let mut seen = std::collections::BTreeSet::new();
        v.into_iter().filter(|a| seen.insert((a.container_index, a.device_index))).collect()
    })
}

proptest! {
    #[test]
    fn json_list_round_trips(devs in vec(any_json_device(), 1..6)) {
        // What HAMi writes, HAMi reads back unchanged.
        let s = encode_node_devices_json(&devs);
        prop_assert_eq!(decode_node_devices_json(&s).unwrap(), devs.clone());
        prop_assert_eq!(decode_node_devices(&s).unwrap(), devs);
    }

    #[test]
    fn colon_list_round_trips(devs in vec(any_colon_device(), 1..6)) {
        // The 9-field form carries every field it has.
        let s = encode_node_devices_colon(&devs);
        prop_assert_eq!(decode_node_devices_colon(&s).unwrap(), devs);
    }

    #[test]
    fn pod_devices_round_trip_with_one_trailing_empty_entry(
        containers in vec(vec(any_container_device(), 0..4), 1..6)
    ) {
        // Encoded k containers decode to k+1 entries, the last empty.
        let decoded = decode_pod_devices(&encode_pod_devices(&containers)).unwrap();
        let mut want = containers.clone();
        want.push(Vec::new());
        prop_assert_eq!(&decoded, &want);
        prop_assert_eq!(trim_trailing_empty(decoded), trim_trailing_empty(containers));
    }

    #[test]
    fn mig_allocations_round_trip(allocs in any_mig_allocations()) {
        // Valid values survive encode/decode.
        prop_assert_eq!(decode_mig_allocations(&encode_mig_allocations(&allocs)).unwrap(), allocs);
    }

    #[test]
    fn node_lock_round_trips_at_whole_seconds(
        secs in 0i64..4_102_444_800,
        nanos in 0u32..1_000_000_000,
        ns in "[^,]{0,20}",
        name in "[^,]{0,20}",
    ) {
        // `<RFC3339 time>,<ns>,<name>`, written with whole seconds.
        let now = DateTime::from_timestamp(secs, nanos).unwrap();
        let l = decode_node_lock(&encode_node_lock(now, &ns, &name)).unwrap();
        prop_assert_eq!(l.time, DateTime::from_timestamp(secs, 0).unwrap());
        prop_assert!(l.is_held_by(&ns, &name));
        prop_assert_eq!(l.owner, Some((ns, name)));
    }

    #[test]
    fn node_lock_expiry_is_age_greater_than_timeout(lock_at in 0i64..4_102_444_800, age in -1_000i64..1_000, timeout in 0u64..600) {
        // Expired iff older than the timeout.
        let l = decode_node_lock(&encode_node_lock(DateTime::from_timestamp(lock_at, 0).unwrap(), "ns", "p")).unwrap();
        let now = DateTime::from_timestamp(lock_at + age, 0).unwrap();
        prop_assert_eq!(l.is_expired(now, Duration::from_secs(timeout)), age > timeout as i64);
    }

    #[test]
    fn handshake_requesting_round_trips(secs in 0i64..4_102_444_800) {
        // The scheduler reads back the DateTime it wrote.
        let t = DateTime::from_timestamp(secs, 0).unwrap().naive_utc();
        prop_assert_eq!(decode_handshake(&encode_handshake_requesting(t)), Handshake::Requesting(Some(t)));
    }

    #[test]
    fn no_decoder_panics_on_arbitrary_text(s in "\\PC*") {
        // Every decoder returns a typed error instead of panicking.
        let _ = decode_node_devices(&s);
        let _ = decode_node_devices_json(&s);
        let _ = decode_node_devices_colon(&s);
        let _ = decode_pod_devices(&s);
        let _ = decode_mig_allocations(&s);
        let _ = decode_node_lock(&s);
        let _ = decode_handshake(&s);
        let _ = parse_go_bool(&s);
        let _ = parse_list(&s);
        let _ = parse_weights(&s);
        let _ = decode_pair_scores(&s);
        let _ = strip_legacy_mig_suffix(&s);
        let _ = Selection::types(Some(&s), Some(&s)).allows(&s);
        let _ = Selection::uuids(Some(&s), Some(&s)).allows(&s);
    }

    #[test]
    fn no_decoder_panics_on_colon_shaped_text(s in "(([-0-9a-zA-Z \\[\\]]{0,4},){0,10}[-0-9a-z]{0,4}[:;]){0,4}") {
        let _ = decode_node_devices(&s);
        let _ = decode_node_devices_colon(&s);
        let _ = decode_pod_devices(&s);
        let _ = decode_node_lock(&s);
        let _ = parse_weights(&s);
    }

    #[test]
    fn no_decoder_panics_on_json_shaped_text(
        s in "\\[(\\{(\"[a-zA-Z]{1,12}\":(-?[0-9]{1,20}|\"[^\"\\\\]{0,6}\"|true|false|null|\\[\\]|\\{\\}|\\{\"start\":[0-9]{1,3},\"size\":[0-9]\\}),?){0,8}\\},?){0,3}\\]"
    ) {
        let _ = decode_node_devices(&s);
        let _ = decode_node_devices_json(&s);
        let _ = decode_mig_allocations(&s);
        let _ = decode_pair_scores(&s);
    }

    #[test]
    fn json_list_decodes_arbitrary_objects_or_errors(
        fields in vec((prop_oneof![
            Just("id"), Just("index"), Just("count"), Just("devmem"), Just("devcore"), Just("type"),
            Just("numa"), Just("mode"), Just("migProfiles"), Just("health"), Just("custominfo"), Just("HEALTH"),
        ], any_json_value()), 0..8)
    ) {
        // Any object decodes to a device or a typed error.
        let obj: serde_json::Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let s = Value::Array(vec![Value::Object(obj)]).to_string();
        match decode_node_devices_json(&s) {
            Ok(d) => prop_assert_eq!(d.len(), 1),
            Err(e) => prop_assert!(matches!(e, Error::Field { device: 0, .. }), "{}", e),
        }
    }
}

#[test]
fn pair_scores_encode_score_maps_in_key_order() {
    // Score maps are JSON objects, which Go writes with sorted keys.
    let p = PairScores(vec![("GPU-a".into(), vec![("GPU-c".into(), 20), ("GPU-b".into(), 400)])]);
    let s = encode_pair_scores(&p);
    assert_eq!(s, r#"[{"uuid":"GPU-a","score":{"GPU-b":400,"GPU-c":20}}]"#);
    let sorted = PairScores(vec![("GPU-a".into(), vec![("GPU-b".into(), 400), ("GPU-c".into(), 20)])]);
    assert_eq!(decode_pair_scores(&s).unwrap(), sorted);
}
