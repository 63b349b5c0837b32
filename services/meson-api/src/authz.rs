//! Who may call what: one table for every operation of the API.
//!
//! Each row names an operation (the OpenAPI `operationId`, which the gRPC
//! methods map to as well), who may call it, which rate-limit budget it draws
//! on and whether it is audited. Transports look the operation up and call
//! [`authorize`] before anything else runs; nothing below them checks roles
//! again. An operation missing from the table is refused (and a test keeps
//! the table and the routes in step).
//!
//! Roles: viewers read, editors also create, change and delete, owners (a
//! tenant's own administrators) also read their tenant's audit log, admins
//! are Elemento's operators: they also manage every tenant's quotas, the
//! AtomOS targets and read every tenant's audit log. A token is always
//! scoped to its tenant's resources; only the admin operations reach across
//! tenants.

use crate::auth::{Principal, Role};
use meson_core::Error;

/// Who may call an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone (liveness, readiness).
    Public,
    /// A cluster node, with the per-node secret meson gave it (checked by
    /// the operation itself): no bearer token.
    NodeSecret,
    /// A console's one-time token in its URL (checked by the operation
    /// itself): a browser's WebSocket carries no bearer token.
    ConsoleToken,
    /// A bearer token with at least this role.
    Role(Role),
}

/// Which rate-limit budget an operation draws on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    /// Everything, by default.
    Api,
    /// Reading actions: clients poll them, so they get a larger budget of
    /// their own and polling never starves the calls that do work.
    Polling,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub operation: &'static str,
    pub access: Access,
    pub budget: Budget,
    /// Recorded in the audit log (changes, refused or not, and handing out
    /// credentials).
    pub audit: bool,
    /// From a browser, only meson's own pages and the allowed origins may
    /// call it: every change (the edge refuses other pages' before
    /// routing) and handing out a credential, even on a GET.
    pub first_party_only: bool,
    /// Its answer holds a credential (a token's secret, a console's
    /// password, a private key): never kept for an Idempotency-Key's
    /// replay, where it would lie in the database in the clear.
    pub credential: bool,
    /// What it does depends on the caller's whole rank in its
    /// organisation (it grants or takes away roles up to the caller's
    /// own): the gate reads the caller's membership even when the token's
    /// role alone would pass.
    pub ranked: bool,
    /// Safe to run again after the database went away under it, whatever
    /// it had done: a later attempt finds what an earlier one wrote under
    /// the same ids (`meson_core::id::attempt`) and answers with it, so
    /// REST holds it through a failover instead of answering `503`.
    pub replayable: bool,
}

pub(crate) const fn rule(operation: &'static str, role: Role, budget: Budget, audit: bool) -> Rule {
    Rule {
        operation,
        access: Access::Role(role),
        budget,
        audit,
        // What is audited changes something or hands out a credential.
        first_party_only: audit,
        credential: false,
        ranked: false,
        replayable: false,
    }
}

/// Hands out a credential to a caller of `role`: audited, first parties
/// only, its answer never kept.
pub(crate) const fn credential(operation: &'static str, role: Role) -> Rule {
    Rule {
        credential: true,
        ..rule(operation, role, Budget::Api, true)
    }
}

/// Reads a tenant's own resources.
pub(crate) const fn read(operation: &'static str) -> Rule {
    rule(operation, Role::Viewer, Budget::Api, false)
}

/// Creates, changes or deletes a tenant's own resources.
pub(crate) const fn write(operation: &'static str) -> Rule {
    rule(operation, Role::Editor, Budget::Api, true)
}

/// [`write`], safe to run again ([`Rule::replayable`]).
pub(crate) const fn replayable_write(operation: &'static str) -> Rule {
    Rule {
        replayable: true,
        ..write(operation)
    }
}

/// A change any caller of `role` may make of its own standing (audited).
pub(crate) const fn write_as(operation: &'static str, role: Role) -> Rule {
    rule(operation, role, Budget::Api, true)
}

/// Reads actions, from the polling budget.
pub(crate) const fn poll(operation: &'static str) -> Rule {
    rule(operation, Role::Viewer, Budget::Polling, false)
}

/// A tenant owner's read of its own tenant (an operator's of any).
pub(crate) const fn owner_read(operation: &'static str) -> Rule {
    rule(operation, Role::Owner, Budget::Api, false)
}

/// A tenant owner's change of its own tenant's (an operator's of any).
pub(crate) const fn owner_write(operation: &'static str) -> Rule {
    rule(operation, Role::Owner, Budget::Api, true)
}

/// An operator's read, across tenants.
pub(crate) const fn admin_read(operation: &'static str) -> Rule {
    rule(operation, Role::Admin, Budget::Api, false)
}

/// An operator's change, across tenants.
pub(crate) const fn admin_write(operation: &'static str) -> Rule {
    rule(operation, Role::Admin, Budget::Api, true)
}

/// Grants, changes or takes away a membership: a manager's at least,
/// never above the caller's own role.
pub(crate) const fn membership(operation: &'static str, role: Role, credential: bool) -> Rule {
    Rule {
        ranked: true,
        credential,
        ..rule(operation, role, Budget::Api, true)
    }
}

pub(crate) const fn public(operation: &'static str) -> Rule {
    Rule {
        operation,
        access: Access::Public,
        budget: Budget::Api,
        audit: false,
        first_party_only: false,
        credential: false,
        ranked: false,
        replayable: false,
    }
}

/// The operations of the API but those of `crate::resources` (which keep
/// theirs): read through [`rules`] and [`rule_of`], which see both.
const RULES: &[Rule] = &[
    // Names and paths only.
    public("index"),
    public("healthz"),
    public("readyz"),
    // Counts only: nothing of any tenant's.
    public("metrics"),
    // VMs
    read("vm_list"),
    read("vm_get"),
    read("vm_action_list"),
    replayable_write("vm_create"),
    write("vm_update"),
    replayable_write("vm_delete"),
    write("vm_power"),
    // Actions
    poll("action_list"),
    poll("action_get"),
    poll("action_stream"),
    // Volumes
    read("volume_list"),
    read("volume_get"),
    write("volume_create"),
    write("volume_update"),
    write("volume_delete"),
    write("vm_resize"),
    write("vm_rebuild"),
    write("vm_migrate"),
    write("vm_attach_network"),
    write("vm_detach_network"),
    write("volume_attach"),
    write("volume_detach"),
    write("volume_resize"),
    write("volume_move"),
    read("volume_action_list"),
    // Images
    // Networks
    read("network_action_list"),
    // Backups
    read("backup_list"),
    read("backup_get"),
    write("backup_update"),
    write("backup_delete"),
    write("vm_backup"),
    write("vm_restore"),
    write("vm_enable_backups"),
    write("vm_disable_backups"),
    read("backup_action_list"),
    // Consoles: requesting one hands out a credential (an editor's, audited).
    credential("vm_request_console", Role::Editor),
    read("console_list"),
    read("console_get"),
    write("console_delete"),
    Rule {
        operation: "console_connect",
        access: Access::ConsoleToken,
        budget: Budget::Api,
        // The relay records each session (begun or refused, and ended).
        audit: false,
        // Checked by the operation: pages of other origins are refused.
        first_party_only: true,
        credential: false,
        ranked: false,
        replayable: false,
    },
    // Clusters, pools, nodes
    read("cluster_list"),
    read("cluster_get"),
    read("cluster_action_list"),
    read("cluster_nodes"),
    read("cluster_pool_list"),
    read("cluster_pool_get"),
    write("cluster_create"),
    write("kaas_create"),
    write("cluster_update"),
    write("cluster_delete"),
    write("cluster_upgrade"),
    write("cluster_rotate_credentials"),
    // An admin credential of the cluster: editors only, and audited.
    credential("cluster_kubeconfig", Role::Editor),
    write("cluster_pool_create"),
    write("cluster_pool_update"),
    write("cluster_pool_delete"),
    write("cluster_pool_delete_nodes"),
    credential("cluster_autoscaler_credentials", Role::Editor),
    write("cluster_node_reboot"),
    write("cluster_node_replace"),
    Rule {
        operation: "node_phone_home",
        access: Access::NodeSecret,
        budget: Budget::Api,
        audit: false,
        // Called by the guests, never by a browser: any change from a
        // page is refused at the edge all the same.
        first_party_only: false,
        credential: false,
        ranked: false,
        replayable: false,
    },
    // Catalogue and prices
    read("flavor_list"),
    read("provider_list"),
    read("kubernetes_version_list"),
    read("quote_create"),
    // Quotas: a tenant reads its own; operators set anyone's.
    read("quota_get"),
    admin_read("tenant_quota_get"),
    admin_write("tenant_quota_update"),
    // Plans: anyone reads them; operators make them.
    read("plan_list"),
    read("plan_get"),
    admin_write("plan_put"),
    admin_write("plan_delete"),
    // AtomOS targets: operators only.
    admin_read("target_list"),
    admin_read("target_get"),
    admin_write("target_create"),
    admin_write("target_update"),
    admin_write("target_drain"),
    admin_write("target_undrain"),
    admin_read("orphan_list"),
    admin_read("orphan_get"),
    admin_write("orphan_adopt"),
    admin_write("orphan_delete"),
    // Metering: a tenant reads its own usage, statements and the prices;
    // operators read any tenant's and set prices.
    read("usage_get"),
    read("statement_list"),
    read("statement_get"),
    read("price_list"),
    admin_write("price_create"),
    // Organisations: every member sees who else is one; managers add,
    // change and remove members and invitations up to their own role;
    // anyone signed in accepts an invitation to their verified email and
    // leaves an organisation.
    read("member_list"),
    read("member_get"),
    membership("member_create", Role::Manager, false),
    membership("member_update", Role::Manager, false),
    membership("member_delete", Role::Manager, false),
    Rule {
        ranked: true,
        ..read("membership_list")
    },
    write_as("membership_leave", Role::Viewer),
    rule("invitation_list", Role::Manager, Budget::Api, false),
    rule("invitation_get", Role::Manager, Budget::Api, false),
    membership("invitation_create", Role::Manager, true),
    rule("invitation_delete", Role::Manager, Budget::Api, true),
    write_as("invitation_accept", Role::Viewer),
    // Sub-organisations: every member sees the tree below its
    // organisation; owners carve, change and end them.
    read("organization_list"),
    read("organization_get"),
    owner_write("organization_create"),
    owner_write("organization_update"),
    owner_write("organization_delete"),
    // The audit log: an owner reads its tenant's, an operator anyone's.
    owner_read("audit_list"),
];

/// Every operation's rule: [`RULES`], and those of the resources written
/// as one module each (`crate::resources`), which keep theirs.
pub fn rules() -> impl Iterator<Item = &'static Rule> {
    RULES
        .iter()
        .chain(crate::resources::RULES.iter().copied().flatten())
}

/// The rule of an operation.
pub fn rule_of(operation: &str) -> Option<&'static Rule> {
    rules().find(|r| r.operation == operation)
}

/// Fails with `forbidden` unless `p` may call the operation of `rule`.
pub fn authorize(p: &Principal, rule: &Rule) -> Result<(), Error> {
    match rule.access {
        Access::Role(role) => p.require(role),
        // Not reached with a principal: these take no bearer token.
        Access::Public | Access::NodeSecret | Access::ConsoleToken => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_appears_once() {
        let mut seen = std::collections::BTreeSet::new();
        for r in rules() {
            assert!(seen.insert(r.operation), "{} twice", r.operation);
        }
    }

    #[test]
    fn roles_nest() {
        let p = |role| Principal {
            tenant: meson_core::TenantId("t".into()),
            subject: "s".into(),
            role,
            email: None,
        };
        for (op, viewer, editor, owner, admin) in [
            ("vm_get", true, true, true, true),
            ("vm_create", false, true, true, true),
            ("cluster_kubeconfig", false, true, true, true),
            ("quota_get", true, true, true, true),
            ("audit_list", false, false, true, true),
            ("tenant_quota_get", false, false, false, true),
            ("tenant_quota_update", false, false, false, true),
            ("target_list", false, false, false, true),
            ("target_update", false, false, false, true),
        ] {
            let r = rule_of(op).unwrap();
            assert_eq!(authorize(&p(Role::Viewer), r).is_ok(), viewer, "{op}");
            assert_eq!(authorize(&p(Role::Editor), r).is_ok(), editor, "{op}");
            assert_eq!(authorize(&p(Role::Owner), r).is_ok(), owner, "{op}");
            assert_eq!(authorize(&p(Role::Admin), r).is_ok(), admin, "{op}");
        }
        // Everything an editor may do, an owner may.
        for r in rules() {
            if authorize(&p(Role::Editor), r).is_ok() {
                assert!(authorize(&p(Role::Owner), r).is_ok(), "{}", r.operation);
            }
        }
    }
}
