//! `GET /v1/kubernetes-versions`: the supported releases and where each may upgrade to.

use crate::harness::Meson;
use reqwest::StatusCode;
use serde_json::Value;

/// `1.29.2` → (1, 29, 2).
fn parts(v: &Value) -> (u64, u64, u64) {
    let s = v.as_str().unwrap_or_else(|| panic!("{v} is not a string"));
    let n: Vec<u64> = s
        .split('.')
        .map(|p| p.parse().unwrap_or_else(|_| panic!("bad version {s}")))
        .collect();
    assert_eq!(n.len(), 3, "{s}");
    (n[0], n[1], n[2])
}

#[tokio::test]
async fn kubernetes_versions_list_defaults_deprecations_and_upgrades() {
    let m = Meson::start().await;
    let before = meson_core::kubernetes::today();
    let r = m.get("/v1/kubernetes-versions").await;
    let after = meson_core::kubernetes::today();
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let list = r.body["kubernetes_versions"]
        .as_array()
        .expect("kubernetes_versions");
    assert!(list.len() >= 4, "{}", r.body);

    // Oldest first, one default that is not deprecated.
    let versions: Vec<(u64, u64, u64)> = list.iter().map(|v| parts(&v["version"])).collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    let defaults: Vec<&Value> = list.iter().filter(|v| v["default"] == true).collect();
    assert_eq!(defaults.len(), 1, "{}", r.body);
    assert_eq!(defaults[0]["deprecated"], false);
    // The day's default and deprecations, as the catalogue derives them (the
    // server answered on `before` or on `after`, should midnight fall between).
    let derived = |today: chrono::NaiveDate| -> Vec<(String, bool, bool)> {
        meson_core::kubernetes::releases()
            .iter()
            .map(|r| {
                (
                    r.version.to_string(),
                    r.is_default(today),
                    r.is_deprecated(today),
                )
            })
            .collect()
    };
    let got: Vec<(String, bool, bool)> = list
        .iter()
        .map(|v| {
            (
                v["version"].as_str().unwrap_or_default().to_owned(),
                v["default"] == true,
                v["deprecated"] == true,
            )
        })
        .collect();
    assert!(got == derived(before) || got == derived(after), "{got:?}");
    // The lines of the day are offered, and the versions clients already send.
    for minor in ["1.33", "1.34", "1.35", "1.36"] {
        assert!(list.iter().any(|v| v["minor"] == minor), "{minor}");
    }

    for v in list {
        let (maj, min, patch) = parts(&v["version"]);
        assert_eq!(v["minor"], format!("{maj}.{min}"), "{v}");
        assert!(
            v["deprecated"].is_boolean() && v["default"].is_boolean(),
            "{v}"
        );
        let date = |k: &str| {
            v[k].as_str()
                .and_then(|d| d.parse::<chrono::NaiveDate>().ok())
                .unwrap_or_else(|| panic!("{k} of {v}"))
        };
        assert!(date("released") < date("end_of_life"), "{v}");
        // Upgrades: a later patch of the same minor or the next minor, all listed.
        let to = v["upgradable_to"].as_array().expect("upgradable_to");
        for u in to {
            let (umaj, umin, upatch) = parts(u);
            assert!(
                umaj == maj && ((umin == min && upatch > patch) || umin == min + 1),
                "{} -> {u} breaks the upgrade rule",
                v["version"]
            );
        }
        let expected = versions
            .iter()
            .filter(|(a, b, c)| *a == maj && ((*b == min && *c > patch) || *b == min + 1))
            .count();
        assert_eq!(to.len(), expected, "{v}");
    }

    // The seed's version is supported, past end of life.
    let seed = list
        .iter()
        .find(|v| v["version"] == "1.29.2")
        .expect("1.29.2 is supported");
    assert_eq!(seed["deprecated"], true);
    let to: Vec<&str> = seed["upgradable_to"]
        .as_array()
        .expect("upgradable_to")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(to.contains(&"1.29.15") && to.contains(&"1.30.4"), "{to:?}");
    assert!(!to.iter().any(|v| v.starts_with("1.31.")), "{to:?}");

    // Viewers may read it; anonymous callers may not.
    let secret = std::fs::read_to_string(m.data_dir().join("jwt-secret")).expect("jwt secret");
    let auth = meson_api::Auth::hs256(secret.trim().as_bytes(), "meson-test");
    let viewer = auth.issue(
        "dev",
        "val",
        meson_api::Role::Viewer,
        chrono::Duration::minutes(5),
    );
    let url = format!("{}/v1/kubernetes-versions", m.base);
    let r = m
        .http
        .get(&url)
        .bearer_auth(&viewer)
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status(), StatusCode::OK);
    let r = m.http.get(&url).send().await.expect("sent");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    m.stop().await;
}
