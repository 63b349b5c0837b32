//! One newtype per kind of id, so a `VmId` can never be passed where an `ActionId` goes.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// The ids one request makes, kept across its attempts: a request run
/// again (the database went away under it) makes the same ids in the same
/// order, so that what its first attempt may have written is found under
/// them ([`replaying`]) instead of being made a second time.
#[derive(Clone, Debug, Default)]
pub struct IdLog(Arc<Mutex<Vec<Uuid>>>);

struct Attempt {
    log: IdLog,
    next: AtomicUsize,
    replay: bool,
}

tokio::task_local! {
    static ATTEMPT: Attempt;
}

/// Runs `f` as attempt `number` (from 0) of the request whose ids `log`
/// keeps: the ids it makes are, in order, those the earlier attempts made,
/// then new ones, logged.
pub async fn attempt<F: std::future::Future>(log: &IdLog, number: u32, f: F) -> F::Output {
    let attempt = Attempt {
        log: log.clone(),
        next: AtomicUsize::new(0),
        replay: number > 0,
    };
    ATTEMPT.scope(attempt, f).await
}

/// True in a request's later attempt ([`attempt`]): the ids it makes may
/// name what an earlier attempt wrote.
pub fn replaying() -> bool {
    ATTEMPT.try_with(|a| a.replay).unwrap_or(false)
}

pub(crate) fn fresh() -> Uuid {
    ATTEMPT
        .try_with(|a| {
            let i = a.next.fetch_add(1, Ordering::Relaxed);
            let mut ids = a.log.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(id) = ids.get(i) {
                return *id;
            }
            let id = Uuid::now_v7();
            ids.push(id);
            id
        })
        .unwrap_or_else(|_| Uuid::now_v7())
}

/// Declares a resource's id: a UUID, time-ordered when new. A resource
/// declares its own beside its domain type (`ssh::SshKeyId`).
macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            ::serde::Serialize, ::serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub ::uuid::Uuid);

        impl $name {
            /// A new, time-ordered id (UUIDv7), so ids sort by creation;
            /// on a request's later attempt, the one its first attempt
            /// made at this point ([`attempt`]).
            pub fn new() -> Self {
                Self($crate::id::fresh())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = ::uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                ::uuid::Uuid::parse_str(s).map(Self)
            }
        }

        impl From<::uuid::Uuid> for $name {
            fn from(u: ::uuid::Uuid) -> Self {
                Self(u)
            }
        }
    };
}
pub(crate) use uuid_id;

uuid_id!(
    /// A virtual machine.
    VmId
);
uuid_id!(
    /// A volume (boot disk, cloud-init ISO or data disk).
    VolumeId
);
uuid_id!(
    /// A tenant's image: a boot disk to create VMs from.
    ImageId
);
uuid_id!(
    /// A port forward: a public port of a network's host relayed to a VM.
    PortForwardId
);
uuid_id!(
    /// A backup: copies of a VM's volumes on its host.
    BackupId
);
uuid_id!(
    /// A console: a one-time VNC session on a VM's screen, relayed by meson.
    ConsoleId
);
uuid_id!(
    /// An API token issued by meson.
    TokenId
);
uuid_id!(
    /// An invitation to join an organisation.
    InvitationId
);
uuid_id!(
    /// An action: the user's view of a workflow.
    ActionId
);
uuid_id!(
    /// An AtomOS target: one endpoint set of daemons.
    TargetId
);
uuid_id!(
    /// A VM a host holds that meson has no record of.
    OrphanId
);

/// A job of the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The tenant owning a resource, as named by the identity provider's token.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TenantId(pub String);

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl TenantId {
    /// The longest tenant id.
    pub const MAX_LEN: usize = 128;

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// 1 to [`Self::MAX_LEN`] characters from `[A-Za-z0-9._:@-]`: the
    /// tenant id ends up in a PostgreSQL setting, and `*` must never be a
    /// tenant.
    pub fn valid(t: &str) -> bool {
        !t.is_empty()
            && t.len() <= Self::MAX_LEN
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'@' | b'-'))
    }
}
uuid_id!(
    /// A private network.
    NetworkId
);
uuid_id!(
    /// A Kubernetes cluster.
    ClusterId
);
uuid_id!(
    /// A node pool of a cluster.
    PoolId
);
uuid_id!(
    /// A node (one VM) of a cluster.
    NodeId
);

/// How an id may be written where one is taken: whole, or abbreviated to at
/// least [`IdRef::MIN_DIGITS`] of its hex digits from its start or its end.
///
/// meson's ids are UUIDv7s: their first 12 hex digits are a millisecond
/// clock, so things made in the same minute share a prefix, and tables
/// print the last 8 digits (the random part). Both ends are accepted, as
/// git accepts a commit's prefix; an abbreviation that matches more than one
/// id is ambiguous and names none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdRef {
    Full(Uuid),
    /// Lowercase hex digits, hyphens dropped.
    Abbrev(String),
}

impl IdRef {
    /// The fewest hex digits an abbreviation may have.
    pub const MIN_DIGITS: usize = 8;

    /// Reads an id or an abbreviation; `None` for anything else (a name,
    /// too few digits, a non-hex character).
    pub fn parse(s: &str) -> Option<IdRef> {
        if let Ok(id) = Uuid::parse_str(s) {
            return Some(IdRef::Full(id));
        }
        let hex: String = s.chars().filter(|c| *c != '-').collect();
        let ok = (Self::MIN_DIGITS..=32).contains(&hex.len())
            && hex.chars().all(|c| c.is_ascii_hexdigit())
            && !s.starts_with('-')
            && !s.ends_with('-');
        ok.then(|| IdRef::Abbrev(hex.to_ascii_lowercase()))
    }

    /// Whether `s` looks like an attempt at an abbreviated id that is too
    /// short: hex digits only, fewer than [`IdRef::MIN_DIGITS`].
    pub fn too_short(s: &str) -> bool {
        !s.is_empty() && s.len() < Self::MIN_DIGITS && s.chars().all(|c| c.is_ascii_hexdigit())
    }

    pub fn matches(&self, id: &Uuid) -> bool {
        match self {
            IdRef::Full(full) => full == id,
            IdRef::Abbrev(hex) => {
                let simple = id.simple().to_string();
                simple.starts_with(hex.as_str()) || simple.ends_with(hex.as_str())
            }
        }
    }

    /// The smallest and largest ids an abbreviation's digits could start
    /// (uuids compare bytewise, so this is an index range).
    pub fn prefix_range(hex: &str) -> (Uuid, Uuid) {
        let pad = |c: char| {
            let mut s = hex.to_string();
            while s.len() < 32 {
                s.push(c);
            }
            Uuid::parse_str(&s).unwrap_or_default()
        };
        (pad('0'), pad('f'))
    }
}

impl fmt::Display for IdRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdRef::Full(id) => id.fmt(f),
            IdRef::Abbrev(hex) => f.write_str(hex),
        }
    }
}

#[cfg(test)]
mod id_ref_tests {
    use super::*;

    const ID: &str = "019ad0c2-7b1e-7c3a-9f00-12cf197d66ab";

    #[test]
    fn an_id_is_whole_or_eight_digits_from_either_end() {
        let id = Uuid::parse_str(ID).unwrap();
        assert_eq!(IdRef::parse(ID), Some(IdRef::Full(id)));
        for ok in [
            "019ad0c2",
            "019AD0C2-7b1e",
            "cf197d66ab",
            "12cf197d66ab",
            "197d66ab",
        ] {
            let r = IdRef::parse(ok).unwrap_or_else(|| panic!("{ok} is an abbreviation"));
            assert!(r.matches(&id), "{ok} abbreviates {ID}");
        }
        for not_it in ["019ad0c3", "7b1e7c3a"] {
            assert!(!IdRef::parse(not_it).unwrap().matches(&id), "{not_it}");
        }
        for bad in ["019ad0c", "web-1", "019ad0c2x", "-019ad0c2", ""] {
            assert_eq!(IdRef::parse(bad), None, "{bad}");
        }
        assert!(IdRef::too_short("cf19"));
        assert!(!IdRef::too_short("web"));
        assert!(!IdRef::too_short("019ad0c2"));
    }

    #[test]
    fn a_prefix_range_holds_exactly_the_ids_it_starts() {
        let (lo, hi) = IdRef::prefix_range("019ad0c2");
        let id = Uuid::parse_str(ID).unwrap();
        assert!(lo <= id && id <= hi);
        assert_eq!(lo.to_string(), "019ad0c2-0000-0000-0000-000000000000");
        assert_eq!(hi.to_string(), "019ad0c2-ffff-ffff-ffff-ffffffffffff");
    }
}

#[cfg(test)]
mod attempt_tests {
    use super::*;

    #[tokio::test]
    async fn a_later_attempt_makes_the_first_attempts_ids_then_new_ones() {
        let log = IdLog::default();
        let first = attempt(&log, 0, async {
            assert!(!replaying());
            (VmId::new(), ActionId::new())
        })
        .await;
        let second = attempt(&log, 1, async {
            assert!(replaying());
            (VmId::new(), ActionId::new(), VolumeId::new())
        })
        .await;
        assert_eq!((first.0, first.1), (second.0, second.1));
        assert_ne!(second.2.0, first.0.0);
        assert_ne!(second.2.0, first.1.0);
        // Outside any attempt, and in another request's, ids are new.
        assert_ne!(VmId::new(), first.0);
        let other = attempt(&IdLog::default(), 0, async { VmId::new() }).await;
        assert_ne!(other, first.0);
        assert!(!replaying());
    }
}
