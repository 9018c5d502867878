//! How vendors read a container's device quantities. A quantity that is given must be usable:
//! one that does not parse, is not a whole number where HAMi reads whole numbers, or lies outside
//! the range HAMi's int32 request fields can hold is an error naming the resource and the value.
//! HAMi drops such a container's request (or falls back to a default) and places the pod as if
//! it needed nothing; hami-rs refuses the pod instead, at admission and at Filter.

use std::fmt::Display;
use std::ops::RangeInclusive;

use crate::model::ContainerView;
use crate::model::pod::QuantityText;
use crate::model::quantity::NotI64;

/// The largest value of HAMi's int32 request fields (count, memory, cores).
pub const I32_MAX: i64 = i32::MAX as i64;

/// Devices one container may ask for: HAMi keeps the count in an int32.
const COUNTS: RangeInclusive<i64> = 0..=I32_MAX;

/// The quantity `name` is given as, limit else request; `None` for an empty name.
pub fn given<'a>(c: &'a ContainerView, name: &str) -> Option<&'a QuantityText> {
    c.quantity(name).filter(|_| !name.is_empty())
}

/// The limit of `name` only, for vendors that ignore requests; `None` for an empty name.
pub fn given_limit<'a>(c: &'a ContainerView, name: &str) -> Option<&'a QuantityText> {
    c.limit(name).filter(|_| !name.is_empty())
}

fn out_of_range(name: &str, value: impl Display, range: &RangeInclusive<i64>) -> String {
    format!("{name}: {value} is out of range {}..={}", range.start(), range.end())
}

/// A quantity as an exact integer (Go's `AsInt64`) within `range`; `Ok(None)` when not given.
pub fn int_in(q: Option<&QuantityText>, name: &str, range: RangeInclusive<i64>) -> Result<Option<i64>, String> {
    let Some(text) = q else { return Ok(None) };
    let parsed = text.parse().map_err(|e| format!("{name}: {e}"))?;
    match parsed.to_i64() {
        Ok(v) if range.contains(&v) => Ok(Some(v)),
        Ok(v) => Err(out_of_range(name, v, &range)),
        Err(NotI64::OutOfRange) => Err(out_of_range(name, &text.0, &range)),
        Err(NotI64::Fraction) => Err(format!("{name}: {:?} is not an integer", text.0)),
    }
}

/// A quantity rounded up as Go's `Value` rounds, within `range`; `Ok(None)` when not given. For
/// the resources HAMi reads with `Value`, where a fraction is a valid request.
pub fn ceil_in(q: Option<&QuantityText>, name: &str, range: RangeInclusive<i64>) -> Result<Option<i64>, String> {
    let Some(text) = q else { return Ok(None) };
    let v = text.parse().map_err(|e| format!("{name}: {e}"))?.value_ceil();
    if range.contains(&v) { Ok(Some(v)) } else { Err(out_of_range(name, v, &range)) }
}

/// A device count from an already chosen quantity: `Ok(None)` when not given or 0 (no request of
/// this vendor); a count that is not a whole number in int32 range is an error.
pub fn count_of(q: Option<&QuantityText>, name: &str) -> Result<Option<u32>, String> {
    match int_in(q, name, COUNTS)? {
        None | Some(0) => Ok(None),
        // In 1..=I32_MAX: the conversion cannot fail.
        Some(n) => Ok(u32::try_from(n).ok()),
    }
}

/// A device count, limit else request (see [`count_of`]).
pub fn count(c: &ContainerView, name: &str) -> Result<Option<u32>, String> {
    count_of(given(c, name), name)
}

/// Memory in MiB, limit else request, given in units of `unit` MiB; 0 when absent. HAMi keeps the
/// scaled value in an int32.
pub fn memory(c: &ContainerView, name: &str, unit: u64) -> Result<u64, String> {
    let unit = unit.max(1);
    let limit = I32_MAX / i64::try_from(unit).unwrap_or(i64::MAX);
    Ok(int_in(given(c, name), name, 0..=limit)?.map_or(0, |m| m.unsigned_abs() * unit))
}

/// Cores, limit else request, `default` when absent: a whole number in int32 range (a negative
/// value would subtract usage).
pub fn cores(c: &ContainerView, name: &str, default: u32) -> Result<u32, String> {
    cores_of(given(c, name), name, default)
}

/// Cores from an already chosen quantity (see [`cores`]).
pub fn cores_of(q: Option<&QuantityText>, name: &str, default: u32) -> Result<u32, String> {
    Ok(int_in(q, name, 0..=I32_MAX)?.map_or(default, |v| v.unsigned_abs() as u32))
}

#[cfg(test)]
mod tests {
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
            assert_eq!(got, want.map_err(str::to_owned), "{given}");
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
            assert_eq!(cores_of(q.as_ref(), "example.com/cores", 100), want.map_err(str::to_owned), "{given:?}");
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
            assert_eq!(ceil_in(Some(&text(given)), "example.com/mem", 0..=100), want.map_err(str::to_owned), "{given}");
        }
    }

    /// One resource of one vendor given an unusable value, with the counts it needs beside it.
    struct Row {
        vendor: &'static str,
        base: &'static [(&'static str, &'static str)],
        resource: &'static str,
        value: &'static str,
        says: &'static str,
    }

    const R: &str = "is out of range 0..=2147483647";

    #[rustfmt::skip]
    fn rows() -> Vec<Row> {
        let row = |vendor, base, resource, value, says| Row { vendor, base, resource, value, says };
        let nv: &'static [(&str, &str)] = &[("nvidia.com/gpu", "1")];
        let mlu: &'static [(&str, &str)] = &[("cambricon.com/vmlu", "1")];
        let dcu: &'static [(&str, &str)] = &[("hygon.com/dcunum", "1")];
        let ilu: &'static [(&str, &str)] = &[("iluvatar.ai/MR-V100-vgpu", "1")];
        let mt: &'static [(&str, &str)] = &[("mthreads.com/vgpu", "1")];
        let sgpu: &'static [(&str, &str)] = &[("metax-tech.com/sgpu", "1")];
        let vxpu: &'static [(&str, &str)] = &[("kunlunxin.com/vxpu", "1")];
        let amd: &'static [(&str, &str)] = &[("amd.com/gpu", "1")];
        let npu: &'static [(&str, &str)] = &[("huawei.com/Ascend910B3", "1")];
        let mut rows = Vec::new();
        // Every count HAMi reads with AsInt64 into an int32: too big, not a number, negative,
        // fractional.
        for (vendor, count) in [
            ("NVIDIA", "nvidia.com/gpu"),
            ("MLU", "cambricon.com/vmlu"),
            ("DCU", "hygon.com/dcunum"),
            ("GCU", "enflame.com/gcu"),
            ("Enflame", "enflame.com/drs-gcu"),
            ("Mthreads", "mthreads.com/vgpu"),
            ("Metax-GPU", "metax-tech.com/gpu"),
            ("Metax-SGPU", "metax-tech.com/sgpu"),
            ("kunlun", "kunlunxin.com/xpu"),
            ("XPU", "kunlunxin.com/vxpu"),
            ("AMD", "amd.com/gpu"),
            ("Vastai", "vastaitech.com/va"),
            ("Biren", "birentech.com/gpu"),
            ("Ascend910B3", "huawei.com/Ascend910B3"),
            ("MR-V100", "iluvatar.ai/MR-V100-vgpu"),
        ] {
            rows.push(row(vendor, &[], count, "99999999999999999999", R));
            rows.push(row(vendor, &[], count, "2147483648", R));
            rows.push(row(vendor, &[], count, "one", "is not a valid Kubernetes quantity"));
            rows.push(row(vendor, &[], count, "-1", R));
            rows.push(row(vendor, &[], count, "1.5", "is not an integer"));
        }
        rows.extend([
            // NVIDIA memory, percentage (the webhook's 0–100) and cores.
            row("NVIDIA", nv, "nvidia.com/gpumem", "16Gi", "17179869184 is out of range 0..=2147483647"),
            row("NVIDIA", nv, "nvidia.com/gpumem", "0.5", "is not an integer"),
            row("NVIDIA", nv, "nvidia.com/gpumem", "lots", "is not a valid Kubernetes quantity"),
            row("NVIDIA", nv, "nvidia.com/gpumem-percentage", "150", "150 is out of range 0..=100"),
            row("NVIDIA", nv, "nvidia.com/gpumem-percentage", "-1", "-1 is out of range 0..=100"),
            row("NVIDIA", nv, "nvidia.com/gpumem-percentage", "50.5", "is not an integer"),
            row("NVIDIA", nv, "nvidia.com/gpumem-percentage", "half", "is not a valid Kubernetes quantity"),
            row("NVIDIA", nv, "nvidia.com/gpucores", "1.5", "is not an integer"),
            row("NVIDIA", nv, "nvidia.com/gpucores", "-5", R),
            row("NVIDIA", nv, "nvidia.com/gpucores", "most", "is not a valid Kubernetes quantity"),
            // Cambricon, Hygon, Iluvatar, Mthreads: memory in units, cores default when absent.
            row("MLU", mlu, "cambricon.com/mlu.smlu.vmemory", "8388608", "8388608 is out of range 0..=8388607"),
            row("MLU", mlu, "cambricon.com/mlu.smlu.vmemory", "1.5", "is not an integer"),
            row("MLU", mlu, "cambricon.com/mlu.smlu.vcore", "1.5", "is not an integer"),
            row("MLU", mlu, "cambricon.com/mlu.smlu.vcore", "most", "is not a valid Kubernetes quantity"),
            row("DCU", dcu, "hygon.com/dcumem", "-1", R),
            row("DCU", dcu, "hygon.com/dcucores", "2.5", "is not an integer"),
            row("DCU", dcu, "hygon.com/dcucores", "2147483648", R),
            row("MR-V100", ilu, "iluvatar.ai/MR-V100.vMem", "0.5", "is not an integer"),
            row("MR-V100", ilu, "iluvatar.ai/MR-V100.vCore", "0.5", "is not an integer"),
            row("MR-V100", ilu, "iluvatar.ai/MR-V100.vCore", "-1", R),
            row("Mthreads", mt, "mthreads.com/sgpu-memory", "4194304", "4194304 is out of range 0..=4194303"),
            row("Mthreads", mt, "mthreads.com/sgpu-core", "1.5", "is not an integer"),
            // Metax sGPU reads limits only.
            row("Metax-SGPU", sgpu, "metax-tech.com/vcore", "30.5", "is not an integer"),
            row("Metax-SGPU", sgpu, "metax-tech.com/vcore", "-1", R),
            row("Metax-SGPU", sgpu, "metax-tech.com/vmemory", "1.5", "is not an integer quantity"),
            // Enflame DRS memory and cores round up (Go's Value), so only their sign and size count.
            row("Enflame", &[], "enflame.com/gcu-memory", "-1", R),
            row("Enflame", &[], "enflame.com/gcu-core", "lots", "is not a valid Kubernetes quantity"),
            // Kunlun vXPU memory, which HAMi reads as absent (the whole device) when it is not an
            // integer.
            row("XPU", vxpu, "kunlunxin.com/vxpu-memory", "1.5", "is not an integer"),
            row("XPU", vxpu, "kunlunxin.com/vxpu-memory", "-1", "-1 is out of range"),
            row("XPU", vxpu, "kunlunxin.com/vxpu-memory", "lots", "is not a valid Kubernetes quantity"),
            // AMD: memory an int32 of MiB, cores a percentage 1–100.
            row("AMD", amd, "amd.com/gpumem", "3000000000", R),
            row("AMD", amd, "amd.com/gpucores", "101", "101 is out of range 1..=100"),
            row("AMD", amd, "amd.com/gpucores", "0", "0 is out of range 1..=100"),
            row("AMD", amd, "amd.com/gpucores", "12.5", "is not an integer"),
            // Ascend memory (MiB, integer) and cores (rounded up).
            row("Ascend910B3", npu, "huawei.com/Ascend910B3-memory", "16Gi", "17179869184 is out of range"),
            row("Ascend910B3", npu, "huawei.com/Ascend910B3-memory", "1.5", "is not an integer"),
            row("Ascend910B3", npu, "huawei.com/Ascend910B3-core", "-1", "-1 is out of range"),
        ]);
        rows
    }

    #[test]
    fn every_vendors_unusable_quantities_refuse_the_pod_naming_the_resource_and_the_value() {
        // HAMi drops such a container's request (or takes a default) and places the pod as if it
        // needed no device; hami-rs refuses it with the resource and the value in the message.
        let vendors = crate::testing::vendors();
        for r in rows() {
            let mut p = crate::testing::pod();
            for (k, v) in r.base {
                p = p.limit(k, v);
            }
            let view = p.limit(r.resource, r.value).view();
            let what = format!("{} = {}", r.resource, r.value);
            let e = match vendors.pod_request(&view, &crate::testing::defaults()) {
                Ok(req) => panic!("{what}: accepted as {:?}", req.containers),
                Err(e) => e.to_string(),
            };
            let prefix = format!("container c: unusable {} device request: {}: ", r.vendor, r.resource);
            assert!(e.starts_with(&prefix), "{what}: {e}");
            assert!(e.contains(r.says), "{what}: {e}");
            // The value as given, or as the vendor read it (a number scaled out of its unit).
            let read = r.says.split(" is ").next().filter(|v| v.parse::<i64>().is_ok());
            assert!(e.contains(r.value) || read.is_some(), "{what}: {e}");
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
}
