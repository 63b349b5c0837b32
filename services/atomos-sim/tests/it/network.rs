//! Networks: create/list/info/delete, duplicate names, use by a VM.

use crate::common::{client, sim, spec};
use atomos_driver::{ErrorKind, NetworkCreate, Register};
use std::time::Duration;

#[tokio::test]
async fn network_lifecycle() {
    let sim = sim(Duration::from_millis(50)).await;
    let c = client(&sim, "small");
    let req = NetworkCreate {
        name: "lan".into(),
        cidr: "192.168.101.1/24".into(),
        dhcp_start: Some("192.168.101.2".into()),
        dhcp_end: Some("192.168.101.254".into()),
    };
    let net = c.network_create(&req).await.unwrap();
    assert_eq!(net.name, "lan");
    assert_eq!(net.cidr.as_deref(), Some("192.168.101.1/24"));
    assert_eq!(net.dhcp_end.as_deref(), Some("192.168.101.254"));
    assert_eq!(c.network_info(&net.id).await.unwrap(), net);
    assert_eq!(c.networks().await.unwrap(), vec![net.clone()]);
    assert_eq!(
        c.network_create(&req).await.unwrap_err().kind,
        ErrorKind::AlreadyExists
    );
    let bad = NetworkCreate {
        name: "bad".into(),
        cidr: "not-a-cidr".into(),
        dhcp_start: None,
        dhcp_end: None,
    };
    assert_eq!(
        c.network_create(&bad).await.unwrap_err().kind,
        ErrorKind::Invalid
    );

    let vm = Register {
        vm_name: "on-lan".into(),
        spec: spec(1, 512),
        volume_ids: vec![],
        network_ids: vec![net.id.clone()],
    };
    c.register(&vm).await.unwrap();
    assert_eq!(
        c.network_delete(&net.id).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
    let id = c.vm_by_name("on-lan").await.unwrap().unwrap().id;
    c.unregister(&id).await.unwrap();
    c.network_delete(&net.id).await.unwrap();
    assert!(c.network_info(&net.id).await.unwrap_err().is_not_found());
    assert!(c.network_delete(&net.id).await.unwrap_err().is_not_found());
    assert!(sim.host("small").unwrap().inventory().is_empty());
}
