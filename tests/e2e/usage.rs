//! Metering over REST: a VM's usage and cost as JSON and CSV, grouped by
//! resource, label and day; the month's statement once it is over; the
//! price list; and what another tenant, an owner and an operator may see.
//! The metering clock is frozen so that every figure is exact.

use crate::harness::{Meson, seed_vm};
use chrono::{DateTime, TimeDelta, Utc};
use meson_api::Role;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn at(m: &Meson, t: DateTime<Utc>) {
    meson_db::testing::freeze_clock(m.database(), t)
        .await
        .unwrap();
}

async fn get(m: &Meson, path: &str, token: &str) -> crate::harness::Reply {
    m.call(Method::GET, path, token, None).await
}

fn lines(body: &Value) -> &Vec<Value> {
    body["lines"].as_array().unwrap()
}

#[tokio::test]
async fn usage_statements_and_prices_answer_exact_figures_to_whom_they_belong() {
    let m = Meson::start().await;
    let owner = m.token("dev", "olga", Role::Owner);
    let viewer = m.token("dev", "vic", Role::Viewer);
    let rival = m.token("rival", "eve", Role::Owner);
    let admin = m.token("ops", "root", Role::Admin);

    // A VM labelled team=web runs from June 10th, 00:00 for two hours.
    let t0: DateTime<Utc> = "2027-06-10T00:00:00Z".parse().unwrap();
    at(&m, t0).await;
    let mut body = seed_vm();
    body["labels"] = json!({"team": "web"});
    body["provider"] = "ovh".into();
    let r = m.call(Method::POST, "/v1/vms", &owner, Some(&body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let vm = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let made = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(made["status"], "success", "{made}");
    let r = get(&m, &format!("/v1/vms/{vm}"), &owner).await;
    let hourly = r.body["vm"]["price"]["hourly"].as_f64().expect("a price");
    assert!(hourly > 0.0, "{}", r.body);
    // An image of it and a backup, kept from t0 on as well.
    let mut stored = Vec::new();
    for (path, body, key) in [
        ("create-image", json!({"name": "golden"}), "image"),
        ("backup", json!({}), "backup"),
    ] {
        let r = m
            .call(
                Method::POST,
                &format!("/v1/vms/{vm}/actions/{path}"),
                &owner,
                Some(&body),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let done = m
            .wait_action(r.body["action"]["id"].as_str().unwrap())
            .await;
        assert_eq!(done["status"], "success", "{done}");
        let id = r.body[key]["id"].as_str().unwrap().to_owned();
        let r = get(&m, &format!("/v1/{key}s/{id}"), &owner).await;
        stored.push((key, id, r.body[key]["size"].as_i64().unwrap()));
    }
    at(&m, t0 + TimeDelta::hours(2)).await;

    // This month so far (the default), by resource: the VM's two hours at
    // its quote, its disks' GB-hours at the price list's.
    let r = get(&m, "/v1/usage", &viewer).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["from"], "2027-06-01T00:00:00Z");
    assert_eq!(r.body["to"], "2027-06-10T02:00:00Z");
    assert_eq!(r.body["group_by"], "resource");
    let line = lines(&r.body)
        .iter()
        .find(|l| l["group"] == vm.as_str())
        .unwrap_or_else(|| panic!("the VM's line: {}", r.body));
    assert_eq!(line["meter"], "vm");
    assert_eq!(line["unit"], "hour");
    assert_eq!(line["quantity"], "2.000000");
    let cost: f64 = line["cost"].as_str().unwrap().parse().unwrap();
    assert!((cost - 2.0 * hourly).abs() < 1e-9, "{line} at {hourly}");
    assert_eq!(line["name"], body["specs"]["vm_name"]);
    let disks: Vec<&Value> = lines(&r.body)
        .iter()
        .filter(|l| l["meter"] == "volume")
        .collect();
    assert!(!disks.is_empty(), "{}", r.body);
    assert!(disks.iter().all(|l| l["unit"] == "GB-hour"), "{disks:?}");
    // The image and the backup: two hours of their GB at the price list's
    // 0.00003 a GB-hour.
    for (meter, id, gb) in &stored {
        let line = lines(&r.body)
            .iter()
            .find(|l| l["group"] == id.as_str())
            .unwrap_or_else(|| panic!("the {meter}'s line: {}", r.body));
        assert_eq!(line["meter"], *meter);
        assert_eq!(line["quantity"], format!("{}.000000", 2 * gb), "{line}");
        let cost: f64 = line["cost"].as_str().unwrap().parse().unwrap();
        assert!((cost - 2.0 * *gb as f64 * 0.00003).abs() < 1e-9, "{line}");
    }
    let totals = r.body["totals"].as_array().unwrap();
    assert_eq!(totals.len(), 1, "{}", r.body);
    assert_eq!(totals[0]["currency"], "EUR");
    let total: f64 = totals[0]["amount"].as_str().unwrap().parse().unwrap();
    let sum: f64 = lines(&r.body)
        .iter()
        .map(|l| l["cost"].as_str().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!((total - sum).abs() < 0.006, "{total} vs {sum}");

    // Each tenant's cost this month is a gauge (read when scraped).
    let metrics = m
        .http
        .get(format!("{}/metrics", m.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("meson_tenant_month_cost{tenant=\"dev\",currency=\"EUR\"}")
            || metrics.contains("meson_tenant_month_cost{currency=\"EUR\",tenant=\"dev\"}"),
        "{metrics}"
    );

    // By label and by day.
    let r = get(&m, "/v1/usage?group_by=label:team", &owner).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let web = lines(&r.body).iter().find(|l| l["meter"] == "vm").unwrap();
    assert_eq!(web["group"], "web", "{}", r.body);
    assert!(web.get("name").is_none(), "{web}");
    let r = get(
        &m,
        "/v1/usage?group_by=day&from=2027-06-09T00:00:00Z",
        &owner,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(
        lines(&r.body).iter().all(|l| l["group"] == "2027-06-10"),
        "{}",
        r.body
    );
    assert_eq!(r.body["totals"], json!(totals), "the same total by day");

    // CSV, by parameter or by Accept.
    for (path, accept) in [
        ("/v1/usage?format=csv", "application/json"),
        ("/v1/usage", "text/csv"),
    ] {
        let res = m
            .http
            .get(format!("{}{path}", m.base))
            .bearer_auth(&owner)
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(
            res.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/csv")
        );
        let text = res.text().await.unwrap();
        let mut rows = text.lines();
        assert_eq!(
            rows.next(),
            Some("tenant,group,name,meter,unit,quantity,cost,currency")
        );
        assert!(
            rows.any(
                |row| row.starts_with(&format!("dev,{vm},")) && row.contains(",vm,hour,2.000000,")
            ),
            "{text}"
        );
    }

    // Bad parameters are named.
    for (query, field) in [
        ("group_by=week", "group_by"),
        ("group_by=label:", "group_by"),
        ("from=yesterday", "from"),
        ("from=2027-06-10T00:00:00Z&to=2027-06-01T00:00:00Z", "to"),
        ("from=2020-01-01T00:00:00Z&to=2027-01-01T00:00:00Z", "to"),
        ("format=xml", "format"),
        ("tenant=a%00b", "tenant"),
        ("group_by=label:a%00", "group_by"),
    ] {
        let r = get(&m, &format!("/v1/usage?{query}"), &owner).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}: {}", r.body);
        assert_eq!(r.rejected_fields(), [field], "{query}: {}", r.body);
    }

    // Another tenant sees none of it, and may not ask for it.
    let r = get(&m, "/v1/usage", &rival).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(lines(&r.body).is_empty(), "{}", r.body);
    assert!(!r.body.to_string().contains(&vm));
    let r = get(&m, "/v1/usage?tenant=dev", &rival).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    // An operator sees every tenant's, or the one it names.
    let r = get(&m, "/v1/usage?group_by=tenant", &admin).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(
        lines(&r.body).iter().any(|l| l["group"] == "dev"),
        "{}",
        r.body
    );
    let r = get(&m, "/v1/usage?tenant=dev", &admin).await;
    assert_eq!(r.body["totals"], json!(totals), "{}", r.body);

    // The running month is a statement already; June's closes after June.
    let r = get(&m, "/v1/statements", &owner).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let current = &r.body["statements"][0];
    assert_eq!(current["id"], "current");
    assert_eq!(current["status"], "open");
    assert_eq!(current["total"], totals[0]["amount"]);
    let r = get(&m, "/v1/statements/current", &owner).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(
        r.body["statement"]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["resource_id"] == vm.as_str()),
        "{}",
        r.body
    );
    // The VM is deleted at 06:00; July begins.
    at(&m, t0 + TimeDelta::hours(6)).await;
    let r = m
        .call(Method::DELETE, &format!("/v1/vms/{vm}"), &owner, None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let gone = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(gone["status"], "success", "{gone}");
    at(&m, "2027-07-01T01:00:00Z".parse().unwrap()).await;
    meson_db::usage::close_statements(m.database(), std::time::Duration::from_secs(600))
        .await
        .unwrap();
    let r = get(&m, "/v1/statements", &owner).await;
    let june = r.body["statements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "closed")
        .cloned()
        .unwrap_or_else(|| panic!("June's statement: {}", r.body));
    assert_eq!(june["period_start"], "2027-06-01T00:00:00Z");
    assert_eq!(june["period_end"], "2027-07-01T00:00:00Z");
    let id = june["id"].as_str().unwrap();
    let r = get(&m, &format!("/v1/statements/{id}"), &viewer).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let vm_line = r.body["statement"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["resource_id"] == vm.as_str())
        .cloned()
        .unwrap();
    assert_eq!(vm_line["quantity"], "6.000000", "six hours: {vm_line}");
    let r = get(&m, &format!("/v1/statements/{id}?format=csv"), &owner).await;
    let text = r.body.as_str().unwrap();
    assert!(text.starts_with("period_start,meter,resource_id"), "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .ends_with(&format!(",{},EUR", june["total"].as_str().unwrap())),
        "{text}"
    );
    // Not the rival's; an operator's when named.
    let r = get(&m, &format!("/v1/statements/{id}"), &rival).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = get(&m, "/v1/statements?tenant=dev", &admin).await;
    assert!(r.body.to_string().contains(id), "{}", r.body);
    let r = get(&m, &format!("/v1/statements/{id}?tenant=rival"), &admin).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let r = get(&m, "/v1/statements/not-an-id", &owner).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

    // The price list: four meters; only operators add to it, and only from
    // now on.
    let r = get(&m, "/v1/prices", &viewer).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let meters: std::collections::BTreeSet<&str> = r.body["prices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["meter"].as_str().unwrap())
        .collect();
    assert_eq!(
        meters.into_iter().collect::<Vec<_>>(),
        ["backup", "cluster", "image", "volume"]
    );
    let price = json!({"meter": "image", "unit_price": "0.00004", "currency": "EUR"});
    let r = m
        .call(Method::POST, "/v1/admin/prices", &owner, Some(&price))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = m
        .call(Method::POST, "/v1/admin/prices", &admin, Some(&price))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["price"]["effective_from"], "2027-07-01T01:00:00Z");
    assert_eq!(r.body["price"]["unit"], "GB-hour");
    let r = m
        .call(
            Method::POST,
            "/v1/admin/prices",
            &admin,
            Some(&json!({"meter": "vm", "unit_price": "-1", "currency": "euro", "x": 1})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.rejected_fields(), ["currency", "meter", "unit_price"]);
    let r = m
        .call(
            Method::POST,
            "/v1/admin/prices",
            &admin,
            Some(
                &json!({"meter": "image", "unit_price": "1", "currency": "EUR",
                         "effective_from": "2027-06-15T00:00:00Z"}),
            ),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::CONFLICT,
        "the past keeps its prices: {}",
        r.body
    );
}

/// A decimal string as an exact number of 10⁻¹² units.
fn pico(s: &str) -> i128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let frac = format!("{frac:0<12}");
    int.parse::<i128>().unwrap() * 1_000_000_000_000 + frac[..12].parse::<i128>().unwrap()
}

#[tokio::test]
async fn a_scaled_cluster_is_billed_its_fee_and_its_nodes_to_the_cent() {
    let m = Meson::start().await;
    let t0: DateTime<Utc> = "2027-08-01T00:00:00Z".parse().unwrap();
    let day = |d: i64| t0 + TimeDelta::days(d);
    // cost × 3600 in 10⁻¹² units: quantity × price × seconds.
    let mut ledger: i128 = 0;
    let mut add = |qty: i128, price: &str, from: DateTime<Utc>, to: DateTime<Utc>| {
        ledger += qty * pico(price) * i128::from((to - from).num_seconds());
    };
    let volume_price = "0.00006";
    let cluster_fee = "0.05";

    // Day 0: a cluster with one worker.
    at(&m, t0).await;
    let mut kaas = crate::harness::seed_kaas();
    kaas["req"]["nodepool"][0]["desired_nodes"] = 1.into();
    kaas["req"]["nodepool"][0]["min_nodes"] = 1.into();
    let cluster = m.running_cluster(&kaas).await;
    let cid: uuid::Uuid = cluster.parse().unwrap();
    let first = meson_db::testing::cluster_vm_prices(m.database(), cid)
        .await
        .unwrap();
    assert_eq!(
        first.len(),
        2,
        "a control plane node and a worker: {first:?}"
    );

    // Day 1: the pool grows to two workers.
    at(&m, day(1)).await;
    let c = m.cluster(&cluster).await;
    let pool = c["pools"][0]["id"].as_str().unwrap();
    let r = m
        .patch(
            &format!("/v1/clusters/{cluster}/pools/{pool}"),
            &json!({"desired_nodes": 2}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let scaled = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            std::time::Duration::from_secs(60),
        )
        .await;
    assert_eq!(scaled["status"], "success", "{scaled}");
    let all = meson_db::testing::cluster_vm_prices(m.database(), cid)
        .await
        .unwrap();
    assert_eq!(all.len(), 3, "{all:?}");

    // Day 3: the cluster is deleted.
    at(&m, day(3)).await;
    let r = m.delete(&format!("/v1/clusters/{cluster}")).await;
    assert!(r.status.is_success(), "{}", r.body);
    let gone = m
        .wait_action_for(
            r.body["action"]["id"].as_str().unwrap(),
            std::time::Duration::from_secs(60),
        )
        .await;
    assert_eq!(gone["status"], "success", "{gone}");

    // The test's own reckoning: the fee for three days, each node VM and
    // its disks from when it ran.
    add(1, cluster_fee, t0, day(3));
    for (id, price, disk) in &all {
        let since = if first.iter().any(|(f, _, _)| f == id) {
            t0
        } else {
            day(1)
        };
        add(1, price, since, day(3));
        add(i128::from(*disk), volume_price, since, day(3));
    }
    let per_cent = 3600 * 10_000_000_000i128;
    let cents = (ledger + per_cent / 2) / per_cent;
    let expected = format!("{}.{:02}", cents / 100, cents % 100);

    at(&m, "2027-09-01T01:00:00Z".parse().unwrap()).await;
    meson_db::usage::close_statements(m.database(), std::time::Duration::from_secs(600))
        .await
        .unwrap();
    let r = m.get("/v1/statements?tenant=dev").await;
    let august = r.body["statements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["period_start"] == "2027-08-01T00:00:00Z")
        .cloned()
        .unwrap_or_else(|| panic!("August's statement: {}", r.body));
    assert_eq!(august["total"], expected.as_str(), "{august}");
    let r = m
        .get(&format!(
            "/v1/statements/{}",
            august["id"].as_str().unwrap()
        ))
        .await;
    let lines = r.body["statement"]["lines"].as_array().unwrap();
    let fee = lines
        .iter()
        .find(|l| l["meter"] == "cluster")
        .unwrap_or_else(|| panic!("the cluster's fee: {}", r.body));
    assert_eq!(fee["quantity"], "72.000000");
    assert_eq!(fee["cost"], "3.600000");
    // Its nodes' lines name it.
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["meter"] == "vm" && l["cluster_id"] == cluster.as_str())
            .count(),
        3,
        "{}",
        r.body
    );
}
