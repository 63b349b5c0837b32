//! The operators' routes: the audit log and AtomOS targets.

use crate::harness::{Meson, seed_vm};
use meson_api::Role;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The audit entries `query` selects, newest first.
async fn audit(m: &Meson, query: &str) -> Vec<Value> {
    let r = m.get(&format!("/v1/audit?{query}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["audit_entries"].as_array().unwrap().clone()
}

#[tokio::test]
async fn changes_refused_or_not_and_credentials_handed_out_are_audited() {
    let m = Meson::start().await;
    let editor = m.token("dev", "ed", Role::Editor);
    let viewer = m.token("dev", "vera", Role::Viewer);

    // An editor's create, with the caller's correlation id.
    let r = m
        .http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(&editor)
        .header("x-correlation-id", "audit-create-1")
        .json(&seed_vm())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let created: Value = r.json().await.unwrap();
    let vm = created["vm"]["id"].as_str().unwrap().to_owned();
    let action = created["action"]["id"].as_str().unwrap().to_owned();
    m.wait_action(&action).await;
    // A rename; a viewer's refused delete; reads, which are not audited.
    let r = m
        .call(
            Method::PATCH,
            &format!("/v1/vms/{vm}"),
            &editor,
            Some(&json!({"name": "renamed"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = m
        .call(Method::DELETE, &format!("/v1/vms/{vm}"), &viewer, None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    m.call(Method::GET, &format!("/v1/vms/{vm}"), &editor, None)
        .await;
    m.call(Method::GET, "/v1/vms", &viewer, None).await;

    let entries = audit(&m, "tenant=dev").await;
    let ops: Vec<&str> = entries
        .iter()
        .map(|e| e["operation"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["vm_delete", "vm_update", "vm_create"], "{entries:#?}");
    let [delete, update, create] = &entries[..] else {
        unreachable!()
    };
    assert_eq!(create["subject"], "ed");
    assert_eq!(create["role"], "editor");
    assert_eq!(create["tenant"], "dev");
    assert_eq!(create["method"], "POST");
    assert_eq!(create["path"], "/v1/vms");
    assert_eq!(create["status"], 201);
    assert_eq!(create["resource_type"], "vm");
    assert_eq!(create["resource_id"], vm.as_str());
    assert_eq!(create["action_id"], action.as_str());
    assert_eq!(create["correlation_id"], "audit-create-1");
    assert_eq!(
        (update["status"].clone(), update["resource_id"].clone()),
        (json!(200), json!(vm))
    );
    assert_eq!(update["action_id"], Value::Null);
    assert_eq!(delete["subject"], "vera");
    assert_eq!(delete["role"], "viewer");
    assert_eq!(delete["status"], 403);
    assert_eq!(delete["resource_id"], vm.as_str());
    assert!(!delete["correlation_id"].as_str().unwrap().is_empty());

    // Filters: by subject, operation, resource; pages newest first.
    assert_eq!(audit(&m, "subject=vera").await.len(), 1);
    assert_eq!(audit(&m, "operation=vm_update").await.len(), 1);
    assert_eq!(audit(&m, &format!("resource_id={vm}")).await.len(), 3);
    let r = m.get("/v1/audit?per_page=1&page=2").await;
    assert_eq!(r.body["audit_entries"][0]["operation"], "vm_update");
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 3);
    let since = chrono::Utc::now() + chrono::Duration::minutes(1);
    assert!(
        audit(
            &m,
            &format!(
                "since={}",
                since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )
        )
        .await
        .is_empty()
    );
    let r = m.get("/v1/audit?since=yesterday").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "since");

    // Other tenants' entries are the operators' to read, theirs alone.
    let other = m.token("acme", "alice", Role::Editor);
    let r = m
        .call(
            Method::POST,
            "/v1/networks",
            &other,
            Some(&json!({"name": "n", "cidr": "10.7.0.0/24"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let acme = audit(&m, "tenant=acme").await;
    assert_eq!(acme.len(), 1);
    assert_eq!(acme[0]["resource_type"], "network");
    assert_eq!(audit(&m, "").await.len(), 4);
    let r = m.call(Method::GET, "/v1/audit", &other, None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    m.stop().await;
}

/// A tenant's owner: an editor who reads its own tenant's audit log, and
/// nothing of any other tenant, nor the operators' routes.
#[tokio::test]
async fn a_tenant_owner_edits_and_reads_its_own_audit_log_only() {
    let m = Meson::start().await;
    let owner = m.token("acme", "olivia", Role::Owner);
    let other = m.token("globex", "gus", Role::Editor);
    // Editor things.
    let r = m
        .call(
            Method::POST,
            "/v1/networks",
            &owner,
            Some(&json!({"name": "n", "cidr": "10.7.0.0/24"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = m
        .call(
            Method::POST,
            "/v1/networks",
            &other,
            Some(&json!({"name": "g", "cidr": "10.8.0.0/24"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = m.call(Method::GET, "/v1/quotas", &owner, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    // Its own tenant's audit log, whatever it filters on.
    for query in ["", "?tenant=acme", "?operation=network_create"] {
        let r = m
            .call(Method::GET, &format!("/v1/audit{query}"), &owner, None)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.body);
        let entries = r.body["audit_entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{query}: {entries:#?}");
        assert_eq!(entries[0]["tenant"], "acme");
        assert_eq!(entries[0]["role"], "owner");
    }
    // Another tenant's, the operators' routes: refused.
    let r = m
        .call(Method::GET, "/v1/audit?tenant=globex", &owner, None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    for (method, path, body) in [
        (Method::GET, "/v1/tenants/acme/quotas", None),
        (
            Method::PATCH,
            "/v1/tenants/acme/quotas",
            Some(json!({"vms": 1000})),
        ),
        (Method::GET, "/v1/targets", None),
    ] {
        let r = m.call(method, path, &owner, body.as_ref()).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}: {}", r.body);
    }
    // The other tenant's network is not the owner's to see.
    let r = m.call(Method::GET, "/v1/networks", &owner, None).await;
    let names: Vec<&str> = r.body["networks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["n"]);
    m.stop().await;
}

#[tokio::test]
async fn operators_register_update_and_disable_atomos_targets() {
    let m = Meson::start().await;
    let r = m.get("/v1/targets").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let targets = r.body["targets"].as_array().unwrap().clone();
    assert_eq!(targets.len(), m.sim().targets().len());

    // Register one (the simulator does not serve it: it takes no VMs here).
    let body = json!({"name": "ovh-new-1", "host": "10.9.9.9", "provider": "ovh",
        "region": "eu-new", "continent": "europe", "enabled": false, "rack": 7});
    let r = m.post("/v1/targets", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let t = r.body["target"].clone();
    assert_eq!(
        (
            t["compute_port"].clone(),
            t["auth_port"].clone(),
            t["enabled"].clone()
        ),
        (json!(17777), json!(47777), json!(false))
    );
    assert_eq!(r.body["warnings"][0]["field"], "rack");
    let r = m.post("/v1/targets", &body).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "uniqueness_error");
    let r = m
        .post(
            "/v1/targets",
            &json!({"name": "a b", "host": "", "compute_port": 70000}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let fields = r.rejected_fields();
    assert_eq!(
        fields,
        [
            "compute_port",
            "continent",
            "host",
            "name",
            "provider",
            "region"
        ]
    );

    // Disabling the only ionos hosts takes ionos out of the catalogue and
    // out of placement; enabling them brings it back.
    let ionos: Vec<String> = targets
        .iter()
        .filter(|t| t["provider"] == "ionos")
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!ionos.is_empty());
    for id in &ionos {
        let r = m
            .patch(&format!("/v1/targets/{id}"), &json!({"enabled": false}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["target"]["enabled"], false);
    }
    let providers = m.get("/v1/providers").await.body.to_string();
    assert!(!providers.contains("\"ionos\""), "{providers}");
    let r = m.post("/v1/quotes", &seed_vm()).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "provider");
    for id in &ionos {
        m.patch(&format!("/v1/targets/{id}"), &json!({"enabled": true}))
            .await;
    }
    assert_eq!(
        m.post("/v1/quotes", &seed_vm()).await.status,
        StatusCode::OK
    );

    let r = m
        .get(&format!("/v1/targets/{}", uuid::Uuid::new_v4()))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = m
        .patch(
            &format!("/v1/targets/{}", ionos[0]),
            &json!({"auth_port": 0}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["error"]["details"]["fields"][0]["name"], "auth_port");
    // Every change is in the audit log.
    let r = m.get("/v1/audit?operation=target_update").await;
    assert_eq!(
        r.body["meta"]["pagination"]["total_entries"],
        2 * ionos.len() + 1
    );
    m.stop().await;
}
