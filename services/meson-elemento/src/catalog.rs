//! Every route of the Elemento client daemons meson stands in for (the
//! MCP daemon aside), as production mounts them: method and path. The
//! gateway mounts each one: it serves it, or answers `501 {"detail": "not
//! supported by meson"}`, never an unmounted 404.
//!
//! One deviation: the service daemon's `GET /experimental` sits at the
//! daemon's root in production; it is listed under the service base, and
//! mounted both there (so that Electros' web prefix reaches it on the
//! single-origin listener) and at the root.

/// One of the daemons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Daemon {
    Auth,
    Compute,
    Storage,
    Network,
    Target,
    Service,
}

impl Daemon {
    pub const ALL: [Daemon; 6] = [
        Daemon::Auth,
        Daemon::Compute,
        Daemon::Storage,
        Daemon::Network,
        Daemon::Target,
        Daemon::Service,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Daemon::Auth => "auth",
            Daemon::Compute => "compute",
            Daemon::Storage => "storage",
            Daemon::Network => "network",
            Daemon::Target => "target",
            Daemon::Service => "service",
        }
    }

    /// Its usual port on the user's machine.
    pub fn default_port(self) -> u16 {
        match self {
            Daemon::Auth => 47777,
            Daemon::Compute => 17777,
            Daemon::Storage => 27777,
            Daemon::Network => 37777,
            Daemon::Target => 57777,
            Daemon::Service => 6777,
        }
    }

    /// Its base path.
    pub fn base(self) -> &'static str {
        match self {
            Daemon::Auth => "/api/v1/authenticate",
            Daemon::Compute => "/api/v1.0/client/vm",
            Daemon::Storage => "/api/v1.0/client/volume",
            Daemon::Network => "/api/v1.0/client/network",
            Daemon::Target => "/api/v1.0/client/target",
            Daemon::Service => "/api/v1.0/client/service",
        }
    }
}

/// `(daemon, method, path)`.
pub const ROUTES: &[(Daemon, &str, &str)] = &[
    (Daemon::Auth, "GET", "/"),
    (Daemon::Auth, "GET", "/version"),
    (Daemon::Auth, "GET", "/api/v1.0/account/managedmembers"),
    (Daemon::Auth, "GET", "/api/v1.0/invite/accept/{token}"),
    (
        Daemon::Auth,
        "POST",
        "/api/v1.0/invite/accept/{token}/register",
    ),
    (Daemon::Auth, "GET", "/api/v1.0/min-ver/clients"),
    (Daemon::Auth, "GET", "/api/v1.0/min-ver/electros"),
    (Daemon::Auth, "POST", "/api/v1.0/org"),
    (Daemon::Auth, "POST", "/api/v1.0/orgs/{org_id}/admin"),
    (Daemon::Auth, "GET", "/api/v1.0/orgs/{org_id}/admins"),
    (
        Daemon::Auth,
        "DELETE",
        "/api/v1.0/orgs/{org_id}/admins/{admin}",
    ),
    (Daemon::Auth, "GET", "/api/v1.0/orgs/{org_id}/invite"),
    (Daemon::Auth, "POST", "/api/v1.0/orgs/{org_id}/invite"),
    (Daemon::Auth, "GET", "/api/v1.0/orgs/{org_id}/limits"),
    (Daemon::Auth, "PUT", "/api/v1.0/orgs/{org_id}/limits"),
    (Daemon::Auth, "GET", "/api/v1.0/orgs/{org_id}/members"),
    (
        Daemon::Auth,
        "DELETE",
        "/api/v1.0/orgs/{org_id}/members/{user}",
    ),
    (
        Daemon::Auth,
        "GET",
        "/api/v1.0/orgs/{org_id}/members/{user}/limits",
    ),
    (
        Daemon::Auth,
        "PUT",
        "/api/v1.0/orgs/{org_id}/members/{user}/limits",
    ),
    (Daemon::Auth, "POST", "/api/v1.0/orgs/{org_id}/membership"),
    (
        Daemon::Auth,
        "GET",
        "/api/v1.0/orgs/{org_id}/membership/tree",
    ),
    (Daemon::Auth, "GET", "/api/v1.0/orgs/{org_id}/owner"),
    (Daemon::Auth, "GET", "/api/v1.0/orgs/{org_id}/suborgs"),
    (Daemon::Auth, "POST", "/api/v1.0/orgs/{org_id}/suborgs"),
    (
        Daemon::Auth,
        "DELETE",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}",
    ),
    (
        Daemon::Auth,
        "POST",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/admin",
    ),
    (
        Daemon::Auth,
        "GET",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/admins",
    ),
    (
        Daemon::Auth,
        "DELETE",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/admins/{user}",
    ),
    (
        Daemon::Auth,
        "GET",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/children",
    ),
    (
        Daemon::Auth,
        "GET",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/limits",
    ),
    (
        Daemon::Auth,
        "PUT",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/limits",
    ),
    (
        Daemon::Auth,
        "GET",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/members",
    ),
    (
        Daemon::Auth,
        "DELETE",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/members/{user}",
    ),
    (
        Daemon::Auth,
        "GET",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/members/{user}/limits",
    ),
    (
        Daemon::Auth,
        "PUT",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/members/{user}/limits",
    ),
    (
        Daemon::Auth,
        "POST",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/membership",
    ),
    (
        Daemon::Auth,
        "GET",
        "/api/v1.0/orgs/{org_id}/suborgs/{suborg}/membership/tree",
    ),
    (Daemon::Auth, "GET", "/api/v1.0/subscription"),
    (Daemon::Auth, "DELETE", "/api/v1.0/subscription/cancel"),
    (Daemon::Auth, "POST", "/api/v1.0/subscription/change-tier"),
    (Daemon::Auth, "GET", "/api/v1.0/subscription/history"),
    (Daemon::Auth, "GET", "/api/v1.0/subscription/org"),
    (Daemon::Auth, "POST", "/api/v1.0/subscription/payment-links"),
    (
        Daemon::Auth,
        "POST",
        "/api/v1.0/subscription/payment-links/owner",
    ),
    (Daemon::Auth, "POST", "/api/v1.0/subscription/subscribe"),
    (
        Daemon::Auth,
        "POST",
        "/api/v1.0/subscription/subscribe/bulk",
    ),
    (Daemon::Auth, "GET", "/api/v1.0/subscription/tiers"),
    (Daemon::Auth, "GET", "/api/v1/authenticate/account/details"),
    (
        Daemon::Auth,
        "PATCH",
        "/api/v1/authenticate/account/details",
    ),
    (Daemon::Auth, "POST", "/api/v1/authenticate/account/details"),
    (
        Daemon::Auth,
        "PATCH",
        "/api/v1/authenticate/account/preferred-org",
    ),
    (
        Daemon::Auth,
        "POST",
        "/api/v1/authenticate/account/register",
    ),
    (
        Daemon::Auth,
        "POST",
        "/api/v1/authenticate/account/register/login",
    ),
    (
        Daemon::Auth,
        "POST",
        "/api/v1/authenticate/account/register/org",
    ),
    (
        Daemon::Auth,
        "POST",
        "/api/v1/authenticate/account/register/org/login",
    ),
    (
        Daemon::Auth,
        "POST",
        "/api/v1/authenticate/account/verify-email/confirm",
    ),
    (
        Daemon::Auth,
        "POST",
        "/api/v1/authenticate/account/verify-email/request",
    ),
    (
        Daemon::Auth,
        "POST",
        "/api/v1/authenticate/billing/{billing_uuid}/refresh-link",
    ),
    (
        Daemon::Auth,
        "GET",
        "/api/v1/authenticate/billing/my/transactions",
    ),
    (Daemon::Auth, "GET", "/api/v1/authenticate/cert"),
    (Daemon::Auth, "POST", "/api/v1/authenticate/cert/trust"),
    (Daemon::Auth, "POST", "/api/v1/authenticate/license/arm"),
    (
        Daemon::Auth,
        "DELETE",
        "/api/v1/authenticate/license/delete",
    ),
    (Daemon::Auth, "GET", "/api/v1/authenticate/license/list"),
    (Daemon::Auth, "GET", "/api/v1/authenticate/login"),
    (Daemon::Auth, "POST", "/api/v1/authenticate/login"),
    (Daemon::Auth, "POST", "/api/v1/authenticate/logout"),
    (Daemon::Auth, "GET", "/api/v1/authenticate/oauth/callback"),
    (Daemon::Auth, "POST", "/api/v1/authenticate/oauth/login"),
    (Daemon::Auth, "GET", "/api/v1/authenticate/oauth/providers"),
    (Daemon::Auth, "GET", "/api/v1/authenticate/refresh"),
    (Daemon::Auth, "POST", "/api/v1/authenticate/relogin"),
    (Daemon::Auth, "GET", "/api/v1/authenticate/scopes"),
    (Daemon::Auth, "GET", "/api/v1/authenticate/status"),
    (
        Daemon::Auth,
        "GET",
        "/api/v1/authenticate/status/authenticated",
    ),
    (
        Daemon::Auth,
        "GET",
        "/api/v1/authenticate/status/authenticated/me",
    ),
    (Daemon::Compute, "GET", "/"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/agent/attach"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/agent/run"),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/agent/run/{command}",
    ),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/backup"),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/backup/restore",
    ),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/backup/schedule",
    ),
    (Daemon::Compute, "DELETE", "/api/v1.0/client/vm/backups"),
    (Daemon::Compute, "GET", "/api/v1.0/client/vm/backups"),
    (Daemon::Compute, "GET", "/api/v1.0/client/vm/backups/search"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/canallocate"),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/canallocate/multiple",
    ),
    (Daemon::Compute, "GET", "/api/v1.0/client/vm/host/status"),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/last/{volume_uid}",
    ),
    (Daemon::Compute, "GET", "/api/v1.0/client/vm/marketprices"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/marketprices"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/migrate"),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/network/attach",
    ),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/network/detach",
    ),
    (
        Daemon::Compute,
        "DELETE",
        "/api/v1.0/client/vm/porttunnel/services",
    ),
    (
        Daemon::Compute,
        "GET",
        "/api/v1.0/client/vm/porttunnel/services",
    ),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/porttunnel/services",
    ),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/porttunnel/start",
    ),
    (
        Daemon::Compute,
        "GET",
        "/api/v1.0/client/vm/porttunnel/status",
    ),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/porttunnel/stop",
    ),
    (
        Daemon::Compute,
        "GET",
        "/api/v1.0/client/vm/porttunnel/vncWebSocket",
    ),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/porttunnel/vncWebSocket",
    ),
    (
        Daemon::Compute,
        "GET",
        "/api/v1.0/client/vm/porttunnel/vncWebSocket/{instance_id}",
    ),
    (
        Daemon::Compute,
        "DELETE",
        "/api/v1.0/client/vm/porttunnel/vncWebSocket/stop",
    ),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/process_playbook/file",
    ),
    (
        Daemon::Compute,
        "GET",
        "/api/v1.0/client/vm/process_playbook/path",
    ),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/reboot"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/register"),
    (
        Daemon::Compute,
        "POST",
        "/api/v1.0/client/vm/register/multiple",
    ),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/start"),
    (Daemon::Compute, "GET", "/api/v1.0/client/vm/status"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/stop"),
    (Daemon::Compute, "GET", "/api/v1.0/client/vm/templates"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/unregister"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/update"),
    (Daemon::Compute, "GET", "/api/v1.0/client/vm/usage"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/volume/attach"),
    (Daemon::Compute, "POST", "/api/v1.0/client/vm/volume/detach"),
    (Daemon::Network, "GET", "/"),
    (Daemon::Network, "POST", "/api/v1.0/client/network/create"),
    (Daemon::Network, "DELETE", "/api/v1.0/client/network/delete"),
    (Daemon::Network, "POST", "/api/v1.0/client/network/info"),
    (Daemon::Network, "GET", "/api/v1.0/client/network/list"),
    (
        Daemon::Network,
        "DELETE",
        "/api/v1.0/client/network/portforward",
    ),
    (
        Daemon::Network,
        "POST",
        "/api/v1.0/client/network/portforward",
    ),
    (
        Daemon::Network,
        "GET",
        "/api/v1.0/client/network/portforwards",
    ),
    (Daemon::Network, "POST", "/api/v1.0/client/network/refresh"),
    (Daemon::Service, "GET", "/"),
    (
        Daemon::Service,
        "POST",
        "/api/v1.0/client/service/{service}/cancreate",
    ),
    (
        Daemon::Service,
        "POST",
        "/api/v1.0/client/service/{service}/create",
    ),
    (
        Daemon::Service,
        "GET",
        "/api/v1.0/client/service/{service}/credentials/{service_uuid}",
    ),
    (
        Daemon::Service,
        "DELETE",
        "/api/v1.0/client/service/{service}/delete",
    ),
    (
        Daemon::Service,
        "GET",
        "/api/v1.0/client/service/{service}/running",
    ),
    (
        Daemon::Service,
        "GET",
        "/api/v1.0/client/service/{service}/running/{service_uuid}",
    ),
    (
        Daemon::Service,
        "GET",
        "/api/v1.0/client/service/experimental",
    ),
    (Daemon::Storage, "GET", "/"),
    (Daemon::Storage, "GET", "/api/v1.0/client/volume/accessible"),
    (Daemon::Storage, "POST", "/api/v1.0/client/volume/cancreate"),
    (
        Daemon::Storage,
        "POST",
        "/api/v1.0/client/volume/cancreate/multiple",
    ),
    (
        Daemon::Storage,
        "POST",
        "/api/v1.0/client/volume/ceph/create",
    ),
    (
        Daemon::Storage,
        "POST",
        "/api/v1.0/client/volume/cloudinit/create",
    ),
    (
        Daemon::Storage,
        "POST",
        "/api/v1.0/client/volume/cloudinit/metadata/{data}",
    ),
    (Daemon::Storage, "POST", "/api/v1.0/client/volume/create"),
    (
        Daemon::Storage,
        "POST",
        "/api/v1.0/client/volume/create/multiple",
    ),
    (Daemon::Storage, "POST", "/api/v1.0/client/volume/destroy"),
    (Daemon::Storage, "POST", "/api/v1.0/client/volume/import"),
    (Daemon::Storage, "POST", "/api/v1.0/client/volume/info"),
    (
        Daemon::Storage,
        "POST",
        "/api/v1.0/client/volume/iso/create/",
    ),
    (
        Daemon::Storage,
        "GET",
        "/api/v1.0/client/volume/last/{volume_uuid}",
    ),
    (
        Daemon::Storage,
        "POST",
        "/api/v1.0/client/volume/overlay/compact",
    ),
    (Daemon::Storage, "POST", "/api/v1.0/client/volume/reset"),
    (Daemon::Storage, "POST", "/api/v1.0/client/volume/update"),
    (
        Daemon::Storage,
        "POST",
        "/api/v1.0/client/volume/update/convert",
    ),
    (
        Daemon::Storage,
        "POST",
        "/api/v1.0/client/volume/update/resize",
    ),
    (Daemon::Target, "GET", "/"),
    (Daemon::Target, "GET", "/version"),
    (Daemon::Target, "GET", "/api/v1.0/client/target/cert"),
    (Daemon::Target, "POST", "/api/v1.0/client/target/cert/trust"),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/configs/{file}",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/connections/me",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/connections/me/connections-status",
    ),
    (
        Daemon::Target,
        "PUT",
        "/api/v1.0/client/target/connections/me/scenario",
    ),
    (
        Daemon::Target,
        "POST",
        "/api/v1.0/client/target/connections/me/target-grants",
    ),
    (
        Daemon::Target,
        "DELETE",
        "/api/v1.0/client/target/connections/me/target-grants/{target_id}",
    ),
    (Daemon::Target, "GET", "/api/v1.0/client/target/grants/me"),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/grants/me/scenario/{scenario_id}",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/grants/me/target-grants/{target_id}",
    ),
    (
        Daemon::Target,
        "POST",
        "/api/v1.0/client/target/grants/me/target-grants/{target_id}/credentials/hypervisor",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/grants/me/target-grants/{target_id}/reachable",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/grants/me/target-grants/{target_id}/status",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/grants/me/target-grants/{target_id}/version",
    ),
    (Daemon::Target, "POST", "/api/v1.0/client/target/org-target"),
    (
        Daemon::Target,
        "POST",
        "/api/v1.0/client/target/org-target/hypervisor",
    ),
    (
        Daemon::Target,
        "POST",
        "/api/v1.0/client/target/org-target/meson-private",
    ),
    (Daemon::Target, "GET", "/api/v1.0/client/target/org-targets"),
    (
        Daemon::Target,
        "POST",
        "/api/v1.0/client/target/org-targets",
    ),
    (
        Daemon::Target,
        "DELETE",
        "/api/v1.0/client/target/org-targets/{target_id}",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/org-targets/{target_id}",
    ),
    (
        Daemon::Target,
        "PATCH",
        "/api/v1.0/client/target/org-targets/{target_id}",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/org-targets/{target_id}/usage",
    ),
    (Daemon::Target, "GET", "/api/v1.0/client/target/refresh"),
    (Daemon::Target, "POST", "/api/v1.0/client/target/scenario"),
    (
        Daemon::Target,
        "DELETE",
        "/api/v1.0/client/target/scenarios",
    ),
    (Daemon::Target, "GET", "/api/v1.0/client/target/scenarios"),
    (Daemon::Target, "POST", "/api/v1.0/client/target/scenarios"),
    (
        Daemon::Target,
        "DELETE",
        "/api/v1.0/client/target/scenarios/{scenario_id}",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/scenarios/{scenario_id}",
    ),
    (
        Daemon::Target,
        "PATCH",
        "/api/v1.0/client/target/scenarios/{scenario_id}",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/scenarios/{scenario_id}/grants",
    ),
    (
        Daemon::Target,
        "POST",
        "/api/v1.0/client/target/scenarios/{scenario_id}/grants",
    ),
    (
        Daemon::Target,
        "DELETE",
        "/api/v1.0/client/target/scenarios/{scenario_id}/grants/{member}",
    ),
    (Daemon::Target, "GET", "/api/v1.0/client/target/settings"),
    (Daemon::Target, "PUT", "/api/v1.0/client/target/settings"),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/target-grants",
    ),
    (
        Daemon::Target,
        "DELETE",
        "/api/v1.0/client/target/target-grants/{target_id}/members/{member}",
    ),
    (
        Daemon::Target,
        "DELETE",
        "/api/v1.0/client/target/target-grants/members/{member}",
    ),
    (
        Daemon::Target,
        "GET",
        "/api/v1.0/client/target/target-grants/members/{member}",
    ),
    (
        Daemon::Target,
        "POST",
        "/api/v1.0/client/target/target-grants/members/{member}",
    ),
];
