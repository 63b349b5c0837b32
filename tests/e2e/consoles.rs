//! Consoles: a real VNC client (vncdotool from PyPI, unmodified, through
//! the SDK's TCP-to-WebSocket bridge) captures a VM's screen through meson,
//! pixel for pixel what the host's own console shows; a console serves one
//! connection, within its minute, with its password, of its tenant; and a
//! session is audited, counted, ended by a delete or by idleness.

use crate::backups::running_vm;
use crate::harness::Meson;
use crate::reconciler::workflow_env;
use atomos_driver::{AtomosClient, ClientOptions};
use futures::{SinkExt, StreamExt};
use meson_api::Role;
use meson_api::console::rfb::{Leg, vnc_response};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The console tests take turns: `meson_console_sessions` is the
/// process's, and each test reads it as its own sessions' count.
static TURNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// vncdotool's `vncdo`, installed once by `tests/vnc/setup`.
fn vncdo() -> PathBuf {
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("vnc/setup");
    let out = std::process::Command::new(&setup)
        .output()
        .expect("running tests/vnc/setup");
    assert!(
        out.status.success(),
        "tests/vnc/setup failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Requests a console on `vm`: (console, wss_url, password).
async fn request(m: &Meson, vm: &str) -> (Value, String, String) {
    let r = m
        .post(&format!("/v1/vms/{vm}/actions/request-console"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    (
        r.body["console"].clone(),
        r.body["wss_url"].as_str().unwrap().to_owned(),
        r.body["password"].as_str().unwrap().to_owned(),
    )
}

async fn console(m: &Meson, id: &str) -> Value {
    let r = m.get(&format!("/v1/consoles/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["console"].clone()
}

/// Runs `vncdo capture` against `url` through the SDK's bridge: whether it
/// succeeded, and what it said.
async fn capture(vncdo: &Path, url: &str, password: Option<&str>, png: &Path) -> (bool, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = url.to_owned();
    let bridge = tokio::spawn(async move { meson_client::console_bridge(listener, &url).await });
    let mut cmd = tokio::process::Command::new(vncdo);
    cmd.args(["-s", &format!("127.0.0.1::{port}"), "-t", "20"]);
    if let Some(p) = password {
        cmd.args(["-p", p]);
    }
    cmd.arg("capture").arg(png).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(40), cmd.output())
        .await
        .expect("vncdo ends")
        .expect("vncdo runs");
    let bridged = tokio::time::timeout(Duration::from_secs(10), bridge)
        .await
        .expect("the bridge ends with the session")
        .unwrap();
    let said = format!(
        "{}{}; bridge: {bridged:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// A PNG's size and RGB pixels.
fn pixels(png: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks_exact(step)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    (info.width, info.height, px)
}

/// The VM's own console on its host, with no meson in between.
async fn host_console_url(m: &Meson, vm: &Value) -> String {
    let (host, prefix) = m.vm_host(vm);
    let atomos = host
        .inventory()
        .vms
        .into_iter()
        .find(|v| v.name.starts_with(&prefix))
        .expect("the VM on its host");
    let client = AtomosClient::new(host.target().clone(), ClientOptions::default()).unwrap();
    client.console_open(&atomos.id).await.unwrap().ws_url
}

/// A WebSocket to `url` with extra headers; the HTTP refusal's status if
/// it is refused.
async fn dial(
    url: &str,
    headers: &[(&str, &str)],
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    (u16, String),
> {
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            reqwest::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            reqwest::header::HeaderValue::from_str(v).unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => Err((
            res.status().as_u16(),
            String::from_utf8_lossy(res.body().as_deref().unwrap_or_default()).into_owned(),
        )),
        Err(e) => panic!("dialling {url}: {e}"),
    }
}

/// The refusal of a WebSocket to `url`: (status, body).
async fn refused(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    match dial(url, headers).await {
        Ok(_) => panic!("{url} was not refused"),
        Err(e) => e,
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A minimal VNC client's handshake over `url` with `password`, through
/// ServerInit: the session's leg and the screen's (width, height, name).
async fn vnc_session(
    url: &str,
    password: &str,
) -> (
    Leg<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    (u16, u16, String),
) {
    let ws: Ws = dial(url, &[]).await.expect("the console's WebSocket");
    let mut leg = Leg::new(ws);
    assert_eq!(leg.read_exact(12).await.unwrap(), b"RFB 003.008\n");
    leg.write(b"RFB 003.008\n".to_vec()).await.unwrap();
    assert_eq!(
        leg.read_exact(2).await.unwrap(),
        [1, 2],
        "VNC authentication only"
    );
    leg.write(vec![2]).await.unwrap();
    let challenge: [u8; 16] = leg.read_exact(16).await.unwrap().try_into().unwrap();
    leg.write(vnc_response(password, &challenge).to_vec())
        .await
        .unwrap();
    assert_eq!(
        leg.read_exact(4).await.unwrap(),
        [0, 0, 0, 0],
        "security result ok"
    );
    leg.write(vec![1]).await.unwrap(); // ClientInit, shared
    let init = leg.read_exact(24).await.unwrap();
    let width = u16::from_be_bytes([init[0], init[1]]);
    let height = u16::from_be_bytes([init[2], init[3]]);
    let len = u32::from_be_bytes([init[20], init[21], init[22], init[23]]) as usize;
    let name = String::from_utf8(leg.read_exact(len).await.unwrap()).unwrap();
    (leg, (width, height, name))
}

/// Waits for the leg's WebSocket to be closed by meson; the close reason.
async fn closed_by_meson(
    leg: &mut Leg<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    within: Duration,
) -> String {
    tokio::time::timeout(within, async {
        loop {
            match leg.ws.next().await {
                Some(Ok(Message::Close(frame))) => {
                    return frame.map(|f| f.reason.to_string()).unwrap_or_default();
                }
                None | Some(Err(_)) => return String::new(),
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .expect("meson closes the session")
}

async fn until_status(m: &Meson, id: &str, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let c = console(m, id).await;
        if c["status"] == status {
            return c;
        }
        assert!(tokio::time::Instant::now() < deadline, "console {id}: {c}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_real_vnc_client_sees_the_vms_screen_through_meson_once() {
    let _turn = TURNS.lock().await;
    let vncdo = vncdo();
    let m = Meson::start().await;
    let vm = running_vm(&m).await;
    let vm_id = vm["id"].as_str().unwrap().to_owned();
    let dir = tempfile_dir();

    // The host's own console, for reference: no password.
    let direct = host_console_url(&m, &vm).await;
    let (ok, said) = capture(&vncdo, &direct, None, &dir.join("direct.png")).await;
    assert!(ok, "{said}");

    // Through meson: the URL is on meson, the password is meson's.
    let (c, url, password) = request(&m, &vm_id).await;
    let id = c["id"].as_str().unwrap().to_owned();
    assert_eq!(c["status"], "requested");
    assert_eq!(c["vm"], vm_id.as_str());
    assert!(
        url.starts_with(&format!(
            "{}/v1/consoles/{id}/websocket?token=",
            m.base.replace("http://", "ws://")
        )),
        "{url}"
    );
    assert_eq!(password.len(), 8);
    let shot = dir.join("meson.png");
    let (ok, said) = capture(&vncdo, &url, Some(&password), &shot).await;
    assert!(ok, "{said}");
    let (w, h, through) = pixels(&shot);
    assert_eq!((w, h), (640, 200), "the simulator's screen");
    let (_, _, reference) = pixels(&dir.join("direct.png"));
    assert!(
        through == reference,
        "meson relays the host's screen unchanged"
    );
    // Not a blank frame: a background and the text on it.
    let background = through[0];
    let text = through.iter().filter(|p| **p != background).count();
    assert!(
        text > 500 && text < through.len() / 2,
        "{text} of {} pixels differ from the background",
        through.len()
    );

    // The session is over: recorded closed, with what it carried.
    let c = until_status(&m, &id, "closed").await;
    assert!(c["opened"].is_string() && c["closed"].is_string(), "{c}");
    assert!(c["bytes_out"].as_i64().unwrap() >= 640 * 200, "{c}");
    assert!(c["bytes_in"].as_i64().unwrap() > 0, "{c}");
    assert_eq!(c["close_reason"], "the client closed it", "{c}");
    assert!(
        c.get("password").is_none() && c.get("wss_url").is_none(),
        "{c}"
    );

    // Used: a second connection is refused at the WebSocket handshake, and
    // the real client through the bridge gets nothing.
    let (status, body) = refused(&url, &[]).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("closed"), "{body}");
    let (ok, said) = capture(&vncdo, &url, Some(&password), &dir.join("again.png")).await;
    assert!(!ok, "a used console: {said}");

    // A wrong password uses the console up too.
    let (c, url, _) = request(&m, &vm_id).await;
    let (ok, said) = capture(&vncdo, &url, Some("wrong123"), &dir.join("wrong.png")).await;
    assert!(!ok, "a wrong password: {said}");
    let c = until_status(&m, c["id"].as_str().unwrap(), "closed").await;
    assert_eq!(c["close_reason"], "wrong password", "{c}");

    // Expired: past its minute (the database's clock moved for it).
    let (c, url, password) = request(&m, &vm_id).await;
    let cid: uuid::Uuid = c["id"].as_str().unwrap().parse().unwrap();
    meson_db::testing::expire_console(m.database(), cid)
        .await
        .unwrap();
    assert_eq!(console(&m, &cid.to_string()).await["status"], "expired");
    let (status, body) = refused(&url, &[]).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("expired"), "{body}");
    let (ok, said) = capture(&vncdo, &url, Some(&password), &dir.join("late.png")).await;
    assert!(!ok, "an expired console: {said}");

    // Across tenants: not found, and the console is still there for its own.
    let other = m.token("other-tenant", "mallory", Role::Editor);
    let r = m
        .call(
            Method::POST,
            &format!("/v1/vms/{vm_id}/actions/request-console"),
            &other,
            Some(&json!({})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    let (c, url, password) = request(&m, &vm_id).await;
    let cid = c["id"].as_str().unwrap().to_owned();
    let bearer = format!("Bearer {other}");
    let (status, _) = refused(&url, &[("authorization", &bearer)]).await;
    assert_eq!(status, 404);
    let r = m
        .call(Method::GET, &format!("/v1/consoles/{cid}"), &other, None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // A page of another site cannot open it either.
    let (status, _) = refused(&url, &[("origin", "https://evil.example")]).await;
    assert_eq!(status, 403);
    // Without a token, or with a wrong one: not found.
    let (status, _) = refused(url.split('?').next().unwrap(), &[]).await;
    assert_eq!(status, 404);
    assert_eq!(console(&m, &cid).await["status"], "requested");
    let own = format!("Bearer {}", m.token);
    let ws = dial(&url, &[("authorization", &own)]).await;
    assert!(ws.is_ok(), "its own tenant's token is welcome");
    drop(ws);
    let _ = password;

    // A VM that is off has no console to give.
    let r = m
        .post(&format!("/v1/vms/{vm_id}/actions/poweroff"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    m.wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    let r = m
        .post(
            &format!("/v1/vms/{vm_id}/actions/request-console"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);

    // Every session, begun or refused, and its end, in the audit log.
    let r = m.get("/v1/audit?operation=console_connect").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let statuses: Vec<i64> = r.body["audit_entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_i64().unwrap())
        .collect();
    assert!(
        statuses.contains(&101) && statuses.contains(&401),
        "{statuses:?}"
    );
    let r = m.get("/v1/audit?operation=console_disconnect").await;
    assert!(
        !r.body["audit_entries"].as_array().unwrap().is_empty(),
        "{}",
        r.body
    );

    // The list: newest first, by VM and status.
    let r = m
        .get(&format!("/v1/consoles?vm={vm_id}&status=closed,expired"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let listed = r.body["consoles"].as_array().unwrap();
    assert!(listed.len() >= 3, "{}", r.body);
    let r = m.get("/v1/consoles?status=nonsense").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.rejected_fields(), ["status"]);
    m.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn sessions_are_counted_ended_by_a_delete_and_closed_when_idle() {
    let _turn = TURNS.lock().await;
    let m = Meson::start_with(|o| o.api.console.idle = Duration::from_secs(2)).await;
    let vm = running_vm(&m).await;
    let vm_id = vm["id"].as_str().unwrap().to_owned();
    let vm_name = vm["name"].as_str().unwrap().to_owned();

    // A session, counted while it is open.
    let (c, url, password) = request(&m, &vm_id).await;
    let id = c["id"].as_str().unwrap().to_owned();
    let (mut leg, (w, h, name)) = vnc_session(&url, &password).await;
    assert_eq!((w, h), (640, 200));
    assert!(!name.is_empty());
    let _ = vm_name;
    until_status(&m, &id, "open").await;
    let metrics = m.get("/metrics").await;
    let text = metrics.body.as_str().unwrap_or_default().to_owned();
    assert!(text.contains("meson_console_sessions 1"), "{text}");

    // Input keeps it open past the idle limit; deleting it ends it.
    for _ in 0..3 {
        // A pointer event.
        leg.write(vec![5, 0, 0, 10, 0, 10]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(900)).await;
    }
    let r = m.delete(&format!("/v1/consoles/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["console"]["status"], "closed");
    // Keep sending input so that only the delete can end it.
    let ended = tokio::time::timeout(Duration::from_secs(12), async {
        loop {
            tokio::select! {
                m = leg.ws.next() => match m {
                    Some(Ok(Message::Close(f))) => return f.map(|f| f.reason.to_string()),
                    None | Some(Err(_)) => return None,
                    Some(Ok(_)) => {}
                },
                _ = tokio::time::sleep(Duration::from_millis(500)) => {
                    let _ = leg.ws.send(Message::Binary(vec![5, 0, 0, 11, 0, 11].into())).await;
                }
            }
        }
    })
    .await
    .expect("the delete ends the session within a heartbeat");
    assert_eq!(ended.as_deref(), Some("deleted"));
    let c = console(&m, &id).await;
    assert_eq!(c["close_reason"], "ended by dev", "{c}");
    let r = m.delete(&format!("/v1/consoles/{id}")).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    let metrics = m.get("/metrics").await;
    assert!(
        metrics
            .body
            .as_str()
            .unwrap_or_default()
            .contains("meson_console_sessions 0"),
        "{}",
        metrics.body
    );

    // A viewer that only asks for updates is idle: closed after 2 s.
    let (c, url, password) = request(&m, &vm_id).await;
    let (mut leg, _) = vnc_session(&url, &password).await;
    leg.write(vec![3, 1, 0, 0, 0, 0, 2, 128, 0, 200])
        .await
        .unwrap();
    let reason = closed_by_meson(&mut leg, Duration::from_secs(10)).await;
    assert_eq!(reason, "no input for 2 s");
    let c = until_status(&m, c["id"].as_str().unwrap(), "closed").await;
    assert_eq!(c["close_reason"], "no input for 2 s");
    assert!(c["bytes_out"].as_i64().unwrap() > 0, "{c}");

    // An unused console deleted is revoked: its URL no longer connects.
    let (c, url, _) = request(&m, &vm_id).await;
    let r = m
        .delete(&format!("/v1/consoles/{}", c["id"].as_str().unwrap()))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["console"]["status"], "revoked");
    let (status, _) = refused(&url, &[]).await;
    assert_eq!(status, 409);

    // A session whose relay stopped (its process gone) reads closed once
    // its heartbeats are 30 s old, and the sweep writes it so.
    let (c, url, password) = request(&m, &vm_id).await;
    let (leg, _) = vnc_session(&url, &password).await;
    drop(leg);
    let cid: uuid::Uuid = c["id"].as_str().unwrap().parse().unwrap();
    until_status(&m, &cid.to_string(), "closed").await;
    meson_db::testing::orphan_console(m.database(), cid)
        .await
        .unwrap();
    let c = console(&m, &cid.to_string()).await;
    assert_eq!(
        (c["status"].as_str(), c["close_reason"].as_str()),
        (
            Some("closed"),
            Some("the meson process relaying it stopped")
        )
    );
    assert!(c["closed"].is_null(), "not written yet: {c}");
    // The reconciler's pass writes it (and forgets expired passwords).
    let env = workflow_env(&m, Default::default());
    meson_workflows::reconcile::tick(&env).await.unwrap();
    let c = console(&m, &cid.to_string()).await;
    assert_eq!(c["status"], "closed");
    assert!(c["closed"].is_string(), "written by the sweep: {c}");
    m.stop().await;
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("meson-console-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
