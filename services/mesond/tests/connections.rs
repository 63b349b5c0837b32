//! What slow, idle and too many clients get, over real sockets: a request
//! head that does not arrive in time, a trickled one (slowloris), an idle
//! kept-alive connection and a gRPC connection that never speaks are each
//! closed; past the connection cap a connection is answered 503 and closed;
//! shutdown cuts a connection holding half a request after the drain period.
//!
//! Each wait is bounded far beyond the limit it checks: they tell "closed"
//! from "never closed", not how fast.

use meson_api::Auth;
use meson_db::testing::TestDatabase;
use mesond::conn::ConnLimits;
use mesond::server::{ApiServer, ApiSettings, api_database};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far longer than any limit set here: past it, the server never closed.
const NEVER: Duration = Duration::from_secs(40);

async fn server(db: &TestDatabase, limits: ConnLimits) -> ApiServer {
    let auth = Auth::hs256(b"meson-connections-test-secret-0123456789", "meson-test");
    let settings = ApiSettings {
        connections: limits,
        ..ApiSettings::new(auth)
    };
    let pool = api_database(&db.url, 4, meson_db::scope::ACQUIRE_TIMEOUT)
        .await
        .expect("the API's pool");
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    ApiServer::start(addr, pool, settings)
        .await
        .expect("the API starts")
}

/// Reads until the server closes the connection (or resets it); what it
/// sent. Panics when it is still open after [`NEVER`].
async fn read_until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(NEVER, read)
        .await
        .expect("the server never closed the connection");
    got
}

fn limits(header_s: u64, idle_s: u64, max: usize) -> ConnLimits {
    ConnLimits {
        header_timeout: Duration::from_secs(header_s),
        idle_timeout: Duration::from_secs(idle_s),
        max_connections: max,
        drain: Duration::from_secs(1),
    }
}

#[tokio::test]
async fn half_a_request_head_is_cut_off() {
    let db = TestDatabase::new().await;
    let api = server(&db, limits(1, 3600, 64)).await;
    let mut s = TcpStream::connect(api.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    read_until_closed(&mut s).await;
    api.shutdown().await;
}

#[tokio::test]
async fn a_head_trickled_byte_by_byte_is_cut_off() {
    let db = TestDatabase::new().await;
    let api = server(&db, limits(2, 3600, 64)).await;
    let mut s = TcpStream::connect(api.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    // A header byte every 200 ms: no read is ever idle, the head never ends.
    let mut cut = false;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if s.write_all(b"X").await.is_err() {
            cut = true;
            break;
        }
        let mut buf = [0u8; 1024];
        match tokio::time::timeout(Duration::from_millis(1), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                cut = true;
                break;
            }
            Ok(Ok(_)) | Err(_) => {}
        }
    }
    assert!(cut, "40 s of a trickled request head, still served");
    api.shutdown().await;
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed() {
    let db = TestDatabase::new().await;
    // Not the header timeout: the idle one.
    let api = server(&db, limits(3600, 2, 64)).await;
    let mut s = TcpStream::connect(api.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let got = String::from_utf8_lossy(&read_until_closed(&mut s).await).into_owned();
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    api.shutdown().await;
}

#[tokio::test]
async fn a_grpc_connection_that_never_speaks_is_closed() {
    let db = TestDatabase::new().await;
    let api = server(&db, limits(3600, 2, 64)).await;
    let mut s = TcpStream::connect(api.grpc_addr).await.unwrap();
    read_until_closed(&mut s).await;
    api.shutdown().await;
}

#[tokio::test]
async fn past_the_cap_a_connection_is_refused_and_a_freed_slot_serves_again() {
    let db = TestDatabase::new().await;
    let api = server(&db, limits(3600, 3600, 3)).await;
    // Three connections hold the three slots (REST and gRPC share them).
    let mut held = vec![
        TcpStream::connect(api.addr).await.unwrap(),
        TcpStream::connect(api.addr).await.unwrap(),
        TcpStream::connect(api.grpc_addr).await.unwrap(),
    ];
    // Each is accepted before the next: a request on one answers.
    held[0]
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(NEVER, held[0].read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));

    // One more: 503 and closed.
    let mut extra = TcpStream::connect(api.addr).await.unwrap();
    let got = String::from_utf8_lossy(&read_until_closed(&mut extra).await).into_owned();
    assert!(got.starts_with("HTTP/1.1 503"), "{got}");
    assert!(got.contains("Retry-After: 1"), "{got}");
    assert!(got.contains("\"code\":\"unavailable\""), "{got}");

    // A slot freed serves again (the server notices the close at once).
    drop(held.pop());
    let mut answered = false;
    for _ in 0..400 {
        let mut s = TcpStream::connect(api.addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let got = read_until_closed(&mut s).await;
        if got.starts_with(b"HTTP/1.1 200") {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered, "a freed slot never served again");
    api.shutdown().await;
}

#[tokio::test]
async fn shutdown_cuts_a_connection_holding_half_a_request_after_the_drain() {
    let db = TestDatabase::new().await;
    let api = server(&db, limits(3600, 3600, 64)).await;
    let mut s = TcpStream::connect(api.addr).await.unwrap();
    s.write_all(b"POST /v1/vms HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    // The head is read: the connection is the server's.
    let mut g = TcpStream::connect(api.grpc_addr).await.unwrap();
    g.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::time::timeout(NEVER, api.shutdown())
        .await
        .expect("shutdown waited on a client holding half a request");
    read_until_closed(&mut s).await;
    read_until_closed(&mut g).await;
}

/// `mesond serve` on SIGTERM with a client holding half a request: it exits
/// after the drain period, not when the client lets go.
#[tokio::test]
async fn mesond_stops_on_sigterm_though_a_client_holds_half_a_request() {
    let db = TestDatabase::new().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mesond"));
    cmd.env_clear();
    let mut child = cmd
        .arg("serve")
        .env("DATABASE_URL", &db.url)
        .env(
            "MESON_JWT_SECRET",
            "meson-connections-test-secret-0123456789",
        )
        .env(
            "MESON_SECRETS_KEY",
            "bWVzb24tY29ubmVjdGlvbnMtdGVzdC1rZXktMzJieXQ=",
        )
        .env("MESON_HTTP_ADDR", format!("127.0.0.1:{port}"))
        .env("MESON_GRPC_ADDR", "127.0.0.1:0")
        .env("MESON_HTTP_HEADER_TIMEOUT_S", "3600")
        .env("MESON_HTTP_IDLE_TIMEOUT_S", "3600")
        .env("MESON_HTTP_DRAIN_S", "1")
        .env("MESON_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("mesond starts");
    let mut s = None;
    for _ in 0..600 {
        if let Ok(c) = TcpStream::connect(("127.0.0.1", port)).await {
            s = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut s = s.expect("mesond listens");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let mut status = None;
    for _ in 0..400 {
        if let Some(st) = child.try_wait().unwrap() {
            status = Some(st);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("mesond still running 40 s after SIGTERM");
    };
    assert!(status.success(), "{status}");
    read_until_closed(&mut s).await;
}
