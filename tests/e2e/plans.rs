//! Plans: named quota sets operators put tenants on. A tenant's quota is
//! its own override, else its plan's, else the default; the quota checks
//! (in SQL, where usage is locked) follow a plan's change at once.

use crate::harness::{Meson, seed_vm};
use meson_api::Role;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn vm_named(name: &str) -> Value {
    let mut vm = seed_vm();
    vm["specs"]["vm_name"] = name.into();
    vm
}

fn limit<'a>(quota: &'a Value, name: &str) -> &'a Value {
    quota["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap()
}

#[tokio::test]
async fn a_tenant_on_a_plan_gets_its_quotas_under_its_own_overrides() {
    let m = Meson::start().await;
    let admin = m.token("ops", "root", Role::Admin);
    let owner = m.token("dev", "olga", Role::Owner);
    let viewer = m.token("dev", "vic", Role::Viewer);
    let call = |method: Method, path: &str, token: &str, body: Option<Value>| {
        let path = path.to_owned();
        let token = token.to_owned();
        let m = &m;
        async move { m.call(method, &path, &token, body.as_ref()).await }
    };

    // An operator makes a plan of one VM; making it again replaces it.
    let small = json!({"description": "Try it out", "quotas": {"vms": 1, "clusters": 0}});
    let r = call(
        Method::PUT,
        "/v1/admin/plans/small",
        &admin,
        Some(small.clone()),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["plan"]["name"], "small");
    let vms = &r.body["plan"]["quotas"][0];
    assert_eq!(vms, &json!({"name": "vms", "quota": 1, "default": false}));
    let r = call(Method::PUT, "/v1/admin/plans/small", &admin, Some(small)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    // Not an owner's to make; bad fields are named.
    let r = call(Method::PUT, "/v1/admin/plans/mine", &owner, Some(json!({}))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = call(
        Method::PUT,
        "/v1/admin/plans/small",
        &admin,
        Some(json!({"quotas": {"vms": -1, "cpus": 1}, "colour": "red"})),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.rejected_fields(), ["colour", "quotas.cpus", "quotas.vms"]);
    for bad in ["Big", "-x", "default", "none"] {
        let r = call(
            Method::PUT,
            &format!("/v1/admin/plans/{bad}"),
            &admin,
            Some(json!({})),
        )
        .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.body);
        assert_eq!(r.rejected_fields(), ["name"], "{bad}");
    }

    // Anyone reads the plans: the defaults first.
    let r = call(Method::GET, "/v1/plans", &viewer, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let names: Vec<&str> = r.body["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "small"]);
    assert!(
        r.body["plans"][0]["quotas"]
            .as_array()
            .unwrap()
            .iter()
            .all(|q| q["default"] == true)
    );
    let r = call(Method::GET, "/v1/plans/small", &viewer, None).await;
    assert_eq!(r.body["plan"]["description"], "Try it out");
    for missing in ["nope", "a%00b", "Big"] {
        let r = call(Method::GET, &format!("/v1/plans/{missing}"), &viewer, None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{missing}: {}", r.body);
    }

    // The tenant goes on it, with its own vCPU quota over the plan's.
    let r = call(
        Method::PATCH,
        "/v1/tenants/dev/quotas",
        &admin,
        Some(json!({"plan": "small", "vcpus": 99})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let q = &r.body["quota"];
    assert_eq!(q["plan"], "small");
    assert_eq!(limit(q, "vms")["quota"], 1);
    assert_eq!(limit(q, "vms")["default"], false);
    assert_eq!(limit(q, "vcpus")["quota"], 99);
    assert_eq!(limit(q, "nodes")["default"], true);
    let r = call(Method::GET, "/v1/quotas", &viewer, None).await;
    assert_eq!(r.body["quota"]["plan"], "small", "{}", r.body);
    let r = call(
        Method::PATCH,
        "/v1/tenants/dev/quotas",
        &admin,
        Some(json!({"plan": "nope"})),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.rejected_fields(), ["plan"]);

    // The plan's one VM, and no second.
    let r = call(Method::POST, "/v1/vms", &owner, Some(vm_named("one"))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = call(Method::POST, "/v1/vms", &owner, Some(vm_named("two"))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_limit_exceeded");
    assert_eq!(r.body["error"]["details"]["limits"][0]["name"], "vms");
    assert_eq!(r.body["error"]["details"]["limits"][0]["quota"], 1);

    // The plan grows: its tenants' quotas follow at once.
    let r = call(
        Method::PUT,
        "/v1/admin/plans/small",
        &admin,
        Some(json!({"quotas": {"vms": 2}})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = call(Method::POST, "/v1/vms", &owner, Some(vm_named("two"))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);

    // A plan in use stays; off it, the tenant has the defaults again (its
    // own vCPU quota kept), and the plan can go.
    let r = call(Method::DELETE, "/v1/admin/plans/small", &admin, None).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = call(Method::DELETE, "/v1/admin/plans/default", &admin, None).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = call(
        Method::PATCH,
        "/v1/tenants/dev/quotas",
        &admin,
        Some(json!({"plan": null})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["quota"]["plan"], Value::Null);
    assert_eq!(limit(&r.body["quota"], "vms")["default"], true);
    assert_eq!(limit(&r.body["quota"], "vcpus")["quota"], 99);
    let r = call(Method::DELETE, "/v1/admin/plans/small", &admin, None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = call(Method::DELETE, "/v1/admin/plans/small", &admin, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
}
