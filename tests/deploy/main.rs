//! The deployment files hold together: `deploy/Dockerfile`,
//! `docker-compose.yml` with `deploy/compose/`, and `deploy/kubernetes/`.
//!
//! Nothing here runs Docker or a cluster. Each test reads the files, and
//! meson's own sources for what meson has (`mesond`'s subcommands, the
//! environment variables it reads, `atomos-sim`'s flags, the binaries of the
//! workspace), and fails naming the file and everything wrong in it.

use serde_yaml_ng::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

// --- files --------------------------------------------------------------------

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// `path` relative to the workspace, for messages.
fn rel(path: &Path) -> String {
    let root = root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", rel(path)))
}

/// Every file under `dir` (recursively), sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("listing {}: {e}", rel(&d)));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("listing {}: {e}", rel(&d)))
                .path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.contains(&e))
}

/// Every YAML file the deployment consists of.
fn yaml_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = files_under(&root().join("deploy"))
        .into_iter()
        .filter(|p| has_extension(p, &["yaml", "yml"]))
        .collect();
    files.push(root().join("docker-compose.yml"));
    files
}

/// Every document of a YAML file (multi-document files too), with merge keys
/// (`<<: *anchor`) applied as Compose applies them.
fn documents(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", rel(path)))?;
    let mut docs = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
        // `Value::deserialize(document)`, through a generic entry point of
        // serde_yaml_ng (this crate cannot name serde's trait); a Value has
        // no enums for the singleton-map adapter to rewrite.
        let mut value: Value = serde_yaml_ng::with::singleton_map::deserialize(document)
            .map_err(|e| format!("{}: document {}: {e}", rel(path), i + 1))?;
        value
            .apply_merge()
            .map_err(|e| format!("{}: document {}: merge keys: {e}", rel(path), i + 1))?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    if docs.is_empty() {
        return Err(format!("{}: no YAML document", rel(path)));
    }
    Ok(docs)
}

fn one_document(path: &Path) -> Value {
    let mut docs = documents(path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(docs.len(), 1, "{}: one YAML document expected", rel(path));
    docs.remove(0)
}

/// Fails with every problem at once.
fn report(what: &str, problems: &[String]) {
    let mut seen = BTreeSet::new();
    let problems: Vec<&String> = problems.iter().filter(|p| seen.insert(*p)).collect();
    assert!(
        problems.is_empty(),
        "{what}: {} problem(s):\n  - {}",
        problems.len(),
        problems
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join("\n  - ")
    );
}

// --- YAML values ----------------------------------------------------------------

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(*key))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path).and_then(Value::as_str)
}

fn seq(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_sequence).map_or(&[], Vec::as_slice)
}

/// A scalar as the string a process would see in its environment.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

/// A mapping of scalars (labels, environment, ConfigMap data).
fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_mapping)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), scalar(v)?)))
                .collect()
        })
        .unwrap_or_default()
}

/// A list of strings, or a shell-form string, as an argv.
fn argv_of(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Sequence(items) => items.iter().map(scalar).collect(),
        Value::String(s) => Some(s.split_whitespace().map(str::to_owned).collect()),
        _ => None,
    }
}

fn port_of(addr: &str) -> Result<SocketAddr, String> {
    addr.parse::<SocketAddr>()
        .map_err(|e| format!("{addr:?} is not an address: {e}"))
}

/// `host:port` of `scheme://host:port/...` or `host:port`.
fn host_port(endpoint: &str) -> Option<(String, u16)> {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    Some((host.to_owned(), port.parse().ok()?))
}

// --- what meson has, from its sources --------------------------------------------

struct Meson {
    /// `mesond`'s subcommands (`enum Mode`, as clap names them).
    modes: BTreeSet<String>,
    /// The environment variables meson's processes read.
    env: BTreeSet<String>,
    /// `atomos-sim`'s long flags.
    sim_flags: BTreeSet<String>,
    /// Every binary of the workspace, and its package.
    bins: BTreeMap<String, String>,
}

/// clap's name for a variant: `FooBar` is `foo-bar`.
fn kebab(ident: &str) -> String {
    let mut out = String::new();
    for (i, c) in ident.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The lines of the `{ ... }` block opening on the line holding `header`.
fn block<'a>(source: &'a str, header: &str) -> Vec<&'a str> {
    let mut lines = source.lines().skip_while(|l| !l.contains(header));
    let mut out = Vec::new();
    let mut depth = 0i32;
    for line in lines.by_ref() {
        depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
        out.push(line);
        if depth <= 0 && line.contains('}') {
            break;
        }
    }
    out
}

fn ident_prefix(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

fn mesond_modes() -> BTreeSet<String> {
    let path = root().join("services/mesond/src/main.rs");
    let source = read(&path);
    let lines = block(&source, "enum Mode");
    let mut modes = BTreeSet::new();
    let mut depth = 0i32;
    for line in lines.iter().skip(1) {
        let t = line.trim();
        // Variants sit at depth 0 of the enum's body; skip docs and attributes.
        if depth == 0 && !t.starts_with("//") && !t.starts_with('#') {
            let ident = ident_prefix(t);
            if ident.starts_with(|c: char| c.is_ascii_uppercase()) {
                modes.insert(kebab(ident));
            }
        }
        depth += t.matches(['{', '(']).count() as i32 - t.matches(['}', ')']).count() as i32;
    }
    assert!(
        modes.contains("migrate") && modes.len() >= 3,
        "{}: could not read `enum Mode`'s variants (found {modes:?})",
        rel(&path)
    );
    modes
}

fn sources(dir: &Path) -> Vec<PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|p| has_extension(p, &["rs"]))
        .collect()
}

/// Every `"MESON_..."` and `"ATOMOS_SIM_..."` string literal, and
/// `"DATABASE_URL"`, in meson's daemon and the simulator.
fn env_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for dir in ["services/mesond/src", "services/atomos-sim/src"] {
        for file in sources(&root().join(dir)) {
            let text = read(&file);
            let literals = text
                .match_indices("\"MESON_")
                .chain(text.match_indices("\"ATOMOS_SIM_"));
            for (i, _) in literals {
                let rest = &text[i + 1..];
                let Some(end) = rest.find('"') else { continue };
                let name = &rest[..end];
                if name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
                {
                    names.insert(name.to_owned());
                }
            }
            if text.contains("\"DATABASE_URL\"") {
                names.insert("DATABASE_URL".to_owned());
            }
        }
    }
    assert!(
        names.contains("DATABASE_URL") && names.contains("MESON_HTTP_ADDR"),
        "could not read the environment variables meson reads from its sources: {names:?}"
    );
    names
}

/// Variables meson reads through libraries (OpenTelemetry, tracing's
/// default filter) or that belong to the postgres image.
fn env_name_known(meson: &Meson, name: &str) -> bool {
    meson.env.contains(name)
        || name.starts_with("OTEL_")
        || name == "RUST_LOG"
        || name.starts_with("POSTGRES_")
}

fn sim_flags() -> BTreeSet<String> {
    let path = root().join("services/atomos-sim/src/main.rs");
    let source = read(&path);
    let mut flags: BTreeSet<String> = ["help", "version"].map(str::to_owned).into();
    let mut pending: Option<String> = None;
    for line in block(&source, "struct Args").iter().skip(1) {
        let t = line.trim();
        if t.starts_with("#[arg(") {
            pending = Some(t.to_owned());
        } else if !t.starts_with("//") && !t.starts_with('#') && t.contains(':') {
            let field = ident_prefix(t.trim_start_matches("pub "));
            if let Some(attr) = pending.take()
                && attr.contains("long")
            {
                let name = attr
                    .split_once("long = \"")
                    .and_then(|(_, r)| r.split_once('"'))
                    .map_or_else(|| field.replace('_', "-"), |(n, _)| n.to_owned());
                flags.insert(name);
            }
        }
    }
    assert!(
        flags.contains("hosts-file") && flags.contains("bind"),
        "{}: could not read atomos-sim's flags (found {flags:?})",
        rel(&path)
    );
    flags
}

/// `name = "..."` of a `[package]` or `[[bin]]` section.
fn workspace_bins() -> BTreeMap<String, String> {
    let mut bins = BTreeMap::new();
    for manifest in files_under(&root().join("services"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "Cargo.toml"))
    {
        let text = read(&manifest);
        let (mut section, mut package, mut declared) = (String::new(), None, Vec::new());
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line.to_owned();
            } else if let Some(value) = line.strip_prefix("name = \"") {
                let name = value.trim_end_matches('"').to_owned();
                match section.as_str() {
                    "[package]" => package = Some(name),
                    "[[bin]]" => declared.push(name),
                    _ => {}
                }
            }
        }
        let Some(package) = package else { continue };
        let dir = manifest.parent().expect("a manifest's directory");
        if declared.is_empty() && dir.join("src/main.rs").exists() {
            declared.push(package.clone());
        }
        for bin in declared {
            bins.insert(bin, package.clone());
        }
    }
    bins
}

fn meson() -> Meson {
    Meson {
        modes: mesond_modes(),
        env: env_names(),
        sim_flags: sim_flags(),
        bins: workspace_bins(),
    }
}

// --- the Dockerfile -----------------------------------------------------------------

struct Stage {
    base: String,
    name: Option<String>,
    /// (INSTRUCTION, arguments), continuation lines joined.
    steps: Vec<(String, String)>,
}

impl Stage {
    fn args(&self, instruction: &str) -> impl Iterator<Item = &str> {
        self.steps
            .iter()
            .filter(move |(i, _)| i == instruction)
            .map(|(_, a)| a.as_str())
    }
}

fn dockerfile_path() -> PathBuf {
    root().join("deploy/Dockerfile")
}

fn dockerfile() -> Vec<Stage> {
    let path = dockerfile_path();
    let text = read(&path);
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part.trim());
                current.push(' ');
            }
            None => {
                current.push_str(t);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    assert!(
        current.is_empty(),
        "{}: ends inside a continuation",
        rel(&path)
    );
    let mut stages: Vec<Stage> = Vec::new();
    for line in logical {
        let (instruction, args) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let (instruction, args) = (instruction.to_ascii_uppercase(), args.trim().to_owned());
        if instruction == "FROM" {
            let words: Vec<&str> = args
                .split_whitespace()
                .filter(|w| !w.starts_with("--"))
                .collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some((*name).to_owned()),
                [_] => None,
                _ => panic!("{}: cannot read `FROM {args}`", rel(&path)),
            };
            stages.push(Stage {
                base: words[0].to_owned(),
                name,
                steps: Vec::new(),
            });
        } else {
            let stage = stages
                .last_mut()
                .unwrap_or_else(|| panic!("{}: {instruction} before FROM", rel(&path)));
            stage.steps.push((instruction, args));
        }
    }
    assert!(!stages.is_empty(), "{}: no FROM", rel(&path));
    stages
}

/// The exec form (`["a", "b"]`) or the shell form.
fn dockerfile_argv(args: &str) -> Vec<String> {
    serde_json::from_str::<Vec<String>>(args)
        .unwrap_or_else(|_| vec!["/bin/sh".to_owned(), "-c".to_owned(), args.to_owned()])
}

/// The image's ENTRYPOINT and CMD (its last stage's last ones).
fn image_defaults(stages: &[Stage]) -> (Vec<String>, Vec<String>) {
    let last = stages.last().expect("a stage");
    let entrypoint = last
        .args("ENTRYPOINT")
        .last()
        .map(dockerfile_argv)
        .unwrap_or_default();
    let cmd = last
        .args("CMD")
        .last()
        .map(dockerfile_argv)
        .unwrap_or_default();
    (entrypoint, cmd)
}

// --- compose ------------------------------------------------------------------

fn compose_path() -> PathBuf {
    root().join("docker-compose.yml")
}

fn compose() -> Value {
    one_document(&compose_path())
}

fn compose_services(compose: &Value) -> Vec<(String, &Value)> {
    let services = compose
        .get("services")
        .and_then(Value::as_mapping)
        .expect("docker-compose.yml: `services` is a mapping");
    services
        .iter()
        .map(|(k, v)| (k.as_str().expect("a service name").to_owned(), v))
        .collect()
}

/// The image every meson service shares (the one the `build`s make).
fn meson_image(compose: &Value) -> String {
    let images: BTreeSet<&str> = compose_services(compose)
        .into_iter()
        .filter(|(_, s)| s.get("build").is_some())
        .filter_map(|(_, s)| str_at(s, &["image"]))
        .collect();
    assert_eq!(
        images.len(),
        1,
        "docker-compose.yml: every service built from deploy/Dockerfile shares one image name \
        (found {images:?})"
    );
    images.into_iter().next().expect("one image").to_owned()
}

fn is_meson_service(service: &Value, image: &str) -> bool {
    service.get("build").is_some() || str_at(service, &["image"]) == Some(image)
}

fn compose_env(service: &Value) -> BTreeMap<String, String> {
    match service.get("environment") {
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect(),
        other => string_map(other),
    }
}

/// (source, target) of every volume; a source starting with `.` or `/` is
/// a bind mount of a host path.
fn compose_mounts(service: &Value) -> Vec<(String, String)> {
    seq(service.get("volumes"))
        .iter()
        .filter_map(|v| match v {
            Value::String(s) => {
                let mut parts = s.split(':');
                Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
            }
            long => Some((
                str_at(long, &["source"])?.to_owned(),
                str_at(long, &["target"])?.to_owned(),
            )),
        })
        .collect()
}

fn is_bind(source: &str) -> bool {
    source.starts_with('.') || source.starts_with('/')
}

/// The host file a container path of `service` is, through a bind mount.
fn host_file(service: &Value, container_path: &str) -> Option<PathBuf> {
    compose_mounts(service)
        .into_iter()
        .find_map(|(source, target)| {
            let rest = container_path.strip_prefix(target.trim_end_matches('/'))?;
            if !(rest.is_empty() || rest.starts_with('/')) || !is_bind(&source) {
                return None;
            }
            let file = root().join(source);
            let rest = rest.trim_start_matches('/');
            Some(if rest.is_empty() {
                file
            } else {
                file.join(rest)
            })
        })
}

/// What the container runs: Compose's entrypoint and command over the image's
/// (a new entrypoint drops the image's CMD, as Docker does).
fn compose_argv(service: &Value, image: &(Vec<String>, Vec<String>)) -> Vec<String> {
    let entrypoint = service.get("entrypoint").and_then(argv_of);
    let command = service.get("command").and_then(argv_of);
    let mut argv = entrypoint.clone().unwrap_or_else(|| image.0.clone());
    argv.extend(command.unwrap_or_else(|| match entrypoint {
        Some(_) => Vec::new(),
        None => image.1.clone(),
    }));
    argv
}

/// The ports a service listens on: a meson service where its `*_ADDR`
/// variables say, any other what it exposes or publishes.
fn compose_listening(meson: &Meson, service: &Value, image: &str) -> BTreeSet<u16> {
    if is_meson_service(service, image) {
        return compose_env(service)
            .iter()
            .filter(|(k, _)| is_listen_var(meson, k))
            .filter_map(|(_, v)| port_of(v).ok().map(|a| a.port()))
            .collect();
    }
    published_and_exposed(service)
}

fn published_and_exposed(service: &Value) -> BTreeSet<u16> {
    let mut ports = BTreeSet::new();
    for p in seq(service.get("ports"))
        .iter()
        .chain(seq(service.get("expose")))
    {
        let container_side = match p {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s
                .rsplit(':')
                .next()
                .and_then(|c| c.split('/').next())
                .and_then(|c| c.parse().ok()),
            long => at(long, &["target"]).and_then(Value::as_u64),
        };
        if let Some(port) = container_side.and_then(|p| u16::try_from(p).ok()) {
            ports.insert(port);
        }
    }
    ports
}

/// `MESON_*_ADDR` variables meson listens on.
fn is_listen_var(meson: &Meson, name: &str) -> bool {
    name.starts_with("MESON_")
        && name.ends_with("_ADDR")
        && !name.contains("PUBLIC")
        && meson.env.contains(name)
}

// --- Kubernetes -------------------------------------------------------------------

fn kube_dir() -> PathBuf {
    root().join("deploy/kubernetes")
}

fn kustomization() -> Value {
    one_document(&kube_dir().join("kustomization.yaml"))
}

/// Every document of every manifest under deploy/kubernetes (the
/// kustomization apart), with its file.
fn kube_documents() -> Vec<(PathBuf, Value)> {
    files_under(&kube_dir())
        .into_iter()
        .filter(|p| has_extension(p, &["yaml", "yml"]))
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .flat_map(|p| {
            documents(&p)
                .unwrap_or_else(|e| panic!("{e}"))
                .into_iter()
                .map(move |d| (p.clone(), d))
        })
        .collect()
}

fn kind_name(doc: &Value) -> String {
    format!(
        "{} {}",
        str_at(doc, &["kind"]).unwrap_or("?"),
        str_at(doc, &["metadata", "name"]).unwrap_or("?")
    )
}

/// The pod template of a workload.
fn pod_template(doc: &Value) -> Option<&Value> {
    match str_at(doc, &["kind"])? {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            at(doc, &["spec", "template"])
        }
        "CronJob" => at(doc, &["spec", "jobTemplate", "spec", "template"]),
        _ => None,
    }
}

fn containers(template: &Value) -> impl Iterator<Item = &Value> {
    seq(at(template, &["spec", "containers"]))
        .iter()
        .chain(seq(at(template, &["spec", "initContainers"])))
}

/// A container's environment: its envFrom sources, then its env.
fn container_env(
    container: &Value,
    docs: &[(PathBuf, Value)],
    problems: &mut Vec<String>,
    whose: &str,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for source in seq(container.get("envFrom")) {
        let (kind, reference) = match (source.get("configMapRef"), source.get("secretRef")) {
            (Some(r), _) => ("ConfigMap", r),
            (_, Some(r)) => ("Secret", r),
            _ => continue,
        };
        let name = str_at(reference, &["name"]).unwrap_or("");
        let found = docs.iter().find(|(_, d)| {
            str_at(d, &["kind"]) == Some(kind) && str_at(d, &["metadata", "name"]) == Some(name)
        });
        match found {
            Some((_, doc)) => env.extend(config_data(doc)),
            None if reference.get("optional").and_then(Value::as_bool) == Some(true) => {}
            None => problems.push(format!(
                "{whose}: envFrom names {kind} {name:?}, which no manifest defines"
            )),
        }
    }
    for var in seq(container.get("env")) {
        if let Some(name) = str_at(var, &["name"]) {
            let value = var.get("value").and_then(scalar).unwrap_or_default();
            env.insert(name.to_owned(), value);
        }
    }
    env
}

/// A ConfigMap's or Secret's keys and values.
fn config_data(doc: &Value) -> BTreeMap<String, String> {
    use base64::Engine;
    let mut data = string_map(doc.get("stringData"));
    for (k, v) in string_map(doc.get("data")) {
        let value = match str_at(doc, &["kind"]) {
            Some("Secret") => base64::engine::general_purpose::STANDARD
                .decode(v.as_bytes())
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .unwrap_or_default(),
            _ => v,
        };
        data.entry(k).or_insert(value);
    }
    data
}

/// (name, containerPort) of a container.
fn container_ports(container: &Value) -> Vec<(Option<String>, u16)> {
    seq(container.get("ports"))
        .iter()
        .filter_map(|p| {
            let port = u16::try_from(at(p, &["containerPort"])?.as_u64()?).ok()?;
            Some((str_at(p, &["name"]).map(str::to_owned), port))
        })
        .collect()
}

/// Whether `port` (a number or a name) is one of `ports`.
fn names_port(port: &Value, ports: &[(Option<String>, u16)]) -> bool {
    match port {
        Value::Number(n) => n
            .as_u64()
            .is_some_and(|n| ports.iter().any(|(_, p)| u64::from(*p) == n)),
        Value::String(s) => match s.parse::<u16>() {
            Ok(n) => ports.iter().any(|(_, p)| *p == n),
            Err(_) => ports
                .iter()
                .any(|(name, _)| name.as_deref() == Some(s.as_str())),
        },
        _ => false,
    }
}

fn labels(v: Option<&Value>) -> BTreeMap<String, String> {
    string_map(v)
}

fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// What a container runs: command over the image's ENTRYPOINT, args over
/// its CMD (a command drops the image's CMD, as Kubernetes does).
fn container_argv(container: &Value, image: &(Vec<String>, Vec<String>)) -> Vec<String> {
    let command = container.get("command").and_then(argv_of);
    let args = container.get("args").and_then(argv_of);
    let mut argv = command.clone().unwrap_or_else(|| image.0.clone());
    argv.extend(args.unwrap_or_else(|| match command {
        Some(_) => Vec::new(),
        None => image.1.clone(),
    }));
    argv
}

/// The image name the kustomization rewrites (`images[].name`).
fn kube_image_names(kustomization: &Value) -> BTreeSet<String> {
    seq(kustomization.get("images"))
        .iter()
        .filter_map(|i| str_at(i, &["name"]).map(str::to_owned))
        .collect()
}

// --- commands ---------------------------------------------------------------------

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Checks what one container runs: `mesond <mode>`, `atomos-sim <flags>`, or
/// a shell script (read through `script`, which maps the container path to
/// its host file) that runs one of them with the remaining arguments.
fn check_argv(
    meson: &Meson,
    argv: &[String],
    script: &dyn Fn(&str) -> Option<PathBuf>,
    whose: &str,
    problems: &mut Vec<String>,
) {
    let Some(program) = argv.first() else {
        problems.push(format!("{whose}: runs nothing"));
        return;
    };
    match basename(program) {
        "mesond" => match argv.get(1..) {
            Some([mode]) if meson.modes.contains(mode) => {}
            _ => problems.push(format!(
                "{whose}: runs `{}`: mesond takes one subcommand of {:?}",
                argv.join(" "),
                meson.modes
            )),
        },
        "atomos-sim" => {
            for arg in &argv[1..] {
                if let Some(flag) = arg.strip_prefix("--") {
                    let flag = flag.split('=').next().unwrap_or(flag);
                    if !meson.sim_flags.contains(flag) {
                        problems.push(format!(
                            "{whose}: atomos-sim has no flag --{flag} (it has {:?})",
                            meson.sim_flags
                        ));
                    }
                }
            }
        }
        "sh" | "bash" | "dash" if argv.get(1).is_some_and(|a| !a.starts_with('-')) => {
            let path = &argv[1];
            let Some(file) = script(path) else {
                problems.push(format!(
                    "{whose}: runs the script {path}, which no bind mount provides"
                ));
                return;
            };
            let Ok(text) = std::fs::read_to_string(&file) else {
                problems.push(format!(
                    "{whose}: runs {path}, but {} does not exist",
                    rel(&file)
                ));
                return;
            };
            // The script's command lines that run mesond or atomos-sim, its own
            // arguments ("$@") substituted.
            let runs: Vec<Vec<String>> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| {
                    let words: Vec<&str> = l.split_whitespace().collect();
                    let start = words
                        .iter()
                        .position(|w| matches!(*w, "mesond" | "atomos-sim"))?;
                    (start == 0 || words[..start] == ["exec"]).then(|| {
                        words[start..]
                            .iter()
                            .take_while(|w| !w.starts_with('>') && !w.starts_with('|'))
                            .flat_map(|w| match *w {
                                "\"$@\"" | "$@" => argv[2..].to_vec(),
                                w => vec![w.trim_matches('"').to_owned()],
                            })
                            .collect()
                    })
                })
                .collect();
            if runs.is_empty() {
                problems.push(format!(
                    "{whose}: the script {} runs neither mesond nor atomos-sim",
                    rel(&file)
                ));
            }
            for run in runs {
                check_argv(
                    meson,
                    &run,
                    script,
                    &format!("{whose} (via {})", rel(&file)),
                    problems,
                );
            }
        }
        other => problems.push(format!(
            "{whose}: runs {other:?}, neither mesond nor atomos-sim (`{}`)",
            argv.join(" ")
        )),
    }
}

/// The value after `--flag` (or in `--flag=value`).
fn flag_value<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            argv.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(flag)?.strip_prefix('=')
        }
    })
}

// --- the tests -------------------------------------------------------------------

#[test]
fn every_yaml_file_parses_and_every_kubernetes_document_is_complete() {
    let mut problems = Vec::new();
    let files = yaml_files();
    assert!(
        files.len() >= 8,
        "expected docker-compose.yml, deploy/compose/ and deploy/kubernetes/ files, found {:?}",
        files.iter().map(|f| rel(f)).collect::<Vec<_>>()
    );
    for file in &files {
        let docs = match documents(file) {
            Ok(docs) => docs,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        if !file.starts_with(kube_dir()) {
            continue;
        }
        let kustomize = file.ends_with("kustomization.yaml");
        for (i, doc) in docs.iter().enumerate() {
            let mut need = vec![["apiVersion"].as_slice(), ["kind"].as_slice()];
            if !kustomize {
                need.push(["metadata", "name"].as_slice());
            }
            for path in need {
                if str_at(doc, path).is_none_or(str::is_empty) {
                    problems.push(format!(
                        "{}: document {} has no {}",
                        rel(file),
                        i + 1,
                        path.join(".")
                    ));
                }
            }
            let kind = str_at(doc, &["kind"]).unwrap_or("");
            if !kustomize
                && kind != "Namespace"
                && str_at(doc, &["metadata", "namespace"]) != Some("meson")
            {
                problems.push(format!(
                    "{}: {} is not in namespace meson (metadata.namespace), so `kubectl apply -f` \
                    of this file alone puts it elsewhere",
                    rel(file),
                    kind_name(doc)
                ));
            }
        }
    }
    // The files a kustomization lists exist; a manifest it leaves out is
    // left out on purpose (the kustomization says how to add it).
    let kustomization = kustomization();
    let text = read(&kube_dir().join("kustomization.yaml"));
    if str_at(&kustomization, &["namespace"]) != Some("meson") {
        problems.push("deploy/kubernetes/kustomization.yaml: namespace is not meson".to_owned());
    }
    let listed: BTreeSet<String> = seq(kustomization.get("resources"))
        .iter()
        .filter_map(|r| r.as_str().map(str::to_owned))
        .collect();
    for resource in &listed {
        if !kube_dir().join(resource).is_file() {
            problems.push(format!(
                "deploy/kubernetes/kustomization.yaml lists {resource}, which does not exist"
            ));
        }
    }
    for file in files.iter().filter(|f| f.starts_with(kube_dir())) {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name != "kustomization.yaml" && !listed.contains(name) && !text.contains(name) {
            problems.push(format!(
                "{} is neither in kustomization.yaml's resources nor mentioned there as optional",
                rel(file)
            ));
        }
    }
    // README's migrate-first apply (`-l 'app.kubernetes.io/component notin
    // (api,worker)'`, then the rest) leaves out exactly the api's and the
    // workers' objects: they, and only they, carry those labels.
    for (file, doc) in kube_documents() {
        let component = str_at(&doc, &["metadata", "labels", "app.kubernetes.io/component"]);
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let want = match name {
            "api.yaml" => Some("api"),
            "worker.yaml" => Some("worker"),
            _ => None,
        };
        let ok = match want {
            Some(w) => component == Some(w),
            None => !matches!(component, Some("api" | "worker")),
        };
        if !ok {
            problems.push(format!(
                "{}: {} has app.kubernetes.io/component {component:?}: README's \
                 migrate-first apply would apply it too early or never",
                rel(&file),
                kind_name(&doc)
            ));
        }
    }
    // Every kind the kustomization applies: a Namespace, and meson's
    // workloads.
    let kinds: BTreeSet<String> = kube_documents()
        .iter()
        .filter(|(f, _)| listed.iter().any(|l| f.ends_with(l)))
        .filter_map(|(_, d)| str_at(d, &["kind"]).map(str::to_owned))
        .collect();
    for kind in [
        "Namespace",
        "ConfigMap",
        "Secret",
        "Job",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
    ] {
        if !kinds.contains(kind) {
            problems.push(format!(
                "deploy/kubernetes: kustomization.yaml applies no {kind}"
            ));
        }
    }
    // JSON beside the YAML: the simulator's hosts.
    for file in files_under(&root().join("deploy"))
        .into_iter()
        .filter(|p| has_extension(p, &["json"]))
    {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&read(&file)) {
            problems.push(format!("{}: {e}", rel(&file)));
        }
    }
    report("deployment files", &problems);
}

#[test]
fn every_command_runs_mesond_with_a_subcommand_or_the_simulator() {
    let meson = meson();
    let stages = dockerfile();
    let image = image_defaults(&stages);
    let mut problems = Vec::new();
    let no_scripts = |_: &str| None;
    check_argv(
        &meson,
        &[image.0.clone(), image.1.clone()].concat(),
        &no_scripts,
        "deploy/Dockerfile (ENTRYPOINT + CMD)",
        &mut problems,
    );

    let compose = compose();
    let meson_image = meson_image(&compose);
    let mut ran = BTreeSet::new();
    for (name, service) in compose_services(&compose) {
        if !is_meson_service(service, &meson_image) {
            continue;
        }
        let argv = compose_argv(service, &image);
        ran.insert(
            argv.first()
                .map(|p| basename(p).to_owned())
                .unwrap_or_default(),
        );
        let script = |path: &str| host_file(service, path);
        check_argv(
            &meson,
            &argv,
            &script,
            &format!("docker-compose.yml service {name}"),
            &mut problems,
        );
    }
    for want in ["migrate", "api", "worker"] {
        let runs = compose_services(&compose).into_iter().any(|(_, s)| {
            is_meson_service(s, &meson_image)
                && compose_argv(s, &image).get(1).map(String::as_str) == Some(want)
        });
        if !runs {
            problems.push(format!(
                "docker-compose.yml: no service runs `mesond {want}`"
            ));
        }
    }

    let images = kube_image_names(&kustomization());
    let docs = kube_documents();
    let mut kube_modes = BTreeSet::new();
    for (file, doc) in &docs {
        let Some(template) = pod_template(doc) else {
            continue;
        };
        for container in containers(template) {
            let whose = format!(
                "{} {} container {}",
                rel(file),
                kind_name(doc),
                str_at(container, &["name"]).unwrap_or("?")
            );
            let image_name = str_at(container, &["image"]).unwrap_or("");
            if !images.contains(image_name) {
                problems.push(format!(
                    "{whose}: image {image_name:?} is not one kustomization.yaml's `images` \
                    rewrites ({images:?})"
                ));
            }
            let argv = container_argv(container, &image);
            if let Some(mode) = argv.get(1) {
                kube_modes.insert(mode.clone());
            }
            check_argv(&meson, &argv, &no_scripts, &whose, &mut problems);
        }
    }
    for want in ["migrate", "api", "worker"] {
        if !kube_modes.contains(want) {
            problems.push(format!(
                "deploy/kubernetes: no container runs `mesond {want}`"
            ));
        }
    }
    report("commands", &problems);
}

#[test]
fn every_environment_variable_is_one_meson_reads() {
    let meson = meson();
    let mut problems = Vec::new();
    let mut check = |name: &str, whose: &str| {
        if !env_name_known(&meson, name) {
            problems.push(format!("{whose} sets {name}, which meson does not read"));
        }
    };
    let compose = compose();
    for (service, def) in compose_services(&compose) {
        for name in compose_env(def).keys() {
            check(name, &format!("docker-compose.yml service {service}"));
        }
    }
    let docs = kube_documents();
    for (file, doc) in &docs {
        if matches!(str_at(doc, &["kind"]), Some("ConfigMap" | "Secret")) {
            for name in config_data(doc).keys() {
                check(name, &format!("{} {}", rel(file), kind_name(doc)));
            }
        }
        let Some(template) = pod_template(doc) else {
            continue;
        };
        for container in containers(template) {
            for var in seq(container.get("env")) {
                if let Some(name) = str_at(var, &["name"]) {
                    check(name, &format!("{} {}", rel(file), kind_name(doc)));
                }
            }
        }
    }
    // The runtime image sets nothing meson does not read either.
    let stages = dockerfile();
    for env in stages.last().expect("a stage").args("ENV") {
        for pair in env.split_whitespace() {
            if let Some((name, _)) = pair.split_once('=') {
                check(name, "deploy/Dockerfile's runtime stage");
            }
        }
    }
    report("environment variables", &problems);
}

#[test]
fn kubernetes_ports_probes_services_and_selectors_agree() {
    let meson = meson();
    let docs = kube_documents();
    let mut problems = Vec::new();
    // Every pod template: (namespace, labels, ports of its containers).
    let mut pods = Vec::new();
    for (file, doc) in &docs {
        let Some(template) = pod_template(doc) else {
            continue;
        };
        let what = format!("{} {}", rel(file), kind_name(doc));
        let pod_labels = labels(at(template, &["metadata", "labels"]));
        if str_at(doc, &["kind"]) != Some("Job") {
            let selector = labels(at(doc, &["spec", "selector", "matchLabels"]));
            if !selects(&selector, &pod_labels) {
                problems.push(format!(
                    "{what}: spec.selector.matchLabels {selector:?} does not \
                    match its pods' labels {pod_labels:?}"
                ));
            }
        }
        let mut all_ports = Vec::new();
        for container in containers(template) {
            let whose = format!(
                "{what} container {}",
                str_at(container, &["name"]).unwrap_or("?")
            );
            let ports = container_ports(container);
            let env = container_env(container, &docs, &mut problems, &whose);
            // Each listen address binds every interface, on a declared port;
            // each declared port is one meson listens on.
            let mut listening = BTreeSet::new();
            for (name, value) in env.iter().filter(|(k, _)| is_listen_var(&meson, k)) {
                match port_of(value) {
                    Err(e) => problems.push(format!("{whose}: {name}: {e}")),
                    Ok(addr) => {
                        if !addr.ip().is_unspecified() {
                            problems.push(format!(
                                "{whose}: {name}={value} is unreachable from \
                                outside the pod: listen on 0.0.0.0"
                            ));
                        }
                        if !ports.iter().any(|(_, p)| *p == addr.port()) {
                            problems.push(format!(
                                "{whose}: {name}={value}, but {} is not a \
                                containerPort ({ports:?})",
                                addr.port()
                            ));
                        }
                        listening.insert(addr.port());
                    }
                }
            }
            for (name, port) in &ports {
                if !listening.contains(port) {
                    problems.push(format!(
                        "{whose}: containerPort {port} ({}) is no MESON_*_ADDR of the container: \
                        nothing listens there",
                        name.as_deref().unwrap_or("unnamed")
                    ));
                }
            }
            for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
                let Some(p) = container.get(probe) else {
                    continue;
                };
                let port = ["httpGet", "tcpSocket", "grpc"]
                    .iter()
                    .find_map(|k| at(p, &[k, "port"]));
                match port {
                    Some(port) if names_port(port, &ports) => {}
                    Some(port) => problems.push(format!(
                        "{whose}: {probe} hits port {port:?}, which the container does not declare"
                    )),
                    None => problems.push(format!("{whose}: {probe} names no port")),
                }
            }
            all_ports.extend(ports);
        }
        // Prometheus' pod annotations name a declared port and a path.
        let annotations = labels(at(template, &["metadata", "annotations"]));
        if annotations.get("prometheus.io/scrape").map(String::as_str) == Some("true") {
            match annotations
                .get("prometheus.io/port")
                .map(|p| p.parse::<u16>())
            {
                Some(Ok(port)) if all_ports.iter().any(|(_, p)| *p == port) => {}
                other => problems.push(format!(
                    "{what}: prometheus.io/port {other:?} is not a port \
                    of its containers ({all_ports:?})"
                )),
            }
            if !annotations
                .get("prometheus.io/path")
                .is_some_and(|p| p.starts_with('/'))
            {
                problems.push(format!("{what}: prometheus.io/path is not a path"));
            }
        }
        let namespace = str_at(doc, &["metadata", "namespace"])
            .unwrap_or("")
            .to_owned();
        pods.push((what, namespace, pod_labels, all_ports));
    }
    let in_namespace = |doc: &Value| {
        let namespace = str_at(doc, &["metadata", "namespace"])
            .unwrap_or("")
            .to_owned();
        pods.iter().filter(move |(_, ns, _, _)| *ns == namespace)
    };
    for (file, doc) in &docs {
        let what = format!("{} {}", rel(file), kind_name(doc));
        match str_at(doc, &["kind"]) {
            Some("Service") => {
                let selector = labels(at(doc, &["spec", "selector"]));
                let selected: Vec<_> = in_namespace(doc)
                    .filter(|(_, _, l, _)| selects(&selector, l))
                    .collect();
                if selected.is_empty() {
                    problems.push(format!("{what}: selector {selector:?} selects no pods"));
                }
                for port in seq(at(doc, &["spec", "ports"])) {
                    let target = port
                        .get("targetPort")
                        .or_else(|| port.get("port"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    if str_at(port, &["name"]).is_none() {
                        problems.push(format!("{what}: port {:?} has no name", port.get("port")));
                    }
                    for (pod, _, _, ports) in &selected {
                        if !names_port(&target, ports) {
                            problems.push(format!(
                                "{what}: targetPort {target:?} is not a port of {pod} ({ports:?})"
                            ));
                        }
                    }
                }
            }
            Some("PodDisruptionBudget") => {
                let selector = labels(at(doc, &["spec", "selector", "matchLabels"]));
                if !in_namespace(doc).any(|(_, _, l, _)| selects(&selector, l)) {
                    problems.push(format!("{what}: selector {selector:?} selects no pods"));
                }
            }
            Some("HorizontalPodAutoscaler") => {
                let (kind, name) = (
                    str_at(doc, &["spec", "scaleTargetRef", "kind"]).unwrap_or(""),
                    str_at(doc, &["spec", "scaleTargetRef", "name"]).unwrap_or(""),
                );
                let target = docs.iter().find(|(_, d)| {
                    str_at(d, &["kind"]) == Some(kind)
                        && str_at(d, &["metadata", "name"]) == Some(name)
                });
                match target {
                    None => problems.push(format!(
                        "{what}: scales {kind} {name}, which no manifest defines"
                    )),
                    Some((_, target)) => {
                        // CPU utilization is measured against requests.
                        let requests_cpu = pod_template(target).is_some_and(|t| {
                            containers(t)
                                .all(|c| at(c, &["resources", "requests", "cpu"]).is_some())
                        });
                        if !requests_cpu {
                            problems.push(format!(
                                "{what}: scales on CPU, but {kind} {name}'s \
                                containers request no CPU"
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    report("Kubernetes ports and selectors", &problems);
}

#[test]
fn compose_ports_dependencies_and_observability_agree() {
    let meson = meson();
    let compose = compose();
    let image = meson_image(&compose);
    let stages = dockerfile();
    let defaults = image_defaults(&stages);
    let services = compose_services(&compose);
    let by_name: BTreeMap<&str, &Value> = services.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    let listening = |name: &str| {
        by_name
            .get(name)
            .map(|s| compose_listening(&meson, s, &image))
    };
    let mut problems = Vec::new();

    for (name, service) in &services {
        let whose = format!("docker-compose.yml service {name}");
        if is_meson_service(service, &image) {
            let env = compose_env(service);
            let mut ports = BTreeSet::new();
            for (var, value) in env.iter().filter(|(k, _)| is_listen_var(&meson, k)) {
                match port_of(value) {
                    Ok(addr) if addr.ip().is_unspecified() => {
                        ports.insert(addr.port());
                    }
                    Ok(_) => problems.push(format!(
                        "{whose}: {var}={value} is unreachable from \
                        other containers: listen on 0.0.0.0"
                    )),
                    Err(e) => problems.push(format!("{whose}: {var}: {e}")),
                }
            }
            for port in published_and_exposed(service) {
                if !ports.contains(&port) {
                    problems.push(format!(
                        "{whose}: publishes or exposes {port}, which no \
                        MESON_*_ADDR listens on ({ports:?})"
                    ));
                }
            }
            // OTLP goes to a service that exposes the endpoint's port.
            if let Some(endpoint) = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") {
                match host_port(endpoint) {
                    Some((host, port)) if listening(&host).is_some_and(|p| p.contains(&port)) => {}
                    _ => problems.push(format!(
                        "{whose}: OTEL_EXPORTER_OTLP_ENDPOINT={endpoint} is \
                        no port a compose service exposes"
                    )),
                }
            }
            if let Some(url) = env.get("DATABASE_URL") {
                match url.split_once('@').and_then(|(_, r)| host_port(r)) {
                    Some((host, _)) if by_name.contains_key(host.as_str()) => {}
                    _ => problems.push(format!(
                        "{whose}: DATABASE_URL does not name a compose service"
                    )),
                }
            }
        }
        // A replicated service cannot publish a fixed host port or name its container.
        let replicas = at(service, &["deploy", "replicas"])
            .and_then(Value::as_u64)
            .unwrap_or(1);
        if replicas > 1
            && (service.get("container_name").is_some() || !seq(service.get("ports")).is_empty())
        {
            problems.push(format!(
                "{whose}: {replicas} replicas cannot share container_name or published ports"
            ));
        }
        // Dependencies exist, and a health condition has a healthcheck to wait on.
        if let Some(deps) = service.get("depends_on") {
            let entries: Vec<(String, Option<&str>)> = match deps {
                Value::Sequence(s) => s
                    .iter()
                    .filter_map(|d| Some((d.as_str()?.to_owned(), None)))
                    .collect(),
                Value::Mapping(m) => m
                    .iter()
                    .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), str_at(v, &["condition"]))))
                    .collect(),
                _ => Vec::new(),
            };
            for (dep, condition) in entries {
                let Some(target) = by_name.get(dep.as_str()) else {
                    problems.push(format!("{whose}: depends on {dep}, which is no service"));
                    continue;
                };
                if condition == Some("service_healthy") && target.get("healthcheck").is_none() {
                    problems.push(format!(
                        "{whose}: waits for {dep} to be healthy, which has no healthcheck"
                    ));
                }
            }
        }
    }
    // The api and the workers start after `mesond migrate` succeeded.
    let migrators: BTreeSet<&str> = services
        .iter()
        .filter(|(_, s)| {
            is_meson_service(s, &image)
                && compose_argv(s, &defaults).get(1).map(String::as_str) == Some("migrate")
        })
        .map(|(n, _)| n.as_str())
        .collect();
    for (name, service) in &services {
        let mode = compose_argv(service, &defaults)
            .get(1)
            .cloned()
            .unwrap_or_default();
        if is_meson_service(service, &image) && matches!(mode.as_str(), "api" | "worker" | "serve")
        {
            let waits = migrators.iter().any(|m| {
                str_at(service, &["depends_on", m, "condition"])
                    == Some("service_completed_successfully")
            });
            if !waits {
                problems.push(format!(
                    "docker-compose.yml service {name}: does not wait for a `mesond migrate` \
                    service ({migrators:?}) to complete successfully"
                ));
            }
        }
    }
    for migrator in &migrators {
        if str_at(by_name[migrator], &["restart"]).is_none_or(|r| r != "no") {
            problems.push(format!(
                "docker-compose.yml service {migrator}: runs once: restart: \"no\""
            ));
        }
    }

    // Prometheus scrapes services and ports that exist.
    let (prometheus, prom_config) = mounted_config(
        &services,
        "prom/prometheus",
        "--config.file",
        "/etc/prometheus/prometheus.yml",
        &mut problems,
    );
    if let Some(config) = prom_config {
        let mut scraped = BTreeSet::new();
        for job in seq(config.get("scrape_configs")) {
            let job_name = str_at(job, &["job_name"]).unwrap_or("?");
            let mut targets = Vec::new();
            for sc in seq(job.get("static_configs")) {
                for t in seq(sc.get("targets")) {
                    match t.as_str().and_then(host_port) {
                        Some(hp) => targets.push(hp),
                        None => problems.push(format!(
                            "prometheus job {job_name}: target {t:?} is not host:port"
                        )),
                    }
                }
            }
            for sd in seq(job.get("dns_sd_configs")) {
                let port = sd
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok());
                for n in seq(sd.get("names")) {
                    match (n.as_str(), port) {
                        (Some(host), Some(port)) => targets.push((host.to_owned(), port)),
                        _ => problems.push(format!(
                            "prometheus job {job_name}: dns_sd_configs \
                            entry needs a name and a port"
                        )),
                    }
                }
            }
            if targets.is_empty() {
                problems.push(format!("prometheus job {job_name}: no targets"));
            }
            for (host, port) in targets {
                match listening(&host) {
                    None => problems.push(format!(
                        "prometheus job {job_name}: {host} is no compose \
                        service"
                    )),
                    Some(ports) if !ports.contains(&port) => problems.push(format!(
                        "prometheus job {job_name}: {host} does not listen on {port} (it listens \
                        on {ports:?})"
                    )),
                    Some(_) => {
                        scraped.insert(host);
                    }
                }
            }
        }
        for want in ["api", "worker"] {
            if !scraped.contains(want) {
                problems.push(format!(
                    "{prometheus}: Prometheus does not scrape the {want} service"
                ));
            }
        }
    }

    // The collector receives OTLP where meson sends it and exports to
    // services that exist.
    let (collector, otel_config) = mounted_config(
        &services,
        "otel/opentelemetry-collector",
        "--config",
        "/etc/otelcol-contrib/config.yaml",
        &mut problems,
    );
    if let Some(config) = otel_config {
        let grpc = str_at(
            &config,
            &["receivers", "otlp", "protocols", "grpc", "endpoint"],
        )
        .and_then(host_port);
        match grpc {
            None => problems.push(format!("{collector}: no OTLP gRPC receiver endpoint")),
            Some((_, port)) => {
                if !listening(&collector).is_some_and(|p| p.contains(&port)) {
                    problems.push(format!(
                        "{collector}: receives OTLP on {port}, which the service does not expose"
                    ));
                }
                for (name, service) in &services {
                    let endpoint = compose_env(service)
                        .get("OTEL_EXPORTER_OTLP_ENDPOINT")
                        .cloned();
                    if let Some((host, p)) = endpoint.as_deref().and_then(host_port)
                        && (host != collector || p != port)
                    {
                        problems.push(format!(
                            "service {name}: sends OTLP to {host}:{p}, not the \
                            collector's receiver {collector}:{port}"
                        ));
                    }
                }
            }
        }
        let exporters = config
            .get("exporters")
            .and_then(Value::as_mapping)
            .cloned()
            .unwrap_or_default();
        for (name, exporter) in &exporters {
            let name = name.as_str().unwrap_or("?");
            if let Some((host, port)) = str_at(exporter, &["endpoint"]).and_then(host_port)
                && !listening(&host).is_some_and(|p| p.contains(&port))
            {
                problems.push(format!(
                    "{collector}: exporter {name} sends to {host}:{port}, which \
                    no compose service exposes"
                ));
            }
        }
        let pipelines = at(&config, &["service", "pipelines"])
            .and_then(Value::as_mapping)
            .cloned()
            .unwrap_or_default();
        if pipelines.is_empty() {
            problems.push(format!("{collector}: no pipelines"));
        }
        for (pipeline, def) in &pipelines {
            for section in ["receivers", "processors", "exporters"] {
                for component in seq(def.get(section)) {
                    let component = component.as_str().unwrap_or("");
                    if at(&config, &[section, component]).is_none() {
                        problems.push(format!(
                            "{collector}: pipeline {pipeline:?} uses \
                            {section}.{component}, which is not defined"
                        ));
                    }
                }
            }
        }
    }
    report(
        "docker-compose.yml ports, dependencies and observability",
        &problems,
    );
}

/// The configuration file mounted into the service whose image starts with
/// `image`, at the path its command names (`flag=`) or the image's default.
fn mounted_config(
    services: &[(String, &Value)],
    image: &str,
    flag: &str,
    default: &str,
    problems: &mut Vec<String>,
) -> (String, Option<Value>) {
    let Some((name, service)) = services
        .iter()
        .find(|(_, s)| str_at(s, &["image"]).is_some_and(|i| i.starts_with(image)))
    else {
        problems.push(format!("docker-compose.yml: no service runs {image}"));
        return (String::new(), None);
    };
    let argv = service.get("command").and_then(argv_of).unwrap_or_default();
    let path = flag_value(&argv, flag).unwrap_or(default);
    match host_file(service, path) {
        Some(file) if file.is_file() => (name.clone(), Some(one_document(&file))),
        _ => {
            problems.push(format!(
                "docker-compose.yml service {name}: no file of deploy/ is mounted at {path}, where \
                {image} reads its configuration"
            ));
            (name.clone(), None)
        }
    }
}

/// Whether `service` runs atomos-sim: itself, or a mounted script that execs it.
fn runs_simulator(service: &Value, argv: &[String]) -> bool {
    argv.first().is_some_and(|p| basename(p) == "atomos-sim")
        || compose_mounts(service)
            .into_iter()
            .filter(|(s, _)| is_bind(s))
            .filter_map(|(s, _)| std::fs::read_to_string(root().join(s)).ok())
            .any(|t| {
                t.lines()
                    .any(|l| l.trim_start().starts_with("exec atomos-sim "))
            })
}

/// atomos-sim's `--state` is on a named volume whose mount point the image
/// creates (a fresh volume takes the owner of the image's directory; one
/// the image lacks is root's, which the image's user cannot write).
fn check_simulator_state(
    service: &Value,
    argv: &[String],
    whose: &str,
    problems: &mut Vec<String>,
) {
    let Some(dir) = flag_value(argv, "--state") else {
        problems.push(format!(
            "{whose}: runs atomos-sim without --state: a restart loses every VM"
        ));
        return;
    };
    let volume = compose_mounts(service).into_iter().find(|(_, target)| {
        let target = target.trim_end_matches('/');
        dir == target || dir.starts_with(&format!("{target}/"))
    });
    match volume {
        Some((source, target)) if !is_bind(&source) => {
            if !read(&dockerfile_path()).contains(target.trim_end_matches('/')) {
                problems.push(format!(
                    "{whose}: the volume {source} at {target} (atomos-sim's --state) \
                    is no directory deploy/Dockerfile creates for the image's user"
                ));
            }
        }
        _ => problems.push(format!(
            "{whose}: atomos-sim's --state {dir} is on no named volume"
        )),
    }
}

#[test]
fn compose_references_files_that_exist() {
    let compose = compose();
    let image = meson_image(&compose);
    let declared: BTreeSet<String> = compose
        .get("volumes")
        .and_then(Value::as_mapping)
        .map(|m| {
            m.keys()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let defaults = image_defaults(&dockerfile());
    let services = compose_services(&compose);
    let mut problems = Vec::new();
    for (name, service) in &services {
        let whose = format!("docker-compose.yml service {name}");
        for (source, target) in compose_mounts(service) {
            if is_bind(&source) {
                if !root().join(&source).exists() {
                    problems.push(format!(
                        "{whose}: mounts {source} at {target}, which does not exist"
                    ));
                }
            } else if !declared.contains(&source) {
                problems.push(format!(
                    "{whose}: mounts the volume {source}, which the top-level \
                    `volumes` does not declare"
                ));
            }
        }
        if let Some(build) = service.get("build") {
            let context = root().join(
                str_at(build, &["context"])
                    .or(build.as_str())
                    .unwrap_or("."),
            );
            let file = context.join(str_at(build, &["dockerfile"]).unwrap_or("Dockerfile"));
            if !context.is_dir() || !file.is_file() {
                problems.push(format!(
                    "{whose}: builds {} in {}, which does not exist",
                    rel(&file),
                    rel(&context)
                ));
            } else if file != dockerfile_path() {
                problems.push(format!(
                    "{whose}: builds from {}, not deploy/Dockerfile",
                    rel(&file)
                ));
            }
        }
        if !is_meson_service(service, &image) {
            continue;
        }
        // The simulator's hosts file is a valid one.
        let argv = compose_argv(service, &defaults);
        if let Some(hosts) = flag_value(&argv, "--hosts-file") {
            match host_file(service, hosts) {
                Some(file) if file.is_file() => {
                    match serde_json::from_str::<Vec<atomos_sim::HostConfig>>(&read(&file)) {
                        Err(e) => {
                            problems.push(format!("{}: not atomos-sim hosts: {e}", rel(&file)))
                        }
                        Ok(h) => {
                            let names: BTreeSet<&str> = h.iter().map(|h| h.name.as_str()).collect();
                            if h.is_empty() || names.len() != h.len() {
                                problems.push(format!(
                                    "{}: needs hosts with distinct names",
                                    rel(&file)
                                ));
                            }
                        }
                    }
                }
                _ => problems.push(format!(
                    "{whose}: --hosts-file {hosts} is no mounted file of the repository"
                )),
            }
        }
        // The simulator keeps its hosts' VMs on a named volume, so a
        // restarted container still has what the database remembers.
        if runs_simulator(service, &argv) {
            check_simulator_state(service, &argv, &whose, &mut problems);
        }
        // MESON_TARGETS_FILE: a mounted file of driver targets, or the
        // volume the simulator writes its targets to.
        if let Some(path) = compose_env(service).get("MESON_TARGETS_FILE") {
            check_targets_file(&services, name, service, path, &mut problems);
        }
    }
    let uses_targets = services
        .iter()
        .any(|(_, s)| compose_env(s).contains_key("MESON_TARGETS_FILE"));
    if !uses_targets {
        problems.push(
            "docker-compose.yml: no service sets MESON_TARGETS_FILE: meson knows no AtomOS host"
                .to_owned(),
        );
    }
    report("files docker-compose.yml references", &problems);
}

fn check_targets_file(
    services: &[(String, &Value)],
    name: &str,
    service: &Value,
    path: &str,
    problems: &mut Vec<String>,
) {
    let whose = format!("docker-compose.yml service {name}");
    if let Some(file) = host_file(service, path) {
        match std::fs::read_to_string(&file) {
            Err(e) => problems.push(format!(
                "{whose}: MESON_TARGETS_FILE={path}: {}: {e}",
                rel(&file)
            )),
            Ok(text) => {
                if let Err(e) = serde_json::from_str::<Vec<atomos_driver::Target>>(&text) {
                    problems.push(format!("{}: not a JSON array of targets: {e}", rel(&file)));
                }
            }
        }
        return;
    }
    let Some((volume, target)) = compose_mounts(service)
        .into_iter()
        .find(|(s, t)| !is_bind(s) && path.starts_with(&format!("{}/", t.trim_end_matches('/'))))
    else {
        problems.push(format!(
            "{whose}: MESON_TARGETS_FILE={path} is in no volume of the service"
        ));
        return;
    };
    // Another service mounts that volume at the same place and writes the
    // file there: the simulator's script.
    let file_name = path.rsplit('/').next().unwrap_or(path);
    let writer = services.iter().any(|(other, s)| {
        other != name
            && compose_mounts(s)
                .iter()
                .any(|(v, t)| *v == volume && *t == target)
            && compose_mounts(s)
                .iter()
                .filter(|(src, _)| is_bind(src))
                .any(|(src, _)| {
                    std::fs::read_to_string(root().join(src)).is_ok_and(|text| {
                        text.contains(file_name) && text.contains(target.trim_end_matches('/'))
                    })
                })
    });
    if !writer {
        problems.push(format!(
            "{whose}: MESON_TARGETS_FILE={path} is in the volume {volume}, but no other service's \
            mounted script writes {file_name} there"
        ));
    }
}

/// Whether a build `run` leaves the binary `bin` in `dir`: cargo's own
/// output directory, or a `cp`/`install`/`mv` of cargo's `bin` into `dir`
/// (needed when target/ is a cache mount, which no layer keeps).
fn puts_binary(run: &str, bin: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    if dir.ends_with("target/release") {
        return !run.contains("type=cache,target=/src/target")
            && !run.contains(&format!("type=cache,target={dir}"));
    }
    run.split("&&").flat_map(|c| c.split(';')).any(|command| {
        let words: Vec<&str> = command.split_whitespace().collect();
        let copies = matches!(words.first(), Some(&("cp" | "install" | "mv")));
        let Some((dest, sources)) = words.split_last() else {
            return false;
        };
        copies
            && dest.trim_end_matches('/') == dir
            && sources
                .iter()
                .any(|s| s.ends_with(&format!("target/release/{bin}")))
    })
}

#[test]
fn dockerfile_builds_what_the_manifests_run() {
    let meson = meson();
    let stages = dockerfile();
    let path = rel(&dockerfile_path());
    let mut problems = Vec::new();
    let stage_names: BTreeSet<&str> = stages.iter().filter_map(|s| s.name.as_deref()).collect();

    // Base images pin a tag (or a digest), never `latest`.
    for stage in &stages {
        if stage_names.contains(stage.base.as_str()) {
            continue;
        }
        let pinned = stage.base.contains("@sha256:")
            || stage
                .base
                .rsplit('/')
                .next()
                .and_then(|last| last.split_once(':'))
                .is_some_and(|(_, tag)| !tag.is_empty() && tag != "latest");
        if !pinned {
            problems.push(format!("{path}: FROM {} pins no tag", stage.base));
        }
    }

    // The builder's Rust is the toolchain the workspace pins.
    let toolchain = read(&root().join("rust-toolchain.toml"));
    let channel = toolchain
        .lines()
        .find_map(|l| l.trim().strip_prefix("channel = \""))
        .map(|c| c.trim_end_matches('"').to_owned())
        .expect("rust-toolchain.toml names a channel");
    let rust = stages.iter().find(|s| s.base.starts_with("rust:"));
    match rust {
        None => problems.push(format!("{path}: no stage builds FROM rust:<version>")),
        Some(stage) => {
            let version = stage.base["rust:".len()..].split('-').next().unwrap_or("");
            if version.is_empty()
                || !(channel.starts_with(version) || version.starts_with(&channel))
            {
                problems.push(format!(
                    "{path}: builds with {} but rust-toolchain.toml pins {channel}",
                    stage.base
                ));
            }
        }
    }

    // The binaries the manifests run, built by one `cargo build` and copied
    // into the last stage.
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    let compose = compose();
    let image = meson_image(&compose);
    let defaults = image_defaults(&stages);
    for (_, service) in compose_services(&compose) {
        if is_meson_service(service, &image) {
            let argv = compose_argv(service, &defaults);
            wanted.insert(basename(&argv[0]).to_owned());
            let scripts: Vec<String> = compose_mounts(service)
                .into_iter()
                .filter(|(s, _)| is_bind(s))
                .filter_map(|(s, _)| std::fs::read_to_string(root().join(s)).ok())
                .collect();
            for bin in meson.bins.keys() {
                if scripts.iter().any(|t| {
                    t.lines()
                        .any(|l| l.trim_start().starts_with(&format!("exec {bin} ")))
                }) {
                    wanted.insert(bin.clone());
                }
            }
        }
    }
    for (_, doc) in kube_documents() {
        if let Some(template) = pod_template(&doc) {
            for container in containers(template) {
                if let Some(program) = container_argv(container, &defaults).first() {
                    wanted.insert(basename(program).to_owned());
                }
            }
        }
    }
    wanted.retain(|w| w != "sh");
    assert!(
        wanted.contains("mesond"),
        "the manifests run mesond, surely: {wanted:?}"
    );
    let builds: Vec<(&Stage, &str)> = stages
        .iter()
        .flat_map(|s| {
            s.args("RUN")
                .filter(|r| r.contains("cargo build"))
                .map(move |r| (s, r))
        })
        .collect();
    let last = stages.last().expect("a stage");
    for bin in &wanted {
        let Some(package) = meson.bins.get(bin) else {
            problems.push(format!(
                "the manifests run {bin}, which no workspace package builds"
            ));
            continue;
        };
        let flag = format!("-p {package}");
        let Some((builder, run)) = builds.iter().find(|(_, r)| {
            r.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .contains(&flag)
        }) else {
            problems.push(format!(
                "{path}: no `cargo build` line has {flag} (for {bin})"
            ));
            continue;
        };
        for f in ["--release", "--locked"] {
            if !run.contains(f) {
                problems.push(format!("{path}: `cargo build {flag}` lacks {f}"));
            }
        }
        let sqlx_offline = builder.args("ENV").any(|e| e.contains("SQLX_OFFLINE=true"))
            || run.contains("SQLX_OFFLINE=true");
        if !sqlx_offline {
            problems.push(format!(
                "{path}: the build stage does not set SQLX_OFFLINE=true"
            ));
        }
        let builder_name = builder.name.as_deref().unwrap_or("");
        let copied = last.args("COPY").any(|c| {
            let words: Vec<&str> = c.split_whitespace().collect();
            let from = words.iter().find_map(|w| w.strip_prefix("--from="));
            let files: Vec<&str> = words
                .iter()
                .copied()
                .filter(|w| !w.starts_with("--"))
                .collect();
            let Some((dest, sources)) = files.split_last() else {
                return false;
            };
            from == Some(builder_name)
                && dest.trim_end_matches('/') == "/usr/local/bin"
                && sources.iter().any(|s| {
                    // The source is the binary, put there by the build stage's RUN.
                    basename(s) == bin
                        && s.rsplit_once('/')
                            .is_some_and(|(dir, _)| puts_binary(run, bin, dir))
                })
        });
        if !copied {
            problems.push(format!(
                "{path}: the last stage does not COPY --from={builder_name} the {bin} that stage \
                builds into /usr/local/bin/"
            ));
        }
    }

    // The runtime stage: certificates, a non-root user (the one the pods run
    // as), meson's ports, mesond as the entrypoint, no HEALTHCHECK.
    if !last.args("RUN").any(|r| r.contains("ca-certificates")) {
        problems.push(format!(
            "{path}: the runtime stage does not install ca-certificates"
        ));
    }
    match last.args("USER").last() {
        None => problems.push(format!("{path}: the runtime stage runs as root (no USER)")),
        Some(user) => {
            let uid = user.split(':').next().unwrap_or("");
            if matches!(uid, "0" | "root") {
                problems.push(format!("{path}: USER {user} is root"));
            } else if uid.parse::<u32>().is_err() {
                problems.push(format!(
                    "{path}: USER {user} is not numeric, so Kubernetes' \
                    runAsNonRoot cannot check it"
                ));
            }
            for (file, doc) in kube_documents() {
                if let Some(template) = pod_template(&doc) {
                    let run_as =
                        at(template, &["spec", "securityContext", "runAsUser"]).and_then(scalar);
                    if run_as.as_deref() != Some(uid) {
                        problems.push(format!(
                            "{} {}: runAsUser {run_as:?} is not the image's USER {uid}",
                            rel(&file),
                            kind_name(&doc)
                        ));
                    }
                }
            }
        }
    }
    let exposed: BTreeSet<u16> = last
        .args("EXPOSE")
        .flat_map(|e| e.split_whitespace())
        .filter_map(|p| p.split('/').next()?.parse().ok())
        .collect();
    for (file, doc) in kube_documents() {
        if let Some(template) = pod_template(&doc) {
            for (_, port) in containers(template).flat_map(container_ports) {
                if !exposed.contains(&port) {
                    problems.push(format!(
                        "{} {}: containerPort {port} is not EXPOSEd by {path}",
                        rel(&file),
                        kind_name(&doc)
                    ));
                }
            }
        }
    }
    let (entrypoint, cmd) = image_defaults(&stages);
    if entrypoint != ["mesond"] {
        problems.push(format!(
            "{path}: ENTRYPOINT is {entrypoint:?}, not [\"mesond\"]"
        ));
    }
    if cmd.len() != 1 || !meson.modes.contains(&cmd[0]) {
        problems.push(format!("{path}: CMD {cmd:?} is not one mesond subcommand"));
    }
    if stages
        .iter()
        .any(|s| s.args("HEALTHCHECK").next().is_some())
    {
        problems.push(format!(
            "{path}: has a HEALTHCHECK (probes and compose conditions check health)"
        ));
    }

    // The build context keeps what the build needs and drops the rest.
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap_or_default();
    let patterns: BTreeSet<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.trim_start_matches('/').trim_end_matches('/'))
        .collect();
    for must in ["target", ".meson", ".git"] {
        if !patterns.contains(must) {
            problems.push(format!(".dockerignore does not leave out {must}/"));
        }
    }
    for keep in [
        ".sqlx",
        ".cargo",
        "Cargo.lock",
        "migrations",
        "proto",
        "services",
    ] {
        if patterns.contains(keep) {
            problems.push(format!(
                ".dockerignore leaves out {keep}, which the build needs"
            ));
        }
    }
    report("deploy/Dockerfile", &problems);
}
