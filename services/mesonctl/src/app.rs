//! The commands: each calls meson through `meson-client`, waits for the
//! actions a mutation starts (unless `--no-wait`), and prints the result.
//! Output goes to stdout through `write_all` (a closed pipe, as in
//! `mesonctl vm list | head`, ends quietly); progress, warnings and errors
//! go to stderr.

use crate::cli::{
    ActionCommand, AuditCommand, BackupCommand, Cli, ClusterCommand, Command, ConsoleCommand,
    ImageCommand, InvitationCommand, KopsCommand, KubeconfigCommand, KubernetesCommand,
    MemberCommand, MembershipCommand, NetworkCommand, NodeCommand, OrganizationCommand,
    OrphanCommand, PlanCommand, PlanQuotas, PoolCommand, PortForwardCommand, PriceCommand,
    QuotaCommand, SshKeyCommand, StatementCommand, TargetCommand, TenantCommand,
    TenantQuotaCommand, TokenCommand, UsageArgs, VmCommand, VolumeCommand, WaitArgs,
};
use crate::config::{self, Settings};
use crate::error::Failure;
use crate::kops;
use crate::output::{self, Format, Show};
use crate::progress::Progress;
use meson_client::{Client, RetryPolicy, WaitOpts};
use meson_core::id::IdRef;
use meson_types::Warning;
use meson_types::action::Action;
use meson_types::pool::NodePoolUpdateRequest;
use meson_types::upgrade::ClusterUpgradeRequest;
use meson_types::vm::PowerCommand;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;
use uuid::Uuid;

type Result<T, E = Failure> = std::result::Result<T, E>;

/// Runs one command line.
pub async fn run(cli: Cli) -> Result<()> {
    let format = cli.output;
    let organization = organization(cli.organization);
    let inputs = config::Inputs::from_env(cli.url, cli.token, cli.config);
    match cli.command {
        // Needs no meson (it asks one for its regions if it can).
        Command::Kops(KopsCommand::Translate { offline, args }) => {
            translate(&inputs, offline, &args).await
        }
        Command::Elemento(crate::cli::ElementoCommand::Serve(args)) => {
            let settings = config::resolve(&inputs).map_err(Failure::Config)?;
            elemento_serve(settings, args).await
        }
        // Needs no meson either.
        Command::Completion { shell } => completion(shell),
        command => {
            let settings = config::resolve(&inputs).map_err(Failure::Config)?;
            let ctx = Ctx::new(settings, format, organization)?;
            ctx.dispatch(command).await.map_err(|f| match f {
                Failure::Client { error, .. } => Failure::Client {
                    error,
                    url: ctx.settings.url.clone(),
                    token_from: ctx.settings.token_from.to_string(),
                    organization: ctx
                        .organization
                        .as_ref()
                        .map(|(org, from)| format!("{org} (from {from})"))
                        .unwrap_or_default(),
                },
                other => other,
            })
        }
    }
}

/// The organisation to act in, and where it was given: `--organization`,
/// else `MESON_ORGANIZATION`; none (the token's own) when blank.
fn organization(flag: Option<String>) -> Option<(String, &'static str)> {
    let given = |v: Option<String>| v.map(|o| o.trim().to_owned()).filter(|o| !o.is_empty());
    match flag {
        Some(f) => given(Some(f)).map(|o| (o, "the command line")),
        None => given(std::env::var("MESON_ORGANIZATION").ok()).map(|o| (o, "the environment")),
    }
}

/// `mesonctl completion SHELL`: the shell's completion script, from the
/// command line's own definition.
fn completion(shell: clap_complete::Shell) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(
        shell,
        &mut <Cli as clap::CommandFactory>::command(),
        "mesonctl",
        &mut script,
    );
    out(&String::from_utf8_lossy(&script))
}

/// `mesonctl elemento serve`: until Ctrl-C or SIGTERM.
#[allow(clippy::print_stdout)] // where the daemons listen, for the person at the terminal
async fn elemento_serve(settings: Settings, a: crate::cli::ElementoServeArgs) -> Result<()> {
    use meson_elemento::Daemon;
    let mut cfg = meson_elemento::Config::new(&settings.url);
    cfg.bind = a.bind;
    cfg.ports = if a.single_origin_only {
        Vec::new()
    } else {
        vec![
            (Daemon::Auth, a.auth_port),
            (Daemon::Compute, a.compute_port),
            (Daemon::Storage, a.storage_port),
            (Daemon::Network, a.network_port),
            (Daemon::Target, a.target_port),
            (Daemon::Service, a.service_port),
        ]
    };
    cfg.single_origin_port = Some(a.port);
    cfg.tls = match (a.tls_cert, a.tls_key) {
        (Some(cert), Some(key)) => Some(meson_elemento::TlsFiles { cert, key }),
        _ => None,
    };
    cfg.insecure_http = a.insecure_http;
    cfg.port_flags = true;
    cfg.allowed_hosts = a.allowed_hosts;
    cfg.set_allowed_origins(&a.allowed_origins);
    cfg.login_token = Some(settings.token.clone());
    let gw = meson_elemento::Gateway::start(cfg)
        .await
        .map_err(|e| Failure::Config(format!("{e:#}")))?;
    println!("Elemento daemons over meson at {}:", settings.url);
    for line in gw.describe() {
        println!("  {line}");
    }
    let _ = std::io::stdout().flush();
    shutdown_signal().await;
    gw.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

struct Ctx {
    client: Client,
    settings: Settings,
    format: Format,
    /// The organisation the commands act in, when not the token's, and
    /// where it was given.
    organization: Option<(String, &'static str)>,
}

impl From<meson_client::Error> for Failure {
    fn from(error: meson_client::Error) -> Failure {
        Failure::Client {
            error: Box::new(error),
            url: String::new(),
            token_from: String::new(),
            organization: String::new(),
        }
    }
}

/// Retries for a command line: a few, briefly, so that a meson that is
/// not there is reported in about a second.
fn retry_policy() -> RetryPolicy {
    RetryPolicy {
        max_retries: 2,
        base: Duration::from_millis(300),
        cap: Duration::from_secs(5),
    }
}

/// Writes `text` to stdout; a closed pipe is not an error.
fn out(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Output(format!("cannot write the output: {e}"))),
    }
}

fn warn(warnings: &[Warning]) {
    for w in warnings {
        eprintln!("warning: {}: {}", w.field, w.message);
    }
}

/// A request payload from `path` (`-`: stdin), as written: only its being
/// JSON is checked here. meson checks the rest, so a bad field is named in
/// meson's words (exit 1), and fields it does not know come back as
/// warnings.
fn read_request(path: &Path) -> Result<Value> {
    let text = if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| Failure::Usage(format!("cannot read stdin: {e}")))?;
        s
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?
    };
    serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{} is not JSON: {e}", path.display())))
}

/// Completes when the user presses Ctrl-C (never, if that cannot be
/// watched). The signal is watched from the call on, not from the first
/// poll, so a Ctrl-C right after the progress shows is not lost.
fn ctrl_c() -> impl std::future::Future<Output = ()> + Send {
    #[cfg(unix)]
    {
        let sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
        async move {
            match sig {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Ctx {
    fn new(
        settings: Settings,
        format: Format,
        organization: Option<(String, &'static str)>,
    ) -> Result<Ctx> {
        let mut client = Client::new(&settings.url, &settings.token)
            .map_err(|e| Failure::Config(format!("{e} (from {})", settings.url_from)))?
            .with_retry(retry_policy());
        if let Some((org, _)) = &organization {
            client = client.organization(org);
        }
        Ok(Ctx {
            client,
            settings,
            format,
            organization,
        })
    }

    fn show<T: Show + ?Sized>(&self, value: &T) -> Result<()> {
        out(&output::render(self.format, value).map_err(Failure::Output)?)
    }

    /// Waits for `actions`, showing their progress; fails with every one
    /// that ended in `error` (exit 3), or the ones still running on Ctrl-C
    /// (exit 4).
    async fn wait(&self, actions: &[Action]) -> Result<Vec<Action>> {
        let ids: Vec<Uuid> = actions.iter().map(|a| a.id).collect();
        let cancel = ctrl_c();
        let progress = Progress::new(actions);
        let opts = WaitOpts {
            stop_on_failure: false,
            on_update: Some(progress.callback()),
            ..WaitOpts::default()
        };
        let done = self.client.wait_for_with(&ids, opts, cancel).await;
        progress.finish();
        let done = done?;
        let failed: Vec<Action> = done
            .iter()
            .filter(|a| a.status == "error")
            .cloned()
            .collect();
        if failed.is_empty() {
            Ok(done)
        } else {
            Err(Failure::ActionsFailed(failed))
        }
    }

    /// Runs one action-starting mutation's end: waits (then prints the
    /// final action) or prints it as started.
    async fn finish_action(&self, action: Action, wait: WaitArgs) -> Result<()> {
        if wait.waits() {
            let done = self.wait(std::slice::from_ref(&action)).await?;
            match done.into_iter().next() {
                Some(a) => self.show(&a),
                None => self.show(&action),
            }
        } else {
            self.show(&action)
        }
    }

    /// Shows the action, or with `--wait` waits for it and shows the VM.
    async fn vm_after(&self, id: Uuid, action: Action, wait: WaitArgs) -> Result<()> {
        if !wait.waits() {
            return self.show(&action);
        }
        self.wait(std::slice::from_ref(&action)).await?;
        self.show(&self.client.vm_get(id).await?)
    }

    /// A VM's id from its id, an abbreviation of it, or its name.
    async fn vm_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let vms = self.client.vm_list_all().await?;
        pick("VM", s, vms.iter().map(|v| (v.id, v.name.as_str())))
    }

    /// A cluster's id from its id, an abbreviation of it, or its name.
    async fn cluster_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let clusters = self.client.cluster_list_all().await?;
        pick(
            "cluster",
            s,
            clusters.iter().map(|c| (c.id, c.name.as_str())),
        )
    }

    /// Actions' ids from their ids or abbreviations; an abbreviation must
    /// name exactly one of the caller's actions.
    async fn action_ids(&self, given: &[String]) -> Result<Vec<Uuid>> {
        let mut ids = Vec::with_capacity(given.len());
        for s in given {
            let id = match IdRef::parse(s) {
                Some(IdRef::Full(id)) => id,
                Some(IdRef::Abbrev(_)) => {
                    let found = self.client.actions_get_abbreviated(s).await?;
                    let found: Vec<(Uuid, &str)> =
                        found.iter().map(|a| (a.id, a.command.as_str())).collect();
                    if found.is_empty() {
                        return Err(Failure::NotFound(format!(
                            "no action has an id starting or ending with {s:?}"
                        )));
                    }
                    unique("action", s, &found, "have ids starting or ending with")?
                }
                None => {
                    let need = IdRef::MIN_DIGITS;
                    return Err(Failure::Usage(format!(
                        "{s:?} is not an action id, nor {need} or more of its first or last \
                         hex digits"
                    )));
                }
            };
            ids.push(id);
        }
        Ok(ids)
    }

    async fn dispatch(&self, command: Command) -> Result<()> {
        match command {
            Command::Vm(c) => self.vm(c).await,
            Command::Cluster(c) => self.cluster(c).await,
            Command::Node(NodeCommand::List { cluster }) => {
                let id = self.cluster_id(&cluster).await?;
                self.show(&self.client.cluster_nodes(id).await?)
            }
            Command::Node(NodeCommand::Reboot {
                cluster,
                node,
                wait,
            }) => {
                let (cluster, node) = self.node_id(&cluster, &node).await?;
                let action = self.client.node_reboot(cluster, node).await?;
                self.finish_action(action, wait).await
            }
            Command::Node(NodeCommand::Replace {
                cluster,
                node,
                wait,
            }) => {
                let (cluster, node) = self.node_id(&cluster, &node).await?;
                let action = self.client.node_replace(cluster, node).await?;
                self.finish_action(action, wait).await
            }
            Command::Pool(PoolCommand::DeleteNodes {
                cluster,
                pool,
                nodes,
                wait,
            }) => {
                let (cluster_id, pool_id) = self.pool_id(&cluster, &pool).await?;
                let mut ids = Vec::new();
                for n in &nodes {
                    ids.push(self.node_id(&cluster, n).await?.1);
                }
                let answer = self
                    .client
                    .pool_delete_nodes(cluster_id, pool_id, &ids)
                    .await?;
                warn(&answer.warnings);
                match answer.action {
                    Some(action) => self.finish_action(action, wait).await,
                    None => self.show(&answer.pool),
                }
            }
            Command::Pool(PoolCommand::List { cluster }) => {
                let id = self.cluster_id(&cluster).await?;
                self.show(&self.client.pool_list(id).await?)
            }
            Command::Pool(PoolCommand::Get { cluster, pool }) => {
                let (cluster, pool) = self.pool_id(&cluster, &pool).await?;
                self.show(&self.client.pool_get(cluster, pool).await?)
            }
            Command::Pool(PoolCommand::Create {
                cluster,
                name,
                nodes,
                min,
                max,
                autoscale,
                cpu,
                ram,
                storage,
                gpu,
                labels,
                wait,
            }) => {
                let id = self.cluster_id(&cluster).await?;
                let req = meson_types::kaas::NodePoolRequest {
                    pool_name: name,
                    autoscale: autoscale.then_some(true),
                    min_nodes: min,
                    max_nodes: max,
                    desired_nodes: nodes,
                    specs: Some(meson_types::kaas::NodeSpecsRequest {
                        cpu,
                        ram,
                        storage,
                        gpu,
                    }),
                    labels: label_map(labels),
                    ..meson_types::kaas::NodePoolRequest::default()
                };
                let created = self.client.pool_create(id, &req).await?;
                warn(&created.warnings);
                if !wait.waits() {
                    return self.show(&created.pool);
                }
                self.wait(std::slice::from_ref(&created.action)).await?;
                self.show(&self.client.pool_get(id, created.pool.id).await?)
            }
            Command::Pool(PoolCommand::Delete {
                cluster,
                pool,
                wait,
            }) => {
                let (cluster, pool) = self.pool_id(&cluster, &pool).await?;
                let action = self.client.pool_delete(cluster, pool).await?;
                self.finish_action(action, wait).await
            }
            Command::Pool(PoolCommand::Scale {
                cluster,
                pool,
                nodes,
                min,
                max,
                wait,
            }) => {
                self.pool_scale(&cluster, &pool, nodes, (min, max), wait)
                    .await
            }
            Command::Kubeconfig(KubeconfigCommand::Get {
                cluster,
                expiry_seconds,
            }) => {
                let id = self.cluster_id(&cluster).await?;
                let yaml = self.client.kubeconfig(id, expiry_seconds).await?;
                out(&yaml)
            }
            Command::Volume(c) => self.volume(c).await,
            Command::Image(c) => self.image(c).await,
            Command::SshKey(c) => self.ssh_key(c).await,
            Command::Network(c) => self.network(c).await,
            Command::PortForward(c) => self.port_forward(c).await,
            Command::Backup(c) => self.backup(c).await,
            Command::Console(c) => self.console(c).await,
            Command::Token(c) => self.token(c).await,
            Command::Member(c) => self.member(c).await,
            Command::Membership(MembershipCommand::List) => {
                self.show(&self.client.memberships().await?)
            }
            Command::Invitation(c) => self.invitation(c).await,
            Command::Organization(c) => self.organization(c).await,
            Command::Quota(QuotaCommand::Get) => self.show(&self.client.quotas().await?),
            Command::Plan(c) => self.plan(c).await,
            Command::Usage(a) => self.usage(a).await,
            Command::Statement(c) => self.statement(c).await,
            Command::Price(c) => self.price(c).await,
            Command::Tenant(TenantCommand::Quota(TenantQuotaCommand::Get { tenant })) => {
                self.show(&self.client.tenant_quota(&tenant).await?)
            }
            Command::Tenant(TenantCommand::Quota(TenantQuotaCommand::Set {
                tenant,
                plan,
                vms,
                vcpus,
                ram_mib,
                storage_gb,
                clusters,
                nodes,
                images_gb,
            })) => {
                let v = |q: Option<crate::cli::QuotaValue>| q.map(|q| q.0);
                let req = meson_types::admin::QuotaUpdateRequest {
                    vms: v(vms),
                    vcpus: v(vcpus),
                    ram_mib: v(ram_mib),
                    storage_gb: v(storage_gb),
                    clusters: v(clusters),
                    nodes: v(nodes),
                    images_gb: v(images_gb),
                    plan: plan.map(|p| p.0),
                };
                self.show(&self.client.tenant_quota_update(&tenant, &req).await?)
            }
            Command::Target(c) => self.target(c).await,
            Command::Orphan(c) => self.orphan(c).await,
            Command::Audit(AuditCommand::List {
                tenant,
                subject,
                operation,
                resource,
                since,
                until,
                page,
                per_page,
            }) => {
                let filter = meson_types::admin::AuditListQuery {
                    tenant,
                    subject,
                    operation,
                    resource_id: resource,
                    since,
                    until,
                };
                let page = meson_types::Page {
                    page,
                    per_page,
                    cursor: None,
                };
                self.show(&self.client.audit_list(page, &filter).await?.audit_entries)
            }
            Command::Status => {
                let index = self.client.index().await?;
                let (live, ready) = self.client.health().await?;
                self.show(&output::Status {
                    url: self.settings.url.clone(),
                    name: index.name,
                    version: index.version,
                    live: live.status,
                    ready: ready.status,
                })
            }
            Command::Metrics => out(&self.client.metrics().await?),
            Command::Kubernetes(KubernetesCommand::Versions) => {
                self.show(&self.client.kubernetes_versions().await?)
            }
            Command::Action(c) => self.action(c).await,
            Command::Flavor(_) => self.show(&self.client.flavors().await?),
            Command::Provider(_) => self.show(&self.client.providers().await?),
            Command::Quote { file } => {
                let req = read_request(&file)?;
                let answer = self.client.quote_as_written(&req).await?;
                if matches!(self.format, Format::Table | Format::Wide) {
                    match &answer {
                        meson_types::quote::QuoteAnswer::Vm(q) => warn(&q.warnings),
                        meson_types::quote::QuoteAnswer::Kaas(q) => warn(&q.warnings),
                    }
                }
                self.show(&answer)
            }
            // `run` handles it before resolving the configuration; kept
            // here for completeness, with the settings already resolved.
            Command::Kops(KopsCommand::Translate { offline, args }) => {
                let inputs = config::Inputs {
                    flag_url: Some(self.settings.url.clone()),
                    flag_token: Some(self.settings.token.clone()),
                    ..config::Inputs::default()
                };
                translate(&inputs, offline, &args).await
            }
            // Likewise handled by `run`.
            Command::Elemento(crate::cli::ElementoCommand::Serve(args)) => {
                elemento_serve(self.settings.clone(), args).await
            }
            Command::Completion { shell } => completion(shell),
        }
    }

    async fn vm(&self, c: VmCommand) -> Result<()> {
        match c {
            VmCommand::Create {
                file,
                image,
                ssh_keys,
                wait,
            } => {
                let mut req = read_request(&file)?;
                let not_an_object = |what: &str| {
                    Failure::Usage(format!(
                        "{what} needs the VM request (and its specs.authentication) to be a JSON object"
                    ))
                };
                if let Some(image) = image {
                    let id = self.image_id(&image).await?;
                    object_at(&mut req, &[])
                        .ok_or_else(|| not_an_object("--image"))?
                        .insert("image".into(), id.to_string().into());
                }
                if !ssh_keys.is_empty() {
                    // Named as given: meson finds each by id or name.
                    let ids = object_at(&mut req, &["specs", "authentication"])
                        .ok_or_else(|| not_an_object("--ssh-key"))?
                        .entry("ssh-key-ids")
                        .or_insert_with(|| serde_json::json!([]));
                    let Some(ids) = ids.as_array_mut() else {
                        return Err(Failure::Usage(
                            "--ssh-key: the request's ssh-key-ids is not a list".into(),
                        ));
                    };
                    ids.extend(ssh_keys.into_iter().map(Into::into));
                }
                let created = self.client.vm_create_as_written(&req).await?;
                warn(&created.warnings);
                if !wait.waits() {
                    return self.show(&created);
                }
                let mut actions = vec![created.action.clone()];
                actions.extend(created.next_actions.iter().cloned());
                self.wait(&actions).await?;
                self.show(&self.client.vm_get(created.vm.id).await?)
            }
            VmCommand::List(a) => self.show(&self.client.vm_list_matching(&a.filter()).await?),
            VmCommand::Get { vm } => {
                let id = self.vm_id(&vm).await?;
                self.show(&self.client.vm_get(id).await?)
            }
            VmCommand::Update { vm, name, labels } => {
                let id = self.vm_id(&vm).await?;
                let req = meson_types::requests::NameLabelsUpdate {
                    name,
                    labels: label_map(labels),
                };
                self.show(&self.client.vm_update(id, &req).await?)
            }
            VmCommand::Resize {
                vm,
                cores,
                memory_mib,
                stop,
                wait,
            } => {
                let id = self.vm_id(&vm).await?;
                let req = meson_types::vm::VmResizeRequest {
                    cores,
                    memory_mib,
                    stop: stop.then_some(true),
                };
                let action = self.client.vm_resize(id, &req).await?;
                self.vm_after(id, action, wait).await
            }
            VmCommand::Rebuild {
                vm,
                image,
                os,
                wait,
            } => {
                let id = self.vm_id(&vm).await?;
                let image = match image {
                    Some(i) => Some(self.image_id(&i).await?),
                    None => None,
                };
                let req = meson_types::vm::VmRebuildRequest { image, os };
                let action = self.client.vm_rebuild(id, &req).await?;
                self.vm_after(id, action, wait).await
            }
            VmCommand::Migrate { vm, host, wait } => {
                let id = self.vm_id(&vm).await?;
                let action = self.client.vm_migrate(id, host).await?;
                self.vm_after(id, action, wait).await
            }
            VmCommand::AttachNetwork { vm, network, wait } => {
                let (id, network) = (self.vm_id(&vm).await?, self.network_id(&network).await?);
                let action = self.client.vm_attach_network(id, network).await?;
                self.vm_after(id, action, wait).await
            }
            VmCommand::DetachNetwork { vm, network, wait } => {
                let (id, network) = (self.vm_id(&vm).await?, self.network_id(&network).await?);
                let action = self.client.vm_detach_network(id, network).await?;
                self.vm_after(id, action, wait).await
            }
            VmCommand::Delete { vm, wait } => {
                let id = self.vm_id(&vm).await?;
                let action = self.client.vm_delete(id).await?;
                self.finish_action(action, wait).await
            }
            VmCommand::Poweron { vm, wait } => self.power(&vm, PowerCommand::Poweron, wait).await,
            VmCommand::Poweroff { vm, wait } => self.power(&vm, PowerCommand::Poweroff, wait).await,
            VmCommand::Reboot { vm, wait } => self.power(&vm, PowerCommand::Reboot, wait).await,
            VmCommand::Backup {
                vm,
                name,
                labels,
                wait,
            } => {
                let id = self.vm_id(&vm).await?;
                let req = meson_types::backup::BackupCreateRequest {
                    name,
                    labels: label_map(labels),
                };
                let created = self.client.vm_backup(id, &req).await?;
                warn(&created.warnings);
                if !wait.waits() {
                    return self.show(&created);
                }
                self.wait(std::slice::from_ref(&created.action)).await?;
                self.show(&self.client.backup_get(created.backup.id).await?)
            }
            VmCommand::Backups { vm, list } => {
                let id = self.vm_id(&vm).await?;
                self.show(
                    &self
                        .client
                        .backup_list_all(Some(id), &list.filter())
                        .await?,
                )
            }
            VmCommand::Restore {
                vm,
                backup,
                into,
                name,
                wait,
            } => {
                let id = self.vm_id(&vm).await?;
                // Into the VM itself, the backup is one of the VM's; into a
                // new VM, any of the tenant's.
                let of = (into.as_deref() != Some("new")).then_some(id);
                let backup = self.backup_id(&backup, of).await?;
                let req = meson_types::backup::RestoreRequest { backup, into, name };
                let r = self.client.vm_restore(id, &req).await?;
                warn(&r.warnings);
                if !wait.waits() {
                    return self.show(&r);
                }
                self.wait(std::slice::from_ref(&r.action)).await?;
                self.show(&self.client.vm_get(r.vm.id).await?)
            }
            VmCommand::EnableBackups { vm, window, keep } => {
                let id = self.vm_id(&vm).await?;
                let req = meson_types::backup::BackupPolicyRequest { window, keep };
                self.show(&self.client.vm_enable_backups(id, &req).await?)
            }
            VmCommand::DisableBackups { vm } => {
                let id = self.vm_id(&vm).await?;
                self.show(&self.client.vm_disable_backups(id).await?)
            }
            VmCommand::Console {
                vm,
                listen,
                url_only,
            } => {
                let id = self.vm_id(&vm).await?;
                if url_only {
                    return self.show(&self.client.vm_request_console(id).await?);
                }
                // Boxed: a session's relay is a large future.
                Box::pin(self.vm_console(id, &listen)).await
            }
        }
    }

    /// `vm console`: listens on `listen`, requests a console on VM `id`,
    /// prints where a VNC viewer connects and the password, and relays the
    /// first connection to the console's WebSocket until either side
    /// closes.
    async fn vm_console(&self, id: Uuid, listen: &str) -> Result<()> {
        // Listening first: a port that cannot be had uses up no console.
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| Failure::Local(format!("cannot listen on {listen}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| Failure::Local(format!("cannot listen on {listen}: {e}")))?;
        if !local.ip().is_loopback() {
            eprintln!(
                "warning: listening on {local}, beyond loopback: whoever reaches it first, with \
                 the password, sees the VM's screen"
            );
        }
        let r = self.client.vm_request_console(id).await?;
        // The console's minute, counted from its answer here (not by this
        // machine's clock against meson's).
        let ttl = (r.console.expires - r.console.created)
            .to_std()
            .unwrap_or(Duration::from_secs(60));
        out(&console_line(self.format, local, &r, ttl))?;
        let tcp = match tokio::time::timeout(ttl, listener.accept()).await {
            Ok(Ok((tcp, _))) => tcp,
            Ok(Err(e)) => {
                return Err(Failure::Local(format!(
                    "accepting the VNC viewer's connection on {local}: {e}"
                )));
            }
            Err(_) => {
                return Err(Failure::Local(format!(
                    "no VNC viewer connected to {local} within {} s: console {} has expired \
                     (run `mesonctl vm console` again)",
                    ttl.as_secs(),
                    r.console.id
                )));
            }
        };
        // One connection per console: no other is accepted.
        drop(listener);
        // What `meson_client::console_bridge` does once its listener
        // accepts; accepted here so that waiting ends when the console does.
        meson_client::bridge_stream(tcp, &r.wss_url)
            .await
            .map_err(|e| match e {
                meson_client::Error::Decode(m) => Failure::Local(m),
                other => other.into(),
            })
    }

    async fn console(&self, c: ConsoleCommand) -> Result<()> {
        match c {
            ConsoleCommand::List { vm, status, limit } => {
                let vm = match vm {
                    Some(v) => Some(self.vm_id(&v).await?),
                    None => None,
                };
                self.show(&self.client.console_list(vm, &status, limit).await?)
            }
            ConsoleCommand::Get { console } => {
                let id = self.console_id(&console).await?;
                self.show(&self.client.console_get(id).await?)
            }
            ConsoleCommand::Delete { console } => {
                let id = self.console_id(&console).await?;
                self.show(&self.client.console_delete(id).await?)
            }
        }
    }

    /// A console's id from its id or an abbreviation of it (consoles have
    /// no names), matched among the tenant's newest 100.
    async fn console_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let Some(abbrev) = IdRef::parse(s) else {
            return Err(Failure::Usage(format!(
                "{s:?} is not a console's id, nor {} or more of its first or last hex digits",
                IdRef::MIN_DIGITS
            )));
        };
        let all = self.client.console_list(None, &[], Some(100)).await?;
        let labels: Vec<(Uuid, String)> = all
            .iter()
            .filter(|c| abbrev.matches(&c.id))
            .map(|c| (c.id, format!("VM {} {}", c.vm, c.status)))
            .collect();
        if labels.is_empty() {
            return Err(Failure::NotFound(format!(
                "no console has an id starting or ending with {s:?}"
            )));
        }
        let found: Vec<(Uuid, &str)> = labels.iter().map(|(id, l)| (*id, l.as_str())).collect();
        unique("console", s, &found, "have ids starting or ending with")
    }

    async fn token(&self, c: TokenCommand) -> Result<()> {
        match c {
            TokenCommand::Create {
                name,
                role,
                expires_in,
            } => {
                let req = meson_types::token::TokenCreateRequest {
                    name,
                    role,
                    expires_in,
                };
                let created = self.client.token_create(&req).await?;
                warn(&created.warnings);
                self.show(&created)?;
                eprintln!(
                    "warning: store the secret now: it will not be shown again (meson keeps \
                     only its hash)"
                );
                Ok(())
            }
            TokenCommand::List { revoked } => self.show(&self.client.token_list(revoked).await?),
            TokenCommand::Get { id } => {
                let id = self.token_id(&id).await?;
                self.show(&self.client.token_get(id).await?)
            }
            TokenCommand::Revoke { id } => {
                let id = self.token_id(&id).await?;
                self.show(&self.client.token_revoke(id).await?)
            }
        }
    }

    /// A token's id from its id, an abbreviation of it (among all the
    /// tenant's tokens, revoked ones too), or a live token's name (a
    /// revoked token's name may be another's since).
    async fn token_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let all = self.client.token_list(true).await?;
        let named: Vec<(Uuid, &str)> = all
            .iter()
            .filter(|t| t.revoked.is_none() && t.name == s)
            .map(|t| (t.id, t.name.as_str()))
            .collect();
        if !named.is_empty() {
            return unique("token", s, &named, "are named");
        }
        let Some(abbrev) = IdRef::parse(s) else {
            return Err(Failure::NotFound(if IdRef::too_short(s) {
                format!(
                    "no live token named {s:?} (an abbreviated id needs at least {} hex digits)",
                    IdRef::MIN_DIGITS
                )
            } else {
                format!("no live token named {s:?}")
            }));
        };
        let labels: Vec<(Uuid, String)> = all
            .iter()
            .filter(|t| abbrev.matches(&t.id))
            .map(|t| {
                let state = if t.revoked.is_some() { ", revoked" } else { "" };
                (t.id, format!("{} ({}{state})", t.name, t.role))
            })
            .collect();
        if labels.is_empty() {
            return Err(Failure::NotFound(format!(
                "no token is named {s:?} or has an id starting or ending with it"
            )));
        }
        let found: Vec<(Uuid, &str)> = labels.iter().map(|(id, l)| (*id, l.as_str())).collect();
        unique("token", s, &found, "have ids starting or ending with")
    }

    /// `mesonctl usage`: a table with the totals (-o: the whole answer), or
    /// with --csv meson's CSV as it is.
    async fn usage(&self, a: UsageArgs) -> Result<()> {
        let q = meson_client::UsageQuery {
            from: a.from,
            to: a.to,
            group_by: a.group_by,
            tenant: a.tenant,
        };
        if a.csv {
            return out(&self.client.usage_csv(&q).await?);
        }
        self.show(&self.client.usage(&q).await?)
    }

    async fn statement(&self, c: StatementCommand) -> Result<()> {
        match c {
            StatementCommand::List { tenant } => {
                self.show(&self.client.statement_list(tenant.as_deref()).await?)
            }
            StatementCommand::Get { id, tenant, csv } => {
                let tenant = tenant.as_deref();
                let id = self.statement_id(&id, tenant).await?;
                if csv {
                    return out(&self.client.statement_csv(&id, tenant).await?);
                }
                self.show(&self.client.statement_get(&id, tenant).await?)
            }
        }
    }

    /// A statement's id as meson takes it: `current`, a whole id, or the
    /// id of the one closed statement (among those `statement list` shows
    /// for `tenant`) that an abbreviation names.
    async fn statement_id(&self, s: &str, tenant: Option<&str>) -> Result<String> {
        if s == "current" {
            return Ok(s.to_owned());
        }
        if let Some(id) = whole_id(s) {
            return Ok(id.to_string());
        }
        let Some(abbrev) = IdRef::parse(s) else {
            return Err(Failure::Usage(format!(
                "{s:?} is not `current`, a statement's id, nor {} or more of its first or last \
                 hex digits",
                IdRef::MIN_DIGITS
            )));
        };
        let all = self.client.statement_list(tenant).await?;
        let labels: Vec<(Uuid, String)> = all
            .iter()
            .filter_map(|st| {
                let id: Uuid = st.id.parse().ok()?;
                abbrev.matches(&id).then(|| {
                    let month = st.period_start.format("%Y-%m");
                    (id, format!("{} {month} {}", st.tenant, st.currency))
                })
            })
            .collect();
        if labels.is_empty() {
            return Err(Failure::NotFound(format!(
                "no statement has an id starting or ending with {s:?}"
            )));
        }
        let found: Vec<(Uuid, &str)> = labels.iter().map(|(id, l)| (*id, l.as_str())).collect();
        unique("statement", s, &found, "have ids starting or ending with").map(|id| id.to_string())
    }

    async fn plan(&self, c: PlanCommand) -> Result<()> {
        match c {
            PlanCommand::List => self.show(&self.client.plan_list().await?),
            PlanCommand::Get { name } => self.show(&self.client.plan_get(&name).await?),
            PlanCommand::Put {
                name,
                description,
                quotas: q,
            } => {
                let quotas = meson_types::admin::PlanQuotas {
                    vms: q.vms.map(Some),
                    vcpus: q.vcpus.map(Some),
                    ram_mib: q.ram_mib.map(Some),
                    storage_gb: q.storage_gb.map(Some),
                    clusters: q.clusters.map(Some),
                    nodes: q.nodes.map(Some),
                    images_gb: q.images_gb.map(Some),
                };
                let req = meson_types::admin::PlanPutRequest {
                    description,
                    quotas: Some(quotas),
                };
                self.show(&self.client.plan_put(&name, &req).await?)
            }
            PlanCommand::Delete { name } => Ok(self.client.plan_delete(&name).await?),
        }
    }

    async fn price(&self, c: PriceCommand) -> Result<()> {
        match c {
            PriceCommand::List => self.show(&self.client.price_list().await?),
            PriceCommand::Create {
                meter,
                unit_price,
                currency,
                provider,
                effective_from,
            } => {
                let req = meson_types::usage::PriceCreateRequest {
                    meter,
                    provider,
                    unit_price: Value::String(unit_price),
                    currency,
                    effective_from,
                };
                self.show(&self.client.price_create(&req).await?)
            }
        }
    }

    async fn member(&self, c: MemberCommand) -> Result<()> {
        use meson_types::member::{MemberCreateRequest, MemberUpdateRequest};
        match c {
            MemberCommand::List => self.show(&self.client.member_list().await?),
            MemberCommand::Get { subject } => self.show(&self.client.member_get(&subject).await?),
            MemberCommand::Add {
                subject,
                role,
                email,
            } => {
                let req = MemberCreateRequest {
                    subject,
                    role,
                    email,
                };
                let added = self.client.member_create(&req).await?;
                warn(&added.warnings);
                self.show(&added.member)
            }
            MemberCommand::SetLimits {
                subject,
                vms,
                vcpus,
                ram_mib,
            } => {
                let limits: serde_json::Map<String, serde_json::Value> =
                    [("vms", vms), ("vcpus", vcpus), ("ram_mib", ram_mib)]
                        .into_iter()
                        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), serde_json::json!(v.0))))
                        .collect();
                if limits.is_empty() {
                    return Err(Failure::Usage(
                        "member set-limits: give --vms, --vcpus or --ram-mib".into(),
                    ));
                }
                let req = MemberUpdateRequest {
                    role: None,
                    limits: Some(limits),
                };
                let changed = self.client.member_update(&subject, &req).await?;
                warn(&changed.warnings);
                self.show(&changed.member)
            }
            MemberCommand::SetRole { subject, role } => {
                let req = MemberUpdateRequest {
                    role: Some(role),
                    limits: None,
                };
                let changed = self.client.member_update(&subject, &req).await?;
                warn(&changed.warnings);
                self.show(&changed.member)
            }
            MemberCommand::Remove { subject } => {
                self.show(&self.client.member_delete(&subject).await?)
            }
            MemberCommand::Leave => self.show(&self.client.membership_leave().await?),
        }
    }

    async fn organization(&self, c: OrganizationCommand) -> Result<()> {
        use meson_types::organization::{OrganizationCreateRequest, OrganizationUpdateRequest};
        match c {
            OrganizationCommand::List => self.show(&self.client.organization_list().await?),
            OrganizationCommand::Get { org } => {
                let id = self.organization_id(&org).await?;
                self.show(&self.client.organization_get(&id).await?)
            }
            OrganizationCommand::Create { name, quotas } => {
                let req = OrganizationCreateRequest {
                    name,
                    quotas: quota_flags(&quotas),
                };
                self.show(&self.client.organization_create(&req).await?)
            }
            OrganizationCommand::SetQuotas { org, quotas } => {
                let quotas = quota_flags(&quotas);
                if quotas.is_empty() {
                    return Err(Failure::Usage(
                        "no quota to set: give one or more of --vms, --vcpus, --ram-mib, \
                         --storage-gb, --clusters, --nodes, --images-gb"
                            .into(),
                    ));
                }
                let id = self.organization_id(&org).await?;
                let req = OrganizationUpdateRequest { quotas };
                self.show(&self.client.organization_update(&id, &req).await?)
            }
            OrganizationCommand::Delete { org } => {
                let id = self.organization_id(&org).await?;
                self.show(&self.client.organization_delete(&id).await?)
            }
        }
    }

    /// An organisation's id from its id or, for one below the organisation
    /// the command acts in, its name. A sub-organisation's id has a dot and
    /// is taken as it is; anything else not found as a name is too (meson
    /// says whether there is one).
    async fn organization_id(&self, s: &str) -> Result<String> {
        if s.contains('.') {
            return Ok(s.to_owned());
        }
        let all = self.client.organization_list().await?;
        if all.iter().any(|o| o.id == s) {
            return Ok(s.to_owned());
        }
        let named: Vec<&str> = all
            .iter()
            .filter(|o| o.depth > 0 && o.name == s)
            .map(|o| o.id.as_str())
            .collect();
        match named.as_slice() {
            [] => Ok(s.to_owned()),
            [one] => Ok((*one).to_owned()),
            many => Err(Failure::Usage(format!(
                "{} sub-organisations are named {s:?}: give its id\n{}",
                many.len(),
                many.iter()
                    .map(|id| format!("  {id}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ))),
        }
    }

    async fn invitation(&self, c: InvitationCommand) -> Result<()> {
        match c {
            InvitationCommand::List => self.show(&self.client.invitation_list().await?),
            InvitationCommand::Get { invitation } => {
                let id = self.invitation_id(&invitation).await?;
                self.show(&self.client.invitation_get(id).await?)
            }
            InvitationCommand::Create {
                email,
                role,
                expires_in,
            } => {
                let req = meson_types::member::InvitationCreateRequest {
                    email,
                    role,
                    expires_in,
                };
                let made = self.client.invitation_create(&req).await?;
                warn(&made.warnings);
                self.show(&made)?;
                eprintln!(
                    "warning: pass the token to the invitee now: it will not be shown again                      (meson keeps only its hash); they accept it with `mesonctl invitation                      accept`, signed in with that email"
                );
                Ok(())
            }
            InvitationCommand::Revoke { invitation } => {
                let id = self.invitation_id(&invitation).await?;
                self.show(&self.client.invitation_delete(id).await?)
            }
            InvitationCommand::Accept { secret } => {
                let secret = if secret == "-" {
                    let mut s = String::new();
                    std::io::stdin()
                        .read_to_string(&mut s)
                        .map_err(|e| Failure::Usage(format!("cannot read stdin: {e}")))?;
                    s.trim().to_owned()
                } else {
                    secret
                };
                self.show(&self.client.invitation_accept(&secret).await?)
            }
        }
    }

    /// An invitation's id from its id, an abbreviation of it, or the email
    /// of an open (pending) invitation.
    async fn invitation_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let all = self.client.invitation_list().await?;
        if s.contains('@') {
            let email = s.trim().to_lowercase();
            let open: Vec<(Uuid, &str)> = all
                .iter()
                .filter(|i| i.status == "pending" && i.email == email)
                .map(|i| (i.id, i.email.as_str()))
                .collect();
            if open.is_empty() {
                return Err(Failure::NotFound(format!("no open invitation to {s:?}")));
            }
            return unique("invitation", s, &open, "are open to");
        }
        let Some(abbrev) = IdRef::parse(s) else {
            return Err(Failure::NotFound(format!(
                "{s:?} is neither an invitation's id (8 or more of its hex digits) nor an email \
                 address"
            )));
        };
        let labels: Vec<(Uuid, String)> = all
            .iter()
            .filter(|i| abbrev.matches(&i.id))
            .map(|i| (i.id, format!("{} ({}, {})", i.email, i.role, i.status)))
            .collect();
        if labels.is_empty() {
            return Err(Failure::NotFound(format!(
                "no invitation has an id starting or ending with {s:?}"
            )));
        }
        let found: Vec<(Uuid, &str)> = labels.iter().map(|(id, l)| (*id, l.as_str())).collect();
        unique("invitation", s, &found, "have ids starting or ending with")
    }

    async fn backup(&self, c: BackupCommand) -> Result<()> {
        match c {
            BackupCommand::List { vm, list } => {
                let vm = match vm {
                    Some(v) => Some(self.vm_id(&v).await?),
                    None => None,
                };
                self.show(&self.client.backup_list_all(vm, &list.filter()).await?)
            }
            BackupCommand::Get { backup } => {
                let id = self.backup_id(&backup, None).await?;
                self.show(&self.client.backup_get(id).await?)
            }
            BackupCommand::Update {
                backup,
                name,
                labels,
            } => {
                let id = self.backup_id(&backup, None).await?;
                let req = meson_types::requests::NameLabelsUpdate {
                    name,
                    labels: label_map(labels),
                };
                self.show(&self.client.backup_update(id, &req).await?)
            }
            BackupCommand::Delete { backup, wait } => {
                let id = self.backup_id(&backup, None).await?;
                let action = self.client.backup_delete(id).await?;
                self.finish_action(action, wait).await
            }
        }
    }

    /// A backup's id from its id, an abbreviation of it, or its name; among
    /// VM `of`'s backups when given, else among all the tenant's.
    async fn backup_id(&self, s: &str, of: Option<Uuid>) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let all = self
            .client
            .backup_list_all(of, &meson_client::ListFilter::default())
            .await?;
        pick("backup", s, all.iter().map(|b| (b.id, b.name.as_str())))
    }

    async fn volume(&self, c: VolumeCommand) -> Result<()> {
        use meson_types::requests::NameLabelsUpdate;
        use meson_types::volume::VolumeCreateRequest;
        match c {
            VolumeCommand::Create {
                name,
                size,
                labels,
                provider,
                region,
                continent,
                wait,
            } => {
                let req = VolumeCreateRequest {
                    name,
                    size,
                    labels: label_map(labels),
                    provider,
                    region,
                    continent,
                    ..VolumeCreateRequest::default()
                };
                let created = self.client.volume_create(&req).await?;
                if !wait.waits() {
                    return self.show(&created);
                }
                self.wait(std::slice::from_ref(&created.action)).await?;
                self.show(&self.client.volume_get(created.volume.id).await?)
            }
            VolumeCommand::List { standalone, vm } => {
                let vm = match vm {
                    Some(v) => Some(self.vm_id(&v).await?),
                    None => None,
                };
                let filter = meson_client::VolumeFilter { vm, standalone };
                self.show(&self.client.volume_list_all(&filter).await?)
            }
            VolumeCommand::Get { volume } => {
                let id = self.volume_id(&volume).await?;
                self.show(&self.client.volume_get(id).await?)
            }
            VolumeCommand::Update {
                volume,
                name,
                labels,
            } => {
                let id = self.volume_id(&volume).await?;
                let req = NameLabelsUpdate {
                    name,
                    labels: label_map(labels),
                };
                self.show(&self.client.volume_update(id, &req).await?)
            }
            VolumeCommand::Delete { volume, wait } => {
                let id = self.volume_id(&volume).await?;
                let action = self.client.volume_delete(id).await?;
                self.finish_action(action, wait).await
            }
            VolumeCommand::Attach { volume, vm, wait } => {
                let id = self.volume_id(&volume).await?;
                let vm = self.vm_id(&vm).await?;
                let action = self.client.volume_attach(id, vm).await?;
                self.volume_after(id, action, wait).await
            }
            VolumeCommand::Detach { volume, wait } => {
                let id = self.volume_id(&volume).await?;
                let action = self.client.volume_detach(id).await?;
                self.volume_after(id, action, wait).await
            }
            VolumeCommand::Resize { volume, size, wait } => {
                let id = self.volume_id(&volume).await?;
                let action = self.client.volume_resize(id, size).await?;
                self.volume_after(id, action, wait).await
            }
            VolumeCommand::Move { volume, host, wait } => {
                let id = self.volume_id(&volume).await?;
                let action = self.client.volume_move(id, host).await?;
                self.volume_after(id, action, wait).await
            }
        }
    }

    /// Waits for a volume's action (with progress) and shows the volume as
    /// it is then; without waiting, shows the action.
    async fn volume_after(&self, id: Uuid, action: Action, wait: WaitArgs) -> Result<()> {
        if !wait.waits() {
            return self.show(&action);
        }
        self.wait(std::slice::from_ref(&action)).await?;
        self.show(&self.client.volume_get(id).await?)
    }

    async fn image(&self, c: ImageCommand) -> Result<()> {
        use meson_types::image::{ImageImportRequest, ImageSnapshotRequest};
        use meson_types::requests::NameLabelsUpdate;
        let (created, wait) = match c {
            ImageCommand::Import {
                name,
                from,
                checksum,
                size,
                labels,
                provider,
                region,
                continent,
                wait,
            } => {
                let req = ImageImportRequest {
                    name,
                    url: from,
                    checksum,
                    size,
                    labels: label_map(labels),
                    provider,
                    region,
                    continent,
                };
                (self.client.image_import(&req).await?, wait)
            }
            ImageCommand::Create {
                vm,
                name,
                labels,
                wait,
            } => {
                let vm = self.vm_id(&vm).await?;
                let req = ImageSnapshotRequest {
                    name,
                    labels: label_map(labels),
                };
                (self.client.vm_create_image(vm, &req).await?, wait)
            }
            ImageCommand::List(args) => {
                return self.show(&self.client.image_list_all(&args.filter()).await?);
            }
            ImageCommand::Get { image } => {
                let id = self.image_id(&image).await?;
                return self.show(&self.client.image_get(id).await?);
            }
            ImageCommand::Update {
                image,
                name,
                labels,
            } => {
                let id = self.image_id(&image).await?;
                let req = NameLabelsUpdate {
                    name,
                    labels: label_map(labels),
                };
                return self.show(&self.client.image_update(id, &req).await?);
            }
            ImageCommand::Delete { image, wait } => {
                let id = self.image_id(&image).await?;
                let action = self.client.image_delete(id).await?;
                return self.finish_action(action, wait).await;
            }
        };
        if !wait.waits() {
            return self.show(&created);
        }
        self.wait(std::slice::from_ref(&created.action)).await?;
        self.show(&self.client.image_get(created.image.id).await?)
    }

    async fn ssh_key(&self, c: SshKeyCommand) -> Result<()> {
        use meson_types::requests::NameLabelsUpdate;
        use meson_types::ssh_key::SshKeyCreateRequest;
        match c {
            SshKeyCommand::Create {
                name,
                public_key,
                public_key_from_file,
                labels,
            } => {
                let public_key = match (public_key, public_key_from_file) {
                    (Some(line), _) => line,
                    (None, Some(path)) => std::fs::read_to_string(&path).map_err(|e| {
                        Failure::Usage(format!("cannot read {}: {e}", path.display()))
                    })?,
                    (None, None) => {
                        return Err(Failure::Usage(
                            "give --public-key or --public-key-from-file".into(),
                        ));
                    }
                };
                let req = SshKeyCreateRequest {
                    name,
                    public_key,
                    labels: label_map(labels),
                };
                self.show(&self.client.ssh_key_create(&req).await?)
            }
            SshKeyCommand::List(args) => {
                self.show(&self.client.ssh_key_list_all(&args.filter()).await?)
            }
            SshKeyCommand::Get { ssh_key } => {
                let id = self.ssh_key_id(&ssh_key).await?;
                self.show(&self.client.ssh_key_get(id).await?)
            }
            SshKeyCommand::Update {
                ssh_key,
                name,
                labels,
            } => {
                let id = self.ssh_key_id(&ssh_key).await?;
                let req = NameLabelsUpdate {
                    name,
                    labels: label_map(labels),
                };
                self.show(&self.client.ssh_key_update(id, &req).await?)
            }
            SshKeyCommand::Delete { ssh_key } => {
                let id = self.ssh_key_id(&ssh_key).await?;
                self.client.ssh_key_delete(id).await?;
                Ok(())
            }
        }
    }

    async fn network(&self, c: NetworkCommand) -> Result<()> {
        use meson_types::network::NetworkCreateRequest;
        match c {
            NetworkCommand::Create {
                name,
                cidr,
                no_dhcp,
                gateway,
                labels,
            } => {
                let req = NetworkCreateRequest {
                    name,
                    cidr,
                    dhcp: no_dhcp.then_some(false),
                    gateway,
                    labels: label_map(labels),
                    ..NetworkCreateRequest::default()
                };
                self.show(&self.client.network_create(&req).await?)
            }
            NetworkCommand::List => self.show(&self.client.network_list_all().await?),
            NetworkCommand::Get { network } => {
                let id = self.network_id(&network).await?;
                self.show(&self.client.network_get(id).await?)
            }
            NetworkCommand::Update {
                network,
                name,
                labels,
            } => {
                let id = self.network_id(&network).await?;
                let req = meson_types::requests::NameLabelsUpdate {
                    name,
                    labels: label_map(labels),
                };
                self.show(&self.client.network_update(id, &req).await?)
            }
            NetworkCommand::Delete { network, wait } => {
                let id = self.network_id(&network).await?;
                let action = self.client.network_delete(id).await?;
                self.finish_action(action, wait).await
            }
        }
    }

    async fn port_forward(&self, c: PortForwardCommand) -> Result<()> {
        use meson_types::port_forward::PortForwardCreateRequest;
        match c {
            PortForwardCommand::Create {
                network,
                vm,
                public_port,
                private_port,
                protocol,
                wait,
            } => {
                let network = self.network_id(&network).await?;
                let vm = self.vm_id(&vm).await?;
                let req = PortForwardCreateRequest {
                    protocol,
                    public_port,
                    vm,
                    private_port,
                };
                let created = self.client.port_forward_create(network, &req).await?;
                warn(&created.warnings);
                if !wait.waits() {
                    return self.show(&created);
                }
                self.wait(std::slice::from_ref(&created.action)).await?;
                self.show(
                    &self
                        .client
                        .port_forward_get(network, created.port_forward.id)
                        .await?,
                )
            }
            PortForwardCommand::List { network } => {
                let id = self.network_id(&network).await?;
                self.show(&self.client.port_forward_list(id).await?)
            }
            PortForwardCommand::Get { network, forward } => {
                let (network, id) = self.forward_id(&network, &forward).await?;
                self.show(&self.client.port_forward_get(network, id).await?)
            }
            PortForwardCommand::Delete {
                network,
                forward,
                wait,
            } => {
                let (network, id) = self.forward_id(&network, &forward).await?;
                let action = self.client.port_forward_delete(network, id).await?;
                self.finish_action(action, wait).await
            }
        }
    }

    /// A network's id and one of its port forwards', from the network's id
    /// or name and the forward's id or an abbreviation of it (forwards have
    /// no names).
    async fn forward_id(&self, network: &str, forward: &str) -> Result<(Uuid, Uuid)> {
        let network_id = self.network_id(network).await?;
        if let Some(id) = whole_id(forward) {
            return Ok((network_id, id));
        }
        let Some(abbrev) = IdRef::parse(forward) else {
            return Err(Failure::Usage(format!(
                "{forward:?} is not a port forward's id, nor {} or more of its first or last \
                 hex digits",
                IdRef::MIN_DIGITS
            )));
        };
        let all = self.client.port_forward_list(network_id).await?;
        let labels: Vec<(Uuid, String)> = all
            .iter()
            .filter(|f| abbrev.matches(&f.id))
            .map(|f| {
                (
                    f.id,
                    format!(
                        "{} {} to VM {} port {}",
                        f.protocol,
                        output::public_address(&f.public_ip, f.public_port),
                        f.vm,
                        f.private_port
                    ),
                )
            })
            .collect();
        if labels.is_empty() {
            return Err(Failure::NotFound(format!(
                "no port forward of network {network} has an id starting or ending with \
                 {forward:?}"
            )));
        }
        let found: Vec<(Uuid, &str)> = labels.iter().map(|(id, l)| (*id, l.as_str())).collect();
        let id = unique(
            "port forward",
            forward,
            &found,
            "have ids starting or ending with",
        )?;
        Ok((network_id, id))
    }

    /// A cluster's id and one of its nodes', from their ids or names.
    async fn node_id(&self, cluster: &str, node: &str) -> Result<(Uuid, Uuid)> {
        let cluster_id = self.cluster_id(cluster).await?;
        if let Some(id) = whole_id(node) {
            return Ok((cluster_id, id));
        }
        let nodes = self.client.cluster_nodes(cluster_id).await?;
        let node_id = pick("node", node, nodes.iter().map(|n| (n.id, n.name.as_str())))?;
        Ok((cluster_id, node_id))
    }

    /// A cluster's id and one of its pools', from their ids or names.
    async fn pool_id(&self, cluster: &str, pool: &str) -> Result<(Uuid, Uuid)> {
        let cluster_id = self.cluster_id(cluster).await?;
        if let Some(id) = whole_id(pool) {
            return Ok((cluster_id, id));
        }
        let c = self.client.cluster_get(cluster_id).await?;
        let pool_id = pick(
            "pool",
            pool,
            c.pools.iter().map(|p| (p.id, p.name.as_str())),
        )?;
        Ok((cluster_id, pool_id))
    }

    async fn target(&self, c: TargetCommand) -> Result<()> {
        use meson_types::admin::{TargetCreateRequest, TargetUpdateRequest};
        match c {
            TargetCommand::List => self.show(&self.client.target_list().await?),
            TargetCommand::Get { target } => {
                let id = self.target_id(&target).await?;
                self.show(&self.client.target_get(id).await?)
            }
            TargetCommand::Create {
                name,
                host,
                provider,
                region,
                continent,
                ports:
                    crate::cli::TargetPorts {
                        compute_port,
                        storage_port,
                        network_port,
                        auth_port,
                    },
                disabled,
            } => {
                let req = TargetCreateRequest {
                    name,
                    host,
                    provider,
                    region,
                    continent,
                    compute_port,
                    storage_port,
                    network_port,
                    auth_port,
                    enabled: disabled.then_some(false),
                };
                let r = self.client.target_create(&req).await?;
                warn(&r.warnings);
                self.show(&r.target)
            }
            TargetCommand::Update {
                target,
                host,
                ports:
                    crate::cli::TargetPorts {
                        compute_port,
                        storage_port,
                        network_port,
                        auth_port,
                    },
                enabled,
            } => {
                let id = self.target_id(&target).await?;
                let req = TargetUpdateRequest {
                    host,
                    compute_port,
                    storage_port,
                    network_port,
                    auth_port,
                    enabled,
                };
                let r = self.client.target_update(id, &req).await?;
                warn(&r.warnings);
                self.show(&r.target)
            }
            TargetCommand::Drain { target, wait } => {
                let id = self.target_id(&target).await?;
                let r = self.client.target_drain(id).await?;
                for left in &r.left {
                    eprintln!("left VM {}: {}", left.vm, left.reason);
                }
                if wait.waits() && !r.actions.is_empty() {
                    self.wait(&r.actions).await?;
                }
                self.show(&r)
            }
            TargetCommand::Undrain { target } => {
                let id = self.target_id(&target).await?;
                self.show(&self.client.target_undrain(id).await?.target)
            }
        }
    }

    async fn orphan(&self, c: OrphanCommand) -> Result<()> {
        match c {
            OrphanCommand::List => self.show(&self.client.orphan_list().await?),
            OrphanCommand::Get { orphan } => {
                let id = self.orphan_id(&orphan).await?;
                self.show(&self.client.orphan_get(id).await?)
            }
            OrphanCommand::Adopt {
                orphan,
                tenant,
                name,
            } => {
                let id = self.orphan_id(&orphan).await?;
                let req = meson_types::admin::OrphanAdoptRequest { tenant, name };
                self.show(&self.client.orphan_adopt(id, &req).await?)
            }
            OrphanCommand::Delete { orphan } => {
                let id = self.orphan_id(&orphan).await?;
                self.show(&self.client.orphan_delete(id).await?)
            }
        }
    }

    /// An orphan's id from its id, an abbreviation of it, or its AtomOS
    /// name.
    async fn orphan_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let all = self.client.orphan_list().await?;
        pick(
            "orphan",
            s,
            all.iter().map(|o| (o.id, o.atomos_name.as_str())),
        )
    }

    /// A target's id from its id, an abbreviation of it, or its name.
    async fn target_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let all = self.client.target_list().await?;
        pick("target", s, all.iter().map(|t| (t.id, t.name.as_str())))
    }

    /// A standalone volume's id from its id, an abbreviation of it, or its
    /// name.
    async fn volume_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let all = self
            .client
            .volume_list_all(&meson_client::VolumeFilter::default())
            .await?;
        pick("volume", s, all.iter().map(|v| (v.id, v.name.as_str())))
    }

    /// An image's id from its id, an abbreviation of it, or its name.
    async fn image_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let all = self
            .client
            .image_list_all(&meson_client::ListFilter::default())
            .await?;
        pick("image", s, all.iter().map(|i| (i.id, i.name.as_str())))
    }

    /// An SSH key's id from its id, an abbreviation of it, or its name.
    async fn ssh_key_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let all = self
            .client
            .ssh_key_list_all(&meson_client::ListFilter::default())
            .await?;
        pick("SSH key", s, all.iter().map(|k| (k.id, k.name.as_str())))
    }

    /// A network's id from its id, an abbreviation of it, or its name.
    async fn network_id(&self, s: &str) -> Result<Uuid> {
        if let Some(id) = whole_id(s) {
            return Ok(id);
        }
        let all = self.client.network_list_all().await?;
        pick("network", s, all.iter().map(|n| (n.id, n.name.as_str())))
    }

    async fn power(&self, vm: &str, command: PowerCommand, wait: WaitArgs) -> Result<()> {
        let id = self.vm_id(vm).await?;
        let action = self.client.vm_power(id, command).await?;
        self.finish_action(action, wait).await
    }

    async fn cluster(&self, c: ClusterCommand) -> Result<()> {
        match c {
            ClusterCommand::Create { file, wait } => {
                let req = read_request(&file)?;
                let created = self.client.cluster_create_as_written(&req).await?;
                warn(&created.warnings);
                if !wait.waits() {
                    return self.show(&created);
                }
                self.wait(std::slice::from_ref(&created.action)).await?;
                self.show(&self.client.cluster_get(created.cluster.id).await?)
            }
            ClusterCommand::List(a) => {
                self.show(&self.client.cluster_list_matching(&a.filter()).await?)
            }
            ClusterCommand::Get { cluster } => {
                let id = self.cluster_id(&cluster).await?;
                self.show(&self.client.cluster_get(id).await?)
            }
            ClusterCommand::RotateCredentials { cluster, wait } => {
                let id = self.cluster_id(&cluster).await?;
                let action = self.client.cluster_rotate_credentials(id).await?;
                self.finish_action(action, wait).await
            }
            ClusterCommand::AutoscalerCredentials { cluster } => {
                let id = self.cluster_id(&cluster).await?;
                self.show(&self.client.cluster_autoscaler_credentials(id).await?)
            }
            ClusterCommand::Update {
                cluster,
                labels,
                update_policy,
            } => {
                let id = self.cluster_id(&cluster).await?;
                let req = meson_types::cluster::ClusterUpdateRequest {
                    labels: label_map(labels),
                    update_policy,
                };
                self.show(&self.client.cluster_update(id, &req).await?)
            }
            ClusterCommand::Delete { cluster, wait } => {
                let id = self.cluster_id(&cluster).await?;
                let action = self.client.cluster_delete(id).await?;
                self.finish_action(action, wait).await
            }
            ClusterCommand::Upgrade {
                cluster,
                version,
                wait,
            } => {
                let id = self.cluster_id(&cluster).await?;
                let req = ClusterUpgradeRequest {
                    kubernetes_version: version,
                    ..ClusterUpgradeRequest::default()
                };
                let r = self.client.cluster_upgrade(id, &req).await?;
                warn(&r.warnings);
                self.finish_action(r.action, wait).await
            }
        }
    }

    async fn pool_scale(
        &self,
        cluster: &str,
        pool: &str,
        nodes: u32,
        (min, max): (Option<u32>, Option<u32>),
        wait: WaitArgs,
    ) -> Result<()> {
        let (cluster_id, pool_id) = self.pool_id(cluster, pool).await?;
        let req = NodePoolUpdateRequest {
            desired_nodes: Some(nodes),
            min_nodes: min,
            max_nodes: max,
            ..NodePoolUpdateRequest::default()
        };
        let answer = self.client.pool_update(cluster_id, pool_id, &req).await?;
        warn(&answer.warnings);
        match answer.action {
            Some(action) => self.finish_action(action, wait).await,
            None => {
                eprintln!(
                    "pool {} already has {} nodes: nothing to do",
                    answer.pool.name, answer.pool.current_nodes
                );
                self.show(&answer.pool)
            }
        }
    }

    async fn action(&self, c: ActionCommand) -> Result<()> {
        match c {
            ActionCommand::Get { ids } => {
                let ids = self.action_ids(&ids).await?;
                match ids.as_slice() {
                    [one] => self.show(&self.client.action_get(*one).await?),
                    many => self.show(&self.client.actions_get(many).await?),
                }
            }
            ActionCommand::List { kind, id } => {
                let collection = match kind.to_ascii_lowercase().as_str() {
                    "vm" | "vms" => "vms",
                    "cluster" | "clusters" => "clusters",
                    "volume" | "volumes" => "volumes",
                    "image" | "images" => "images",
                    "network" | "networks" => "networks",
                    "backup" | "backups" => "backups",
                    other => {
                        return Err(Failure::Usage(format!(
                            "unknown resource kind {other:?}: vm, cluster, volume, image, \
                             network or backup"
                        )));
                    }
                };
                let id = match collection {
                    "vms" => self.vm_id(&id).await?,
                    "clusters" => self.cluster_id(&id).await?,
                    "volumes" => self.volume_id(&id).await?,
                    "images" => self.image_id(&id).await?,
                    "backups" => self.backup_id(&id, None).await?,
                    _ => self.network_id(&id).await?,
                };
                self.show(&self.client.resource_actions(collection, id).await?)
            }
            ActionCommand::Watch { ids } => {
                let ids = self.action_ids(&ids).await?;
                // Show where each stands first: an unknown id fails here.
                let mut first = Vec::new();
                for id in &ids {
                    first.push(self.client.action_get(*id).await?);
                }
                let done = self.wait(&first).await?;
                self.show(&done)
            }
        }
    }
}

/// `vm console`'s line: where the viewer connects and its password; one
/// line of JSON for `-o json` and `-o yaml` (whose reader takes JSON).
fn console_line(
    format: Format,
    local: std::net::SocketAddr,
    r: &meson_types::console::ConsoleRequestResponse,
    ttl: Duration,
) -> String {
    match format {
        Format::Table | Format::Wide => format!(
            "VNC viewer: {local}  password: {}  (connect within {} s; one connection)\n",
            r.password,
            ttl.as_secs()
        ),
        Format::Json | Format::Yaml => {
            let line = serde_json::json!({
                "address": local.to_string(),
                "password": r.password,
                "console": r.console,
            });
            format!("{line}\n")
        }
    }
}

/// Labels given as `key=value` flags: none given is no change.
fn label_map(labels: Vec<(String, String)>) -> Option<std::collections::BTreeMap<String, String>> {
    (!labels.is_empty()).then(|| labels.into_iter().collect())
}

/// `s` when it is a whole id: no lookup needed.
fn whole_id(s: &str) -> Option<Uuid> {
    match IdRef::parse(s) {
        Some(IdRef::Full(id)) => Some(id),
        _ => None,
    }
}

/// The one id among `items` (id, name) that `s` names: the item named `s`
/// if there is one, else the item whose id `s` abbreviates (8 or more of its
/// first or last hex digits, as tables print it). Two items named alike, or
/// an abbreviation of two ids, is an error listing them.
fn pick<'a>(kind: &str, s: &str, items: impl Iterator<Item = (Uuid, &'a str)>) -> Result<Uuid> {
    let items: Vec<(Uuid, &str)> = items.collect();
    let named: Vec<(Uuid, &str)> = items.iter().copied().filter(|(_, n)| *n == s).collect();
    if !named.is_empty() {
        return unique(kind, s, &named, "are named");
    }
    match IdRef::parse(s) {
        Some(r) => {
            let matched: Vec<(Uuid, &str)> = items
                .iter()
                .copied()
                .filter(|(id, _)| r.matches(id))
                .collect();
            if matched.is_empty() {
                return Err(Failure::NotFound(format!(
                    "no {kind} is named {s:?} or has an id starting or ending with it"
                )));
            }
            unique(kind, s, &matched, "have ids starting or ending with")
        }
        None if IdRef::too_short(s) => Err(Failure::NotFound(format!(
            "no {kind} named {s:?} (an abbreviated id needs at least {} hex digits)",
            IdRef::MIN_DIGITS
        ))),
        None => Err(Failure::NotFound(format!("no {kind} named {s:?}"))),
    }
}

/// The quotas given as flags, by meson's names; those not given are
/// absent.
fn quota_flags(q: &PlanQuotas) -> std::collections::BTreeMap<String, i64> {
    [
        ("vms", q.vms),
        ("vcpus", q.vcpus),
        ("ram_mib", q.ram_mib),
        ("storage_gb", q.storage_gb),
        ("clusters", q.clusters),
        ("nodes", q.nodes),
        ("images_gb", q.images_gb),
    ]
    .into_iter()
    .filter_map(|(name, n)| n.map(|n| (name.to_owned(), n)))
    .collect()
}

/// The single id of `found` (never empty), or an error listing them all.
fn unique(kind: &str, s: &str, found: &[(Uuid, &str)], how: &str) -> Result<Uuid> {
    match found {
        [(one, _)] => Ok(*one),
        many => Err(Failure::Usage(format!(
            "{} {kind}s {how} {s:?}: give more of the id\n{}",
            many.len(),
            many.iter()
                .map(|(id, name)| format!("  {id}  {name}"))
                .collect::<Vec<_>>()
                .join("\n")
        ))),
    }
}

/// The regions to match zones against: meson's own when it answers
/// quickly, else mesond dev's.
async fn catalog(inputs: &config::Inputs, offline: bool) -> (kops::Catalog, Option<String>) {
    if offline {
        return (kops::Catalog::builtin(), None);
    }
    let asked = async {
        let s = config::resolve(inputs)?;
        let client = Client::new(&s.url, &s.token)
            .map_err(|e| e.to_string())?
            .with_retry(RetryPolicy {
                max_retries: 0,
                ..retry_policy()
            });
        let providers = tokio::time::timeout(Duration::from_secs(3), client.providers())
            .await
            .map_err(|_| format!("{} did not answer in time", s.url))?
            .map_err(|e| format!("{e}"))?;
        Ok::<_, String>(kops::Catalog {
            regions: providers
                .iter()
                .flat_map(|p| {
                    p.regions.iter().map(|r| kops::Region {
                        provider: p.name.clone(),
                        name: r.name.clone(),
                        continent: r.continent.clone(),
                    })
                })
                .collect(),
        })
    };
    match asked.await {
        Ok(c) if !c.regions.is_empty() => (c, None),
        Ok(_) => (
            kops::Catalog::builtin(),
            Some("meson lists no regions".into()),
        ),
        Err(e) => (kops::Catalog::builtin(), Some(e)),
    }
}

/// `kops translate`: the payload on stdout, a line per flag not honoured
/// on stderr.
async fn translate(inputs: &config::Inputs, offline: bool, args: &[String]) -> Result<()> {
    let mentions_zones = args.iter().any(|a| a.contains("zones"));
    let (catalog, why_builtin) = if mentions_zones {
        catalog(inputs, offline).await
    } else {
        (kops::Catalog::builtin(), None)
    };
    let t = kops::translate(args, &catalog).map_err(Failure::Usage)?;
    if let Some(why) = why_builtin {
        eprintln!("note: zones matched against mesond dev's regions (meson not asked: {why})");
    }
    for r in &t.reports {
        eprintln!("warning: {r}");
    }
    out(&(t.pretty + "\n"))
}

/// The object at `path` in `v`, made (empty) where it is missing; `None`
/// where something else than an object is in the way.
fn object_at<'a>(
    v: &'a mut serde_json::Value,
    path: &[&str],
) -> Option<&'a mut serde_json::Map<String, serde_json::Value>> {
    let mut at = v;
    for key in path {
        at = at
            .as_object_mut()?
            .entry(*key)
            .or_insert_with(|| serde_json::json!({}));
    }
    at.as_object_mut()
}
