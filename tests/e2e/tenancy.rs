//! Tenant isolation over every route of the API: another tenant's token,
//! whatever its role, gets `not_found` for each of a tenant's ids, and no
//! list, quote or quota answer carries any of them.

use crate::harness::{Meson, seed_kaas, seed_vm};
use meson_api::http::gate::kind_of;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// What the owner holds: one of everything, by path parameter.
struct Owned {
    ids: BTreeMap<String, String>,
}

impl Owned {
    fn all(&self) -> impl Iterator<Item = &String> {
        self.ids.values()
    }
}

/// Operators' collections: shared infrastructure, no tenant owns them.
const SHARED: [&str; 2] = ["targets", "orphans"];

/// The JSON example of an operation's request body in the document.
fn example(doc: &Value, operation: &str) -> Option<Value> {
    let op = doc["paths"]
        .as_object()?
        .values()
        .filter_map(Value::as_object)
        .flat_map(|item| item.values())
        .find(|op| op["operationId"] == operation)?;
    op["requestBody"]["content"]["application/json"]
        .get("example")
        .cloned()
}

async fn one_of_everything(m: &Meson, doc: &Value) -> Owned {
    let mut ids = BTreeMap::new();
    let r = m
        .post(
            "/v1/networks",
            &json!({"name": "owned", "cidr": "10.44.0.0/24", "dhcp": false}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    ids.insert(
        "network".into(),
        r.body["network"]["id"].as_str().unwrap().to_owned(),
    );
    // A standalone volume, attached to the VM.
    let r = m
        .post(
            "/v1/volumes",
            &json!({"name": "owned", "size": 5, "provider": "ionos"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    ids.insert(
        "volume".into(),
        r.body["volume"]["id"].as_str().unwrap().to_owned(),
    );
    let created = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(created["status"], "success", "{created}");
    let mut vm = seed_vm();
    vm["networks"] = json!([ids["network"]]);
    vm["volumes"] = json!([ids["volume"]]);
    let r = m.post("/v1/vms", &vm).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    ids.insert("vm".into(), r.body["vm"]["id"].as_str().unwrap().to_owned());
    // The VM's own boot volume: no route names it here, no answer may show it.
    ids.insert(
        "vm_volume".into(),
        r.body["vm"]["volumes"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    let action = r.body["action"]["id"].as_str().unwrap().to_owned();
    assert_eq!(m.wait_action(&action).await["status"], "success");
    ids.insert("action".into(), action);
    // An image of the VM.
    let r = m
        .post(
            &format!("/v1/vms/{}/actions/create-image", ids["vm"]),
            &json!({"name": "owned"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    ids.insert(
        "image".into(),
        r.body["image"]["id"].as_str().unwrap().to_owned(),
    );
    let made = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(made["status"], "success", "{made}");
    // A backup of the VM.
    let r = m
        .post(
            &format!("/v1/vms/{}/actions/backup", ids["vm"]),
            &json!({"name": "owned"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    ids.insert(
        "backup".into(),
        r.body["backup"]["id"].as_str().unwrap().to_owned(),
    );
    let made = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(made["status"], "success", "{made}");
    // A port forward to the VM.
    let public = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = m
        .post(
            &format!("/v1/networks/{}/port-forwards", ids["network"]),
            &json!({"public_port": public, "vm": ids["vm"], "private_port": 22}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    ids.insert(
        "port_forward".into(),
        r.body["port_forward"]["id"].as_str().unwrap().to_owned(),
    );
    let made = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(made["status"], "success", "{made}");

    // A console on the VM.
    let r = m
        .post(
            &format!("/v1/vms/{}/actions/request-console", ids["vm"]),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    ids.insert(
        "console".into(),
        r.body["console"]["id"].as_str().unwrap().to_owned(),
    );
    // A member of the tenant's.
    let r = m
        .post(
            "/v1/members",
            &json!({"subject": "owned-member", "role": "viewer"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    ids.insert("member".into(), "owned-member".to_owned());

    let mut kaas = seed_kaas();
    kaas["req"]["nodepool"][0]["desired_nodes"] = 1.into();
    kaas["req"]["nodepool"][0]["min_nodes"] = 1.into();
    let cluster = m.running_cluster(&kaas).await;
    let c = m.cluster(&cluster).await;
    ids.insert(
        "pool".into(),
        c["pools"][0]["id"].as_str().unwrap().to_owned(),
    );
    let nodes = m.cluster_nodes(&cluster).await;
    ids.insert("node".into(), nodes[0]["id"].as_str().unwrap().to_owned());
    ids.insert("cluster".into(), cluster);

    // One of every other resource read by id (`/v1/<collection>/{id}`),
    // made by its create's documented example: a new resource is covered
    // here without a line of this test.
    for path in doc["paths"].as_object().unwrap().keys() {
        let segments: Vec<&str> = path.split('/').collect();
        let ["", "v1", collection, "{id}"] = segments[..] else {
            continue;
        };
        if SHARED.contains(&collection) {
            continue;
        }
        let kind = kind_of(collection);
        let create = doc["paths"][format!("/v1/{collection}")]["post"]["operationId"].as_str();
        let Some(body) = create.and_then(|op| example(doc, op)) else {
            continue;
        };
        if ids.contains_key(&kind) {
            continue;
        }
        let r = m.post(&format!("/v1/{collection}"), &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{path}: {}", r.body);
        let id = r.body[&kind]["id"].as_str();
        let id = id.unwrap_or_else(|| panic!("{path}: no {kind}.id in {}", r.body));
        ids.insert(kind, id.to_owned());
        if let Some(action) = r.body["action"]["id"].as_str() {
            assert_eq!(m.wait_action(action).await["status"], "success");
        }
    }

    // A closed statement of the tenant's: its month, ended (the metering
    // clock moved 40 days on), written as the reconciler would.
    let later = meson_db::usage::clock(m.database()).await.unwrap() + chrono::TimeDelta::days(40);
    meson_db::testing::freeze_clock(m.database(), later)
        .await
        .unwrap();
    meson_db::usage::close_statements(m.database(), std::time::Duration::ZERO)
        .await
        .unwrap();
    let r = m.get("/v1/statements").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let closed = r.body["statements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "closed")
        .unwrap_or_else(|| panic!("a closed statement: {}", r.body));
    ids.insert(
        "statement".into(),
        closed["id"].as_str().unwrap().to_owned(),
    );
    Owned { ids }
}

/// A path of the API with the owner's ids in it (`None` if it names none).
fn fill(path: &str, owned: &Owned) -> (String, bool) {
    let mut named = false;
    let filled = path
        .split('/')
        .zip(std::iter::once("").chain(path.split('/')))
        .map(|(seg, before)| match seg {
            "{id}" => {
                named = true;
                if SHARED.contains(&before) {
                    return uuid::Uuid::nil().to_string();
                }
                let kind = kind_of(before);
                let id = owned.ids.get(&kind).cloned();
                id.unwrap_or_else(|| panic!("no {kind} for {path}: document its create's example"))
            }
            "{node}" => owned.ids["node"].clone(),
            "{subject}" => {
                named = true;
                owned.ids["member"].clone()
            }
            "{pool_id}" => owned.ids["pool"].clone(),
            "{forward_id}" => owned.ids["port_forward"].clone(),
            "{command}" => "poweroff".into(),
            "{tenant}" => "dev".into(),
            other => other.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/");
    (filled, named)
}

/// A body that would work for the owner, naming its resources where it can.
fn body_for(doc: &Value, operation: &str, owned: &Owned) -> Option<Value> {
    Some(match operation {
        "vm_create" => {
            let mut vm = seed_vm();
            vm["specs"]["vm_name"] = "intruder".into();
            vm["networks"] = json!([owned.ids["network"]]);
            vm["volumes"] = json!([owned.ids["volume"]]);
            vm
        }
        "vm_update" | "network_update" | "cluster_update" | "volume_update" | "image_update"
        | "backup_update" => json!({"labels": {"owned": "no"}}),
        "volume_create" => json!({"name": "mine", "size": 1}),
        "vm_create_image" => json!({"name": "stolen"}),
        "image_import" => json!({"name": "mine", "url": "http://127.0.0.1:9/x.img"}),
        "cluster_pool_create" => json!({"pool_name": "stolen", "desired_nodes": 1}),
        "cluster_pool_update" => json!({"desired_nodes": 2}),
        "cluster_pool_delete_nodes" => json!({"nodes": [owned.ids["node"]]}),
        "cluster_upgrade" => json!({"kubernetes_version": "1.29.3"}),
        "quote_create" => seed_vm(),
        "network_create" => json!({"name": "mine", "cidr": "10.45.0.0/24"}),
        // Creating one's own cluster is not isolation's business: refused
        // as invalid, its answer still must not name the owner's resources.
        "cluster_create" | "kaas_create" | "target_create" => json!({}),
        "tenant_quota_update" => json!({"vms": 1}),
        "vm_resize" => json!({"cores": 1, "stop": true}),
        "vm_rebuild" => json!({"os": "Debian"}),
        "vm_migrate" => json!({}),
        "vm_attach_network" | "vm_detach_network" => json!({"network": owned.ids["network"]}),
        "volume_attach" => json!({"vm": owned.ids["vm"]}),
        "volume_resize" => json!({"size": 10_000}),
        "volume_move" => json!({"host": "ionos-las-1"}),
        "port_forward_create" => {
            json!({"public_port": 40000, "vm": owned.ids["vm"], "private_port": 80})
        }
        "vm_restore" => json!({"backup": owned.ids["backup"], "into": "new"}),
        "vm_enable_backups" => json!({"keep": 1}),
        "vm_backup" => json!({"name": "stolen"}),
        "member_create" => json!({"subject": "mallory-friend", "role": "viewer"}),
        "member_update" => json!({"role": "editor"}),
        "organization_update" => json!({"quotas": {"vms": 100}}),
        "invitation_accept" => json!({"token": format!("mesoninv_{}", "x".repeat(40))}),
        // A relabel, for any other resource.
        op if op.ends_with("_update") && example(doc, op).is_none() => {
            json!({"labels": {"owned": "no"}})
        }
        // Otherwise what the document shows (the owner made its own by the
        // same example: names and keys are unique per tenant only).
        op => return example(doc, op),
    })
}

#[tokio::test]
async fn another_tenants_token_never_reveals_a_tenants_resources_on_any_route() {
    let m = Meson::start().await;
    let doc = m.get("/openapi.json").await.body;
    let owned = one_of_everything(&m, &doc).await;

    for role in [
        meson_api::Role::Editor,
        meson_api::Role::Owner,
        meson_api::Role::Admin,
    ] {
        // One intruder tenant per role: what one creates (a volume) is its
        // own, and must not count in another's quotas.
        let tenant = match role {
            meson_api::Role::Editor => "intruder",
            meson_api::Role::Owner => "intruder2",
            _ => "intruder3",
        };
        let intruder = m.token(tenant, "mallory", role);
        // Its own quotas count nothing of the owner's.
        let q = m.call(Method::GET, "/v1/quotas", &intruder, None).await;
        for limit in q.body["quota"]["limits"].as_array().unwrap() {
            assert_eq!(limit["current"], 0, "{role:?}: {}", q.body);
        }
        let mut tried = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let operation = op["operationId"].as_str().unwrap();
                // The audit log is an owner's (its own tenant's) and an
                // operator's (every tenant's).
                let audit = operation == "audit_list";
                // Usage and statements: a tenant's own, an operator's of
                // every tenant (as the audit log).
                let metered = matches!(operation, "usage_get" | "statement_list" | "statement_get");
                // API tokens are an owner's (its own tenant's).
                let owner_only = operation.starts_with("token_")
                    || matches!(
                        operation,
                        "organization_create" | "organization_update" | "organization_delete"
                    );
                // Managing members and invitations is a manager's.
                let manager_only = matches!(
                    operation,
                    "member_create"
                        | "member_update"
                        | "member_delete"
                        | "invitation_list"
                        | "invitation_get"
                        | "invitation_create"
                        | "invitation_delete"
                );
                let admin_only = op["summary"].as_str().unwrap_or("").ends_with("(admin)")
                    || ((audit || owner_only) && role < meson_api::Role::Owner)
                    || (manager_only && role < meson_api::Role::Manager);
                if !path.starts_with("/v1/")
                    || ((admin_only || audit || metered) && role == meson_api::Role::Admin)
                {
                    // Operators' routes are cross-tenant by design; editors
                    // and owners are refused them (below, with every other
                    // route), and an owner's audit log shows its tenant's
                    // entries only.
                    continue;
                }
                let (mut url, named) = fill(path, &owned);
                if operation == "action_list" || operation == "action_stream" {
                    url.push_str(&format!("?id={}", owned.ids["action"]));
                } else if operation == "node_phone_home" {
                    url.push_str("?token=guess");
                }
                let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let r = m
                    .call(
                        method.clone(),
                        &url,
                        &intruder,
                        body_for(&doc, operation, &owned).as_ref(),
                    )
                    .await;
                let text = r.body.to_string();
                if admin_only {
                    assert_eq!(r.status, StatusCode::FORBIDDEN, "{method} {url}: {text}");
                } else if operation == "action_list" {
                    // A list filtered by id: none of these is the caller's.
                    assert_eq!(r.body["actions"], json!([]), "{url}: {text}");
                } else if named || operation == "action_stream" {
                    assert_eq!(
                        r.status,
                        StatusCode::NOT_FOUND,
                        "{role:?} {method} {url}: {text}"
                    );
                    assert_eq!(r.body["error"]["code"], "not_found", "{method} {url}");
                } else {
                    assert!(
                        !r.status.is_server_error(),
                        "{method} {url}: {} {text}",
                        r.status
                    );
                }
                if operation == "vm_create" {
                    assert!(
                        !r.status.is_success(),
                        "a VM joined another tenant's network or volume"
                    );
                }
                if audit && role == meson_api::Role::Owner {
                    // The owner's own tenant's entries: the intruder's own
                    // requests (whose paths name what it tried), no other.
                    assert_eq!(r.status, StatusCode::OK, "{role:?} {url}: {text}");
                    for e in r.body["audit_entries"].as_array().unwrap() {
                        assert_eq!(e["tenant"], tenant, "{role:?} {url}: {text}");
                    }
                    tried += 1;
                    continue;
                }
                // Nothing the owner holds shows, but what the caller sent.
                let sent = body_for(&doc, operation, &owned)
                    .map(|b| b.to_string())
                    .unwrap_or_default();
                for id in owned.all() {
                    assert!(
                        !text.contains(id.as_str())
                            || sent.contains(id.as_str())
                            || url.contains(id.as_str()),
                        "{role:?} {method} {url} revealed {id}: {text}"
                    );
                }
                tried += 1;
            }
        }
        assert!(tried >= 40, "only {tried} operations tried");
    }

    // The owner's resources are as they were.
    let vm = m.get(&format!("/v1/vms/{}", owned.ids["vm"])).await;
    assert_eq!(vm.body["vm"]["status"], "running", "{}", vm.body);
    assert_eq!(vm.body["vm"]["labels"], json!({}));
    // Its create, the owner's image, backup of it and forward to it:
    // nothing the intruder started.
    let actions = m.get(&format!("/v1/vms/{}/actions", owned.ids["vm"])).await;
    assert_eq!(
        actions.body["actions"].as_array().unwrap().len(),
        4,
        "{}",
        actions.body
    );
    let c = m.cluster(&owned.ids["cluster"]).await;
    assert_eq!(c["status"], "running", "{c}");
    assert_eq!(c["pools"].as_array().unwrap().len(), 1);
    assert_eq!(c["pools"][0]["desired_nodes"], 1);
    assert_eq!(c["kubernetes_version"], "1.29.2");
    let n = m
        .get(&format!("/v1/networks/{}", owned.ids["network"]))
        .await;
    assert_eq!(n.status, StatusCode::OK);
    let v = m.get(&format!("/v1/volumes/{}", owned.ids["volume"])).await;
    assert_eq!(v.body["volume"]["status"], "attached", "{}", v.body);
    assert_eq!(v.body["volume"]["attached_to"], owned.ids["vm"].as_str());
    assert_eq!(v.body["volume"]["labels"], json!({}));
    m.stop().await;
}
