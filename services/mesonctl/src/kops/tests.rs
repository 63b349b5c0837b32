//! The translation end to end, and its parts where they are tricky.

use super::cidr::KOPS_DEFAULT_NETWORK;
use super::*;
use serde_json::{Value, json};

/// A `kops create cluster` line for AWS, kept verbatim (its `us-east-la`
/// typo included).
const SEED_AWS: &str = "kops create cluster --cloud=aws --networking calico \
    --name=demok8scluster.k8s.local --state=s3://kops-abhi-storage-1 --zones=us-east-la \
    --node-count=1 --node-size=t2.micro --master-size=t2.micro --master-volume-size=8 \
    --node-volume-size=8";

/// An example for the Elemento kOps provider, a line that was wrapped
/// where it was published.
const SEED_ELEMENTO: &str = "kops create cluster --cloud=elemento --name=test.k8s \
    --state=s3://test-kops --kubernetes-version=1.35.9 \
    --zones=europe --node-count=2 --node-volume-size=64 \
    --control-plane-volume-size=64 --network-cidr 192.168.100.0/24";

fn run(line: &str) -> Translation {
    translate(&[line.to_owned()], &Catalog::builtin()).expect("translates")
}

/// The request as JSON, as it goes on the wire.
fn payload(t: &Translation) -> Value {
    serde_json::to_value(&t.request).expect("serializes")
}

fn flags(t: &Translation) -> Vec<&str> {
    let mut f: Vec<&str> = t.reports.iter().map(|r| r.flag.as_str()).collect();
    f.sort_unstable();
    f
}

#[test]
fn the_seed_aws_example() {
    let t = run(SEED_AWS);
    let req = &payload(&t)["req"];
    assert_eq!(req["name"], "demok8scluster");
    assert_eq!(req["cni"], "calico");
    let pool = &req["nodepool"][0];
    assert_eq!(pool["desired_nodes"], 1);
    assert_eq!(pool["min_nodes"], 1);
    assert_eq!(pool["max_nodes"], 1);
    assert_eq!(pool["autoscale"], false);
    // t2.micro (1 vCPU, 1 GiB) fits neon (2 vCPUs, 2048 MiB); 8 GB is
    // below meson's smallest disk.
    assert_eq!(
        pool["specs"],
        json!({"cpu": 2, "ram": 2048, "storage": 20, "gpu": 0})
    );
    assert_eq!(
        req["control_plane"],
        json!({"nodes": 1, "specs": {"cpu": 2, "ram": 2048, "storage": 20, "gpu": 0}})
    );
    assert_eq!(
        req["nodes_subnet"],
        json!({"dhcp": true, "subnet_netmask": KOPS_DEFAULT_NETWORK,
               "start_address": "172.20.0.2", "last_address": "172.20.255.253"})
    );
    assert_eq!(req["metadata"]["kops"]["name"], "demok8scluster.k8s.local");
    assert_eq!(req["metadata"]["kops"]["node_size"]["flavor"], "neon");
    assert_eq!(
        req["metadata"]["kops"]["control_plane_size"],
        json!({"size": "t2.micro", "flavor": "neon"})
    );
    assert!(req.get("kubernetes_version").is_none());
    // us-east-la names no meson region: meson picks.
    let json = payload(&t);
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["req"], "{json}");
    assert_eq!(
        flags(&t),
        [
            "--cloud",
            "--master-volume-size",
            "--name",
            "--node-volume-size",
            "--state",
            "--zones"
        ],
        "{:#?}",
        t.reports
    );
    let state = t.reports.iter().find(|r| r.flag == "--state").unwrap();
    assert!(state.message.contains("meaningless"), "{state}");
    let cloud = t.reports.iter().find(|r| r.flag == "--cloud").unwrap();
    assert!(cloud.message.contains("meson is the cloud"), "{cloud}");
    let zones = t.reports.iter().find(|r| r.flag == "--zones").unwrap();
    assert!(zones.message.contains("us-east-la"), "{zones}");
    // The same line given as separate words translates the same.
    let words: Vec<String> = shell_words(SEED_AWS).unwrap();
    assert_eq!(translate(&words, &Catalog::builtin()).unwrap(), t);
}

#[test]
fn the_seed_elemento_example() {
    let t = run(SEED_ELEMENTO);
    let req = &payload(&t)["req"];
    assert_eq!(req["name"], "test-k8s");
    assert_eq!(req["kubernetes_version"], "1.35.9");
    assert_eq!(req["cni"], "cilium", "kOps' default networking");
    assert_eq!(req["nodepool"][0]["desired_nodes"], 2);
    assert_eq!(req["nodepool"][0]["specs"]["storage"], 64);
    assert_eq!(req["nodepool"][0]["specs"]["cpu"], 2);
    assert_eq!(req["control_plane"]["specs"]["storage"], 64);
    assert_eq!(req["control_plane"]["specs"]["cpu"], 4);
    assert_eq!(req["control_plane"]["specs"]["gpu"], 0);
    assert_eq!(req["nodes_subnet"]["subnet_netmask"], "192.168.100.0/24");
    assert_eq!(req["nodes_subnet"]["start_address"], "192.168.100.2");
    assert_eq!(req["nodes_subnet"]["last_address"], "192.168.100.253");
    assert_eq!(payload(&t)["continent"], "europe");
    assert_eq!(flags(&t), ["--name", "--state"], "{:#?}", t.reports);
}

#[test]
fn flag_forms_aliases_and_positional_names() {
    let args: Vec<String> = [
        "create",
        "cluster",
        "prod",
        "--control-plane-count",
        "3",
        "--control-plane-size=e2-standard-4",
        "--node-size",
        "cpx31,cpx41",
        "--zones",
        "de-fra",
        "--zones=it-ar1",
        "--networking=flannel-udp",
        "--bastion=false",
        "-t",
        "private",
        "-y",
        "--cloud-labels",
        "team=core,Owner=John Doe",
        "--node-count=150",
        "--frobnicate",
        "x",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let t = translate(&args, &Catalog::builtin()).unwrap();
    let req = &payload(&t)["req"];
    assert_eq!(req["name"], "prod");
    assert_eq!(req["control_plane"]["nodes"], 3);
    // e2-standard-4: 4 vCPUs, 16 GiB: more memory than any flavour, asked exactly.
    assert_eq!(req["control_plane"]["specs"]["cpu"], 4);
    assert_eq!(req["control_plane"]["specs"]["ram"], 16384);
    assert_eq!(req["control_plane"]["specs"]["gpu"], 0);
    // cpx31: 4 vCPUs, 8 GiB: beyond every flavour without a GPU, asked
    // exactly (not kripton, whose GPU the node would not have).
    assert_eq!(req["nodepool"][0]["specs"]["cpu"], 4);
    assert_eq!(req["nodepool"][0]["specs"]["ram"], 8192);
    assert_eq!(req["nodepool"][0]["specs"]["gpu"], 0);
    assert!(req["metadata"]["kops"]["node_size"].get("flavor").is_none());
    assert_eq!(req["nodepool"][0]["desired_nodes"], 100);
    assert_eq!(req["cni"], "flannel");
    assert_eq!(payload(&t)["region"], "de-fra");
    assert_eq!(payload(&t)["labels"], json!({"team": "core"}));
    assert_eq!(
        flags(&t),
        [
            "--cloud-labels",
            "--frobnicate",
            "--networking",
            "--node-count",
            "--node-size",
            "--zones",
            "-t",
            "-y"
        ],
        "{:#?}",
        t.reports
    );
}

#[test]
fn sizes_map_to_the_smallest_gpu_less_flavour_that_holds_them() {
    let flavor = |n: &str| {
        let (c, m) = instance_size(n).unwrap_or_else(|| panic!("{n} known"));
        smallest_flavor(c, m).map(|f| f.name)
    };
    assert_eq!(flavor("t2.nano"), Some("helium"));
    assert_eq!(flavor("t2.micro"), Some("neon"));
    assert_eq!(flavor("t3.small"), Some("neon"));
    assert_eq!(flavor("t3.medium"), None, "beyond neon: asked for exactly");
    assert_eq!(flavor("t2.large"), None, "beyond neon: asked for exactly");
    assert_eq!(flavor("m5.large"), None, "beyond neon: asked for exactly");
    assert_eq!(flavor("c5.large"), None, "beyond neon: asked for exactly");
    assert_eq!(flavor("m5.4xlarge"), None);
    assert_eq!(flavor("e2-micro"), Some("neon"));
    assert_eq!(flavor("e2-medium"), None, "beyond neon: asked for exactly");
    assert_eq!(
        flavor("n1-standard-1"),
        None,
        "beyond neon: asked for exactly"
    );
    assert_eq!(
        flavor("n1-standard-2"),
        None,
        "beyond neon: asked for exactly"
    );
    assert_eq!(
        flavor("n2-highcpu-8"),
        None,
        "beyond neon: asked for exactly"
    );
    assert_eq!(flavor("cx11"), Some("neon"));
    assert_eq!(flavor("cpx11"), Some("neon"));
    assert_eq!(flavor("cx22"), None, "beyond neon: asked for exactly");
    assert_eq!(
        flavor("s-2vcpu-4gb"),
        None,
        "beyond neon: asked for exactly"
    );
    assert_eq!(flavor("s-1vcpu-512mb-10gb"), Some("helium"));
    assert_eq!(
        flavor("s-4vcpu-8gb-amd"),
        None,
        "beyond neon: asked for exactly"
    );
    assert_eq!(flavor("c-2"), None, "beyond neon: asked for exactly");
    assert_eq!(flavor("neon"), Some("neon"));
    assert_eq!(instance_size("m5.4xlarge"), Some((16, 65536)));
    assert_eq!(instance_size("p3.2xlarge"), None);
    assert_eq!(instance_size("banana"), None);
}

#[test]
fn sizes_below_a_nodes_minimum_are_raised_and_unknown_ones_reported() {
    let t = run(
        "kops create cluster --name=a --node-size=t2.nano --control-plane-size=helium \
                 --node-volume-size=20000",
    );
    let req = &payload(&t)["req"];
    assert_eq!(
        req["nodepool"][0]["specs"],
        json!({"cpu": 2, "ram": 2048, "storage": 10240, "gpu": 0})
    );
    assert_eq!(req["control_plane"]["specs"]["cpu"], 2);
    assert_eq!(req["control_plane"]["specs"]["ram"], 2048);
    assert_eq!(
        flags(&t),
        ["--control-plane-size", "--node-size", "--node-volume-size"]
    );

    let t = run(
        "kops create cluster --name=a --node-size=g4dn.xlarge --master-size=argon2 \
                 --node-count 2 --zones eu-west-gra,ca-east-bhs",
    );
    let req = &payload(&t)["req"];
    assert_eq!(req["nodepool"][0]["specs"]["cpu"], 2, "meson's default");
    assert_eq!(
        req["control_plane"]["specs"]["gpu"], 2,
        "argon2 asked by name"
    );
    assert_eq!(payload(&t)["region"], "eu-west-gra");
    assert_eq!(flags(&t), ["--node-size", "--zones"]);
    let unknown = t.reports.iter().find(|r| r.flag == "--node-size").unwrap();
    assert!(unknown.message.contains("g4dn.xlarge"), "{unknown}");

    // A size larger than every flavour is asked for exactly.
    let t = run("kops create cluster --name=a --node-size=m5.4xlarge");
    assert_eq!(
        payload(&t)["req"]["nodepool"][0]["specs"],
        json!({"cpu": 16, "ram": 65536, "storage": 40, "gpu": 0})
    );
    assert!(t.reports.is_empty(), "{:?}", t.reports);
}

#[test]
fn networks_and_cnis() {
    let t = run("kops create cluster --name=a --network-cidr=10.0.0.5/16 --networking kubenet");
    let req = &payload(&t)["req"];
    assert_eq!(req["nodes_subnet"]["subnet_netmask"], "10.0.0.0/16");
    assert_eq!(req["cni"], "cilium");
    assert_eq!(flags(&t), ["--network-cidr", "--networking"]);

    // A nodes network over meson's pod network moves the pods and
    // services to kOps' own ranges.
    let t = run("kops create cluster --name=a --network-cidr=10.0.0.0/8");
    let req = &payload(&t)["req"];
    assert_eq!(req["pod_cidr"], "100.96.0.0/11");
    assert_eq!(req["service_cidr"], "100.64.0.0/13");
    let t = run("kops create cluster --name=a --network-cidr=10.1.0.0/30");
    assert_eq!(
        payload(&t)["req"]["nodes_subnet"]["subnet_netmask"],
        KOPS_DEFAULT_NETWORK
    );
    assert!(t.reported("--network-cidr"));
    let t = run("kops create cluster --name=a --network-cidr=10.1.0.8/29");
    assert_eq!(
        payload(&t)["req"]["nodes_subnet"],
        json!({"dhcp": true, "subnet_netmask": "10.1.0.8/29",
               "start_address": "10.1.0.10", "last_address": "10.1.0.13"})
    );
}

#[test]
fn what_cannot_make_a_payload() {
    let c = Catalog::builtin();
    let words = |s: &str| shell_words(s).unwrap();
    assert!(
        translate(&words("kops create cluster --zones=europe"), &c)
            .unwrap_err()
            .contains("--name")
    );
    assert!(translate(&words("kops delete cluster --name=a"), &c).is_err());
    assert!(
        translate(&words("kops create cluster --name=a --node-count=many"), &c)
            .unwrap_err()
            .contains("--node-count")
    );
    assert!(translate(&words("kops create cluster --name"), &c).is_err());
    assert!(translate(&words("kops create cluster --name=..."), &c).is_err());
    assert!(translate(&words("kops create cluster --name=a --bastion=maybe"), &c).is_err());
}

#[test]
fn shell_words_split_like_a_shell() {
    assert_eq!(
        shell_words("a 'b c' \"d \\\"e\\\"\" f\\ g \\\n h").unwrap(),
        ["a", "b c", "d \"e\"", "f g", "h"]
    );
    assert!(shell_words("a 'b").is_err());
    assert_eq!(
        cluster_name("My_Cluster.example.com"),
        "my-cluster-example-com"
    );
    assert_eq!(cluster_name(&"x".repeat(40)).len(), 32);
}
