//! gRPC end to end: volumes, networks, clusters and the catalogue, over a
//! real socket with the generated clients, answering as REST does.

use crate::grpc::{authed, channel, refused, seed_vm};
use crate::harness::{Meson, seed_kaas};
use futures::StreamExt;
use meson_proto::meson::v1 as pb;
use pb::action_service_client::ActionServiceClient;
use pb::catalog_service_client::CatalogServiceClient;
use pb::cluster_service_client::ClusterServiceClient;
use pb::image_service_client::ImageServiceClient;
use pb::network_service_client::NetworkServiceClient;
use pb::volume_service_client::VolumeServiceClient;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt;

/// Watches an action over `WatchActions` until its stream ends, which it
/// does at the action's final state; returns that state.
async fn wait(ch: &Channel, token: &str, id: &str, limit: Duration) -> pb::Action {
    let mut actions = ActionServiceClient::new(ch.clone());
    let mut stream = actions
        .watch_actions(authed(
            pb::WatchActionsRequest {
                id: vec![id.into()],
            },
            token,
        ))
        .await
        .expect("WatchActions")
        .into_inner();
    let mut last = None;
    let watched = async {
        while let Some(a) = stream.next().await {
            last = Some(a.expect("an action"));
        }
    };
    tokio::time::timeout(limit, watched)
        .await
        .unwrap_or_else(|_| panic!("action {id} still running after {limit:?}: {last:?}"));
    let last = last.expect("the stream sent the action");
    assert_ne!(last.status, "running", "{last:?}");
    last
}

/// [`wait`]s for the action and checks that it succeeded.
async fn succeeded(ch: &Channel, token: &str, id: &str, limit: Duration) -> pb::Action {
    let done = wait(ch, token, id, limit).await;
    assert_eq!(done.status, "success", "{done:?}");
    done
}

fn string_map(v: &Value) -> HashMap<String, String> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

fn u32_of(v: &Value) -> Option<u32> {
    v.as_u64().map(|n| u32::try_from(n).expect("a small count"))
}

/// A JSON boolean or the seed's `"True"`/`"False"`.
fn lenient_bool(v: &Value) -> Option<bool> {
    v.as_bool()
        .or_else(|| v.as_str().map(|s| s.eq_ignore_ascii_case("true")))
}

/// The seed KaaS payload (`harness::seed_kaas`), typed.
fn seed_cluster() -> pb::CreateClusterRequest {
    let seed = seed_kaas();
    let r = &seed["req"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let subnet = &r["nodes_subnet"];
    pb::CreateClusterRequest {
        req: Some(pb::KaasRequestSpec {
            name: s(&r["name"]),
            metadata: string_map(&r["metadata"]),
            nodepool: r["nodepool"]
                .as_array()
                .expect("nodepool")
                .iter()
                .map(|p| pb::NodePoolRequest {
                    pool_name: s(&p["pool_name"]),
                    autoscale: lenient_bool(&p["autoscale"]).unwrap_or(false),
                    min_nodes: u32_of(&p["min_nodes"]),
                    max_nodes: u32_of(&p["max_nodes"]),
                    desired_nodes: u32_of(&p["desired_nodes"]),
                    specs: Some(pb::NodeSpecs {
                        cpu: u32_of(&p["specs"]["cpu"]).unwrap_or(0),
                        ram: p["specs"]["ram"].as_u64().unwrap_or(0),
                        storage: u32_of(&p["specs"]["storage"]).unwrap_or(0),
                        gpu: u32_of(&p["specs"]["gpu"]).unwrap_or(0),
                    }),
                    billing: s(&p["billing"]),
                    labels: string_map(&p["labels"]),
                    taints: vec![],
                })
                .collect(),
            nodes_subnet: Some(pb::NodesSubnet {
                dhcp: lenient_bool(&subnet["dhcp"]),
                subnet_netmask: s(&subnet["subnet_netmask"]),
                start_address: s(&subnet["start_address"]),
                last_address: s(&subnet["last_address"]),
                gateway: s(&subnet["gateway"]),
            }),
            update_policy: s(&r["update_policy"]),
            kubernetes_version: s(&r["kubernetes_version"]),
            ..Default::default()
        }),
        provider: s(&seed["provider"]),
        ..Default::default()
    }
}

/// The seed cluster with one worker (up to 3), to be quick.
fn small_cluster() -> pb::CreateClusterRequest {
    let mut c = seed_cluster();
    let pool = &mut c.req.as_mut().expect("req").nodepool[0];
    (pool.min_nodes, pool.desired_nodes) = (Some(1), Some(1));
    c
}

/// The field names of an `invalid_input` status, sorted and deduplicated.
pub(crate) fn rejected_fields(e: &tonic::Status) -> Vec<String> {
    let d = e.get_error_details();
    assert_eq!(
        d.error_info().expect("ErrorInfo").reason,
        "invalid_input",
        "{e:?}"
    );
    let mut fields: Vec<String> = d
        .bad_request()
        .expect("BadRequest")
        .field_violations
        .iter()
        .map(|v| v.field.clone())
        .collect();
    fields.sort();
    fields.dedup();
    fields
}

#[tokio::test]
async fn a_standalone_volume_is_created_attached_and_deleted_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut volumes = VolumeServiceClient::new(ch.clone());
    let mut vms = pb::vm_service_client::VmServiceClient::new(ch.clone());
    let created = volumes
        .create_volume(authed(
            pb::CreateVolumeRequest {
                name: "data".into(),
                size: 8,
                provider: "ionos".into(),
                labels: [("tier".to_owned(), "db".to_owned())].into(),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .expect("create")
        .into_inner();
    let v = created.volume.expect("volume");
    assert_eq!(
        (v.status.as_str(), v.standalone, v.vm.as_deref()),
        ("creating", true, None)
    );
    succeeded(
        &ch,
        &m.token,
        &created.action.unwrap().id,
        Duration::from_secs(30),
    )
    .await;
    let get = |id: String| pb::GetVolumeRequest { id };
    let v = volumes
        .get_volume(authed(get(v.id.clone()), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.status, "available");
    assert!(
        v.host.as_deref().is_some_and(|h| h.starts_with("ionos")),
        "{v:?}"
    );
    assert_eq!(v.labels["tier"], "db");
    let renamed = volumes
        .update_volume(authed(
            pb::UpdateVolumeRequest {
                id: v.id.clone(),
                name: Some("data-2".into()),
                labels: None,
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renamed.volume.unwrap().name, "data-2");

    // Attached by a VM's create; an attached volume cannot be deleted.
    let mut req = seed_vm("with-data");
    req.volumes = vec![v.id.clone()];
    let vm = vms
        .create_vm(authed(req, &m.token))
        .await
        .unwrap()
        .into_inner();
    succeeded(
        &ch,
        &m.token,
        &vm.action.unwrap().id,
        Duration::from_secs(30),
    )
    .await;
    let vm = vm.vm.unwrap();
    assert!(
        vm.volumes.iter().any(|x| x.id == v.id && x.standalone),
        "{vm:?}"
    );
    let del = pb::DeleteVolumeRequest { id: v.id.clone() };
    refused(
        volumes.delete_volume(authed(del.clone(), &m.token)),
        Code::FailedPrecondition,
    )
    .await;
    let standalone = volumes
        .list_volumes(authed(
            pb::ListVolumesRequest {
                standalone: Some(true),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(standalone.volumes.len(), 1);
    assert_eq!(
        standalone.volumes[0].attached_to.as_deref(),
        Some(vm.id.as_str())
    );

    // Free again once the VM is gone, then deleted.
    let a = vms
        .delete_vm(authed(pb::DeleteVmRequest { id: vm.id.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    let a = volumes
        .delete_volume(authed(del, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.command, "delete_volume");
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    refused(
        volumes.get_volume(authed(get(v.id), &m.token)),
        Code::NotFound,
    )
    .await;
    m.stop().await;
}

/// The simulator's volume named `name`: the VMs it is attached to, its size.
fn sim_volume(m: &Meson, name: &str) -> (Vec<String>, f64) {
    m.sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().volumes)
        .find(|v| v.name == name)
        .map(|v| (v.attached_to, v.size_gb))
        .expect("the volume is on AtomOS")
}

#[tokio::test]
async fn a_volume_is_attached_to_a_running_vm_grown_and_detached_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut volumes = VolumeServiceClient::new(ch.clone());
    let mut vms = pb::vm_service_client::VmServiceClient::new(ch.clone());
    let mut made = Vec::new();
    for name in ["anchor", "hot"] {
        let c = volumes
            .create_volume(authed(
                pb::CreateVolumeRequest {
                    name: name.into(),
                    size: 4,
                    provider: "ionos".into(),
                    ..Default::default()
                },
                &m.token,
            ))
            .await
            .unwrap()
            .into_inner();
        succeeded(
            &ch,
            &m.token,
            &c.action.unwrap().id,
            Duration::from_secs(30),
        )
        .await;
        made.push(c.volume.unwrap().id);
    }
    // The VM runs on the volumes' host: it attaches the first at its create.
    let mut req = seed_vm("living");
    req.volumes = vec![made[0].clone()];
    let vm = vms
        .create_vm(authed(req, &m.token))
        .await
        .unwrap()
        .into_inner();
    succeeded(
        &ch,
        &m.token,
        &vm.action.unwrap().id,
        Duration::from_secs(30),
    )
    .await;
    let vm = vm.vm.unwrap();
    let sim_vm = m
        .sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().vms)
        .find(|v| v.name == crate::harness::vm_atomos_name(&vm.id))
        .unwrap()
        .id;
    let atomos_name = format!("vol-{}", made[1].replace('-', ""));

    let attach = |id: &str, vm: &str| pb::AttachVolumeRequest {
        id: id.into(),
        vm: vm.into(),
    };
    let a = volumes
        .attach_volume(authed(attach(&made[1], &vm.id), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.command, "attach_volume");
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    assert_eq!(
        sim_volume(&m, &atomos_name).0,
        std::slice::from_ref(&sim_vm)
    );
    let e = refused(
        volumes.attach_volume(authed(attach(&made[1], &vm.id), &m.token)),
        Code::FailedPrecondition,
    )
    .await;
    assert!(e.message().contains(&vm.id), "{e:?}");

    let resize = |size| pb::ResizeVolumeRequest {
        id: made[1].clone(),
        size,
    };
    let a = volumes
        .resize_volume(authed(resize(9), &m.token))
        .await
        .unwrap()
        .into_inner();
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    assert_eq!(sim_volume(&m, &atomos_name).1, 9.0);
    let e = refused(
        volumes.resize_volume(authed(resize(3), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["size"]);
    let e = refused(
        volumes.attach_volume(authed(attach(&made[1], ""), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["vm"]);

    let a = volumes
        .detach_volume(authed(
            pb::DetachVolumeRequest {
                id: made[1].clone(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.command, "detach_volume");
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    assert!(sim_volume(&m, &atomos_name).0.is_empty());
    let v = volumes
        .get_volume(authed(
            pb::GetVolumeRequest {
                id: made[1].clone(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (v.status.as_str(), v.size, v.attached_to),
        ("available", 9, None)
    );

    // Free again, it moves to the other host of its provider.
    let from = v.host.clone().unwrap_or_default();
    let to = if from == "ionos-fra-1" {
        "ionos-las-1"
    } else {
        "ionos-fra-1"
    };
    let e = refused(
        volumes.move_volume(authed(
            pb::MoveVolumeRequest {
                id: made[1].clone(),
                host: String::new(),
            },
            &m.token,
        )),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["host"]);
    let a = volumes
        .move_volume(authed(
            pb::MoveVolumeRequest {
                id: made[1].clone(),
                host: to.into(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.command, "move_volume");
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    let on: Vec<String> = m
        .sim()
        .hosts()
        .iter()
        .filter(|h| h.inventory().volumes.iter().any(|x| x.name == atomos_name))
        .map(|h| h.name().to_owned())
        .collect();
    assert_eq!(on, [to], "on the new host only");
    m.stop().await;
}

#[tokio::test]
async fn an_image_of_a_vm_is_made_listed_renamed_and_deleted_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut images = ImageServiceClient::new(ch.clone());
    let mut vms = pb::vm_service_client::VmServiceClient::new(ch.clone());
    let created = vms
        .create_vm(authed(crate::grpc::seed_vm("imaged"), &m.token))
        .await
        .unwrap()
        .into_inner();
    let vm = created.vm.unwrap().id;
    succeeded(
        &ch,
        &m.token,
        &created.action.unwrap().id,
        Duration::from_secs(30),
    )
    .await;

    // Bad input is named by the REST field paths.
    let e = refused(
        images.import_image(authed(
            pb::ImportImageRequest {
                name: "a b".into(),
                url: "ftp://x".into(),
                ..Default::default()
            },
            &m.token,
        )),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["name", "url"]);

    let made = images
        .create_image_from_vm(authed(
            pb::CreateImageFromVmRequest {
                vm: vm.clone(),
                name: "golden".into(),
                labels: [("os".to_owned(), "ubuntu".to_owned())].into(),
            },
            &m.token,
        ))
        .await
        .expect("create")
        .into_inner();
    let i = made.image.expect("image");
    assert_eq!(
        (
            i.status.as_str(),
            i.source_type.as_str(),
            i.source_vm.as_deref()
        ),
        ("creating", "snapshot", Some(vm.as_str()))
    );
    succeeded(
        &ch,
        &m.token,
        &made.action.unwrap().id,
        Duration::from_secs(30),
    )
    .await;
    let got = images
        .get_image(authed(pb::GetImageRequest { id: i.id.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.status, "available");
    assert!(got.host.is_some(), "{got:?}");
    let listed = images
        .list_images(authed(
            pb::ListImagesRequest {
                options: Some(pb::ListOptions {
                    label_selector: "os=ubuntu".into(),
                    ..Default::default()
                }),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.images.len(), 1);
    assert_eq!(listed.images[0].id, i.id);
    let renamed = images
        .update_image(authed(
            pb::UpdateImageRequest {
                id: i.id.clone(),
                name: Some("golden-2".into()),
                labels: None,
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renamed.image.unwrap().name, "golden-2");
    // A VM booted from it: its specs name the image.
    let mut req = seed_vm("from-golden");
    req.image = i.id.clone();
    let from = vms
        .create_vm(authed(req, &m.token))
        .await
        .unwrap()
        .into_inner();
    succeeded(
        &ch,
        &m.token,
        &from.action.unwrap().id,
        Duration::from_secs(30),
    )
    .await;
    let from = vms
        .get_vm(authed(
            pb::GetVmRequest {
                id: from.vm.unwrap().id,
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        from.specs.and_then(|s| s.image).as_deref(),
        Some(i.id.as_str())
    );
    let mut bad = seed_vm("bad-image");
    bad.image = "nope".into();
    let e = refused(vms.create_vm(authed(bad, &m.token)), Code::InvalidArgument).await;
    assert_eq!(rejected_fields(&e), ["image"]);
    let deleted = images
        .delete_image(authed(
            pb::DeleteImageRequest { id: i.id.clone() },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.command, "delete_image");
    succeeded(&ch, &m.token, &deleted.id, Duration::from_secs(30)).await;
    refused(
        images.get_image(authed(pb::GetImageRequest { id: i.id }, &m.token)),
        Code::NotFound,
    )
    .await;
}

#[tokio::test]
async fn a_network_is_created_listed_renamed_and_deleted_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut nets = NetworkServiceClient::new(ch.clone());

    let created = nets
        .create_network(authed(
            pb::CreateNetworkRequest {
                name: "db".into(),
                cidr: "192.168.10.0/24".into(),
                dhcp: Some(false),
                labels: [("tier".to_owned(), "db".to_owned())].into(),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .expect("create")
        .into_inner();
    let net = created.network.expect("network");
    assert_eq!(
        (net.name.as_str(), net.cidr.as_str()),
        ("db", "192.168.10.0/24")
    );
    assert!(!net.dhcp);
    // As REST shows it.
    let rest = m.get(&format!("/v1/networks/{}", net.id)).await.body;
    assert_eq!(net.gateway, rest["network"]["gateway"].as_str().unwrap());
    let range = net.range.clone().expect("range");
    assert_eq!(
        range.start,
        rest["network"]["range"]["start"].as_str().unwrap()
    );
    assert_eq!(net.labels["tier"], "db");

    // Listed, filtered like REST.
    let list = nets
        .list_networks(authed(
            pb::ListNetworksRequest {
                options: Some(pb::ListOptions {
                    label_selector: "tier=db".into(),
                    ..Default::default()
                }),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.networks.len(), 1);
    assert_eq!(list.pagination.unwrap().total_entries, 1);
    let e = refused(
        nets.list_networks(authed(
            pb::ListNetworksRequest {
                options: Some(pb::ListOptions {
                    status: vec!["bogus".into()],
                    ..Default::default()
                }),
            },
            &m.token,
        )),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["status"]);

    // Renamed (labels untouched when not given).
    let renamed = nets
        .update_network(authed(
            pb::UpdateNetworkRequest {
                id: net.id.clone(),
                name: Some("db2".into()),
                labels: None,
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner()
        .network
        .unwrap();
    assert_eq!(renamed.name, "db2");
    assert_eq!(renamed.labels["tier"], "db");

    // Another tenant sees none of it; a viewer may read, not create.
    let other = m.token("acme", "eve", meson_api::Role::Admin);
    refused(
        nets.get_network(authed(pb::GetNetworkRequest { id: net.id.clone() }, &other)),
        Code::NotFound,
    )
    .await;
    let viewer = m.token("dev", "vera", meson_api::Role::Viewer);
    nets.get_network(authed(
        pb::GetNetworkRequest { id: net.id.clone() },
        &viewer,
    ))
    .await
    .expect("a viewer reads");
    let e = refused(
        nets.create_network(authed(
            pb::CreateNetworkRequest {
                name: "x".into(),
                cidr: "192.168.11.0/24".into(),
                ..Default::default()
            },
            &viewer,
        )),
        Code::PermissionDenied,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "forbidden"
    );

    // Deleted: its action succeeds, then it is gone.
    let delete = nets
        .delete_network(authed(
            pb::DeleteNetworkRequest { id: net.id.clone() },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(delete.command, "delete_network");
    succeeded(&ch, &m.token, &delete.id, Duration::from_secs(10)).await;
    refused(
        nets.get_network(authed(
            pb::GetNetworkRequest { id: net.id.clone() },
            &m.token,
        )),
        Code::NotFound,
    )
    .await;
    let actions = nets
        .list_network_actions(authed(
            pb::ResourceActionsRequest {
                id: net.id.clone(),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(actions.actions.len(), 1, "{actions:?}");
    assert_eq!(actions.actions[0].id, delete.id);

    // The audit log knows the network each call was about (the viewer's
    // refused create is there too, about nothing).
    let audit = m.get("/v1/audit?operation=network_create").await.body;
    let entries = audit["audit_entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{audit}");
    let entry = entries.iter().find(|e| e["status"] == 200).unwrap();
    assert_eq!(entry["method"], "GRPC");
    assert_eq!(entry["path"], "/meson.v1.NetworkService/CreateNetwork");
    assert_eq!(entry["resource_type"], "network");
    assert_eq!(entry["resource_id"], net.id.as_str());
    let audit = m.get("/v1/audit?operation=network_delete").await.body;
    assert_eq!(audit["audit_entries"][0]["action_id"], delete.id.as_str());
    m.stop().await;
}

#[tokio::test]
async fn a_cluster_runs_scales_and_hands_out_a_kubeconfig_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut clusters = ClusterServiceClient::new(ch.clone());
    let mut volumes = VolumeServiceClient::new(ch.clone());

    let created = clusters
        .create_cluster(authed(small_cluster(), &m.token))
        .await
        .expect("create")
        .into_inner();
    let cluster = created.cluster.expect("cluster");
    let action = created.action.expect("action");
    assert_eq!(
        (
            cluster.name.as_str(),
            cluster.status.as_str(),
            action.command.as_str()
        ),
        ("test8", "creating", "create_cluster")
    );
    assert_eq!(cluster.kubernetes_version, "1.29.2");
    succeeded(&ch, &m.token, &action.id, Duration::from_secs(30)).await;
    let running = clusters
        .get_cluster(authed(
            pb::GetClusterRequest {
                id: cluster.id.clone(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(running.status, "running");
    assert_eq!(running.provider.as_deref(), Some("arubacloud"));
    let listed = clusters
        .list_clusters(authed(pb::ListClustersRequest::default(), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.clusters.len(), 1);

    // Its pool, scaled from 1 to 2 by an action.
    let pools = clusters
        .list_pools(authed(
            pb::ListPoolsRequest {
                id: cluster.id.clone(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner()
        .pools;
    assert_eq!(pools.len(), 1);
    let pool = &pools[0];
    assert_eq!((pool.name.as_str(), pool.current_nodes), ("1poolname", 1));
    let scaled = clusters
        .update_pool(authed(
            pb::UpdatePoolRequest {
                id: cluster.id.clone(),
                pool_id: pool.id.clone(),
                desired_nodes: Some(2),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .expect("scale")
        .into_inner();
    assert_eq!(scaled.pool.unwrap().desired_nodes, 2);
    let scale = scaled.action.expect("a scale action");
    assert_eq!(scale.command, "scale_node_pool");
    succeeded(&ch, &m.token, &scale.id, Duration::from_secs(30)).await;
    let pool = clusters
        .get_pool(authed(
            pb::GetPoolRequest {
                id: cluster.id.clone(),
                pool_id: pool.id.clone(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(pool.current_nodes, 2);

    // Its nodes (as REST lists them), actions and a kubeconfig.
    let nodes = clusters
        .list_nodes(authed(
            pb::ListNodesRequest {
                id: cluster.id.clone(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner()
        .nodes;
    let rest = m.cluster_nodes(&cluster.id).await;
    assert_eq!(nodes.len(), rest.len());
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert_eq!(nodes[0].role, "control_plane");
    assert!(
        nodes.iter().all(|n| n.ip.is_some() && n.host.is_some()),
        "{nodes:?}"
    );
    let commands: Vec<String> = clusters
        .list_cluster_actions(authed(
            pb::ResourceActionsRequest {
                id: cluster.id.clone(),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner()
        .actions
        .into_iter()
        .map(|a| a.command)
        .collect();
    assert!(
        commands.contains(&"scale_node_pool".to_owned()),
        "{commands:?}"
    );
    assert!(
        commands.contains(&"create_cluster".to_owned()),
        "{commands:?}"
    );
    let kubeconfig = clusters
        .get_kubeconfig(authed(
            pb::GetKubeconfigRequest {
                id: cluster.id.clone(),
                expiry_seconds: 0,
            },
            &m.token,
        ))
        .await
        .expect("kubeconfig")
        .into_inner()
        .kubeconfig;
    // YAML quotes the server: parse it rather than match `server: https://`.
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&kubeconfig).expect("YAML");
    let server = yaml["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap_or_default();
    assert!(server.starts_with("https://"), "{kubeconfig}");
    assert_eq!(
        Some(server),
        running.control_plane.unwrap().endpoint.as_deref()
    );
    let e = clusters
        .get_kubeconfig(authed(
            pb::GetKubeconfigRequest {
                id: cluster.id.clone(),
                expiry_seconds: 5,
            },
            &m.token,
        ))
        .await
        .unwrap_err();
    assert_eq!(rejected_fields(&e), ["expiry_seconds"]);

    // The nodes' volumes, listed and filtered.
    let all = volumes
        .list_volumes(authed(pb::ListVolumesRequest::default(), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert!(!all.volumes.is_empty());
    let volume = all.volumes[0].clone();
    let got = volumes
        .get_volume(authed(
            pb::GetVolumeRequest {
                id: volume.id.clone(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got, volume);
    let boot = volumes
        .list_volumes(authed(
            pb::ListVolumesRequest {
                kind: "boot".into(),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(boot.volumes.len(), 3, "{boot:?}");
    assert!(boot.volumes.iter().all(|v| v.kind == "boot"));
    refused(
        volumes.list_volumes(authed(
            pb::ListVolumesRequest {
                kind: "floppy".into(),
                vm: "nope".into(),
                ..Default::default()
            },
            &m.token,
        )),
        Code::InvalidArgument,
    )
    .await;

    // Another tenant finds none of it.
    let other = m.token("acme", "eve", meson_api::Role::Admin);
    refused(
        clusters.get_cluster(authed(
            pb::GetClusterRequest {
                id: cluster.id.clone(),
            },
            &other,
        )),
        Code::NotFound,
    )
    .await;
    refused(
        clusters.list_pools(authed(
            pb::ListPoolsRequest {
                id: cluster.id.clone(),
            },
            &other,
        )),
        Code::NotFound,
    )
    .await;
    refused(
        volumes.get_volume(authed(
            pb::GetVolumeRequest {
                id: volume.id.clone(),
            },
            &other,
        )),
        Code::NotFound,
    )
    .await;
    let theirs = volumes
        .list_volumes(authed(pb::ListVolumesRequest::default(), &other))
        .await
        .unwrap()
        .into_inner();
    assert!(theirs.volumes.is_empty());
    m.stop().await;
}

#[tokio::test]
async fn a_cluster_is_changed_upgraded_and_deleted_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut clusters = ClusterServiceClient::new(ch.clone());
    let mut catalog = CatalogServiceClient::new(ch.clone());
    let t = m.token.as_str();
    let created = clusters
        .create_cluster(authed(small_cluster(), t))
        .await
        .expect("create")
        .into_inner();
    let id = created.cluster.expect("cluster").id;
    succeeded(
        &ch,
        t,
        &created.action.expect("action").id,
        Duration::from_secs(30),
    )
    .await;

    // Relabelled, its policy changed; a bad policy names the REST field.
    let updated = clusters
        .update_cluster(authed(
            pb::UpdateClusterRequest {
                id: id.clone(),
                labels: Some(pb::Labels {
                    labels: [("env".to_owned(), "prod".to_owned())].into(),
                }),
                update_policy: Some("PATCH_UPDATE".into()),
            },
            t,
        ))
        .await
        .expect("update")
        .into_inner();
    assert_eq!(updated.labels["env"], "prod");
    assert_eq!(updated.update_policy, "PATCH_UPDATE");
    let e = clusters
        .update_cluster(authed(
            pb::UpdateClusterRequest {
                id: id.clone(),
                labels: None,
                update_policy: Some("SOMETIMES".into()),
            },
            t,
        ))
        .await
        .unwrap_err();
    assert_eq!(rejected_fields(&e), ["update_policy"]);

    // A second pool, added and deleted by actions.
    let added = clusters
        .create_pool(authed(
            pb::CreatePoolRequest {
                id: id.clone(),
                pool: Some(pb::NodePoolRequest {
                    pool_name: "extra".into(),
                    desired_nodes: Some(1),
                    specs: Some(pb::NodeSpecs {
                        cpu: 1,
                        ram: 1024,
                        storage: 20,
                        gpu: 0,
                    }),
                    ..Default::default()
                }),
            },
            t,
        ))
        .await
        .expect("a pool")
        .into_inner();
    let extra = added.pool.expect("pool");
    assert_eq!((extra.name.as_str(), extra.desired_nodes), ("extra", 1));
    succeeded(
        &ch,
        t,
        &added.action.expect("action").id,
        Duration::from_secs(30),
    )
    .await;
    let e = clusters
        .create_pool(authed(
            pb::CreatePoolRequest {
                id: id.clone(),
                pool: Some(pb::NodePoolRequest {
                    pool_name: "Bad_Name".into(),
                    desired_nodes: Some(1),
                    ..Default::default()
                }),
            },
            t,
        ))
        .await
        .unwrap_err();
    assert_eq!(rejected_fields(&e), ["pool_name"]);
    let deleted = clusters
        .delete_pool(authed(
            pb::DeletePoolRequest {
                id: id.clone(),
                pool_id: extra.id.clone(),
            },
            t,
        ))
        .await
        .expect("pool delete")
        .into_inner();
    succeeded(&ch, t, &deleted.id, Duration::from_secs(30)).await;

    // A worker rebooted, then replaced.
    let nodes = clusters
        .list_nodes(authed(pb::ListNodesRequest { id: id.clone() }, t))
        .await
        .unwrap()
        .into_inner()
        .nodes;
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    let worker = nodes.iter().find(|n| n.role == "worker").expect("a worker");
    let node = |node: &str| pb::NodeActionRequest {
        id: id.clone(),
        node: node.to_owned(),
    };
    let reboot = clusters
        .reboot_node(authed(node(&worker.id), t))
        .await
        .expect("reboot")
        .into_inner();
    assert_eq!(reboot.command, "reboot_node");
    succeeded(&ch, t, &reboot.id, Duration::from_secs(30)).await;
    let replace = clusters
        .replace_node(authed(node(&worker.id), t))
        .await
        .expect("replace")
        .into_inner();
    succeeded(&ch, t, &replace.id, Duration::from_secs(30)).await;
    let e = clusters
        .reboot_node(authed(node("nope"), t))
        .await
        .unwrap_err();
    assert_eq!(rejected_fields(&e), ["node"]);

    // Upgraded to a version the catalogue offers, credentials rotated.
    let versions = catalog
        .list_kubernetes_versions(authed(pb::ListKubernetesVersionsRequest {}, t))
        .await
        .unwrap()
        .into_inner()
        .kubernetes_versions;
    let to = versions
        .iter()
        .find(|v| v.version == "1.29.2")
        .and_then(|v| v.upgradable_to.first())
        .expect("1.29.2 upgrades")
        .clone();
    let upgrade = clusters
        .upgrade_cluster(authed(
            pb::UpgradeClusterRequest {
                id: id.clone(),
                kubernetes_version: to.clone(),
                ..Default::default()
            },
            t,
        ))
        .await
        .expect("upgrade")
        .into_inner();
    assert_eq!(upgrade.command, "upgrade_cluster");
    succeeded(&ch, t, &upgrade.id, Duration::from_secs(30)).await;
    let upgraded = clusters
        .get_cluster(authed(pb::GetClusterRequest { id: id.clone() }, t))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(upgraded.kubernetes_version, to);
    let e = clusters
        .upgrade_cluster(authed(
            pb::UpgradeClusterRequest {
                id: id.clone(),
                kubernetes_version: to.clone(),
                max_surge: Some(0),
                max_unavailable: Some(0),
            },
            t,
        ))
        .await
        .unwrap_err();
    assert_eq!(rejected_fields(&e), ["max_surge"]);
    let rotate = clusters
        .rotate_credentials(authed(pb::RotateCredentialsRequest { id: id.clone() }, t))
        .await
        .expect("rotate")
        .into_inner();
    assert_eq!(rotate.command, "rotate_credentials");
    succeeded(&ch, t, &rotate.id, Duration::from_secs(30)).await;

    // Deleted.
    let delete = clusters
        .delete_cluster(authed(pb::DeleteClusterRequest { id: id.clone() }, t))
        .await
        .expect("delete")
        .into_inner();
    succeeded(&ch, t, &delete.id, Duration::from_secs(30)).await;
    refused(
        clusters.get_cluster(authed(pb::GetClusterRequest { id: id.clone() }, t)),
        Code::NotFound,
    )
    .await;
    m.stop().await;
}

#[tokio::test]
async fn the_catalogue_quotes_and_invalid_clusters_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut catalog = CatalogServiceClient::new(ch.clone());
    let mut clusters = ClusterServiceClient::new(ch);

    let flavors = catalog
        .list_flavors(authed(pb::ListFlavorsRequest {}, &m.token))
        .await
        .unwrap()
        .into_inner()
        .flavors;
    assert!(flavors.iter().any(|f| f.name == "helium"), "{flavors:?}");
    let providers = catalog
        .list_providers(authed(pb::ListProvidersRequest {}, &m.token))
        .await
        .unwrap()
        .into_inner()
        .providers;
    assert!(!providers.is_empty());
    assert!(
        providers.iter().all(|p| !p.regions.is_empty()),
        "{providers:?}"
    );
    // As REST lists them.
    let rest = m.get("/v1/providers").await.body;
    assert_eq!(providers.len(), rest["providers"].as_array().unwrap().len());
    let versions = catalog
        .list_kubernetes_versions(authed(pb::ListKubernetesVersionsRequest {}, &m.token))
        .await
        .unwrap()
        .into_inner()
        .kubernetes_versions;
    assert_eq!(
        versions.iter().filter(|v| v.default).count(),
        1,
        "{versions:?}"
    );
    // The same catalogue as REST's, dates included.
    let rest = m.get("/v1/kubernetes-versions").await.body;
    let rest: Vec<(String, String, String, bool, bool)> = rest["kubernetes_versions"]
        .as_array()
        .expect("kubernetes_versions")
        .iter()
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (
                s("version"),
                s("released"),
                s("end_of_life"),
                v["default"] == true,
                v["deprecated"] == true,
            )
        })
        .collect();
    let grpc: Vec<(String, String, String, bool, bool)> = versions
        .iter()
        .map(|v| {
            (
                v.version.clone(),
                v.released.clone(),
                v.end_of_life.clone(),
                v.default,
                v.deprecated,
            )
        })
        .collect();
    assert_eq!(grpc, rest);

    // Quotes: the cheapest offer first.
    let vm = catalog
        .quote_vm(authed(seed_vm("quoted"), &m.token))
        .await
        .expect("a VM quote")
        .into_inner();
    let cheapest = vm.cheapest.expect("cheapest");
    assert_eq!(Some(&cheapest), vm.quotes.first());
    assert_eq!(cheapest.provider, "ionos");
    assert!(cheapest.price.unwrap().hourly > 0.0);
    let kaas = catalog
        .quote_cluster(authed(small_cluster(), &m.token))
        .await
        .expect("a cluster quote")
        .into_inner();
    let cheapest = kaas.cheapest.expect("cheapest");
    assert_eq!(Some(&cheapest), kaas.placements.first());
    assert_eq!(cheapest.provider, "arubacloud");
    assert_eq!(cheapest.pools.len(), 1);
    assert_eq!(cheapest.control_plane.unwrap().name, "control-plane");
    assert!(cheapest.max_price.unwrap().hourly >= cheapest.price.unwrap().hourly);

    // A cluster with no pool: refused naming the REST field, by both.
    let mut bad = small_cluster();
    bad.req.as_mut().unwrap().nodepool.clear();
    let e = refused(
        clusters.create_cluster(authed(bad.clone(), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["req.nodepool"]);
    let e = catalog
        .quote_cluster(authed(bad, &m.token))
        .await
        .unwrap_err();
    assert_eq!(rejected_fields(&e), ["req.nodepool"]);
    // Nothing at all: the parser names what is missing, as REST does.
    let e = clusters
        .create_cluster(authed(pb::CreateClusterRequest::default(), &m.token))
        .await
        .unwrap_err();
    let rest = m.post("/v1/clusters", &serde_json::json!({})).await;
    assert_eq!(rejected_fields(&e), rest.rejected_fields());
    let listed = clusters
        .list_clusters(authed(pb::ListClustersRequest::default(), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.clusters.is_empty());
    m.stop().await;
}

#[tokio::test]
async fn an_idempotency_key_replays_a_create_and_refuses_another_request_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut nets = NetworkServiceClient::new(ch.clone());
    let keyed = |name: &str, key: &str| {
        let mut r = authed(
            pb::CreateNetworkRequest {
                name: name.into(),
                cidr: "192.168.20.0/24".into(),
                ..Default::default()
            },
            &m.token,
        );
        r.metadata_mut()
            .insert("idempotency-key", key.parse().expect("metadata"));
        r
    };
    let replayed = |md: &tonic::metadata::MetadataMap| {
        md.get("idempotent-replayed")
            .is_some_and(|v| v.to_str().ok() == Some("true"))
    };

    let first = nets
        .create_network(keyed("edge", "net-1"))
        .await
        .expect("create");
    assert!(!replayed(first.metadata()));
    let first = first.into_inner();
    // The retry answers the same network and action, and makes nothing.
    let again = nets
        .create_network(keyed("edge", "net-1"))
        .await
        .expect("the retry");
    assert!(replayed(again.metadata()));
    assert_eq!(again.into_inner(), first);
    let list = nets
        .list_networks(authed(pb::ListNetworksRequest::default(), &m.token))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.pagination.expect("pagination").total_entries, 1);

    // Another request with the key is refused, as REST refuses it.
    let e = nets
        .create_network(keyed("other", "net-1"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "conflict"
    );
    assert!(e.message().contains("Idempotency-Key"), "{e:?}");
    // The key is the tenant's, whichever transport used it first.
    let rest = m
        .http
        .post(format!("{}/v1/networks", m.base))
        .bearer_auth(&m.token)
        .header("Idempotency-Key", "net-1")
        .json(&serde_json::json!({"name": "edge", "cidr": "192.168.20.0/24"}))
        .send()
        .await
        .expect("REST create");
    assert_eq!(rest.status(), reqwest::StatusCode::CONFLICT);
    // And a malformed key names the key.
    let e = nets.create_network(keyed("edge", "")).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert_eq!(rejected_fields(&e), ["Idempotency-Key"]);
}

#[tokio::test]
async fn a_vm_is_resized_rebuilt_and_migrated_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut vms = pb::vm_service_client::VmServiceClient::new(ch.clone());
    let vm = vms
        .create_vm(authed(seed_vm("grows"), &m.token))
        .await
        .unwrap()
        .into_inner();
    succeeded(
        &ch,
        &m.token,
        &vm.action.unwrap().id,
        Duration::from_secs(30),
    )
    .await;
    let id = vm.vm.unwrap().id;
    let resize = |cores, stop| pb::ResizeVmRequest {
        id: id.clone(),
        cores,
        memory_mib: None,
        stop,
    };
    refused(
        vms.resize_vm(authed(resize(Some(3), false), &m.token)),
        Code::FailedPrecondition,
    )
    .await;
    let e = refused(
        vms.resize_vm(authed(resize(None, true), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["cores"]);
    let a = vms
        .resize_vm(authed(resize(Some(3), true), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.command, "resize_vm");
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    let got = vms
        .get_vm(authed(pb::GetVmRequest { id: id.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.status, "running");
    assert_eq!(got.specs.unwrap().cores, 3);
    let slots = m
        .sim()
        .hosts()
        .iter()
        .flat_map(|h| h.inventory().vms)
        .find(|v| v.name == crate::harness::vm_atomos_name(&id))
        .unwrap()
        .slots;
    assert_eq!(slots, 3);

    // Rebuilt from another distribution; neither source names `image`.
    let rebuild = |image: &str, os: &str| pb::RebuildVmRequest {
        id: id.clone(),
        image: image.into(),
        os: os.into(),
    };
    let e = refused(
        vms.rebuild_vm(authed(rebuild("", ""), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["image"]);
    let a = vms
        .rebuild_vm(authed(rebuild("", "Ubuntu"), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.command, "rebuild_vm");
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    let got = vms
        .get_vm(authed(pb::GetVmRequest { id: id.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.status, "running");
    assert_eq!(got.specs.unwrap().os_distribution, "ubuntu");

    // Migrated to the other host of its provider; a host of another is refused.
    let migrate = |host: &str| pb::MigrateVmRequest {
        id: id.clone(),
        host: host.into(),
    };
    let e = refused(
        vms.migrate_vm(authed(migrate("ovh-gra-1"), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["host"]);
    let from = got.host.clone();
    let a = vms
        .migrate_vm(authed(migrate(""), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.command, "migrate_vm");
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    let moved = vms
        .get_vm(authed(pb::GetVmRequest { id: id.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(moved.status, "running");
    assert_ne!(moved.host, from);

    // Attached to a private network and detached again, running.
    let net = NetworkServiceClient::new(ch.clone())
        .create_network(authed(
            pb::CreateNetworkRequest {
                name: "late".into(),
                cidr: "192.168.40.0/24".into(),
                dhcp: Some(false),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner()
        .network
        .unwrap()
        .id;
    let change = |network: &str| pb::VmNetworkRequest {
        id: id.clone(),
        network: network.into(),
    };
    let e = refused(
        vms.attach_vm_network(authed(change(""), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["network"]);
    let a = vms
        .attach_vm_network(authed(change(&net), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.command, "attach_network");
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    let got = vms
        .get_vm(authed(pb::GetVmRequest { id: id.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.private_net.len(), 1);
    assert_eq!(got.private_net[0].network, net);
    let on_host = |m: &Meson| {
        m.sim()
            .hosts()
            .iter()
            .flat_map(|h| h.inventory().vms)
            .find(|v| v.name == crate::harness::vm_atomos_name(&id))
            .unwrap()
            .network_ids
            .len()
    };
    assert_eq!(on_host(&m), 1, "plugged in on its host");
    refused(
        vms.attach_vm_network(authed(change(&net), &m.token)),
        Code::FailedPrecondition,
    )
    .await;
    let a = vms
        .detach_vm_network(authed(change(&net), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.command, "detach_network");
    succeeded(&ch, &m.token, &a.id, Duration::from_secs(30)).await;
    assert_eq!(on_host(&m), 0, "unplugged");
    m.stop().await;
}

#[tokio::test]
async fn a_port_forward_is_created_read_listed_and_deleted_over_grpc() {
    use pb::port_forward_service_client::PortForwardServiceClient;
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let net = crate::networks::create_network(
        &m,
        serde_json::json!({"name": "pf", "cidr": "192.168.44.0/24"}),
    )
    .await;
    let vm = crate::networks::create_vm(&m, &crate::networks::vm_on("pf", &[&net])).await;
    let vm_id = vm["id"].as_str().unwrap().to_owned();
    let mut pf = PortForwardServiceClient::new(ch.clone());

    // Empty fields are absent, and named as REST names them.
    let e = refused(
        pf.create_port_forward(authed(
            pb::CreatePortForwardRequest {
                network: net.clone(),
                protocol: "icmp".into(),
                ..Default::default()
            },
            &m.token,
        )),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(
        rejected_fields(&e),
        ["private_port", "protocol", "public_port", "vm"]
    );
    let e = refused(
        pf.list_port_forwards(authed(
            pb::ListPortForwardsRequest {
                network: "nope".into(),
            },
            &m.token,
        )),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["network"]);

    let public = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let created = pf
        .create_port_forward(authed(
            pb::CreatePortForwardRequest {
                network: net.clone(),
                protocol: "udp".into(),
                public_port: public.into(),
                vm: vm_id.clone(),
                private_port: 53,
            },
            &m.token,
        ))
        .await
        .expect("create")
        .into_inner();
    let f = created.port_forward.expect("the forward");
    assert_eq!(f.status, "creating");
    succeeded(
        &ch,
        &m.token,
        &created.action.expect("its action").id,
        Duration::from_secs(60),
    )
    .await;
    let read = pf
        .get_port_forward(authed(
            pb::GetPortForwardRequest {
                network: net.clone(),
                id: f.id.clone(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    // As REST shows it.
    let rest = m
        .get(&format!("/v1/networks/{net}/port-forwards/{}", f.id))
        .await
        .body["port_forward"]
        .clone();
    assert_eq!(read.status, "active");
    assert_eq!(read.status, rest["status"].as_str().unwrap());
    assert_eq!(
        (read.protocol.as_str(), read.public_port, read.private_port),
        ("udp", u32::from(public), 53)
    );
    assert_eq!(read.public_ip, rest["public_ip"].as_str().unwrap());
    assert_eq!(
        (read.vm.as_str(), read.network.as_str()),
        (vm_id.as_str(), net.as_str())
    );
    let listed = pf
        .list_port_forwards(authed(
            pb::ListPortForwardsRequest {
                network: net.clone(),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.port_forwards, std::slice::from_ref(&read));

    let deleting = pf
        .delete_port_forward(authed(
            pb::GetPortForwardRequest {
                network: net.clone(),
                id: f.id.clone(),
            },
            &m.token,
        ))
        .await
        .expect("delete")
        .into_inner();
    assert_eq!(deleting.command, "delete_port_forward");
    succeeded(&ch, &m.token, &deleting.id, Duration::from_secs(60)).await;
    refused(
        pf.get_port_forward(authed(
            pb::GetPortForwardRequest {
                network: net.clone(),
                id: f.id.clone(),
            },
            &m.token,
        )),
        Code::NotFound,
    )
    .await;
    m.stop().await;
}

#[tokio::test]
async fn a_vm_is_backed_up_restored_into_a_new_vm_and_its_backup_deleted_over_grpc() {
    use pb::backup_service_client::BackupServiceClient;
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut vms = pb::vm_service_client::VmServiceClient::new(ch.clone());
    let mut backups = BackupServiceClient::new(ch.clone());
    let created = vms
        .create_vm(authed(seed_vm("backed"), &m.token))
        .await
        .unwrap()
        .into_inner();
    let vm = created.vm.unwrap().id;
    succeeded(
        &ch,
        &m.token,
        &created.action.unwrap().id,
        Duration::from_secs(30),
    )
    .await;

    // Bad input is named by the REST field paths.
    let e = refused(
        backups.enable_backups(authed(
            pb::EnableBackupsRequest {
                id: vm.clone(),
                window: "25-01".into(),
                keep: 40,
            },
            &m.token,
        )),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["keep", "window"]);
    let e = refused(
        backups.restore(authed(
            pb::RestoreRequest {
                id: vm.clone(),
                backup: "nope".into(),
                into: "elsewhere".into(),
                name: String::new(),
            },
            &m.token,
        )),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["backup", "into"]);
    let e = refused(
        backups.backup(authed(
            pb::BackupRequest {
                vm: "nope".into(),
                ..Default::default()
            },
            &m.token,
        )),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["vm"]);

    // The policy, on the VM as GetVm and REST show it.
    let policy = pb::BackupPolicy {
        window: "22-02".into(),
        keep: 3,
    };
    let enabled = backups
        .enable_backups(authed(
            pb::EnableBackupsRequest {
                id: vm.clone(),
                window: "22-02".into(),
                keep: 3,
            },
            &m.token,
        ))
        .await
        .expect("enable")
        .into_inner();
    assert_eq!(enabled.vm.unwrap().backups.as_ref(), Some(&policy));
    let got = vms
        .get_vm(authed(pb::GetVmRequest { id: vm.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.backups.as_ref(), Some(&policy));
    assert_eq!(
        m.get(&format!("/v1/vms/{vm}")).await.body["vm"]["backups"],
        serde_json::json!({"window": "22-02", "keep": 3})
    );

    // A backup taken now.
    let taken = backups
        .backup(authed(
            pb::BackupRequest {
                vm: vm.clone(),
                name: "before".into(),
                labels: [("env".to_owned(), "test".to_owned())].into(),
            },
            &m.token,
        ))
        .await
        .expect("backup")
        .into_inner();
    let b = taken.backup.expect("the backup");
    assert_eq!(
        (
            b.status.as_str(),
            b.kind.as_str(),
            b.vm.as_str(),
            b.name.as_str()
        ),
        ("creating", "manual", vm.as_str(), "before")
    );
    let action = taken.action.expect("its action");
    assert_eq!(action.command, "create_backup");
    succeeded(&ch, &m.token, &action.id, Duration::from_secs(60)).await;
    let read = backups
        .get_backup(authed(pb::GetBackupRequest { id: b.id.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.status, "available", "{read:?}");
    assert!(
        read.volumes.iter().any(|v| v.kind == "boot"),
        "{:?}",
        read.volumes
    );
    assert!(read.expires.is_none(), "{read:?}");
    // As REST shows it.
    let rest = m.get(&format!("/v1/backups/{}", b.id)).await.body["backup"].clone();
    assert_eq!(read.host, rest["host"].as_str().unwrap());
    assert_eq!(u64::from(read.size), rest["size"].as_u64().unwrap());
    assert_eq!(
        read.volumes.len(),
        rest["volumes"].as_array().unwrap().len()
    );

    // Listed by its VM (and by a filter it fails, not).
    let list = |vm: &str, status: &[&str]| pb::ListBackupsRequest {
        options: Some(pb::ListOptions {
            status: status.iter().map(|s| (*s).to_owned()).collect(),
            ..Default::default()
        }),
        vm: vm.to_owned(),
    };
    let listed = backups
        .list_backups(authed(list(&vm, &[]), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.backups, std::slice::from_ref(&read));
    assert_eq!(listed.pagination.unwrap().total_entries, 1);
    let none = backups
        .list_backups(authed(list(&vm, &["error"]), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert!(none.backups.is_empty(), "{none:?}");
    let e = refused(
        backups.list_backups(authed(list("nope", &[]), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["vm"]);
    let renamed = backups
        .update_backup(authed(
            pb::UpdateBackupRequest {
                id: b.id.clone(),
                name: Some("before-2".into()),
                labels: None,
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renamed.backup.unwrap().name, "before-2");

    // Restored into a new VM, which names the backup.
    let restored = backups
        .restore(authed(
            pb::RestoreRequest {
                id: vm.clone(),
                backup: b.id.clone(),
                into: "new".into(),
                name: "backed-restored".into(),
            },
            &m.token,
        ))
        .await
        .expect("restore")
        .into_inner();
    let new = restored.vm.expect("the new VM");
    assert_ne!(new.id, vm);
    assert_eq!(new.name, "backed-restored");
    let action = restored.action.expect("its action");
    assert_eq!(action.command, "restore_vm");
    succeeded(&ch, &m.token, &action.id, Duration::from_secs(60)).await;
    let new = vms
        .get_vm(authed(pb::GetVmRequest { id: new.id }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(new.status, "running", "{new:?}");
    assert_eq!(
        new.specs.and_then(|s| s.backup).as_deref(),
        Some(b.id.as_str())
    );
    assert_eq!(new.backups, None);

    // Disabled: the policy is gone.
    let disabled = backups
        .disable_backups(authed(
            pb::DisableBackupsRequest { id: vm.clone() },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(disabled.backups, None);

    let deleting = backups
        .delete_backup(authed(
            pb::DeleteBackupRequest { id: b.id.clone() },
            &m.token,
        ))
        .await
        .expect("delete")
        .into_inner();
    assert_eq!(deleting.command, "delete_backup");
    succeeded(&ch, &m.token, &deleting.id, Duration::from_secs(60)).await;
    refused(
        backups.get_backup(authed(pb::GetBackupRequest { id: b.id }, &m.token)),
        Code::NotFound,
    )
    .await;
    m.stop().await;
}

#[tokio::test]
async fn a_console_is_requested_listed_read_and_deleted_over_grpc() {
    use pb::console_service_client::ConsoleServiceClient;
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut vms = pb::vm_service_client::VmServiceClient::new(ch.clone());
    let mut consoles = ConsoleServiceClient::new(ch.clone());
    let created = vms
        .create_vm(authed(seed_vm("watched"), &m.token))
        .await
        .unwrap()
        .into_inner();
    let vm = created.vm.unwrap().id;
    succeeded(
        &ch,
        &m.token,
        &created.action.unwrap().id,
        Duration::from_secs(30),
    )
    .await;

    // Bad input is named as REST names it.
    let request = |id: &str| pb::RequestConsoleRequest { id: id.into() };
    let e = refused(
        consoles.request_console(authed(request("nope"), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["id"]);
    let list = |vm: Option<&str>, status: &[&str], limit: Option<u32>| pb::ListConsolesRequest {
        vm: vm.map(str::to_owned),
        status: status.iter().map(|s| (*s).to_owned()).collect(),
        limit,
    };
    for (bad, field) in [
        (list(Some("nope"), &[], None), "vm"),
        (list(None, &["opened"], None), "status"),
        (list(None, &[], Some(0)), "limit"),
        (list(None, &[], Some(101)), "limit"),
    ] {
        let e = refused(
            consoles.list_consoles(authed(bad, &m.token)),
            Code::InvalidArgument,
        )
        .await;
        assert_eq!(rejected_fields(&e), [field]);
    }

    // Requested: a WebSocket URL on the REST API, and a VNC password.
    let requested = consoles
        .request_console(authed(request(&vm), &m.token))
        .await
        .expect("request a console")
        .into_inner();
    let c = requested.console.clone().expect("the console");
    assert_eq!(
        (c.status.as_str(), c.vm.as_str()),
        ("requested", vm.as_str())
    );
    let url = &requested.wss_url;
    assert!(
        url.starts_with(&format!("ws://{}/", m.dev().http_addr)),
        "{url}"
    );
    assert!(
        url.contains(&format!("/v1/consoles/{}/websocket?token=", c.id)),
        "{url}"
    );
    assert_eq!(requested.password.chars().count(), 8, "{requested:?}");
    assert!(
        c.expires.as_ref().unwrap().seconds > c.created.as_ref().unwrap().seconds,
        "{c:?}"
    );
    assert_eq!(
        (&c.opened, &c.closed, &c.close_reason),
        (&None, &None, &None)
    );

    // Read and listed, as REST shows it.
    let get = |id: &str| pb::GetConsoleRequest { id: id.into() };
    let read = consoles
        .get_console(authed(get(&c.id), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read, c);
    let rest = m.get(&format!("/v1/consoles/{}", c.id)).await.body["console"].clone();
    assert_eq!(rest["status"], "requested");
    assert_eq!(rest["vm"].as_str(), Some(vm.as_str()));
    assert_eq!(rest["requested_by"].as_str(), Some(c.requested_by.as_str()));
    let listed = consoles
        .list_consoles(authed(list(Some(&vm), &["requested"], Some(10)), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.consoles, std::slice::from_ref(&c));
    let none = consoles
        .list_consoles(authed(list(None, &["open", "closed"], None), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert!(none.consoles.is_empty(), "{none:?}");

    // Deleted before it was used: revoked; deleted again: a conflict.
    let delete = |id: &str| pb::DeleteConsoleRequest { id: id.into() };
    let ended = consoles
        .delete_console(authed(delete(&c.id), &m.token))
        .await
        .expect("delete")
        .into_inner();
    assert_eq!(
        (ended.id.as_str(), ended.status.as_str()),
        (c.id.as_str(), "revoked")
    );
    assert!(ended.closed.is_some(), "{ended:?}");
    assert!(
        ended
            .close_reason
            .as_deref()
            .is_some_and(|r| r.starts_with("ended by ")),
        "{ended:?}"
    );
    let e = refused(
        consoles.delete_console(authed(delete(&c.id), &m.token)),
        Code::FailedPrecondition,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "conflict"
    );
    let read = consoles
        .get_console(authed(get(&c.id), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read, ended);
    let revoked = consoles
        .list_consoles(authed(list(None, &["revoked"], None), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(revoked.consoles, [ended]);
    let e = refused(
        consoles.get_console(authed(get("nope"), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["id"]);
    refused(
        consoles.get_console(authed(get(&uuid::Uuid::new_v4().to_string()), &m.token)),
        Code::NotFound,
    )
    .await;
    m.stop().await;
}

#[tokio::test]
async fn a_token_is_created_used_listed_and_revoked_over_grpc() {
    use pb::token_service_client::TokenServiceClient;
    use pb::vm_service_client::VmServiceClient;
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut tokens = TokenServiceClient::new(ch.clone());
    let mut vms = VmServiceClient::new(ch.clone());
    let create = |name: &str, role: &str, expires_in: Option<i64>| pb::CreateTokenRequest {
        name: name.into(),
        role: role.into(),
        expires_in,
    };

    // Bad input is named as REST names it.
    for (bad, fields) in [
        (create("x", "admin", None), vec!["role"]),
        (create("", "", None), vec!["name", "role"]),
        (create("x", "viewer", Some(0)), vec!["expires_in"]),
        (create("x", "viewer", Some(5)), vec!["expires_in"]),
        (create(&"x".repeat(65), "viewer", None), vec!["name"]),
    ] {
        let e = refused(
            tokens.create_token(authed(bad.clone(), &m.token)),
            Code::InvalidArgument,
        )
        .await;
        assert_eq!(rejected_fields(&e), fields, "{bad:?}");
    }

    // Created: the token and its secret, shown this once.
    let created = tokens
        .create_token(authed(create("ci", "editor", Some(3600)), &m.token))
        .await
        .expect("create a token")
        .into_inner();
    let secret = created.secret.clone();
    let t = created.token.clone().expect("the token");
    assert!(
        secret.starts_with("meson_") && secret.len() == 46,
        "{created:?}"
    );
    assert!(
        secret[6..].chars().all(|c| c.is_ascii_alphanumeric()),
        "{secret}"
    );
    assert_eq!(t.prefix, secret[..12], "{t:?}");
    assert_eq!((t.name.as_str(), t.role.as_str()), ("ci", "editor"));
    assert_eq!(t.created_by, "dev");
    let expires = t.expires.as_ref().expect("an expiry").seconds;
    let made = t.created.as_ref().expect("created").seconds;
    assert!((3599..=3601).contains(&(expires - made)), "{t:?}");
    assert_eq!(
        (&t.last_used, &t.revoked, &t.revoked_by),
        (&None, &None, &None)
    );
    assert!(created.warnings.is_empty(), "{created:?}");
    // A live token's name is taken.
    let e = tokens
        .create_token(authed(create("ci", "viewer", None), &m.token))
        .await
        .expect_err("a second `ci`");
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "uniqueness_error",
        "{e:?}"
    );

    // The secret authenticates a gRPC call as the tenant, at its role, as
    // `token:<id>`.
    let listed = vms
        .list_vms(authed(pb::ListVmsRequest::default(), &secret))
        .await
        .expect("VMs listed with the token")
        .into_inner();
    assert!(listed.vms.is_empty(), "{listed:?}");
    let vm = vms
        .create_vm(authed(seed_vm("by-token"), &secret))
        .await
        .expect("an editor's token creates a VM")
        .into_inner()
        .vm
        .expect("the VM");
    let rest = m.get(&format!("/v1/vms/{}", vm.id)).await;
    assert_eq!(rest.status, reqwest::StatusCode::OK, "{}", rest.body);
    let audit = m.get("/v1/audit?operation=vm_create").await.body;
    let entry = audit["audit_entries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["resource_id"] == vm.id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("no entry for {}: {audit}", vm.id));
    assert_eq!(entry["subject"], format!("token:{}", t.id), "{entry}");
    assert_eq!(entry["role"], "editor", "{entry}");
    // An editor manages no tokens.
    refused(
        tokens.list_tokens(authed(pb::ListTokensRequest::default(), &secret)),
        Code::PermissionDenied,
    )
    .await;

    // Listed and read as REST shows it (never the secret), its use noted.
    let get = |id: &str| pb::GetTokenRequest { id: id.into() };
    let read = tokens
        .get_token(authed(get(&t.id), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((&read.id, &read.prefix), (&t.id, &t.prefix));
    assert!(read.last_used.is_some(), "{read:?}");
    let rest = m.get(&format!("/v1/tokens/{}", t.id)).await.body["token"].clone();
    assert_eq!(rest["prefix"].as_str(), Some(t.prefix.as_str()), "{rest}");
    assert_eq!(rest["role"], "editor");
    let live = tokens
        .list_tokens(authed(pb::ListTokensRequest { revoked: false }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(live.tokens, std::slice::from_ref(&read));
    assert!(!format!("{live:?}").contains(&secret[6..]));

    // Revoked: the very next call with its secret is refused.
    let revoke = |id: &str| pb::RevokeTokenRequest { id: id.into() };
    let revoked = tokens
        .revoke_token(authed(revoke(&t.id), &m.token))
        .await
        .expect("revoke")
        .into_inner();
    assert_eq!(revoked.id, t.id);
    assert!(revoked.revoked.is_some(), "{revoked:?}");
    assert_eq!(revoked.revoked_by.as_deref(), Some("dev"));
    let e = refused(
        vms.list_vms(authed(pb::ListVmsRequest::default(), &secret)),
        Code::Unauthenticated,
    )
    .await;
    assert_eq!(e.message(), "unauthorized");
    let e = refused(
        tokens.revoke_token(authed(revoke(&t.id), &m.token)),
        Code::FailedPrecondition,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "conflict"
    );
    let live = tokens
        .list_tokens(authed(pb::ListTokensRequest { revoked: false }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert!(live.tokens.is_empty(), "{live:?}");
    let all = tokens
        .list_tokens(authed(pb::ListTokensRequest { revoked: true }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.tokens, std::slice::from_ref(&revoked));
    let read = tokens
        .get_token(authed(get(&t.id), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read, revoked);
    // Its name is free again.
    tokens
        .create_token(authed(create("ci", "viewer", None), &m.token))
        .await
        .expect("`ci` again");

    // Bad or unknown ids.
    for e in [
        refused(
            tokens.get_token(authed(get("nope"), &m.token)),
            Code::InvalidArgument,
        )
        .await,
        refused(
            tokens.revoke_token(authed(revoke(""), &m.token)),
            Code::InvalidArgument,
        )
        .await,
    ] {
        assert_eq!(rejected_fields(&e), ["id"]);
    }
    refused(
        tokens.get_token(authed(get(&uuid::Uuid::new_v4().to_string()), &m.token)),
        Code::NotFound,
    )
    .await;
    m.stop().await;
}

/// `msg` with `token`, acting in `organization` (the `meson-organization`
/// metadata).
fn in_org<T>(msg: T, token: &str, organization: &str) -> tonic::Request<T> {
    let mut r = authed(msg, token);
    r.metadata_mut().insert(
        "meson-organization",
        organization.parse().expect("metadata"),
    );
    r
}

#[tokio::test]
async fn members_are_added_changed_used_and_removed_over_grpc() {
    use meson_api::Role;
    use pb::member_service_client::MemberServiceClient;
    use pb::vm_service_client::VmServiceClient;
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut members = MemberServiceClient::new(ch.clone());
    let mut vms = VmServiceClient::new(ch.clone());
    let owner = m.token("dev", "olga", Role::Owner);
    let add = |subject: &str, role: &str, email: Option<&str>| pb::CreateMemberRequest {
        subject: subject.into(),
        role: role.into(),
        email: email.map(str::to_owned),
    };

    // Bad input is named as REST names it.
    for (bad, fields) in [
        (add("", "", None), vec!["role", "subject"]),
        (add("ann", "admin", None), vec!["role"]),
        (add("ann", "viewer", Some("nope")), vec!["email"]),
        (add(&"x".repeat(256), "viewer", None), vec!["subject"]),
    ] {
        let e = refused(
            members.create_member(authed(bad.clone(), &owner)),
            Code::InvalidArgument,
        )
        .await;
        assert_eq!(rejected_fields(&e), fields, "{bad:?}");
    }

    // Added: a subject of another organisation, as an editor here.
    let made = members
        .create_member(authed(
            add("auth0|ann", "editor", Some("Ann@Example.com")),
            &owner,
        ))
        .await
        .expect("add a member")
        .into_inner();
    assert!(made.warnings.is_empty(), "{made:?}");
    let ann = made.member.expect("the member");
    assert_eq!(
        (
            ann.subject.as_str(),
            ann.role.as_str(),
            ann.added_by.as_str()
        ),
        ("auth0|ann", "editor", "olga")
    );
    assert_eq!(ann.email.as_deref(), Some("ann@example.com"));
    assert!(ann.created.is_some() && ann.updated.is_some(), "{ann:?}");
    let e = refused(
        members.create_member(authed(add("auth0|ann", "viewer", None), &owner)),
        Code::AlreadyExists,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "uniqueness_error"
    );
    // Audited with its subject.
    let audit = m.get("/v1/audit?operation=member_create").await.body;
    assert!(
        audit["audit_entries"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["resource_id"] == "auth0|ann" && e["status"] == 200),
        "{audit}"
    );

    // Read and listed as REST shows it.
    let get = |s: &str| pb::GetMemberRequest { subject: s.into() };
    let read = members
        .get_member(authed(get("auth0|ann"), &owner))
        .await
        .expect("get")
        .into_inner();
    assert_eq!(read, ann);
    let rest = m.get("/v1/members/auth0%7Cann").await;
    assert_eq!(rest.status, reqwest::StatusCode::OK, "{}", rest.body);
    assert_eq!(rest.body["member"]["role"], "editor", "{}", rest.body);
    let listed = members
        .list_members(authed(pb::ListMembersRequest {}, &owner))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.members, std::slice::from_ref(&ann));

    // Ann acts in `dev` with `meson-organization`, at her role there,
    // while her token names her own organisation.
    let ann_token = m.token("ann-co", "auth0|ann", Role::Owner);
    let mine = members
        .list_memberships(authed(pb::ListMembershipsRequest {}, &ann_token))
        .await
        .expect("memberships")
        .into_inner();
    assert_eq!(mine.subject, "auth0|ann");
    let orgs: Vec<(&str, &str, &str)> = mine
        .memberships
        .iter()
        .map(|o| (o.organization.as_str(), o.role.as_str(), o.via.as_str()))
        .collect();
    assert_eq!(
        orgs,
        [("ann-co", "owner", "token"), ("dev", "editor", "member")]
    );
    let vm = vms
        .create_vm(in_org(seed_vm("anns"), &ann_token, "dev"))
        .await
        .expect("an editor of dev creates a VM there")
        .into_inner()
        .vm
        .expect("the VM");
    let rest = m.get(&format!("/v1/vms/{}", vm.id)).await;
    assert_eq!(
        rest.status,
        reqwest::StatusCode::OK,
        "dev's VM: {}",
        rest.body
    );
    let theirs = members
        .list_members(in_org(pb::ListMembersRequest {}, &ann_token, "dev"))
        .await
        .expect("a member lists the members")
        .into_inner();
    assert_eq!(theirs.members, std::slice::from_ref(&ann));
    let own = members
        .list_members(authed(pb::ListMembersRequest {}, &ann_token))
        .await
        .expect("her own organisation's")
        .into_inner();
    assert!(own.members.is_empty(), "{own:?}");
    // An editor manages no members; nobody acts where it has no standing;
    // a blank organisation is a bad one.
    refused(
        members.create_member(in_org(add("auth0|bob", "viewer", None), &ann_token, "dev")),
        Code::PermissionDenied,
    )
    .await;
    let stranger = m.token("elsewhere", "auth0|eve", Role::Owner);
    let e = refused(
        members.list_members(in_org(pb::ListMembersRequest {}, &stranger, "dev")),
        Code::PermissionDenied,
    )
    .await;
    assert!(
        e.message().contains("not a member of organisation dev"),
        "{e:?}"
    );
    let e = refused(
        members.list_members(in_org(pb::ListMembersRequest {}, &ann_token, " ")),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["meson-organization"]);

    // Promoted to manager: she adds members up to her role, never above.
    let update = |s: &str, role: &str| pb::UpdateMemberRequest {
        subject: s.into(),
        role: role.into(),
        ..Default::default()
    };
    let promoted = members
        .update_member(authed(update("auth0|ann", "manager"), &owner))
        .await
        .expect("update")
        .into_inner()
        .member
        .expect("the member");
    assert_eq!(promoted.role, "manager");
    let bob = members
        .create_member(in_org(add("auth0|bob", "editor", None), &ann_token, "dev"))
        .await
        .expect("a manager adds a member")
        .into_inner()
        .member
        .expect("the member");
    assert_eq!(
        (bob.added_by.as_str(), bob.email.as_deref()),
        ("auth0|ann", None)
    );
    let e = refused(
        members.create_member(in_org(add("auth0|cy", "owner", None), &ann_token, "dev")),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["role"]);
    let e = refused(
        members.update_member(authed(update("auth0|ann", "admin"), &owner)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["role"]);

    // Removed: the member it was; gone after.
    let delete = |s: &str| pb::DeleteMemberRequest { subject: s.into() };
    let gone = members
        .delete_member(authed(delete("auth0|bob"), &owner))
        .await
        .expect("delete")
        .into_inner();
    assert_eq!(gone.subject, "auth0|bob");
    refused(
        members.get_member(authed(get("auth0|bob"), &owner)),
        Code::NotFound,
    )
    .await;
    refused(
        members.delete_member(authed(delete("auth0|bob"), &owner)),
        Code::NotFound,
    )
    .await;
    for e in [
        refused(
            members.get_member(authed(get(""), &owner)),
            Code::InvalidArgument,
        )
        .await,
        refused(
            members.update_member(authed(update("", "viewer"), &owner)),
            Code::InvalidArgument,
        )
        .await,
        refused(
            members.delete_member(authed(delete(""), &owner)),
            Code::InvalidArgument,
        )
        .await,
    ] {
        assert_eq!(rejected_fields(&e), ["subject"]);
    }

    // Ann leaves `dev`: she acts there no more. Her own organisation's
    // claims are no membership to leave.
    let left = members
        .leave_membership(in_org(pb::LeaveMembershipRequest {}, &ann_token, "dev"))
        .await
        .expect("leave")
        .into_inner();
    assert_eq!(
        (left.subject.as_str(), left.role.as_str()),
        ("auth0|ann", "manager")
    );
    refused(
        members.list_members(in_org(pb::ListMembersRequest {}, &ann_token, "dev")),
        Code::PermissionDenied,
    )
    .await;
    refused(
        members.leave_membership(authed(pb::LeaveMembershipRequest {}, &ann_token)),
        Code::NotFound,
    )
    .await;
    let mine = members
        .list_memberships(authed(pb::ListMembershipsRequest {}, &ann_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(mine.memberships.len(), 1, "{mine:?}");
    let listed = members
        .list_members(authed(pb::ListMembersRequest {}, &owner))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.members.is_empty(), "{listed:?}");
    m.stop().await;
}

#[tokio::test]
async fn invitations_are_made_listed_revoked_and_accepted_over_grpc() {
    use meson_api::Role;
    use pb::invitation_service_client::InvitationServiceClient;
    use pb::member_service_client::MemberServiceClient;
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut invitations = InvitationServiceClient::new(ch.clone());
    let mut members = MemberServiceClient::new(ch.clone());
    let owner = m.token("dev", "olga", Role::Owner);
    let invite = |email: &str, role: &str, expires_in: Option<i64>| pb::CreateInvitationRequest {
        email: email.into(),
        role: role.into(),
        expires_in,
    };

    // Bad input is named as REST names it.
    for (bad, fields) in [
        (invite("", "", None), vec!["email", "role"]),
        (invite("bob@example.com", "admin", None), vec!["role"]),
        (invite("bob@", "viewer", None), vec!["email"]),
        (
            invite("bob@example.com", "viewer", Some(0)),
            vec!["expires_in"],
        ),
        (
            invite("bob@example.com", "viewer", Some(60)),
            vec!["expires_in"],
        ),
    ] {
        let e = refused(
            invitations.create_invitation(authed(bad.clone(), &owner)),
            Code::InvalidArgument,
        )
        .await;
        assert_eq!(rejected_fields(&e), fields, "{bad:?}");
    }

    // Made: the invitation and its token, shown this once.
    let made = invitations
        .create_invitation(authed(
            invite("Bob@Example.com", "editor", Some(86_400)),
            &owner,
        ))
        .await
        .expect("invite")
        .into_inner();
    let first = made.invitation.clone().expect("the invitation");
    assert!(made.token.starts_with("mesoninv_"), "{made:?}");
    assert!(made.warnings.is_empty(), "{made:?}");
    assert_eq!(
        (
            first.organization.as_str(),
            first.email.as_str(),
            first.role.as_str(),
            first.status.as_str(),
            first.invited_by.as_str()
        ),
        ("dev", "bob@example.com", "editor", "pending", "olga")
    );
    let expires = first.expires.as_ref().expect("expires").seconds;
    let created = first.created.as_ref().expect("created").seconds;
    assert!(
        (86_399..=86_401).contains(&(expires - created)),
        "{first:?}"
    );
    assert_eq!(
        (
            &first.accepted,
            &first.accepted_by,
            &first.revoked,
            &first.revoked_by
        ),
        (&None, &None, &None, &None)
    );
    // One open invitation per address.
    let e = refused(
        invitations.create_invitation(authed(invite("bob@example.com", "viewer", None), &owner)),
        Code::AlreadyExists,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "uniqueness_error"
    );

    // Listed and read as REST shows it (never its token).
    let get = |id: &str| pb::GetInvitationRequest { id: id.into() };
    let read = invitations
        .get_invitation(authed(get(&first.id), &owner))
        .await
        .expect("get")
        .into_inner();
    assert_eq!(read, first);
    let listed = invitations
        .list_invitations(authed(pb::ListInvitationsRequest {}, &owner))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.invitations, std::slice::from_ref(&first));
    assert!(!format!("{listed:?}").contains(&made.token));
    let rest = m.get(&format!("/v1/invitations/{}", first.id)).await;
    assert_eq!(
        rest.body["invitation"]["status"], "pending",
        "{}",
        rest.body
    );
    // Viewers and editors see no invitations.
    let editor = m.token("dev", "ed", Role::Editor);
    refused(
        invitations.list_invitations(authed(pb::ListInvitationsRequest {}, &editor)),
        Code::PermissionDenied,
    )
    .await;

    // Revoked: the record stays; revoked again, a conflict; its token
    // accepts nothing.
    let revoke = |id: &str| pb::RevokeInvitationRequest { id: id.into() };
    let revoked = invitations
        .revoke_invitation(authed(revoke(&first.id), &owner))
        .await
        .expect("revoke")
        .into_inner();
    assert_eq!(
        (revoked.id.as_str(), revoked.status.as_str()),
        (first.id.as_str(), "revoked")
    );
    assert!(revoked.revoked.is_some(), "{revoked:?}");
    assert_eq!(revoked.revoked_by.as_deref(), Some("olga"));
    let e = refused(
        invitations.revoke_invitation(authed(revoke(&first.id), &owner)),
        Code::FailedPrecondition,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "conflict"
    );
    let bob = m.token_with_email("bob-co", "auth0|bob", Role::Owner, "bob@example.com");
    let accept = |token: &str| pb::AcceptInvitationRequest {
        token: token.into(),
    };
    refused(
        invitations.accept_invitation(authed(accept(&made.token), &bob)),
        Code::FailedPrecondition,
    )
    .await;

    // Another, accepted by Bob signed in with that verified address: a
    // member of `dev`, whatever his token's organisation.
    let again = invitations
        .create_invitation(authed(invite("bob@example.com", "viewer", None), &owner))
        .await
        .expect("invite again")
        .into_inner();
    let second = again.invitation.clone().expect("the invitation");
    let e = refused(
        invitations.accept_invitation(authed(accept("meson_nope"), &bob)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["token"]);
    // Nobody else may: no verified email, or another one.
    refused(
        invitations.accept_invitation(authed(accept(&again.token), &owner)),
        Code::PermissionDenied,
    )
    .await;
    let eve = m.token_with_email("eve-co", "auth0|eve", Role::Owner, "eve@example.com");
    refused(
        invitations.accept_invitation(authed(accept(&again.token), &eve)),
        Code::PermissionDenied,
    )
    .await;
    let accepted = invitations
        .accept_invitation(authed(accept(&again.token), &bob))
        .await
        .expect("accept")
        .into_inner();
    let member = accepted.member.expect("the member");
    let invitation = accepted.invitation.expect("the invitation");
    assert_eq!(
        (member.subject.as_str(), member.role.as_str()),
        ("auth0|bob", "viewer")
    );
    assert_eq!(member.email.as_deref(), Some("bob@example.com"));
    assert_eq!(
        (invitation.id.as_str(), invitation.status.as_str()),
        (second.id.as_str(), "accepted")
    );
    assert_eq!(invitation.accepted_by.as_deref(), Some("auth0|bob"));
    let mine = members
        .list_memberships(authed(pb::ListMembershipsRequest {}, &bob))
        .await
        .unwrap()
        .into_inner();
    assert!(
        mine.memberships
            .iter()
            .any(|o| o.organization == "dev" && o.role == "viewer" && o.via == "member"),
        "{mine:?}"
    );
    refused(
        invitations.accept_invitation(authed(accept(&again.token), &bob)),
        Code::FailedPrecondition,
    )
    .await;
    let all = invitations
        .list_invitations(authed(pb::ListInvitationsRequest {}, &owner))
        .await
        .unwrap()
        .into_inner();
    let statuses: Vec<&str> = all.invitations.iter().map(|i| i.status.as_str()).collect();
    assert_eq!(statuses, ["accepted", "revoked"], "newest first: {all:?}");

    // Bad or unknown ids.
    for e in [
        refused(
            invitations.get_invitation(authed(get("nope"), &owner)),
            Code::InvalidArgument,
        )
        .await,
        refused(
            invitations.revoke_invitation(authed(revoke(""), &owner)),
            Code::InvalidArgument,
        )
        .await,
    ] {
        assert_eq!(rejected_fields(&e), ["id"]);
    }
    refused(
        invitations.get_invitation(authed(get(&uuid::Uuid::new_v4().to_string()), &owner)),
        Code::NotFound,
    )
    .await;
    m.stop().await;
}

#[tokio::test]
async fn sub_organisations_are_carved_listed_changed_and_ended_over_grpc() {
    use meson_api::Role;
    use pb::organization_service_client::OrganizationServiceClient;
    use pb::quota_service_client::QuotaServiceClient;
    let m = Meson::start().await;
    let r = m
        .patch(
            "/v1/tenants/acme/quotas",
            &serde_json::json!({"vms": 5, "vcpus": 16, "nodes": 0, "clusters": 0}),
        )
        .await;
    assert_eq!(r.status, reqwest::StatusCode::OK, "{}", r.body);
    let ch = channel(&m).await;
    let mut orgs = OrganizationServiceClient::new(ch.clone());
    let quotas = QuotaServiceClient::new(ch.clone());
    let olga = m.token("acme", "olga", Role::Owner);
    let amounts = |q: &[(&str, i64)]| -> HashMap<String, i64> {
        q.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    };
    let create = |name: &str, q: &[(&str, i64)]| pb::CreateOrganizationRequest {
        name: name.into(),
        quotas: amounts(q),
    };
    let update = |id: &str, q: &[(&str, i64)]| pb::UpdateOrganizationRequest {
        id: id.into(),
        quotas: amounts(q),
    };
    let get = |id: &str| pb::GetOrganizationRequest { id: id.into() };
    let delete = |id: &str| pb::DeleteOrganizationRequest { id: id.into() };
    // What `org` holds and may hold of `name`: (current, quota).
    let quota_of = |org: &str, name: &str| {
        let (mut quotas, olga, org, name) = (
            quotas.clone(),
            olga.clone(),
            org.to_owned(),
            name.to_owned(),
        );
        async move {
            let q = quotas
                .get_quota(in_org(pb::GetQuotaRequest {}, &olga, &org))
                .await
                .expect("quota")
                .into_inner();
            let l = q
                .limits
                .iter()
                .find(|l| l.name == name)
                .unwrap_or_else(|| panic!("no {name} in {q:?}"));
            (l.current, l.quota)
        }
    };

    // Bad input is named as REST names it.
    for (bad, fields) in [
        (create("", &[]), vec!["name"]),
        (
            create("Platform", &[("vms", -1), ("gpus", 1)]),
            vec!["name", "quotas.gpus", "quotas.vms"],
        ),
    ] {
        let e = refused(
            orgs.create_organization(authed(bad.clone(), &olga)),
            Code::InvalidArgument,
        )
        .await;
        assert_eq!(rejected_fields(&e), fields, "{bad:?}");
    }

    // Created: `acme.platform`, every quota given, those not named none.
    let platform = orgs
        .create_organization(authed(
            create(
                "platform",
                &[
                    ("vms", 3),
                    ("vcpus", 8),
                    ("ram_mib", 65_536),
                    ("storage_gb", 500),
                ],
            ),
            &olga,
        ))
        .await
        .expect("create a sub-organisation")
        .into_inner();
    assert_eq!(
        (
            platform.id.as_str(),
            platform.name.as_str(),
            platform.parent.as_deref(),
            platform.depth,
            platform.created_by.as_str()
        ),
        ("acme.platform", "platform", Some("acme"), 1, "olga")
    );
    assert_eq!(
        platform.quotas,
        amounts(&[
            ("vms", 3),
            ("vcpus", 8),
            ("ram_mib", 65_536),
            ("storage_gb", 500),
            ("clusters", 0),
            ("nodes", 0),
            ("images_gb", 0),
        ])
    );
    assert!(platform.created.is_some(), "{platform:?}");
    // The carve counts as acme's.
    assert_eq!(quota_of("acme", "vms").await, (3, 5));
    assert_eq!(quota_of("acme", "vcpus").await, (8, 16));
    // Audited with its id.
    let audit = m.get("/v1/audit?operation=organization_create").await.body;
    assert!(
        audit["audit_entries"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["resource_id"] == "acme.platform" && e["status"] == 200),
        "{audit}"
    );
    let e = refused(
        orgs.create_organization(authed(create("platform", &[]), &olga)),
        Code::AlreadyExists,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "uniqueness_error"
    );
    // What does not fit beside acme's other carve is refused, each quota
    // named, and nothing is kept.
    let e = refused(
        orgs.create_organization(authed(create("data", &[("vms", 3), ("vcpus", 10)]), &olga)),
        Code::ResourceExhausted,
    )
    .await;
    let d = e.get_error_details();
    assert_eq!(d.error_info().unwrap().reason, "resource_limit_exceeded");
    let mut named: Vec<&str> = d
        .quota_failure()
        .expect("QuotaFailure")
        .violations
        .iter()
        .map(|v| v.subject.as_str())
        .collect();
    named.sort();
    assert_eq!(named, ["vcpus", "vms"], "{e:?}");
    assert_eq!(quota_of("acme", "vms").await, (3, 5));
    refused(
        orgs.get_organization(authed(get("acme.data"), &olga)),
        Code::NotFound,
    )
    .await;
    let data = orgs
        .create_organization(authed(create("data", &[("vms", 1)]), &olga))
        .await
        .expect("one that fits")
        .into_inner();
    assert_eq!(data.quotas["vms"], 1);
    assert_eq!(quota_of("acme", "vms").await, (4, 5));

    // Listed: acme first (a root: no quotas), then those below by id; read
    // as REST shows it.
    let listed = orgs
        .list_organizations(authed(pb::ListOrganizationsRequest {}, &olga))
        .await
        .expect("list")
        .into_inner()
        .organizations;
    let ids: Vec<&str> = listed.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, ["acme", "acme.data", "acme.platform"]);
    assert_eq!(
        (listed[0].parent.as_deref(), listed[0].depth),
        (None, 0),
        "{listed:?}"
    );
    assert!(listed[0].quotas.is_empty(), "{listed:?}");
    assert_eq!(listed[2], platform);
    let read = orgs
        .get_organization(authed(get("acme.platform"), &olga))
        .await
        .expect("get")
        .into_inner();
    assert_eq!(read, platform);
    let rest = m
        .call(
            reqwest::Method::GET,
            "/v1/organizations/acme.platform",
            &olga,
            None,
        )
        .await;
    assert_eq!(
        rest.body["organization"]["quotas"]["storage_gb"], 500,
        "{}",
        rest.body
    );
    // acme's viewers read the tree; its editors make no sub-organisation.
    let viewer = m.token("acme", "vic", Role::Viewer);
    let seen = orgs
        .list_organizations(authed(pb::ListOrganizationsRequest {}, &viewer))
        .await
        .expect("a viewer lists")
        .into_inner();
    assert_eq!(seen.organizations.len(), 3, "{seen:?}");
    let editor = m.token("acme", "ed", Role::Editor);
    refused(
        orgs.create_organization(authed(create("mine", &[]), &editor)),
        Code::PermissionDenied,
    )
    .await;
    // acme's managers act in acme.platform at their role (no more: a
    // manager makes no sub-organisation); its editors do not act there.
    let manager = m.token("acme", "mia", Role::Manager);
    let theirs = orgs
        .list_organizations(in_org(
            pb::ListOrganizationsRequest {},
            &manager,
            "acme.platform",
        ))
        .await
        .expect("a manager of acme lists in acme.platform")
        .into_inner();
    let ids: Vec<&str> = theirs.organizations.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, ["acme.platform"], "{theirs:?}");
    assert_eq!(theirs.organizations[0].depth, 0);
    refused(
        orgs.create_organization(in_org(create("web", &[]), &manager, "acme.platform")),
        Code::PermissionDenied,
    )
    .await;
    refused(
        orgs.list_organizations(in_org(
            pb::ListOrganizationsRequest {},
            &editor,
            "acme.platform",
        )),
        Code::PermissionDenied,
    )
    .await;
    // Another organisation's owner sees none of it.
    let eve = m.token("evil", "eve", Role::Owner);
    refused(
        orgs.get_organization(authed(get("acme.platform"), &eve)),
        Code::NotFound,
    )
    .await;
    refused(
        orgs.delete_organization(authed(delete("acme.platform"), &eve)),
        Code::NotFound,
    )
    .await;

    // A rise past the parent's is refused, naming the quota; a cut always
    // passes, the quotas not named stay.
    let e = refused(
        orgs.update_organization(authed(update("acme.platform", &[("vms", 5)]), &olga)),
        Code::ResourceExhausted,
    )
    .await;
    let violations = e
        .get_error_details()
        .quota_failure()
        .unwrap()
        .violations
        .clone();
    assert_eq!(violations.len(), 1, "{e:?}");
    assert_eq!(violations[0].subject, "vms");
    let cut = orgs
        .update_organization(authed(update("acme.platform", &[("vms", 1)]), &olga))
        .await
        .expect("a cut")
        .into_inner();
    assert_eq!((cut.quotas["vms"], cut.quotas["vcpus"]), (1, 8));
    assert_eq!(quota_of("acme", "vms").await, (2, 5));
    let e = refused(
        orgs.update_organization(authed(update("acme.platform", &[]), &olga)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["quotas"]);
    let e = refused(
        orgs.update_organization(authed(update("acme.platform", &[("cpus", 1)]), &olga)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["quotas.cpus"]);
    // A sub-organisation sets not its own quotas, nor ends itself.
    refused(
        orgs.update_organization(in_org(
            update("acme.platform", &[("vms", 3)]),
            &olga,
            "acme.platform",
        )),
        Code::PermissionDenied,
    )
    .await;
    refused(
        orgs.delete_organization(in_org(delete("acme.platform"), &olga, "acme.platform")),
        Code::PermissionDenied,
    )
    .await;

    // acme's owner, acting in acme.platform, carves one out of it in turn:
    // within acme.platform's quotas, not acme's.
    let e = refused(
        orgs.create_organization(in_org(create("web", &[("vms", 2)]), &olga, "acme.platform")),
        Code::ResourceExhausted,
    )
    .await;
    assert_eq!(
        e.get_error_details().quota_failure().unwrap().violations[0].subject,
        "vms"
    );
    let web = orgs
        .create_organization(in_org(
            create("web", &[("vms", 1), ("vcpus", 2)]),
            &olga,
            "acme.platform",
        ))
        .await
        .expect("a sub-organisation of a sub-organisation")
        .into_inner();
    assert_eq!(
        (web.id.as_str(), web.parent.as_deref()),
        ("acme.platform.web", Some("acme.platform"))
    );
    assert_eq!(quota_of("acme.platform", "vms").await, (1, 1));
    // The parent's quotas are unchanged by a carve below a carve.
    assert_eq!(quota_of("acme", "vms").await, (2, 5));
    let all = orgs
        .list_organizations(authed(pb::ListOrganizationsRequest {}, &olga))
        .await
        .unwrap()
        .into_inner()
        .organizations;
    let tree: Vec<(&str, i32)> = all.iter().map(|o| (o.id.as_str(), o.depth)).collect();
    assert_eq!(
        tree,
        [
            ("acme", 0),
            ("acme.data", 1),
            ("acme.platform", 1),
            ("acme.platform.web", 2)
        ]
    );

    // Ended only once nothing is below it: the sub-organisation it was,
    // gone after, its quotas back with acme.
    let e = refused(
        orgs.delete_organization(authed(delete("acme.platform"), &olga)),
        Code::FailedPrecondition,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "conflict"
    );
    assert!(e.message().contains("acme.platform.web"), "{e:?}");
    let gone = orgs
        .delete_organization(authed(delete("acme.platform.web"), &olga))
        .await
        .expect("end the one below")
        .into_inner();
    assert_eq!(gone.id, "acme.platform.web");
    assert_eq!(quota_of("acme.platform", "vms").await, (0, 1));
    let gone = orgs
        .delete_organization(authed(delete("acme.platform"), &olga))
        .await
        .expect("end it")
        .into_inner();
    assert_eq!((gone.id.as_str(), gone.quotas["vms"]), ("acme.platform", 1));
    refused(
        orgs.get_organization(authed(get("acme.platform"), &olga)),
        Code::NotFound,
    )
    .await;
    refused(
        orgs.delete_organization(authed(delete("acme.platform"), &olga)),
        Code::NotFound,
    )
    .await;
    assert_eq!(quota_of("acme", "vms").await, (1, 5));
    // Its owners' standing there went with it.
    refused(
        orgs.list_organizations(in_org(
            pb::ListOrganizationsRequest {},
            &manager,
            "acme.platform",
        )),
        Code::PermissionDenied,
    )
    .await;
    // The organisation the call acts in is not ended, nor changed, here.
    refused(
        orgs.delete_organization(authed(delete("acme"), &olga)),
        Code::PermissionDenied,
    )
    .await;
    refused(
        orgs.update_organization(authed(update("acme", &[("vms", 1)]), &olga)),
        Code::PermissionDenied,
    )
    .await;
    // No id: named.
    for e in [
        refused(
            orgs.get_organization(authed(get(""), &olga)),
            Code::InvalidArgument,
        )
        .await,
        refused(
            orgs.update_organization(authed(update("", &[("vms", 1)]), &olga)),
            Code::InvalidArgument,
        )
        .await,
        refused(
            orgs.delete_organization(authed(delete(""), &olga)),
            Code::InvalidArgument,
        )
        .await,
    ] {
        assert_eq!(rejected_fields(&e), ["id"]);
    }
    m.stop().await;
}
