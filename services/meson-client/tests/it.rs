//! The SDK against a real meson: typed calls, retries, and the waiter on
//! quick, slow, failing, vanished and cancelled actions, streamed or polled.

#[path = "../../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{Meson, seed_vm};
use meson_client::{Client, Error, RetryPolicy, WaitOpts};
use meson_types::requests::VmCreateRequest;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

fn client(m: &Meson) -> Client {
    Client::new(&m.base, &m.token)
        .unwrap()
        .with_retry(RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(50),
            cap: Duration::from_millis(500),
        })
}

fn vm(name: &str) -> VmCreateRequest {
    let mut v = seed_vm();
    v["specs"]["vm_name"] = name.into();
    serde_json::from_value(v).expect("the seed VM is a typed request")
}

/// Every state the waiter reported: id, status, progress.
type Seen = Arc<Mutex<Vec<(Uuid, String, u8)>>>;

/// Options recording every state the waiter reports.
fn recording(stream: bool) -> (WaitOpts, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let opts = WaitOpts {
        poll: Duration::from_millis(50),
        poll_cap: Duration::from_millis(200),
        stream,
        on_update: Some(Box::new(move |a: &meson_types::Action| {
            log.lock()
                .unwrap()
                .push((a.id, a.status.clone(), a.progress));
        })),
        ..WaitOpts::default()
    };
    (opts, seen)
}

#[tokio::test]
async fn creates_are_waited_on_streamed_or_polled_and_read_back_typed() {
    let m = Meson::start().await;
    let c = client(&m);
    for (name, stream) in [("streamed", true), ("polled", false)] {
        let created = c.vm_create(&vm(name)).await.unwrap();
        assert_eq!(created.vm.status, "initializing");
        let (opts, seen) = recording(stream);
        let done = c
            .wait_for_with(&[created.action.id], opts, std::future::pending())
            .await
            .unwrap();
        assert_eq!(done.len(), 1);
        assert_eq!(
            (done[0].status.as_str(), done[0].progress),
            ("success", 100)
        );
        let seen = seen.lock().unwrap().clone();
        assert!(seen.len() >= 2, "{name}: {seen:?}");
        assert!(
            seen.windows(2).all(|w| w[0].2 <= w[1].2),
            "{name}: {seen:?}"
        );
        assert_eq!(c.vm_get(created.vm.id).await.unwrap().status, "running");
    }
    let list = c.vm_list(Default::default()).await.unwrap();
    assert_eq!(list.vms.len(), 2);
    assert!(!c.flavors().await.unwrap().is_empty());
    assert!(!c.providers().await.unwrap().is_empty());

    // Many at once: one wait, in batches, in the order asked.
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            c.vm_delete(list.vms[i % 2].id)
                .await
                .map(|a| a.id)
                .or_else(|e| {
                    // The second delete of the same VM is locked by the first.
                    assert_eq!(e.code(), Some("locked"), "{e}");
                    Ok::<_, Error>(Uuid::nil())
                })
                .unwrap(),
        );
    }
    ids.retain(|id| !id.is_nil());
    let done = c.wait_for(&ids).await.unwrap();
    assert_eq!(done.iter().map(|a| a.id).collect::<Vec<_>>(), ids);
    assert!(done.iter().all(|a| a.status == "success"));
    m.stop().await;
}

#[tokio::test]
async fn a_slow_action_is_waited_on_with_polls_backing_off() {
    let m = Meson::start().await;
    m.set_boot_time(Duration::from_secs(3));
    let c = client(&m);
    let created = c.vm_create(&vm("slow")).await.unwrap();
    let (opts, seen) = recording(false);
    let started = std::time::Instant::now();
    let done = c
        .wait_for_with(&[created.action.id], opts, std::future::pending())
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(done[0].status, "success");
    // Polled all along: ~50 ms at first, then backing off to 200 ms; not
    // hundreds of polls.
    let polls = seen.lock().unwrap().len();
    assert!((10..=80).contains(&polls), "{polls} polls");
    m.stop().await;
}

#[tokio::test]
async fn a_failing_action_ends_the_wait_naming_it() {
    let m = Meson::start().await;
    for h in m
        .sim()
        .hosts()
        .iter()
        .filter(|h| h.name().starts_with("ionos"))
    {
        m.fault(h.name(), &json!({"full": true})).await;
    }
    let c = client(&m);
    let created = c.vm_create(&vm("doomed")).await.unwrap();
    for stream in [true, false] {
        let (opts, _) = recording(stream);
        let err = c
            .wait_for_with(&[created.action.id], opts, std::future::pending())
            .await
            .unwrap_err();
        let Error::ActionFailed { action } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(action.id, created.action.id);
        assert_eq!(action.error.as_ref().unwrap().code, "resource_unavailable");
        let text = err.to_string();
        assert!(
            text.contains("resource_unavailable") && text.contains(&created.action.id.to_string()),
            "{text}"
        );
    }
    m.stop().await;
}

#[tokio::test]
async fn vanished_actions_and_cancelled_waits_say_which() {
    let m = Meson::start().await;
    let c = client(&m);
    // An id meson does not know (or another tenant's): not found, not a hang.
    let ghost = Uuid::new_v4();
    let created = c.vm_create(&vm("real")).await.unwrap();
    let err = c.wait_for(&[created.action.id, ghost]).await.unwrap_err();
    let Error::ActionsNotFound(ids) = err else {
        panic!("{err:?}")
    };
    assert_eq!(ids, vec![ghost]);
    let other = Client::new(&m.base, &m.token("acme", "eve", meson_api::Role::Admin)).unwrap();
    let err = other.wait_for(&[created.action.id]).await.unwrap_err();
    assert!(matches!(err, Error::ActionsNotFound(_)), "{err:?}");

    // Cancelled while running: the error names what still runs.
    m.set_boot_time(Duration::from_secs(5));
    let slow = c.vm_create(&vm("slow")).await.unwrap();
    for stream in [true, false] {
        let err = c
            .wait_for_with(
                &[slow.action.id],
                WaitOpts {
                    stream,
                    ..WaitOpts::default()
                },
                tokio::time::sleep(Duration::from_millis(300)),
            )
            .await
            .unwrap_err();
        let Error::Cancelled { running } = err else {
            panic!("{err:?}")
        };
        assert_eq!(running, vec![slow.action.id]);
    }
    m.stop().await;
}

#[tokio::test]
async fn retryable_errors_are_retried_and_the_rest_are_not() {
    let m = Meson::start_with(|o| {
        o.api.rate_limits = meson_api::ratelimit::RateLimitConfig {
            api_per_minute: 60,
            polling_per_minute: 1000,
        };
    })
    .await;
    let c = client(&m);
    // A tenant over its budget: the client waits Retry-After and goes on.
    for _ in 0..60 {
        c.flavors().await.unwrap();
    }
    let started = std::time::Instant::now();
    c.flavors().await.expect("retried after Retry-After");
    assert!(started.elapsed() >= Duration::from_millis(900));
    // Not retried: bad input answers at once, with the field.
    let err = c.vm_create(&VmCreateRequest::default()).await.unwrap_err();
    let Error::Api {
        status,
        code,
        details,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((*status, code.as_str()), (400, "invalid_input"));
    assert!(details.fields.as_ref().is_some_and(|f| !f.is_empty()));
    // Unreachable: a transport error.
    let dead = Client::new("http://127.0.0.1:9", "t")
        .unwrap()
        .with_retry(RetryPolicy {
            max_retries: 1,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(10),
        });
    assert!(matches!(dead.flavors().await, Err(Error::Transport(_))));
    m.stop().await;
}

/// A stand-in server that answers `409 conflict` (an idempotent create still
/// running elsewhere) then `201`, recording each request's key: the client
/// retries the create with the same `Idempotency-Key`.
#[tokio::test]
async fn a_retried_create_carries_the_same_idempotency_key() {
    let keys: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let seen = keys.clone();
    let keys_seen = keys.clone();
    let app = axum::Router::new().route(
        "/v1/vms",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let seen = seen.clone();
            async move {
                let mut k = seen.lock().unwrap();
                k.push(
                    headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned),
                );
                if k.len() == 1 {
                    return (
                        axum::http::StatusCode::CONFLICT,
                        axum::Json(json!({"error": {"code": "conflict",
                            "message": meson_types::error::IDEMPOTENCY_KEY_IN_USE,
                            "details": {}}})),
                    );
                }
                if k.len() == 3 {
                    // Any other conflict is final.
                    return (
                        axum::http::StatusCode::CONFLICT,
                        axum::Json(json!({"error": {"code": "conflict",
                            "message": "VM x is off: start it first", "details": {}}})),
                    );
                }
                (
                    axum::http::StatusCode::LOCKED,
                    axum::Json(json!({"error": {"code": "locked",
                        "message": "locked", "details": {"action_id": Uuid::nil()}}})),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let c = Client::new(&base, "token")
        .unwrap()
        .with_retry(RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(20),
        });
    let err = c.vm_create(&vm("x")).await.unwrap_err();
    // 409 retried once; `locked` answered as it is, not retried.
    assert_eq!(err.code(), Some("locked"));
    let keys = keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys[0].is_some());
    assert_eq!(keys[0], keys[1]);
    // Another create gets another key; its conflict is not retried.
    let err = c.vm_create(&vm("y")).await.unwrap_err();
    assert_eq!(err.code(), Some("conflict"));
    assert_eq!(keys_seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn standalone_volumes_are_created_attached_and_deleted_typed() {
    use meson_client::VolumeFilter;
    use meson_types::requests::NameLabelsUpdate;
    use meson_types::volume::VolumeCreateRequest;
    let m = Meson::start().await;
    let c = client(&m);
    let created = c
        .volume_create(&VolumeCreateRequest {
            name: "data".into(),
            size: 10,
            provider: Some("ionos".into()),
            bootable: Some(false),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(created.volume.status, "creating");
    c.wait_for(&[created.action.id]).await.unwrap();
    let id = created.volume.id;
    let v = c.volume_get(id).await.unwrap();
    assert_eq!((v.status.as_str(), v.standalone), ("available", true));
    let v = c
        .volume_update(
            id,
            &NameLabelsUpdate {
                name: Some("data-2".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(v.name, "data-2");

    let vm = c
        .vm_create(&vm("with-data").attach_volumes(&[id]))
        .await
        .unwrap();
    assert!(vm.vm.volumes.iter().any(|v| v.id == id && v.standalone));
    c.wait_for(&[vm.action.id]).await.unwrap();
    let attached = c
        .volume_list(
            Default::default(),
            &VolumeFilter {
                standalone: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(attached.volumes.len(), 1);
    assert_eq!(attached.volumes[0].attached_to, Some(vm.vm.id));
    let all = c
        .volume_list(Default::default(), &Default::default())
        .await
        .unwrap();
    assert_eq!(all.volumes.len(), 4);
    // Attached: refused, and not retried.
    let e = c.volume_delete(id).await.unwrap_err();
    assert_eq!(e.code(), Some("conflict"));

    let del = c.vm_delete(vm.vm.id).await.unwrap();
    c.wait_for(&[del.id]).await.unwrap();
    assert_eq!(c.volume_get(id).await.unwrap().status, "available");
    let del = c.volume_delete(id).await.unwrap();
    assert_eq!(del.command, "delete_volume");
    c.wait_for(&[del.id]).await.unwrap();
    assert_eq!(
        c.volume_get(id).await.unwrap_err().code(),
        Some("not_found")
    );
    m.stop().await;
}

#[tokio::test]
async fn updates_pools_and_the_version_catalogue_are_typed() {
    use meson_types::cluster::ClusterUpdateRequest;
    use meson_types::kaas::{KaasCreateRequest, NodePoolRequest};
    use meson_types::network::NetworkCreateRequest;
    use meson_types::pool::NodePoolUpdateRequest;
    use meson_types::requests::NameLabelsUpdate;
    let m = Meson::start().await;
    let c = client(&m);
    let labels = |k: &str, v: &str| [(k.to_owned(), v.to_owned())].into();

    // Renames and relabels: VMs and networks.
    let created = c.vm_create(&vm("old")).await.unwrap();
    c.wait_for(&[created.action.id]).await.unwrap();
    let renamed = c
        .vm_update(
            created.vm.id,
            &NameLabelsUpdate {
                name: Some("new".into()),
                labels: Some(labels("env", "dev")),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (renamed.name.as_str(), renamed.labels["env"].as_str()),
        ("new", "dev")
    );
    let net = c
        .network_create(&NetworkCreateRequest {
            name: "backend".into(),
            cidr: "10.20.0.0/24".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let relabelled = c
        .network_update(
            net.id,
            &NameLabelsUpdate {
                name: None,
                labels: Some(labels("tier", "db")),
            },
        )
        .await
        .unwrap();
    assert_eq!(relabelled.labels["tier"], "db");
    assert_eq!(relabelled.name, "backend");

    // A cluster: its policy, a second pool grown and deleted.
    let req: KaasCreateRequest = serde_json::from_value(harness::seed_kaas_one_worker()).unwrap();
    let cluster = c.cluster_create(&req).await.unwrap();
    c.wait_for(&[cluster.action.id]).await.unwrap();
    let id = cluster.cluster.id;
    let updated = c
        .cluster_update(
            id,
            &ClusterUpdateRequest {
                labels: None,
                update_policy: Some("patch_update".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(updated.update_policy, "PATCH_UPDATE");
    let pool = c
        .pool_create(
            id,
            &NodePoolRequest {
                pool_name: "extra".into(),
                desired_nodes: Some(1),
                max_nodes: Some(3),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    c.wait_for(&[pool.action.id]).await.unwrap();
    let grown = c
        .pool_update(
            id,
            pool.pool.id,
            &NodePoolUpdateRequest {
                desired_nodes: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    c.wait_for(&[grown.action.expect("a resize").id])
        .await
        .unwrap();
    let got = c.pool_get(id, pool.pool.id).await.unwrap();
    assert_eq!((got.desired_nodes, got.current_nodes), (2, 2));
    let gone = c.pool_delete(id, pool.pool.id).await.unwrap();
    c.wait_for(&[gone.id]).await.unwrap();
    assert_eq!(
        c.pool_get(id, pool.pool.id).await.unwrap_err().code(),
        Some("not_found")
    );

    let versions = c.kubernetes_versions().await.unwrap();
    assert_eq!(versions.iter().filter(|v| v.default).count(), 1);
    m.stop().await;
}

#[tokio::test]
async fn members_and_invitations_are_typed_and_a_client_acts_in_another_organisation() {
    use meson_types::member::{InvitationCreateRequest, MemberCreateRequest, MemberUpdateRequest};
    let m = Meson::start().await;
    let owner = client(&m)
        .with_token(&m.token("dev", "olga", meson_api::Role::Owner))
        .unwrap();

    // A subject with `|` in it: one path segment, escaped.
    let made = owner
        .member_create(&MemberCreateRequest {
            subject: "auth0|ann".into(),
            role: "editor".into(),
            email: Some("ann@example.com".into()),
        })
        .await
        .unwrap();
    assert_eq!(
        (made.member.subject.as_str(), made.member.added_by.as_str()),
        ("auth0|ann", "olga")
    );
    assert!(made.warnings.is_empty());
    assert_eq!(owner.member_get("auth0|ann").await.unwrap(), made.member);
    let err = owner
        .member_create(&MemberCreateRequest {
            subject: "auth0|ann".into(),
            role: "viewer".into(),
            email: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("uniqueness_error"), "{err:?}");
    let promoted = owner
        .member_update(
            "auth0|ann",
            &MemberUpdateRequest {
                role: Some("manager".into()),
                limits: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(promoted.member.role, "manager");
    assert_eq!(
        owner.member_list().await.unwrap(),
        std::slice::from_ref(&promoted.member)
    );
    let err = owner.member_get("../tokens").await.unwrap_err();
    assert_eq!(err.code(), Some("not_found"), "{err:?}");

    // Ann, whose token names her own organisation, acts in `dev` through
    // `organization`, at her role there; the header rides on every call.
    let ann = client(&m)
        .with_token(&m.token("ann-co", "auth0|ann", meson_api::Role::Owner))
        .unwrap();
    assert!(ann.member_list().await.unwrap().is_empty());
    let mine = ann.memberships().await.unwrap();
    assert_eq!(mine.subject, "auth0|ann");
    let orgs: Vec<(&str, &str, &str)> = mine
        .memberships
        .iter()
        .map(|o| (o.organization.as_str(), o.role.as_str(), o.via.as_str()))
        .collect();
    assert_eq!(
        orgs,
        [("ann-co", "owner", "token"), ("dev", "manager", "member")]
    );
    let in_dev = ann.organization("dev");
    assert_eq!(in_dev.acting_in(), Some("dev"));
    assert_eq!(in_dev.organization("").acting_in(), None);
    assert_eq!(in_dev.member_list().await.unwrap(), [promoted.member]);
    let vm = in_dev.vm_create(&vm("anns")).await.unwrap();
    assert_eq!(owner.vm_get(vm.vm.id).await.unwrap().id, vm.vm.id);
    let err = ann.organization("nowhere").member_list().await.unwrap_err();
    assert_eq!(err.code(), Some("forbidden"), "{err:?}");
    let err = ann.organization("a\nb").member_list().await.unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err:?}");

    // Invitations: made by the manager in `dev`, listed, read, revoked.
    let invited = in_dev
        .invitation_create(&InvitationCreateRequest {
            email: "bob@example.com".into(),
            role: "editor".into(),
            expires_in: None,
        })
        .await
        .unwrap();
    assert!(invited.token.starts_with("mesoninv_"), "{invited:?}");
    assert_eq!(
        (
            invited.invitation.organization.as_str(),
            invited.invitation.status.as_str(),
            invited.invitation.invited_by.as_str()
        ),
        ("dev", "pending", "auth0|ann")
    );
    let id = invited.invitation.id;
    assert_eq!(owner.invitation_get(id).await.unwrap(), invited.invitation);
    assert_eq!(
        owner.invitation_list().await.unwrap(),
        std::slice::from_ref(&invited.invitation)
    );
    let revoked = owner.invitation_delete(id).await.unwrap();
    assert_eq!(
        (revoked.status.as_str(), revoked.revoked_by.as_deref()),
        ("revoked", Some("olga"))
    );
    let err = owner.invitation_delete(id).await.unwrap_err();
    assert_eq!(err.code(), Some("conflict"), "{err:?}");

    // Accepted by the invitee, signed in with that verified address.
    let invited = owner
        .invitation_create(&InvitationCreateRequest {
            email: "bob@example.com".into(),
            role: "viewer".into(),
            expires_in: Some(3_600),
        })
        .await
        .unwrap();
    let bob = client(&m)
        .with_token(&m.token_with_email(
            "bob-co",
            "auth0|bob",
            meson_api::Role::Owner,
            "bob@example.com",
        ))
        .unwrap();
    let accepted = bob.invitation_accept(&invited.token).await.unwrap();
    assert_eq!(accepted.invitation.status, "accepted");
    assert_eq!(
        (
            accepted.member.subject.as_str(),
            accepted.member.role.as_str()
        ),
        ("auth0|bob", "viewer")
    );

    // Ann leaves `dev`; the member she was. Bob is removed by the owner.
    let left = in_dev.membership_leave().await.unwrap();
    assert_eq!(left.subject, "auth0|ann");
    let err = in_dev.member_list().await.unwrap_err();
    assert_eq!(err.code(), Some("forbidden"), "{err:?}");
    assert_eq!(
        owner.member_delete("auth0|bob").await.unwrap().subject,
        "auth0|bob"
    );
    assert!(owner.member_list().await.unwrap().is_empty());
    m.stop().await;
}
