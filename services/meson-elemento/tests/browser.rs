//! A real browser (headless Chromium, from Debian's `chromium` package)
//! against `mesond dev`'s Elemento gateway. A page of another site tries
//! what a malicious page would: a simple `text/plain` POST, reading the
//! daemons' answers and a kubeconfig, an `<img>` that logs the user in as
//! someone else, a logout; a page loaded through a rebound DNS name tries to
//! read the daemons as its own origin. All fail and nothing changes. A page
//! of an allowed origin (as Electros' are) creates a volume and reads the
//! list, through the browser's real CORS preflight.
//!
//! Skipped, saying so, where Chromium is not installed, unless
//! `MESON_REQUIRE_CHROMIUM=1` (CI installs it and sets that).

#[path = "../../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::Meson;
use meson_elemento::Daemon;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// The browser, or `None` (the test is skipped) when it is not installed
/// and not required.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("MESON_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("MESON_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
        "MESON_REQUIRE_CHROMIUM=1 but {} does not exist (Debian: apt-get install chromium)",
        path.display()
    );
    eprintln!(
        "SKIPPED: no Chromium at {} (Debian: apt-get install chromium; MESON_CHROMIUM names \
         another): the browser test did not run",
        path.display()
    );
    None
}

/// Loads `url` in a fresh headless Chromium and returns the page's text
/// once its scripts are done (`--dump-dom`, virtual time: the fetches
/// finish before the budget runs out).
async fn browse(chromium: &PathBuf, url: &str, resolver_rules: Option<&str>) -> String {
    let profile =
        std::env::temp_dir().join(format!("meson-chromium-{}", uuid::Uuid::new_v4().simple()));
    let mut cmd = tokio::process::Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--virtual-time-budget=10000",
        "--dump-dom",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    if let Some(rules) = resolver_rules {
        cmd.arg(format!("--host-resolver-rules={rules}"));
    }
    cmd.arg(url).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("Chromium answers within 2 minutes")
        .expect("Chromium runs");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "Chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The JSON a page wrote after `RESULT `.
fn result(dom: &str) -> Value {
    let start = dom
        .find("RESULT ")
        .unwrap_or_else(|| panic!("the page wrote no result: {dom}"))
        + "RESULT ".len();
    let end = dom[start..].find('<').map_or(dom.len(), |e| start + e);
    let text = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Serves `pages` (path → HTML) on `listener`.
fn serve(
    listener: std::net::TcpListener,
    pages: Vec<(&'static str, String)>,
) -> tokio::task::JoinHandle<()> {
    let mut router = axum::Router::new();
    for (path, html) in pages {
        router = router.route(
            path,
            axum::routing::get(move || {
                let html = html.clone();
                async move { axum::response::Html(html) }
            }),
        );
    }
    listener.set_nonblocking(true).unwrap();
    let l = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(l, router).await;
    })
}

/// A page that runs `body` (an async function body filling `out`) and
/// writes `RESULT <out as JSON>`.
fn page(body: &str) -> String {
    format!(
        r#"<!doctype html><html><body>running<script>
(async () => {{
  const out = {{}};
  const attempt = async (name, f) => {{
    try {{ out[name] = await f(); }} catch (e) {{ out[name] = 'blocked: ' + e.message; }}
  }};
  const img = (src) => new Promise((done) => {{
    const i = new Image(); i.onload = () => done('loaded'); i.onerror = () => done('error'); i.src = src;
  }});
  {body}
  document.body.textContent = 'RESULT ' + JSON.stringify(out);
}})();
</script></body></html>"#
    )
}

fn daemon(m: &Meson, d: Daemon) -> String {
    let gw = m.dev().elemento.as_ref().expect("the gateway runs");
    format!("http://{}{}", gw.addr(d).expect("listening"), d.base())
}

async fn session_user(m: &Meson) -> Value {
    let r = reqwest::get(format!("{}/status", daemon(m, Daemon::Auth)))
        .await
        .unwrap();
    r.json::<Value>().await.unwrap()["username"].clone()
}

fn blocked(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.starts_with("blocked"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_site_fails_and_an_allowed_origin_succeeds() {
    let Some(chromium) = chromium() else { return };
    // The pages' server, bound first: the allowed origin names its port.
    let pages = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = pages.local_addr().unwrap().port();
    let allowed = format!("http://localhost:{port}");
    let m = Meson::start_with(|o| {
        o.elemento = Some(meson_elemento::Config {
            allowed_origins: vec![allowed.clone()],
            ..meson_elemento::Config::new("http://set-by-dev").any_ports()
        });
    })
    .await;
    assert_eq!(session_user(&m).await, "dev");
    let mallory = m.token("mallory", "mallory", meson_api::Role::Editor);
    let storage = daemon(&m, Daemon::Storage);
    let compute = daemon(&m, Daemon::Compute);
    let auth = daemon(&m, Daemon::Auth);
    let service = daemon(&m, Daemon::Service);
    let volume = |name: &str| {
        format!(
            r#"JSON.stringify({{name: '{name}', size: 1, private: true, shareable: false, bootable: false, readonly: false}})"#
        )
    };
    let attack = page(&format!(
        r#"
  await attempt('simple_post', async () => (await fetch('{storage}/create', {{method: 'POST', mode: 'no-cors',
      headers: {{'Content-Type': 'text/plain'}}, body: {pwned}}})).type);
  await attempt('json_post', async () => (await fetch('{storage}/create', {{method: 'POST',
      headers: {{'Content-Type': 'application/json'}}, body: {pwned}}})).status);
  await attempt('read_vms', async () => (await fetch('{compute}/status')).status);
  await attempt('read_clusters', async () => (await fetch('{service}/kaas/running')).status);
  out.img_login = await img('{auth}/login?username=mallory&password={mallory}');
  await attempt('logout', async () => (await fetch('{auth}/logout', {{method: 'POST', mode: 'no-cors'}})).type);
"#,
        pwned = volume("pwned"),
    ));
    let electros = page(&format!(
        r#"
  await attempt('create', async () => (await fetch('{storage}/create', {{method: 'POST',
      credentials: 'include', headers: {{'Content-Type': 'application/json'}}, body: {mine}}})).status);
  await attempt('list', async () => {{
    const r = await fetch('{storage}/accessible', {{credentials: 'include'}});
    return (await r.json()).map((v) => v.name);
  }});
"#,
        mine = volume("from-electros"),
    ));
    let server = serve(
        pages,
        vec![("/attack.html", attack), ("/electros.html", electros)],
    );

    // The attacker's page: from another site (attacker.test), then from
    // another origin of the same site (127.0.0.1, another port: there the
    // `<img>` carries no Origin and no cross-site mark, and reaches /login).
    for (url, rules) in [
        (
            format!("http://attacker.test:{port}/attack.html"),
            Some("MAP attacker.test 127.0.0.1"),
        ),
        (format!("http://127.0.0.1:{port}/attack.html"), None),
    ] {
        let out = result(&browse(&chromium, &url, rules).await);
        // The browser read nothing, and the daemons did nothing.
        for key in ["json_post", "read_vms", "read_clusters"] {
            assert!(blocked(&out[key]), "{url}: {key}: {out}");
        }
        assert_eq!(out["img_login"], "error", "{url}: {out}");
        assert_eq!(
            m.get("/v1/volumes").await.body["volumes"],
            serde_json::json!([]),
            "{url} created nothing: {out}"
        );
        assert_eq!(
            session_user(&m).await,
            "dev",
            "{url}: still the user's session: {out}"
        );
        let theirs = m
            .call(reqwest::Method::GET, "/v1/volumes", &mallory, None)
            .await;
        assert_eq!(theirs.body["volumes"], serde_json::json!([]));
    }

    // DNS rebinding: the attacker's name now resolves to 127.0.0.1 and the
    // page comes from the daemon's own port, so reading the daemon would be
    // same-origin. The daemon refuses the name before anything runs.
    let gw = m.dev().elemento.as_ref().unwrap();
    let compute_port = gw.addr(Daemon::Compute).unwrap().port();
    let dom = browse(
        &chromium,
        &format!(
            "http://rebind.test:{compute_port}{}/status",
            Daemon::Compute.base()
        ),
        Some("MAP rebind.test 127.0.0.1"),
    )
    .await;
    assert!(dom.contains("rebind.test"), "the refusal names it: {dom}");
    assert!(dom.contains("does not answer to the name"), "{dom}");

    // Electros' page (an allowed origin): the browser's preflight passes,
    // the volume is made in the user's tenant and the list is readable.
    let out = result(&browse(&chromium, &format!("{allowed}/electros.html"), None).await);
    assert_eq!(out["create"], 200, "{out}");
    assert_eq!(out["list"], serde_json::json!(["from-electros"]), "{out}");
    let mine = m.get("/v1/volumes").await.body["volumes"].clone();
    assert_eq!(mine[0]["name"], "from-electros", "{mine}");
    server.abort();
    m.stop().await;
}
