//! Keyset pagination: walking a list by `next_cursor` while its rows come
//! and go, over REST and gRPC, and the cursors a list refuses.

use crate::grpc::{authed, channel, refused};
use crate::harness::{Meson, Reply, seed_vm};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use meson_api::Role;
use meson_proto::meson::v1 as pb;
use pb::vm_service_client::VmServiceClient;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashSet;
use tonic::Code;
use tonic_types::StatusExt;

/// Creates a VM named `name`; its id.
async fn create(m: &Meson, name: &str) -> String {
    let mut body = seed_vm();
    body["specs"]["vm_name"] = json!(name);
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.body["vm"]["id"].as_str().expect("id").to_owned()
}

/// A page's VMs as (id, name).
fn rows(r: &Reply) -> Vec<(String, String)> {
    r.body["vms"]
        .as_array()
        .expect("vms")
        .iter()
        .map(|v| {
            (
                v["id"].as_str().expect("id").to_owned(),
                v["name"].as_str().expect("name").to_owned(),
            )
        })
        .collect()
}

fn next_cursor(r: &Reply) -> Option<String> {
    r.body["meta"]["pagination"]["next_cursor"]
        .as_str()
        .map(str::to_owned)
}

/// The `rel="next"` target of a list's `Link` header.
fn next_link(r: &Reply) -> Option<String> {
    let link = r.headers.get("link")?.to_str().expect("link");
    link.split(", ").find_map(|l| {
        l.strip_suffix("; rel=\"next\"")
            .map(|t| t.trim_start_matches('<').trim_end_matches('>').to_owned())
    })
}

/// Walks `/v1/vms?{query}` by cursor, `per_page` at a time, calling `churn`
/// with the page number between pages; every row seen, in order.
async fn walk(
    m: &Meson,
    query: &str,
    per_page: u32,
    mut churn: impl AsyncFnMut(usize),
) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let mut r = m.get(&format!("/v1/vms?{query}&per_page={per_page}")).await;
    for page in 1.. {
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let got = rows(&r);
        assert!(got.len() <= per_page as usize);
        seen.extend(got);
        let Some(cursor) = next_cursor(&r) else {
            assert_eq!(next_link(&r), None, "no next link on the last page");
            return seen;
        };
        // The Link header's next page is the cursor's, filters kept.
        let link = next_link(&r).expect("a next link");
        assert!(link.starts_with("/v1/vms?"), "{link}");
        assert!(link.contains(&format!("cursor={cursor}")), "{link}");
        for kept in query.split('&').filter(|q| !q.is_empty()) {
            assert!(link.contains(kept), "{kept} not kept in {link}");
        }
        churn(page).await;
        r = m.get(&link).await;
        assert_eq!(
            r.body["meta"]["pagination"]["page"],
            page + 1,
            "the page number is counted along"
        );
    }
    unreachable!()
}

/// Every row once, and every row that stayed throughout among them.
fn check_walk(seen: &[(String, String)], stayed: &[(String, String)]) {
    let ids: HashSet<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), seen.len(), "a row came twice: {seen:?}");
    for (id, name) in stayed {
        assert!(ids.contains(id.as_str()), "{name} was skipped");
    }
}

#[tokio::test]
async fn walking_by_cursor_while_vms_come_and_go_neither_repeats_nor_skips() {
    let m = Meson::start().await;
    let mut initial = Vec::new();
    for i in 0..24 {
        let name = format!("m-{i:02}");
        initial.push((create(&m, &name).await, name));
    }
    // A VM is deleted only once its create has ended (meanwhile it is
    // locked by that action, and a delete answers 423).
    for (id, _) in &initial {
        let actions = m.get(&format!("/v1/vms/{id}/actions")).await;
        for a in actions.body["actions"].as_array().expect("actions") {
            let done = m.wait_action(a["id"].as_str().expect("action id")).await;
            assert_eq!(done["status"], "success", "{done}");
        }
    }
    // Every third VM goes while the lists are walked; the others stay.
    let (doomed, stayed): (Vec<_>, Vec<_>) = initial
        .iter()
        .cloned()
        .enumerate()
        .partition(|(i, _)| i % 3 == 0);
    let doomed: Vec<(String, String)> = doomed.into_iter().map(|(_, v)| v).collect();
    let stayed: Vec<(String, String)> = stayed.into_iter().map(|(_, v)| v).collect();

    // Each walk orders differently (by keys that do not change: a VM's
    // status would move it in its list while it is walked); new names land
    // before and after wherever the walk is ("a-…" sorts before "m-…", "z-…"
    // after).
    let mut created = 0;
    let mut gone = doomed.iter();
    for (query, order) in [
        ("", "id"),
        ("sort=name%3Adesc", "name:desc"),
        ("sort=created%3Adesc", "created:desc"),
        ("label_selector=%21missing&sort=name", "name"),
    ] {
        let seen = walk(&m, query, 5, async |_| {
            let prefix = if created % 2 == 0 { "a" } else { "z" };
            create(&m, &format!("{prefix}-{created:02}")).await;
            created += 1;
            if let Some((id, _)) = gone.next() {
                let r = m.delete(&format!("/v1/vms/{id}")).await;
                assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            }
        })
        .await;
        check_walk(&seen, &stayed);
        match order {
            "id" => assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}"),
            "name:desc" => assert!(seen.windows(2).all(|w| w[0].1 > w[1].1), "{seen:?}"),
            "name" => assert!(seen.windows(2).all(|w| w[0].1 < w[1].1), "{seen:?}"),
            _ => {}
        }
    }
    assert!(created >= 8, "the walks crossed pages: {created}");

    // Rows inserted and deleted concurrently with the walk (not between
    // its pages only).
    let more: Vec<String> = (0..10).map(|i| format!("c-{i:02}")).collect();
    let churn = async {
        for name in &more {
            create(&m, name).await;
            tokio::task::yield_now().await;
        }
    };
    let (seen, ()) = tokio::join!(walk(&m, "sort=name", 3, async |_| {}), churn);
    let now = walk(&m, "sort=name", 50, async |_| {}).await;
    let stayed_now: Vec<(String, String)> = now
        .into_iter()
        .filter(|(_, name)| !more.contains(name))
        .collect();
    check_walk(&seen, &stayed_now);
    assert!(seen.windows(2).all(|w| w[0].1 < w[1].1), "{seen:?}");
    m.stop().await;
}

/// The first field an `invalid_input` answer names.
fn field(r: &Reply) -> String {
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    r.body["error"]["details"]["fields"][0]["name"]
        .as_str()
        .expect("a field")
        .to_owned()
}

#[tokio::test]
async fn a_cursor_is_refused_with_a_page_or_when_malformed_or_foreign() {
    let m = Meson::start().await;
    for name in ["a", "b", "c"] {
        create(&m, name).await;
    }
    let first = m.get("/v1/vms?per_page=1&sort=name").await;
    let cursor = next_cursor(&first).expect("more pages");
    // Taken back with the same filters and sort; per_page may change.
    let r = m
        .get(&format!("/v1/vms?sort=name&per_page=5&cursor={cursor}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        rows(&r).iter().map(|(_, n)| n.as_str()).collect::<Vec<_>>(),
        ["b", "c"]
    );
    assert_eq!(next_cursor(&r), None);
    let p = &r.body["meta"]["pagination"];
    assert_eq!(
        (p["total_entries"].as_u64(), p["page"].as_u64()),
        (Some(3), Some(1))
    );

    // page and cursor together: the page is refused.
    let r = m
        .get(&format!("/v1/vms?sort=name&page=2&cursor={cursor}"))
        .await;
    assert_eq!(field(&r), "page");

    // Malformed: not base64, not a cursor inside, empty.
    for bad in ["%21%21%21", "e30", "bm90IGpzb24", ""] {
        let r = m.get(&format!("/v1/vms?sort=name&cursor={bad}")).await;
        assert_eq!(field(&r), "cursor", "{bad}");
    }
    // A cursor whose keys were altered: refused, never a server error.
    let mut inner: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&cursor).expect("base64url")).expect("json");
    for keys in [json!(["a"]), json!(["a", "not-an-id"]), json!([1, 2])] {
        inner["k"] = keys.clone();
        let forged = URL_SAFE_NO_PAD.encode(inner.to_string());
        let r = m.get(&format!("/v1/vms?sort=name&cursor={forged}")).await;
        assert_eq!(field(&r), "cursor", "{keys}");
    }

    // Foreign: another sort, another filter, another list, another tenant.
    for path in [
        format!("/v1/vms?cursor={cursor}"),
        format!("/v1/vms?sort=name:desc&cursor={cursor}"),
        format!("/v1/vms?sort=name&name=a&cursor={cursor}"),
        format!("/v1/networks?sort=name&cursor={cursor}"),
        format!("/v1/clusters?sort=name&cursor={cursor}"),
        format!("/v1/volumes?cursor={cursor}"),
    ] {
        assert_eq!(field(&m.get(&path).await), "cursor", "{path}");
    }
    let other = m.token("acme", "eve", Role::Admin);
    let r = m
        .call(
            reqwest::Method::GET,
            &format!("/v1/vms?sort=name&cursor={cursor}"),
            &other,
            None,
        )
        .await;
    assert_eq!(field(&r), "cursor");

    // Lists that page by number only say so.
    let vm = rows(&first)[0].0.clone();
    let r = m
        .get(&format!("/v1/vms/{vm}/actions?cursor={cursor}"))
        .await;
    assert_eq!(field(&r), "cursor");

    // gRPC: the same walk and the same refusals.
    let mut vms = VmServiceClient::new(channel(&m).await);
    let list = |cursor: &str, page: u32| pb::ListVmsRequest {
        options: Some(pb::ListOptions {
            page: Some(pb::PageRequest {
                page,
                per_page: 2,
                cursor: cursor.to_owned(),
            }),
            sort: vec!["name:desc".into()],
            ..Default::default()
        }),
    };
    let mut names = Vec::new();
    let mut next = String::new();
    loop {
        let r = vms
            .list_vms(authed(list(&next, 0), &m.token))
            .await
            .expect("ListVms")
            .into_inner();
        names.extend(r.vms.into_iter().map(|v| v.name));
        match r.pagination.and_then(|p| p.next_cursor) {
            Some(c) => next = c,
            None => break,
        }
    }
    assert_eq!(names, ["c", "b", "a"]);
    for req in [list(&cursor, 0), list("!!!", 0), list(&cursor, 2)] {
        let e = refused(vms.list_vms(authed(req, &m.token)), Code::InvalidArgument).await;
        let details = e.get_error_details();
        let fields: Vec<&str> = details
            .bad_request()
            .expect("BadRequest")
            .field_violations
            .iter()
            .map(|f| f.field.as_str())
            .collect();
        assert!(
            fields == ["cursor"] || fields == ["page"],
            "{fields:?}: {e:?}"
        );
    }
    m.stop().await;
}
