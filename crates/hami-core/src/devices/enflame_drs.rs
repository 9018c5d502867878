//! Enflame DRS vGCU (HAMi's "Enflame"): hard partitions ("slices") of a GCU described by the node's
//! `enflame.com/gcu-drs-capacity` JSON. Owns the capacity decoder, the profile choice, slice
//! accounting (a device's `used` counts slices, not tasks) and the `enflame.com/gcu-*` /
//! `assigned-containers` pod keys. No lock, always healthy.

use crate::model::request::Unusable;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::model::annotations::enflame_drs as keys;
use crate::model::codec::{self, Selection, UuidList};
use crate::model::edit::{ContainerEdit, PodContext};
use crate::model::pod::NodeView;
use crate::model::quantity::Quantity;
use crate::model::reason::{Need, Reason, Rejection, Tally};
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerDevice, ContainerView, DeviceInfo, DeviceUsage, MemMiB, PodRequest, PodView, VendorId};

use super::common;
use super::enflame::EnflameConfig;
use super::walk::{self, Rules};
use super::{Discovery, FitCx, LockKind, Names, Pick, Vendor, WriteCx, quantities};

pub const WORD: &str = "Enflame";

/// `ContainerRequest::mode` of a request by slice count (`enflame.com/drs-gcu`); `memreq` holds
/// the number of slices.
pub const MODE_DIRECT: i32 = 0;
/// `ContainerRequest::mode` of a request by memory and cores; `memreq` holds the memory as given
/// (GB, or MiB when large) and `cores` the core percentage.
pub const MODE_SPEC: i32 = -1;

/// The built-in names HAMi falls back to when the config leaves them empty.
const DEFAULT_COUNT: &str = "enflame.com/drs-gcu";
const DEFAULT_MEMORY: &str = "enflame.com/gcu-memory";
const DEFAULT_CORE: &str = "enflame.com/gcu-core";

const I32_MAX: i64 = i32::MAX as i64;

pub struct EnflameDrs {
    count_name: String,
    mem_name: String,
    core_name: String,
    word: Arc<str>,
}

impl EnflameDrs {
    /// HAMi's fallbacks: the DRS count name, else the legacy vGCU name, else the built-in one;
    /// built-in memory and core names when those are empty.
    pub fn new(cfg: &EnflameConfig) -> EnflameDrs {
        let or = |v: &str, d: &str| if v.is_empty() { d.to_owned() } else { v.to_owned() };
        let count =
            if cfg.resource_name_drs_gcu.is_empty() { &cfg.resource_name_vgcu } else { &cfg.resource_name_drs_gcu };
        EnflameDrs {
            count_name: or(count, DEFAULT_COUNT),
            mem_name: or(&cfg.resource_name_gcu_memory, DEFAULT_MEMORY),
            core_name: or(&cfg.resource_name_gcu_core, DEFAULT_CORE),
            word: Arc::from(WORD),
        }
    }
}

/// What discovery keeps of a node: its profiles in HAMi's candidate order.
#[derive(Debug, Default)]
pub struct Extra {
    pub profiles: Vec<Profile>,
}

/// What the pod's annotations and spec say, parsed once per pod.
#[derive(Debug, Default)]
pub struct Params {
    pub uuids: Selection<UuidList>,
    /// Container names, init containers first (the keys of `assigned-containers`).
    pub names: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Profiles

/// One DRS profile a device can be partitioned into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// As published, e.g. `2g.24gb`.
    pub name: String,
    /// The plugin's profile id.
    pub id: String,
    pub slices: u32,
    pub gb: u32,
    /// `ceil(slices × 100 / max slices)`.
    pub core_pct: u32,
}

impl Profile {
    pub fn mem(&self) -> MemMiB {
        MemMiB(u64::from(self.gb) * 1024)
    }
}

/// Splits `<slices>g.<GB>gb` (case-insensitive, spaces around the parts ignored) as HAMi does:
/// `(slices, GB)`, `(slices, 0)` when the GB part does not parse, `(0, 0)` when the slice part
/// does not. Allocation-free: it runs for every charge on the filter path.
pub fn parse_profile(name: &str) -> (i64, i64) {
    let mut parts = name.trim().split('.');
    let (Some(size), Some(mem)) = (parts.next(), parts.next()) else { return (0, 0) };
    let size = size.trim();
    let size = if size.ends_with(['g', 'G']) { &size[..size.len() - 1] } else { size };
    let Ok(size) = size.parse::<i64>() else { return (0, 0) };
    let mem = mem.trim();
    let mem =
        if mem.len() >= 2 && mem.is_char_boundary(mem.len() - 2) && mem[mem.len() - 2..].eq_ignore_ascii_case("gb") {
            &mem[..mem.len() - 2]
        } else {
            mem
        };
    (size, mem.parse::<i64>().unwrap_or(0))
}

/// A device's profiles from its custom info: every usable `<slices>g.<GB>gb` name (both parts
/// positive, memory within int32 MiB), with its core share of the device's largest profile.
fn device_profiles(info: &DeviceInfo) -> impl Iterator<Item = (&str, &str, u32, u32, u32)> {
    let custom = info.custom.as_deref();
    let max = custom.and_then(|c| c.get("maxSlice")).and_then(Value::as_i64).unwrap_or(0);
    let profiles = custom.and_then(|c| c.get("profiles")).and_then(Value::as_object);
    profiles.into_iter().flatten().filter_map(move |(name, id)| {
        let (size, gb) = parse_profile(name);
        usable(size, gb, max).map(|(slices, gb, core)| (name.as_str(), id.as_str().unwrap_or(""), slices, gb, core))
    })
}

/// `(slices, GB, core %)` when HAMi would offer the profile: positive sizes, memory that fits an
/// int32 of MiB, and a known largest profile to take the core share of.
fn usable(size: i64, gb: i64, max_slice: i64) -> Option<(u32, u32, u32)> {
    if size <= 0 || gb <= 0 || max_slice <= 0 || size > I32_MAX || gb > I32_MAX / 1024 {
        return None;
    }
    // ceil(size × 100 / max), in integers.
    let core = (size * 100 + max_slice - 1) / max_slice;
    Some((size as u32, gb as u32, u32::try_from(core).ok()?))
}

/// The node's profiles, sorted by slices then GB (HAMi's candidate order): the union over its
/// devices (which all carry the node's list).
fn node_profiles<'a>(infos: impl Iterator<Item = &'a DeviceInfo>) -> Vec<Profile> {
    let mut out: Vec<Profile> = Vec::new();
    for info in infos {
        for (name, id, slices, gb, core_pct) in device_profiles(info) {
            match out.iter_mut().find(|q| q.name == name) {
                // HAMi keeps one candidate per name; the last device seen wins.
                Some(q) => q.id = id.to_owned(),
                None => out.push(Profile { name: name.to_owned(), id: id.to_owned(), slices, gb, core_pct }),
            }
        }
    }
    out.sort_by(|a, b| (a.slices, a.gb, &a.name).cmp(&(b.slices, b.gb, &b.name)));
    out
}

/// A spec-form memory in GB: as given, unless it is more than twice the largest profile's GB, in
/// which case it is MiB rounded up to GB, as HAMi reads it.
fn requested_gb(mem: u64, largest_gb: u32) -> u64 {
    if mem > 2 * u64::from(largest_gb) { mem.div_ceil(1024) } else { mem }
}

/// The profile a request asks for, from the node's sorted profiles, as HAMi chooses it.
pub fn choose_profile<'p>(profiles: &'p [Profile], req: &ContainerRequest) -> Option<&'p Profile> {
    if req.mode == MODE_DIRECT {
        return profiles.iter().find(|p| u64::from(p.slices) == req.memreq.get());
    }
    // HAMi compares with the GB of the last (largest) profile.
    let largest = profiles.last()?.gb;
    let gb = requested_gb(req.memreq.get(), largest);
    profiles.iter().find(|p| (gb == 0 || u64::from(p.gb) >= gb) && (req.cores == 0 || p.core_pct >= req.cores))
}

/// The profile an allocation entry stands for, recognised by its memory and cores on `info`.
fn entry_profile<'a>(entry: &ContainerDevice, info: &'a DeviceInfo) -> Option<(&'a str, &'a str, u32)> {
    let mut best: Option<(&str, &str, u32, u32)> = None;
    for (name, id, slices, gb, core) in device_profiles(info) {
        if u64::from(gb) * 1024 == entry.usedmem.get() && core == entry.usedcores {
            // Several names may share memory and cores; take the smallest, deterministically.
            if best.is_none_or(|(n, _, s, g)| (slices, gb, name) < (s, g, n)) {
                best = Some((name, id, slices, gb));
            }
        }
    }
    best.map(|(n, id, s, _)| (n, id, s))
}

/// Slices an entry occupies: its profile's, or 1 when the profile cannot be recognised (HAMi's
/// count for every entry).
fn slices_of(entry: &ContainerDevice, info: Option<&DeviceInfo>) -> u32 {
    info.and_then(|i| entry_profile(entry, i)).map_or(1, |(_, _, s)| s)
}

// ---------------------------------------------------------------------------------------------
// The capacity annotation

/// A key of a JSON object, matched case-insensitively as Go's decoder does; null reads as absent.
fn field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key)
        .or_else(|| obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
        .filter(|v| !v.is_null())
}

fn string_field(obj: &Map<String, Value>, device: usize, key: &'static str) -> codec::Result<String> {
    match field(obj, key) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(codec::Error::Field { device, field: key, why: "expected a string".into() }),
    }
}

/// A device's slice capacity: a JSON number (truncated, as Go converts a float to int32) or a
/// decimal string; it must be positive.
fn capacity(v: Option<&Value>, device: usize) -> codec::Result<u32> {
    let err = |why: String| codec::Error::Field { device, field: "capacity", why };
    let n = match v {
        Some(Value::Number(n)) => {
            let f = n.as_f64().ok_or_else(|| err(format!("{n} is not a number")))?;
            if !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&f) {
                return Err(err(format!("{n} is out of the int32 range")));
            }
            f.trunc() as i64
        }
        Some(Value::String(s)) => s.trim().parse::<i64>().map_err(|_| err(format!("{s:?} is not an integer")))?,
        _ => return Err(err("expected a number or a decimal string".into())),
    };
    if n <= 0 {
        return Err(err(format!("{n} slices: capacity must be positive")));
    }
    Ok(n.min(I32_MAX) as u32)
}

/// Decodes `enflame.com/gcu-drs-capacity` into one device per entry: id
/// `<node>-enflame-drs-<index>`, count = capacity in slices, memory = the largest profile's GB ×
/// 1024, 100 cores, custom info `{minor, index, profiles, maxSlice}`. `NoDevices` when the
/// annotation lists none.
pub fn decode_capacity(node: &str, s: &str) -> codec::Result<Vec<DeviceInfo>> {
    let v: Value = serde_json::from_str(s).map_err(|e| codec::Error::Json(e.to_string()))?;
    let empty = Map::new();
    let top = match &v {
        Value::Object(o) => o,
        // Go decodes `null` into an empty spec.
        Value::Null => &empty,
        _ => return Err(codec::Error::Json("expected an object with devices and profiles".into())),
    };
    let devices: &[Value] = match field(top, "devices") {
        None => &[],
        Some(Value::Array(a)) => a,
        Some(_) => return Err(codec::Error::Json("devices: expected an array".into())),
    };
    let mut profiles = Map::new();
    match field(top, "profiles") {
        None => {}
        Some(Value::Object(o)) => {
            for (name, id) in o {
                match id {
                    Value::String(_) => {
                        profiles.insert(name.clone(), id.clone());
                    }
                    // Go's decoder reads a null map value as the empty string.
                    Value::Null => {
                        profiles.insert(name.clone(), Value::String(String::new()));
                    }
                    _ => return Err(codec::Error::Json(format!("profiles: {name:?}: expected a string"))),
                }
            }
        }
        Some(_) => return Err(codec::Error::Json("profiles: expected an object".into())),
    }
    if devices.is_empty() {
        return Err(codec::Error::NoDevices);
    }
    let (mut max_slice, mut max_gb) = (0i64, 0i64);
    for name in profiles.keys() {
        let (size, gb) = parse_profile(name);
        max_slice = max_slice.max(size);
        max_gb = max_gb.max(gb);
    }
    if max_slice <= 0 {
        let why = "no profile of the form <slices>g.<GB>gb".into();
        return Err(codec::Error::Field { device: 0, field: "profiles", why });
    }
    if max_gb <= 0 {
        // HAMi: without a memory figure, one GB per slice.
        max_gb = max_slice;
    }
    let devmem = max_gb.checked_mul(1024).filter(|m| *m <= I32_MAX).ok_or_else(|| codec::Error::Field {
        device: 0,
        field: "profiles",
        why: format!("{max_gb} GB does not fit in int32 MiB"),
    })?;
    let profiles = Value::Object(profiles);
    let mut out = Vec::with_capacity(devices.len());
    for (pos, d) in devices.iter().enumerate() {
        let obj = d.as_object().ok_or_else(|| codec::Error::Field {
            device: pos,
            field: "",
            why: "expected an object".into(),
        })?;
        let index_text = string_field(obj, pos, "index")?;
        // An index that is not a non-negative integer is the entry's position (HAMi uses the
        // position when it does not parse; a negative one would wrap there).
        let index = index_text.parse::<u32>().unwrap_or(pos as u32);
        let count = capacity(field(obj, "capacity"), pos)?;
        let minor = string_field(obj, pos, "minor")?;
        let minor = if minor.trim().is_empty() { index.to_string() } else { minor.trim().to_owned() };
        let mut custom = Map::new();
        custom.insert("minor".into(), Value::String(minor));
        custom.insert("index".into(), Value::String(index.to_string()));
        custom.insert("profiles".into(), profiles.clone());
        custom.insert("maxSlice".into(), Value::from(max_slice));
        let mut info = DeviceInfo::new(&format!("{node}-enflame-drs-{index}"), index, count, devmem as u64, 100, WORD);
        info.custom = Some(Arc::new(custom));
        out.push(info);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Pod annotations

/// One value of `assigned-containers`, in the field order the device plugin's decoder expects.
#[derive(Serialize)]
struct Assigned<'a> {
    allocated: bool,
    request: u32,
    #[serde(rename = "profileID", skip_serializing_if = "str::is_empty")]
    profile_id: &'a str,
    #[serde(rename = "profileName", skip_serializing_if = "str::is_empty")]
    profile_name: &'a str,
}

fn edit_value(text: &str) -> Option<i64> {
    Quantity::parse(text).ok().map(|q| q.value_ceil())
}

/// Copies a quantity given only in limits into requests, or only in requests into limits.
fn mirror(c: &mut ContainerEdit<'_>, name: &str) {
    match (c.limit(name), c.request(name)) {
        (Some(l), None) => c.set_request(name, &l),
        (None, Some(r)) => c.set_limit(name, &r),
        _ => {}
    }
}

impl Vendor for EnflameDrs {
    fn names(&self) -> Names<'_> {
        Names::new(WORD, &self.count_name, &self.mem_name, &self.core_name, 1)
    }

    /// As HAMi derives it: always one device. A positive `drs-gcu` asks for that many slices;
    /// otherwise memory and/or cores (rounded up) ask for the smallest profile that holds them. A
    /// slice count that is not a whole number, and values outside what the request fields can hold,
    /// are refused (HAMi ignores or drops them).
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        if let Some(n) = quantities::count(c, &self.count_name)? {
            return Ok(Some(ContainerRequest {
                mode: MODE_DIRECT,
                ..ContainerRequest::new(id, 1, u64::from(n), 0, 0)
            }));
        }
        let field = |name: &str| quantities::ceil_in(quantities::given(c, name), name, 0..=I32_MAX);
        let (mem, core) = (field(&self.mem_name)?, field(&self.core_name)?);
        if mem.is_none() && core.is_none() {
            return Ok(None);
        }
        let (mem, core) = (mem.map_or(0, i64::unsigned_abs), core.map_or(0, |c| c as u32));
        Ok(Some(ContainerRequest { mode: MODE_SPEC, ..ContainerRequest::new(id, 1, mem, 0, core) }))
    }

    fn selects(&self, params: Option<&VendorParams>, _ty: &str, uuid: &str) -> bool {
        super::params_allow(params, |p: &Params| p.uuids.allows(uuid))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let a = |k: &str| pod.annotation(k);
        Some(Arc::new(Params {
            uuids: Selection::uuids(a(keys::USE_UUID), a(keys::NOUSE_UUID)),
            names: pod.all_containers().map(|c| c.name.clone()).collect(),
        }))
    }

    /// HAMi's webhook rules: a slice count must be positive; memory must be positive and cores in
    /// (0, 100]. Whichever form is used is mirrored into both limits and requests.
    fn mutate(&self, c: &mut ContainerEdit<'_>, _pod: &mut PodContext<'_>) -> Result<bool, Unusable> {
        if let Some(v) = c.quantity(&self.count_name) {
            if edit_value(&v).is_none_or(|n| n <= 0) {
                return Err(format!("{} must be greater than 0", self.count_name).into());
            }
            mirror(c, &self.count_name);
            return Ok(true);
        }
        let mem = c.quantity(&self.mem_name);
        let core = c.quantity(&self.core_name);
        if mem.is_none() && core.is_none() {
            return Ok(false);
        }
        if mem.as_deref().is_some_and(|m| edit_value(m).is_none_or(|n| n <= 0)) {
            return Err(format!("{} must be greater than 0", self.mem_name).into());
        }
        if core.as_deref().is_some_and(|m| edit_value(m).is_none_or(|n| n <= 0 || n > 100)) {
            return Err(format!("{} must be in range (0,100]", self.core_name).into());
        }
        if mem.is_some() {
            mirror(c, &self.mem_name);
        }
        if core.is_some() {
            mirror(c, &self.core_name);
        }
        Ok(true)
    }

    fn discover(&self, node: &NodeView) -> Discovery {
        common::listed(
            node,
            keys::DRS_CAPACITY,
            |v| decode_capacity(node.name(), v),
            |devices| {
                // The profile list is the same for every device of the node; sort it once here
                // instead of on every fit.
                let extra = Extra { profiles: node_profiles(devices.iter()) };
                Discovery::Devices { devices, extra: Some(Arc::new(extra)) }
            },
        )
    }

    /// As HAMi fits: choose the profile first (none → `ModeNotFit`), then walk: healthy, UUID, a
    /// free slot, mutex, free memory ≥ the profile's, free cores ≥ its share. hami-rs adds a last
    /// check that the profile's slices fit in the device's free slices (HAMi checks only
    /// `used < count`, so a large profile could over-commit slices its memory check let pass).
    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let computed;
        let profiles = match cx.extra.and_then(|e| e.downcast_ref::<Extra>()) {
            Some(e) => &e.profiles[..],
            None => {
                computed = node_profiles(cx.order.iter().map(|&p| &*cx.devs[usize::from(p)].info));
                &computed[..]
            }
        };
        let Some(profile) = choose_profile(profiles, &cx.req) else {
            let mut tally = Tally::new(cx.order.len());
            tally.add(Reason::ModeNotFit, 1);
            return Err(Rejection::Devices(tally));
        };
        let p = cx.params_as::<Params>();
        let uuid_ok = |d: &DeviceUsage| p.is_none_or(|p| p.uuids.allows(d.info.id.as_str()));
        let (mem, core) = (profile.mem(), profile.core_pct);
        let take = |d: &DeviceUsage| {
            let free_mem = d.free_mem();
            if free_mem < mem {
                return Err((
                    Reason::CardInsufficientMemory,
                    Need::Memory { requested: mem.get(), free: free_mem.get() },
                ));
            }
            if d.info.devcore > 0 && d.free_cores() < core {
                return Err((Reason::CardInsufficientCore, Need::Cores { requested: core, free: d.free_cores() }));
            }
            if d.used.saturating_add(profile.slices) > d.info.count {
                return Err((Reason::CardTimeSlicingExhausted, Need::Slots { used: d.used, count: d.info.count }));
            }
            Ok((mem, core))
        };
        let rules = Rules { uuid_ok: &uuid_ok, take: Some(&take), ..Rules::basic(&self.word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }

    /// `used` grows by the profile's slices, not by one.
    fn charge(&self, dev: &mut DeviceUsage, entry: &mut ContainerDevice, _pod: &PodRequest) {
        dev.used = dev.used.saturating_add(slices_of(entry, Some(&dev.info)));
        dev.used_mem += entry.usedmem;
        dev.used_cores = dev.used_cores.saturating_add(entry.usedcores);
    }

    /// A stored entry counts its profile's slices (HAMi rebuilds usage with one slot per entry, so
    /// existing pods' slices were under-counted: over-commit).
    fn entry_slots(&self, entry: &ContainerDevice, dev: Option<&DeviceInfo>) -> u32 {
        slices_of(entry, dev)
    }

    fn allocated_key(&self) -> Option<&str> {
        Some(keys::ALLOCATED)
    }

    fn pod_keys(&self) -> Vec<String> {
        [
            keys::ALLOCATED,
            keys::ASSIGNED,
            keys::ASSIGNED_TIME,
            keys::ASSIGNED_CONTAINERS,
            keys::ASSIGNED_INDEX,
            keys::ASSIGNED_ID,
            keys::ASSIGNED_MINOR,
            keys::REQUEST_SIZE,
        ]
        .map(String::from)
        .to_vec()
    }

    /// What the DRS device plugin reads: the allocated key only, `gcu-assigned: "false"`, the
    /// decision time, `assigned-containers` for every container holding a slice, and the first such
    /// container's device index, minor and slice count.
    fn annotations(&self, cx: &WriteCx<'_>, out: &mut Vec<(String, String)>) {
        out.push((keys::ALLOCATED.into(), codec::encode_pod_devices(cx.devices)));
        out.push((keys::ASSIGNED.into(), "false".into()));
        out.push((keys::ASSIGNED_TIME.into(), cx.unix_ns.to_string()));
        let info = |e: &ContainerDevice| cx.device(e).map(|d| &*d.info);
        // This vendor's parameters, found through the vendor its chosen devices belong to.
        let names =
            cx.vendor().and_then(|v| cx.pod.params(v)).and_then(|p| p.downcast_ref::<Params>()).map(|p| &p.names[..]);
        let mut assigned: BTreeMap<String, Assigned<'_>> = BTreeMap::new();
        let (mut index, mut minor, mut size) = (None, None, None);
        for (ci, c) in cx.devices.iter().enumerate() {
            let Some(chosen) = c.first() else { continue };
            let dev = info(chosen);
            let profile = dev.and_then(|i| entry_profile(chosen, i));
            let slices = profile.map_or(1, |(_, _, s)| s);
            let name = names.and_then(|n| n.get(ci)).cloned().unwrap_or_else(|| format!("container-{ci}"));
            assigned.insert(
                name,
                Assigned {
                    allocated: false,
                    request: slices,
                    profile_id: profile.map_or("", |(_, id, _)| id),
                    profile_name: profile.map_or("", |(n, _, _)| n),
                },
            );
            let custom = |k: &str| dev.and_then(|i| i.custom_str(k)).filter(|v| !v.is_empty()).map(str::to_owned);
            index = index.or_else(|| custom("index"));
            minor = minor.or_else(|| custom("minor"));
            size = size.or(Some(slices));
        }
        if let Some(i) = index {
            out.push((keys::ASSIGNED_INDEX.into(), i.clone()));
            out.push((keys::ASSIGNED_ID.into(), i));
        }
        if let Some(m) = minor {
            out.push((keys::ASSIGNED_MINOR.into(), m));
        }
        if let Some(s) = size {
            out.push((keys::REQUEST_SIZE.into(), s.to_string()));
        }
        if !assigned.is_empty()
            && let Ok(json) = serde_json::to_string(&assigned)
        {
            out.push((keys::ASSIGNED_CONTAINERS.into(), json));
        }
    }

    fn lock(&self) -> LockKind {
        LockKind::None
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
