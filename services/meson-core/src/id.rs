//! One newtype per kind of id, so a `VmId` can never be passed where an `ActionId` goes.

use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new, time-ordered id (UUIDv7), so ids sort by creation.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(u: Uuid) -> Self {
                Self(u)
            }
        }
    };
}

uuid_id!(
    /// A virtual machine.
    VmId
);
uuid_id!(
    /// A volume (boot disk, cloud-init ISO or data disk).
    VolumeId
);
uuid_id!(
    /// An action: the user's view of a workflow.
    ActionId
);
uuid_id!(
    /// An AtomOS target: one endpoint set of daemons.
    TargetId
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
    pub fn as_str(&self) -> &str {
        &self.0
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
