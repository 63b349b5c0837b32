//! What a failed AtomOS call tells the user, over real HTTP against the
//! simulator: the status the hypervisor answered and its text, a hang as
//! "did not answer in time", a host that is down as unreachable.

use atomos_driver::{AtomosClient, ClientOptions, ErrorKind};
use atomos_sim::SimConfig;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

#[tokio::test]
async fn each_failure_says_what_the_hypervisor_answered() {
    let sim = atomos_sim::start(SimConfig {
        hosts: vec![atomos_sim::dev_hosts()[0].clone()],
        boot_time: Duration::from_millis(50),
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        state: None,
    })
    .await
    .expect("simulator starts");
    let target = sim.targets()[0].clone();
    let host = sim.host(&target.name).expect("the host");
    let client = AtomosClient::new(
        target,
        ClientOptions {
            timeout: Duration::from_millis(500),
            retries: 0,
            concurrency: 4,
        },
    )
    .expect("client");

    for (status, said) in [
        (500, "500 Internal Server Error"),
        (502, "502 Bad Gateway"),
        (503, "503 Service Unavailable"),
    ] {
        host.faults().fail_next(atomos_sim::ANY_ROUTE, status, 1);
        let e = client.vms().await.expect_err("an injected failure");
        assert_eq!(e.kind, ErrorKind::Transient);
        let text = e.describe();
        assert!(text.contains(said), "{status}: {text}");
        assert!(text.contains("injected fault"), "{status}: {text}");
        assert!(!text.contains("did not answer"), "{status}: {text}");
    }

    host.faults().hang(atomos_sim::ANY_ROUTE, 1);
    let e = client.vms().await.expect_err("a hang");
    assert_eq!(e.status, None);
    assert!(e.describe().contains("did not answer"), "{}", e.describe());

    host.faults().set_down(true);
    let e = client.vms().await.expect_err("a host that is down");
    let text = e.describe();
    assert!(text.contains("could not reach the hypervisor"), "{text}");
    assert!(!text.contains("127.0.0.1"), "{text}");
    sim.shutdown().await;
}
