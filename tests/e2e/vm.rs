//! The VM path: create from the seed payload, run, delete; errors and faults.

use crate::harness::{Meson, seed_vm};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn seed_vm_lifecycle_over_http() {
    let m = Meson::start().await;

    let r = m.post("/v1/vms", &seed_vm()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert!(r.headers.contains_key("x-correlation-id"));
    let vm = &r.body["vm"];
    let id = vm["id"].as_str().expect("vm id").to_owned();
    assert_eq!(vm["name"], "test");
    assert_eq!(vm["status"], "initializing");
    assert_eq!(vm["specs"]["vcpus"], 2);
    assert_eq!(vm["specs"]["memory_mib"], 4096);
    assert_eq!(vm["specs"]["os_distribution"], "debian");
    let action = &r.body["action"];
    assert_eq!(action["command"], "create_vm");
    assert_eq!(action["status"], "running");
    assert!(
        action["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == id.as_str() && x["type"] == "vm")
    );
    assert_eq!(r.body["next_actions"], json!([]));

    let done = m.wait_action(action["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(done["progress"], 100);
    assert!(done["finished"].is_string());

    let r = m.get(&format!("/v1/vms/{id}")).await;
    assert_eq!(r.status, StatusCode::OK);
    let vm = &r.body["vm"];
    assert_eq!(vm["status"], "running");
    assert_eq!(vm["provider"], "ionos");
    assert!(
        vm["ipv4"]
            .as_str()
            .is_some_and(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok()),
        "{vm}"
    );
    assert!(vm["host"].is_string() && vm["region"].is_string());
    assert!(
        vm["price"]["hourly"].as_f64().is_some_and(|p| p > 0.0),
        "{vm}"
    );
    let kinds: Vec<_> = vm["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["boot", "cloudinit", "data"]);
    let data = &vm["volumes"][2];
    assert_eq!(
        (data["name"].as_str(), data["size"].as_u64()),
        (Some("test"), Some(30))
    );

    // AtomOS holds exactly this VM, named after its id, and its three volumes.
    let host = m
        .sim()
        .host(vm["host"].as_str().unwrap())
        .expect("placed on a simulated host");
    let inv = host.inventory();
    assert_eq!(inv.vms.len(), 1);
    assert_eq!(inv.vms[0].name, crate::harness::vm_atomos_name(&id));
    assert_eq!(inv.volumes.len(), 3);
    assert_eq!(m.inventory_counts(), (1, 3));

    let r = m.get("/v1/vms").await;
    assert_eq!(r.body["vms"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 1);

    let r = m.delete(&format!("/v1/vms/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "delete_vm");
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");

    assert_eq!(
        m.get(&format!("/v1/vms/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        m.inventory_counts(),
        (0, 0),
        "nothing may be left on AtomOS"
    );
    m.stop().await;
}

#[tokio::test]
async fn bad_input_names_every_field_and_auth_is_required() {
    let m = Meson::start().await;

    let mut bad = seed_vm();
    bad["specs"]["vm_name"] = json!("no_underscores");
    bad["specs"]["req"]["mem"]["capacity"] = json!("lots");
    bad["specs"]["authentication"]["ssh-key"] = json!("ssh-rsa AAAA... user@host");
    let r = m.post("/v1/vms", &bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["error"]["code"], "invalid_input");
    let mut fields: Vec<_> = r.body["error"]["details"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "specs.authentication.ssh-key",
            "specs.req.mem.capacity",
            "specs.vm_name"
        ]
    );
    assert!(r.headers.contains_key("x-correlation-id"));

    let mut both = seed_vm();
    both["provider"] = json!("nowhere");
    both["specs"]["vm_name"] = json!("a_b");
    let r = m.post("/v1/vms", &both).await;
    let mut names: Vec<_> = r.body["error"]["details"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["provider", "specs.vm_name"],
        "a bad provider is named with the other bad fields"
    );

    let mut unknown = seed_vm();
    unknown["provider"] = json!("nowhere");
    let r = m.post("/v1/vms", &unknown).await;
    assert_eq!(
        r.body["error"]["details"]["fields"][0]["name"], "provider",
        "{}",
        r.body
    );

    let r = m
        .http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(&m.token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "json_error");

    let r = m
        .http
        .get(format!("{}/v1/vms", m.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().contains_key("x-correlation-id"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");

    let r = m
        .http
        .get(format!("{}/v1/vms", m.base))
        .bearer_auth("forged.token.here")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    assert_eq!(
        m.get("/v1/vms/not-a-uuid").await.body["error"]["details"]["fields"][0]["name"],
        "id"
    );
    assert_eq!(
        m.get(&format!("/v1/vms/{}", uuid::Uuid::new_v4()))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(m.get("/healthz").await.status, StatusCode::OK);
    assert_eq!(m.get("/readyz").await.status, StatusCode::OK);
    assert_eq!(
        m.inventory_counts(),
        (0, 0),
        "rejected requests touch nothing"
    );
    m.stop().await;
}

#[tokio::test]
async fn a_second_mutation_on_a_busy_vm_is_locked() {
    let m = Meson::start().await;
    m.set_boot_time(Duration::from_secs(60));
    let r = m.post("/v1/vms", &seed_vm()).await;
    let id = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let create = r.body["action"]["id"].as_str().unwrap().to_owned();

    let r = m.delete(&format!("/v1/vms/{id}")).await;
    assert_eq!(r.status, StatusCode::LOCKED, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "locked");
    assert_eq!(r.body["error"]["details"]["action_id"], create.as_str());

    m.set_boot_time(Duration::from_millis(50));
    assert_eq!(m.wait_action(&create).await["status"], "success");
    let r = m.delete(&format!("/v1/vms/{id}")).await;
    assert_eq!(
        m.wait_action(r.body["action"]["id"].as_str().unwrap())
            .await["status"],
        "success"
    );
    assert_eq!(m.inventory_counts(), (0, 0));
    m.stop().await;
}

#[tokio::test]
async fn a_fatal_atomos_error_unwinds_everything() {
    let m = Meson::start().await;
    for h in m.sim().hosts() {
        h.faults().fail_next("vm/register", 400, 1);
    }
    let r = m.post("/v1/vms", &seed_vm()).await;
    let id = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "error", "{done}");
    assert_eq!(done["error"]["code"], "invalid_input");
    assert!(!done["error"]["message"].as_str().unwrap().is_empty());
    assert_eq!(
        m.inventory_counts(),
        (0, 0),
        "the volumes made before register must be destroyed"
    );

    let vm = m.get(&format!("/v1/vms/{id}")).await.body;
    assert_eq!(vm["vm"]["status"], "error");
    assert!(vm["vm"]["host"].is_null(), "placement is undone");
    // The VM says why, as its action does (in the list too).
    assert_eq!(vm["vm"]["error_message"], done["error"]["message"], "{vm}");
    let list = m.get("/v1/vms?status=error").await.body;
    assert_eq!(list["vms"][0]["error_message"], done["error"]["message"]);

    let r = m.delete(&format!("/v1/vms/{id}")).await;
    assert_eq!(
        m.wait_action(r.body["action"]["id"].as_str().unwrap())
            .await["status"],
        "success"
    );
    assert_eq!(
        m.get(&format!("/v1/vms/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    m.stop().await;
}

#[tokio::test]
async fn transient_atomos_errors_are_retried() {
    let m = Meson::start().await;
    for h in m.sim().hosts() {
        h.faults().fail_next("volume/create", 503, 2);
    }
    let r = m.post("/v1/vms", &seed_vm()).await;
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(m.inventory_counts(), (1, 3));
    let jobs =
        meson_db::jobs::for_action(&m.dev().pool, done["id"].as_str().unwrap().parse().unwrap())
            .await
            .unwrap();
    assert!(jobs[0].attempt >= 2, "the job was retried: {:?}", jobs[0]);
    m.stop().await;
}

/// Creates a VM with `patch` applied to the seed payload (minus its provider)
/// and returns the finished action and the VM.
async fn place(
    m: &Meson,
    name: &str,
    patch: serde_json::Value,
) -> (serde_json::Value, serde_json::Value) {
    let mut body = seed_vm();
    body.as_object_mut().unwrap().remove("provider");
    body["specs"]["vm_name"] = json!(name);
    for (k, v) in patch.as_object().unwrap() {
        match k.as_str() {
            "pci" => body["specs"]["req"]["pci"]["devices"] = v.clone(),
            "cores" => body["specs"]["req"]["cpu"]["numberOfCores"] = v.clone(),
            _ => body[k] = v.clone(),
        }
    }
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    let vm = m
        .get(&format!("/v1/vms/{}", r.body["vm"]["id"].as_str().unwrap()))
        .await
        .body["vm"]
        .clone();
    (done, vm)
}

#[tokio::test]
async fn placement_takes_the_cheapest_host_within_the_constraints() {
    let m = Meson::start().await;
    // Unconstrained: the on-premises AtomOS is free.
    let (_, vm) = place(&m, "any", json!({})).await;
    assert_eq!(
        (vm["provider"].as_str(), vm["host"].as_str()),
        (Some("atomos"), Some("atomos-onprem-1"))
    );
    assert_eq!(vm["price"]["hourly"], 0.0);
    // In North America, OVH's Beauharnois host is cheaper than IONOS's.
    let (_, vm) = place(&m, "na", json!({"continent": "north-america"})).await;
    assert_eq!(vm["host"], "ovh-bhs-1", "{vm}");
    // Provider and continent together.
    let (_, vm) = place(
        &m,
        "ionos-na",
        json!({"provider": "ionos", "continent": "north-america"}),
    )
    .await;
    assert_eq!(vm["host"], "ionos-las-1", "{vm}");
    assert_eq!(vm["specs"]["requested_continent"], "north-america");
    // Only hosts with the GPU fit: of OVH's two (same price; bhs would win
    // the tie by name), only Gravelines has P4000s.
    let (_, vm) = place(
        &m,
        "gpu",
        json!({"pci": {"10de:1bb1": 1}, "provider": "ovh"}),
    )
    .await;
    assert_eq!(vm["host"], "ovh-gra-1", "{vm}");
    let (_, vm) = place(&m, "cpu", json!({"provider": "ovh"})).await;
    assert_eq!(vm["host"], "ovh-bhs-1", "{vm}");
    // A quote's price is the one shown.
    let (_, vm) = place(&m, "eu", json!({"continent": "europe", "provider": "ovh"})).await;
    assert!(vm["price"]["hourly"].as_f64().unwrap() > 0.0 && vm["price"]["currency"] == "EUR");

    // Constraints nothing meets are refused up front, naming the field.
    let mut body = seed_vm();
    body["provider"] = json!("gigas");
    body["continent"] = json!("north-america");
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.body["error"]["details"]["fields"][0]["name"], "continent",
        "{}",
        r.body
    );
    assert!(
        r.body["error"]["details"]["fields"][0]["messages"][0]
            .as_str()
            .unwrap()
            .contains("europe")
    );

    // Nothing anywhere can host 128 cores: the action says why.
    let (done, vm) = place(&m, "huge", json!({"cores": 128})).await;
    assert_eq!(done["status"], "error");
    assert_eq!(done["error"]["code"], "resource_unavailable", "{done}");
    assert!(
        done["error"]["message"]
            .as_str()
            .unwrap()
            .contains("128 vCPUs"),
        "{done}"
    );
    assert_eq!(vm["status"], "error");
    m.stop().await;
}

#[tokio::test]
async fn a_database_outage_is_reported_not_crashed_on() {
    // A port nothing listens on stands in for a database that is down.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let pool =
        meson_db::scope::connect_scoped(&format!("postgres://postgres@127.0.0.1:{port}/x"), 2)
            .unwrap();
    let auth = meson_api::Auth::hs256(b"0123456789abcdef0123456789abcdef", "meson");
    let token = auth.issue(
        "t",
        "u",
        meson_api::Role::Admin,
        chrono::Duration::minutes(5),
    );
    let api = mesond::server::ApiServer::start(
        "127.0.0.1:0".parse().unwrap(),
        pool,
        mesond::server::ApiSettings::new(auth),
    )
    .await
    .unwrap();
    let base = format!("http://{}", api.addr);
    let http = reqwest::Client::new();

    assert_eq!(
        http.get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let r = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);

    let r = http
        .get(format!("{base}/v1/vms"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    // Unavailable, not failed: nothing was done, and it says when to retry.
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.headers().contains_key("x-correlation-id"));
    assert!(r.headers().contains_key("retry-after"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable");
    let text = body.to_string();
    assert!(
        !text.contains(&port.to_string()) && !text.contains("127.0.0.1"),
        "internals leaked: {text}"
    );
    api.shutdown().await;
}

#[tokio::test]
async fn hostile_bodies_get_clear_errors_never_a_500() {
    let m = Meson::start().await;
    let post = |body: Vec<u8>, ct: &'static str| {
        m.http
            .post(format!("{}/v1/vms", m.base))
            .bearer_auth(&m.token)
            .header("content-type", ct)
            .body(body)
            .send()
    };
    let code = |r: reqwest::Response| async move {
        let status = r.status();
        let body: serde_json::Value = r.json().await.unwrap();
        (
            status,
            body["error"]["code"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };

    let huge = format!("{{\"specs\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let (s, c) = code(post(huge.into_bytes(), "application/json").await.unwrap()).await;
    assert_eq!(
        (s, c.as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
        "oversized body"
    );

    let (s, c) = code(
        post(b"{\"specs\": \"\xff\xfe\"}".to_vec(), "application/json")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, c.as_str()),
        (StatusCode::BAD_REQUEST, "json_error"),
        "invalid UTF-8"
    );

    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let (s, c) = code(post(deep.into_bytes(), "application/json").await.unwrap()).await;
    assert_eq!(
        (s, c.as_str()),
        (StatusCode::BAD_REQUEST, "json_error"),
        "deep nesting"
    );

    let (s, c) = code(post(b"<vm/>".to_vec(), "application/xml").await.unwrap()).await;
    assert_eq!(
        (s, c.as_str()),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
        "wrong content type"
    );

    let (s, c) = code(post(b"[]".to_vec(), "application/json").await.unwrap()).await;
    assert_eq!(
        (s, c.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_input"),
        "not an object"
    );

    let r = m
        .http
        .put(format!("{}/v1/vms", m.base))
        .bearer_auth(&m.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        m.get("/v1/nothing-here").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        m.get("/v1/vms").await.body["meta"]["pagination"]["total_entries"],
        0,
        "nothing half-written"
    );
    m.stop().await;
}

#[tokio::test]
async fn tenants_see_only_their_own_resources() {
    let m = Meson::start().await;
    let r = m.post("/v1/vms", &seed_vm()).await;
    let (vm, action) = (
        r.body["vm"]["id"].as_str().unwrap().to_owned(),
        r.body["action"]["id"].as_str().unwrap().to_owned(),
    );
    m.wait_action(&action).await;

    // Another tenant, with a token from the same issuer.
    let secret = std::fs::read_to_string(m.data_dir().join("jwt-secret")).unwrap();
    let auth = meson_api::Auth::hs256(secret.trim().as_bytes(), "meson-test");
    let other = auth.issue(
        "someone-else",
        "eve",
        meson_api::Role::Admin,
        chrono::Duration::minutes(5),
    );
    let get = |path: String| {
        m.http
            .get(format!("{}{path}", m.base))
            .bearer_auth(&other)
            .send()
    };

    assert_eq!(
        get(format!("/v1/vms/{vm}")).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(format!("/v1/actions/{action}")).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    let list: serde_json::Value = get("/v1/vms".into()).await.unwrap().json().await.unwrap();
    assert_eq!(list["vms"], json!([]));
    let r = m
        .http
        .delete(format!("{}/v1/vms/{vm}", m.base))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // The owner still has it, untouched.
    assert_eq!(
        m.get(&format!("/v1/vms/{vm}")).await.body["vm"]["status"],
        "running"
    );

    // A viewer may read but not create.
    let viewer = auth.issue(
        "dev",
        "bob",
        meson_api::Role::Viewer,
        chrono::Duration::minutes(5),
    );
    let r = m
        .http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(&viewer)
        .json(&seed_vm())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = m
        .http
        .get(format!("{}/v1/vms/{vm}", m.base))
        .bearer_auth(&viewer)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    m.stop().await;
}

#[tokio::test]
async fn power_actions_stop_start_and_reboot_a_vm() {
    let m = Meson::start().await;
    let r = m.post("/v1/vms", &seed_vm()).await;
    let id = r.body["vm"]["id"].as_str().unwrap().to_owned();
    m.wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    let sim_state = |m: &Meson| {
        let name = crate::harness::vm_atomos_name(&id);
        m.sim()
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().vms)
            .find(|v| v.name == name)
            .map(|v| v.state)
    };

    for (command, status, atomos, cmd) in [
        ("poweroff", "off", atomos_driver::VmState::Off, "stop_vm"),
        (
            "poweron",
            "running",
            atomos_driver::VmState::Running,
            "start_vm",
        ),
        (
            "reboot",
            "running",
            atomos_driver::VmState::Running,
            "reboot_vm",
        ),
        // Powering off twice is fine: the second finds it off already.
        ("poweroff", "off", atomos_driver::VmState::Off, "stop_vm"),
        ("poweroff", "off", atomos_driver::VmState::Off, "stop_vm"),
    ] {
        let r = m
            .post(&format!("/v1/vms/{id}/actions/{command}"), &json!({}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{command}: {}", r.body);
        assert_eq!(r.body["action"]["command"], cmd);
        let done = m
            .wait_action(r.body["action"]["id"].as_str().unwrap())
            .await;
        assert_eq!(done["status"], "success", "{command}: {done}");
        let vm = m.get(&format!("/v1/vms/{id}")).await.body["vm"].clone();
        assert_eq!(vm["status"], status, "{command}");
        assert_eq!(sim_state(&m), Some(atomos), "{command}: AtomOS agrees");
        if status == "running" {
            assert!(vm["ipv4"].is_string());
        }
    }

    // The VM's own action history lists them all.
    let r = m.get(&format!("/v1/vms/{id}/actions")).await;
    assert_eq!(r.body["actions"].as_array().unwrap().len(), 6, "{}", r.body);

    let r = m
        .post(&format!("/v1/vms/{id}/actions/explode"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = m
        .post(
            &format!("/v1/vms/{}/actions/poweron", uuid::Uuid::new_v4()),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // A VM whose create failed cannot be powered.
    for h in m.sim().hosts() {
        h.faults().fail_next("vm/register", 400, 1);
    }
    let mut body = seed_vm();
    body["specs"]["vm_name"] = json!("broken");
    let r = m.post("/v1/vms", &body).await;
    let broken = r.body["vm"]["id"].as_str().unwrap().to_owned();
    m.wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    let r = m
        .post(&format!("/v1/vms/{broken}/actions/poweron"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "conflict");
    m.stop().await;
}

#[tokio::test]
async fn lists_filter_sort_page_and_vms_can_be_renamed_and_relabelled() {
    let m = Meson::start().await;
    for (name, labels) in [
        ("a", json!({"env": "prod", "tier": "web"})),
        ("b", json!({"env": "prod"})),
        ("c", json!({"env": "dev", "gpu": ""})),
    ] {
        let mut body = seed_vm();
        body["specs"]["vm_name"] = json!(name);
        body["labels"] = labels;
        assert_eq!(m.post("/v1/vms", &body).await.status, StatusCode::CREATED);
    }
    let names = |r: &crate::harness::Reply| -> Vec<String> {
        r.body["vms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap().to_owned())
            .collect()
    };
    for (selector, want) in [
        ("env=prod", vec!["a", "b"]),
        ("env==prod", vec!["a", "b"]),
        ("env!=prod", vec!["c"]),
        ("tier", vec!["a"]),
        ("!tier", vec!["b", "c"]),
        ("env in (dev,test)", vec!["c"]),
        ("env notin (prod)", vec!["c"]),
        ("env=prod,tier", vec!["a"]),
        ("gpu", vec!["c"]),
        ("missing=x", vec![]),
    ] {
        let r = m
            .get(&format!("/v1/vms?label_selector={}", urlencode(selector)))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{selector}: {}", r.body);
        assert_eq!(names(&r), want, "{selector}");
    }
    assert_eq!(names(&m.get("/v1/vms?name=b").await), ["b"]);
    assert_eq!(
        names(&m.get("/v1/vms?sort=name:desc").await),
        ["c", "b", "a"]
    );
    assert_eq!(names(&m.get("/v1/vms?sort=name").await), ["a", "b", "c"]);
    assert_eq!(
        names(&m.get("/v1/vms?status=off").await),
        Vec::<String>::new()
    );

    let r = m.get("/v1/vms?per_page=2&page=2&sort=name").await;
    assert_eq!(names(&r), ["c"]);
    let p = &r.body["meta"]["pagination"];
    assert_eq!(
        (
            p["total_entries"].as_u64(),
            p["previous_page"].as_u64(),
            p["next_page"].as_u64()
        ),
        (Some(3), Some(1), None)
    );
    assert!(r.headers["link"].to_str().unwrap().contains("rel=\"prev\""));
    // A full page cannot tell the total: the kept usage does (no filter),
    // else a count of what matches.
    let total = |r: &crate::harness::Reply| r.body["meta"]["pagination"]["total_entries"].as_u64();
    let r = m.get("/v1/vms?per_page=2").await;
    assert_eq!(
        (names(&r), total(&r)),
        (vec!["a".into(), "b".into()], Some(3))
    );
    let r = m.get("/v1/vms?per_page=1&label_selector=env%3Dprod").await;
    assert_eq!((names(&r), total(&r)), (vec!["a".into()], Some(2)));
    let r = m.get("/v1/vms?per_page=2&page=9").await;
    assert_eq!(
        (
            names(&r).len(),
            r.body["meta"]["pagination"]["total_entries"].as_u64()
        ),
        (0, Some(3))
    );

    for (query, field) in [
        ("label_selector=env%20in%20(a", "label_selector"),
        ("sort=price", "sort"),
        ("status=sleeping", "status"),
        ("per_page=51", "per_page"),
        ("page=0", "page"),
    ] {
        let r = m.get(&format!("/v1/vms?{query}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(
            r.body["error"]["details"]["fields"][0]["name"], field,
            "{query}"
        );
    }

    // PATCH: rename, relabel, and the errors.
    let a = m.get("/v1/vms?name=a").await.body["vms"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let patch = |body: serde_json::Value| {
        m.http
            .patch(format!("{}/v1/vms/{a}", m.base))
            .bearer_auth(&m.token)
            .json(&body)
            .send()
    };
    let r = patch(json!({"name": "alpha", "labels": {"env": "staging"}, "colour": "red"}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        (
            body["vm"]["name"].as_str(),
            body["vm"]["labels"]["env"].as_str()
        ),
        (Some("alpha"), Some("staging"))
    );
    assert_eq!(body["warnings"][0]["field"], "colour");
    assert_eq!(
        names(&m.get("/v1/vms?label_selector=env%3Dstaging").await),
        ["alpha"]
    );
    let r = patch(json!({"name": "b"})).await.unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "uniqueness_error");
    let r = patch(json!({"name": "not_valid", "labels": {"-": "x"}}))
        .await
        .unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["details"]["fields"].as_array().unwrap().len(),
        2,
        "{body}"
    );
    let r = m
        .http
        .patch(format!("{}/v1/vms/{}", m.base, uuid::Uuid::new_v4()))
        .bearer_auth(&m.token)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    m.stop().await;
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn the_catalogue_lists_flavours_and_where_vms_can_go() {
    let m = Meson::start().await;
    let r = m.get("/v1/flavors").await;
    assert_eq!(r.status, StatusCode::OK);
    let names: Vec<_> = r.body["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["helium", "neon", "argon", "argon2", "kripton"]);
    let argon2 = &r.body["flavors"][3];
    assert_eq!(
        (
            argon2["vcpus"].as_u64(),
            argon2["gpus"].as_u64(),
            argon2["gpu_model"].as_str()
        ),
        (Some(4), Some(2), Some("10de:1bb1"))
    );

    let r = m.get("/v1/providers").await;
    let providers = r.body["providers"].as_array().unwrap();
    let names: Vec<_> = providers
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["arubacloud", "atomos", "gigas", "ionos", "ovh"],
        "every provider the seeds name"
    );
    let ovh = providers.iter().find(|p| p["name"] == "ovh").unwrap();
    let mut continents: Vec<_> = ovh["continents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    continents.sort();
    assert_eq!(continents, ["europe", "north-america"]);
    assert_eq!(ovh["regions"].as_array().unwrap().len(), 2);
    assert_eq!(
        m.http
            .get(format!("{}/v1/flavors", m.base))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::UNAUTHORIZED
    );
    m.stop().await;
}

#[tokio::test]
async fn volumes_are_listed_with_their_vm_and_go_with_it() {
    let m = Meson::start().await;
    let r = m.post("/v1/vms", &seed_vm()).await;
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    m.wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;

    let r = m.get("/v1/volumes").await;
    assert_eq!(
        r.body["meta"]["pagination"]["total_entries"], 3,
        "{}",
        r.body
    );
    assert!(
        r.body["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["vm"] == vm.as_str() && v["status"] == "available")
    );
    let r = m.get(&format!("/v1/volumes?vm={vm}&kind=data")).await;
    let data = &r.body["volumes"][0];
    assert_eq!(
        (
            data["name"].as_str(),
            data["size"].as_u64(),
            r.body["volumes"].as_array().unwrap().len()
        ),
        (Some("test"), Some(30), 1)
    );
    let one = m
        .get(&format!("/v1/volumes/{}", data["id"].as_str().unwrap()))
        .await;
    assert_eq!(one.body["volume"], *data);
    assert_eq!(
        m.get("/v1/volumes?kind=floppy").await.body["error"]["details"]["fields"][0]["name"],
        "kind"
    );
    assert_eq!(
        m.get(&format!("/v1/volumes/{}", uuid::Uuid::new_v4()))
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    let r = m.delete(&format!("/v1/vms/{vm}")).await;
    m.wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(
        m.get("/v1/volumes").await.body["meta"]["pagination"]["total_entries"],
        0
    );
    m.stop().await;
}

/// The VM as the simulated host has it: (vCPUs, RAM MiB, state).
fn sim_size(m: &Meson, vm: &str) -> (u32, u64, atomos_driver::VmState) {
    let name = crate::harness::vm_atomos_name(vm);
    m.sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().vms)
        .find(|v| v.name == name)
        .map(|v| (v.slots, v.ram_mib, v.state))
        .expect("the VM is on AtomOS")
}

#[tokio::test]
async fn a_vm_is_resized_off_or_stopped_for_it_within_its_quota() {
    let m = Meson::start_with(|o| o.quotas.vcpus = 6).await;
    let r = m.post("/v1/vms", &seed_vm()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let resize = |body| {
        let m = &m;
        let id = &id;
        async move { m.post(&format!("/v1/vms/{id}/actions/resize"), &body).await }
    };

    // Running and no `stop`: refused, saying how; nothing changed.
    let r = resize(json!({"cores": 3})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"stop\": true")
    );
    assert_eq!(sim_size(&m, &id).0, 2);

    // With `stop`: stopped, resized and running again with the new size.
    let r = resize(json!({"cores": 3, "memory_mib": 6144, "stop": true})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["action"]["command"], "resize_vm");
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let got = m.get(&format!("/v1/vms/{id}")).await.body["vm"].clone();
    assert_eq!(got["status"], "running", "{got}");
    assert_eq!(
        (
            got["specs"]["cores"].as_u64(),
            got["specs"]["memory_mib"].as_u64()
        ),
        (Some(3), Some(6144))
    );
    assert_eq!(
        sim_size(&m, &id),
        (3, 6144, atomos_driver::VmState::Running)
    );
    let q = crate::quotas::usage_matches_recount(&m).await;
    assert_eq!((q.vcpus, q.ram_mib), (3, 6144));

    // Off: resized in place, and it stays off.
    let off = m
        .post(&format!("/v1/vms/{id}/actions/poweroff"), &json!({}))
        .await;
    m.wait_action(off.body["action"]["id"].as_str().unwrap())
        .await;
    let r = resize(json!({"memory_mib": 2048})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(sim_size(&m, &id), (3, 2048, atomos_driver::VmState::Off));
    assert_eq!(
        m.get(&format!("/v1/vms/{id}")).await.body["vm"]["status"],
        "off"
    );

    // Past the vcpus quota (6): refused naming it, the size unchanged.
    let r = resize(json!({"cores": 7})).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_limit_exceeded");
    assert!(r.body.to_string().contains("vcpus"), "{}", r.body);
    assert_eq!(
        m.get(&format!("/v1/vms/{id}")).await.body["vm"]["specs"]["cores"],
        3
    );

    // Bigger than the host: the action fails saying so, and the old size is back.
    let r = resize(json!({"memory_mib": 1_048_576})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "error", "{done}");
    assert_eq!(done["error"]["code"], "resource_unavailable", "{done}");
    assert_eq!(
        m.get(&format!("/v1/vms/{id}")).await.body["vm"]["specs"]["memory_mib"],
        2048
    );
    assert_eq!(sim_size(&m, &id), (3, 2048, atomos_driver::VmState::Off));
    let q = crate::quotas::usage_matches_recount(&m).await;
    assert_eq!((q.vcpus, q.ram_mib), (3, 2048));

    // Bad bodies name the field; another tenant's VM is not found.
    for (bad, field) in [
        (json!({}), "cores"),
        (json!({"cores": 0}), "cores"),
        (json!({"memory_mib": 1}), "memory_mib"),
    ] {
        assert_eq!(
            resize(bad.clone()).await.rejected_fields(),
            [field],
            "{bad}"
        );
    }
    let other = m.token("other", "eve", meson_api::Role::Editor);
    let r = m
        .call(
            reqwest::Method::POST,
            &format!("/v1/vms/{id}/actions/resize"),
            &other,
            Some(&json!({"cores": 1})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    m.stop().await;
}
