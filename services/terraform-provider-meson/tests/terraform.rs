//! The provider as Terraform runs it: the real `terraform` CLI (1.11, no
//! registry: `dev_overrides` points it at this build) against a
//! `mesond dev` with its simulated AtomOS hosts, on the example in
//! `examples/terraform/` as written. Apply; a second plan shows no changes;
//! a pool's `desired_nodes` changes in place and its nodes follow; a VM
//! deleted through the API is re-created; a VM made with mesonctl imports
//! without a diff, its backups turned on and off in place; volumes, images,
//! a port forward and the usage meson metered by plan; destroy
//! leaves nothing in meson nor on the hosts.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const TERRAFORM: &str = "terraform";

/// The workspace binaries beside this test's provider (`cargo test
/// --workspace` builds them all; a lone `cargo test -p` builds them here).
fn binary(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_terraform-provider-meson")).with_file_name(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", name])
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building {name}");
    }
    path
}

/// A scratch directory with a `mesond dev` running in it; both gone on drop.
struct Dev {
    dir: PathBuf,
    child: Child,
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Dev {
    async fn start() -> Dev {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("meson-tf-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        // Under root dev mode's PostgreSQL runs as `postgres`: let it in.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = Command::new(binary("mesond"));
        c.arg("dev").current_dir(&dir);
        for (k, _) in std::env::vars() {
            if k.starts_with("MESON_") || k == "DATABASE_URL" {
                c.env_remove(k);
            }
        }
        let log = std::fs::File::create(dir.join("mesond.log")).unwrap();
        c.env("MESON_HTTP_ADDR", "127.0.0.1:0")
            .env("MESON_GRPC_ADDR", "127.0.0.1:0")
            .env("MESON_AUTOSCALER_ADDR", "127.0.0.1:0")
            .env("MESON_SIM_BOOT_MS", "50")
            .env("MESON_VM_POLL_MS", "100")
            .env("MESON_JOB_POLL_MS", "100")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = c.spawn().expect("mesond starts");
        let mut dev = Dev {
            dir,
            child,
            base: String::new(),
            token: String::new(),
            http: reqwest::Client::new(),
        };
        let data = dev.dir.join(".meson");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = dev.child.try_wait().unwrap() {
                panic!("mesond exited early: {status}\n{}", dev.log());
            }
            if let Some(s) = meson_types::dev::DevServer::read(&data)
                && s.pid == dev.child.id()
                && let Ok(r) = dev.http.get(format!("{}/readyz", s.url)).send().await
                && r.status().is_success()
            {
                dev.base = s.url;
                dev.token = std::fs::read_to_string(&s.token_file)
                    .unwrap()
                    .trim()
                    .to_owned();
                return dev;
            }
            assert!(Instant::now() < deadline, "mesond not ready\n{}", dev.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("mesond.log")).unwrap_or_default()
    }

    async fn get(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }

    async fn delete(&self, path: &str) -> Value {
        let r = self
            .http
            .delete(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "DELETE {path}: {}", r.status());
        r.json().await.unwrap()
    }

    /// Waits for an action to end; its final state.
    async fn finished(&self, action: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let a = self.get(&format!("/v1/actions/{action}")).await["action"].clone();
            if a["status"] != "running" {
                return a;
            }
            assert!(Instant::now() < deadline, "action {action} still running");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn list(&self, what: &str) -> Vec<Value> {
        self.get(&format!("/v1/{what}?per_page=50")).await[what]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The VMs and networks on the simulated AtomOS hosts (their state files).
    fn atomos(&self) -> (usize, usize) {
        let (mut vms, mut nets) = (0, 0);
        for f in std::fs::read_dir(self.dir.join(".meson/atomos")).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "json") {
                let host: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                vms += host["vms"].as_array().map_or(0, Vec::len);
                nets += host["networks"].as_array().map_or(0, Vec::len);
            }
        }
        (vms, nets)
    }
}

impl Dev {
    /// A standalone volume on the simulated hosts (their state files): its
    /// size, GB, and the AtomOS ids of the VMs it is attached to.
    fn atomos_volume(&self, id: &str) -> Option<(f64, Vec<String>)> {
        let name = format!("vol-{}", id.replace('-', ""));
        for f in std::fs::read_dir(self.dir.join(".meson/atomos")).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let host: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            let Some(v) = host["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|v| v["name"] == name.as_str())
            else {
                continue;
            };
            let on: Vec<String> = host["vms"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|vm| {
                    vm["volume_ids"]
                        .as_array()
                        .is_some_and(|ids| ids.contains(&v["id"]))
                })
                .filter_map(|vm| vm["id"].as_str().map(str::to_owned))
                .collect();
            return Some((v["size_gb"].as_f64().unwrap(), on));
        }
        None
    }

    /// The AtomOS id of the VM named `name` in meson.
    async fn atomos_vm(&self, name: &str) -> String {
        let vm = vm_by_name(self, name).await.expect("the VM");
        // `vm-<id>-t<tenant tag>`.
        let atomos = format!("vm-{}-", vm["id"].as_str().unwrap().replace('-', ""));
        for f in std::fs::read_dir(self.dir.join(".meson/atomos")).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let host: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            if let Some(id) = host["vms"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|v| v["name"].as_str().is_some_and(|n| n.starts_with(&atomos)))
                .and_then(|v| v["id"].as_str())
            {
                return id.to_owned();
            }
        }
        panic!("{name} is not on AtomOS")
    }
}

/// Volumes by plan: a VM attaching one at its create (which puts it on the
/// volumes' host), a second attached by `meson_volume_attachment` without
/// the VM seeing drift, grown in place, then detached by removing the
/// attachment; a shrink is refused naming `size`.
fn volumes_tf(size: u32, attached: bool) -> String {
    volumes_tf_with(size, attached, 5)
}

/// As [`volumes_tf`], the holder VM's own data volume `scratch` of `scratch` GB.
fn volumes_tf_with(size: u32, attached: bool, scratch: u32) -> String {
    let mut tf = format!(
        r#"
resource "meson_volume" "anchor" {{
  name          = "anchor"
  size          = 1
  provider_name = "ionos"
}}
resource "meson_volume" "data" {{
  name          = "data"
  size          = {size}
  provider_name = "ionos"
}}
resource "meson_vm" "holder" {{
  name             = "holder"
  cores            = 1
  memory_mib       = 1024
  attached_volumes = [meson_volume.anchor.id]
  volume {{
    name = "scratch"
    size = {scratch}
  }}
}}
"#
    );
    if attached {
        tf.push_str(
            r#"
resource "meson_volume_attachment" "data" {
  volume_id = meson_volume.data.id
  vm_id     = meson_vm.holder.id
}
"#,
        );
    }
    tf
}

async fn volumes_by_plan(dev: &Dev, tf: &Tf) {
    std::fs::write(tf.dir.join("volumes.tf"), volumes_tf(10, true)).unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(
        out.contains("Resources: 4 added, 0 changed, 0 destroyed"),
        "{out}"
    );
    let data = dev
        .list("volumes")
        .await
        .into_iter()
        .find(|v| v["name"] == "data")
        .expect("the data volume");
    let id = data["id"].as_str().unwrap().to_owned();
    let holder = dev.atomos_vm("holder").await;
    assert_eq!(dev.atomos_volume(&id), Some((10.0, vec![holder.clone()])));
    let out = tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    assert!(out.contains("No changes"), "{out}");

    std::fs::write(tf.dir.join("volumes.tf"), volumes_tf(20, true)).unwrap();
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 1 to change, 0 to destroy"), "{out}");
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert_eq!(dev.atomos_volume(&id), Some((20.0, vec![holder])));
    assert_eq!(
        dev.get(&format!("/v1/volumes/{id}")).await["volume"]["size"],
        20
    );

    // The VM's own data volume grows in place too.
    std::fs::write(tf.dir.join("volumes.tf"), volumes_tf_with(20, true, 8)).unwrap();
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 1 to change, 0 to destroy"), "{out}");
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    let holder = vm_by_name(dev, "holder").await.expect("the holder VM");
    let scratch = holder["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "scratch")
        .cloned()
        .expect("its scratch volume");
    assert_eq!(scratch["size"], 8, "{holder}");
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    std::fs::write(tf.dir.join("volumes.tf"), volumes_tf_with(20, true, 5)).unwrap();
    let out = tf.run(&["apply", "-auto-approve", "-no-color"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("only grow") && err.contains("size"), "{err}");

    std::fs::write(tf.dir.join("volumes.tf"), volumes_tf_with(20, false, 8)).unwrap();
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 0 to change, 1 to destroy"), "{out}");
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert_eq!(dev.atomos_volume(&id), Some((20.0, vec![])));
    assert_eq!(
        dev.get(&format!("/v1/volumes/{id}")).await["volume"]["status"],
        "available"
    );
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);

    std::fs::write(tf.dir.join("volumes.tf"), volumes_tf_with(5, false, 8)).unwrap();
    let out = tf.run(&["apply", "-auto-approve", "-no-color"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("(invalid_input)") && err.contains("only grow"),
        "{err}"
    );
    assert!(err.contains("size"), "{err}");
    std::fs::write(tf.dir.join("volumes.tf"), volumes_tf_with(20, false, 8)).unwrap();
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
}

/// A port forward's configuration: a VM on a network, and (when `port` is
/// given) its port 22 forwarded from `port` of its host.
fn forwards_tf(port: Option<u16>) -> String {
    let mut tf = r#"
resource "meson_network" "fwd" {
  name = "fwd"
  cidr = "192.168.63.0/24"
  dhcp = false
}
resource "meson_vm" "relay" {
  name       = "relay"
  cores      = 1
  memory_mib = 1024
  networks   = [meson_network.fwd.id]
}
"#
    .to_owned();
    if let Some(port) = port {
        tf.push_str(&format!(
            r#"
resource "meson_port_forward" "ssh" {{
  network_id   = meson_network.fwd.id
  vm_id        = meson_vm.relay.id
  public_port  = {port}
  private_port = 22
}}
"#
        ));
    }
    tf
}

/// Whether something listens on `127.0.0.1:port` (the simulated hosts
/// forward on loopback).
fn listened_on(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_err()
}

/// A port forward by plan: a create the host cannot honour (its port taken)
/// fails with the action's error and leaves nothing, in the state nor in
/// meson; once the port is free it is made, active and listened on; a
/// second plan, and an import, show no changes; removing it frees the port.
async fn port_forwards_by_plan(dev: &Dev, tf: &Tf) {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    std::fs::write(tf.dir.join("forwards.tf"), forwards_tf(Some(port))).unwrap();
    let out = tf.run(&["apply", "-auto-approve", "-no-color"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the action create_port_forward failed") && err.contains("in use"),
        "{err}"
    );
    let state = tf.ok(&["state", "list"], 0);
    assert!(state.contains("meson_vm.relay"), "{state}");
    assert!(!state.contains("meson_port_forward"), "{state}");
    let network = dev
        .list("networks")
        .await
        .into_iter()
        .find(|n| n["name"] == "fwd")
        .expect("the fwd network");
    let network = network["id"].as_str().unwrap().to_owned();
    let forwards = format!("/v1/networks/{network}/port-forwards");
    assert_eq!(
        dev.get(&forwards).await["port_forwards"],
        Value::Array(vec![])
    );

    drop(taken);
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(
        out.contains("Resources: 1 added, 0 changed, 0 destroyed"),
        "{out}"
    );
    let list = dev.get(&forwards).await["port_forwards"].clone();
    let f = list[0].clone();
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    let relay = vm_by_name(dev, "relay").await.expect("the relay VM");
    assert_eq!(f["vm"], relay["id"], "{f}");
    assert_eq!(f["status"], "active", "{f}");
    assert!(listened_on(port), "the host forwards {port}");
    let shown: Value = serde_json::from_str(&tf.ok(&["show", "-json"], 0)).unwrap();
    let held = shown["values"]["root_module"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == "meson_port_forward.ssh")
        .map(|r| r["values"].clone())
        .expect("the forward in the state");
    for (k, want) in [
        ("id", f["id"].clone()),
        ("network_id", Value::from(network.clone())),
        ("status", Value::from("active")),
        ("protocol", Value::from("tcp")),
        ("public_port", Value::from(port)),
        ("private_port", Value::from(22)),
        ("public_ip", f["public_ip"].clone()),
        ("host", relay["host"].clone()),
    ] {
        assert_eq!(held[k], want, "{k}: {held}");
    }
    let out = tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    assert!(out.contains("No changes"), "{out}");

    // Imported as NETWORK_ID/FORWARD_ID: the same, nothing to change.
    tf.ok(&["state", "rm", "meson_port_forward.ssh"], 0);
    let id = format!("{network}/{}", f["id"].as_str().unwrap());
    tf.ok(&["import", "-no-color", "meson_port_forward.ssh", &id], 0);
    let out = tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    assert!(out.contains("No changes"), "{out}");

    // Removed: gone from meson, its port free again.
    std::fs::write(tf.dir.join("forwards.tf"), forwards_tf(None)).unwrap();
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 0 to change, 1 to destroy"), "{out}");
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert_eq!(
        dev.get(&forwards).await["port_forwards"],
        Value::Array(vec![])
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while listened_on(port) {
        assert!(Instant::now() < deadline, "{port} still listened on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `meson_usage` configuration: a VM, usage read after it is made
/// (`depends_on`) by resource and by tenant, a window of its own (a day of
/// 2020, an offset in `to`: nothing metered), and, with `tenant`, one
/// tenant's.
fn usage_tf(tenant: Option<&str>) -> String {
    let mut tf = r#"
resource "meson_vm" "metered" {
  name       = "metered"
  cores      = 1
  memory_mib = 1024
}
data "meson_usage" "month" {
  depends_on = [meson_vm.metered]
}
data "meson_usage" "by_tenant" {
  group_by   = "tenant"
  depends_on = [meson_vm.metered]
}
data "meson_usage" "past" {
  from     = "2020-01-01T00:00:00Z"
  to       = "2020-01-02T01:00:00+01:00"
  group_by = "day"
}
output "metered" {
  value = [
    for l in data.meson_usage.month.lines : l
    if l.meter == "vm" && l.group == meson_vm.metered.id
  ]
}
output "totals" {
  value = data.meson_usage.month.totals
}
output "window" {
  value = {
    id       = data.meson_usage.month.id
    from     = data.meson_usage.month.from
    to       = data.meson_usage.month.to
    group_by = data.meson_usage.month.group_by
    tenant   = data.meson_usage.month.tenant
  }
}
output "tenants" {
  value = [for l in data.meson_usage.by_tenant.lines : l.group]
}
output "past" {
  value = data.meson_usage.past
}
"#
    .to_owned();
    if let Some(t) = tenant {
        tf.push_str(&format!(
            r#"
data "meson_usage" "tenant" {{
  tenant     = "{t}"
  depends_on = [meson_vm.metered]
}}
output "tenant" {{
  value = [for l in data.meson_usage.tenant.lines : [l.tenant, l.meter, l.group]]
}}
"#
        ));
    }
    tf
}

/// `v` read as the type of `_t` (a time, as meson's JSON has it).
fn like<T: serde::de::DeserializeOwned>(_t: &T, v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// A decimal string of meson's (quantities, costs, amounts).
fn decimal(v: &Value) -> f64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a decimal string: {v}"))
}

/// Metering by plan: a VM and `meson_usage` read after it in the same
/// apply: its line (meter `vm`) is there, as meson's `/v1/usage` has it,
/// and the totals are in EUR; the window meson chose fills `from` and
/// `to`, one configured is kept as written; by tenant, and one tenant's.
/// A bad time is refused before meson is asked, a grouping meson refuses
/// points at `group_by`. Removing it all destroys the VM.
async fn usage_by_plan(dev: &Dev, tf: &Tf) {
    std::fs::write(tf.dir.join("usage.tf"), usage_tf(None)).unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(
        out.contains("Resources: 1 added, 0 changed, 0 destroyed"),
        "{out}"
    );
    let vm = vm_by_name(dev, "metered").await.expect("the metered VM");
    let outputs: Value = serde_json::from_str(&tf.ok(&["output", "-json"], 0)).unwrap();
    let metered = &outputs["metered"]["value"];
    assert_eq!(metered.as_array().map(Vec::len), Some(1), "{outputs}");
    let line = &metered[0];
    for (k, want) in [
        ("meter", Value::from("vm")),
        ("unit", Value::from("hour")),
        ("group", vm["id"].clone()),
        ("name", Value::from("metered")),
        ("currency", Value::from("EUR")),
    ] {
        assert_eq!(line[k], want, "{k}: {line}");
    }
    // Running for milliseconds: six decimals of an hour may still be 0.
    assert!(decimal(&line["quantity"]) >= 0.0, "{line}");
    assert!(decimal(&line["cost"]) >= 0.0, "{line}");
    let api = dev.get("/v1/usage").await;
    let theirs = api["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["meter"] == "vm" && l["group"] == vm["id"])
        .cloned()
        .unwrap_or_else(|| panic!("meson's usage has the VM: {api}"));
    assert_eq!(line["tenant"], theirs["tenant"], "{theirs}");
    let tenant = theirs["tenant"].as_str().unwrap().to_owned();
    let totals = outputs["totals"]["value"].as_array().unwrap();
    let eur = totals
        .iter()
        .find(|m| m["currency"] == "EUR")
        .unwrap_or_else(|| panic!("totals in EUR: {outputs}"));
    assert!(decimal(&eur["amount"]) >= 0.0, "{eur}");

    // meson's window: this month so far; the grouping its default.
    let window = &outputs["window"]["value"];
    assert_eq!(window["from"], api["from"], "{window}");
    assert_eq!(window["group_by"], "resource", "{window}");
    assert_eq!(window["tenant"], Value::Null, "{window}");
    let to = window["to"].as_str().expect("to, filled in");
    let theirs: meson_types::usage::Usage = serde_json::from_value(api.clone()).unwrap();
    let read_to = like(&theirs.to, &window["to"]);
    assert!(
        theirs.from < read_to && read_to <= theirs.to,
        "{window}: read before {api}"
    );
    assert_eq!(
        window["id"],
        format!("{}/{to}/resource", window["from"].as_str().unwrap()),
        "{window}"
    );
    assert!(
        outputs["tenants"]["value"]
            .as_array()
            .is_some_and(|t| t.contains(&Value::from(tenant.clone()))),
        "{outputs}"
    );
    // A window of its own, as written; nothing was metered then.
    let past = &outputs["past"]["value"];
    assert_eq!(past["from"], "2020-01-01T00:00:00Z", "{past}");
    assert_eq!(past["to"], "2020-01-02T01:00:00+01:00", "{past}");
    assert_eq!(past["group_by"], "day", "{past}");
    assert_eq!(
        past["id"], "2020-01-01T00:00:00Z/2020-01-02T00:00:00Z/day",
        "{past}"
    );
    assert_eq!(past["lines"], Value::Array(vec![]), "{past}");
    assert_eq!(past["totals"], Value::Array(vec![]), "{past}");

    // One tenant's, named: read at plan time now, the VM made.
    std::fs::write(tf.dir.join("usage.tf"), usage_tf(Some(&tenant))).unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(
        out.contains("Resources: 0 added, 0 changed, 0 destroyed"),
        "{out}"
    );
    let outputs: Value = serde_json::from_str(&tf.ok(&["output", "-json"], 0)).unwrap();
    let own = outputs["tenant"]["value"].as_array().unwrap();
    assert!(
        own.contains(&serde_json::json!([tenant, "vm", vm["id"]])),
        "{outputs}"
    );
    assert!(own.iter().all(|l| l[0] == tenant.as_str()), "{outputs}");
    // Read again, seconds later: the running VM's hours have grown.
    let again = &outputs["metered"]["value"][0];
    assert!(
        decimal(&again["quantity"]) > decimal(&line["quantity"]),
        "{line} then {again}"
    );

    // Refused: a time before meson is asked, a grouping by meson.
    for (bad, says) in [
        (r#"from = "yesterday""#, "from must be an RFC 3339 time"),
        (r#"group_by = "colour""#, "(invalid_input)"),
    ] {
        std::fs::write(
            tf.dir.join("usage_bad.tf"),
            format!("data \"meson_usage\" \"bad\" {{\n  {bad}\n}}\n"),
        )
        .unwrap();
        let out = tf.run(&["plan", "-no-color"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
        assert!(err.contains(bad), "the diagnostic points at it: {err}");
    }
    std::fs::remove_file(tf.dir.join("usage_bad.tf")).unwrap();

    std::fs::remove_file(tf.dir.join("usage.tf")).unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(
        out.contains("Resources: 0 added, 0 changed, 1 destroyed"),
        "{out}"
    );
    assert!(vm_by_name(dev, "metered").await.is_none());
}

/// The imported VM's `networks`, changed in place: joined, reordered (the
/// NICs from the first change of order re-attached), left.
async fn networks_by_plan(dev: &Dev, tf: &Tf, vm: &str) {
    let vm_tf = |networks: &str| {
        format!(
            r#"
resource "meson_network" "a" {{
  name = "nic-a"
  cidr = "192.168.61.0/24"
  dhcp = false
}}
resource "meson_network" "b" {{
  name = "nic-b"
  cidr = "192.168.62.0/24"
  dhcp = false
}}
resource "meson_vm" "imported" {{
  name        = "imported"
  cores       = 2
  memory_mib  = 2048
  power_state = "stopped"
  labels      = {{ team = "infra" }}
  networks    = [{networks}]
}}
"#
        )
    };
    let nics = || async {
        let vm = dev.get(&format!("/v1/vms/{vm}")).await["vm"].clone();
        let nets: Vec<String> = vm["private_net"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["ip"].as_str().unwrap().to_owned())
            .collect();
        nets
    };
    for (networks, want, change) in [
        (
            "meson_network.a.id",
            vec!["192.168.61.2"],
            "2 to add, 1 to change",
        ),
        (
            "meson_network.b.id, meson_network.a.id",
            vec!["192.168.62.2", "192.168.61.2"],
            "0 to add, 1 to change",
        ),
        ("", vec![], "0 to add, 1 to change"),
    ] {
        std::fs::write(tf.dir.join("imported.tf"), vm_tf(networks)).unwrap();
        let out = tf.ok(&["plan", "-no-color"], 0);
        assert!(
            out.contains(&format!("{change}, 0 to destroy")),
            "{networks}: {out}"
        );
        tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
        assert_eq!(nics().await, want, "{networks}");
        tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    }
}

/// A kept SSH key from a `.pub` file (its trailing newline no change),
/// renamed in place, replaced when the key changes, imported, and
/// destroyed; a taken name is pointed at.
async fn ssh_keys_by_plan(dev: &Dev, tf: &Tf) {
    const ED25519: &str = "ssh-ed25519 \
        AAAAC3NzaC1lZDI1NTE5AAAAIKsXu3gF1dsjgi7AFYsFlujQvUGwiqxtFGIzhDsQrt1p ana@laptop";
    const RSA: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCtIerNrscx1e13slvSIAg+LegETPijTUw/\
        SagxTLBAD8ZaY2F+IxD2AoMc3iCSTx712Rg0lkJVC/+J2oDs2YdmA04ZZ5h9TGEHnJuNn2pyP0WxjoC0Yz6FUjSWhI\
        wnl3+RcOqvD59oRmNz/e7PFL8jiurk4MQhUuapwh/CRnbYLBJE+dQH2JirgHTH+XfKwnAakD/lffB601NeBIQ8K9E8/\
        hEd4QxcNHN8XuvC5jsQajvO3QoXqdC8/qVmTWNsaA7D7IZFcLSr+iliFl+rJ6Juk1klRyC6B0jIIbfOC3Kp/9j/CAxx\
        alpI+9Qhe8QhQoPs5jQx2nrSNOoSB5+Hdun5 ci@runner";
    let keys_tf = |name: &str| {
        format!(
            r#"
resource "meson_ssh_key" "laptop" {{
  name       = "{name}"
  public_key = file("${{path.module}}/id.pub")
  labels     = {{ team = "web" }}
}}
output "fingerprint" {{
  value = meson_ssh_key.laptop.fingerprint
}}
"#
        )
    };
    let kept = || async {
        let keys = dev.get("/v1/ssh-keys").await;
        keys["ssh_keys"].as_array().unwrap().clone()
    };
    std::fs::write(tf.dir.join("id.pub"), format!("{ED25519}\n")).unwrap();
    std::fs::write(tf.dir.join("keys.tf"), keys_tf("laptop")).unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(out.contains("1 added, 0 changed, 0 destroyed"), "{out}");
    assert!(
        out.contains("SHA256:9EiTBMAujmdUnv2I9IKzJMHRAA7jLozr7q50Qj+Sx34"),
        "ssh-keygen's fingerprint: {out}"
    );
    // The file's newline is no change.
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    let first = kept().await;
    assert_eq!(first.len(), 1);

    // Renamed in place.
    std::fs::write(tf.dir.join("keys.tf"), keys_tf("ana-laptop")).unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(out.contains("0 added, 1 changed, 0 destroyed"), "{out}");
    assert_eq!(kept().await[0]["name"], "ana-laptop");
    assert_eq!(kept().await[0]["id"], first[0]["id"]);

    // Another key replaces it.
    std::fs::write(tf.dir.join("id.pub"), RSA).unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(out.contains("1 added, 0 changed, 1 destroyed"), "{out}");
    let now = kept().await;
    assert_eq!(now.len(), 1);
    assert_ne!(now[0]["id"], first[0]["id"]);
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);

    // A VM with the kept key beside one written inline: both installed, and
    // the configuration's `ssh_keys` stays as written (no change planned).
    std::fs::write(
        tf.dir.join("keyed.tf"),
        r#"
resource "meson_vm" "keyed" {
  name        = "keyed"
  cores       = 1
  memory_mib  = 1024
  ssh_keys    = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d x"]
  ssh_key_ids = [meson_ssh_key.laptop.id]
}
"#,
    )
    .unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(out.contains("1 added, 0 changed, 0 destroyed"), "{out}");
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    let keyed = vm_by_name(dev, "keyed").await.expect("the VM");
    let installed = keyed["specs"]["ssh_keys"].as_array().unwrap();
    assert_eq!(installed.len(), 2, "{keyed}");
    assert!(installed.iter().any(|k| k == RSA), "{keyed}");

    // Imported under a second address, then a name taken is pointed at.
    let id = now[0]["id"].as_str().unwrap().to_owned();
    std::fs::write(
        tf.dir.join("keys_bad.tf"),
        r#"
resource "meson_ssh_key" "twin" {
  name       = "ana-laptop"
  public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d x"
}
"#,
    )
    .unwrap();
    let out = tf.run(&["apply", "-auto-approve", "-no-color"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("uniqueness_error") || err.contains("already exists"),
        "{err}"
    );
    assert!(err.contains("name"), "the diagnostic points at it: {err}");
    std::fs::remove_file(tf.dir.join("keys_bad.tf")).unwrap();
    tf.ok(&["state", "rm", "-no-color", "meson_ssh_key.laptop"], 0);
    tf.ok(
        &["import", "-no-color", "meson_ssh_key.laptop", id.as_str()],
        0,
    );
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);

    std::fs::remove_file(tf.dir.join("keys.tf")).unwrap();
    std::fs::remove_file(tf.dir.join("keyed.tf")).unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(out.contains("0 added, 0 changed, 2 destroyed"), "{out}");
    assert!(kept().await.is_empty());
    assert!(vm_by_name(dev, "keyed").await.is_none());
}

/// A backup window, `HH-HH` (UTC), that the current hour is outside of, so
/// that no automatic backup is taken while the test runs.
fn window_away_from_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let hour = secs / 3600 % 24;
    format!("{:02}-{:02}", (hour + 6) % 24, (hour + 8) % 24)
}

/// The imported VM's automatic backups, in place: turned on (meson picks
/// the window, 7 kept), given a window and a count, then turned off by
/// removing them from the configuration; no plan after shows changes.
async fn backups_by_plan(dev: &Dev, tf: &Tf, vm: &str) {
    let vm_tf = |backups: &str| {
        format!(
            r#"
resource "meson_network" "a" {{
  name = "nic-a"
  cidr = "192.168.61.0/24"
  dhcp = false
}}
resource "meson_network" "b" {{
  name = "nic-b"
  cidr = "192.168.62.0/24"
  dhcp = false
}}
resource "meson_vm" "imported" {{
  name        = "imported"
  cores       = 2
  memory_mib  = 2048
  power_state = "stopped"
  labels      = {{ team = "infra" }}
  networks    = []
{backups}}}
"#
        )
    };
    let policy = || async { dev.get(&format!("/v1/vms/{vm}")).await["vm"]["backups"].clone() };
    let held = || {
        let shown: Value = serde_json::from_str(&tf.ok(&["show", "-json"], 0)).unwrap();
        shown["values"]["root_module"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["address"] == "meson_vm.imported")
            .map(|r| r["values"].clone())
            .expect("the imported VM in the state")
    };
    assert_eq!(policy().await, Value::Null);
    let state = held();
    assert_eq!(
        (
            &state["backups"],
            &state["backup_window"],
            &state["backup_keep"]
        ),
        (&Value::from(false), &Value::Null, &Value::from(7)),
        "{state}"
    );

    // On: meson's window, 7 kept; the state holds what meson chose.
    std::fs::write(tf.dir.join("imported.tf"), vm_tf("  backups     = true\n")).unwrap();
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 1 to change, 0 to destroy"), "{out}");
    assert!(
        out.contains("backups") && out.contains("(known after apply)"),
        "{out}"
    );
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    let on = policy().await;
    assert_eq!(on["keep"], 7, "{on}");
    let window = on["window"].as_str().expect("a window").to_owned();
    assert!(
        window.len() == 5 && window.as_bytes()[2] == b'-',
        "HH-HH: {on}"
    );
    let state = held();
    assert_eq!(state["backups"], true, "{state}");
    assert_eq!(state["backup_window"], window.as_str(), "{state}");
    assert_eq!(state["backup_keep"], 7, "{state}");
    let out = tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    assert!(out.contains("No changes"), "{out}");

    // A window and a count of its own, changed in place.
    let away = window_away_from_now();
    std::fs::write(
        tf.dir.join("imported.tf"),
        vm_tf(&format!(
            "  backups       = true\n  backup_window = \"{away}\"\n  backup_keep   = 3\n"
        )),
    )
    .unwrap();
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 1 to change, 0 to destroy"), "{out}");
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert_eq!(
        policy().await,
        serde_json::json!({"window": away, "keep": 3})
    );
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);

    // A bad window is refused before meson is asked, naming the attribute.
    std::fs::write(
        tf.dir.join("imported.tf"),
        vm_tf("  backups       = true\n  backup_window = \"22-25\"\n"),
    )
    .unwrap();
    let out = tf.run(&["plan", "-no-color"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("backup_window must be HH-HH"), "{err}");

    // Off again by removing them: meson's VM has no policy.
    std::fs::write(tf.dir.join("imported.tf"), vm_tf("")).unwrap();
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 1 to change, 0 to destroy"), "{out}");
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert_eq!(policy().await, Value::Null);
    let state = held();
    assert_eq!(
        (
            &state["backups"],
            &state["backup_window"],
            &state["backup_keep"]
        ),
        (&Value::from(false), &Value::Null, &Value::from(7)),
        "{state}"
    );
    let out = tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    assert!(out.contains("No changes"), "{out}");
}

impl Drop for Dev {
    fn drop(&mut self) {
        // SIGTERM: mesond dev finishes, stops its private PostgreSQL and
        // exits (promptly: its own tests hold it to that).
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let shared = mesond::pg::shared_home(&self.dir.join(".meson"));
        let _ = std::fs::remove_dir_all(shared);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Terraform in `dir`, with this build of the provider installed by
/// `dev_overrides` and nothing of the caller's meson settings (the provider
/// finds the `mesond dev` from the working directory, as mesonctl does).
struct Tf {
    dir: PathBuf,
    cli_config: PathBuf,
}

impl Tf {
    fn new(dev: &Dev) -> Tf {
        let dir = dev.dir.join("tf");
        std::fs::create_dir_all(&dir).unwrap();
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/terraform");
        for f in std::fs::read_dir(&example).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "tf") {
                std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
            }
        }
        let provider_dir = Path::new(env!("CARGO_BIN_EXE_terraform-provider-meson"))
            .parent()
            .unwrap()
            .to_owned();
        let cli_config = dev.dir.join("terraformrc");
        std::fs::write(
            &cli_config,
            format!(
                "provider_installation {{\n  dev_overrides {{\n    \"elemento/meson\" = {:?}\n  }}\n  direct {{}}\n}}\n",
                provider_dir.display().to_string()
            ),
        )
        .unwrap();
        Tf { dir, cli_config }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(TERRAFORM);
        c.args(args).current_dir(&self.dir);
        for (k, _) in std::env::vars() {
            if k.starts_with("MESON_") || k.starts_with("TF_") {
                c.env_remove(k);
            }
        }
        c.env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        c.output().expect("terraform runs")
    }

    /// Sets the variables (`terraform.tfvars`, read by every command).
    fn vars(&self, tfvars: &str) {
        std::fs::write(self.dir.join("terraform.tfvars"), tfvars).unwrap();
    }

    /// Runs and asserts the exit code; stdout.
    fn ok(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        let text = format!(
            "terraform {}: {}\n--- stdout\n{}--- stderr\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(code), "{text}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn terraform_present() {
    let found = Command::new(TERRAFORM).arg("version").output();
    assert!(
        found.as_ref().is_ok_and(|o| o.status.success()),
        "the `terraform` CLI is needed by this test and was not found on PATH \
         (install Terraform 1.11: .ci/run does): {found:?}"
    );
}

async fn vm_by_name(dev: &Dev, name: &str) -> Option<Value> {
    dev.list("vms")
        .await
        .into_iter()
        .find(|v| v["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terraform_applies_plans_imports_and_destroys_the_example() {
    terraform_present();
    let dev = Dev::start().await;
    let tf = Tf::new(&dev);

    // The example as written, and the catalogue's data sources beside it.
    std::fs::write(
        tf.dir.join("catalogue.tf"),
        r#"
data "meson_flavors" "all" {}
data "meson_providers" "all" {}
data "meson_kubernetes_versions" "all" {}

output "flavors" {
  value = [for f in data.meson_flavors.all.flavors : f.name]
}
output "providers" {
  value = [for p in data.meson_providers.all.providers : p.name]
}
output "default_kubernetes_version" {
  value = data.meson_kubernetes_versions.all.default
}
"#,
    )
    .unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(out.contains("Apply complete! Resources: 4 added"), "{out}");
    let vm = vm_by_name(&dev, "test").await.expect("the seed VM");
    assert_eq!(vm["status"], "running", "{vm}");
    assert_eq!(vm["provider"], "ionos", "{vm}");
    let clusters = dev.list("clusters").await;
    assert_eq!(clusters.len(), 1, "{clusters:?}");
    let cluster = &clusters[0];
    assert_eq!(cluster["name"], "test8");
    assert_eq!(cluster["pools"].as_array().unwrap().len(), 2, "{cluster}");
    assert_eq!(dev.list("networks").await.len(), 1);
    // The kubeconfig was read, and is kept out of the output.
    let shown = tf.ok(&["show", "-json"], 0);
    let shown: Value = serde_json::from_str(&shown).unwrap();
    let kubeconfig = shown["values"]["root_module"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == "data.meson_cluster_kubeconfig.test8")
        .cloned()
        .expect("the kubeconfig data source");
    assert!(
        kubeconfig["values"]["kubeconfig"]
            .as_str()
            .is_some_and(|k| k.contains("apiVersion")),
        "{kubeconfig}"
    );
    assert_eq!(kubeconfig["sensitive_values"]["kubeconfig"], true);

    let outputs: Value = serde_json::from_str(&tf.ok(&["output", "-json"], 0)).unwrap();
    let catalogue = dev.get("/v1/flavors").await["flavors"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        outputs["flavors"]["value"].as_array().map(Vec::len),
        Some(catalogue)
    );
    assert!(
        outputs["providers"]["value"]
            .as_array()
            .is_some_and(|p| p.contains(&Value::from("ionos"))),
        "{outputs}"
    );
    let versions = dev.get("/v1/kubernetes-versions").await;
    let default = versions["kubernetes_versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["default"] == true)
        .map(|v| v["version"].clone());
    assert_eq!(
        Some(outputs["default_kubernetes_version"]["value"].clone()),
        default
    );

    // Nothing to change.
    let out = tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    assert!(out.contains("No changes"), "{out}");

    // The second pool grows in place; its nodes follow on the simulator.
    tf.vars("workers_desired_nodes = 2\n");
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 1 to change, 0 to destroy"), "{out}");
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    let cluster_id = cluster["id"].as_str().unwrap();
    let pools = dev.get(&format!("/v1/clusters/{cluster_id}/pools")).await;
    let workers = pools["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "workers")
        .cloned()
        .expect("the workers pool");
    assert_eq!(workers["desired_nodes"], 2, "{workers}");
    assert_eq!(workers["current_nodes"], 2, "{workers}");
    let nodes = dev.get(&format!("/v1/clusters/{cluster_id}/nodes")).await;
    let on_pool = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["pool"] == workers["id"] && n["status"] != "deleting")
        .count();
    assert_eq!(on_pool, 2, "{nodes}");
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);

    // A later Kubernetes version upgrades the cluster in place.
    tf.vars("workers_desired_nodes = 2\nkubernetes_version = \"1.36\"\n");
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 1 to change, 0 to destroy"), "{out}");
    // What meson says along with the change is shown as a warning.
    let out = tf.run(&["apply", "-auto-approve", "-no-color"]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("Warning: 1.36 resolved to its latest supported patch, 1.36."),
        "{all}"
    );
    let upgraded = dev.get(&format!("/v1/clusters/{cluster_id}")).await["cluster"].clone();
    assert!(
        upgraded["kubernetes_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("1.36.")),
        "{upgraded}"
    );
    assert_eq!(upgraded["id"], cluster["id"], "the same cluster");
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);

    // A VM deleted outside Terraform is planned again and re-created.
    let old = vm["id"].as_str().unwrap().to_owned();
    let del = dev.delete(&format!("/v1/vms/{old}")).await;
    let done = dev.finished(del["action"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "success", "{done}");
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("1 to add, 0 to change, 0 to destroy"), "{out}");
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(
        out.contains("Resources: 1 added, 0 changed, 0 destroyed"),
        "{out}"
    );
    let again = vm_by_name(&dev, "test").await.expect("re-created");
    assert_ne!(again["id"], old);
    assert_eq!(again["status"], "running");

    // A VM made with mesonctl, imported: the plan has nothing to do.
    std::fs::write(
        dev.dir.join("imported.json"),
        r#"{"specs": {"vm_name": "imported", "req": {"cpu": {"numberOfCores": 1}, "mem": {"capacity": 1024}}}}"#,
    )
    .unwrap();
    let made = Command::new(binary("mesonctl"))
        .args(["vm", "create", "-f", "imported.json"])
        .current_dir(&dev.dir)
        .env_remove("MESON_URL")
        .env_remove("MESON_TOKEN")
        .output()
        .unwrap();
    assert!(made.status.success(), "mesonctl: {made:?}");
    let imported = vm_by_name(&dev, "imported").await.expect("mesonctl's VM");
    let imported_id = imported["id"].as_str().unwrap();
    std::fs::write(
        tf.dir.join("imported.tf"),
        "resource \"meson_vm\" \"imported\" {\n  name       = \"imported\"\n  cores      = 1\n  memory_mib = 1024\n}\n",
    )
    .unwrap();
    tf.ok(
        &["import", "-no-color", "meson_vm.imported", imported_id],
        0,
    );
    let out = tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    assert!(out.contains("No changes"), "{out}");

    // Labels, and the power state through the power API, change in place.
    std::fs::write(
        tf.dir.join("imported.tf"),
        "resource \"meson_vm\" \"imported\" {\n  name        = \"imported\"\n  cores       = 1\n  memory_mib  = 1024\n  power_state = \"stopped\"\n  labels      = { team = \"infra\" }\n}\n",
    )
    .unwrap();
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 1 to change, 0 to destroy"), "{out}");
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    let stopped = dev.get(&format!("/v1/vms/{imported_id}")).await["vm"].clone();
    assert_eq!(stopped["status"], "off", "{stopped}");
    assert_eq!(stopped["labels"]["team"], "infra", "{stopped}");
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);

    // A new size is planned in place, not as a replacement; the VM keeps
    // its id and stays off.
    std::fs::write(
        tf.dir.join("imported.tf"),
        "resource \"meson_vm\" \"imported\" {\n  name        = \"imported\"\n  cores       = 2\n  memory_mib  = 2048\n  power_state = \"stopped\"\n  labels      = { team = \"infra\" }\n}\n",
    )
    .unwrap();
    let out = tf.ok(&["plan", "-no-color"], 0);
    assert!(out.contains("0 to add, 1 to change, 0 to destroy"), "{out}");
    tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    let resized = dev.get(&format!("/v1/vms/{imported_id}")).await["vm"].clone();
    assert_eq!(
        (
            resized["specs"]["cores"].as_u64(),
            resized["specs"]["memory_mib"].as_u64()
        ),
        (Some(2), Some(2048)),
        "{resized}"
    );
    assert_eq!(resized["status"], "off", "{resized}");
    tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);

    networks_by_plan(&dev, &tf, imported_id).await;

    backups_by_plan(&dev, &tf, imported_id).await;

    volumes_by_plan(&dev, &tf).await;

    port_forwards_by_plan(&dev, &tf).await;

    ssh_keys_by_plan(&dev, &tf).await;

    usage_by_plan(&dev, &tf).await;

    // A golden image of the holder VM, and a VM booted from it, its
    // backups on from its create.
    let away = window_away_from_now();
    std::fs::write(
        tf.dir.join("images.tf"),
        format!(
            r#"
resource "meson_image" "golden" {{
  name  = "golden"
  vm_id = meson_vm.holder.id
}}
resource "meson_vm" "copy" {{
  name          = "copy"
  cores         = 1
  memory_mib    = 1024
  image_id      = meson_image.golden.id
  backups       = true
  backup_window = "{away}"
  backup_keep   = 2
}}
"#
        ),
    )
    .unwrap();
    let out = tf.ok(&["apply", "-auto-approve", "-no-color"], 0);
    assert!(
        out.contains("Resources: 2 added, 0 changed, 0 destroyed"),
        "{out}"
    );
    let golden = dev.list("images").await;
    assert_eq!(golden.len(), 1, "{golden:?}");
    let copy = vm_by_name(&dev, "copy").await.expect("the copy");
    assert_eq!(copy["specs"]["image"], golden[0]["id"], "{copy}");
    assert_eq!(copy["host"], golden[0]["host"], "{copy}");
    assert_eq!(copy["status"], "running", "{copy}");
    assert_eq!(
        copy["backups"],
        serde_json::json!({"window": away, "keep": 2}),
        "{copy}"
    );
    let out = tf.ok(&["plan", "-detailed-exitcode", "-no-color"], 0);
    assert!(out.contains("No changes"), "{out}");

    // A request meson refuses: its error code, and the attribute it names.
    std::fs::write(
        tf.dir.join("bad.tf"),
        "resource \"meson_vm\" \"bad\" {\n  name       = \"bad\"\n  cores      = 1\n  memory_mib = 0\n}\n",
    )
    .unwrap();
    let out = tf.run(&["apply", "-auto-approve", "-no-color"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("(invalid_input)"), "{err}");
    assert!(err.contains("specs.req.mem.capacity"), "{err}");
    assert!(
        err.contains("memory_mib = 0"),
        "the diagnostic points at the attribute: {err}"
    );
    std::fs::remove_file(tf.dir.join("bad.tf")).unwrap();
    assert!(vm_by_name(&dev, "bad").await.is_none());

    // Destroy: nothing left in meson, nor on the hosts.
    tf.ok(&["destroy", "-auto-approve", "-no-color"], 0);
    assert_eq!(dev.list("vms").await, Vec::<Value>::new());
    assert_eq!(dev.list("clusters").await, Vec::<Value>::new());
    assert_eq!(dev.list("networks").await, Vec::<Value>::new());
    assert_eq!(dev.list("volumes").await, Vec::<Value>::new());
    assert_eq!(dev.list("images").await, Vec::<Value>::new());
    assert_eq!(dev.atomos(), (0, 0), "VMs and networks left on AtomOS");
}
