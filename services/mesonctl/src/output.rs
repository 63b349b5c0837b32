//! `-o table|wide|json|yaml`: lists as tables with aligned columns, single
//! objects as a key/value view, JSON pretty-printed, YAML.
//!
//! Tables show short ids (`table`) or full ones (`wide`). meson's ids are
//! UUIDv7: their first digits are a timestamp, the same for everything made
//! in the same minute, so a short id is the last 8 hex digits, from the
//! random part (`0192f5c4-…-8f3a01c2b7d4` shows as `01c2b7d4`). Single
//! objects, JSON and YAML always carry full ids.

use chrono::{DateTime, SecondsFormat, Utc};
use meson_types::action::Action;
use meson_types::admin::{AuditEntry, Orphan, Plan, Quota, Target};
use meson_types::backup::{Backup, BackupCreateResponse, BackupPolicy, RestoreResponse};
use meson_types::catalog::{Flavor, KubernetesVersion, Provider};
use meson_types::cluster::{AutoscalerCredentials, Cluster, ClusterCreateResponse, Node, Pool};
use meson_types::console::{Console, ConsoleRequestResponse};
use meson_types::image::{Image, ImageCreateResponse};
use meson_types::member::{
    Invitation, InvitationAcceptResponse, InvitationCreateResponse, Member, MembershipList,
};
use meson_types::network::Network;
use meson_types::organization::Organization;
use meson_types::pool::PoolUpdateResponse;
use meson_types::port_forward::{PortForward, PortForwardCreateResponse};
use meson_types::quote::QuoteAnswer;
use meson_types::ssh_key::SshKey;
use meson_types::token::{ApiToken, TokenCreateResponse};
use meson_types::usage::{Money, PriceEntry, Statement, StatementStatus, Usage};
use meson_types::vm::{Price, Vm, VmCreateResponse};
use meson_types::volume::{Volume, VolumeCreateResponse};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for lists (short ids, long errors cut), `key: value`
    /// lines for one object.
    #[default]
    Table,
    /// As `table`, with full ids and whole error messages.
    Wide,
    Json,
    Yaml,
}

/// How much of a table's cells to show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// Short ids, long messages cut: fits a terminal.
    Short,
    /// Everything whole.
    Wide,
}

/// A short id: the last 8 hex digits (the random part of a UUIDv7).
pub fn short_id(id: &uuid::Uuid) -> String {
    let hex = id.simple().to_string();
    hex[hex.len() - 8..].to_owned()
}

/// The longest message a short table shows before cutting it.
const MESSAGE_CELL: usize = 60;

impl Width {
    fn id(self, id: &uuid::Uuid) -> String {
        match self {
            Width::Short => short_id(id),
            Width::Wide => id.to_string(),
        }
    }

    /// A free-text cell: whole when wide, else cut at [`MESSAGE_CELL`]
    /// characters with an ellipsis.
    fn message(self, s: String) -> String {
        if self == Width::Wide || s.chars().count() <= MESSAGE_CELL {
            return s;
        }
        let cut: String = s.chars().take(MESSAGE_CELL - 1).collect();
        format!("{}…", cut.trim_end())
    }
}

/// How a value looks as text.
pub enum View {
    /// Rows under headers.
    Table {
        headers: Vec<&'static str>,
        rows: Vec<Vec<String>>,
    },
    /// One object: `Key: value` lines.
    Fields(Vec<(&'static str, String)>),
    /// Several views, each under a title.
    Sections(Vec<(&'static str, View)>),
    /// Several views one after the other, a blank line between them.
    Stack(Vec<View>),
}

/// A value that has a table view (and, being `Serialize`, JSON and YAML).
pub trait Show: Serialize {
    fn view(&self, width: Width) -> View;
}

/// `value` as `format` says, ending with a newline.
pub fn render<T: Show + ?Sized>(format: Format, value: &T) -> Result<String, String> {
    match format {
        Format::Table => Ok(text(&value.view(Width::Short))),
        Format::Wide => Ok(text(&value.view(Width::Wide))),
        Format::Json => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        Format::Yaml => serde_yaml_ng::to_string(value).map_err(|e| e.to_string()),
    }
}

/// A view as text.
pub fn text(view: &View) -> String {
    match view {
        View::Table { headers, rows } => table(headers, rows),
        View::Fields(fields) => {
            let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            let mut out = String::new();
            for (k, v) in fields {
                let key = format!("{k}:");
                let value = if v.is_empty() { "-" } else { v.as_str() };
                out.push_str(format!("{key:<w$}  {value}", w = width + 1).trim_end());
                out.push('\n');
            }
            out
        }
        View::Sections(sections) => sections
            .iter()
            .map(|(title, v)| format!("{title}\n{}", indent(&text(v))))
            .collect::<Vec<_>>()
            .join("\n"),
        View::Stack(views) => views.iter().map(text).collect::<Vec<_>>().join("\n"),
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect::<String>()
}

/// Columns left-aligned, two spaces apart; an empty cell shows `-`.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let cell = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            let w = cell(c).chars().count();
            match widths.get_mut(i) {
                Some(x) => *x = (*x).max(w),
                None => widths.push(w),
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            out.push_str(c);
            let pad = widths[i].saturating_sub(c.chars().count());
            out.extend(std::iter::repeat_n(' ', pad));
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        out.push_str(&line(row.iter().map(|c| cell(c)).collect()));
    }
    out
}

fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_default()
}

/// A price as tables show it; a host that charges nothing (the tenant's
/// own, on-premises hardware) says "free" rather than 0.0000/h.
fn price(p: &Option<Price>) -> String {
    p.as_ref().map_or(String::new(), |p| {
        if p.hourly == 0.0 && p.monthly == 0.0 {
            "free (no hourly price on this host)".to_owned()
        } else {
            format!("{:.4}/h, {:.2}/month {}", p.hourly, p.monthly, p.currency)
        }
    })
}

fn labels(l: &BTreeMap<String, String>) -> String {
    l.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Show for Vm {
    fn view(&self, _: Width) -> View {
        let s = &self.specs;
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            ("Status", self.status.clone()),
            ("Provider", opt(&self.provider)),
            ("Region", opt(&self.region)),
            ("Host", opt(&self.host)),
            ("IPv4", opt(&self.ipv4)),
            ("vCPUs", s.vcpus.to_string()),
            ("Memory", format!("{} MiB", s.memory_mib)),
            (
                "OS",
                format!("{} {}", s.os_distribution, s.os_version)
                    .trim()
                    .to_owned(),
            ),
            (
                "Volumes",
                self.volumes
                    .iter()
                    .map(|v| format!("{} {} GB ({})", v.name, v.size, v.kind))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            (
                "Private networks",
                self.private_net
                    .iter()
                    .map(|n| serde_json::to_value(n).map_or(String::new(), |v| compact(&v)))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ("Backups", backup_policy(self.backups.as_ref())),
            ("Price", price(&self.price)),
            ("Labels", labels(&self.labels)),
            ("Created", time(&self.created)),
        ])
    }
}

/// A VM's backup policy as one line.
fn backup_policy(p: Option<&BackupPolicy>) -> String {
    p.map_or("off".to_owned(), |p| {
        format!("daily, window {} UTC, newest {} kept", p.window, p.keep)
    })
}

/// A small JSON object as `k=v k=v`.
fn compact(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}

impl Show for Vec<Vm> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec![
                "ID", "NAME", "STATUS", "PROVIDER", "REGION", "IPV4", "VCPUS", "MEMORY", "CREATED",
            ],
            rows: self
                .iter()
                .map(|v| {
                    vec![
                        width.id(&v.id),
                        v.name.clone(),
                        v.status.clone(),
                        opt(&v.provider),
                        opt(&v.region),
                        opt(&v.ipv4),
                        v.specs.vcpus.to_string(),
                        format!("{} MiB", v.specs.memory_mib),
                        time(&v.created),
                    ]
                })
                .collect(),
        }
    }
}

fn node_specs(s: &meson_types::cluster::NodeSpecs) -> String {
    let mut out = format!("{} vCPUs, {} MiB, {} GB", s.cpu, s.ram, s.storage);
    if s.gpu > 0 {
        out.push_str(&format!(", {} GPU", s.gpu));
    }
    out
}

impl Show for Cluster {
    fn view(&self, _: Width) -> View {
        let cp = &self.control_plane;
        let mut fields = vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            ("Status", self.status.clone()),
        ];
        if let Some(e) = &self.error_message {
            fields.push(("Error", e.clone()));
        }
        fields.extend([
            ("Kubernetes", self.kubernetes_version.clone()),
            ("Update policy", self.update_policy.clone()),
            ("Provider", opt(&self.provider)),
            ("Region", opt(&self.region)),
            ("Endpoint", opt(&cp.endpoint)),
            (
                "Control plane",
                format!("{} × {}", cp.nodes, node_specs(&cp.specs)),
            ),
            (
                "Pools",
                self.pools
                    .iter()
                    .map(|p| {
                        format!(
                            "{} ({}/{} nodes, {}..{}{}, {})",
                            p.name,
                            p.current_nodes,
                            p.desired_nodes,
                            p.min_nodes,
                            p.max_nodes,
                            if p.autoscale { ", autoscaled" } else { "" },
                            node_specs(&p.specs)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            ("CNI", self.cni.clone()),
            (
                "Network",
                format!(
                    "{}{}",
                    self.network.cidr,
                    if self.network.dhcp { " (DHCP)" } else { "" }
                ),
            ),
            ("Pod network", self.pod_cidr.clone()),
            ("Service network", self.service_cidr.clone()),
            ("Price", price(&self.price)),
            ("Labels", labels(&self.labels)),
            ("Created", time(&self.created)),
        ]);
        View::Fields(fields)
    }
}

impl Show for Vec<Cluster> {
    /// An ERROR column, last, when any cluster has an error message.
    fn view(&self, width: Width) -> View {
        let errors = self.iter().any(|c| c.error_message.is_some());
        let mut headers = vec![
            "ID", "NAME", "STATUS", "VERSION", "PROVIDER", "REGION", "NODES", "CREATED",
        ];
        if errors {
            headers.push("ERROR");
        }
        View::Table {
            headers,
            rows: self
                .iter()
                .map(|c| {
                    let workers: u32 = c.pools.iter().map(|p| p.current_nodes).sum();
                    let mut row = vec![
                        width.id(&c.id),
                        c.name.clone(),
                        c.status.clone(),
                        c.kubernetes_version.clone(),
                        opt(&c.provider),
                        opt(&c.region),
                        format!("{}+{workers}", c.control_plane.nodes),
                        time(&c.created),
                    ];
                    if errors {
                        row.push(width.message(opt(&c.error_message)));
                    }
                    row
                })
                .collect(),
        }
    }
}

impl Show for Pool {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            (
                "Nodes",
                format!("{} now, {} desired", self.current_nodes, self.desired_nodes),
            ),
            ("Bounds", format!("{}..{}", self.min_nodes, self.max_nodes)),
            ("Autoscale", self.autoscale.to_string()),
            ("Specs", node_specs(&self.specs)),
            ("Billing", self.billing.clone()),
            ("Labels", labels(&self.labels)),
            ("Taints", self.taints.join(", ")),
        ])
    }
}

fn resources(a: &Action) -> String {
    a.resources
        .iter()
        .map(|r| format!("{} {}", r.kind, r.id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An action's resources in a table cell: one of a kind by id, more as a
/// count (`vm 0192..., 3 volumes`).
fn resources_short(a: &Action, width: Width) -> String {
    let mut kinds: Vec<(&str, Vec<String>)> = Vec::new();
    for r in &a.resources {
        match kinds.iter_mut().find(|(k, _)| *k == r.kind) {
            Some((_, ids)) => ids.push(width.id(&r.id)),
            None => kinds.push((&r.kind, vec![width.id(&r.id)])),
        }
    }
    kinds
        .iter()
        .map(|(k, ids)| match ids.as_slice() {
            [one] => format!("{k} {one}"),
            many => format!("{} {k}s", many.len()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn action_error(a: &Action) -> String {
    a.error
        .as_ref()
        .map_or(String::new(), |e| format!("{} ({})", e.message, e.code))
}

impl Show for Action {
    fn view(&self, _: Width) -> View {
        let mut fields = vec![
            ("ID", self.id.to_string()),
            ("Command", self.command.clone()),
            ("Status", self.status.clone()),
            ("Progress", format!("{}%", self.progress)),
            ("Started", time(&self.started)),
            (
                "Finished",
                self.finished.as_ref().map_or(String::new(), time),
            ),
            ("Resources", resources(self)),
        ];
        if self.error.is_some() {
            fields.push(("Error", action_error(self)));
        }
        View::Fields(fields)
    }
}

impl Show for Vec<Action> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec![
                "ID",
                "COMMAND",
                "STATUS",
                "PROGRESS",
                "STARTED",
                "FINISHED",
                "RESOURCES",
                "ERROR",
            ],
            rows: self
                .iter()
                .map(|a| {
                    vec![
                        width.id(&a.id),
                        a.command.clone(),
                        a.status.clone(),
                        format!("{}%", a.progress),
                        time(&a.started),
                        a.finished.as_ref().map_or(String::new(), time),
                        resources_short(a, width),
                        width.message(action_error(a)),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for Vec<Flavor> {
    fn view(&self, _: Width) -> View {
        View::Table {
            headers: vec![
                "NAME",
                "VCPUS",
                "MEMORY",
                "GPUS",
                "GPU MODEL",
                "DESCRIPTION",
            ],
            rows: self
                .iter()
                .map(|f| {
                    vec![
                        f.name.clone(),
                        f.vcpus.to_string(),
                        format!("{} MiB", f.memory_mib),
                        f.gpus.to_string(),
                        opt(&f.gpu_model),
                        f.description.clone(),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for Vec<Provider> {
    fn view(&self, _: Width) -> View {
        View::Table {
            headers: vec!["PROVIDER", "REGION", "CONTINENT", "HOSTS"],
            rows: self
                .iter()
                .flat_map(|p| {
                    p.regions.iter().map(|r| {
                        vec![
                            p.name.clone(),
                            r.name.clone(),
                            r.continent.clone(),
                            r.hosts.to_string(),
                        ]
                    })
                })
                .collect(),
        }
    }
}

fn money(p: &Price) -> [String; 3] {
    [
        format!("{:.4}", p.hourly),
        format!("{:.2}", p.monthly),
        p.currency.clone(),
    ]
}

impl Show for QuoteAnswer {
    fn view(&self, _: Width) -> View {
        match self {
            QuoteAnswer::Vm(q) => View::Table {
                headers: vec![
                    "PROVIDER",
                    "REGION",
                    "CONTINENT",
                    "HOST",
                    "HOURLY",
                    "MONTHLY",
                    "CURRENCY",
                ],
                rows: q
                    .quotes
                    .iter()
                    .map(|q| {
                        let mut row = vec![
                            q.provider.clone(),
                            q.region.clone(),
                            q.continent.clone(),
                            q.host.clone(),
                        ];
                        row.extend(money(&q.price));
                        row
                    })
                    .collect(),
            },
            QuoteAnswer::Kaas(q) => View::Table {
                headers: vec![
                    "PROVIDER",
                    "REGION",
                    "CONTINENT",
                    "HOURLY",
                    "MONTHLY",
                    "CURRENCY",
                    "MAX HOURLY",
                ],
                rows: q
                    .placements
                    .iter()
                    .map(|c| {
                        let mut row =
                            vec![c.provider.clone(), c.region.clone(), c.continent.clone()];
                        row.extend(money(&c.price));
                        row.push(format!("{:.4}", c.max_price.hourly));
                        row
                    })
                    .collect(),
            },
        }
    }
}

impl Show for VmCreateResponse {
    fn view(&self, width: Width) -> View {
        let mut actions = vec![self.action.clone()];
        actions.extend(self.next_actions.iter().cloned());
        View::Sections(vec![
            ("VM", self.vm.view(width)),
            ("Actions", actions.view(width)),
        ])
    }
}

impl Show for ClusterCreateResponse {
    fn view(&self, width: Width) -> View {
        View::Sections(vec![
            ("Cluster", self.cluster.view(width)),
            ("Action", self.action.view(width)),
        ])
    }
}

impl Show for meson_types::admin::TargetDrainResponse {
    fn view(&self, width: Width) -> View {
        View::Sections(vec![
            ("Target", self.target.view(width)),
            ("Migrations", self.actions.view(width)),
        ])
    }
}

impl Show for PoolUpdateResponse {
    fn view(&self, width: Width) -> View {
        match &self.action {
            Some(a) => View::Sections(vec![
                ("Pool", self.pool.view(width)),
                ("Action", a.view(width)),
            ]),
            None => self.pool.view(width),
        }
    }
}

impl Show for Volume {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            ("Kind", self.kind.clone()),
            ("Size", format!("{} GB", self.size)),
            ("Status", self.status.clone()),
            ("Standalone", self.standalone.to_string()),
            ("VM", self.vm.map(|v| v.to_string()).unwrap_or_default()),
            (
                "Attached to",
                self.attached_to.map(|v| v.to_string()).unwrap_or_default(),
            ),
            ("Host", opt(&self.host)),
            ("Labels", labels(&self.labels)),
        ])
    }
}

impl Show for Vec<Volume> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec!["ID", "NAME", "KIND", "SIZE", "STATUS", "VM", "HOST"],
            rows: self
                .iter()
                .map(|v| {
                    vec![
                        width.id(&v.id),
                        v.name.clone(),
                        v.kind.clone(),
                        format!("{} GB", v.size),
                        v.status.clone(),
                        v.vm.or(v.attached_to)
                            .map(|id| width.id(&id))
                            .unwrap_or_default(),
                        opt(&v.host),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for VolumeCreateResponse {
    fn view(&self, width: Width) -> View {
        View::Sections(vec![
            ("Volume", self.volume.view(width)),
            ("Actions", vec![self.action.clone()].view(width)),
        ])
    }
}

impl Show for Image {
    fn view(&self, _: Width) -> View {
        let source = match (&self.source.vm, &self.source.url) {
            (Some(vm), _) => format!("snapshot of VM {vm}"),
            (None, Some(url)) => url.clone(),
            (None, None) => self.source.kind.clone(),
        };
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            ("Status", self.status.clone()),
            ("Source", source),
            ("Size", format!("{} GB", self.size)),
            ("SHA-256", opt(&self.sha256)),
            ("Host", opt(&self.host)),
            ("Labels", labels(&self.labels)),
            ("Error", opt(&self.error)),
        ])
    }
}

impl Show for Vec<Image> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec!["ID", "NAME", "STATUS", "SOURCE", "SIZE", "HOST"],
            rows: self
                .iter()
                .map(|i| {
                    vec![
                        width.id(&i.id),
                        i.name.clone(),
                        i.status.clone(),
                        i.source.kind.clone(),
                        format!("{} GB", i.size),
                        opt(&i.host),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for ImageCreateResponse {
    fn view(&self, width: Width) -> View {
        View::Sections(vec![
            ("Image", self.image.view(width)),
            ("Actions", vec![self.action.clone()].view(width)),
        ])
    }
}

impl Show for SshKey {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            ("Fingerprint", self.fingerprint.clone()),
            ("Public key", self.public_key.clone()),
            ("Labels", labels(&self.labels)),
            ("Created", time(&self.created)),
        ])
    }
}

impl Show for Vec<SshKey> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec!["ID", "NAME", "FINGERPRINT", "CREATED"],
            rows: self
                .iter()
                .map(|k| {
                    vec![
                        width.id(&k.id),
                        k.name.clone(),
                        k.fingerprint.clone(),
                        time(&k.created),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for Network {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            ("Status", self.status.clone()),
            ("CIDR", self.cidr.clone()),
            ("Gateway", self.gateway.clone()),
            ("DHCP", self.dhcp.to_string()),
            (
                "Range",
                format!("{} - {}", self.range.start, self.range.last),
            ),
            (
                "VMs",
                self.vms
                    .iter()
                    .map(uuid::Uuid::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ("Labels", labels(&self.labels)),
        ])
    }
}

impl Show for Vec<Network> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec!["ID", "NAME", "STATUS", "CIDR", "DHCP", "VMS"],
            rows: self
                .iter()
                .map(|n| {
                    vec![
                        width.id(&n.id),
                        n.name.clone(),
                        n.status.clone(),
                        n.cidr.clone(),
                        n.dhcp.to_string(),
                        n.vms.len().to_string(),
                    ]
                })
                .collect(),
        }
    }
}

/// Where a port forward is reached: `ip:port`, `[ip]:port` for IPv6.
pub fn public_address(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

impl Show for PortForward {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Network", self.network.to_string()),
            ("VM", self.vm.to_string()),
            ("Protocol", self.protocol.clone()),
            (
                "Public address",
                public_address(&self.public_ip, self.public_port),
            ),
            ("Private port", self.private_port.to_string()),
            ("Status", self.status.clone()),
            ("Host", self.host.clone()),
            ("Error", opt(&self.error)),
            ("Created", time(&self.created)),
        ])
    }
}

impl Show for Vec<PortForward> {
    /// An ERROR column, last, when any forward has an error.
    fn view(&self, width: Width) -> View {
        let errors = self.iter().any(|f| f.error.is_some());
        let mut headers = vec![
            "ID",
            "VM",
            "PROTOCOL",
            "PUBLIC ADDRESS",
            "PRIVATE PORT",
            "STATUS",
        ];
        if errors {
            headers.push("ERROR");
        }
        View::Table {
            headers,
            rows: self
                .iter()
                .map(|f| {
                    let mut row = vec![
                        width.id(&f.id),
                        width.id(&f.vm),
                        f.protocol.clone(),
                        public_address(&f.public_ip, f.public_port),
                        f.private_port.to_string(),
                        f.status.clone(),
                    ];
                    if errors {
                        row.push(width.message(opt(&f.error)));
                    }
                    row
                })
                .collect(),
        }
    }
}

impl Show for PortForwardCreateResponse {
    fn view(&self, width: Width) -> View {
        View::Sections(vec![
            ("Port forward", self.port_forward.view(width)),
            ("Actions", vec![self.action.clone()].view(width)),
        ])
    }
}

impl Show for Backup {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            ("VM", format!("{} ({})", self.vm_name, self.vm)),
            ("Kind", self.kind.clone()),
            ("Status", self.status.clone()),
            ("Size", format!("{} GB", self.size)),
            (
                "Volumes",
                self.volumes
                    .iter()
                    .map(|v| format!("{} {} GB", v.kind, v.size))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ("Host", self.host.clone()),
            ("Provider", self.provider.clone()),
            ("Region", self.region.clone()),
            ("Labels", labels(&self.labels)),
            ("Error", opt(&self.error)),
            ("Created", time(&self.created)),
            ("Expires", self.expires.as_ref().map_or(String::new(), time)),
        ])
    }
}

impl Show for Vec<Backup> {
    /// An ERROR column, last, when any backup has an error.
    fn view(&self, width: Width) -> View {
        let errors = self.iter().any(|b| b.error.is_some());
        let mut headers = vec!["ID", "NAME", "VM", "KIND", "STATUS", "SIZE", "CREATED"];
        if errors {
            headers.push("ERROR");
        }
        View::Table {
            headers,
            rows: self
                .iter()
                .map(|b| {
                    let mut row = vec![
                        width.id(&b.id),
                        b.name.clone(),
                        b.vm_name.clone(),
                        b.kind.clone(),
                        b.status.clone(),
                        format!("{} GB", b.size),
                        time(&b.created),
                    ];
                    if errors {
                        row.push(width.message(opt(&b.error)));
                    }
                    row
                })
                .collect(),
        }
    }
}

impl Show for BackupCreateResponse {
    fn view(&self, width: Width) -> View {
        View::Sections(vec![
            ("Backup", self.backup.view(width)),
            ("Actions", vec![self.action.clone()].view(width)),
        ])
    }
}

impl Show for RestoreResponse {
    fn view(&self, width: Width) -> View {
        View::Sections(vec![
            ("VM", self.vm.view(width)),
            ("Actions", vec![self.action.clone()].view(width)),
        ])
    }
}

fn bytes(n: i64) -> String {
    format!("{n} bytes")
}

impl Show for Console {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("VM", self.vm.to_string()),
            ("Status", self.status.clone()),
            ("Requested by", self.requested_by.clone()),
            ("Created", time(&self.created)),
            ("Expires", time(&self.expires)),
            ("Opened", self.opened.as_ref().map_or(String::new(), time)),
            ("Closed", self.closed.as_ref().map_or(String::new(), time)),
            ("Close reason", opt(&self.close_reason)),
            ("Bytes in", bytes(self.bytes_in)),
            ("Bytes out", bytes(self.bytes_out)),
        ])
    }
}

impl Show for Vec<Console> {
    /// A REASON column, last, when any console has ended with one.
    fn view(&self, width: Width) -> View {
        let reasons = self.iter().any(|c| c.close_reason.is_some());
        let mut headers = vec!["ID", "VM", "STATUS", "REQUESTED BY", "CREATED", "CLOSED"];
        if reasons {
            headers.push("REASON");
        }
        View::Table {
            headers,
            rows: self
                .iter()
                .map(|c| {
                    let mut row = vec![
                        width.id(&c.id),
                        width.id(&c.vm),
                        c.status.clone(),
                        c.requested_by.clone(),
                        time(&c.created),
                        c.closed.as_ref().map_or(String::new(), time),
                    ];
                    if reasons {
                        row.push(width.message(opt(&c.close_reason)));
                    }
                    row
                })
                .collect(),
        }
    }
}

/// `vm console --url-only`: what connects to the console (JSON: the whole
/// answer).
impl Show for ConsoleRequestResponse {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("URL", self.wss_url.clone()),
            ("Password", self.password.clone()),
            ("Console", self.console.id.to_string()),
            ("Expires", time(&self.console.expires)),
        ])
    }
}

/// An expiry or a last use that may never come.
fn or_never(t: &Option<DateTime<Utc>>) -> String {
    t.as_ref().map_or_else(|| "never".to_owned(), time)
}

impl Show for ApiToken {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            ("Role", self.role.clone()),
            ("Prefix", self.prefix.clone()),
            ("Created by", self.created_by.clone()),
            ("Created", time(&self.created)),
            ("Expires", or_never(&self.expires)),
            ("Last used", or_never(&self.last_used)),
            ("Revoked", self.revoked.as_ref().map_or(String::new(), time)),
            ("Revoked by", opt(&self.revoked_by)),
        ])
    }
}

impl Show for Vec<ApiToken> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec![
                "ID",
                "NAME",
                "ROLE",
                "PREFIX",
                "CREATED",
                "EXPIRES",
                "LAST USED",
                "REVOKED",
            ],
            rows: self
                .iter()
                .map(|t| {
                    vec![
                        width.id(&t.id),
                        t.name.clone(),
                        t.role.clone(),
                        t.prefix.clone(),
                        time(&t.created),
                        or_never(&t.expires),
                        or_never(&t.last_used),
                        t.revoked.as_ref().map_or(String::new(), time),
                    ]
                })
                .collect(),
        }
    }
}

/// `token create`: the secret first, shown this once, then the token
/// (JSON: the whole answer).
impl Show for TokenCreateResponse {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("Secret", self.secret.clone()),
            ("ID", self.token.id.to_string()),
            ("Name", self.token.name.clone()),
            ("Role", self.token.role.clone()),
            ("Prefix", self.token.prefix.clone()),
            ("Expires", or_never(&self.token.expires)),
        ])
    }
}

impl Show for Member {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("Subject", self.subject.clone()),
            ("Email", opt(&self.email)),
            ("Role", self.role.clone()),
            ("Added by", self.added_by.clone()),
            ("Created", time(&self.created)),
            ("Updated", time(&self.updated)),
            ("Limits", member_limits(&self.limits)),
        ])
    }
}

/// A member's own limits, `vms=2, vcpus=8`; `-`: none of its own.
fn member_limits(l: &meson_types::member::MemberLimits) -> String {
    let set: Vec<String> = [("vms", l.vms), ("vcpus", l.vcpus), ("ram_mib", l.ram_mib)]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
        .collect();
    if set.is_empty() {
        "-".to_owned()
    } else {
        set.join(", ")
    }
}

impl Show for Vec<Member> {
    fn view(&self, _: Width) -> View {
        View::Table {
            headers: vec!["SUBJECT", "EMAIL", "ROLE", "ADDED BY", "CREATED"],
            rows: self
                .iter()
                .map(|m| {
                    vec![
                        m.subject.clone(),
                        opt(&m.email),
                        m.role.clone(),
                        m.added_by.clone(),
                        time(&m.created),
                    ]
                })
                .collect(),
        }
    }
}

/// `membership list`: a row per organisation (JSON: the whole answer, the
/// caller's subject with it).
impl Show for MembershipList {
    fn view(&self, _: Width) -> View {
        View::Table {
            headers: vec!["ORGANIZATION", "ROLE", "VIA"],
            rows: self
                .memberships
                .iter()
                .map(|m| vec![m.organization.clone(), m.role.clone(), m.via.clone()])
                .collect(),
        }
    }
}

impl Show for Invitation {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Organization", self.organization.clone()),
            ("Email", self.email.clone()),
            ("Role", self.role.clone()),
            ("Status", self.status.clone()),
            ("Invited by", self.invited_by.clone()),
            ("Created", time(&self.created)),
            ("Expires", time(&self.expires)),
            (
                "Accepted",
                self.accepted.as_ref().map_or(String::new(), time),
            ),
            ("Accepted by", opt(&self.accepted_by)),
            ("Revoked", self.revoked.as_ref().map_or(String::new(), time)),
            ("Revoked by", opt(&self.revoked_by)),
        ])
    }
}

impl Show for Vec<Invitation> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec![
                "ID",
                "EMAIL",
                "ROLE",
                "STATUS",
                "INVITED BY",
                "CREATED",
                "EXPIRES",
            ],
            rows: self
                .iter()
                .map(|i| {
                    vec![
                        width.id(&i.id),
                        i.email.clone(),
                        i.role.clone(),
                        i.status.clone(),
                        i.invited_by.clone(),
                        time(&i.created),
                        time(&i.expires),
                    ]
                })
                .collect(),
        }
    }
}

/// `invitation create`: the token first, shown this once, then the
/// invitation (JSON: the whole answer).
impl Show for InvitationCreateResponse {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("Token", self.token.clone()),
            ("ID", self.invitation.id.to_string()),
            ("Organization", self.invitation.organization.clone()),
            ("Email", self.invitation.email.clone()),
            ("Role", self.invitation.role.clone()),
            ("Expires", time(&self.invitation.expires)),
        ])
    }
}

/// `invitation accept`: the membership it made.
impl Show for InvitationAcceptResponse {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("Organization", self.invitation.organization.clone()),
            ("Subject", self.member.subject.clone()),
            ("Role", self.member.role.clone()),
            ("Invitation", self.invitation.id.to_string()),
        ])
    }
}

/// An organisation's quota of `name` as a cell: none for a root (its
/// quotas are `quota get`'s).
fn carve(o: &Organization, name: &str) -> String {
    o.quotas
        .as_ref()
        .and_then(|q| q.get(name))
        .map_or(String::new(), ToString::to_string)
}

/// The organisation the command acts in, then those below it: a row each,
/// its quota of every limit (a root's: `-`, its quotas are `quota get`'s).
impl Show for Vec<Organization> {
    fn view(&self, _: Width) -> View {
        let mut headers = vec!["ID", "PARENT"];
        headers.extend(PLAN_COLUMNS.iter().map(|(_, h)| *h));
        headers.push("CREATED");
        View::Table {
            headers,
            rows: self
                .iter()
                .map(|o| {
                    let mut row = vec![o.id.clone(), opt(&o.parent)];
                    row.extend(PLAN_COLUMNS.iter().map(|(name, _)| carve(o, name)));
                    row.push(time(&o.created));
                    row
                })
                .collect(),
        }
    }
}

/// An organisation, then a row per quota it was given (a sub-organisation's,
/// in meson's order; a limit meson adds later after them).
impl Show for Organization {
    fn view(&self, _: Width) -> View {
        let mut fields = vec![
            ("ID", self.id.clone()),
            ("Name", self.name.clone()),
            ("Parent", opt(&self.parent)),
            ("Depth", self.depth.to_string()),
            ("Created by", self.created_by.clone()),
            ("Created", time(&self.created)),
        ];
        let Some(quotas) = &self.quotas else {
            fields.push(("Quotas", "its own (mesonctl quota get)".to_owned()));
            return View::Fields(fields);
        };
        let mut rows: Vec<Vec<String>> = PLAN_COLUMNS
            .iter()
            .filter_map(|(name, _)| {
                quotas
                    .get(*name)
                    .map(|n| vec![(*name).to_owned(), n.to_string()])
            })
            .collect();
        rows.extend(
            quotas
                .iter()
                .filter(|(name, _)| !PLAN_COLUMNS.iter().any(|(n, _)| n == name))
                .map(|(name, n)| vec![name.clone(), n.to_string()]),
        );
        View::Stack(vec![
            View::Fields(fields),
            View::Table {
                headers: vec!["LIMIT", "QUOTA"],
                rows,
            },
        ])
    }
}

/// A resource's id as a table shows it (short unless wide); anything else
/// (a day, a tenant, a label's value) as it is.
fn group_cell(width: Width, group: &str) -> String {
    match group.parse::<uuid::Uuid>() {
        Ok(id) => width.id(&id),
        Err(_) => group.to_owned(),
    }
}

/// Totals per currency on one line (`12.34 EUR, 5.00 USD`).
fn totals(t: &[Money]) -> String {
    if t.is_empty() {
        return "0.00 (nothing used)".to_owned();
    }
    t.iter()
        .map(|m| format!("{} {}", m.amount, m.currency))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `mesonctl usage`: a line per group and meter, then the period and the
/// totals. The first column is the group (a resource's id and name, a
/// day, a tenant or a label's value); a TENANT column comes first when
/// the lines are several tenants'.
impl Show for Usage {
    fn view(&self, width: Width) -> View {
        let by = self.group_by.as_str();
        let by_resource = by == "resource";
        let tenants = by != "tenant"
            && self
                .lines
                .iter()
                .any(|l| self.lines.first().is_some_and(|f| f.tenant != l.tenant));
        let mut headers = Vec::new();
        if tenants {
            headers.push("TENANT");
        }
        headers.push(match by {
            "resource" => "RESOURCE",
            "day" => "DAY",
            "tenant" => "TENANT",
            _ => "LABEL",
        });
        if by_resource {
            headers.push("NAME");
        }
        headers.extend(["METER", "QUANTITY", "COST"]);
        let rows = self
            .lines
            .iter()
            .map(|l| {
                let mut row = Vec::new();
                if tenants {
                    row.push(l.tenant.clone());
                }
                row.push(match &l.group {
                    Some(g) => group_cell(width, g),
                    None if by.starts_with("label:") => "(none)".to_owned(),
                    None => String::new(),
                });
                if by_resource {
                    row.push(opt(&l.name));
                }
                row.extend([
                    l.meter.as_str().to_owned(),
                    format!("{} {}", l.quantity, l.unit),
                    format!("{} {}", l.cost, l.currency),
                ]);
                row
            })
            .collect();
        View::Stack(vec![
            View::Table { headers, rows },
            View::Fields(vec![
                (
                    "Period",
                    format!("{} to {}", time(&self.from), time(&self.to)),
                ),
                ("Grouped by", self.group_by.clone()),
                ("Total", totals(&self.totals)),
            ]),
        ])
    }
}

/// A statement's id as a table shows it: `current`, or a short id.
fn statement_id(width: Width, id: &str) -> String {
    group_cell(width, id)
}

fn statement_status(s: StatementStatus) -> &'static str {
    match s {
        StatementStatus::Open => "open",
        StatementStatus::Closed => "closed",
    }
}

impl Show for Vec<Statement> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec!["ID", "TENANT", "MONTH", "STATUS", "TOTAL", "CLOSED"],
            rows: self
                .iter()
                .map(|st| {
                    vec![
                        statement_id(width, &st.id),
                        st.tenant.clone(),
                        st.period_start.format("%Y-%m").to_string(),
                        statement_status(st.status).to_owned(),
                        format!("{} {}", st.total, st.currency),
                        st.closed.as_ref().map_or(String::new(), time),
                    ]
                })
                .collect(),
        }
    }
}

/// A statement: its month and total, then a line per resource.
impl Show for Statement {
    fn view(&self, width: Width) -> View {
        let fields = View::Fields(vec![
            ("ID", self.id.clone()),
            ("Tenant", self.tenant.clone()),
            ("Status", statement_status(self.status).to_owned()),
            (
                "Period",
                format!("{} to {}", time(&self.period_start), time(&self.period_end)),
            ),
            ("Total", format!("{} {}", self.total, self.currency)),
            ("Closed", self.closed.as_ref().map_or(String::new(), time)),
        ]);
        let Some(lines) = &self.lines else {
            return fields;
        };
        View::Stack(vec![
            fields,
            View::Table {
                headers: vec!["METER", "RESOURCE", "NAME", "QUANTITY", "COST"],
                rows: lines
                    .iter()
                    .map(|l| {
                        vec![
                            l.meter.as_str().to_owned(),
                            width.id(&l.resource_id),
                            l.resource_name.clone(),
                            format!("{} {}", l.quantity, l.unit),
                            format!("{} {}", l.cost, self.currency),
                        ]
                    })
                    .collect(),
            },
        ])
    }
}

impl Show for Vec<PriceEntry> {
    fn view(&self, _: Width) -> View {
        View::Table {
            headers: vec!["METER", "PROVIDER", "UNIT PRICE", "UNIT", "FROM", "UNTIL"],
            rows: self
                .iter()
                .map(|p| {
                    vec![
                        p.meter.as_str().to_owned(),
                        p.provider.clone(),
                        format!("{} {}", p.unit_price, p.currency),
                        p.unit.clone(),
                        time(&p.effective_from),
                        p.until.as_ref().map_or(String::new(), time),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for PriceEntry {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("Meter", self.meter.as_str().to_owned()),
            ("Provider", self.provider.clone()),
            (
                "Unit price",
                format!("{} {} per {}", self.unit_price, self.currency, self.unit),
            ),
            ("From", time(&self.effective_from)),
            (
                "Until",
                self.until
                    .as_ref()
                    .map_or("until further notice".to_owned(), time),
            ),
        ])
    }
}

impl Show for Vec<KubernetesVersion> {
    fn view(&self, _: Width) -> View {
        View::Table {
            headers: vec![
                "VERSION",
                "DEFAULT",
                "DEPRECATED",
                "END OF LIFE",
                "UPGRADES TO",
            ],
            rows: self
                .iter()
                .map(|k| {
                    vec![
                        k.version.clone(),
                        if k.default { "yes" } else { "" }.to_owned(),
                        if k.deprecated { "yes" } else { "" }.to_owned(),
                        k.end_of_life.clone(),
                        k.upgradable_to.join(", "),
                    ]
                })
                .collect(),
        }
    }
}

/// A tenant's quotas: a row per limit, then whose they are and the plan
/// the tenant is on (`default`: none, the deployment's defaults).
impl Show for Quota {
    fn view(&self, _: Width) -> View {
        View::Stack(vec![
            View::Table {
                headers: vec!["LIMIT", "QUOTA", "USED"],
                rows: self
                    .limits
                    .iter()
                    .map(|l| vec![l.name.clone(), l.quota.to_string(), l.current.to_string()])
                    .collect(),
            },
            View::Fields(vec![
                ("Tenant", self.tenant.clone()),
                ("Plan", plan_name(self.plan.as_deref())),
            ]),
        ])
    }
}

/// The plan a tenant is on as meson names it: `default` when on none.
fn plan_name(plan: Option<&str>) -> String {
    plan.unwrap_or("default").to_owned()
}

/// The limits a plan table has a column for, in meson's order, with their
/// headers. A limit meson adds later shows in `plan get` and -o json.
const PLAN_COLUMNS: &[(&str, &str)] = &[
    ("vms", "VMS"),
    ("vcpus", "VCPUS"),
    ("ram_mib", "RAM_MIB"),
    ("storage_gb", "STORAGE_GB"),
    ("clusters", "CLUSTERS"),
    ("nodes", "NODES"),
    ("images_gb", "IMAGES_GB"),
];

/// The plans: a row each, its quota of every limit and its description.
impl Show for Vec<Plan> {
    fn view(&self, width: Width) -> View {
        let mut headers = vec!["NAME"];
        headers.extend(PLAN_COLUMNS.iter().map(|(_, h)| *h));
        headers.push("DESCRIPTION");
        View::Table {
            headers,
            rows: self
                .iter()
                .map(|p| {
                    let mut row = vec![p.name.clone()];
                    row.extend(PLAN_COLUMNS.iter().map(|(name, _)| {
                        p.quotas
                            .iter()
                            .find(|q| q.name == *name)
                            .map_or(String::new(), |q| q.quota.to_string())
                    }));
                    row.push(width.message(p.description.clone()));
                    row
                })
                .collect(),
        }
    }
}

/// A plan: its name and description, then a row per limit (DEFAULT: the
/// plan leaves it at the deployment's default).
impl Show for Plan {
    fn view(&self, _: Width) -> View {
        View::Stack(vec![
            View::Fields(vec![
                ("Name", self.name.clone()),
                ("Description", self.description.clone()),
            ]),
            View::Table {
                headers: vec!["LIMIT", "QUOTA", "DEFAULT"],
                rows: self
                    .quotas
                    .iter()
                    .map(|q| {
                        vec![
                            q.name.clone(),
                            q.quota.to_string(),
                            if q.default { "yes" } else { "no" }.to_owned(),
                        ]
                    })
                    .collect(),
            },
        ])
    }
}

impl Show for Vec<Pool> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec![
                "ID",
                "NAME",
                "NODES",
                "DESIRED",
                "BOUNDS",
                "AUTOSCALE",
                "SPECS",
            ],
            rows: self
                .iter()
                .map(|p| {
                    vec![
                        width.id(&p.id),
                        p.name.clone(),
                        p.current_nodes.to_string(),
                        p.desired_nodes.to_string(),
                        format!("{}..{}", p.min_nodes, p.max_nodes),
                        p.autoscale.to_string(),
                        node_specs(&p.specs),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for Vec<Node> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec![
                "ID", "NAME", "ROLE", "STATUS", "VERSION", "IP", "HOST", "ERROR",
            ],
            rows: self
                .iter()
                .map(|n| {
                    vec![
                        width.id(&n.id),
                        n.name.clone(),
                        n.role.clone(),
                        n.status.clone(),
                        n.kubernetes_version.clone(),
                        opt(&n.ip),
                        opt(&n.host),
                        width.message(n.error_message.clone().unwrap_or_default()),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for AutoscalerCredentials {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("Address", self.address.clone()),
            ("Expires", self.expires.to_rfc3339()),
            ("CA certificate", self.ca_cert.clone()),
            ("Certificate", self.cert.clone()),
            ("Key", self.key.clone()),
            ("Cloud config", self.cloud_config.clone()),
        ])
    }
}

/// `mesonctl status`: where meson is, what it is, whether it is up and
/// ready.
#[derive(Serialize)]
pub struct Status {
    pub url: String,
    pub name: String,
    pub version: String,
    pub live: String,
    pub ready: String,
}

impl Show for Status {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("URL", self.url.clone()),
            ("Server", format!("{} {}", self.name, self.version)),
            ("Live", self.live.clone()),
            ("Ready", self.ready.clone()),
        ])
    }
}

impl Show for Target {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Name", self.name.clone()),
            ("Host", self.host.clone()),
            (
                "Ports",
                format!(
                    "compute {}, storage {}, network {}, auth {}",
                    self.compute_port, self.storage_port, self.network_port, self.auth_port
                ),
            ),
            ("Provider", self.provider.clone()),
            ("Region", self.region.clone()),
            ("Continent", self.continent.clone()),
            ("Enabled", self.enabled.to_string()),
        ])
    }
}

impl Show for Vec<Target> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec![
                "ID",
                "NAME",
                "HOST",
                "PROVIDER",
                "REGION",
                "CONTINENT",
                "ENABLED",
            ],
            rows: self
                .iter()
                .map(|t| {
                    vec![
                        width.id(&t.id),
                        t.name.clone(),
                        t.host.clone(),
                        t.provider.clone(),
                        t.region.clone(),
                        t.continent.clone(),
                        t.enabled.to_string(),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for Orphan {
    fn view(&self, _: Width) -> View {
        View::Fields(vec![
            ("ID", self.id.to_string()),
            ("Host", self.host.clone()),
            ("AtomOS name", self.atomos_name.clone()),
            ("AtomOS id", self.atomos_id.clone()),
            (
                "VM id",
                self.vm_id.map(|v| v.to_string()).unwrap_or_default(),
            ),
            ("Tenant tag", opt(&self.tenant_tag)),
            ("Tenant", opt(&self.tenant)),
            ("Cluster", opt(&self.cluster)),
            ("State", self.state.clone()),
            (
                "Size",
                format!("{} vCPUs, {} MiB", self.vcpus, self.ram_mib),
            ),
            ("IPv4", self.ipv4.map(|a| a.to_string()).unwrap_or_default()),
            (
                "Volumes",
                self.volumes
                    .iter()
                    .map(|v| format!("{} ({} GB)", v.name, v.size_gb))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ("Reason", self.reason.clone()),
            (
                "Decision",
                match (&self.decision, &self.adopt_tenant) {
                    (Some(d), Some(t)) => format!("{d} into {t}"),
                    (Some(d), None) => d.clone(),
                    _ => String::new(),
                },
            ),
            ("Decided by", opt(&self.decided_by)),
            ("Error", opt(&self.error_message)),
            ("First seen", self.first_seen.to_rfc3339()),
            ("Last seen", self.last_seen.to_rfc3339()),
        ])
    }
}

impl Show for Vec<Orphan> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec![
                "ID",
                "HOST",
                "ATOMOS NAME",
                "STATE",
                "TENANT",
                "DECISION",
                "REASON",
            ],
            rows: self
                .iter()
                .map(|o| {
                    vec![
                        width.id(&o.id),
                        o.host.clone(),
                        o.atomos_name.clone(),
                        o.state.clone(),
                        o.tenant.clone().unwrap_or_default(),
                        o.decision.clone().unwrap_or_default(),
                        o.reason.clone(),
                    ]
                })
                .collect(),
        }
    }
}

impl Show for Vec<AuditEntry> {
    fn view(&self, width: Width) -> View {
        View::Table {
            headers: vec![
                "TIME",
                "TENANT",
                "SUBJECT",
                "OPERATION",
                "STATUS",
                "RESOURCE",
            ],
            rows: self
                .iter()
                .map(|e| {
                    vec![
                        e.time.to_rfc3339_opts(SecondsFormat::Secs, true),
                        e.tenant.clone(),
                        e.subject.clone(),
                        e.operation.clone(),
                        e.status.to_string(),
                        match (&e.resource_type, &e.resource_id) {
                            (Some(t), Some(id)) => format!("{t} {}", width.message(id.clone())),
                            _ => String::new(),
                        },
                    ]
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_their_columns() {
        let t = table(
            &["ID", "NAME", "STATUS"],
            &[
                vec!["1".into(), "a-long-name".into(), "running".into()],
                vec!["22".into(), "b".into(), String::new()],
            ],
        );
        assert_eq!(
            t,
            "ID  NAME         STATUS\n\
             1   a-long-name  running\n\
             22  b            -\n"
        );
        let f = text(&View::Fields(vec![
            ("ID", "x".into()),
            ("Status", String::new()),
        ]));
        assert_eq!(f, "ID:      x\nStatus:  -\n");
    }

    #[test]
    fn port_forwards_show_their_public_address() {
        let f: PortForward = serde_json::from_value(serde_json::json!({
            "id": "0192f5c4-0000-7000-8000-0000000000f1",
            "network": "0192f5c4-0000-7000-8000-0000000000a1",
            "vm": "0192f5c4-0000-7000-8000-0000000000b1", "protocol": "tcp",
            "public_ip": "203.0.113.10", "public_port": 2222, "private_port": 22,
            "status": "active", "host": "ionos-fra-1", "error": null,
            "created": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        let list = render(Format::Table, &vec![f.clone()]).unwrap();
        assert_eq!(
            list,
            "ID        VM        PROTOCOL  PUBLIC ADDRESS     PRIVATE PORT  STATUS\n\
             000000f1  000000b1  tcp       203.0.113.10:2222  22            active\n"
        );
        let mut broken = f.clone();
        broken.status = "error".into();
        broken.error = Some("the host no longer forwards it".into());
        let list = render(Format::Table, &vec![f.clone(), broken]).unwrap();
        assert!(list.lines().next().unwrap().ends_with("  ERROR"), "{list}");
        assert!(list.contains("no longer forwards it"), "{list}");
        let one = render(Format::Table, &f).unwrap();
        assert!(one.contains("Public address:  203.0.113.10:2222"), "{one}");
        assert_eq!(public_address("2001:db8::1", 80), "[2001:db8::1]:80");
    }

    #[test]
    fn backups_show_their_vm_kind_and_size() {
        let b: Backup = serde_json::from_value(serde_json::json!({
            "id": "0192f5c4-0000-7000-8000-0000000000c1", "name": "before-upgrade",
            "vm": "0192f5c4-0000-7000-8000-0000000000b1", "vm_name": "web",
            "kind": "manual", "status": "available", "size": 15,
            "volumes": [
                {"volume": "0192f5c4-0000-7000-8000-0000000000d1", "kind": "boot", "size": 10},
                {"volume": null, "kind": "data", "size": 5}
            ],
            "host": "ionos-fra-1", "provider": "ionos", "region": "fra",
            "labels": {"env": "dev"}, "error": null,
            "created": "2026-01-01T00:00:00Z", "expires": null
        }))
        .unwrap();
        let list = render(Format::Table, &vec![b.clone()]).unwrap();
        assert_eq!(
            list,
            "ID        NAME            VM   KIND    STATUS     SIZE   CREATED\n\
             000000c1  before-upgrade  web  manual  available  15 GB  2026-01-01T00:00:00Z\n"
        );
        let mut broken = b.clone();
        broken.status = "error".into();
        broken.error = Some("the host has no room".into());
        let list = render(Format::Table, &vec![b.clone(), broken]).unwrap();
        assert!(list.lines().next().unwrap().ends_with("  ERROR"), "{list}");
        let one = render(Format::Table, &b).unwrap();
        assert!(one.contains("Volumes:   boot 10 GB, data 5 GB\n"), "{one}");
        assert!(
            one.contains("VM:        web (0192f5c4-0000-7000-8000-0000000000b1)\n"),
            "{one}"
        );
        assert_eq!(
            backup_policy(Some(&BackupPolicy {
                window: "22-02".into(),
                keep: 7
            })),
            "daily, window 22-02 UTC, newest 7 kept"
        );
        assert_eq!(backup_policy(None), "off");
    }

    #[test]
    fn consoles_show_their_status_and_how_they_ended() {
        let c: Console = serde_json::from_value(serde_json::json!({
            "id": "0192f5c4-0000-7000-8000-0000000000e1",
            "vm": "0192f5c4-0000-7000-8000-0000000000b1", "status": "requested",
            "requested_by": "dev", "created": "2026-01-01T00:00:00Z",
            "expires": "2026-01-01T00:01:00Z", "opened": null, "closed": null,
            "close_reason": null, "bytes_in": 0, "bytes_out": 0
        }))
        .unwrap();
        let list = render(Format::Table, &vec![c.clone()]).unwrap();
        assert_eq!(
            list,
            "ID        VM        STATUS     REQUESTED BY  CREATED               CLOSED\n\
             000000e1  000000b1  requested  dev           2026-01-01T00:00:00Z  -\n"
        );
        let mut closed = c.clone();
        closed.status = "closed".into();
        closed.closed = Some(c.created);
        closed.close_reason = Some("the client closed it".into());
        closed.bytes_out = 4096;
        let list = render(Format::Table, &vec![closed.clone(), c.clone()]).unwrap();
        assert!(list.lines().next().unwrap().ends_with("  REASON"), "{list}");
        assert!(list.contains("the client closed it"), "{list}");
        let one = render(Format::Table, &closed).unwrap();
        assert!(
            one.contains("Close reason:  the client closed it\n"),
            "{one}"
        );
        assert!(one.contains("Bytes out:     4096 bytes\n"), "{one}");
        let answer = ConsoleRequestResponse {
            console: c,
            wss_url: "ws://127.0.0.1:8080/v1/consoles/x/websocket?token=t".into(),
            password: "h7Rk2pQz".into(),
        };
        let one = render(Format::Table, &answer).unwrap();
        assert!(
            one.starts_with(
                "URL:       ws://127.0.0.1:8080/v1/consoles/x/websocket?token=t\n\
                             Password:  h7Rk2pQz\n"
            ),
            "{one}"
        );
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &answer).unwrap()).unwrap();
        assert_eq!(j["console"]["status"], "requested", "{j}");
        assert_eq!(j["password"], "h7Rk2pQz", "{j}");
    }

    #[test]
    fn members_memberships_and_invitations_show_roles_and_status() {
        let m: Member = serde_json::from_value(serde_json::json!({
            "subject": "auth0|ann", "email": "ann@example.com", "role": "manager",
            "added_by": "olga", "created": "2026-01-01T00:00:00Z",
            "updated": "2026-01-02T00:00:00Z"
        }))
        .unwrap();
        let mut bob = m.clone();
        bob.subject = "auth0|bob".into();
        bob.email = None;
        bob.role = "viewer".into();
        let list = render(Format::Table, &vec![m.clone(), bob]).unwrap();
        assert_eq!(
            list,
            "SUBJECT    EMAIL            ROLE     ADDED BY  CREATED\n\
             auth0|ann  ann@example.com  manager  olga      2026-01-01T00:00:00Z\n\
             auth0|bob  -                viewer   olga      2026-01-01T00:00:00Z\n"
        );
        let one = render(Format::Table, &m).unwrap();
        assert!(one.starts_with("Subject:   auth0|ann\n"), "{one}");
        assert!(one.contains("Updated:   2026-01-02T00:00:00Z\n"), "{one}");

        let orgs: MembershipList = serde_json::from_value(serde_json::json!({
            "subject": "auth0|ann",
            "memberships": [
                {"organization": "ann-co", "role": "owner", "via": "token"},
                {"organization": "acme", "role": "manager", "via": "member"}
            ]
        }))
        .unwrap();
        assert_eq!(
            render(Format::Table, &orgs).unwrap(),
            "ORGANIZATION  ROLE     VIA\n\
             ann-co        owner    token\n\
             acme          manager  member\n"
        );
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &orgs).unwrap()).unwrap();
        assert_eq!(j["subject"], "auth0|ann", "{j}");

        let i: Invitation = serde_json::from_value(serde_json::json!({
            "id": "0192f5c4-0000-7000-8000-0000000000e1", "organization": "acme",
            "email": "bob@example.com", "role": "editor", "status": "pending",
            "invited_by": "olga", "created": "2026-01-01T00:00:00Z",
            "expires": "2026-01-08T00:00:00Z", "accepted": null, "accepted_by": null,
            "revoked": null, "revoked_by": null
        }))
        .unwrap();
        assert_eq!(
            render(Format::Table, &vec![i.clone()]).unwrap(),
            "ID        EMAIL            ROLE    STATUS   INVITED BY  CREATED               \
             EXPIRES\n\
             000000e1  bob@example.com  editor  pending  olga        2026-01-01T00:00:00Z  \
             2026-01-08T00:00:00Z\n"
        );
        let one = render(Format::Table, &i).unwrap();
        assert!(one.contains("Status:        pending\n"), "{one}");
        assert!(one.contains("Accepted by:   -\n"), "{one}");
        let made = InvitationCreateResponse {
            invitation: i.clone(),
            token: format!("mesoninv_{}", "a".repeat(40)),
            warnings: vec![],
        };
        let one = render(Format::Table, &made).unwrap();
        assert!(
            one.starts_with(&format!("Token:         {}\n", made.token)),
            "{one}"
        );
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &made).unwrap()).unwrap();
        assert_eq!(j["token"], made.token.as_str(), "{j}");
        assert_eq!(j["invitation"]["status"], "pending", "{j}");
        let accepted = InvitationAcceptResponse {
            invitation: i,
            member: m,
        };
        let one = render(Format::Table, &accepted).unwrap();
        assert!(one.starts_with("Organization:  acme\n"), "{one}");
        assert!(one.contains("Role:          manager\n"), "{one}");
    }

    #[test]
    fn organizations_show_their_quotas_and_a_root_none() {
        let root: Organization = serde_json::from_value(serde_json::json!({
            "id": "acme", "name": "acme", "parent": null, "quotas": null, "depth": 0,
            "created_by": "olga", "created": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        let sub: Organization = serde_json::from_value(serde_json::json!({
            "id": "acme.platform", "name": "platform", "parent": "acme",
            "quotas": {"vms": 3, "vcpus": 8, "ram_mib": 16384, "storage_gb": 500,
                "clusters": 0, "nodes": 0, "images_gb": 50},
            "depth": 1, "created_by": "olga", "created": "2026-01-02T00:00:00Z"
        }))
        .unwrap();
        assert_eq!(
            render(Format::Table, &vec![root.clone(), sub.clone()]).unwrap(),
            "ID             PARENT  VMS  VCPUS  RAM_MIB  STORAGE_GB  CLUSTERS  NODES  \
             IMAGES_GB  CREATED\n\
             acme           -       -    -      -        -           -         -      \
             -          2026-01-01T00:00:00Z\n\
             acme.platform  acme    3    8      16384    500         0         0      \
             50         2026-01-02T00:00:00Z\n"
        );
        let one = render(Format::Table, &sub).unwrap();
        assert!(one.starts_with("ID:          acme.platform\n"), "{one}");
        assert!(one.contains("Parent:      acme\n"), "{one}");
        assert!(
            one.ends_with(
                "LIMIT       QUOTA\nvms         3\nvcpus       8\nram_mib     16384\n\
                 storage_gb  500\nclusters    0\nnodes       0\nimages_gb   50\n"
            ),
            "{one}"
        );
        let one = render(Format::Table, &root).unwrap();
        assert!(one.contains("Parent:      -\n"), "{one}");
        assert!(
            one.ends_with("Quotas:      its own (mesonctl quota get)\n"),
            "{one}"
        );
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &sub).unwrap()).unwrap();
        assert_eq!(j["quotas"]["vms"], 3, "{j}");
        assert_eq!(j["parent"], "acme", "{j}");
    }

    #[test]
    fn tokens_show_their_role_prefix_and_whether_revoked() {
        let t: ApiToken = serde_json::from_value(serde_json::json!({
            "id": "0192f5c4-0000-7000-8000-0000000000a7", "name": "ci-deploys",
            "role": "editor", "prefix": "meson_Xq3hT2", "created_by": "olga",
            "created": "2026-01-01T00:00:00Z", "expires": null, "last_used": null,
            "revoked": null, "revoked_by": null
        }))
        .unwrap();
        let mut revoked = t.clone();
        revoked.name = "old".into();
        revoked.expires = Some(t.created);
        revoked.last_used = Some(t.created);
        revoked.revoked = Some(t.created);
        revoked.revoked_by = Some("olga".into());
        let list = render(Format::Table, &vec![t.clone(), revoked.clone()]).unwrap();
        assert_eq!(
            list,
            "ID        NAME        ROLE    PREFIX        CREATED               EXPIRES               \
             LAST USED             REVOKED\n\
             000000a7  ci-deploys  editor  meson_Xq3hT2  2026-01-01T00:00:00Z  never                 \
             never                 -\n\
             000000a7  old         editor  meson_Xq3hT2  2026-01-01T00:00:00Z  2026-01-01T00:00:00Z  \
             2026-01-01T00:00:00Z  2026-01-01T00:00:00Z\n"
        );
        let one = render(Format::Table, &revoked).unwrap();
        assert!(one.contains("Revoked by:  olga\n"), "{one}");
        let one = render(Format::Table, &t).unwrap();
        assert!(one.contains("Expires:     never\n"), "{one}");
        assert!(one.contains("Revoked:     -\n"), "{one}");
        let created = TokenCreateResponse {
            token: t,
            secret: format!("meson_Xq3hT2{}", "a".repeat(34)),
            warnings: vec![],
        };
        let one = render(Format::Table, &created).unwrap();
        assert!(
            one.starts_with(&format!("Secret:   {}\n", created.secret)),
            "{one}"
        );
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &created).unwrap()).unwrap();
        assert_eq!(j["secret"], created.secret.as_str(), "{j}");
        assert_eq!(j["token"]["role"], "editor", "{j}");
    }

    fn usage_line(tenant: &str, meter: &str, group: Option<&str>) -> serde_json::Value {
        let unit = if meter == "vm" { "hour" } else { "GB-hour" };
        serde_json::json!({
            "tenant": tenant, "meter": meter, "unit": unit, "group": group,
            "quantity": "0.500000", "cost": "0.012000", "currency": "EUR"
        })
    }

    #[test]
    fn usage_shows_a_line_per_group_and_meter_then_the_totals() {
        let mut vm = usage_line("acme", "vm", Some("0192f5c4-0000-7000-8000-0000000000a7"));
        vm["name"] = "web".into();
        let mut volume = usage_line(
            "acme",
            "volume",
            Some("0192f5c4-0000-7000-8000-0000000000b8"),
        );
        volume["name"] = "data".into();
        volume["quantity"] = "10.000000".into();
        let u: Usage = serde_json::from_value(serde_json::json!({
            "from": "2026-11-01T00:00:00Z", "to": "2026-11-29T15:00:00Z",
            "group_by": "resource", "lines": [vm, volume],
            "totals": [{"currency": "EUR", "amount": "0.02"}]
        }))
        .unwrap();
        assert_eq!(
            render(Format::Table, &u).unwrap(),
            "RESOURCE  NAME  METER   QUANTITY           COST\n\
             000000a7  web   vm      0.500000 hour      0.012000 EUR\n\
             000000b8  data  volume  10.000000 GB-hour  0.012000 EUR\n\
             \n\
             Period:      2026-11-01T00:00:00Z to 2026-11-29T15:00:00Z\n\
             Grouped by:  resource\n\
             Total:       0.02 EUR\n"
        );
        let wide = render(Format::Wide, &u).unwrap();
        assert!(
            wide.contains("0192f5c4-0000-7000-8000-0000000000a7  web"),
            "{wide}"
        );
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &u).unwrap()).unwrap();
        assert_eq!(j["lines"][0]["name"], "web", "{j}");
        assert_eq!(j["totals"][0]["amount"], "0.02", "{j}");

        // By label: those without it are `(none)`; several tenants' lines
        // say whose; nothing used, nothing owed.
        let u: Usage = serde_json::from_value(serde_json::json!({
            "from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z",
            "group_by": "label:team",
            "lines": [usage_line("acme", "vm", Some("core")), usage_line("zeta", "vm", None)],
            "totals": [{"currency": "EUR", "amount": "0.02"},
                       {"currency": "USD", "amount": "1.00"}]
        }))
        .unwrap();
        let t = render(Format::Table, &u).unwrap();
        assert!(t.starts_with("TENANT  LABEL   METER  QUANTITY"), "{t}");
        assert!(t.contains("\nzeta    (none)  vm "), "{t}");
        assert!(t.contains("Grouped by:  label:team\n"), "{t}");
        assert!(t.contains("Total:       0.02 EUR, 1.00 USD\n"), "{t}");
        let u: Usage = serde_json::from_value(serde_json::json!({
            "from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z",
            "group_by": "day", "lines": [], "totals": []
        }))
        .unwrap();
        let t = render(Format::Table, &u).unwrap();
        assert!(t.starts_with("DAY  METER  QUANTITY  COST\n\n"), "{t}");
        assert!(t.contains("Total:       0.00 (nothing used)\n"), "{t}");
    }

    #[test]
    fn statements_and_prices_show_their_months_totals_and_units() {
        let list: Vec<Statement> = serde_json::from_value(serde_json::json!([
            {"id": "current", "tenant": "acme", "status": "open",
             "period_start": "2026-11-01T00:00:00Z", "period_end": "2026-12-01T00:00:00Z",
             "currency": "EUR", "total": "1.23", "closed": null},
            {"id": "0192f5c4-0000-7000-8000-0000000000c9", "tenant": "acme",
             "status": "closed", "period_start": "2026-10-01T00:00:00Z",
             "period_end": "2026-11-01T00:00:00Z", "currency": "EUR", "total": "40.00",
             "closed": "2026-11-01T01:00:00Z"}
        ]))
        .unwrap();
        assert_eq!(
            render(Format::Table, &list).unwrap(),
            "ID        TENANT  MONTH    STATUS  TOTAL      CLOSED\n\
             current   acme    2026-11  open    1.23 EUR   -\n\
             000000c9  acme    2026-10  closed  40.00 EUR  2026-11-01T01:00:00Z\n"
        );
        let mut one = list[0].clone();
        one.lines = Some(
            serde_json::from_value(serde_json::json!([{
                "meter": "vm", "resource_id": "0192f5c4-0000-7000-8000-0000000000a7",
                "resource_name": "web", "cluster_id": null, "unit": "hour",
                "quantity": "2.000000", "cost": "0.060000"
            }]))
            .unwrap(),
        );
        let t = render(Format::Table, &one).unwrap();
        assert!(t.starts_with("ID:      current\n"), "{t}");
        assert!(t.contains("Total:   1.23 EUR\n"), "{t}");
        assert!(
            t.ends_with(
                "\nMETER  RESOURCE  NAME  QUANTITY       COST\n\
                 vm     000000a7  web   2.000000 hour  0.060000 EUR\n"
            ),
            "{t}"
        );

        let prices: Vec<PriceEntry> = serde_json::from_value(serde_json::json!([
            {"meter": "volume", "provider": "*", "unit": "GB-hour", "unit_price": "0.00006",
             "currency": "EUR", "effective_from": "1970-01-01T00:00:00Z",
             "until": "2027-01-01T00:00:00Z"},
            {"meter": "volume", "provider": "*", "unit": "GB-hour", "unit_price": "0.00007",
             "currency": "EUR", "effective_from": "2027-01-01T00:00:00Z", "until": null}
        ]))
        .unwrap();
        assert_eq!(
            render(Format::Table, &prices).unwrap(),
            "METER   PROVIDER  UNIT PRICE   UNIT     FROM                  UNTIL\n\
             volume  *         0.00006 EUR  GB-hour  1970-01-01T00:00:00Z  2027-01-01T00:00:00Z\n\
             volume  *         0.00007 EUR  GB-hour  2027-01-01T00:00:00Z  -\n"
        );
        let t = render(Format::Table, &prices[1]).unwrap();
        assert!(t.contains("Unit price:  0.00007 EUR per GB-hour\n"), "{t}");
        assert!(t.contains("Until:       until further notice\n"), "{t}");
    }

    fn action() -> Action {
        serde_json::from_value(serde_json::json!({
            "id": "0192f5c4-0000-7000-8000-000000000001", "command": "create_vm",
            "status": "error", "progress": 40, "started": "2025-01-01T00:00:00Z",
            "finished": "2025-01-01T00:00:05Z",
            "resources": [{"id": "0192f5c4-0000-7000-8000-000000000002", "type": "vm"}],
            "error": {"code": "invalid_input", "message": "no such image"}
        }))
        .unwrap()
    }

    #[test]
    fn quotas_show_the_plan_and_plans_their_limits() {
        let mut q: Quota = serde_json::from_value(serde_json::json!({
            "tenant": "acme", "plan": "small",
            "limits": [
                {"name": "vms", "quota": 1, "current": 0, "default": false},
                {"name": "vcpus", "quota": 400, "current": 2, "default": true}
            ]
        }))
        .unwrap();
        assert_eq!(
            render(Format::Table, &q).unwrap(),
            "LIMIT  QUOTA  USED\n\
             vms    1      0\n\
             vcpus  400    2\n\
             \n\
             Tenant:  acme\n\
             Plan:    small\n"
        );
        q.plan = None;
        let t = render(Format::Table, &q).unwrap();
        assert!(t.ends_with("Plan:    default\n"), "{t}");
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &q).unwrap()).unwrap();
        assert!(j["plan"].is_null(), "{j}");

        let quotas = |vms: i64, default: bool| {
            serde_json::json!([
                {"name": "vms", "quota": vms, "default": default},
                {"name": "vcpus", "quota": 400, "default": true},
                {"name": "ram_mib", "quota": 819200, "default": true},
                {"name": "storage_gb", "quota": 10000, "default": true},
                {"name": "clusters", "quota": 10, "default": true},
                {"name": "nodes", "quota": 100, "default": true},
                {"name": "images_gb", "quota": 1000, "default": true}
            ])
        };
        let plans: Vec<Plan> = serde_json::from_value(serde_json::json!([
            {"name": "default", "description": "The deployment's defaults",
             "quotas": quotas(100, true)},
            {"name": "small", "description": "", "quotas": quotas(1, false)}
        ]))
        .unwrap();
        assert_eq!(
            render(Format::Table, &plans).unwrap(),
            "NAME     VMS  VCPUS  RAM_MIB  STORAGE_GB  CLUSTERS  NODES  IMAGES_GB  DESCRIPTION\n\
             default  100  400    819200   10000       10        100    1000       The deployment's defaults\n\
             small    1    400    819200   10000       10        100    1000       -\n"
        );
        let t = render(Format::Table, &plans[1]).unwrap();
        assert!(
            t.starts_with("Name:         small\nDescription:  -\n\nLIMIT       QUOTA   DEFAULT\n"),
            "{t}"
        );
        assert!(t.contains("\nvms         1       no\n"), "{t}");
        assert!(t.contains("\nvcpus       400     yes\n"), "{t}");
    }

    #[test]
    fn every_format_renders() {
        let a = action();
        let t = render(Format::Table, &a).unwrap();
        assert!(t.contains("Status:     error"), "{t}");
        assert!(t.contains("no such image (invalid_input)"), "{t}");
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &a).unwrap()).unwrap();
        assert_eq!(j["command"], "create_vm");
        let y: serde_json::Value =
            serde_yaml_ng::from_str(&render(Format::Yaml, &vec![a.clone()]).unwrap()).unwrap();
        assert_eq!(y[0]["progress"], 40);
        let list = render(Format::Table, &vec![a]).unwrap();
        assert!(list.starts_with("ID "), "{list}");
        assert!(list.contains("create_vm"), "{list}");
    }
}
