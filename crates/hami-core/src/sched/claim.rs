//! What a claim is kept for. A claim is capacity a node keeps for a pod that is not placed yet:
//! the devices a preemption's victims free for it, a pod group's member, or the pod a
//! controller makes next in place of one moved away. Each is keyed by what will use it, so the
//! pod that comes is recognised although it may not exist yet (a controller's next pod has a
//! UID nobody knows).

use std::fmt;
use std::sync::Arc;

use crate::model::PodUid;
use crate::model::request::FitKey;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClaimKey {
    /// One pod, by its UID.
    Pod(PodUid),
    /// A member of a pod group, by the group (`namespace/name`) and the member's name.
    Member { group: Arc<str>, member: Arc<str> },
    /// The next pod a controller makes of one shape: its owner's UID and the pod's fit key.
    Next { owner: Arc<str>, shape: FitKey },
}

impl ClaimKey {
    /// The pod's UID when the claim is for one known pod.
    pub fn pod(&self) -> Option<&PodUid> {
        match self {
            ClaimKey::Pod(uid) => Some(uid),
            _ => None,
        }
    }
}

impl fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimKey::Pod(uid) => write!(f, "pod {uid}"),
            ClaimKey::Member { group, member } => write!(f, "group {group} member {member}"),
            ClaimKey::Next { owner, shape } => write!(f, "next pod of {owner} ({shape:?})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_key_says_whom_it_is_for() {
        let pod = ClaimKey::Pod(PodUid::new("u1"));
        assert_eq!(pod.pod().map(PodUid::as_str), Some("u1"));
        assert_eq!(pod.to_string(), "pod u1");
        let member = ClaimKey::Member { group: Arc::from("ml/train-a"), member: Arc::from("a-0") };
        assert_eq!(member.pod(), None);
        assert_eq!(member.to_string(), "group ml/train-a member a-0");
        assert_ne!(pod, member);
    }
}
