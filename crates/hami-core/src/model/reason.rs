//! Why a node cannot take a pod. "Does not fit" is a value: `Rejection` is `Copy` and allocates
//! nothing; text is built only when it is rendered into `FailedNodes` or an Event.

use std::fmt::Write;

use crate::model::DeviceUsage;

/// HAMi's device-fit reason words, the `<Reason>` in HAMi's `<n>/<m> <Reason>` items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    CardNotHealth,
    CardCordoned,
    CardTypeMismatch,
    CardUuidMismatch,
    NumaNotFit,
    CardTimeSlicingExhausted,
    ExclusiveDeviceAllocateConflict,
    ResourceQuotaNotFit,
    CardInsufficientMemory,
    CardInsufficientCore,
    CardComputeUnitsExhausted,
    CardMigTopologyInfeasible,
    CardNotFoundCustomFilterRule,
    AllocatedCardsInsufficientRequest,
    ModeNotFit,
    CardUnhealthy,
    CardQosPolicyMismatch,
    CardAppClassMismatch,
}

pub const REASONS: usize = 18;

impl Reason {
    pub const ALL: [Reason; REASONS] = [
        Reason::CardNotHealth,
        Reason::CardCordoned,
        Reason::CardTypeMismatch,
        Reason::CardUuidMismatch,
        Reason::NumaNotFit,
        Reason::CardTimeSlicingExhausted,
        Reason::ExclusiveDeviceAllocateConflict,
        Reason::ResourceQuotaNotFit,
        Reason::CardInsufficientMemory,
        Reason::CardInsufficientCore,
        Reason::CardComputeUnitsExhausted,
        Reason::CardMigTopologyInfeasible,
        Reason::CardNotFoundCustomFilterRule,
        Reason::AllocatedCardsInsufficientRequest,
        Reason::ModeNotFit,
        Reason::CardUnhealthy,
        Reason::CardQosPolicyMismatch,
        Reason::CardAppClassMismatch,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::CardNotHealth => "CardNotHealth",
            Reason::CardCordoned => "CardCordoned",
            Reason::CardTypeMismatch => "CardTypeMismatch",
            Reason::CardUuidMismatch => "CardUuidMismatch",
            Reason::NumaNotFit => "NumaNotFit",
            Reason::CardTimeSlicingExhausted => "CardTimeSlicingExhausted",
            Reason::ExclusiveDeviceAllocateConflict => "ExclusiveDeviceAllocateConflict",
            Reason::ResourceQuotaNotFit => "ResourceQuotaNotFit",
            Reason::CardInsufficientMemory => "CardInsufficientMemory",
            Reason::CardInsufficientCore => "CardInsufficientCore",
            Reason::CardComputeUnitsExhausted => "CardComputeUnitsExhausted",
            Reason::CardMigTopologyInfeasible => "CardMigTopologyInfeasible",
            Reason::CardNotFoundCustomFilterRule => "CardNotFoundCustomFilterRule",
            Reason::AllocatedCardsInsufficientRequest => "AllocatedCardsInsufficientRequest",
            Reason::ModeNotFit => "ModeNotFit",
            Reason::CardUnhealthy => "CardUnhealthy",
            Reason::CardQosPolicyMismatch => "CardQosPolicyMismatch",
            Reason::CardAppClassMismatch => "CardAppClassMismatch",
        }
    }
}

/// The numbers behind a human-readable detail, e.g. `requested 8000 MiB, free 4096 MiB`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Memory { requested: u64, free: u64 },
    Cores { requested: u32, free: u32 },
    Slots { used: u32, count: u32 },
    Busy { used: u32 },
    None,
}

/// One device's rejection kept for the person reading `FailedNodes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detail {
    pub reason: Reason,
    /// Position of the device in the node's device list.
    pub pos: u16,
    pub need: Need,
}

/// Per-reason device counts of one failed vendor fit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    counts: [u16; REASONS],
    /// Number of candidate devices of the requested vendor (the `m` of `n/m`).
    pub total: u16,
    pub detail: Option<Detail>,
    /// Reasons listed even at a zero count (bit per `Reason`), set through [`Tally::set`].
    listed: u32,
}

impl Tally {
    pub fn new(total: usize) -> Tally {
        Tally { counts: [0; REASONS], total: total.min(u16::MAX as usize) as u16, detail: None, listed: 0 }
    }
    /// Counts one device rejected for `reason`, keeping the detail of the device that got
    /// furthest through the checks (the most useful one to show).
    pub fn reject(&mut self, reason: Reason, pos: usize, need: Need) {
        self.add(reason, 1);
        let d = Detail { reason, pos: pos.min(u16::MAX as usize) as u16, need };
        match self.detail {
            Some(old) if old.reason >= reason => {}
            _ => self.detail = Some(d),
        }
    }
    pub fn add(&mut self, reason: Reason, n: usize) {
        let c = &mut self.counts[reason as usize];
        *c = c.saturating_add(n.min(u16::MAX as usize) as u16);
    }
    /// Sets `reason`'s count outright and lists it even when `n` is 0: HAMi assigns some counts
    /// (`reason[AllocatedCardsInsufficientRequest] = n`), so `0/m …` items can appear.
    pub fn set(&mut self, reason: Reason, n: usize) {
        self.counts[reason as usize] = n.min(u16::MAX as usize) as u16;
        self.listed |= 1 << reason as u32;
    }
    pub fn count(&self, reason: Reason) -> u16 {
        self.counts[reason as usize]
    }
    pub fn is_empty(&self) -> bool {
        self.listed == 0 && self.counts.iter().all(|&c| c == 0)
    }
    /// `(reason, count)` for every non-zero reason, and for reasons [`Tally::set`] listed at zero.
    pub fn items(&self) -> impl Iterator<Item = (Reason, u16)> + '_ {
        Reason::ALL
            .iter()
            .copied()
            .zip(self.counts.iter().copied())
            .filter(|(r, c)| *c > 0 || self.listed & (1 << *r as u32) != 0)
    }
    /// HAMi's reason list: `<n>/<m> <Reason>` items sorted as text, joined with `, `.
    pub fn hami_text(&self) -> String {
        // Items written end to end into one buffer and sorted as spans of it: a no-fit answer
        // writes one text per candidate node, thousands of them.
        let mut buf = String::with_capacity(48);
        let mut spans = [(0usize, 0usize); REASONS];
        let mut n = 0;
        for (r, c) in self.items() {
            let start = buf.len();
            let _ = write!(buf, "{c}/{} {}", self.total, r.as_str());
            spans[n] = (start, buf.len());
            n += 1;
        }
        if n <= 1 {
            return buf;
        }
        let spans = &mut spans[..n];
        spans.sort_unstable_by(|a, b| buf[a.0..a.1].cmp(&buf[b.0..b.1]));
        let mut out = String::with_capacity(buf.len() + 2 * n);
        for (k, (start, end)) in spans.iter().enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            out.push_str(&buf[*start..*end]);
        }
        out
    }

    /// Whether two tallies read the same in HAMi's text (the detail aside).
    fn same_text(&self, other: &Tally) -> bool {
        self.counts == other.counts && self.total == other.total && self.listed == other.listed
    }
}

/// Why one node cannot take the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// A vendor's device walk failed: HAMi's `n/m Reason` list.
    Devices(Tally),
    /// Fewer devices of the vendor than requested (bare word in HAMi).
    NodeInsufficientDevice { requested: u32, available: u16 },
    /// The node is unknown to the registry.
    NodeUnregistered,
    /// The node's registration is malformed; the snapshot holds the reason text.
    NodeUnusable,
    /// The node missed the fan-out deadline.
    Timeout,
    /// The node is locked by another pod's bind.
    NodeLocked,
}

impl Rejection {
    /// HAMi's reason string for a node that did not fit, unchanged, for tools that match on it.
    pub fn hami_text(&self) -> String {
        match self {
            Rejection::Devices(t) => t.hami_text(),
            Rejection::NodeInsufficientDevice { .. } => "NodeInsufficientDevice".into(),
            Rejection::NodeUnregistered | Rejection::NodeUnusable => "node unregistered".into(),
            Rejection::Timeout => "node usage unavailable".into(),
            Rejection::NodeLocked => "node lock contention".into(),
        }
    }

    /// Whether two rejections give the same `FailedNodes` text whatever the node (a node whose
    /// registration is unusable says why, so its text is its own).
    pub fn same_answer(&self, other: &Rejection) -> bool {
        match (self, other) {
            (Rejection::Devices(a), Rejection::Devices(b)) => a.same_text(b),
            (Rejection::NodeUnusable, _) | (_, Rejection::NodeUnusable) => false,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }

    /// What `FailedNodes` carries: HAMi's text, unchanged. A node whose registration hami-rs
    /// refuses as malformed (HAMi keeps using its old devices, so it has no text for this) also
    /// says why, since nothing else on the pod's side would.
    pub fn answer(&self, unusable: Option<&str>) -> String {
        match self {
            Rejection::NodeUnusable => self.render(&[], unusable),
            _ => self.hami_text(),
        }
    }

    /// HAMi's text followed by the detail a person needs, e.g.
    /// `1/2 CardInsufficientMemory (GPU-…2222: requested 8000 MiB, free 4096 MiB)`.
    pub fn render(&self, devices: &[DeviceUsage], unusable: Option<&str>) -> String {
        let mut s = self.hami_text();
        match self {
            Rejection::Devices(t) => {
                if let Some(d) = t.detail.filter(|d| d.need != Need::None) {
                    let id = devices.get(usize::from(d.pos)).map_or("?", |u| u.info.id.as_str());
                    let _ = write!(s, " ({id}: ");
                    match d.need {
                        Need::Memory { requested, free } => {
                            let _ = write!(s, "requested {requested} MiB, free {free} MiB");
                        }
                        Need::Cores { requested, free } => {
                            let _ = write!(s, "requested {requested} cores, free {free}");
                        }
                        Need::Slots { used, count } => {
                            let _ = write!(s, "{used} of {count} slots in use");
                        }
                        Need::Busy { used } => {
                            let _ = write!(s, "{} with {used} tasks", d.reason.as_str());
                        }
                        Need::None => {}
                    }
                    s.push(')');
                }
            }
            Rejection::NodeInsufficientDevice { requested, available } => {
                let _ = write!(s, " (requested {requested} devices, node has {available})");
            }
            Rejection::NodeUnregistered => s.push_str(" (no devices registered)"),
            Rejection::NodeUnusable => {
                let _ = write!(s, " ({})", unusable.unwrap_or("registration is malformed"));
            }
            Rejection::Timeout => s.push_str(" (node did not answer within the filter deadline)"),
            Rejection::NodeLocked => s.push_str(" (another pod's bind holds the node lock)"),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_list_is_sorted_as_text_like_hami() {
        // HAMi sorts the "<n>/<m> <Reason>" items as strings: "10/10 …" sorts before "2/10 …".
        let mut t = Tally::new(10);
        t.add(Reason::CardUuidMismatch, 2);
        t.add(Reason::CardInsufficientMemory, 10);
        t.add(Reason::CardNotHealth, 2);
        assert_eq!(t.hami_text(), "10/10 CardInsufficientMemory, 2/10 CardNotHealth, 2/10 CardUuidMismatch");
    }

    proptest::proptest! {
        /// The text is every listed item as `<n>/<m> <Reason>`, sorted as strings, joined with
        /// `, `; two tallies said to answer alike have equal texts.
        #[test]
        fn the_text_is_the_items_sorted_as_strings(
            total in 1usize..40,
            counts in proptest::collection::vec((0usize..REASONS, 0usize..40, proptest::bool::ANY), 0..8),
            other in proptest::collection::vec((0usize..REASONS, 0usize..40, proptest::bool::ANY), 0..8),
        ) {
            let tally = |items: &[(usize, usize, bool)]| {
                let mut t = Tally::new(total);
                for (r, n, set) in items {
                    if *set { t.set(Reason::ALL[*r], *n) } else { t.add(Reason::ALL[*r], *n) }
                }
                t
            };
            let (a, b) = (tally(&counts), tally(&other));
            let mut want: Vec<String> = a.items().map(|(r, c)| format!("{c}/{total} {}", r.as_str())).collect();
            want.sort();
            proptest::prop_assert_eq!(a.hami_text(), want.join(", "));
            let same = Rejection::Devices(a).same_answer(&Rejection::Devices(b));
            proptest::prop_assert!(!same || a.hami_text() == b.hami_text());
            proptest::prop_assert!(Rejection::Devices(a).same_answer(&Rejection::Devices(a)));
        }
    }

    #[test]
    fn a_set_count_is_listed_even_at_zero() {
        // HAMi's Ascend 910C fit assigns `AllocatedCardsInsufficientRequest = len(pairs)`, which
        // GenReason prints even when it is 0.
        let mut t = Tally::new(4);
        t.set(Reason::AllocatedCardsInsufficientRequest, 0);
        assert!(!t.is_empty());
        assert_eq!(t.hami_text(), "0/4 AllocatedCardsInsufficientRequest");
        t.set(Reason::AllocatedCardsInsufficientRequest, 2);
        assert_eq!(t.hami_text(), "2/4 AllocatedCardsInsufficientRequest");
    }

    #[test]
    fn render_appends_the_detail_of_the_device_closest_to_fitting() {
        let dev = crate::model::DeviceUsage::idle(
            std::sync::Arc::new(crate::model::DeviceInfo::new("GPU-2222", 1, 10, 4096, 100, "NVIDIA-T4")),
            crate::model::VendorId(0),
        );
        let mut t = Tally::new(2);
        t.reject(Reason::CardUuidMismatch, 0, Need::None);
        t.reject(Reason::CardInsufficientMemory, 0, Need::Memory { requested: 8000, free: 4096 });
        let r = Rejection::Devices(t);
        assert_eq!(
            r.render(&[dev], None),
            "1/2 CardInsufficientMemory, 1/2 CardUuidMismatch (GPU-2222: requested 8000 MiB, free 4096 MiB)"
        );
    }
}
