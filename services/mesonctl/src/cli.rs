//! The command line (clap derive).

use crate::output::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// The command line of meson: VMs, Kubernetes clusters and their actions.
///
/// meson's URL and token come from --url/--token, else MESON_URL/MESON_TOKEN,
/// else $XDG_CONFIG_HOME/meson/config.toml or ~/.config/meson/config.toml
/// (url = "...", token = "..."), else the running mesond dev's: the URL in
/// .meson/dev.json (whatever port it got; else http://127.0.0.1:8080) and the
/// token in .meson/dev-token. Its data dir is $MESON_DATA_DIR, else the
/// nearest .meson in the working directory or a parent. Commands act in the
/// token's organisation, or in the one --organization (MESON_ORGANIZATION)
/// names.
///
/// Exit codes: 0 success; 1 meson refused the request; 2 usage error; 3 an
/// action ended in error; 4 cancelled while waiting (Ctrl-C); 5 meson cannot
/// be reached or the configuration is bad.
#[derive(Debug, Parser)]
#[command(name = "mesonctl", version)]
pub struct Cli {
    /// meson's REST URL (env MESON_URL).
    #[arg(long, global = true, value_name = "URL")]
    pub url: Option<String>,
    /// Bearer token (env MESON_TOKEN).
    #[arg(long, global = true, value_name = "TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Config file to read instead of ~/.config/meson/config.toml.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Act in this organisation instead of the token's: one you are a
    /// member of (`mesonctl membership list`), at your role there; sent as
    /// the Meson-Organization header (env MESON_ORGANIZATION; an empty one
    /// here: the token's own, whatever the environment says).
    #[arg(long, global = true, value_name = "ORG")]
    pub organization: Option<String>,
    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Virtual machines.
    #[command(subcommand)]
    Vm(VmCommand),
    /// Kubernetes clusters.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// A cluster's node pools.
    #[command(subcommand)]
    Pool(PoolCommand),
    /// A cluster's nodes.
    #[command(subcommand)]
    Node(NodeCommand),
    /// Volumes: standalone ones, and the VMs' own.
    #[command(subcommand)]
    Volume(VolumeCommand),
    /// Images: boot disks made from a VM or imported from a URL.
    #[command(subcommand)]
    Image(ImageCommand),
    /// SSH keys kept at meson, named at a VM's create.
    #[command(subcommand)]
    SshKey(SshKeyCommand),
    /// Private networks.
    #[command(subcommand)]
    Network(NetworkCommand),
    /// A network's port forwards: a public port of a VM's AtomOS host
    /// relayed to a port of the VM.
    #[command(subcommand)]
    PortForward(PortForwardCommand),
    /// Backups: copies of a VM's volumes, taken now (`vm backup`) or daily
    /// by its policy (`vm enable-backups`), restored with `vm restore`.
    #[command(subcommand)]
    Backup(BackupCommand),
    /// Consoles: sessions on a VM's screen over VNC, relayed by meson
    /// (opened with `vm console`).
    #[command(subcommand)]
    Console(ConsoleCommand),
    /// API tokens: bearer secrets meson issues for the tenant's automation
    /// (`mesonctl --token meson_...`, `MESON_TOKEN`), each with a role;
    /// owners manage them.
    #[command(subcommand)]
    Token(TokenCommand),
    /// The organisation's members: identity providers' subjects with a
    /// role (viewer, editor, manager, owner); managers and owners manage
    /// them.
    #[command(subcommand)]
    Member(MemberCommand),
    /// The organisations you may act in (with --organization), and your
    /// role in each.
    #[command(subcommand)]
    Membership(MembershipCommand),
    /// Invitations to join the organisation, by email; the invitee accepts
    /// with `invitation accept`.
    #[command(subcommand)]
    Invitation(InvitationCommand),
    /// The organisation and its sub-organisations (`<parent>.<name>`),
    /// whose quotas are carved out of their parent's; owners create,
    /// change and end them, and act in them with --organization, as do
    /// managers.
    #[command(subcommand)]
    Organization(OrganizationCommand),
    /// Kubernetes versions meson installs.
    #[command(subcommand)]
    Kubernetes(KubernetesCommand),
    /// The tenant's quotas and what it uses of them.
    #[command(subcommand)]
    Quota(QuotaCommand),
    /// Plans: named sets of quotas operators put tenants on (`default`:
    /// the deployment's defaults); anyone reads them.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// What the tenant used and what it cost: this month so far unless
    /// told otherwise, a line per resource (or day, tenant or label value)
    /// and meter, with the totals per currency.
    Usage(UsageArgs),
    /// Monthly statements: the running month (`current`) and the closed
    /// months.
    #[command(subcommand)]
    Statement(StatementCommand),
    /// The price list of volumes, images, backups and clusters (a VM costs
    /// its host's quote); operators add prices.
    #[command(subcommand)]
    Price(PriceCommand),
    /// Operators: another tenant's quotas (the admin role).
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Operators: the AtomOS targets meson places on (the admin role).
    #[command(subcommand)]
    Target(TargetCommand),
    /// Operators: VMs hosts hold that meson has no record of (after a
    /// database restore, or made outside meson): adopt or delete them.
    #[command(subcommand)]
    Orphan(OrphanCommand),
    /// The audit log: the tenant's (an owner), anyone's (an operator).
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Whether meson is up and ready, and its version.
    Status,
    /// meson's Prometheus metrics, as text.
    Metrics,
    /// A cluster's admin kubeconfig.
    #[command(subcommand)]
    Kubeconfig(KubeconfigCommand),
    /// Actions: the progress of asynchronous work.
    #[command(subcommand)]
    Action(ActionCommand),
    /// VM flavours.
    #[command(subcommand)]
    Flavor(ListCommand),
    /// Providers and their regions.
    #[command(subcommand)]
    Provider(ListCommand),
    /// Prices a VM or KaaS payload on every placement that fits it.
    Quote {
        /// The payload (JSON), `-` for stdin.
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: PathBuf,
    },
    /// kOps command lines.
    #[command(subcommand)]
    Kops(KopsCommand),
    /// Prints a completion script for a shell: `source <(mesonctl
    /// completion bash)`, or write it where the shell looks
    /// (`mesonctl completion zsh > "${fpath[1]}/_mesonctl"`,
    /// `mesonctl completion fish > ~/.config/fish/completions/mesonctl.fish`).
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Elemento's client daemons over meson, for Electros and elemento-cli.
    #[command(subcommand)]
    Elemento(ElementoCommand),
}

#[derive(Debug, Subcommand)]
pub enum ElementoCommand {
    /// Serves the auth, compute, storage, network, target and service
    /// daemons on their usual ports (and all of them on --port), calling
    /// meson as this command's URL. On loopback the daemons start logged
    /// in with this command's token (`auth login` switches); beyond
    /// loopback every request needs /login's cookie or a bearer token.
    Serve(ElementoServeArgs),
}

#[derive(Debug, Args, Clone)]
pub struct ElementoServeArgs {
    /// Address to listen on; beyond loopback TLS (or --insecure-http) is required.
    #[arg(long, env = "MESON_ELEMENTO_BIND", default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// The auth daemon's port (0: any free port).
    #[arg(long, env = "MESON_ELEMENTO_AUTH_PORT", default_value_t = 47777)]
    pub auth_port: u16,
    /// The compute daemon's port.
    #[arg(long, env = "MESON_ELEMENTO_COMPUTE_PORT", default_value_t = 17777)]
    pub compute_port: u16,
    /// The storage daemon's port.
    #[arg(long, env = "MESON_ELEMENTO_STORAGE_PORT", default_value_t = 27777)]
    pub storage_port: u16,
    /// The network daemon's port.
    #[arg(long, env = "MESON_ELEMENTO_NETWORK_PORT", default_value_t = 37777)]
    pub network_port: u16,
    /// The target daemon's port.
    #[arg(long, env = "MESON_ELEMENTO_TARGET_PORT", default_value_t = 57777)]
    pub target_port: u16,
    /// The service daemon's port.
    #[arg(long, env = "MESON_ELEMENTO_SERVICE_PORT", default_value_t = 6777)]
    pub service_port: u16,
    /// Every daemon by path on one port (Electros' web build).
    #[arg(long, env = "MESON_ELEMENTO_PORT", default_value_t = 7780)]
    pub port: u16,
    /// Serve only the single-origin port, not each daemon's own.
    #[arg(long)]
    pub single_origin_only: bool,
    /// TLS certificate chain (PEM).
    #[arg(long, requires = "tls_key", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP beyond loopback.
    #[arg(long)]
    pub insecure_http: bool,
    /// A name the daemons answer to (Host) besides localhost and the
    /// loopback addresses; repeat it, or separate names with commas.
    /// Beyond loopback, IP addresses are accepted too.
    #[arg(
        long = "allowed-host",
        env = "MESON_ELEMENTO_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub allowed_hosts: Vec<String>,
    /// A browser origin (scheme://host[:port]) whose pages may call the
    /// daemons, instead of Electros' own; repeat it, or separate origins
    /// with commas; `none`: only the daemons' own pages.
    #[arg(
        long = "allowed-origin",
        env = "MESON_ELEMENTO_ALLOWED_ORIGINS",
        value_delimiter = ',',
        value_name = "ORIGIN"
    )]
    pub allowed_origins: Vec<String>,
}

/// What a list keeps, and in which order.
#[derive(Debug, Args, Clone, Default)]
pub struct ListArgs {
    /// Only those with this name.
    #[arg(long)]
    pub name: Option<String>,
    /// Only those in this status; repeat it for any of several.
    #[arg(long)]
    pub status: Vec<String>,
    /// Only those whose labels match (Kubernetes' grammar: env=prod,tier!=db).
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Order by id, name, status or created, `:asc` or `:desc`; repeat it
    /// for a second key.
    #[arg(long, value_name = "FIELD[:asc|:desc]")]
    pub sort: Vec<String>,
}

impl ListArgs {
    pub fn filter(self) -> meson_client::ListFilter {
        meson_client::ListFilter {
            name: self.name,
            status: self.status,
            label_selector: self.selector,
            sort: self.sort,
        }
    }
}

/// Whether a mutation waits for the actions it starts.
#[derive(Debug, Args, Clone, Copy)]
pub struct WaitArgs {
    /// Wait until the actions finish, showing their progress (the default).
    #[arg(long, overrides_with = "no_wait")]
    pub wait: bool,
    /// Return at once, printing the action(s) started.
    #[arg(long, overrides_with = "wait")]
    pub no_wait: bool,
}

impl WaitArgs {
    pub fn waits(&self) -> bool {
        !self.no_wait
    }
}

#[derive(Debug, Subcommand)]
pub enum VmCommand {
    /// Creates a VM from a VM request payload (docs/payloads.md).
    Create {
        /// The VM request (JSON), `-` for stdin.
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: PathBuf,
        /// Boots from a copy of this image (id or name), in place of the
        /// payload's OS image; the VM runs on the image's host.
        #[arg(long)]
        image: Option<String>,
        /// Installs a key kept at meson (`ssh-key create`), by id or name,
        /// beside the payload's; repeat it for more.
        #[arg(long = "ssh-key", value_name = "ID|NAME")]
        ssh_keys: Vec<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Lists the VMs.
    List(ListArgs),
    /// Shows a VM (by id or name).
    Get { vm: String },
    /// Renames and/or relabels a VM.
    Update {
        vm: String,
        /// Its new name.
        #[arg(long)]
        name: Option<String>,
        /// Its labels, all of them (`key=value`, repeated).
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
    },
    /// Deletes a VM and its volumes.
    Delete {
        vm: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Changes a VM's cores and/or memory. AtomOS resizes a VM that is
    /// off: `--stop` stops a running one, resizes it and starts it again.
    Resize {
        vm: String,
        #[arg(long)]
        cores: Option<u32>,
        #[arg(long)]
        memory_mib: Option<u64>,
        /// Stop a running VM for the change, and start it again after.
        #[arg(long)]
        stop: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Rebuilds a VM: a new boot disk from an image or a distribution (the
    /// old one's data is lost); its address, keys and data volumes stay.
    Rebuild {
        vm: String,
        /// The image (id or name) to copy.
        #[arg(long, conflicts_with = "os", required_unless_present = "os")]
        image: Option<String>,
        /// The distribution (`Debian`, `Ubuntu 22.04`, ...).
        #[arg(long)]
        os: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Moves a VM to another host of its provider (cold: a running VM is
    /// stopped, moved with its volumes, and started again).
    Migrate {
        vm: String,
        /// The host; default: the cheapest other one with room.
        #[arg(long)]
        host: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Attaches a VM to a private network (a new NIC; running or off).
    AttachNetwork {
        vm: String,
        /// The network (id, abbreviation or name).
        network: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Detaches a VM from one of its private networks.
    DetachNetwork {
        vm: String,
        /// The network (id, abbreviation or name).
        network: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Powers a VM on.
    Poweron {
        vm: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Powers a VM off.
    Poweroff {
        vm: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Reboots a VM.
    Reboot {
        vm: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Takes a backup of a VM now: a crash-consistent copy of its volumes,
    /// kept on its host until deleted (it outlives the VM).
    Backup {
        vm: String,
        /// Its name (default: the VM's name and the time).
        #[arg(long)]
        name: Option<String>,
        /// A label, `key=value`; repeat it for more.
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Lists a VM's backups, manual and automatic (a deleted VM's by its
    /// whole id).
    Backups {
        vm: String,
        #[command(flatten)]
        list: ListArgs,
    },
    /// Restores a backup: into the VM itself (stopped, its volumes
    /// overwritten, started again if it was running) or into a new VM on
    /// the backup's host.
    Restore {
        vm: String,
        /// The backup: its id, 8 or more of its first or last hex digits, or
        /// its name.
        #[arg(long)]
        backup: String,
        /// `same` (the default): this VM; `new`: a new VM like it.
        #[arg(long, value_parser = ["same", "new"])]
        into: Option<String>,
        /// `--into new` only: the new VM's name (default: the VM's name with
        /// `-restored` and a short suffix).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Turns a VM's automatic backups on, or changes their policy: one a
    /// day, taken in the window, the newest `--keep` kept.
    EnableBackups {
        vm: String,
        /// UTC hours `HH-HH` the backup starts within, e.g. `22-02` (default:
        /// a four-hour window meson picks).
        #[arg(long, value_name = "HH-HH")]
        window: Option<String>,
        /// How many automatic backups are kept, 1 to 31 (default 7).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=31))]
        keep: Option<u32>,
    },
    /// Turns a VM's automatic backups off (those taken expire; manual ones
    /// stay).
    DisableBackups { vm: String },
    /// Opens a console on a running VM's screen, for a VNC viewer on this
    /// machine: meson relays the session.
    ///
    /// Listens on --listen, then prints one line: where a VNC viewer
    /// connects and the VNC password it answers, e.g.
    /// `VNC viewer: 127.0.0.1:40123  password: h7Rk2pQz  (connect within 60
    /// s; one connection)` (with -o json, that as one line of JSON:
    /// `address`, `password`, `console`). Any VNC viewer works:
    /// `vncviewer 127.0.0.1::40123`, or `vncdo -s 127.0.0.1::40123 -p
    /// PASSWORD capture shot.png` (a double colon before a port). The
    /// console serves one connection, which must begin within 60 s; its
    /// bytes are relayed to the console's WebSocket on meson, and the
    /// command ends (exit 0) when the session does. A console that meson
    /// refuses (used, expired, deleted, its VM stopped) exits 1 with
    /// meson's message.
    ///
    /// --url-only prints the console's WebSocket URL (RFB in binary
    /// messages, for noVNC or a bridge of one's own) and password instead,
    /// and returns.
    Console {
        vm: String,
        /// The local address the VNC viewer connects to (port 0: any free
        /// port). Beyond loopback, anyone who reaches it and has the
        /// password sees the screen.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        listen: String,
        /// Print the console's WebSocket URL and password (-o json: the
        /// whole answer) and return, relaying nothing.
        #[arg(long, conflicts_with = "listen")]
        url_only: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Creates a cluster from a KaaS payload (docs/payloads.md).
    Create {
        /// The KaaS request (JSON), `-` for stdin.
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: PathBuf,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Lists the clusters.
    List(ListArgs),
    /// Shows a cluster (by id or name).
    Get { cluster: String },
    /// Rotates a cluster's credentials: kubeconfigs issued before stop
    /// working.
    RotateCredentials {
        cluster: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Issues a client certificate for the cluster's autoscaler (externalgrpc):
    /// its key is shown once.
    AutoscalerCredentials { cluster: String },
    /// Relabels a cluster and/or changes its update policy.
    Update {
        cluster: String,
        /// Its labels, all of them (`key=value`, repeated).
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
        /// NEVER_UPDATE (MANUAL), PATCH_UPDATE or ALWAYS_UPDATE.
        #[arg(long)]
        update_policy: Option<String>,
    },
    /// Deletes a cluster and its nodes.
    Delete {
        cluster: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Upgrades a cluster, rolling, to a later Kubernetes version.
    Upgrade {
        cluster: String,
        /// A later patch of the cluster's minor, or a patch of the next minor.
        #[arg(long)]
        version: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Lists a cluster's pools.
    List {
        /// The cluster (id or name).
        cluster: String,
    },
    /// Shows a pool.
    Get {
        /// The cluster (id or name).
        cluster: String,
        /// The pool (id or name).
        pool: String,
    },
    /// Adds a pool to a running cluster, waiting for its nodes.
    Create {
        /// The cluster (id or name).
        cluster: String,
        /// Its name, unique in the cluster.
        #[arg(long)]
        name: String,
        /// Its nodes (default: its minimum, else 1).
        #[arg(long)]
        nodes: Option<u32>,
        /// Its lower bound.
        #[arg(long)]
        min: Option<u32>,
        /// Its upper bound.
        #[arg(long)]
        max: Option<u32>,
        /// Let the cluster-autoscaler move its size between the bounds.
        #[arg(long)]
        autoscale: bool,
        /// vCPUs per node.
        #[arg(long)]
        cpu: Option<u32>,
        /// MiB of memory per node.
        #[arg(long)]
        ram: Option<u64>,
        /// GB of disk per node.
        #[arg(long)]
        storage: Option<u32>,
        /// GPUs per node.
        #[arg(long)]
        gpu: Option<u32>,
        /// A Kubernetes label for its nodes, `key=value`; repeat it for more.
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Removes these nodes from a pool, which shrinks by as many.
    DeleteNodes {
        /// The cluster (id or name).
        cluster: String,
        /// The pool (id or name).
        pool: String,
        /// The nodes (ids or names).
        #[arg(required = true)]
        nodes: Vec<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Removes a pool and its nodes.
    Delete {
        /// The cluster (id or name).
        cluster: String,
        /// The pool (id or name).
        pool: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Sets a pool's node count.
    Scale {
        /// The cluster (id or name).
        cluster: String,
        /// The pool (id or name).
        pool: String,
        /// The nodes the pool should have.
        #[arg(long)]
        nodes: u32,
        /// Also sets the pool's lower bound (`min_nodes`).
        #[arg(long)]
        min: Option<u32>,
        /// Also sets the pool's upper bound (`max_nodes`).
        #[arg(long)]
        max: Option<u32>,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Lists a cluster's nodes.
    List {
        /// The cluster (id or name).
        cluster: String,
    },
    /// Reboots a node.
    Reboot {
        /// The cluster (id or name).
        cluster: String,
        /// The node (id or name).
        node: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Replaces a node with a new one.
    Replace {
        /// The cluster (id or name).
        cluster: String,
        /// The node (id or name).
        node: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum KubeconfigCommand {
    /// Writes a fresh admin kubeconfig (YAML) to stdout.
    Get {
        /// The cluster (id or name).
        cluster: String,
        /// How long its client certificate lasts.
        #[arg(long)]
        expiry_seconds: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ActionCommand {
    /// Lists a resource's actions, newest first.
    List {
        /// vm, cluster, volume, image, network or backup (or their plurals).
        kind: String,
        /// The resource: its id, 8 or more of the id's first or last hex
        /// digits, or its name.
        id: String,
    },
    /// Shows an action, or several (at most 25) as a list.
    Get {
        /// Action ids, or 8 or more of their first or last hex digits.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Waits for actions to finish, showing their progress.
    Watch {
        /// Action ids, or 8 or more of their first or last hex digits.
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ListCommand {
    /// Lists them.
    List,
}

#[derive(Debug, Subcommand)]
pub enum VolumeCommand {
    /// Makes a standalone volume on a host with room for it (attach it to a
    /// VM at its create: `"volumes": ["<id>"]` beside `provider`).
    Create {
        /// Its name, unique among the tenant's standalone volumes.
        #[arg(long)]
        name: String,
        /// Its size, in GB.
        #[arg(long)]
        size: u32,
        /// A label, `key=value`; repeat it for more.
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
        /// Place it with this provider.
        #[arg(long)]
        provider: Option<String>,
        /// Place it in this region.
        #[arg(long)]
        region: Option<String>,
        /// Place it on this continent.
        #[arg(long)]
        continent: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Lists the tenant's volumes.
    List {
        /// Only standalone volumes (`true`) or only VMs' own (`false`).
        #[arg(long)]
        standalone: Option<bool>,
        /// Only those of (or attached to) this VM, by id or name.
        #[arg(long)]
        vm: Option<String>,
    },
    /// Shows a volume (by id or name).
    Get { volume: String },
    /// Renames and/or relabels a standalone volume.
    Update {
        volume: String,
        /// Its new name.
        #[arg(long)]
        name: Option<String>,
        /// Its labels, all of them (`key=value`, repeated).
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
    },
    /// Deletes a standalone volume (refused while attached).
    Delete {
        volume: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Attaches a standalone volume to a VM of its host, running or off.
    Attach {
        volume: String,
        /// The VM, by id or name.
        #[arg(long)]
        vm: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Detaches a standalone volume from its VM.
    Detach {
        volume: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Grows a volume, attached or not, or a VM's data volume (volumes
    /// only grow).
    Resize {
        volume: String,
        /// Its new size, in GB.
        #[arg(long)]
        size: u32,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Moves a free standalone volume to another host of its provider.
    Move {
        volume: String,
        /// The host (an AtomOS host's name).
        #[arg(long)]
        host: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Imports an image from an http(s) URL: the host it is placed on
    /// downloads it.
    Import {
        /// Its name, unique among the tenant's images.
        #[arg(long)]
        name: String,
        /// Where the disk image (qcow2 or raw) is: an http(s) URL.
        #[arg(long, value_name = "URL")]
        from: String,
        /// The file's sha256: the import fails when the download differs.
        #[arg(long)]
        checksum: Option<String>,
        /// Its size, in GB (default 10): the file must fit.
        #[arg(long)]
        size: Option<u32>,
        /// A label, `key=value`; repeat it for more.
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
        /// Place it with this provider.
        #[arg(long)]
        provider: Option<String>,
        /// Place it in this region.
        #[arg(long)]
        region: Option<String>,
        /// Place it on this continent.
        #[arg(long)]
        continent: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Makes an image of a VM's boot volume (crash-consistent: power the
    /// VM off first for a clean one).
    Create {
        /// The VM: its id, an abbreviation of it, or its name.
        #[arg(long)]
        vm: String,
        /// Its name, unique among the tenant's images.
        #[arg(long)]
        name: String,
        /// A label, `key=value`; repeat it for more.
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Lists the tenant's images.
    List(ListArgs),
    /// Shows an image (by id or name).
    Get { image: String },
    /// Renames and/or relabels an image.
    Update {
        image: String,
        /// Its new name.
        #[arg(long)]
        name: Option<String>,
        /// Its labels, all of them (`key=value`, repeated).
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
    },
    /// Deletes an image (VMs made from it stay).
    Delete {
        image: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum SshKeyCommand {
    /// Keeps a public key.
    #[command(group(clap::ArgGroup::new("key").required(true)))]
    Create {
        /// Its name, unique among the tenant's keys.
        #[arg(long)]
        name: String,
        /// The key: an OpenSSH public key line (`ssh-ed25519 AAAA... you@host`).
        #[arg(long, group = "key", value_name = "LINE")]
        public_key: Option<String>,
        /// The key, read from a file (`~/.ssh/id_ed25519.pub`).
        #[arg(long, group = "key", value_name = "PATH")]
        public_key_from_file: Option<std::path::PathBuf>,
        /// A label, `key=value`; repeat it for more.
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
    },
    /// Lists the tenant's keys.
    List(ListArgs),
    /// Shows a key (by id or name).
    Get { ssh_key: String },
    /// Renames and/or relabels a key.
    Update {
        ssh_key: String,
        /// Its new name.
        #[arg(long)]
        name: Option<String>,
        /// Its labels, all of them (`key=value`, repeated).
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
    },
    /// Forgets a key (VMs created with it keep it).
    Delete { ssh_key: String },
}

#[derive(Debug, Subcommand)]
pub enum NetworkCommand {
    /// Makes a private network (on each host when its first VM there joins).
    Create {
        /// Its name.
        #[arg(long)]
        name: String,
        /// Its subnet, e.g. 192.168.10.0/24.
        #[arg(long)]
        cidr: String,
        /// Addresses handed out by meson (static, written into each guest)
        /// instead of AtomOS's DHCP.
        #[arg(long)]
        no_dhcp: bool,
        /// Its gateway (default: the subnet's first address).
        #[arg(long)]
        gateway: Option<String>,
        /// A label, `key=value`; repeat it for more.
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
    },
    /// Lists the tenant's networks.
    List,
    /// Shows a network (by id or name).
    Get { network: String },
    /// Renames and/or relabels a network.
    Update {
        network: String,
        /// Its new name.
        #[arg(long)]
        name: Option<String>,
        /// Its labels, all of them (`key=value`, repeated).
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
    },
    /// Deletes a network (refused while VMs are attached).
    Delete {
        network: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum PortForwardCommand {
    /// Forwards a public port of a VM's host to a port of the VM (a VM on
    /// the network, running or off), reached at the host's address; waits
    /// until the host forwards it. While it has forwards, the VM cannot
    /// migrate or leave the network; deleting the VM deletes them.
    Create {
        /// The network (id, abbreviation or name).
        network: String,
        /// The VM (id, abbreviation or name).
        #[arg(long)]
        vm: String,
        /// The port on the VM's host: free there, whichever tenant's.
        #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
        public_port: u16,
        /// The VM's port it reaches.
        #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
        private_port: u16,
        /// tcp (the default) or udp.
        #[arg(long, value_parser = ["tcp", "udp"])]
        protocol: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Lists a network's port forwards, oldest first.
    List {
        /// The network (id, abbreviation or name).
        network: String,
    },
    /// Shows a port forward.
    Get {
        /// The network (id, abbreviation or name).
        network: String,
        /// The forward: its id, or 8 or more of its first or last hex digits.
        forward: String,
    },
    /// Deletes a port forward: its host stops forwarding, its public port is
    /// free again.
    Delete {
        /// The network (id, abbreviation or name).
        network: String,
        /// The forward: its id, or 8 or more of its first or last hex digits.
        forward: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum BackupCommand {
    /// Lists the tenant's backups.
    List {
        /// Only those of this VM (id, abbreviation or name; a deleted VM's
        /// by its whole id).
        #[arg(long)]
        vm: Option<String>,
        #[command(flatten)]
        list: ListArgs,
    },
    /// Shows a backup (by id, abbreviation or name).
    Get { backup: String },
    /// Renames and/or relabels a backup.
    Update {
        backup: String,
        /// Its new name.
        #[arg(long)]
        name: Option<String>,
        /// Its labels, all of them (`key=value`, repeated).
        #[arg(short = 'l', long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
    },
    /// Deletes a backup (refused while it is being made or restored).
    Delete {
        backup: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConsoleCommand {
    /// Lists the tenant's consoles, newest first: requests, sessions and
    /// how they ended.
    List {
        /// Only those of this VM (id, abbreviation or name; a deleted VM's
        /// by its whole id).
        #[arg(long)]
        vm: Option<String>,
        /// Only those in this status (requested, open, closed, expired,
        /// revoked); repeat it for any of several.
        #[arg(long)]
        status: Vec<String>,
        /// At most this many, 1 to 100 (meson's default: 50).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
        limit: Option<u32>,
    },
    /// Shows a console (never its URL or password).
    Get {
        /// The console: its id, or 8 or more of its first or last hex
        /// digits (among the newest 100).
        console: String,
    },
    /// Ends a console: one not used yet is revoked (its URL no longer
    /// connects), an open session is closed.
    Delete {
        /// The console: its id, or 8 or more of its first or last hex
        /// digits (among the newest 100).
        console: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issues a token and prints its secret, shown this once (meson keeps
    /// only its hash): store it now. It authenticates as the tenant, at its
    /// role, until it expires or is revoked.
    Create {
        /// Its name: 1 to 64 characters, unique among the tenant's live
        /// tokens.
        name: String,
        /// What it may do: viewer (read), editor (read and change) or
        /// owner (also tokens, quotas and the audit log); at most your own
        /// role.
        #[arg(long, value_parser = ["viewer", "editor", "owner"])]
        role: String,
        /// How long until it expires: 90d, 12h, 30m or 3600s (a bare
        /// number is seconds), a minute to two years; never, unless given.
        #[arg(long, value_name = "DURATION", value_parser = duration_seconds)]
        expires_in: Option<i64>,
    },
    /// Lists the tenant's live tokens, newest first (never their secrets).
    List {
        /// The revoked ones too.
        #[arg(long)]
        revoked: bool,
    },
    /// Shows a token (never its secret).
    Get {
        /// The token: its id, 8 or more of its first or last hex digits, or
        /// a live token's name. (Not `token`: that is the global --token.)
        #[arg(value_name = "TOKEN")]
        id: String,
    },
    /// Revokes a token: meson refuses its secret from the next request on.
    /// The record stays (`token list --revoked`).
    Revoke {
        /// The token: its id, 8 or more of its first or last hex digits, or
        /// a live token's name.
        #[arg(value_name = "TOKEN")]
        id: String,
    },
}

/// A member's role, lowest first.
pub const MEMBER_ROLES: [&str; 4] = ["viewer", "editor", "manager", "owner"];

/// A member limit to set: a number, or `None` (`none`: lifted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberLimit(pub Option<i64>);

/// A member limit: a non-negative number, or `none` (lifted).
fn parse_member_limit(s: &str) -> Result<MemberLimit, String> {
    if s == "none" {
        return Ok(MemberLimit(None));
    }
    s.parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .map(|n| MemberLimit(Some(n)))
        .ok_or_else(|| format!("{s:?} is not a non-negative number or `none`"))
}

#[derive(Debug, Subcommand)]
pub enum MemberCommand {
    /// Lists the organisation's members, owners first.
    List,
    /// Shows a member.
    Get {
        /// The member's subject, as its identity provider names it
        /// (`auth0|5f2b8c`).
        subject: String,
    },
    /// Adds a member: a subject with a role, at most your own (managers
    /// and owners).
    Add {
        /// The identity provider's subject (a JWT's `sub`).
        subject: String,
        /// viewer (reads), editor (also changes), manager (also manages
        /// members and invitations below owner) or owner.
        #[arg(long, value_parser = MEMBER_ROLES)]
        role: String,
        /// The member's email address, for the record.
        #[arg(long)]
        email: Option<String>,
    },
    /// Changes a member's role: both its role and the new one at most your
    /// own. The last owner keeps the role.
    SetRole {
        subject: String,
        #[arg(value_parser = MEMBER_ROLES)]
        role: String,
    },
    /// Holds a member to limits of its own on the VMs it creates in the
    /// organisation (below the organisation's quotas): a number sets one,
    /// `none` lifts it, one not given stays.
    SetLimits {
        subject: String,
        #[arg(long, value_parser = parse_member_limit)]
        vms: Option<MemberLimit>,
        #[arg(long, value_parser = parse_member_limit)]
        vcpus: Option<MemberLimit>,
        #[arg(long = "ram-mib", value_parser = parse_member_limit)]
        ram_mib: Option<MemberLimit>,
    },
    /// Removes a member ranked at most you; never the last owner.
    Remove { subject: String },
    /// Leaves the organisation the command acts in (--organization): your
    /// membership there ends. The last owner cannot leave.
    Leave,
}

#[derive(Debug, Subcommand)]
pub enum MembershipCommand {
    /// Lists the organisations you may act in, your token's first, with
    /// your role in each and how you hold it (token, member, inherited).
    List,
}

#[derive(Debug, Subcommand)]
pub enum InvitationCommand {
    /// Lists the organisation's invitations, newest first, whatever their
    /// status (managers and owners).
    List,
    /// Shows an invitation.
    Get {
        /// The invitation: its id, 8 or more of its first or last hex
        /// digits, or the email of an open one.
        invitation: String,
    },
    /// Invites an email address with a role at most your own, and prints
    /// the invitation's token, shown this once: pass it to the invitee.
    Create {
        /// The invitee's email address.
        email: String,
        /// viewer, editor, manager or owner.
        #[arg(long, value_parser = MEMBER_ROLES)]
        role: String,
        /// How long until it expires: 7d, 12h, 90m or 3600s, an hour to 30
        /// days; 7 days unless given.
        #[arg(long, value_name = "DURATION", value_parser = duration_seconds)]
        expires_in: Option<i64>,
    },
    /// Revokes an open invitation: its token accepts nothing from now on.
    Revoke {
        /// The invitation: its id, 8 or more of its first or last hex
        /// digits, or the email of an open one.
        invitation: String,
    },
    /// Accepts an invitation: you become a member of its organisation.
    /// Needs a token (a JWT) whose verified email is the invitation's.
    Accept {
        /// The invitation's token (`mesoninv_...`); `-` reads it from
        /// stdin. (Not `token`: that is the global --token.)
        #[arg(value_name = "INVITATION_TOKEN")]
        secret: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum OrganizationCommand {
    /// Lists the organisation the command acts in, then every
    /// sub-organisation below it, with the quotas each was given.
    List,
    /// Shows an organisation: the one the command acts in, or one below it.
    Get {
        /// Its id (`acme.platform`), or the name of one below the
        /// organisation the command acts in (`platform`). (Not
        /// `organization`: that is the global --organization.)
        #[arg(value_name = "ORGANIZATION")]
        org: String,
    },
    /// Creates a sub-organisation of the organisation the command acts in,
    /// `<parent>.<name>` (owners), with quotas carved out of the parent's:
    /// what it may hold counts as held by the parent (`quota get`), so they
    /// must fit beside the parent's own resources and its other
    /// sub-organisations'. A quota not given: none.
    Create {
        /// 1 to 32 of a-z, 0-9 and '-', a letter or digit first: the id's
        /// last part.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        quotas: PlanQuotas,
    },
    /// Changes a sub-organisation's quotas, those given (owners of an
    /// organisation above it): a rise must fit in the parent's quotas, as a
    /// creation's; a cut always passes.
    SetQuotas {
        /// Its id (`acme.platform`), or its name (`platform`).
        #[arg(value_name = "ORGANIZATION")]
        org: String,
        #[command(flatten)]
        quotas: PlanQuotas,
    },
    /// Ends a sub-organisation that holds nothing and has none below it
    /// (owners of an organisation above it): its quotas return to its
    /// parent; its members, open invitations and live tokens end with it.
    Delete {
        /// Its id (`acme.platform`), or its name (`platform`).
        #[arg(value_name = "ORGANIZATION")]
        org: String,
    },
}

/// A duration in seconds: a number followed by `s`, `m`, `h` or `d`, or a
/// bare number of seconds (`90d`, `12h`, `30m`, `3600s`, `3600`).
pub fn duration_seconds(s: &str) -> Result<i64, String> {
    let bad = || {
        format!("{s:?} is not a duration: a whole number and s, m, h or d (90d, 12h, 30m, 3600s)")
    };
    let t = s.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_lowercase()),
        _ => (t, 's'),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = digits.parse().map_err(|_| bad())?;
    let per = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(per).ok_or_else(bad)
}

/// `mesonctl usage`: which usage, and how it is printed.
#[derive(Debug, Args, Clone, Default)]
pub struct UsageArgs {
    /// From this time on: RFC 3339, or a date (its midnight, UTC); default:
    /// the start of this month (UTC).
    #[arg(long, value_name = "TIME", value_parser = instant)]
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    /// Until this time (excluded): RFC 3339, or a date (its midnight,
    /// UTC), at most 366 days after --from; default: now.
    #[arg(long, value_name = "TIME", value_parser = instant)]
    pub to: Option<chrono::DateTime<chrono::Utc>>,
    /// A line per resource (the default), day (UTC), tenant, or value of a
    /// label (`label:KEY`; `(none)`: resources without it), and meter.
    #[arg(long, value_name = "GROUP", value_parser = group_by)]
    pub group_by: Option<String>,
    /// Operators: whose usage (default: every tenant's). A tenant may name
    /// only itself.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Print meson's CSV as it is, whatever -o says: a header row, then a
    /// row per line.
    #[arg(long)]
    pub csv: bool,
}

#[derive(Debug, Subcommand)]
pub enum StatementCommand {
    /// Lists the statements, without their lines: the running month
    /// (`current`, open: what it has cost so far), then the closed months,
    /// newest first, one per currency.
    List {
        /// Operators: whose statements (without it, every tenant's closed
        /// ones and no `current`). A tenant may name only itself.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Shows a statement with a line per resource: `current`, the running
    /// month so far, or a closed month's.
    Get {
        /// `current`, or a closed statement's id or 8 or more of its first
        /// or last hex digits.
        #[arg(value_name = "ID|current")]
        id: String,
        /// Operators: whose statement (needed for `current`). A tenant may
        /// name only itself.
        #[arg(long)]
        tenant: Option<String>,
        /// Print meson's CSV as it is, whatever -o says: a header row, a row
        /// per line and a last one for the total.
        #[arg(long)]
        csv: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum PriceCommand {
    /// Lists the prices, per unit and hour: each meter's, per provider
    /// (`*`: every provider without its own), from when until when.
    List,
    /// Operators: adds a price for a meter (and provider), in force from
    /// --effective-from (default: now) until a later one takes over. The
    /// past keeps its prices: a time before now is refused.
    Create {
        /// volume, image or backup (per GB-hour), or cluster (per hour). A
        /// VM costs its host's quote.
        #[arg(long, value_parser = ["volume", "cluster", "image", "backup"])]
        meter: String,
        /// Per unit and hour: a decimal of at least 0, like 0.00007.
        #[arg(long, value_name = "PRICE")]
        unit_price: String,
        /// Three capital letters, like EUR.
        #[arg(long)]
        currency: String,
        /// Only this provider's (default `*`: every provider without its
        /// own price).
        #[arg(long)]
        provider: Option<String>,
        /// From when: RFC 3339, or a date (its midnight, UTC); default: now.
        #[arg(long, value_name = "TIME", value_parser = instant)]
        effective_from: Option<chrono::DateTime<chrono::Utc>>,
    },
}

/// A time: RFC 3339 (`2026-11-01T00:00:00Z`), or a date (`2026-11-01`),
/// its midnight UTC.
pub fn instant(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    let t = s.trim();
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(t) {
        return Ok(at.to_utc());
    }
    chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc())
        .ok_or_else(|| {
            format!("{s:?} is not a time: RFC 3339 (2026-11-01T00:00:00Z) or a date (2026-11-01)")
        })
}

/// How usage is grouped: `resource`, `day`, `tenant` or `label:KEY` (a key
/// of 1 to 63 characters).
pub fn group_by(s: &str) -> Result<String, String> {
    let t = s.trim();
    let ok = match t {
        "resource" | "day" | "tenant" => true,
        _ => t
            .strip_prefix("label:")
            .is_some_and(|k| (1..=63).contains(&k.len())),
    };
    if ok {
        Ok(t.to_owned())
    } else {
        Err(format!(
            "{s:?} is not resource, day, tenant or label:KEY (a key of 1 to 63 characters)"
        ))
    }
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// A tenant's quotas.
    #[command(subcommand)]
    Quota(TenantQuotaCommand),
}

#[derive(Debug, Subcommand)]
pub enum TenantQuotaCommand {
    /// Shows a tenant's limits and use.
    Get { tenant: String },
    /// Sets limits of a tenant: a number, or `default` to return to its
    /// plan's (or the deployment's default); those not given stay as they
    /// are. --plan puts the tenant on a plan.
    Set {
        tenant: String,
        /// Puts the tenant on this plan (`plan list`); `none` or `default`:
        /// on no plan, the deployment's defaults. Its own limits stay over
        /// the plan's.
        #[arg(long, value_name = "PLAN", value_parser = plan_choice)]
        plan: Option<PlanChoice>,
        #[arg(long, value_parser = quota_value)]
        vms: Option<QuotaValue>,
        #[arg(long, value_parser = quota_value)]
        vcpus: Option<QuotaValue>,
        #[arg(long, value_parser = quota_value)]
        ram_mib: Option<QuotaValue>,
        #[arg(long, value_parser = quota_value)]
        storage_gb: Option<QuotaValue>,
        #[arg(long, value_parser = quota_value)]
        clusters: Option<QuotaValue>,
        #[arg(long, value_parser = quota_value)]
        nodes: Option<QuotaValue>,
        #[arg(long, value_parser = quota_value)]
        images_gb: Option<QuotaValue>,
    },
}

/// The plan `tenant quota set --plan` puts a tenant on: a plan's name, or
/// `None` (`none`, `default`) for none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanChoice(pub Option<String>);

fn plan_choice(s: &str) -> Result<PlanChoice, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("a plan's name, or `none`".into());
    }
    if t.eq_ignore_ascii_case("none") || t.eq_ignore_ascii_case("default") {
        return Ok(PlanChoice(None));
    }
    Ok(PlanChoice(Some(t.to_owned())))
}

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Lists the plans with their quotas: `default` (the deployment's
    /// defaults, a tenant on no plan's) first, then the others by name.
    List,
    /// Shows a plan: each limit, and whether it is the deployment's default.
    Get {
        /// The plan's name (`default`: the deployment's defaults).
        name: String,
    },
    /// Operators: creates or replaces a plan, whole: a limit not given is
    /// the deployment's default. Its tenants' quotas follow at once.
    Put {
        /// 1 to 63 lowercase letters, digits or '-' (not `default`).
        name: String,
        /// What it is for (at most 200 characters).
        #[arg(long)]
        description: Option<String>,
        #[command(flatten)]
        quotas: PlanQuotas,
    },
    /// Operators: deletes a plan (refused while a tenant is on it); prints
    /// nothing.
    Delete { name: String },
}

/// Limits given as flags (`plan put`, `organization create|set-quotas`):
/// each a number of at least 0.
#[derive(Debug, Args, Clone, Default)]
pub struct PlanQuotas {
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub vms: Option<i64>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub vcpus: Option<i64>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub ram_mib: Option<i64>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub storage_gb: Option<i64>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub clusters: Option<i64>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub nodes: Option<i64>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub images_gb: Option<i64>,
}

/// A quota's value: a number, or `default` (`None`).
#[derive(Clone, Copy, Debug)]
pub struct QuotaValue(pub Option<i64>);

fn quota_value(s: &str) -> Result<QuotaValue, String> {
    if s.eq_ignore_ascii_case("default") {
        return Ok(QuotaValue(None));
    }
    s.parse()
        .map(|n| QuotaValue(Some(n)))
        .map_err(|_| format!("{s:?} is neither a number nor `default`"))
}

#[derive(Debug, Subcommand)]
pub enum TargetCommand {
    /// Lists the targets.
    List,
    /// Shows a target (by id or name).
    Get { target: String },
    /// Registers an AtomOS host.
    Create {
        /// Its name.
        #[arg(long)]
        name: String,
        /// Where its daemons listen (a name or an address).
        #[arg(long)]
        host: String,
        #[arg(long)]
        provider: String,
        #[arg(long)]
        region: String,
        #[arg(long)]
        continent: String,
        #[command(flatten)]
        ports: TargetPorts,
        /// Registered but not placed on.
        #[arg(long)]
        disabled: bool,
    },
    /// Moves a target or turns it on or off.
    Update {
        target: String,
        #[arg(long)]
        host: Option<String>,
        #[command(flatten)]
        ports: TargetPorts,
        /// Place on it (`true`) or not (`false`).
        #[arg(long)]
        enabled: Option<bool>,
    },
    /// Takes a target out of placement and migrates its VMs off it (with
    /// progress; `--no-wait` to leave them moving).
    Drain {
        target: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Puts a drained target back into placement.
    Undrain { target: String },
}

#[derive(Debug, Subcommand)]
pub enum OrphanCommand {
    /// Lists the orphans, with why each waits for a decision.
    List,
    /// Shows an orphan (by id, an abbreviation of it, or its AtomOS name).
    Get { orphan: String },
    /// Adopts an orphan into a tenant (done by meson's next reconciler
    /// pass).
    Adopt {
        orphan: String,
        /// The tenant; when the VM's name carries a tenant tag, the one it
        /// names.
        #[arg(long)]
        tenant: String,
        /// Its name in the tenant (its AtomOS name if absent).
        #[arg(long)]
        name: Option<String>,
    },
    /// Deletes an orphan from its host, with its own volumes (done by
    /// meson's next reconciler pass).
    Delete { orphan: String },
}

/// An AtomOS target's daemons' ports, when not the usual ones.
#[derive(Debug, clap::Args)]
pub struct TargetPorts {
    #[arg(long)]
    pub compute_port: Option<u16>,
    #[arg(long)]
    pub storage_port: Option<u16>,
    #[arg(long)]
    pub network_port: Option<u16>,
    #[arg(long)]
    pub auth_port: Option<u16>,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// A page of entries, newest first.
    List {
        /// Only this tenant's (operators).
        #[arg(long)]
        tenant: Option<String>,
        /// Only this subject's.
        #[arg(long)]
        subject: Option<String>,
        /// Only this operation's (`vm_create`, `cluster_kubeconfig`, ...).
        #[arg(long)]
        operation: Option<String>,
        /// Only those on this resource.
        #[arg(long)]
        resource: Option<String>,
        /// From this time on (RFC 3339).
        #[arg(long)]
        since: Option<chrono::DateTime<chrono::Utc>>,
        /// Until this time (RFC 3339).
        #[arg(long)]
        until: Option<chrono::DateTime<chrono::Utc>>,
        /// The page (1 is the newest).
        #[arg(long, default_value_t = 1)]
        page: u32,
        /// Entries per page (at most 50).
        #[arg(long, default_value_t = 25)]
        per_page: u32,
    },
}

#[derive(Debug, Subcommand)]
pub enum QuotaCommand {
    /// Shows each limit and its use.
    Get,
}

#[derive(Debug, Subcommand)]
pub enum KubernetesCommand {
    /// The versions meson installs, whether deprecated, and where each may
    /// be upgraded to.
    Versions,
}

/// A `key=value` label.
fn label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(format!("{s:?} is not key=value")),
    }
}

#[derive(Debug, Subcommand)]
pub enum KopsCommand {
    /// Prints the KaaS payload for a `kops create cluster` command line, and
    /// on stderr the flags it cannot honour.
    ///
    /// `mesonctl kops translate kops create cluster --name=demo --zones=europe ...`
    /// (the leading `kops create cluster` is optional; one quoted argument
    /// holding the whole line works too). Zones are matched against the
    /// regions meson reports, or those of `mesond dev` when it cannot be asked.
    Translate {
        /// Match zones against mesond dev's regions without asking meson.
        #[arg(long)]
        offline: bool,
        /// The command line.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            required = true,
            value_name = "KOPS ARGS"
        )]
        args: Vec<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "mesonctl",
            "cluster",
            "upgrade",
            "c",
            "--version",
            "1.30",
            "--no-wait",
            "-o",
            "json",
        ])
        .unwrap();
        assert_eq!(cli.output, Format::Json);
        match cli.command {
            Command::Cluster(ClusterCommand::Upgrade { version, wait, .. }) => {
                assert_eq!(version, "1.30");
                assert!(!wait.waits());
            }
            other => panic!("{other:?}"),
        }
        // The kOps line is taken whole, its flags included.
        let cli = Cli::try_parse_from([
            "mesonctl",
            "kops",
            "translate",
            "kops",
            "create",
            "cluster",
            "--name=a",
            "-o",
            "yaml",
            "--config",
            "x",
        ])
        .unwrap();
        match cli.command {
            Command::Kops(KopsCommand::Translate { args, offline }) => {
                assert!(!offline);
                assert_eq!(args.len(), 8, "{args:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(cli.output, Format::Table);
        let e = Cli::try_parse_from(["mesonctl", "vm", "frob"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        // A forward's ports are 1..=65535 and its protocol tcp or udp.
        let cli = Cli::try_parse_from([
            "mesonctl",
            "port-forward",
            "create",
            "db",
            "--vm",
            "web",
            "--public-port",
            "2222",
            "--private-port",
            "22",
            "--protocol",
            "udp",
        ])
        .unwrap();
        match cli.command {
            Command::PortForward(PortForwardCommand::Create {
                network,
                vm,
                public_port,
                private_port,
                protocol,
                wait,
            }) => {
                assert_eq!((network.as_str(), vm.as_str()), ("db", "web"));
                assert_eq!((public_port, private_port), (2222, 22));
                assert_eq!(protocol.as_deref(), Some("udp"));
                assert!(wait.waits());
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            ["--public-port", "0", "--private-port", "22"],
            ["--public-port", "65536", "--private-port", "22"],
            ["--public-port", "80", "--private-port", "x"],
        ] {
            let mut args = vec!["mesonctl", "port-forward", "create", "db", "--vm", "web"];
            args.extend(bad);
            let e = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        let e = Cli::try_parse_from([
            "mesonctl",
            "port-forward",
            "create",
            "db",
            "--vm",
            "web",
            "--public-port",
            "80",
            "--private-port",
            "80",
            "--protocol",
            "sctp",
        ])
        .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        // Backups: a restore's target is same or new; a policy keeps 1 to 31.
        let cli = Cli::try_parse_from([
            "mesonctl",
            "vm",
            "restore",
            "web",
            "--backup",
            "nightly",
            "--into",
            "new",
            "--name",
            "web-2",
            "--no-wait",
        ])
        .unwrap();
        match cli.command {
            Command::Vm(VmCommand::Restore {
                vm,
                backup,
                into,
                name,
                wait,
            }) => {
                assert_eq!((vm.as_str(), backup.as_str()), ("web", "nightly"));
                assert_eq!(
                    (into.as_deref(), name.as_deref()),
                    (Some("new"), Some("web-2"))
                );
                assert!(!wait.waits());
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from([
            "mesonctl",
            "vm",
            "enable-backups",
            "web",
            "--window",
            "22-02",
            "--keep",
            "31",
        ])
        .unwrap();
        match cli.command {
            Command::Vm(VmCommand::EnableBackups { vm, window, keep }) => {
                assert_eq!(vm, "web");
                assert_eq!((window.as_deref(), keep), (Some("22-02"), Some(31)));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            &[
                "vm",
                "restore",
                "web",
                "--backup",
                "b",
                "--into",
                "elsewhere",
            ][..],
            &["vm", "restore", "web"],
            &["vm", "enable-backups", "web", "--keep", "0"],
            &["vm", "enable-backups", "web", "--keep", "32"],
        ] {
            let mut args = vec!["mesonctl"];
            args.extend(bad);
            let e = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        let cli = Cli::try_parse_from([
            "mesonctl",
            "backup",
            "list",
            "--vm",
            "web",
            "--status",
            "available",
            "-l",
            "env=dev",
        ])
        .unwrap();
        match cli.command {
            Command::Backup(BackupCommand::List { vm, list }) => {
                assert_eq!(vm.as_deref(), Some("web"));
                let f = list.filter();
                assert_eq!(f.status, ["available"]);
                assert_eq!(f.label_selector.as_deref(), Some("env=dev"));
            }
            other => panic!("{other:?}"),
        }
        // Consoles: on loopback unless told; --url-only listens nowhere; a
        // list's limit is 1 to 100.
        let cli = Cli::try_parse_from(["mesonctl", "vm", "console", "web"]).unwrap();
        match cli.command {
            Command::Vm(VmCommand::Console {
                vm,
                listen,
                url_only,
            }) => {
                assert_eq!((vm.as_str(), listen.as_str()), ("web", "127.0.0.1:0"));
                assert!(!url_only);
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["mesonctl", "vm", "console", "web", "--url-only"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Vm(VmCommand::Console { url_only: true, .. })
        ));
        let cli = Cli::try_parse_from([
            "mesonctl", "console", "list", "--vm", "web", "--status", "open", "--status", "closed",
            "--limit", "5",
        ])
        .unwrap();
        match cli.command {
            Command::Console(ConsoleCommand::List { vm, status, limit }) => {
                assert_eq!(vm.as_deref(), Some("web"));
                assert_eq!(status, ["open", "closed"]);
                assert_eq!(limit, Some(5));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            &[
                "vm",
                "console",
                "web",
                "--url-only",
                "--listen",
                "127.0.0.1:5900",
            ][..],
            &["console", "list", "--limit", "0"],
            &["console", "list", "--limit", "101"],
            &["console", "get"],
        ] {
            let mut args = vec!["mesonctl"];
            args.extend(bad);
            let e = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        // Tokens: a role of a tenant's, a duration with its unit.
        let cli = Cli::try_parse_from([
            "mesonctl",
            "token",
            "create",
            "ci",
            "--role",
            "editor",
            "--expires-in",
            "90d",
        ])
        .unwrap();
        match cli.command {
            Command::Token(TokenCommand::Create {
                name,
                role,
                expires_in,
            }) => {
                assert_eq!((name.as_str(), role.as_str()), ("ci", "editor"));
                assert_eq!(expires_in, Some(90 * 86_400));
            }
            other => panic!("{other:?}"),
        }
        // A token's id is not the global --token (clap would take one for
        // the other if they shared a name).
        let cli =
            Cli::try_parse_from(["mesonctl", "--token", "t", "token", "revoke", "ci"]).unwrap();
        assert_eq!(cli.token.as_deref(), Some("t"));
        match cli.command {
            Command::Token(TokenCommand::Revoke { id }) => assert_eq!(id, "ci"),
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["mesonctl", "token", "get", "ci"]).unwrap();
        assert_eq!(cli.token, None);
        let cli = Cli::try_parse_from(["mesonctl", "token", "list", "--revoked"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Token(TokenCommand::List { revoked: true })
        ));
        for bad in [
            &["token", "create", "ci", "--role", "admin"][..],
            &["token", "create", "ci"],
            &["token", "create", "--role", "viewer"],
            &[
                "token",
                "create",
                "ci",
                "--role",
                "viewer",
                "--expires-in",
                "3w",
            ],
            &["token", "revoke"],
        ] {
            let mut args = vec!["mesonctl"];
            args.extend(bad);
            let e = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        let e = Cli::try_parse_from(["mesonctl", "token", "create", "ci", "--role", "admin"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--role"), "{e}");
    }

    #[test]
    fn durations_are_seconds_minutes_hours_or_days() {
        for (s, secs) in [
            ("90d", 90 * 86_400),
            ("12h", 12 * 3_600),
            ("30m", 1_800),
            ("3600s", 3_600),
            ("3600", 3_600),
            ("2D", 2 * 86_400),
            (" 60s ", 60),
        ] {
            assert_eq!(duration_seconds(s), Ok(secs), "{s}");
        }
        for bad in ["", "d", "1.5h", "-5m", "3w", "h12", "99999999999999999999d"] {
            let e = duration_seconds(bad).unwrap_err();
            assert!(e.contains("not a duration"), "{bad}: {e}");
        }
    }

    #[test]
    fn usage_statements_and_prices_parse() {
        let cli = Cli::try_parse_from([
            "mesonctl",
            "usage",
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-15T12:00:00+01:00",
            "--group-by",
            "label:team",
            "--tenant",
            "acme",
            "--csv",
        ])
        .unwrap();
        match cli.command {
            Command::Usage(a) => {
                assert_eq!(
                    a.from.map(|t| t.to_rfc3339()),
                    Some("2026-11-01T00:00:00+00:00".into())
                );
                assert_eq!(
                    a.to.map(|t| t.to_rfc3339()),
                    Some("2026-11-15T11:00:00+00:00".into())
                );
                assert_eq!(a.group_by.as_deref(), Some("label:team"));
                assert_eq!(a.tenant.as_deref(), Some("acme"));
                assert!(a.csv);
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["mesonctl", "usage", "-o", "json"]).unwrap();
        assert_eq!(cli.output, Format::Json);
        assert!(matches!(cli.command, Command::Usage(ref a) if a.group_by.is_none() && !a.csv));
        let cli =
            Cli::try_parse_from(["mesonctl", "statement", "get", "current", "--csv"]).unwrap();
        match cli.command {
            Command::Statement(StatementCommand::Get { id, tenant, csv }) => {
                assert_eq!((id.as_str(), tenant, csv), ("current", None, true));
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from([
            "mesonctl",
            "price",
            "create",
            "--meter",
            "volume",
            "--unit-price",
            "0.00007",
            "--currency",
            "EUR",
            "--effective-from",
            "2027-01-01",
        ])
        .unwrap();
        match cli.command {
            Command::Price(PriceCommand::Create {
                meter,
                unit_price,
                currency,
                provider,
                effective_from,
            }) => {
                assert_eq!(
                    (meter.as_str(), unit_price.as_str(), currency.as_str()),
                    ("volume", "0.00007", "EUR")
                );
                assert_eq!(provider, None);
                assert_eq!(
                    effective_from.map(|t| t.to_rfc3339()),
                    Some("2027-01-01T00:00:00+00:00".into())
                );
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            &["usage", "--group-by", "week"][..],
            &["usage", "--group-by", "label:"],
            &["usage", "--from", "yesterday"],
            &["usage", "--to", "2026-13-01"],
            &["statement", "get"],
            &[
                "price",
                "create",
                "--meter",
                "vm",
                "--unit-price",
                "1",
                "--currency",
                "EUR",
            ],
            &["price", "create", "--meter", "volume", "--currency", "EUR"],
        ] {
            let mut args = vec!["mesonctl"];
            args.extend(bad);
            let e = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        let e = Cli::try_parse_from(["mesonctl", "usage", "--group-by", "week"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("label:KEY"), "{e}");
    }

    #[test]
    fn members_invitations_and_the_organisation_parse() {
        let cli = Cli::try_parse_from([
            "mesonctl",
            "--organization",
            "acme",
            "member",
            "add",
            "auth0|ann",
            "--role",
            "manager",
            "--email",
            "ann@example.com",
        ])
        .unwrap();
        assert_eq!(cli.organization.as_deref(), Some("acme"));
        match cli.command {
            Command::Member(MemberCommand::Add {
                subject,
                role,
                email,
            }) => {
                assert_eq!((subject.as_str(), role.as_str()), ("auth0|ann", "manager"));
                assert_eq!(email.as_deref(), Some("ann@example.com"));
            }
            other => panic!("{other:?}"),
        }
        // The global flag goes anywhere; none: the token's organisation.
        let cli = Cli::try_parse_from([
            "mesonctl",
            "member",
            "set-role",
            "auth0|ann",
            "viewer",
            "--organization",
            "acme",
        ])
        .unwrap();
        assert_eq!(cli.organization.as_deref(), Some("acme"));
        assert!(matches!(
            cli.command,
            Command::Member(MemberCommand::SetRole { ref subject, ref role })
                if subject == "auth0|ann" && role == "viewer"
        ));
        let cli = Cli::try_parse_from([
            "mesonctl",
            "member",
            "set-limits",
            "sam",
            "--vms",
            "2",
            "--ram-mib",
            "none",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Command::Member(MemberCommand::SetLimits {
                vms: Some(MemberLimit(Some(2))),
                vcpus: None,
                ram_mib: Some(MemberLimit(None)),
                ..
            })
        ));
        assert!(
            Cli::try_parse_from(["mesonctl", "member", "set-limits", "sam", "--vms", "-1"])
                .is_err()
        );
        let cli = Cli::try_parse_from(["mesonctl", "membership", "list"]).unwrap();
        assert_eq!(cli.organization, None);
        assert!(matches!(
            cli.command,
            Command::Membership(MembershipCommand::List)
        ));
        let cli = Cli::try_parse_from(["mesonctl", "member", "leave"]).unwrap();
        assert!(matches!(cli.command, Command::Member(MemberCommand::Leave)));
        let cli = Cli::try_parse_from([
            "mesonctl",
            "invitation",
            "create",
            "bob@example.com",
            "--role",
            "editor",
            "--expires-in",
            "3d",
        ])
        .unwrap();
        match cli.command {
            Command::Invitation(InvitationCommand::Create {
                email,
                role,
                expires_in,
            }) => {
                assert_eq!(
                    (email.as_str(), role.as_str()),
                    ("bob@example.com", "editor")
                );
                assert_eq!(expires_in, Some(3 * 86_400));
            }
            other => panic!("{other:?}"),
        }
        // An invitation's token is not the global --token.
        let cli = Cli::try_parse_from([
            "mesonctl",
            "--token",
            "t",
            "invitation",
            "accept",
            "mesoninv_x",
        ])
        .unwrap();
        assert_eq!(cli.token.as_deref(), Some("t"));
        assert!(matches!(
            cli.command,
            Command::Invitation(InvitationCommand::Accept { ref secret }) if secret == "mesoninv_x"
        ));
        for bad in [
            &["member", "add", "auth0|ann", "--role", "admin"][..],
            &["member", "add", "auth0|ann"],
            &["member", "set-role", "auth0|ann"],
            &["member", "set-role", "auth0|ann", "admin"],
            &["member", "remove"],
            &["invitation", "create", "bob@example.com"],
            &[
                "invitation",
                "create",
                "bob@example.com",
                "--role",
                "viewer",
                "--expires-in",
                "1w",
            ],
            &["invitation", "revoke"],
            &["invitation", "accept"],
            &["membership", "leave"],
        ] {
            let mut args = vec!["mesonctl"];
            args.extend(bad);
            let e = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn organizations_parse_with_their_quotas() {
        let cli = Cli::try_parse_from([
            "mesonctl",
            "organization",
            "create",
            "--name",
            "platform",
            "--vms",
            "3",
            "--vcpus",
            "8",
            "--ram-mib",
            "16384",
            "--images-gb",
            "0",
        ])
        .unwrap();
        match cli.command {
            Command::Organization(OrganizationCommand::Create { name, quotas }) => {
                assert_eq!(name, "platform");
                assert_eq!(
                    (quotas.vms, quotas.vcpus, quotas.ram_mib, quotas.images_gb),
                    (Some(3), Some(8), Some(16_384), Some(0))
                );
                assert_eq!(
                    (quotas.storage_gb, quotas.clusters, quotas.nodes),
                    (None, None, None)
                );
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from([
            "mesonctl",
            "organization",
            "set-quotas",
            "acme.platform",
            "--nodes",
            "6",
        ])
        .unwrap();
        match cli.command {
            Command::Organization(OrganizationCommand::SetQuotas { org, quotas }) => {
                assert_eq!(org, "acme.platform");
                assert_eq!((quotas.nodes, quotas.vms), (Some(6), None));
            }
            other => panic!("{other:?}"),
        }
        // An organisation named is not the global --organization.
        let cli = Cli::try_parse_from([
            "mesonctl",
            "--organization",
            "acme",
            "organization",
            "get",
            "platform",
        ])
        .unwrap();
        assert_eq!(cli.organization.as_deref(), Some("acme"));
        assert!(matches!(
            cli.command,
            Command::Organization(OrganizationCommand::Get { ref org }) if org == "platform"
        ));
        let cli =
            Cli::try_parse_from(["mesonctl", "organization", "delete", "acme.platform"]).unwrap();
        assert_eq!(cli.organization, None);
        for ok in [
            &["organization", "list"][..],
            &["organization", "get", "platform"],
            &["organization", "delete", "acme.platform"],
            &["organization", "create", "--name", "data"],
        ] {
            let mut args = vec!["mesonctl"];
            args.extend(ok);
            Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        for bad in [
            &["organization", "create"][..],
            &["organization", "create", "platform"],
            &["organization", "create", "--name", "p", "--vms", "-1"],
            &["organization", "create", "--name", "p", "--gpus", "1"],
            &["organization", "set-quotas", "--vms", "1"],
            &["organization", "set-quotas", "acme.p", "--vms", "lots"],
            &["organization", "get"],
            &["organization", "delete"],
        ] {
            let mut args = vec!["mesonctl"];
            args.extend(bad);
            let e = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn plans_and_a_tenants_plan_parse() {
        let cli = Cli::try_parse_from([
            "mesonctl",
            "plan",
            "put",
            "small",
            "--description",
            "Try it out",
            "--vms",
            "1",
            "--ram-mib",
            "4096",
            "--images-gb",
            "0",
        ])
        .unwrap();
        match cli.command {
            Command::Plan(PlanCommand::Put {
                name,
                description,
                quotas,
            }) => {
                assert_eq!(name, "small");
                assert_eq!(description.as_deref(), Some("Try it out"));
                assert_eq!(
                    (quotas.vms, quotas.ram_mib, quotas.images_gb),
                    (Some(1), Some(4096), Some(0))
                );
                assert_eq!(
                    (
                        quotas.vcpus,
                        quotas.storage_gb,
                        quotas.clusters,
                        quotas.nodes
                    ),
                    (None, None, None, None)
                );
            }
            other => panic!("{other:?}"),
        }
        for (arg, plan) in [
            ("small", Some("small")),
            ("none", None),
            ("default", None),
            ("None", None),
        ] {
            let cli =
                Cli::try_parse_from(["mesonctl", "tenant", "quota", "set", "dev", "--plan", arg])
                    .unwrap();
            match cli.command {
                Command::Tenant(TenantCommand::Quota(TenantQuotaCommand::Set {
                    plan: p,
                    vms,
                    ..
                })) => {
                    assert_eq!(p, Some(PlanChoice(plan.map(str::to_owned))), "{arg}");
                    assert!(vms.is_none());
                }
                other => panic!("{other:?}"),
            }
        }
        let cli = Cli::try_parse_from(["mesonctl", "tenant", "quota", "set", "dev", "--vms", "3"])
            .unwrap();
        assert!(matches!(
            cli.command,
            Command::Tenant(TenantCommand::Quota(TenantQuotaCommand::Set {
                plan: None,
                ..
            }))
        ));
        for bad in [
            &["plan", "put", "small", "--vms", "-1"][..],
            &["plan", "put", "small", "--vms", "lots"],
            &["plan", "put", "small", "--vms", "default"],
            &["plan", "put"],
            &["plan", "get"],
            &["plan", "delete"],
            &["tenant", "quota", "set", "dev", "--plan", ""],
        ] {
            let mut args = vec!["mesonctl"];
            args.extend(bad);
            let e = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }
}
