//! What the count-only vendors (Biren, Vastai) share, which in HAMi is the same code for both:
//! requests by device count alone, type and UUID selection, the JSON (or colon) registration
//! with `devcore` forced to 100, the handshake and its clean-up, the shared node lock and the
//! to-allocate/allocated pair. Each vendor brings its word, its keys, its fit and its node score.

use crate::model::request::Unusable;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Deserialize;

use crate::model::pod::NodeView;
use crate::model::reason::Rejection;
use crate::model::request::{ContainerRequest, VendorParams};
use crate::model::{ContainerView, DeviceInfo, PodView, VendorId};

use super::common::{self, Selections};
use super::{Cleanup, DeviceKeys, Discovery, FitCx, HealthRule, Names, Pick, ScoreCx, Vendor, quantities};

/// The annotation keys of one count-only vendor.
pub struct Keys {
    pub register: &'static str,
    pub handshake: &'static str,
    pub to_allocate: &'static str,
    pub allocated: &'static str,
    pub use_type: &'static str,
    pub nouse_type: &'static str,
    pub use_uuid: &'static str,
    pub nouse_uuid: &'static str,
}

/// The [`Keys`] of the annotation module `$m` (`model::annotations::biren`, …), which names them
/// alike for every count-only vendor.
macro_rules! keys_of {
    ($m:ident) => {
        $crate::devices::count_only::Keys {
            register: $m::REGISTER,
            handshake: $m::HANDSHAKE,
            to_allocate: $m::TO_ALLOCATE,
            allocated: $m::ALLOCATED,
            use_type: $m::USE_TYPE,
            nouse_type: $m::NOUSE_TYPE,
            use_uuid: $m::USE_UUID,
            nouse_uuid: $m::NOUSE_UUID,
        }
    };
}
pub(crate) use keys_of;

/// What differs between the count-only vendors.
pub trait Kind: Send + Sync + 'static {
    /// The word written in annotations.
    const WORD: &'static str;
    const KEYS: Keys;

    /// Chooses devices for one container's request; `word` is [`Self::WORD`], shared.
    fn fit(cx: &FitCx<'_>, word: &Arc<str>, out: &mut Vec<Pick>) -> Result<(), Rejection>;

    fn node_score(_cx: &ScoreCx<'_>) -> f32 {
        0.0
    }
}

/// The type and UUID selections of the pod, parsed once per pod. HAMi declares each count-only
/// vendor's use/no-use type keys but never reads them; hami-rs enforces them with the rule every
/// other vendor's type keys follow: a pod that names them means to restrict its devices, and a
/// blank or absent value changes nothing.
pub type Params = Selections;

/// The device config's `vastai` or `biren` section.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct CountOnlyConfig {
    pub resource_count_name: String,
}

/// One count-only vendor.
pub struct CountOnly<K> {
    count_name: String,
    word: Arc<str>,
    kind: PhantomData<K>,
}

impl<K: Kind> CountOnly<K> {
    pub fn new(cfg: &CountOnlyConfig) -> Self {
        CountOnly { count_name: cfg.resource_count_name.clone(), word: Arc::from(K::WORD), kind: PhantomData }
    }
}

/// HAMi's count-only devices have `devcore` forced to 100, whatever the plugin registered.
fn with_devcore_100(devices: Vec<DeviceInfo>) -> Discovery {
    Discovery::devices(devices.into_iter().map(|d| DeviceInfo { devcore: 100, ..d }).collect())
}

impl<K: Kind> Vendor for CountOnly<K> {
    fn names(&self) -> Names<'_> {
        Names::count_only(K::WORD, &self.count_name)
    }

    /// As HAMi derives it: the count (limits, else requests); percentage 100, no cores.
    fn request(&self, id: VendorId, c: &ContainerView, _pod: &PodView) -> Result<Option<ContainerRequest>, Unusable> {
        let Some(nums) = quantities::count(c, &self.count_name)? else { return Ok(None) };
        Ok(Some(ContainerRequest::new(id, nums, 0, 100, 0)))
    }

    fn pod_params(&self, pod: &PodView) -> Option<VendorParams> {
        let k = &K::KEYS;
        Some(Arc::new(Params::from_pod(pod, [k.use_type, k.nouse_type], [k.use_uuid, k.nouse_uuid])))
    }

    /// The JSON list (the colon form is accepted too); `devcore` is forced to 100, as HAMi does.
    fn discover(&self, node: &NodeView) -> Discovery {
        common::registered(node, K::KEYS.register, with_devcore_100)
    }

    fn health_rule(&self) -> HealthRule {
        HealthRule::Handshake { key: K::KEYS.handshake.into(), count_resource: self.count_name.clone() }
    }

    fn cleanup(&self) -> Cleanup {
        Cleanup::RemoveAnnotation(K::KEYS.handshake.into())
    }

    fn fit(&self, cx: &FitCx<'_>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        K::fit(cx, &self.word, out)
    }

    fn node_score(&self, cx: &ScoreCx<'_>) -> f32 {
        K::node_score(cx)
    }

    /// To-allocate and allocated (the word capitalised, as the device plugin reads them),
    /// identical.
    fn device_keys(&self) -> Option<DeviceKeys<'_>> {
        Some(DeviceKeys { to_allocate: K::KEYS.to_allocate, allocated: K::KEYS.allocated })
    }
}
