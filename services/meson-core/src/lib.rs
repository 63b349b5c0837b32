//! meson's domain: typed ids, validated specs, the error enum, flavours and naming.
//!
//! Nothing here knows about HTTP, SQL or AtomOS's wire format: the API, the
//! database layer and the driver convert to and from these types at their edges.

pub mod action;
pub mod audit;
pub mod backup;
pub mod cloudinit;
pub mod cluster;
pub mod console;
pub mod error;
pub mod flavor;
pub mod id;
pub mod image;
pub mod kaas;
pub mod kubernetes;
pub mod labels;
pub mod member;
pub mod naming;
pub mod network;
pub mod organization;
pub mod orphan;
pub mod os;
pub mod parse;
pub mod patch;
pub mod port_forward;
pub mod price;
pub mod quota;
pub mod selector;
pub mod ssh;
pub mod target;
pub mod token;
pub mod vm;
pub mod volume;

pub use error::{Code, Error, FieldError, Result};
pub use id::{
    ActionId, BackupId, ClusterId, ConsoleId, ImageId, InvitationId, JobId, NetworkId, NodeId,
    OrphanId, PoolId, PortForwardId, TargetId, TenantId, TokenId, VmId, VolumeId,
};
