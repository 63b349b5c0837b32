//! Organisations' members and invitations: membership adds roles to a
//! subject (acting in another organisation with `Meson-Organization`),
//! managers never reach above their own role, the last owner stays, and an
//! invitation is accepted only by the subject whose verified email it
//! names.

use crate::harness::{Meson, seed_vm};
use meson_api::Role;
use meson_api::authz::{Access, rule_of};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Digest;

/// A VM payload named `name`.
fn vm_named(name: &str) -> Value {
    let mut v = seed_vm();
    v["specs"]["vm_name"] = json!(name);
    v
}

/// Polls an action of `org`'s until it ends (bounded: 30 s).
async fn wait_in(m: &Meson, token: &str, org: &str, id: &str) -> Value {
    for _ in 0..300 {
        let r = m
            .call_in(Method::GET, &format!("/v1/actions/{id}"), token, org, None)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        if r.body["action"]["status"] != "running" {
            return r.body["action"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("action {id} still running");
}

async fn add(m: &Meson, token: &str, org: Option<&str>, subject: &str, role: &str) -> Value {
    let body = json!({"subject": subject, "role": role});
    let r = match org {
        Some(o) => {
            m.call_in(Method::POST, "/v1/members", token, o, Some(&body))
                .await
        }
        None => {
            m.call(Method::POST, "/v1/members", token, Some(&body))
                .await
        }
    };
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.body["member"].clone()
}

#[tokio::test]
async fn members_act_in_their_organisation_at_their_role_and_the_last_owner_stays() {
    let m = Meson::start().await;
    let olga = m.token("acme", "olga", Role::Owner);
    // Olga is an owner by her token's claims; as a member too.
    add(&m, &olga, None, "olga", "owner").await;
    let mia = add(&m, &olga, None, "mia", "manager").await;
    assert_eq!(mia["added_by"], "olga");

    // Mia's token names her own organisation, as a viewer: in acme she
    // acts as its manager.
    let mia = m.token("mia-home", "mia", Role::Viewer);
    let r = m
        .call_in(Method::GET, "/v1/members", &mia, "acme", None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let subjects: Vec<&str> = r.body["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["subject"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, ["olga", "mia"], "owners first: {}", r.body);
    // Without the header, her own organisation: no members there.
    let r = m.call(Method::GET, "/v1/members", &mia, None).await;
    assert_eq!(r.body["members"], json!([]), "{}", r.body);
    add(&m, &mia, Some("acme"), "ed", "editor").await;
    // Never above her own role, never over an owner.
    let r = m
        .call_in(
            Method::POST,
            "/v1/members",
            &mia,
            "acme",
            Some(&json!({"subject": "otto", "role": "owner"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.rejected_fields(), ["role"]);
    let r = m
        .call_in(
            Method::PATCH,
            "/v1/members/olga",
            &mia,
            "acme",
            Some(&json!({"role": "viewer"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = m
        .call_in(Method::DELETE, "/v1/members/olga", &mia, "acme", None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = m
        .call_in(
            Method::PATCH,
            "/v1/members/ed",
            &mia,
            "acme",
            Some(&json!({"role": "viewer"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["member"]["role"], "viewer");

    // What she does there is acme's, audited as her, a manager.
    let r = m
        .call_in(Method::POST, "/v1/vms", &mia, "acme", Some(&seed_vm()))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let r = m
        .call(Method::GET, &format!("/v1/vms/{vm}"), &olga, None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "acme's VM: {}", r.body);
    let r = m
        .call(Method::GET, &format!("/v1/vms/{vm}"), &mia, None)
        .await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "not mia-home's: {}",
        r.body
    );
    let r = m
        .call(Method::GET, "/v1/audit?operation=vm_create", &olga, None)
        .await;
    let entry = r.body["audit_entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["resource_id"] == vm.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("the create's entry: {}", r.body));
    assert_eq!(
        (&entry["tenant"], &entry["subject"], &entry["role"]),
        (&json!("acme"), &json!("mia"), &json!("manager"))
    );

    // A claim's role rises with a membership, never falls.
    let ed = m.token("acme", "ed", Role::Viewer);
    let r = m.call(Method::POST, "/v1/vms", &ed, Some(&seed_vm())).await;
    assert_eq!(
        r.status,
        StatusCode::FORBIDDEN,
        "ed is a viewer: {}",
        r.body
    );
    let r = m
        .call(
            Method::PATCH,
            "/v1/members/ed",
            &olga,
            Some(&json!({"role": "editor"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = m
        .call(Method::POST, "/v1/vms", &ed, Some(&vm_named("eds")))
        .await;
    assert_eq!(
        r.status,
        StatusCode::CREATED,
        "ed is an editor now: {}",
        r.body
    );

    // Strangers: the same refusal for an organisation that exists and for
    // one that does not, and nothing of acme's in it.
    let eve = m.token("evil", "eve", Role::Owner);
    for org in ["acme", "acme-not-here"] {
        for (method, path) in [
            (Method::GET, "/v1/vms"),
            (Method::GET, "/v1/members"),
            (Method::POST, "/v1/members"),
        ] {
            let body = json!({"subject": "eve", "role": "owner"});
            let r = m
                .call_in(method.clone(), path, &eve, org, Some(&body))
                .await;
            assert_eq!(
                r.status,
                StatusCode::FORBIDDEN,
                "{method} {path} in {org}: {}",
                r.body
            );
            assert_eq!(
                r.body["error"]["message"],
                format!("forbidden: not a member of organisation {org}")
            );
        }
    }
    // A meson token acts in its own organisation only.
    let r = m
        .call(
            Method::POST,
            "/v1/tokens",
            &olga,
            Some(&json!({"name": "ci", "role": "editor"})),
        )
        .await;
    let secret = r.body["secret"].as_str().unwrap().to_owned();
    let r = m
        .call_in(Method::GET, "/v1/vms", &secret, "mia-home", None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = m.call(Method::GET, "/v1/membership", &secret, None).await;
    assert_eq!(
        r.body["memberships"],
        json!([{"organization": "acme", "role": "editor", "via": "token"}])
    );

    // Mia's organisations.
    let r = m.call(Method::GET, "/v1/membership", &mia, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["subject"], "mia");
    assert_eq!(
        r.body["memberships"],
        json!([
            {"organization": "mia-home", "role": "viewer", "via": "token"},
            {"organization": "acme", "role": "manager", "via": "member"},
        ])
    );

    // The last owner can neither leave nor be demoted; once another
    // owner exists, she can.
    let r = m.call(Method::DELETE, "/v1/membership", &olga, None).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = m
        .call(
            Method::PATCH,
            "/v1/members/olga",
            &olga,
            Some(&json!({"role": "manager"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    add(&m, &olga, None, "otto", "owner").await;
    // Two owners removing each other at once: one of them stays. (Otto's
    // token makes him an owner too, so that the gate lets both through
    // whichever removal lands first: the database decides.)
    let otto = m.token("acme", "otto", Role::Owner);
    let (a, b) = tokio::join!(
        m.call(Method::DELETE, "/v1/members/otto", &olga, None),
        m.call(Method::DELETE, "/v1/members/olga", &otto, None),
    );
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::CONFLICT],
        "{} / {}",
        a.body,
        b.body
    );
    let owners: Vec<Value> = m.call(Method::GET, "/v1/members", &olga, None).await.body["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "owner")
        .cloned()
        .collect();
    assert_eq!(owners.len(), 1, "{owners:?}");
    // Mia leaves acme.
    let r = m
        .call_in(Method::DELETE, "/v1/membership", &mia, "acme", None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = m
        .call_in(Method::GET, "/v1/members", &mia, "acme", None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    m.stop().await;
}

#[tokio::test]
async fn every_role_a_membership_gives_is_held_to_the_rule_table() {
    let m = Meson::start().await;
    let doc = m.get("/openapi.json").await.body;
    let owner = m.token("rules", "olga", Role::Owner);
    for role in [Role::Viewer, Role::Editor, Role::Manager, Role::Owner] {
        // One organisation per role: each draws on a rate budget of its own.
        let org = format!("rules-{}", role.as_str());
        let olga = m.token(&org, "olga", Role::Owner);
        add(&m, &olga, None, "olga", "owner").await;
        add(&m, &olga, None, "sam", role.as_str()).await;
        // Sam's own token names another organisation, as a viewer.
        let sam = m.token("sams-own", "sam", Role::Viewer);
        let mut tried = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let operation = op["operationId"].as_str().unwrap();
                let rule = rule_of(operation).unwrap_or_else(|| panic!("{operation} has no rule"));
                let Access::Role(needed) = rule.access else {
                    continue;
                };
                // Leaving would end the test's membership.
                if operation == "membership_leave" {
                    continue;
                }
                let url = path
                    .split('/')
                    .map(|seg| match seg {
                        s if s.starts_with('{') => uuid::Uuid::new_v4().to_string(),
                        s => s.to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join("/");
                let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let r = m
                    .call_in(method.clone(), &url, &sam, &org, Some(&json!({})))
                    .await;
                if needed > role {
                    assert_eq!(
                        r.status,
                        StatusCode::FORBIDDEN,
                        "{role:?} {method} {url} needs {needed:?}: {}",
                        r.body
                    );
                } else {
                    assert!(
                        r.status != StatusCode::FORBIDDEN
                            && r.status != StatusCode::UNAUTHORIZED
                            && !r.status.is_server_error(),
                        "{role:?} {method} {url} ({operation}): {} {}",
                        r.status,
                        r.body
                    );
                }
                tried += 1;
            }
        }
        assert!(tried > 100, "{tried} operations tried");
    }
    // Nothing of theirs reached the owner's organisation.
    let r = m.call(Method::GET, "/v1/members", &owner, None).await;
    assert_eq!(r.body["members"], json!([]));
    m.stop().await;
}

#[tokio::test]
async fn an_invitation_is_accepted_only_by_the_subject_it_names() {
    let m = Meson::start().await;
    let olga = m.token("acme", "olga", Role::Owner);
    let invite = |email: &'static str, role: &'static str| {
        let olga = olga.clone();
        let m = &m;
        async move {
            m.call(
                Method::POST,
                "/v1/invitations",
                &olga,
                Some(&json!({"email": email, "role": role})),
            )
            .await
        }
    };
    let r = invite("Bob@Example.com", "editor").await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let token = r.body["token"].as_str().unwrap().to_owned();
    let id = r.body["invitation"]["id"].as_str().unwrap().to_owned();
    assert!(
        token.starts_with("mesoninv_") && token.len() == 49,
        "{token}"
    );
    assert_eq!(r.body["invitation"]["email"], "bob@example.com");
    assert_eq!(r.body["invitation"]["status"], "pending");
    assert_eq!(r.body["invitation"]["organization"], "acme");
    // One open invitation per address.
    let r = invite("bob@example.com", "viewer").await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    // Kept as its hash, never shown again.
    let stored = meson_db::testing::invitation_secret(m.database(), id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(stored, sha2::Sha256::digest(token.as_bytes()).to_vec());
    let r = m.call(Method::GET, "/v1/invitations", &olga, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(!r.body.to_string().contains(&token[9..]), "{}", r.body);
    assert_eq!(r.body["invitations"][0]["id"], id.as_str());

    let accept = |who: String, token: String| {
        let m = &m;
        async move {
            m.call(
                Method::POST,
                "/v1/invitations/accept",
                &who,
                Some(&json!({"token": token})),
            )
            .await
        }
    };
    // Not by another address, an unverified one, or an API token.
    let carol = m.token_with_email("carols", "carol", Role::Owner, "carol@example.com");
    let r = accept(carol, token.clone()).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let unverified = m.token("bobs", "bob", Role::Owner);
    let r = accept(unverified, token.clone()).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = m
        .call(
            Method::POST,
            "/v1/tokens",
            &olga,
            Some(&json!({"name": "ci", "role": "owner"})),
        )
        .await;
    let api_token = r.body["secret"].as_str().unwrap().to_owned();
    let r = accept(api_token, token.clone()).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    // Bad and unknown tokens.
    let bob = m.token_with_email("bobs", "bob", Role::Viewer, "BOB@example.com");
    let r = accept(bob.clone(), "nope".into()).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.rejected_fields(), ["token"]);
    let r = accept(bob.clone(), format!("mesoninv_{}", "x".repeat(40))).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    // Bob, signed in with the address, from any organisation.
    let r = accept(bob.clone(), token.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["member"]["subject"], "bob");
    assert_eq!(r.body["member"]["role"], "editor");
    assert_eq!(r.body["member"]["added_by"], "olga");
    assert_eq!(r.body["invitation"]["status"], "accepted");
    assert_eq!(r.body["invitation"]["accepted_by"], "bob");
    let r = accept(bob.clone(), token.clone()).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = m
        .call_in(Method::POST, "/v1/vms", &bob, "acme", Some(&seed_vm()))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "bob edits acme: {}", r.body);

    // A revoked invitation is accepted by nobody.
    let r = invite("dan@example.com", "viewer").await;
    let dan_token = r.body["token"].as_str().unwrap().to_owned();
    let dan_id = r.body["invitation"]["id"].as_str().unwrap().to_owned();
    // Another organisation's owner cannot see or revoke it.
    let eve = m.token("evil", "eve", Role::Owner);
    for method in [Method::GET, Method::DELETE] {
        let r = m
            .call(
                method.clone(),
                &format!("/v1/invitations/{dan_id}"),
                &eve,
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{method}: {}", r.body);
    }
    let r = m
        .call(
            Method::DELETE,
            &format!("/v1/invitations/{dan_id}"),
            &olga,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["invitation"]["status"], "revoked");
    assert_eq!(r.body["invitation"]["revoked_by"], "olga");
    let r = m
        .call(
            Method::DELETE,
            &format!("/v1/invitations/{dan_id}"),
            &olga,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let dan = m.token_with_email("dans", "dan", Role::Viewer, "dan@example.com");
    let r = accept(dan, dan_token).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["error"]["message"], "the invitation is revoked");
    // A manager invites up to her own role only.
    add(&m, &olga, None, "mia", "manager").await;
    let mia = m.token("acme", "mia", Role::Viewer);
    let r = m
        .call(
            Method::POST,
            "/v1/invitations",
            &mia,
            Some(&json!({"email": "x@example.com", "role": "owner"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = m
        .call(
            Method::POST,
            "/v1/invitations",
            &mia,
            Some(&json!({"email": "x@example.com", "role": "manager"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    m.stop().await;
}

/// What `org` holds and may hold, by quota name: `(current, quota)`.
async fn quota_of(m: &Meson, token: &str, org: &str, name: &str) -> (i64, i64) {
    let r = m.call_in(Method::GET, "/v1/quotas", token, org, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let l = r.body["quota"]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .cloned()
        .unwrap();
    (l["current"].as_i64().unwrap(), l["quota"].as_i64().unwrap())
}

/// The kept usage of `org` is what its resources and its sub-organisations'
/// quotas add up to.
async fn kept_is_recounted(m: &Meson, org: &str) -> meson_core::quota::Resources {
    let tenant = meson_core::TenantId(org.into());
    let pool = &m.dev().pool;
    let (kept, counted) = meson_db::scope::system(async {
        (
            meson_db::quotas::usage(pool, &tenant).await.unwrap(),
            meson_db::quotas::recount(pool, &tenant).await.unwrap(),
        )
    })
    .await;
    assert_eq!(kept, counted, "{org}'s kept usage drifted");
    kept
}

#[tokio::test]
async fn sub_organisations_are_carved_out_of_their_parents_quotas() {
    let m = Meson::start().await;
    let r = m
        .patch(
            "/v1/tenants/acme/quotas",
            &json!({"vms": 5, "vcpus": 16, "nodes": 0, "clusters": 0}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let olga = m.token("acme", "olga", Role::Owner);
    let r = m
        .call(Method::POST, "/v1/vms", &olga, Some(&seed_vm()))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);

    let create = |body: Value| {
        let (m, olga) = (&m, olga.clone());
        async move {
            m.call(Method::POST, "/v1/organizations", &olga, Some(&body))
                .await
        }
    };
    let r = create(json!({"name": "platform",
        "quotas": {"vms": 3, "vcpus": 8, "ram_mib": 65536, "storage_gb": 500}}))
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let org = &r.body["organization"];
    assert_eq!(
        (
            &org["id"],
            &org["parent"],
            &org["quotas"]["vms"],
            &org["quotas"]["images_gb"]
        ),
        (
            &json!("acme.platform"),
            &json!("acme"),
            &json!(3),
            &json!(0)
        )
    );
    // The carve counts as acme's.
    assert_eq!(quota_of(&m, &olga, "acme", "vms").await, (4, 5));
    assert_eq!(kept_is_recounted(&m, "acme").await.vms, 4);
    // What does not fit is refused, each quota named, and nothing is kept.
    let r = create(json!({"name": "data", "quotas": {"vms": 2, "vcpus": 10}})).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_limit_exceeded");
    let names: Vec<&str> = r.body["error"]["details"]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["vms", "vcpus"], "{}", r.body);
    let r = create(json!({"name": "Data"})).await;
    assert_eq!(r.rejected_fields(), ["name"]);
    let r = create(json!({"name": "platform"})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let r = create(json!({"name": "data", "quotas": {"vms": 1}})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(kept_is_recounted(&m, "acme").await.vms, 5);
    // acme itself is full now: its carve binds it.
    let r = m
        .call(Method::POST, "/v1/vms", &olga, Some(&vm_named("second")))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_limit_exceeded");

    // The tree, to every member of acme.
    let r = m.call(Method::GET, "/v1/organizations", &olga, None).await;
    let ids: Vec<&str> = r.body["organizations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["acme", "acme.data", "acme.platform"], "{}", r.body);

    // acme's owner acts in acme.platform at her role; what she makes
    // there is the sub-organisation's, within its own quotas.
    let r = m
        .call_in(
            Method::POST,
            "/v1/vms",
            &olga,
            "acme.platform",
            Some(&seed_vm()),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let action = r.body["action"]["id"].as_str().unwrap().to_owned();
    assert_eq!(quota_of(&m, &olga, "acme.platform", "vms").await, (1, 3));
    assert_eq!(quota_of(&m, &olga, "acme", "vms").await, (5, 5));
    let r = m
        .call(Method::GET, &format!("/v1/vms/{vm}"), &olga, None)
        .await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "not acme's own: {}",
        r.body
    );
    // A cut below what it holds passes; then nothing more fits.
    let r = m
        .call(
            Method::PATCH,
            "/v1/organizations/acme.platform",
            &olga,
            Some(&json!({"quotas": {"vms": 1}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["organization"]["quotas"]["vcpus"], 8);
    assert_eq!(quota_of(&m, &olga, "acme", "vms").await, (3, 5));
    let r = m
        .call_in(
            Method::POST,
            "/v1/vms",
            &olga,
            "acme.platform",
            Some(&vm_named("second")),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    // A rise past the parent's is refused.
    let r = m
        .call(
            Method::PATCH,
            "/v1/organizations/acme.platform",
            &olga,
            Some(&json!({"quotas": {"vms": 4}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    // The sub-organisation does not set its own quotas, nor end itself.
    let r = m
        .call_in(
            Method::PATCH,
            "/v1/organizations/acme.platform",
            &olga,
            "acme.platform",
            Some(&json!({"quotas": {"vms": 3}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);

    // Who may act there: acme's managers (inherited), not its editors;
    // the sub-organisation's own members, not in acme.
    add(&m, &olga, None, "mia", "manager").await;
    add(&m, &olga, None, "ed", "editor").await;
    add(&m, &olga, Some("acme.platform"), "pat", "editor").await;
    let mia = m.token("mias", "mia", Role::Viewer);
    let ed = m.token("eds", "ed", Role::Viewer);
    let pat = m.token("pats", "pat", Role::Viewer);
    let r = m
        .call_in(
            Method::GET,
            &format!("/v1/vms/{vm}"),
            &mia,
            "acme.platform",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = m
        .call_in(Method::GET, "/v1/vms", &ed, "acme.platform", None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = m
        .call_in(
            Method::GET,
            &format!("/v1/vms/{vm}"),
            &pat,
            "acme.platform",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = m.call_in(Method::GET, "/v1/vms", &pat, "acme", None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = m.call(Method::GET, "/v1/membership", &mia, None).await;
    assert_eq!(
        r.body["memberships"],
        json!([
            {"organization": "mias", "role": "viewer", "via": "token"},
            {"organization": "acme", "role": "manager", "via": "member"},
            {"organization": "acme.data", "role": "manager", "via": "inherited"},
            {"organization": "acme.platform", "role": "manager", "via": "inherited"},
        ]),
        "{}",
        r.body
    );
    // Another organisation's owner sees none of it.
    let eve = m.token("evil", "eve", Role::Owner);
    let r = m
        .call(Method::GET, "/v1/organizations/acme.platform", &eve, None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = m
        .call(
            Method::DELETE,
            "/v1/organizations/acme.platform",
            &eve,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

    // Ended only once empty; its quotas return to acme.
    let r = m
        .call(
            Method::DELETE,
            "/v1/organizations/acme.platform",
            &olga,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(
        wait_in(&m, &olga, "acme.platform", &action).await["status"],
        "success"
    );
    let r = m
        .call_in(
            Method::DELETE,
            &format!("/v1/vms/{vm}"),
            &olga,
            "acme.platform",
            None,
        )
        .await;
    assert!(r.status.is_success(), "{}", r.body);
    let gone = wait_in(
        &m,
        &olga,
        "acme.platform",
        r.body["action"]["id"].as_str().unwrap(),
    )
    .await;
    assert_eq!(gone["status"], "success", "{gone}");
    let r = m
        .call(
            Method::DELETE,
            "/v1/organizations/acme.platform",
            &olga,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(quota_of(&m, &olga, "acme", "vms").await, (2, 5));
    assert_eq!(kept_is_recounted(&m, "acme").await.vms, 2);
    // Its members went with it.
    let r = m
        .call_in(Method::GET, "/v1/vms", &pat, "acme.platform", None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = m
        .call(Method::DELETE, "/v1/organizations/acme", &olga, None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    m.stop().await;
}

#[tokio::test]
async fn a_member_is_held_to_limits_of_its_own() {
    let m = Meson::start().await;
    let olga = m.token("acme", "olga", Role::Owner);
    add(&m, &olga, None, "sam", "editor").await;
    let sam = m.token("acme", "sam", Role::Viewer);
    let limit = |body: Value| {
        let (m, olga) = (&m, olga.clone());
        async move {
            m.call(Method::PATCH, "/v1/members/sam", &olga, Some(&body))
                .await
        }
    };
    let r = limit(json!({"limits": {"vms": 1, "vcpus": 4}})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["member"]["limits"],
        json!({"vms": 1, "vcpus": 4, "ram_mib": null})
    );
    assert_eq!(r.body["member"]["role"], "editor", "the role stays");
    let r = limit(json!({"limits": {"vms": -1, "gpus": 2}})).await;
    assert_eq!(r.rejected_fields(), ["limits.gpus", "limits.vms"]);
    // A member does not lift its own limits.
    let r = m
        .call(
            Method::PATCH,
            "/v1/members/sam",
            &sam,
            Some(&json!({"limits": {"vms": null}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);

    let create = |token: String, name: &'static str, networks: Option<&str>| {
        let m = &m;
        let mut body = vm_named(name);
        if let Some(n) = networks {
            body["networks"] = json!([n]);
        }
        async move { m.call(Method::POST, "/v1/vms", &token, Some(&body)).await }
    };
    let r = create(sam.clone(), "s1", None).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let s1 = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let s1_action = r.body["action"]["id"].as_str().unwrap().to_owned();
    let r = create(sam.clone(), "s2", None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "resource_limit_exceeded");
    assert_eq!(
        r.body["error"]["details"]["limits"],
        json!([{"name": "member.vms", "quota": 1, "current": 1}])
    );
    // The transaction's path (a VM on a network) holds it as well.
    let r = m
        .call(
            Method::POST,
            "/v1/networks",
            &olga,
            Some(&json!({"name": "n", "cidr": "10.46.0.0/24"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let net = r.body["network"]["id"].as_str().unwrap().to_owned();
    let r = create(sam.clone(), "s2", Some(&net)).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(
        r.body["error"]["details"]["limits"][0]["name"],
        "member.vms"
    );
    // Another member, and the organisation, are not held to sam's.
    for name in ["o1", "o2"] {
        let r = create(olga.clone(), name, None).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    }

    // At the edge, creates at once: exactly what fits.
    let r = limit(json!({"limits": {"vms": 3, "vcpus": null}})).await;
    assert_eq!(r.body["member"]["limits"]["vcpus"], Value::Null);
    let names = ["p1", "p2", "p3", "p4", "p5", "p6"];
    let answers =
        futures::future::join_all(names.iter().map(|n| create(sam.clone(), n, None))).await;
    let made = answers
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .count();
    assert_eq!(made, 2, "3 fit, 1 was there");
    for r in answers.iter().filter(|r| r.status != StatusCode::CREATED) {
        assert_eq!(
            r.body["error"]["details"]["limits"],
            json!([{"name": "member.vms", "quota": 3, "current": 3}]),
            "{}",
            r.body
        );
    }
    let tenant = meson_core::TenantId("acme".into());
    let (kept, counted) = meson_db::scope::system(meson_db::members::usage_and_recount(
        &m.dev().pool,
        &tenant,
        "sam",
    ))
    .await
    .unwrap();
    assert_eq!(kept, counted, "the kept member usage drifted");
    assert_eq!(kept, [3, 6, 3 * 4096]);

    // A VM gone frees its share.
    wait_in(&m, &olga, "acme", &s1_action).await;
    let r = m
        .call(Method::DELETE, &format!("/v1/vms/{s1}"), &sam, None)
        .await;
    assert!(r.status.is_success(), "{}", r.body);
    wait_in(&m, &olga, "acme", r.body["action"]["id"].as_str().unwrap()).await;
    let r = create(sam.clone(), "s3", None).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    // Lifted, nothing holds it but the organisation's quotas.
    let r = limit(json!({"limits": {"vms": null}})).await;
    assert_eq!(
        r.body["member"]["limits"],
        json!({"vms": null, "vcpus": null, "ram_mib": null})
    );
    let r = create(sam.clone(), "s4", None).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let (kept, counted) = meson_db::scope::system(meson_db::members::usage_and_recount(
        &m.dev().pool,
        &tenant,
        "sam",
    ))
    .await
    .unwrap();
    assert_eq!((kept, counted), ([4, 8, 4 * 4096], [4, 8, 4 * 4096]));
    m.stop().await;
}
