//! SSH keys kept at meson: REST and gRPC over real sockets, on one store.
//! A key's name and its fingerprint are each its tenant's only one, bad
//! input is named, lists page and filter, and another tenant sees nothing.

use crate::grpc::{authed, channel, refused};
use crate::grpc_resources::rejected_fields;
use crate::harness::Meson;
use meson_api::Role;
use meson_proto::meson::v1 as pb;
use reqwest::{Method, StatusCode};
use serde_json::json;
use tonic::Code;

const ANA: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKsXu3gF1dsjgi7AFYsFlujQvUGwiqxtFGIzhDsQrt1p ana@laptop";
/// `ssh-keygen -l` of [`ANA`].
const ANA_FINGERPRINT: &str = "SHA256:9EiTBMAujmdUnv2I9IKzJMHRAA7jLozr7q50Qj+Sx34";
const CI: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCtIerNrscx1e13slvSIAg+LegETPijTUw/SagxTLBAD8ZaY2F+IxD2AoMc3iCSTx712Rg0lkJVC/+J2oDs2YdmA04ZZ5h9TGEHnJuNn2pyP0WxjoC0Yz6FUjSWhIwnl3+RcOqvD59oRmNz/e7PFL8jiurk4MQhUuapwh/CRnbYLBJE+dQH2JirgHTH+XfKwnAakD/lffB601NeBIQ8K9E8/hEd4QxcNHN8XuvC5jsQajvO3QoXqdC8/qVmTWNsaA7D7IZFcLSr+iliFl+rJ6Juk1klRyC6B0jIIbfOC3Kp/9j/CAxxalpI+9Qhe8QhQoPs5jQx2nrSNOoSB5+Hdun5 ci@runner";
/// `ssh-keygen -l` of [`CI`].
const CI_FINGERPRINT: &str = "SHA256://cNM8mVTVHX50I5Wl4VWOjUCHMv31axLSwYdnrUJss";

#[tokio::test]
async fn keys_are_kept_unique_listed_renamed_and_deleted_over_rest() {
    let m = Meson::start().await;

    // Kept as given (trimmed), with ssh-keygen's fingerprint.
    let r = m
        .post(
            "/v1/ssh-keys",
            &json!({"name": "ana", "public_key": format!("{ANA}\n"),
                    "labels": {"team": "web"}, "colour": "red"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let ana = r.body["ssh_key"].clone();
    assert_eq!(ana["public_key"], ANA);
    assert_eq!(ana["fingerprint"], ANA_FINGERPRINT);
    assert_eq!(ana["labels"], json!({"team": "web"}));
    assert_eq!(r.body["warnings"][0]["field"], "colour", "{}", r.body);
    let ana_id = ana["id"].as_str().unwrap().to_owned();
    let r = m
        .post("/v1/ssh-keys", &json!({"name": "ci", "public_key": CI}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["ssh_key"]["fingerprint"], CI_FINGERPRINT);
    let ci_id = r.body["ssh_key"]["id"].as_str().unwrap().to_owned();

    // Bad input: every bad field named, nothing kept.
    for (body, fields) in [
        (json!({}), vec!["name", "public_key"]),
        (
            json!({"name": "a b", "public_key": "ssh-rsa AAAA... x"}),
            vec!["name", "public_key"],
        ),
        (
            json!({"name": "x", "public_key": "ssh-dss AAAAB3NzaC1kc3M="}),
            vec!["public_key"],
        ),
        (
            json!({"name": "x", "public_key": ANA, "labels": {"": "y"}}),
            vec!["labels"],
        ),
    ] {
        let r = m.post("/v1/ssh-keys", &body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        let mut got = r.rejected_fields();
        got.iter_mut()
            .for_each(|f| *f = f.split(['.', '[']).next().unwrap());
        assert_eq!(got, fields, "{body}: {}", r.body);
    }
    // The name, or the same key under another name or comment: taken.
    for (body, field) in [
        (json!({"name": "ana", "public_key": CI}), "name"),
        (
            json!({"name": "ana2", "public_key": ANA.replace("ana@laptop", "other")}),
            "public_key",
        ),
    ] {
        let r = m.post("/v1/ssh-keys", &body).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
        assert_eq!(r.body["error"]["code"], "uniqueness_error");
        assert_eq!(r.rejected_fields(), [field], "{}", r.body);
    }

    // Listed, filtered by name and labels, sorted, paged by cursor.
    let names = |r: &crate::harness::Reply| -> Vec<String> {
        r.body["ssh_keys"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", r.body))
            .iter()
            .map(|k| k["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let r = m.get("/v1/ssh-keys?sort=name:desc").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(names(&r), ["ci", "ana"]);
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 2);
    assert_eq!(
        names(&m.get("/v1/ssh-keys?label_selector=team%3Dweb").await),
        ["ana"]
    );
    assert_eq!(names(&m.get("/v1/ssh-keys?name=ci").await), ["ci"]);
    let first = m.get("/v1/ssh-keys?sort=name&per_page=1").await;
    assert_eq!(names(&first), ["ana"]);
    let cursor = first.body["meta"]["pagination"]["next_cursor"]
        .as_str()
        .expect("a next cursor")
        .to_owned();
    let next = m
        .get(&format!(
            "/v1/ssh-keys?sort=name&per_page=1&cursor={cursor}"
        ))
        .await;
    assert_eq!(names(&next), ["ci"], "{}", next.body);
    // Keys have no status to filter or sort by.
    for q in ["status=available", "sort=status"] {
        let r = m.get(&format!("/v1/ssh-keys?{q}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{q}: {}", r.body);
        assert_eq!(r.rejected_fields(), [q.split('=').next().unwrap()]);
    }

    // Renamed and relabelled; the key stays.
    let r = m
        .patch(
            &format!("/v1/ssh-keys/{ana_id}"),
            &json!({"name": "ana-laptop", "labels": {}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["ssh_key"]["name"], "ana-laptop");
    assert_eq!(r.body["ssh_key"]["labels"], json!({}));
    assert_eq!(r.body["ssh_key"]["public_key"], ANA);
    let r = m
        .patch(&format!("/v1/ssh-keys/{ana_id}"), &json!({"name": "ci"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);

    // Another tenant sees none of it; a viewer reads but keeps nothing.
    let other = m.token("other", "olaf", Role::Editor);
    for (method, path) in [
        (Method::GET, format!("/v1/ssh-keys/{ana_id}")),
        (Method::DELETE, format!("/v1/ssh-keys/{ana_id}")),
    ] {
        let r = m.call(method, &path, &other, None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {}", r.body);
    }
    let r = m.call(Method::GET, "/v1/ssh-keys", &other, None).await;
    assert_eq!(r.body["ssh_keys"], json!([]), "{}", r.body);
    let viewer = m.token("dev", "vera", Role::Viewer);
    let r = m.call(Method::GET, "/v1/ssh-keys", &viewer, None).await;
    assert_eq!(names(&r).len(), 2);
    let body = json!({"name": "v", "public_key": CI});
    let r = m
        .call(Method::POST, "/v1/ssh-keys", &viewer, Some(&body))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);

    // Deleted: gone, its name and key free again; audited as an ssh_key.
    let r = m.delete(&format!("/v1/ssh-keys/{ci_id}")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let r = m.get(&format!("/v1/ssh-keys/{ci_id}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = m.delete(&format!("/v1/ssh-keys/{ci_id}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = m
        .post("/v1/ssh-keys", &json!({"name": "ci", "public_key": CI}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = m.get("/v1/audit?operation=ssh_key_delete").await;
    let entries = r.body["audit_entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["resource_type"] == "ssh_key" && e["resource_id"] == ci_id.as_str()),
        "{}",
        r.body
    );
    m.stop().await;
}

#[tokio::test]
async fn keys_over_grpc_are_the_rest_ones() {
    use pb::ssh_key_service_client::SshKeyServiceClient;
    let m = Meson::start().await;
    let mut keys = SshKeyServiceClient::new(channel(&m).await);
    let create = |name: &str, key: &str| pb::CreateSshKeyRequest {
        name: name.into(),
        public_key: key.into(),
        labels: [("team".to_owned(), "web".to_owned())].into(),
    };

    // Bad input is named as REST names it.
    let e = refused(
        keys.create_ssh_key(authed(create("", "nope"), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["name", "public_key"]);

    let made = keys
        .create_ssh_key(authed(create("ana", ANA), &m.token))
        .await
        .expect("created")
        .into_inner()
        .ssh_key
        .expect("the key");
    assert_eq!(made.fingerprint, ANA_FINGERPRINT);
    // REST reads what gRPC kept.
    let r = m.get(&format!("/v1/ssh-keys/{}", made.id)).await;
    assert_eq!(r.body["ssh_key"]["name"], "ana", "{}", r.body);
    let e = refused(
        keys.create_ssh_key(authed(create("again", ANA), &m.token)),
        Code::AlreadyExists,
    )
    .await;
    assert!(e.message().contains("public_key"), "{e:?}");

    let listed = keys
        .list_ssh_keys(authed(
            pb::ListSshKeysRequest {
                options: Some(pb::ListOptions {
                    label_selector: "team=web".into(),
                    ..Default::default()
                }),
            },
            &m.token,
        ))
        .await
        .expect("listed")
        .into_inner();
    assert_eq!(listed.ssh_keys.len(), 1);
    assert_eq!(listed.pagination.expect("pagination").total_entries, 1);

    let updated = keys
        .update_ssh_key(authed(
            pb::UpdateSshKeyRequest {
                id: made.id.clone(),
                name: Some("ana-laptop".into()),
                labels: None,
            },
            &m.token,
        ))
        .await
        .expect("updated")
        .into_inner()
        .ssh_key
        .expect("the key");
    assert_eq!(updated.name, "ana-laptop");
    assert_eq!(updated.labels.get("team").map(String::as_str), Some("web"));

    // A VM created over gRPC names it by id.
    let mut vm = crate::grpc::seed_vm("keyed");
    if let Some(auth) = vm.specs.as_mut().and_then(|s| s.authentication.as_mut()) {
        auth.ssh_key_ids = vec![made.id.clone()];
    }
    let created = pb::vm_service_client::VmServiceClient::new(channel(&m).await)
        .create_vm(authed(vm, &m.token))
        .await
        .expect("a VM with the kept key")
        .into_inner();
    let specs = created.vm.and_then(|v| v.specs).expect("its specs");
    assert!(specs.ssh_keys.iter().any(|k| k == ANA), "{specs:?}");

    let other = m.token("other", "olaf", Role::Editor);
    refused(
        keys.get_ssh_key(authed(
            pb::GetSshKeyRequest {
                id: made.id.clone(),
            },
            &other,
        )),
        Code::NotFound,
    )
    .await;
    keys.delete_ssh_key(authed(
        pb::DeleteSshKeyRequest {
            id: made.id.clone(),
        },
        &m.token,
    ))
    .await
    .expect("deleted");
    let r = m.get(&format!("/v1/ssh-keys/{}", made.id)).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    m.stop().await;
}

#[tokio::test]
async fn a_vm_is_created_with_kept_keys_by_id_or_name() {
    let m = Meson::start().await;
    let r = m
        .post("/v1/ssh-keys", &json!({"name": "ana", "public_key": ANA}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let ana_id = r.body["ssh_key"]["id"].as_str().unwrap().to_owned();
    // Another tenant's key of that name is not this tenant's.
    let other = m.token("other", "olaf", Role::Editor);
    let body = json!({"name": "theirs", "public_key": CI});
    let r = m
        .call(Method::POST, "/v1/ssh-keys", &other, Some(&body))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);

    // A key not kept is named; nothing is written.
    let mut vm = crate::harness::seed_vm();
    vm["specs"]["authentication"] = json!({"ssh-key-ids": ["ana", "theirs", ""]});
    let r = m.post("/v1/vms", &vm).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.rejected_fields(),
        ["specs.authentication.ssh-key-ids[2]"],
        "a blank one is refused before any lookup: {}",
        r.body
    );
    vm["specs"]["authentication"] = json!({"ssh-key-ids": ["ana", "theirs"]});
    let r = m.post("/v1/vms", &vm).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.rejected_fields(),
        ["specs.authentication.ssh-key-ids[1]"],
        "{}",
        r.body
    );
    assert_eq!(
        m.get("/v1/vms").await.body["vms"],
        json!([]),
        "no VM written"
    );

    // By name and by id: the same key once, beside a key given inline.
    assert!(m.user_data_containing(ANA).is_none(), "on no host before");
    vm["specs"]["authentication"] = json!({
        "ssh-key": crate::harness::SSH_KEY,
        "ssh-key-ids": ["ana", ana_id],
    });
    let r = m.post("/v1/vms", &vm).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let keys = r.body["vm"]["specs"]["ssh_keys"].clone();
    assert_eq!(keys, json!([crate::harness::SSH_KEY, ANA]), "{}", r.body);
    let action = r.body["action"]["id"].as_str().unwrap().to_owned();
    assert_eq!(m.wait_action(&action).await["status"], "success");
    // On the host: the guest's cloud-init installs it.
    let user_data = m
        .user_data_containing(ANA)
        .expect("the kept key in the VM's user-data");
    assert!(user_data.contains(crate::harness::SSH_KEY), "{user_data}");
    // Deleting the key leaves the VM's.
    let r = m.delete(&format!("/v1/ssh-keys/{ana_id}")).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let vms = m.get("/v1/vms").await;
    assert_eq!(vms.body["vms"][0]["specs"]["ssh_keys"], keys);
    m.stop().await;
}
