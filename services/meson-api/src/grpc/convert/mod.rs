//! Between the REST API's wire types and `meson.v1` messages, both ways, a
//! file per resource.
//!
//! Answers are built from the REST wire types (`views` makes those from the
//! domain), so both transports show the same thing. Requests become the
//! REST request's JSON ([`json::Obj`]) and go through the same parser, so
//! both validate alike and name a bad field by the same JSON path; a zero
//! value stands for an absent field (the REST default applies).

mod action;
mod backup;
mod catalog;
mod cluster;
mod console;
pub(crate) mod json;
mod member;
pub(crate) mod meta;
mod organization;
mod pool;
mod quota;
#[cfg(test)]
pub(crate) mod shapes;
mod usage;
mod vm;
mod volume;

pub use action::action;
pub use backup::{
    backup, backup_create, backup_list_query, backup_policy, backup_policy_request, restore,
};
pub use catalog::{cluster_quotes, flavor, kubernetes_version, provider, vm_quotes};
pub use cluster::{cluster, cluster_create, cluster_update, cluster_upgrade, node, range};
pub use console::{console, console_filter};
pub use member::{
    invitation, invitation_accept, invitation_create, member, member_create, member_update,
    membership,
};
pub use meta::{list_query, name_labels, page_query, pagination, warnings};
pub use organization::{organization, organization_create, organization_update};
pub use pool::{pool, pool_create, pool_update};
pub use quota::{plan, plan_put, quota, quota_update};
pub use usage::{named_tenant, price_create, price_entry, statement, usage, usage_query};
pub use vm::{vm, vm_create, vm_migrate, vm_network, vm_rebuild, vm_resize};
pub use volume::{
    volume, volume_attach, volume_create, volume_list_query, volume_move, volume_resize,
};

/// The fields an `invalid_input` names, sorted (the conversions' tests).
#[cfg(test)]
pub(crate) fn rejected<T: std::fmt::Debug>(r: Result<T, meson_core::Error>) -> Vec<String> {
    match r {
        Err(meson_core::Error::InvalidInput { fields }) => {
            let mut names: Vec<String> = fields.into_iter().map(|f| f.name).collect();
            names.sort();
            names
        }
        other => panic!("expected invalid_input, got {other:?}"),
    }
}
