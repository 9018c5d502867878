//! Biren: JSON registration `hami.io/node-biren-register`, count-only requests and fit (health,
//! type, UUID, slots, mutex), the shared node lock and the `hami.io/node-handshake-biren`
//! handshake. All but the fit is shared with Vastai (`count_only.rs`).

use std::sync::Arc;

use crate::model::MemMiB;
use crate::model::annotations::biren as keys;
use crate::model::reason::Rejection;

use super::count_only::{self, CountOnly, CountOnlyConfig, Keys, Kind, Params};
use super::walk::{self, Rules};
use super::{FitCx, Pick};

// The tests read these through `use super::*`.
#[cfg(test)]
use {
    super::{Cleanup, Discovery, HealthRule, Vendor, WriteCx},
    crate::model::edit::{ContainerEdit, PodContext},
    crate::model::request::ContainerRequest,
    crate::model::{ContainerView, PodView, VendorId, codec},
};

pub const WORD: &str = "Biren";

/// The Helm chart's values for the device config's `biren` section.
pub fn chart() -> CountOnlyConfig {
    CountOnlyConfig { resource_count_name: "birentech.com/gpu".into() }
}

/// The Biren vendor.
pub type Biren = CountOnly<BirenKind>;

/// What is Biren's own: its word, its keys and its fit.
pub struct BirenKind;

impl Kind for BirenKind {
    const WORD: &'static str = WORD;
    const KEYS: Keys = count_only::keys_of!(keys);

    /// The generic walk with only health, type, UUID, slot and mutex checks, as in HAMi. HAMi's
    /// entries reserve no memory (and the request's cores, 0).
    fn fit(cx: &FitCx<'_>, word: &Arc<str>, out: &mut Vec<Pick>) -> Result<(), Rejection> {
        let p = cx.params_as::<Params>();
        let (type_ok, uuid_ok) = (Params::type_check(p), Params::uuid_check(p));
        let entry = |_: &_| Ok((MemMiB::ZERO, cx.req.cores));
        let rules = Rules { type_ok: &type_ok, uuid_ok: &uuid_ok, take: Some(&entry), ..Rules::basic(word) };
        walk::walk(cx, &rules, out).map_err(Rejection::Devices)
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
