//! `POST /v1/quotes`: a VM payload priced on every host that can fit it, a
//! KaaS payload in every region that can host the cluster, without creating anything.

use crate::harness::{Meson, Reply, seed_kaas, seed_vm};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The seed payload with no provider: meson may place it anywhere.
fn anywhere() -> Value {
    let mut v = seed_vm();
    v.as_object_mut()
        .expect("seed is an object")
        .remove("provider");
    v
}

fn hosts(r: &Reply) -> Vec<String> {
    r.body["quotes"]
        .as_array()
        .unwrap_or_else(|| panic!("no quotes in {}", r.body))
        .iter()
        .map(|q| q["host"].as_str().expect("host").to_owned())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn every_host_is_quoted_cheapest_first_and_nothing_is_written() {
    let m = Meson::start().await;
    let r = m.post("/v1/quotes", &anywhere()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let quotes = r.body["quotes"].as_array().expect("quotes");
    let all: Vec<String> = m
        .sim()
        .hosts()
        .iter()
        .map(|h| h.name().to_owned())
        .collect();
    assert_eq!(sorted(hosts(&r)), sorted(all), "every host fits the seed");

    // The free on-prem host first, then by hourly price, then by host name.
    assert_eq!(quotes[0]["host"], "atomos-onprem-1");
    assert_eq!(quotes[0]["provider"], "atomos");
    assert_eq!(quotes[0]["price"]["hourly"], 0.0);
    let keys: Vec<(f64, String)> = quotes
        .iter()
        .map(|q| {
            (
                q["price"]["hourly"].as_f64().expect("hourly"),
                q["host"].as_str().expect("host").to_owned(),
            )
        })
        .collect();
    assert!(
        keys.windows(2)
            .all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1)),
        "{keys:?}"
    );
    for q in quotes {
        for k in ["provider", "region", "continent", "host"] {
            assert!(q[k].as_str().is_some_and(|s| !s.is_empty()), "{k} in {q}");
        }
        assert!(
            q["price"]["monthly"].as_f64().is_some_and(|p| p >= 0.0),
            "{q}"
        );
        assert_eq!(q["price"]["currency"], "EUR", "{q}");
    }
    assert_eq!(r.body["cheapest"], quotes[0]);
    assert_eq!(r.body["warnings"], json!([]));

    // The seed as written names ionos: only ionos hosts are quoted.
    let r = m.post("/v1/quotes", &seed_vm()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(sorted(hosts(&r)), ["ionos-fra-1", "ionos-las-1"]);

    // Quoting writes nothing, here or on AtomOS.
    assert_eq!(m.get("/v1/vms").await.body["vms"], json!([]));
    assert_eq!(m.inventory_counts(), (0, 0));
    m.stop().await;
}

#[tokio::test]
async fn constraints_and_devices_narrow_the_hosts() {
    let m = Meson::start().await;

    let mut na = anywhere();
    na["continent"] = json!("north-america");
    let r = m.post("/v1/quotes", &na).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(sorted(hosts(&r)), ["ionos-las-1", "ovh-bhs-1"]);
    assert!(
        r.body["quotes"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|q| q["continent"] == "north-america"),
        "{}",
        r.body
    );

    let mut region = anywhere();
    region["region"] = json!("de-fra");
    let r = m.post("/v1/quotes", &region).await;
    assert_eq!(hosts(&r), ["ionos-fra-1"], "{}", r.body);

    // Only hosts with the GPU, and the GPU is charged for.
    let mut gpu = anywhere();
    gpu["specs"]["req"]["pci"]["devices"] = json!({"10de:1bb1": 1});
    let r = m.post("/v1/quotes", &gpu).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        sorted(hosts(&r)),
        ["arubacloud-ar-1", "atomos-onprem-1", "ovh-gra-1"]
    );
    let plain = m.post("/v1/quotes", &anywhere()).await;
    let hourly = |r: &Reply, host: &str| {
        r.body["quotes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|q| q["host"] == host)
            .and_then(|q| q["price"]["hourly"].as_f64())
            .unwrap_or_else(|| panic!("no quote from {host} in {}", r.body))
    };
    assert!(hourly(&r, "ovh-gra-1") > hourly(&plain, "ovh-gra-1"));
    m.stop().await;
}

#[tokio::test]
async fn an_impossible_request_is_resource_unavailable_saying_why() {
    let m = Meson::start().await;

    // More cores than any host has.
    let mut huge = anywhere();
    huge["specs"]["req"]["cpu"]["numberOfCores"] = json!(128);
    let r = m.post("/v1/quotes", &huge).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_unavailable");
    let msg = r.body["error"]["message"].as_str().expect("message");
    assert!(msg.contains("no hypervisor can host 128 vCPUs"), "{msg}");

    // A GPU where the constraints leave no host that has one.
    let mut gpu_na = anywhere();
    gpu_na["continent"] = json!("north-america");
    gpu_na["specs"]["req"]["pci"]["devices"] = json!({"10de:1bb1": 1});
    let r = m.post("/v1/quotes", &gpu_na).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_unavailable");
    let msg = r.body["error"]["message"].as_str().expect("message");
    assert!(msg.contains("with the requested PCI devices"), "{msg}");
    m.stop().await;
}

#[tokio::test]
async fn invalid_payloads_are_refused_like_vm_create() {
    let m = Meson::start().await;
    let mut bad = anywhere();
    bad["specs"]["req"]["cpu"]["numberOfCores"] = json!("two");
    let r = m.post("/v1/quotes", &bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "invalid_input");
    assert_eq!(
        r.body["error"]["details"]["fields"],
        json!([{"name": "specs.req.cpu.numberOfCores",
                "messages": ["must be an integer, got a string"]}])
    );
    let create = m.post("/v1/vms", &bad).await;
    assert_eq!(
        create.body["error"], r.body["error"],
        "same error as create"
    );

    // A constraint no host meets is named with every other bad field.
    let mut two = seed_vm();
    two["provider"] = json!("nosuchcloud");
    two["specs"]["vm_name"] = json!("a_b");
    let r = m.post("/v1/quotes", &two).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let mut names: Vec<&str> = r.body["error"]["details"]["fields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["provider", "specs.vm_name"]);

    let r = m
        .http
        .post(format!("{}/v1/quotes", m.base))
        .bearer_auth(&m.token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body("{\"specs\":")
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // Unknown fields are reported, not refused.
    let mut extra = anywhere();
    extra["specs"]["req"]["cpu"]["turbo"] = json!(true);
    let r = m.post("/v1/quotes", &extra).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["warnings"][0]["field"], "specs.req.cpu.turbo");
    assert_eq!(m.get("/v1/vms").await.body["vms"], json!([]));
    m.stop().await;
}

#[tokio::test]
async fn viewers_may_quote_and_anonymous_callers_may_not() {
    let m = Meson::start().await;
    let secret = std::fs::read_to_string(m.data_dir().join("jwt-secret")).expect("jwt secret");
    let auth = meson_api::Auth::hs256(secret.trim().as_bytes(), "meson-test");
    let viewer = auth.issue(
        "dev",
        "val",
        meson_api::Role::Viewer,
        chrono::Duration::minutes(5),
    );
    let r = m
        .http
        .post(format!("{}/v1/quotes", m.base))
        .bearer_auth(&viewer)
        .json(&anywhere())
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status(), StatusCode::OK);
    let r = m
        .http
        .post(format!("{}/v1/quotes", m.base))
        .json(&anywhere())
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    m.stop().await;
}

#[tokio::test]
async fn the_cheapest_quote_is_what_the_vm_then_costs() {
    let m = Meson::start().await;
    let q = m.post("/v1/quotes", &anywhere()).await;
    assert_eq!(q.status, StatusCode::OK, "{}", q.body);
    let cheapest = q.body["cheapest"].clone();

    let r = m.post("/v1/vms", &anywhere()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["vm"]["id"].as_str().expect("vm id").to_owned();
    let done = m
        .wait_action(r.body["action"]["id"].as_str().expect("action id"))
        .await;
    assert_eq!(done["status"], "success", "{done}");

    let vm = m.get(&format!("/v1/vms/{id}")).await.body["vm"].clone();
    assert_eq!(vm["price"], cheapest["price"], "{vm}");
    assert_eq!(vm["host"], cheapest["host"]);
    assert_eq!(vm["provider"], cheapest["provider"]);
    assert_eq!(vm["region"], cheapest["region"]);
    m.stop().await;
}

// ---- KaaS payloads: the cluster priced per region ----

fn f64_at(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer} in {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[tokio::test]
async fn the_seed_kaas_payload_is_priced_per_region_and_nothing_is_written() {
    let m = Meson::start().await;
    let r = m.post("/v1/quotes", &seed_kaas()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let placements = r.body["placements"].as_array().expect("placements");
    // The seed names arubacloud: its one region (priced on its cheapest
    // host there; its three hosts cost the same, the first by name wins).
    assert_eq!(placements.len(), 1, "{}", r.body);
    let q = &placements[0];
    assert_eq!(q["provider"], "arubacloud");
    assert_eq!(q["region"], "it-ar1");
    assert_eq!(q["continent"], "europe");
    assert_eq!(r.body["cheapest"], *q);
    assert!(r.body.get("quotes").is_none(), "not the VM shape");

    let cp = &q["control_plane"];
    assert_eq!(cp["name"], "control-plane");
    assert_eq!(
        (cp["nodes"].clone(), cp["max_nodes"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        cp["specs"],
        json!({"cpu": 4, "ram": 4096, "storage": 40, "gpu": 0})
    );
    assert_eq!(cp["host"], "arubacloud-ar-1");
    let pools = q["pools"].as_array().expect("pools");
    assert_eq!(pools.len(), 1);
    let pool = &pools[0];
    assert_eq!(pool["name"], "1poolname");
    assert_eq!(
        (pool["nodes"].clone(), pool["max_nodes"].clone()),
        (json!(3), json!(3))
    );
    assert_eq!(
        pool["specs"],
        json!({"cpu": 2, "ram": 4096, "storage": 40, "gpu": 0})
    );
    assert_eq!(pool["host"], "arubacloud-ar-1");

    // Per pool: nodes × one node; the cluster: control plane + pools.
    let node = f64_at(pool, "/node_price/hourly");
    assert!(node > 0.0, "{pool}");
    assert!(close(f64_at(pool, "/price/hourly"), 3.0 * node), "{pool}");
    assert!(close(
        f64_at(pool, "/price/monthly"),
        3.0 * f64_at(pool, "/node_price/monthly")
    ));
    let total = f64_at(cp, "/price/hourly") + f64_at(pool, "/price/hourly");
    assert!(close(f64_at(q, "/price/hourly"), total), "{q}");
    assert!(close(
        f64_at(q, "/price/monthly"),
        f64_at(cp, "/price/monthly") + f64_at(pool, "/price/monthly")
    ));
    // min = max = desired: autoscaling cannot cost more.
    assert_eq!(q["max_price"], q["price"]);
    assert_eq!(q["price"]["currency"], "EUR");

    // The seed's range starts on the network address (clamped) and 1.29 is
    // past end of life: both said, neither refused.
    let mut warned: Vec<&str> = r.body["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w["field"].as_str())
        .collect();
    warned.sort_unstable();
    assert_eq!(
        warned,
        ["req.kubernetes_version", "req.nodes_subnet.start_address"],
        "{}",
        r.body
    );

    assert_eq!(m.get("/v1/vms").await.body["vms"], json!([]));
    assert_eq!(m.inventory_counts(), (0, 0));
    m.stop().await;
}

#[tokio::test]
async fn a_cluster_anywhere_is_quoted_in_every_region_cheapest_first() {
    let m = Meson::start().await;
    let mut v = seed_kaas();
    v.as_object_mut().expect("object").remove("provider");
    // An autoscaling pool: priced at desired_nodes, and at max_nodes.
    v["req"]["nodepool"][0]["autoscale"] = json!("True");
    v["req"]["nodepool"][0]["min_nodes"] = json!(1);
    v["req"]["nodepool"][0]["desired_nodes"] = json!(2);
    v["req"]["nodepool"][0]["max_nodes"] = json!(5);
    let r = m.post("/v1/quotes", &v).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let placements = r.body["placements"].as_array().expect("placements");
    // One placement per region of the dev fleet (some regions have several
    // hosts), and every host fits these nodes.
    let regions: std::collections::BTreeSet<(String, String)> = m
        .sim()
        .hosts()
        .iter()
        .map(|h| (h.config().provider.clone(), h.config().region.clone()))
        .collect();
    assert!(regions.len() < m.sim().hosts().len());
    assert_eq!(placements.len(), regions.len(), "{}", r.body);
    assert_eq!(placements[0]["provider"], "atomos", "on-prem is free");
    let hourly: Vec<f64> = placements
        .iter()
        .map(|q| f64_at(q, "/price/hourly"))
        .collect();
    assert!(hourly.windows(2).all(|w| w[0] <= w[1]), "{hourly:?}");
    let paid = placements
        .iter()
        .find(|q| q["provider"] == "ovh")
        .expect("an ovh region");
    let node = f64_at(paid, "/pools/0/node_price/hourly");
    let cp = f64_at(paid, "/control_plane/price/hourly");
    assert!(
        close(f64_at(paid, "/price/hourly"), cp + 2.0 * node),
        "{paid}"
    );
    assert!(
        close(f64_at(paid, "/max_price/hourly"), cp + 5.0 * node),
        "{paid}"
    );
    m.stop().await;
}

#[tokio::test]
async fn a_pool_that_fits_nowhere_is_resource_unavailable_naming_it() {
    let m = Meson::start().await;
    let mut v = seed_kaas();
    v.as_object_mut().expect("object").remove("provider");
    v["continent"] = json!("north-america");
    v["req"]["nodepool"]
        .as_array_mut()
        .expect("nodepool")
        .push(json!({"pool_name": "gpu", "desired_nodes": 1, "specs": {"gpu": 1}}));
    let r = m.post("/v1/quotes", &v).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_unavailable");
    let msg = r.body["error"]["message"].as_str().expect("message");
    assert!(msg.contains("node pool 'gpu' (req.nodepool[1])"), "{msg}");
    assert!(msg.contains("with the requested PCI devices"), "{msg}");

    // A body that is neither a VM nor a KaaS payload.
    let r = m.post("/v1/quotes", &json!({"provider": "ovh"})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "(body)");
    m.stop().await;
}

#[tokio::test]
async fn a_cluster_quote_refuses_what_a_create_refuses() {
    let m = Meson::start().await;
    // DHCP over the whole subnet leaves the API endpoint no address.
    let mut kaas = crate::harness::seed_kaas();
    let subnet = kaas["req"]["nodes_subnet"].as_object_mut().unwrap();
    subnet.remove("start_address");
    subnet.remove("last_address");
    for path in ["/v1/quotes", "/v1/clusters"] {
        let r = m.post(path, &kaas).await;
        assert_eq!(
            r.status,
            reqwest::StatusCode::BAD_REQUEST,
            "{path}: {}",
            r.body
        );
        assert_eq!(r.rejected_fields(), ["req.nodes_subnet"], "{path}");
    }
    m.stop().await;
}
