//! Drift detection: the reconciler's pass shows the truth about VMs that
//! crashed or vanished on their hosts, and a cluster whose nodes are all
//! unhealthy is `degraded` until they recover.

use crate::harness::{Meson, seed_kaas_one_worker, seed_vm};
use crate::reconciler::workflow_env;
use meson_workflows::auto_repair::{self, RepairConfig};
use meson_workflows::drift;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Creates a seed VM named `name` and waits until it runs; returns
/// (id, host, AtomOS name).
async fn running_vm(m: &Meson, name: &str) -> (String, String, String) {
    let mut body = seed_vm();
    body["specs"]["vm_name"] = json!(name);
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let id = r.body["vm"]["id"].as_str().unwrap().to_owned();
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let vm = vm(m, &id).await;
    let host = vm["host"].as_str().unwrap().to_owned();
    (id.clone(), host, crate::harness::vm_atomos_name(&id))
}

async fn vm(m: &Meson, id: &str) -> Value {
    let r = m.get(&format!("/v1/vms/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["vm"].clone()
}

#[tokio::test]
async fn a_crashed_vm_is_off_and_a_vanished_one_error_never_recreated() {
    let m = Meson::start().await;
    let env = workflow_env(&m, RepairConfig::default());
    let (crashed, host_a, name_a) = running_vm(&m, "crashes").await;
    let (lost, host_b, name_b) = running_vm(&m, "vanishes").await;
    let (fine, host_c, _) = running_vm(&m, "fine").await;
    let hosts: std::collections::BTreeSet<&String> = [&host_a, &host_b, &host_c].into();

    // Nothing drifted: nothing changes.
    let pass = drift::tick(&env).await.unwrap();
    assert_eq!((pass.crashed, pass.missing, pass.recovered), (0, 0, 0));
    // One status call per host, however many VMs it holds.
    assert_eq!((pass.hosts, pass.unanswered), (hosts.len(), 0), "{pass:?}");

    m.fault(&host_a, &json!({"crash_vm": [name_a]})).await;
    m.fault(&host_b, &json!({"lose_vm": [name_b]})).await;
    // Until a pass runs, meson still believes both run.
    assert_eq!(vm(&m, &crashed).await["status"], "running");
    let pass = drift::tick(&env).await.unwrap();
    assert_eq!((pass.crashed, pass.missing), (1, 1), "{pass:?}");

    let c = vm(&m, &crashed).await;
    assert_eq!(c["status"], "off", "{c}");
    assert!(
        c["error_message"].as_str().unwrap().contains("crashed"),
        "{c}"
    );
    let l = vm(&m, &lost).await;
    assert_eq!(l["status"], "error", "{l}");
    assert!(
        l["error_message"]
            .as_str()
            .unwrap()
            .contains("missing from its hypervisor"),
        "{l}"
    );
    let f = vm(&m, &fine).await;
    assert_eq!(f["status"], "running", "{f}");
    assert!(f["error_message"].is_null(), "{f}");
    // Nothing was recreated: the lost VM stays lost.
    let on_b = m.sim().host(&host_b).unwrap().inventory();
    assert!(on_b.vms.iter().all(|v| v.name != name_b), "{on_b:?}");
    // A second pass finds nothing new.
    let pass = drift::tick(&env).await.unwrap();
    assert_eq!((pass.crashed, pass.missing, pass.recovered), (0, 0, 0));

    // Powered on again by its owner, the crashed VM runs and the message goes.
    let r = m
        .post(&format!("/v1/vms/{crashed}/actions/poweron"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let c = vm(&m, &crashed).await;
    assert_eq!(c["status"], "running", "{c}");
    assert!(c["error_message"].is_null(), "{c}");
    // The lost one can still be deleted.
    let r = m.delete(&format!("/v1/vms/{lost}")).await;
    let done = m
        .wait_action(r.body["action"]["id"].as_str().unwrap())
        .await;
    assert_eq!(done["status"], "success", "{done}");
    m.stop().await;
}

#[tokio::test]
async fn a_cluster_whose_nodes_all_crash_is_degraded_until_they_recover() {
    let m = Meson::start().await;
    let id = m.running_cluster(&seed_kaas_one_worker()).await;
    let env = workflow_env(&m, RepairConfig::default());
    let vms = m.cluster_vms(&id);
    assert_eq!(vms.len(), 2);
    for v in &vms {
        let host = m
            .sim()
            .hosts()
            .into_iter()
            .find(|h| h.inventory().vms.iter().any(|x| x.name == v.name))
            .unwrap();
        m.fault(host.name(), &json!({"crash_vm": [v.name]})).await;
    }
    auto_repair::tick(&env).await.unwrap();
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "degraded", "{c}");
    let why = c["error_message"].as_str().unwrap();
    assert!(
        why.starts_with("degraded: all 2 nodes are unhealthy"),
        "{why}"
    );
    // Nothing was repaired (every node of every group is down).
    assert_eq!(m.cluster_commands(&id).await, ["create_cluster"]);
    // An upgrade waits for `running`; a node replace is accepted (not run here).
    let r = m
        .post(
            &format!("/v1/clusters/{id}/actions/upgrade"),
            &json!({"kubernetes_version": "1.29.8"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("degraded"),
        "{}",
        r.body
    );

    // The VMs come back (started on their hosts): the cluster runs again.
    for h in m.sim().hosts() {
        let c = atomos_driver::AtomosClient::new(
            h.target().clone(),
            atomos_driver::ClientOptions::default(),
        )
        .unwrap();
        for v in h
            .inventory()
            .vms
            .iter()
            .filter(|v| vms.iter().any(|x| x.name == v.name))
        {
            c.start(&v.id).await.unwrap();
        }
    }
    for _ in 0..100 {
        if m.cluster_vms(&id)
            .iter()
            .all(|v| v.state == atomos_driver::VmState::Running)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    auto_repair::tick(&env).await.unwrap();
    let c = m.cluster(&id).await;
    assert_eq!(c["status"], "running", "{c}");
    assert!(c["error_message"].is_null(), "{c}");
    assert!(
        m.cluster_nodes(&id)
            .await
            .iter()
            .all(|n| n["status"] == "ready"),
        "{:?}",
        m.cluster_nodes(&id).await
    );
    m.stop().await;
}
