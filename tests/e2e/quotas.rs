//! Quotas: refused with `resource_limit_exceeded` naming each quota, checked
//! in the transaction that reserves, so parallel requests at the edge never
//! end above it; operators set them per tenant.

use crate::harness::{Meson, seed_kaas, seed_vm};
use futures::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn vm_named(name: &str) -> Value {
    let mut vm = seed_vm();
    vm["specs"]["vm_name"] = name.into();
    vm
}

/// `GET /v1/quotas`'s entry for `name`.
async fn quota(m: &Meson, name: &str) -> Value {
    let r = m.get("/v1/quotas").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["quota"]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .cloned()
        .unwrap()
}

/// The usage the triggers keep for the dev tenant must be what a count from
/// scratch finds, whatever happened before.
pub(crate) async fn usage_matches_recount(m: &Meson) -> meson_core::quota::Resources {
    let tenant = meson_core::TenantId("dev".into());
    let pool = &m.dev().pool;
    let (kept, counted) = meson_db::scope::system(async {
        (
            meson_db::quotas::usage(pool, &tenant).await.expect("usage"),
            meson_db::quotas::recount(pool, &tenant)
                .await
                .expect("recount"),
        )
    })
    .await;
    assert_eq!(kept, counted, "the kept usage drifted from the resources");
    kept
}

/// Waits for the action an answer started, if it started one.
async fn settle(m: &Meson, r: &crate::harness::Reply) {
    if let Some(action) = r.body["action"]["id"].as_str() {
        let a = m
            .wait_action_for(action, std::time::Duration::from_secs(60))
            .await;
        assert_eq!(a["status"], "success", "{a}");
    }
}

/// Fires every body at `path` at once; returns the answers.
async fn all_at_once(m: &Meson, path: &str, bodies: Vec<Value>) -> Vec<crate::harness::Reply> {
    join_all(bodies.iter().map(|b| m.post(path, b))).await
}

#[tokio::test]
async fn parallel_creates_at_a_quota_edge_never_end_above_it() {
    let m = Meson::start_with(|o| {
        o.quotas.vms = 5;
        // Each seed VM has 2 vCPUs: the vCPU quota binds before the VM one
        // for the second wave.
        o.quotas.vcpus = 16;
        o.worker.concurrency = 4;
    })
    .await;
    // Two already there.
    for name in ["a0", "a1"] {
        assert_eq!(
            m.post("/v1/vms", &vm_named(name)).await.status,
            StatusCode::CREATED
        );
    }
    let answers = all_at_once(
        &m,
        "/v1/vms",
        (0..16).map(|i| vm_named(&format!("b{i}"))).collect(),
    )
    .await;
    let created = answers
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 3, "5 VMs fit, 2 were there");
    for r in answers.iter().filter(|r| r.status != StatusCode::CREATED) {
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
        assert_eq!(r.body["error"]["code"], "resource_limit_exceeded");
        assert_eq!(
            r.body["error"]["details"]["limits"],
            json!([{"name": "vms", "quota": 5, "current": 5}]),
            "each refusal saw the VMs the others had reserved"
        );
        assert!(r.headers.contains_key("ratelimit-remaining"));
    }
    let list = m.get("/v1/vms").await;
    assert_eq!(list.body["meta"]["pagination"]["total_entries"], 5);
    // The deployment's default quota (this test's configuration).
    assert_eq!(
        quota(&m, "vms").await,
        json!({"name": "vms", "quota": 5, "current": 5, "default": true})
    );
    assert_eq!(quota(&m, "vcpus").await["current"], 10);
    assert_eq!(usage_matches_recount(&m).await.vms, 5);

    // A VM deleted frees its share once it is gone.
    let gone = answers
        .iter()
        .find(|r| r.status == StatusCode::CREATED)
        .unwrap();
    let vm = gone.body["vm"]["id"].as_str().unwrap();
    m.wait_action(gone.body["action"]["id"].as_str().unwrap())
        .await;
    let del = m.delete(&format!("/v1/vms/{vm}")).await;
    assert_eq!(
        m.wait_action(del.body["action"]["id"].as_str().unwrap())
            .await["status"],
        "success"
    );
    assert_eq!(quota(&m, "vms").await["current"], 4);
    assert_eq!(usage_matches_recount(&m).await.vms, 4);

    // 8 vCPUs and 1 VM left: a 10-vCPU VM exceeds the vCPUs alone; of
    // 4-vCPU VMs fired at once, one fits and the others hit the VM quota.
    let mut big = vm_named("big");
    big["specs"]["req"]["cpu"]["numberOfCores"] = 10.into();
    let r = m.post("/v1/vms", &big).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(
        r.body["error"]["details"]["limits"],
        json!([{"name": "vcpus", "quota": 16, "current": 8}])
    );
    let fours = (0..6)
        .map(|i| {
            let mut v = vm_named(&format!("c{i}"));
            v["specs"]["req"]["cpu"]["numberOfCores"] = 4.into();
            v
        })
        .collect();
    let answers = all_at_once(&m, "/v1/vms", fours).await;
    assert_eq!(
        answers
            .iter()
            .filter(|r| r.status == StatusCode::CREATED)
            .count(),
        1
    );
    assert_eq!(quota(&m, "vms").await["current"], 5);
    assert_eq!(quota(&m, "vcpus").await["current"], 12);
    usage_matches_recount(&m).await;
    m.stop().await;
}

#[tokio::test]
async fn clusters_and_pools_count_their_nodes_at_desired_size() {
    let m = Meson::start_with(|o| {
        o.quotas.clusters = 2;
        o.quotas.nodes = 9;
    })
    .await;
    // The seed cluster: 1 control-plane node and 3 workers.
    let kaas = |name: &str| {
        let mut k = seed_kaas();
        k["req"]["name"] = name.into();
        k
    };
    let answers = all_at_once(
        &m,
        "/v1/clusters",
        (0..5).map(|i| kaas(&format!("k{i}"))).collect(),
    )
    .await;
    let created: Vec<_> = answers
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .collect();
    assert_eq!(
        created.len(),
        2,
        "{:?}",
        answers.iter().map(|r| &r.body).collect::<Vec<_>>()
    );
    for r in answers.iter().filter(|r| r.status != StatusCode::CREATED) {
        assert_eq!(
            r.body["error"]["code"], "resource_limit_exceeded",
            "{}",
            r.body
        );
        let names: Vec<&str> = r.body["error"]["details"]["limits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        // A third cluster's 4 nodes would not fit either.
        assert_eq!(names, ["clusters", "nodes"], "{}", r.body);
    }
    assert_eq!(quota(&m, "nodes").await["current"], 8);
    assert_eq!(quota(&m, "clusters").await["current"], 2);
    assert_eq!(usage_matches_recount(&m).await.nodes, 8);

    // A pool grown past the node quota is refused before anything changes.
    let c = &created[0].body["cluster"];
    let id = c["id"].as_str().unwrap();
    m.wait_action_for(
        created[0].body["action"]["id"].as_str().unwrap(),
        std::time::Duration::from_secs(60),
    )
    .await;
    let pool = c["pools"][0]["id"].as_str().unwrap();
    let path = format!("/v1/clusters/{id}/pools/{pool}");
    let r = m
        .patch(&path, &json!({"max_nodes": 6, "desired_nodes": 5}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(
        r.body["error"]["details"]["limits"][0],
        json!({"name": "nodes", "quota": 9, "current": 8})
    );
    assert_eq!(m.cluster(id).await["pools"][0]["desired_nodes"], 3);
    // One more node fits; shrinking is never refused.
    let r = m
        .patch(&path, &json!({"max_nodes": 6, "desired_nodes": 4}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(quota(&m, "nodes").await["current"], 9);
    settle(&m, &r).await;
    let r = m
        .post(
            &format!("/v1/clusters/{id}/pools"),
            &json!({"pool_name": "more", "desired_nodes": 1}),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["limits"][0]["name"], "nodes");
    assert_eq!(usage_matches_recount(&m).await.nodes, 9);

    // A pool shrunk, then the cluster deleted: its control plane and its
    // pools stop counting together.
    let r = m
        .patch(&path, &json!({"min_nodes": 2, "desired_nodes": 2}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(usage_matches_recount(&m).await.nodes, 7);
    settle(&m, &r).await;
    let del = m.delete(&format!("/v1/clusters/{id}")).await;
    assert_eq!(del.status, StatusCode::OK, "{}", del.body);
    assert_eq!(
        m.wait_action_for(
            del.body["action"]["id"].as_str().unwrap(),
            std::time::Duration::from_secs(60)
        )
        .await["status"],
        "success"
    );
    let left = usage_matches_recount(&m).await;
    assert_eq!((left.clusters, left.nodes), (1, 4));
    m.stop().await;
}

#[tokio::test]
async fn operators_set_a_tenants_quotas_and_tenants_read_their_own() {
    let m = Meson::start().await;
    let admin = &m.token;
    let r = m.get("/v1/quotas").await;
    let limits = r.body["quota"]["limits"].as_array().unwrap();
    let names: Vec<&str> = limits.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "vms",
            "vcpus",
            "ram_mib",
            "storage_gb",
            "clusters",
            "nodes",
            "images_gb"
        ]
    );
    assert!(
        limits
            .iter()
            .all(|l| l["default"] == true && l["current"] == 0)
    );
    assert_eq!(r.body["quota"]["tenant"], "dev");

    let path = "/v1/tenants/acme/quotas";
    let r = m
        .call(
            Method::PATCH,
            path,
            admin,
            Some(&json!({"vms": 1, "nodes": 0})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["quota"]["limits"][0],
        json!({"name": "vms", "quota": 1, "current": 0, "default": false})
    );

    // acme's editor now fits one VM.
    let acme = m.token("acme", "alice", meson_api::Role::Editor);
    let r = m
        .call(Method::POST, "/v1/vms", &acme, Some(&vm_named("one")))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = m
        .call(Method::POST, "/v1/vms", &acme, Some(&vm_named("two")))
        .await;
    assert_eq!(
        r.body["error"]["details"]["limits"],
        json!([{"name": "vms", "quota": 1, "current": 1}])
    );
    let r = m.call(Method::GET, "/v1/quotas", &acme, None).await;
    assert_eq!(r.body["quota"]["limits"][0]["current"], 1);
    assert_eq!(
        r.body["quota"]["limits"][5],
        json!({"name": "nodes", "quota": 0, "current": 0, "default": false})
    );
    let r = m.call(Method::GET, path, admin, None).await;
    assert_eq!(r.body["quota"]["limits"][0]["current"], 1);

    // null goes back to the default; the other quotas stay.
    let r = m
        .call(Method::PATCH, path, admin, Some(&json!({"vms": null})))
        .await;
    assert_eq!(r.body["quota"]["limits"][0]["default"], true);
    assert_eq!(r.body["quota"]["limits"][0]["quota"], 100);
    assert_eq!(r.body["quota"]["limits"][5]["quota"], 0);

    // Bad input names each field; bad tenant ids are refused.
    let r = m
        .call(
            Method::PATCH,
            path,
            admin,
            Some(&json!({"vms": -1, "gpus": 1, "nodes": "lots"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let fields = r.rejected_fields();
    assert_eq!(fields, ["gpus", "nodes", "vms"]);
    let r = m
        .call(Method::GET, "/v1/tenants/a%20b/quotas", admin, None)
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "tenant");
    m.stop().await;
}
