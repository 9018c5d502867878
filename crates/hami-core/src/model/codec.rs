//! Annotation strings <-> model types, byte-compatible with what HAMi and its device plugins write
//! and read on nodes and pods. Every decoder returns a typed [`Error`] on malformed input and never
//! panics.

use std::sync::Arc;

use chrono::{DateTime, FixedOffset, NaiveDateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::device::{ContainerDevice, ContainerDevices, DeviceInfo, DeviceUuid, MemMiB, MigPlacement, MigProfile};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("no devices listed")]
    NoDevices,
    #[error("device {device}: field {field:?}: {why}")]
    Field { device: usize, field: &'static str, why: String },
    #[error("colon list has no ':' separator")]
    NoSeparator,
    #[error("device entry {segment:?}: expected 7 or 9 comma-separated fields, found {found}")]
    FieldCount { segment: String, found: usize },
    #[error("container {container}: device entry {entry:?}: {why}")]
    PodDevice { container: usize, entry: String, why: String },
    #[error("MIG allocation {entry}: {why}")]
    MigAllocation { entry: usize, why: String },
    #[error("node lock value {value:?}: {why}")]
    NodeLock { value: String, why: String },
    #[error("{0:?} is not a Go boolean literal")]
    Bool(String),
    #[error("invalid hami.io/device-scoring-weights annotation {}: {why}", super::numa_alignment::go_quote(value))]
    Weights { value: String, why: String },
    #[error("pair scores: {0}")]
    PairScores(String),
    #[error("{0} devices listed, at most {MAX_NODE_DEVICES} are supported")]
    TooManyDevices(usize),
}

/// Devices are addressed by `u16` positions within a node, so one node lists at most this many.
pub const MAX_NODE_DEVICES: usize = u16::MAX as usize;

pub type Result<T> = std::result::Result<T, Error>;

// ---------------------------------------------------------------------------------------------
// Go boolean literals (strconv.ParseBool)

/// Parses `1 t T TRUE true True 0 f F FALSE false False`, as Go's `strconv.ParseBool`.
pub fn parse_go_bool(s: &str) -> Result<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(Error::Bool(s.to_owned())),
    }
}

/// Formats a duration the way Go prints it (`5m0s`, `28s`, `2m0s`), for messages HAMi words so.
pub fn format_go_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let ms = d.subsec_millis();
    let frac = if ms > 0 { format!(".{:03}", ms).trim_end_matches('0').to_owned() } else { String::new() };
    if h > 0 {
        format!("{h}h{m}m{s}{frac}s")
    } else if m > 0 {
        format!("{m}m{s}{frac}s")
    } else {
        format!("{s}{frac}s")
    }
}

// ---------------------------------------------------------------------------------------------
// Node registration: JSON list and legacy colon list

/// Decodes a register annotation in either form: JSON when the first non-space character is `[`
/// (or the value is `null`), the legacy colon list otherwise. A superset of what HAMi accepts.
pub fn decode_node_devices(s: &str) -> Result<Vec<DeviceInfo>> {
    let t = s.trim_start();
    if t.starts_with('[') || t.starts_with("null") { decode_node_devices_json(s) } else { decode_node_devices_colon(s) }
}

/// Decodes the JSON device list. Keys match case-insensitively, as Go's decoder does; a missing
/// key reads as its zero value, so a missing `health` means unhealthy.
pub fn decode_node_devices_json(s: &str) -> Result<Vec<DeviceInfo>> {
    let v: Value = serde_json::from_str(s).map_err(|e| Error::Json(e.to_string()))?;
    let items = match v {
        Value::Null => return Err(Error::NoDevices),
        Value::Array(a) => a,
        _ => return Err(Error::Json("expected an array of devices".into())),
    };
    if items.is_empty() {
        return Err(Error::NoDevices);
    }
    if items.len() > MAX_NODE_DEVICES {
        return Err(Error::TooManyDevices(items.len()));
    }
    items.iter().enumerate().map(|(i, item)| decode_device_object(i, item)).collect()
}

struct Fields<'a> {
    device: usize,
    obj: &'a serde_json::Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// Exact key first, then a case-insensitive match (Go's rule); null reads as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        let v =
            self.obj.get(key).or_else(|| self.obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))?;
        (!v.is_null()).then_some(v)
    }
    fn err(&self, field: &'static str, why: impl Into<String>) -> Error {
        Error::Field { device: self.device, field, why: why.into() }
    }
    fn string(&self, key: &'static str) -> Result<String> {
        match self.get(key) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(self.err(key, "expected a string")),
        }
    }
    fn int(&self, key: &'static str, min: i64, max: i64) -> Result<i64> {
        match self.get(key) {
            None => Ok(0),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(v) if (min..=max).contains(&v) => Ok(v),
                _ => Err(self.err(key, format!("{n} is not an integer in {min}..={max}"))),
            },
            Some(_) => Err(self.err(key, "expected a number")),
        }
    }
    fn boolean(&self, key: &'static str) -> Result<bool> {
        match self.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.err(key, "expected a boolean")),
        }
    }
}

const I32_MAX: i64 = i32::MAX as i64;

fn decode_device_object(device: usize, item: &Value) -> Result<DeviceInfo> {
    let obj = item.as_object().ok_or_else(|| Error::Field { device, field: "", why: "expected an object".into() })?;
    let f = Fields { device, obj };
    let id = f.string("id")?;
    let mig_profiles = match f.get("migProfiles") {
        None => Vec::new(),
        Some(Value::Array(a)) => a.iter().map(|p| decode_mig_profile(device, p)).collect::<Result<Vec<_>>>()?,
        Some(_) => return Err(f.err("migProfiles", "expected an array")),
    };
    let custom = match f.get("custominfo") {
        None => None,
        Some(Value::Object(m)) => Some(Arc::new(m.clone())),
        Some(_) => return Err(f.err("custominfo", "expected an object")),
    };
    Ok(DeviceInfo {
        id: DeviceUuid::new(&id),
        index: f.int("index", 0, u32::MAX.into())? as u32,
        count: f.int("count", 0, I32_MAX)? as u32,
        devmem: MemMiB(f.int("devmem", 0, I32_MAX)? as u64),
        devcore: f.int("devcore", 0, I32_MAX)? as u32,
        ty: Arc::from(f.string("type")?),
        numa: f.int("numa", i32::MIN.into(), I32_MAX)? as i32,
        mode: Arc::from(f.string("mode")?),
        mig_profiles: Arc::from(mig_profiles),
        health: f.boolean("health")?,
        custom,
    })
}

fn decode_mig_profile(device: usize, v: &Value) -> Result<MigProfile> {
    let err = |why: &str| Error::Field { device, field: "migProfiles", why: why.to_owned() };
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire {
        #[serde(default)]
        name: String,
        #[serde(default, rename = "memoryMB")]
        memory_mb: u32,
        #[serde(default)]
        core: u32,
        #[serde(default)]
        slice_count: u32,
        #[serde(default)]
        placements: Option<Vec<MigPlacement>>,
    }
    let w: Wire = serde_json::from_value(v.clone()).map_err(|e| err(&e.to_string()))?;
    Ok(MigProfile {
        name: Arc::from(w.name),
        memory_mb: w.memory_mb,
        core: w.core,
        slice_count: w.slice_count,
        placements: w.placements.unwrap_or_default(),
    })
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}
fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

#[derive(Serialize)]
struct WireDevice<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "is_zero_u32")]
    index: u32,
    count: u32,
    devmem: u64,
    devcore: u32,
    #[serde(rename = "type")]
    ty: &'a str,
    #[serde(skip_serializing_if = "is_zero_i32")]
    numa: i32,
    #[serde(skip_serializing_if = "str::is_empty")]
    mode: &'a str,
    #[serde(rename = "migProfiles", skip_serializing_if = "<[MigProfile]>::is_empty")]
    mig_profiles: &'a [MigProfile],
    #[serde(skip_serializing_if = "is_false")]
    health: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    custominfo: Option<&'a serde_json::Map<String, Value>>,
}

/// Encodes the JSON list as the NVIDIA plugin writes it: key order id, index, count, devmem,
/// devcore, type, numa, mode, migProfiles, health; zero values omitted.
pub fn encode_node_devices_json(devs: &[DeviceInfo]) -> String {
    let wire: Vec<WireDevice<'_>> = devs
        .iter()
        .map(|d| WireDevice {
            id: d.id.as_str(),
            index: d.index,
            count: d.count,
            devmem: d.devmem.get(),
            devcore: d.devcore,
            ty: &d.ty,
            numa: d.numa,
            mode: &d.mode,
            mig_profiles: &d.mig_profiles,
            health: d.health,
            custominfo: d.custom.as_deref(),
        })
        .collect();
    serde_json::to_string(&wire).unwrap_or_else(|_| "[]".to_owned())
}

/// Decodes the legacy colon/comma list. Whitespace is significant, as in HAMi's parser.
pub fn decode_node_devices_colon(s: &str) -> Result<Vec<DeviceInfo>> {
    if !s.contains(':') {
        return Err(Error::NoSeparator);
    }
    let n = s.split(':').filter(|seg| !seg.is_empty()).count();
    if n > MAX_NODE_DEVICES {
        return Err(Error::TooManyDevices(n));
    }
    let mut out = Vec::new();
    for (device, seg) in s.split(':').filter(|seg| !seg.is_empty()).enumerate() {
        if !seg.contains(',') {
            return Err(Error::FieldCount { segment: seg.to_owned(), found: 1 });
        }
        let f: Vec<&str> = seg.split(',').collect();
        if f.len() != 7 && f.len() != 9 {
            return Err(Error::FieldCount { segment: seg.to_owned(), found: f.len() });
        }
        let err = |field: &'static str, why: &str| Error::Field { device, field, why: why.to_owned() };
        let nonneg_i32 = |field: &'static str, v: &str| -> Result<u32> {
            v.parse::<i32>()
                .ok()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| err(field, &format!("{v:?} is not a non-negative int32")))
        };
        let (index, mode) = if f.len() == 9 {
            let index = f[7]
                .parse::<i64>()
                .ok()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| err("index", &format!("{:?} is not a non-negative integer", f[7])))?;
            (index, f[8])
        } else {
            (0, "hami-core")
        };
        out.push(DeviceInfo {
            id: DeviceUuid::new(f[0]),
            index,
            count: nonneg_i32("count", f[1])?,
            devmem: MemMiB(nonneg_i32("devmem", f[2])?.into()),
            devcore: nonneg_i32("devcore", f[3])?,
            ty: Arc::from(f[4]),
            numa: f[5].parse::<i32>().map_err(|_| err("numa", &format!("{:?} is not an integer", f[5])))?,
            mode: Arc::from(mode),
            mig_profiles: Arc::from(Vec::new()),
            health: parse_go_bool(f[6]).map_err(|_| err("health", &format!("{:?} is not a Go boolean", f[6])))?,
            custom: None,
        });
    }
    // As in the JSON form, a list that names no device is "no devices", an error for every vendor.
    if out.is_empty() {
        return Err(Error::NoDevices);
    }
    Ok(out)
}

/// Encodes the 9-field colon form, each device followed by `:` (what HAMi writes).
pub fn encode_node_devices_colon(devs: &[DeviceInfo]) -> String {
    let mut s = String::new();
    for d in devs {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}:",
            d.id,
            d.count,
            d.devmem.get(),
            d.devcore,
            d.ty,
            d.numa,
            d.health,
            d.index,
            d.mode
        ));
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Pod device encoding

/// Strips a legacy MIG suffix `uuid[geometry-slot]` (pods placed by older HAMi) from a device id.
pub fn strip_legacy_mig_suffix(uuid: &str) -> &str {
    match uuid.find('[') {
        Some(i) => &uuid[..i],
        None => uuid,
    }
}

/// Decodes a `…-devices-allocated` / `…-to-allocate` value into one entry per container.
/// The empty piece after the final `;` is kept (a value with k containers decodes to k + 1
/// entries), as are empty pieces in between, so positions are preserved. `""` decodes to nothing.
pub fn decode_pod_devices(s: &str) -> Result<Vec<ContainerDevices>> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (container, piece) in s.split(';').enumerate() {
        let mut devs = ContainerDevices::new();
        for entry in piece.split(':').filter(|e| e.contains(',')) {
            let f: Vec<&str> = entry.split(',').collect();
            let err = |why: &str| Error::PodDevice { container, entry: entry.to_owned(), why: why.to_owned() };
            if f.len() < 4 {
                return Err(err("expected uuid,type,usedmem,usedcores"));
            }
            let mem = f[2]
                .parse::<i32>()
                .ok()
                .and_then(|v| u64::try_from(v).ok())
                .ok_or_else(|| err("usedmem is not a non-negative int32"))?;
            let cores = f[3]
                .parse::<i32>()
                .ok()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| err("usedcores is not a non-negative int32"))?;
            devs.push(ContainerDevice::new(strip_legacy_mig_suffix(f[0]), f[1], mem, cores));
        }
        out.push(devs);
    }
    Ok(out)
}

/// Encodes one entry per container, each ending in `;`, each device ending in `:`.
pub fn encode_pod_devices(containers: &[ContainerDevices]) -> String {
    let mut s = String::new();
    for c in containers {
        for d in c {
            use std::fmt::Write;
            let _ = write!(s, "{},{},{},{}:", d.uuid, d.ty, d.usedmem.get(), d.usedcores);
        }
        s.push(';');
    }
    s
}

/// Drops trailing empty container entries (each plugin rewrite appends one).
pub fn trim_trailing_empty(mut v: Vec<ContainerDevices>) -> Vec<ContainerDevices> {
    while v.last().is_some_and(|c| c.is_empty()) {
        v.pop();
    }
    v
}

// ---------------------------------------------------------------------------------------------
// MIG allocations

/// One entry of `hami.io/vgpu-mig-allocations`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigAllocation {
    pub container_index: u32,
    pub device_index: u32,
    #[serde(rename = "gpuUUID")]
    pub gpu_uuid: String,
    pub profile: String,
    pub placement: MigPlacement,
    #[serde(rename = "migUUID", default, skip_serializing_if = "Option::is_none")]
    pub mig_uuid: Option<String>,
    #[serde(rename = "gpuInstanceID", default, skip_serializing_if = "Option::is_none")]
    pub gpu_instance_id: Option<u32>,
    #[serde(rename = "computeInstanceID", default, skip_serializing_if = "Option::is_none")]
    pub compute_instance_id: Option<u32>,
}

/// Decodes and validates the MIG allocations annotation with the device plugin's rules.
pub fn decode_mig_allocations(s: &str) -> Result<Vec<MigAllocation>> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire {
        #[serde(default)]
        container_index: i64,
        #[serde(default)]
        device_index: i64,
        #[serde(default, rename = "gpuUUID")]
        gpu_uuid: String,
        #[serde(default)]
        profile: String,
        #[serde(default)]
        placement: Option<MigPlacement>,
        #[serde(default, rename = "migUUID")]
        mig_uuid: Option<String>,
        #[serde(default, rename = "gpuInstanceID")]
        gpu_instance_id: Option<u32>,
        #[serde(default, rename = "computeInstanceID")]
        compute_instance_id: Option<u32>,
    }
    let wire: Option<Vec<Wire>> = serde_json::from_str(s).map_err(|e| Error::Json(e.to_string()))?;
    let mut out: Vec<MigAllocation> = Vec::new();
    for (entry, w) in wire.unwrap_or_default().into_iter().enumerate() {
        let err = |why: &str| Error::MigAllocation { entry, why: why.to_owned() };
        let container_index = u32::try_from(w.container_index).map_err(|_| err("containerIndex must be >= 0"))?;
        let device_index = u32::try_from(w.device_index).map_err(|_| err("deviceIndex must be >= 0"))?;
        if w.gpu_uuid.is_empty() {
            return Err(err("gpuUUID is empty"));
        }
        if w.profile.is_empty() {
            return Err(err("profile is empty"));
        }
        let placement = w.placement.filter(|p| p.size > 0).ok_or_else(|| err("placement.size must be > 0"))?;
        let mig_uuid = w.mig_uuid.filter(|u| !u.is_empty());
        let runtime = [mig_uuid.is_some(), w.gpu_instance_id.is_some(), w.compute_instance_id.is_some()];
        if runtime.iter().any(|&b| b) && !runtime.iter().all(|&b| b) {
            return Err(err("migUUID, gpuInstanceID and computeInstanceID must be all present or all absent"));
        }
        if out.iter().any(|o| o.container_index == container_index && o.device_index == device_index) {
            return Err(err("duplicate (containerIndex, deviceIndex)"));
        }
        out.push(MigAllocation {
            container_index,
            device_index,
            gpu_uuid: w.gpu_uuid,
            profile: w.profile,
            placement,
            mig_uuid,
            gpu_instance_id: w.gpu_instance_id,
            compute_instance_id: w.compute_instance_id,
        });
    }
    Ok(out)
}

pub fn encode_mig_allocations(a: &[MigAllocation]) -> String {
    serde_json::to_string(a).unwrap_or_else(|_| "[]".to_owned())
}

// ---------------------------------------------------------------------------------------------
// Node lock

/// A parsed node lock value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLock {
    pub time: DateTime<FixedOffset>,
    /// `(namespace, name)` of the holder; `None` for the legacy comma-less form.
    pub owner: Option<(String, String)>,
}

impl NodeLock {
    pub fn is_held_by(&self, namespace: &str, name: &str) -> bool {
        self.owner.as_ref().is_some_and(|(ns, n)| ns == namespace && n == name)
    }
    /// Whether the lock is older than `timeout` at `now` (anyone may then break it).
    pub fn is_expired(&self, now: DateTime<Utc>, timeout: std::time::Duration) -> bool {
        let age = now.signed_duration_since(self.time.with_timezone(&Utc));
        age.to_std().is_ok_and(|a| a > timeout)
    }
}

pub fn decode_node_lock(s: &str) -> Result<NodeLock> {
    let err = |why: &str| Error::NodeLock { value: s.to_owned(), why: why.to_owned() };
    let parse_time = |t: &str| DateTime::parse_from_rfc3339(t).map_err(|e| err(&format!("time: {e}")));
    if !s.contains(',') {
        return Ok(NodeLock { time: parse_time(s)?, owner: None });
    }
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() != 3 {
        return Err(err("expected <time>,<namespace>,<name>"));
    }
    Ok(NodeLock { time: parse_time(parts[0])?, owner: Some((parts[1].to_owned(), parts[2].to_owned())) })
}

/// `<RFC3339 UTC time>,<namespace>,<name>`, e.g. `2026-08-21T06:20:39Z,default,train-0`.
pub fn encode_node_lock(now: DateTime<Utc>, namespace: &str, name: &str) -> String {
    format!("{},{namespace},{name}", encode_rfc3339(now))
}

/// RFC3339 with whole seconds and `Z`, as Go's `time.RFC3339` formats UTC.
pub fn encode_rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

// ---------------------------------------------------------------------------------------------
// Handshake values

const DATETIME: &str = "%Y-%m-%d %H:%M:%S";

/// What a handshake annotation says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// `Requesting_<DateTime>`; `None` when the time after `_` is missing or unparsable
    /// (HAMi then treats the vendor as healthy forever and writes nothing).
    Requesting(Option<NaiveDateTime>),
    /// Anything else: absent, `Reported …`, `Deleted_…`.
    Other,
}

pub fn decode_handshake(s: &str) -> Handshake {
    if !s.contains("Requesting") {
        return Handshake::Other;
    }
    let t = s.split_once('_').and_then(|(_, t)| NaiveDateTime::parse_from_str(t, DATETIME).ok());
    Handshake::Requesting(t)
}

/// `Requesting_2026-08-21 06:20:39` (the scheduler's local time; hami-rs writes UTC).
pub fn encode_handshake_requesting(now: NaiveDateTime) -> String {
    format!("Requesting_{}", now.format(DATETIME))
}

/// `Deleted_<DateTime>`, what old schedulers wrote when a vendor's devices were dropped.
pub fn encode_handshake_deleted(now: NaiveDateTime) -> String {
    format!("Deleted_{}", now.format(DATETIME))
}

// ---------------------------------------------------------------------------------------------
// Selection lists

/// Entries of a comma list, trimmed, empties skipped. An absent or blank value is no constraint.
pub fn parse_list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// A type use/no-use list: entries match when the upper-cased device type contains them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeList(Vec<String>);

impl TypeList {
    pub fn parse(value: Option<&str>) -> TypeList {
        TypeList(value.map(parse_list).unwrap_or_default().into_iter().map(|s| s.to_uppercase()).collect())
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn matches(&self, device_type: &str) -> bool {
        if self.0.is_empty() {
            return false;
        }
        // Device types are ASCII in practice: compare without allocating an upper-cased copy.
        if device_type.is_ascii() {
            return self.0.iter().any(|e| contains_ignore_ascii_case(device_type, e));
        }
        let t = device_type.to_uppercase();
        self.0.iter().any(|e| t.contains(e.as_str()))
    }
}

/// Whether `hay` contains `needle` ignoring ASCII case (`needle` is upper-cased already).
fn contains_ignore_ascii_case(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    if n.is_empty() {
        return true;
    }
    n.len() <= h.len() && h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// A UUID use/no-use list: entries match by exact equality after trimming.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UuidList(Vec<String>);

impl UuidList {
    pub fn parse(value: Option<&str>) -> UuidList {
        UuidList(value.map(parse_list).unwrap_or_default())
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn matches(&self, id: &str) -> bool {
        self.0.iter().any(|e| e == id)
    }
}

/// A use/no-use pair: `use` fails when no entry matches, `nouse` when any entry matches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection<L> {
    pub use_list: L,
    pub nouse_list: L,
}

impl Selection<TypeList> {
    pub fn types(use_v: Option<&str>, nouse_v: Option<&str>) -> Self {
        Selection { use_list: TypeList::parse(use_v), nouse_list: TypeList::parse(nouse_v) }
    }
    pub fn allows(&self, device_type: &str) -> bool {
        (self.use_list.is_empty() || self.use_list.matches(device_type)) && !self.nouse_list.matches(device_type)
    }
    /// No list given: every type passes, and a caller need not read the device's type.
    pub fn is_empty(&self) -> bool {
        self.use_list.is_empty() && self.nouse_list.is_empty()
    }
}

impl Selection<UuidList> {
    pub fn uuids(use_v: Option<&str>, nouse_v: Option<&str>) -> Self {
        Selection { use_list: UuidList::parse(use_v), nouse_list: UuidList::parse(nouse_v) }
    }
    pub fn allows(&self, id: &str) -> bool {
        (self.use_list.is_empty() || self.use_list.matches(id)) && !self.nouse_list.matches(id)
    }
    pub fn is_empty(&self) -> bool {
        self.use_list.is_empty() && self.nouse_list.is_empty()
    }
}

// ---------------------------------------------------------------------------------------------
// Scoring weights

/// Device score weights from `hami.io/device-scoring-weights`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weights {
    pub slot: f32,
    pub core: f32,
    pub memory: f32,
}

impl Default for Weights {
    fn default() -> Self {
        Weights { slot: 1.0, core: 1.0, memory: 1.0 }
    }
}

/// Exactly three `key=value` items, keys `slot`, `core`, `memory` once each, values non-negative
/// base-10 int64, not all zero; checked in HAMi's order with HAMi's texts (a duplicate before the
/// value, the value before the key's name).
pub fn parse_weights(value: &str) -> Result<Weights> {
    use super::numa_alignment::go_quote;
    let err = |why: String| Error::Weights { value: value.to_owned(), why };
    let items: Vec<&str> = value.split(',').collect();
    if items.len() != 3 {
        return Err(err("expected slot, core, and memory weights".into()));
    }
    let mut got: [Option<i64>; 3] = [None; 3];
    for item in items {
        let Some((k, v)) = item.trim().split_once('=') else {
            return Err(err("expected key=value entries".into()));
        };
        let k = k.trim();
        let slot = match k {
            "slot" => Some(0),
            "core" => Some(1),
            "memory" => Some(2),
            _ => None,
        };
        if slot.is_some_and(|i| got[i].is_some()) {
            return Err(err(format!("duplicate {} weight", go_quote(k))));
        }
        let n: i64 = v.trim().parse().map_err(|_| err(format!("{} weight must be an integer", go_quote(k))))?;
        if n < 0 {
            return Err(err(format!("{} weight must not be negative", go_quote(k))));
        }
        let Some(i) = slot else { return Err(err(format!("unknown weight {}", go_quote(k)))) };
        got[i] = Some(n);
    }
    let [s, c, m] = got.map(|g| g.unwrap_or(0));
    if s == 0 && c == 0 && m == 0 {
        return Err(err("at least one weight must be positive".into()));
    }
    Ok(Weights { slot: s as f32, core: c as f32, memory: m as f32 })
}

// ---------------------------------------------------------------------------------------------
// NVIDIA pair scores and cordon list

/// Link-quality scores between GPUs of one node, from `hami.io/node-nvidia-score`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PairScores(pub Vec<(String, Vec<(String, i64)>)>);

impl PairScores {
    /// Score of `a` towards `b`; missing entries count 0.
    pub fn score(&self, a: &str, b: &str) -> i64 {
        self.0.iter().find(|(u, _)| u == a).and_then(|(_, s)| s.iter().find(|(o, _)| o == b)).map_or(0, |(_, v)| *v)
    }
}

pub fn decode_pair_scores(s: &str) -> Result<PairScores> {
    #[derive(Deserialize)]
    struct Wire {
        #[serde(default)]
        uuid: String,
        #[serde(default)]
        score: Option<std::collections::BTreeMap<String, i64>>,
    }
    let w: Option<Vec<Wire>> = serde_json::from_str(s).map_err(|e| Error::PairScores(e.to_string()))?;
    Ok(PairScores(
        w.unwrap_or_default()
            .into_iter()
            .map(|e| (e.uuid, e.score.unwrap_or_default().into_iter().collect()))
            .collect(),
    ))
}

/// Encodes `[{"uuid":…,"score":{…}},…]`: `uuid` first as NVIDIA's plugin writes it, score keys
/// sorted.
pub fn encode_pair_scores(p: &PairScores) -> String {
    #[derive(Serialize)]
    struct Wire<'a> {
        uuid: &'a str,
        score: std::collections::BTreeMap<&'a str, i64>,
    }
    let v: Vec<Wire<'_>> =
        p.0.iter().map(|(u, s)| Wire { uuid: u, score: s.iter().map(|(o, v)| (o.as_str(), *v)).collect() }).collect();
    serde_json::to_string(&v).unwrap_or_else(|_| "[]".to_owned())
}

#[cfg(test)]
mod tests;
