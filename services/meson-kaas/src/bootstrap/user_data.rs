//! The `#cloud-config` user-data of a node: the files it needs
//! (`write_files`), the bootstrap script run by `runcmd`, and `phone_home`.

use super::check::check;
use super::containerd::containerd_config;
use super::kernel::{MODULES, SYSCTL};
use super::kube_vip::{KUBE_VIP_HOSTS, kube_vip_manifest};
use super::kubeadm::{has_super_admin, kubeadm_client_config, kubeadm_config};
use super::script::bootstrap_script;
use super::{ClusterBootstrap, NodeBootstrap, NodeRole, paths};
use crate::error::KaasError;
use crate::text::{file_content, q, sh};
use std::fmt::Write as _;

/// What `runcmd` runs: the bootstrap, or a power-off that blocks until the
/// VM is down (so cloud-init never reaches `phone_home`).
const RUNCMD: &str = "/usr/local/sbin/meson-bootstrap || { \
     echo 'meson-bootstrap failed: powering off so that this node never phones home' >&2; \
     shutdown -h now; sleep 600; poweroff -f; }";

/// One `write_files` entry.
struct File {
    path: String,
    permissions: &'static str,
    content: String,
}

fn file(path: &str, permissions: &'static str, content: impl Into<String>) -> File {
    File {
        path: path.to_owned(),
        permissions,
        content: content.into(),
    }
}

/// Every file the node gets.
fn files(cluster: &ClusterBootstrap<'_>, node: &NodeBootstrap) -> Result<Vec<File>, KaasError> {
    let v = &cluster.kubernetes_version;
    let mut files = vec![
        file(paths::MODULES, "0644", MODULES),
        file(paths::SYSCTL, "0644", SYSCTL),
        file(paths::CONTAINERD_CONFIG, "0644", containerd_config(v)),
        file(
            paths::CLUSTER_ENV,
            "0644",
            format!(
                "MESON_CLUSTER_ID={}\nMESON_CLUSTER_NAME={}\nMESON_NODE_ROLE={}\n",
                sh(&cluster.id.to_string()),
                sh(&cluster.name),
                sh(node.role.script_name())
            ),
        ),
        // The bootstrap token is in it.
        file(
            paths::KUBEADM_CONFIG,
            "0600",
            kubeadm_config(cluster, node)?,
        ),
    ];
    if node.role.is_control_plane() {
        let kubeconfig = if node.role == NodeRole::InitControlPlane && has_super_admin(v) {
            "/etc/kubernetes/super-admin.conf"
        } else {
            "/etc/kubernetes/admin.conf"
        };
        files.push(file(
            paths::KUBE_VIP_TEMPLATE,
            "0644",
            kube_vip_manifest(cluster, kubeconfig),
        ));
        files.push(file(paths::KUBE_VIP_HOSTS, "0644", KUBE_VIP_HOSTS));
        let s = cluster.secrets;
        let pki = |name: &str| format!("{}/{name}", paths::PKI);
        files.extend([
            file(&pki("ca.crt"), "0644", s.cluster_ca().cert_pem.as_str()),
            file(&pki("ca.key"), "0600", s.cluster_ca().key_pem.as_str()),
            file(
                &pki("front-proxy-ca.crt"),
                "0644",
                s.front_proxy_ca().cert_pem.as_str(),
            ),
            file(
                &pki("front-proxy-ca.key"),
                "0600",
                s.front_proxy_ca().key_pem.as_str(),
            ),
            file(&pki("etcd/ca.crt"), "0644", s.etcd_ca().cert_pem.as_str()),
            file(&pki("etcd/ca.key"), "0600", s.etcd_ca().key_pem.as_str()),
            file(
                &pki("sa.key"),
                "0600",
                s.service_account().private_pem.as_str(),
            ),
            file(
                &pki("sa.pub"),
                "0644",
                s.service_account().public_pem.as_str(),
            ),
            file(paths::CLIENT_CA_BUNDLE, "0644", s.client_ca_bundle()),
        ]);
        if node.role == NodeRole::JoinControlPlane {
            files.push(file(
                paths::KUBEADM_CLIENT_CONFIG,
                "0644",
                kubeadm_client_config(cluster),
            ));
        }
    }
    files.push(file(
        paths::BOOTSTRAP_SCRIPT,
        "0700",
        bootstrap_script(cluster, node),
    ));
    Ok(files)
}

/// The `#cloud-config` user-data of one node. Control-plane user-data holds
/// the cluster's CA keys: the volume it is written to is as secret as they are.
pub fn user_data(
    cluster: &ClusterBootstrap<'_>,
    node: &NodeBootstrap,
) -> Result<String, KaasError> {
    check(cluster, node)?;
    let files = files(cluster, node)?;
    let mut out = String::from("#cloud-config\n");
    let _ = writeln!(
        out,
        "# meson: node {} ({}) of Kubernetes cluster {} ({})",
        node.name,
        node.role.script_name(),
        cluster.name,
        cluster.id
    );
    let _ = writeln!(out, "hostname: {}", q(&node.name));
    out.push_str("preserve_hostname: false\nmanage_etc_hosts: true\nssh_pwauth: false\n");
    out.push_str("users:\n  - default\n  - name: \"elemento\"\n    shell: \"/bin/bash\"\n");
    out.push_str("    sudo: \"ALL=(ALL) NOPASSWD:ALL\"\n    lock_passwd: true\n");
    if !node.ssh_authorized_keys.is_empty() {
        out.push_str("    ssh_authorized_keys:\n");
        for k in &node.ssh_authorized_keys {
            let _ = writeln!(out, "      - {}", q(k.as_str()));
        }
    }
    out.push_str("write_files:\n");
    for f in &files {
        let _ = writeln!(out, "  - path: {}", q(&f.path));
        out.push_str("    owner: \"root:root\"\n");
        let _ = writeln!(out, "    permissions: {}", q(f.permissions));
        let _ = writeln!(out, "    content: {}", file_content(&f.content, 6));
    }
    out.push_str("runcmd:\n");
    let _ = writeln!(out, "  - [\"/bin/bash\", \"-c\", {}]", q(RUNCMD));
    out.push_str("phone_home:\n");
    let _ = writeln!(out, "  url: {}", q(&node.phone_home_url));
    out.push_str("  post: [\"instance_id\", \"hostname\"]\n  tries: 10\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::fixtures::*;
    use crate::bootstrap::*;
    use std::process::Command;

    #[test]
    fn user_data_is_cloud_config_with_the_node_files_runcmd_and_phone_home() {
        let c = v131();
        for role in ROLES {
            let ud = render(&c, role);
            assert!(ud.starts_with("#cloud-config\n"), "{role:?}");
            let doc = yaml(&ud);
            let name = node(role).name;
            assert_eq!(str_at(&doc, &["hostname"]), name);
            assert_eq!(doc["preserve_hostname"].as_bool(), Some(false));
            assert_eq!(
                doc["users"][1]["ssh_authorized_keys"][0].as_str(),
                Some(KEY),
                "{role:?}"
            );
            // runcmd: the bootstrap, or a power-off that blocks.
            let run = doc["runcmd"].as_sequence().unwrap();
            assert_eq!(run.len(), 1);
            let cmd = run[0][2].as_str().unwrap();
            assert!(cmd.starts_with(paths::BOOTSTRAP_SCRIPT), "{cmd}");
            assert!(
                cmd.contains("|| {") && cmd.contains("shutdown -h now"),
                "{cmd}"
            );
            assert!(cmd.contains("sleep 600"), "{cmd}");
            // phone_home as cloud-init's module wants it.
            assert_eq!(
                str_at(&doc, &["phone_home", "url"]),
                "https://meson.example/v1/phone-home/abc"
            );
            let post = strings(&doc["phone_home"]["post"], &[]);
            assert_eq!(post, ["instance_id", "hostname"]);
            assert_eq!(doc["phone_home"]["tries"].as_u64(), Some(10));

            // Files every node gets, with their modes.
            for (path, mode) in [
                (paths::MODULES, "0644"),
                (paths::SYSCTL, "0644"),
                (paths::CONTAINERD_CONFIG, "0644"),
                (paths::CLUSTER_ENV, "0644"),
                (paths::KUBEADM_CONFIG, "0600"),
                (paths::BOOTSTRAP_SCRIPT, "0700"),
            ] {
                let f = written(&doc, path).unwrap_or_else(|| panic!("{role:?}: {path}"));
                assert_eq!(f["permissions"].as_str(), Some(mode), "{path}");
                assert_eq!(f["owner"].as_str(), Some("root:root"), "{path}");
            }
            assert_eq!(content(&doc, paths::MODULES), "overlay\nbr_netfilter\n");
            let sysctl = content(&doc, paths::SYSCTL);
            for key in [
                "net.ipv4.ip_forward = 1",
                "net.bridge.bridge-nf-call-iptables = 1",
            ] {
                assert!(sysctl.contains(key), "{key}");
            }
            let containerd = content(&doc, paths::CONTAINERD_CONFIG);
            assert!(containerd.contains("SystemdCgroup = true"));
            assert!(containerd.contains("sandbox_image = \"registry.k8s.io/pause:3.10\""));
            let env = content(&doc, paths::CLUSTER_ENV);
            assert!(
                env.contains(&format!("MESON_CLUSTER_ID='{}'", c.id)),
                "{env}"
            );

            // The pki and kube-vip only on control-plane nodes.
            let pki = [
                ("ca.crt", "0644"),
                ("ca.key", "0600"),
                ("front-proxy-ca.crt", "0644"),
                ("front-proxy-ca.key", "0600"),
                ("etcd/ca.crt", "0644"),
                ("etcd/ca.key", "0600"),
                ("sa.key", "0600"),
                ("sa.pub", "0644"),
            ];
            for (name, mode) in pki {
                let path = format!("/etc/kubernetes/pki/{name}");
                match written(&doc, &path) {
                    Some(f) => {
                        assert!(role.is_control_plane(), "{role:?} got {path}");
                        assert_eq!(f["permissions"].as_str(), Some(mode), "{path}");
                    }
                    None => assert_eq!(role, NodeRole::Worker, "{role:?} lacks {path}"),
                }
            }
            assert_eq!(
                written(&doc, paths::KUBE_VIP_TEMPLATE).is_some(),
                role.is_control_plane()
            );
            assert_eq!(
                written(&doc, paths::KUBE_VIP_HOSTS).is_some(),
                role.is_control_plane()
            );
        }
    }

    #[test]
    fn control_plane_files_are_the_cluster_secrets() {
        let c = v131();
        let doc = yaml(&render(&c, NodeRole::JoinControlPlane));
        let s = secrets();
        for (name, want) in [
            ("ca.crt", &s.cluster_ca().cert_pem),
            ("ca.key", &s.cluster_ca().key_pem),
            ("front-proxy-ca.key", &s.front_proxy_ca().key_pem),
            ("etcd/ca.crt", &s.etcd_ca().cert_pem),
            ("sa.key", &s.service_account().private_pem),
            ("sa.pub", &s.service_account().public_pem),
        ] {
            let path = format!("{}/{name}", paths::PKI);
            assert_eq!(content(&doc, &path), want, "{path}");
        }
    }

    #[test]
    fn workers_get_no_private_key_material() {
        let c = v131();
        let ud = render(&c, NodeRole::Worker);
        assert!(
            !ud.contains("PRIVATE KEY"),
            "a worker's user-data holds a private key"
        );
        // No file goes to the PKI directory (the bootstrap script only names
        // the etcd pod's own certificate paths, used on control-plane nodes).
        let doc = yaml(&ud);
        let paths: Vec<&str> = doc["write_files"]
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(|f| f["path"].as_str())
            .collect();
        assert!(
            paths.iter().all(|p| !p.starts_with("/etc/kubernetes/pki")),
            "{paths:?}"
        );
        for key in [
            &secrets().cluster_ca().key_pem,
            &secrets().etcd_ca().key_pem,
            &secrets().service_account().private_pem,
        ] {
            // Not even one line of a key's base64.
            let line = key.lines().nth(1).unwrap();
            assert!(!ud.contains(line));
        }
        assert!(!ud.contains(secrets().certificate_key()));
        // Control-plane nodes do carry them.
        assert!(render(&c, NodeRole::InitControlPlane).contains("PRIVATE KEY"));
    }

    #[test]
    fn during_a_rotation_new_control_planes_trust_the_new_admin_ca_and_register_its_token() {
        let mut rotated = secrets().clone();
        rotated.begin_rotation("test8").unwrap();
        let rotated: &'static ClusterSecrets = Box::leak(Box::new(rotated));
        let mut c = v131();
        c.secrets = rotated;
        let ud = render(&c, NodeRole::JoinControlPlane);
        let doc = yaml(&ud);
        let bundle = content(&doc, paths::CLIENT_CA_BUNDLE);
        assert_eq!(bundle, rotated.client_ca_bundle());
        assert!(bundle.contains(&rotated.trusted_admin_ca().cert_pem));
        assert!(
            !bundle.contains(&secrets().admin_ca().cert_pem),
            "the old admin CA is out"
        );
        // It joins with the token the cluster knows and registers the new one.
        let join = &kubeadm(&ud)[0];
        assert_eq!(
            str_at(join, &["discovery", "bootstrapToken", "token"]),
            secrets().bootstrap_token().as_str()
        );
        let s = script(&ud);
        assert_eq!(
            script_var(&s, "BOOTSTRAP_TOKEN_REGISTER"),
            rotated.token_to_register().as_str()
        );
        assert_ne!(rotated.token_to_register(), secrets().bootstrap_token());
        // Once taken into use, the old one is revoked by the next ones.
        let mut promoted = rotated.clone();
        promoted.promote_rotated_token();
        let promoted: &'static ClusterSecrets = Box::leak(Box::new(promoted));
        c.secrets = promoted;
        let ud = render(&c, NodeRole::JoinControlPlane);
        assert_eq!(
            script_var(&script(&ud), "BOOTSTRAP_TOKEN_REVOKE"),
            secrets().bootstrap_token().id()
        );
        assert_eq!(
            str_at(&kubeadm(&ud)[0], &["discovery", "bootstrapToken", "token"]),
            rotated.token_to_register().as_str()
        );
        let worker = render(&c, NodeRole::Worker);
        assert!(!worker.contains(secrets().bootstrap_token().as_str()));
    }

    #[test]
    fn hostile_values_stay_values() {
        let c = v131();
        let mut n = node(NodeRole::Worker);
        n.phone_home_url = "https://x/'$(reboot)'\"#:{}[],&*!|>%@`".into();
        n.provider_id = Some("meson://\"a\":b'$(reboot)'".into());
        let ud = user_data(&c, &n).unwrap();
        let doc = yaml(&ud);
        assert_eq!(str_at(&doc, &["phone_home", "url"]), n.phone_home_url);
        let cfg = yaml(content(&doc, paths::KUBEADM_CONFIG));
        let args = cfg["nodeRegistration"]["kubeletExtraArgs"]
            .as_sequence()
            .unwrap();
        assert_eq!(
            args.last().unwrap()["value"].as_str(),
            n.provider_id.as_deref()
        );
        // Top-level keys are exactly what the renderer writes.
        let keys: Vec<_> = doc
            .as_mapping()
            .unwrap()
            .keys()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "hostname",
                "preserve_hostname",
                "manage_etc_hosts",
                "ssh_pwauth",
                "users",
                "write_files",
                "runcmd",
                "phone_home"
            ]
        );
    }

    /// Validates user-data with cloud-init's own schema (`cloud-init schema
    /// --config-file`, Debian's `cloud-init` package). Without the binary
    /// the test is skipped with a note, unless `MESON_REQUIRE_CLOUD_INIT=1`
    /// (CI) makes that a failure.
    #[test]
    fn user_data_passes_cloud_inits_schema() {
        let required = std::env::var("MESON_REQUIRE_CLOUD_INIT").is_ok_and(|v| v == "1");
        if let Err(e) = Command::new("cloud-init").arg("--version").output() {
            assert!(
                !required,
                "MESON_REQUIRE_CLOUD_INIT=1 but the `cloud-init` binary cannot run ({e}): \
                 install it with `apt-get install -y cloud-init`"
            );
            eprintln!(
                "note: `cloud-init` not found ({e}); cloud-init schema validation skipped \
                 (apt-get install -y cloud-init, or set MESON_REQUIRE_CLOUD_INIT=1 to make this fail)"
            );
            return;
        }
        let cases = [
            (v131(), NodeRole::InitControlPlane),
            (v131(), NodeRole::JoinControlPlane),
            (v131(), NodeRole::Worker),
            (
                cluster(KubeVersion::new(1, 29, 2), Cni::Cilium),
                NodeRole::InitControlPlane,
            ),
            (
                cluster(KubeVersion::new(1, 30, 14), Cni::Flannel),
                NodeRole::Worker,
            ),
        ];
        for (c, role) in cases {
            let ud = render(&c, role);
            let path = temp_file("user-data.yaml", &ud);
            let out = Command::new("cloud-init")
                .args(["schema", "--config-file"])
                .arg(&path)
                .output()
                .expect("cloud-init runs");
            let _ = std::fs::remove_file(&path);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && stdout.contains("Valid cloud-config"),
                "{role:?} on {}: cloud-init schema refused the user-data:\n{stdout}\n{stderr}",
                c.kubernetes_version
            );
        }
    }
}
