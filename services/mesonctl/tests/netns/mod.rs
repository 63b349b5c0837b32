//! Runs a test in a network namespace of its own, loopback up: there the
//! fixed ports elemento-cli talks to (the daemons' 47777, 17777, ...) are
//! free whatever else runs on the machine, a `mesond dev` included.
//! PostgreSQL stays outside and is bridged in through a Unix socket, so the
//! test reaches it at the address `MESON_TEST_DATABASE_URL` names, as every
//! other test does.
//!
//! The test runs again, alone, as a child process in the namespace
//! (`unshare --net`, with `--map-root-user` when not root). Where namespaces
//! cannot be made, it is skipped, saying so, unless `MESON_REQUIRE_NETNS=1`
//! (CI sets it).

use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// Set in the child: the Unix socket that leads to PostgreSQL.
const BRIDGE: &str = "MESON_TEST_NETNS_BRIDGE";

/// `true` in the namespace (run the test); `false` in the parent, once the
/// child ran the test (its failure fails this one) or the test was skipped.
pub async fn isolated(test: &str) -> bool {
    match std::env::var(BRIDGE) {
        Ok(socket) => {
            inside(&socket).await;
            true
        }
        Err(_) => {
            outside(test).await;
            false
        }
    }
}

/// Where the tests' PostgreSQL listens (TCP).
async fn database() -> SocketAddr {
    let url = std::env::var("MESON_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host_port = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    };
    tokio::net::lookup_host(&host_port)
        .await
        .ok()
        .and_then(|mut a| a.find(SocketAddr::is_ipv4))
        .unwrap_or_else(|| panic!("cannot resolve the tests' PostgreSQL at {host_port} ({url})"))
}

/// `unshare`'s arguments for a network namespace of our own.
fn unshare_args() -> Vec<&'static str> {
    // Root needs no user namespace to make a network namespace.
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if root {
        vec!["--net"]
    } else {
        vec!["--net", "--map-root-user"]
    }
}

/// One namespace's test at a time: elemento-cli keeps its login cookie in
/// its own installation, which every test of a binary shares, so two flows
/// at once log each other in and out.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn outside(test: &str) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let args = unshare_args();
    let probe = tokio::process::Command::new("unshare")
        .args(&args)
        .args(["--", "ip", "link", "set", "lo", "up"])
        .output()
        .await;
    let why = match &probe {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_owned()),
        Err(e) => Some(format!("unshare or ip cannot run: {e}")),
    };
    if let Some(why) = why {
        assert!(
            std::env::var("MESON_REQUIRE_NETNS").as_deref() != Ok("1"),
            "MESON_REQUIRE_NETNS=1 but no network namespace can be made here: {why}"
        );
        eprintln!(
            "SKIPPED {test}: it needs a network namespace of its own (unshare --net, and \
             `ip` from iproute2), which cannot be made here: {why}"
        );
        return;
    }

    // The bridge's outer half: the Unix socket to PostgreSQL.
    let upstream = database().await;
    let socket = std::env::temp_dir().join(format!(
        "meson-netns-{}.sock",
        uuid::Uuid::new_v4().simple()
    ));
    let listener = UnixListener::bind(&socket).expect("the bridge's socket");
    let bridge = tokio::spawn(async move {
        while let Ok((mut inner, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outer) = TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inner, &mut outer).await;
                }
            });
        }
    });

    let exe = std::env::current_exe().expect("the test binary");
    let out = tokio::process::Command::new("unshare")
        .args(&args)
        .arg("--")
        .arg(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(BRIDGE, &socket)
        .output()
        .await
        .expect("unshare runs the test");
    bridge.abort();
    let _ = std::fs::remove_file(&socket);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("--- {test}, in its own network namespace:\n{stdout}{stderr}");
    assert!(out.status.success(), "{test} failed in its namespace");
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{test} did not run in its namespace"
    );
}

async fn inside(socket: &str) {
    let up = tokio::process::Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .await
        .expect("ip runs");
    assert!(up.success(), "loopback up in the namespace");
    // The kernel hands out ephemeral ports from 32768 up, where 37777,
    // 47777 and 57777 are: a simulator's listener could take one before the
    // daemons start. Here the range is the namespace's own.
    std::fs::write("/proc/sys/net/ipv4/ip_local_port_range", "28000 37000")
        .expect("the namespace's ephemeral port range");
    // The bridge's inner half: PostgreSQL's address, in here.
    let addr = database().await;
    let listener = TcpListener::bind(("127.0.0.1", addr.port()))
        .await
        .unwrap_or_else(|e| panic!("the bridge on 127.0.0.1:{}: {e}", addr.port()));
    let socket = socket.to_owned();
    tokio::spawn(async move {
        while let Ok((mut inner, _)) = listener.accept().await {
            let socket = socket.clone();
            tokio::spawn(async move {
                if let Ok(mut outer) = UnixStream::connect(&socket).await {
                    let _ = tokio::io::copy_bidirectional(&mut inner, &mut outer).await;
                }
            });
        }
    });
}
