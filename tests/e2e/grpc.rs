//! gRPC end to end: a generated tonic client over a real socket creates VMs,
//! watches their actions stream to `success`, meets the same gate as REST
//! (tokens, roles, tenants, rate limits, the audit log), and a generic
//! client discovers the services by reflection.

use crate::grpc_resources::rejected_fields;
use crate::harness::{Meson, SSH_KEY};
use futures::StreamExt;
use meson_proto::meson::v1 as pb;
use pb::action_service_client::ActionServiceClient;
use pb::vm_service_client::VmServiceClient;
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Request};
use tonic_types::StatusExt;

pub async fn channel(m: &Meson) -> Channel {
    Channel::from_shared(format!("http://{}", m.dev().grpc_addr))
        .expect("uri")
        .connect()
        .await
        .expect("gRPC connects")
}

/// `msg` with `authorization: Bearer <token>`.
pub fn authed<T>(msg: T, token: &str) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("metadata"),
    );
    r
}

/// The status of a call that must fail, checked to be `code`.
pub async fn refused<T: std::fmt::Debug>(
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    code: Code,
) -> tonic::Status {
    let status = call.await.expect_err("the call is refused");
    assert_eq!(status.code(), code, "{status:?}");
    status
}

/// The seed VM request, typed.
pub fn seed_vm(name: &str) -> pb::CreateVmRequest {
    pb::CreateVmRequest {
        specs: Some(pb::VmRequestSpecs {
            req: Some(pb::VmRequirements {
                cpu: Some(pb::CpuRequest {
                    number_of_cores: 2,
                    number_of_threads: 1,
                    min_frequency: 1.0,
                    arch: vec!["X86_64".into()],
                    ..Default::default()
                }),
                mem: Some(pb::MemRequest {
                    capacity: 4096,
                    require_ecc: false,
                }),
                pci_devices: vec![],
                os_distribution: "Debian".into(),
            }),
            volumes: vec![pb::VolumeRequest {
                name: "test".into(),
                size: 30,
                private: Some(true),
                ..Default::default()
            }],
            authentication: Some(pb::VmAuthentication {
                ssh_keys: vec![SSH_KEY.into()],
                ..Default::default()
            }),
            vm_name: name.into(),
        }),
        provider: "ionos".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_vm_is_created_watched_to_success_and_deleted_over_grpc() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut vms = VmServiceClient::new(ch.clone());
    let mut actions = ActionServiceClient::new(ch);

    let mut req = authed(seed_vm("grpc-1"), &m.token);
    req.metadata_mut()
        .insert("x-correlation-id", "grpc-create-1".parse().unwrap());
    let res = vms.create_vm(req).await.expect("create");
    assert_eq!(
        res.metadata().get("x-correlation-id").unwrap(),
        "grpc-create-1"
    );
    assert!(res.metadata().get("ratelimit-remaining").is_some());
    let created = res.into_inner();
    let vm = created.vm.unwrap();
    assert_eq!(
        (vm.name.as_str(), vm.status.as_str()),
        ("grpc-1", "initializing")
    );
    let action = created.action.unwrap();
    assert_eq!(action.command, "create_vm");

    // The stream: the current state, then every change, ending at success.
    let mut stream = actions
        .watch_actions(authed(
            pb::WatchActionsRequest {
                id: vec![action.id.clone()],
            },
            &m.token,
        ))
        .await
        .expect("watch")
        .into_inner();
    let mut seen = Vec::new();
    while let Some(a) = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("the stream moves")
    {
        let a = a.expect("an action");
        seen.push((a.status.clone(), a.progress));
    }
    assert_eq!(
        seen.last().unwrap(),
        &("success".to_owned(), 100),
        "{seen:?}"
    );
    assert!(seen.windows(2).all(|w| w[0].1 <= w[1].1), "{seen:?}");
    assert!(seen.len() >= 2, "{seen:?}");

    // The VM as REST shows it; then listed, renamed, deleted.
    let got = vms
        .get_vm(authed(pb::GetVmRequest { id: vm.id.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.status, "running");
    assert_eq!(got.provider.as_deref(), Some("ionos"));
    let rest = m.get(&format!("/v1/vms/{}", vm.id)).await.body;
    assert_eq!(got.ipv4.as_deref(), rest["vm"]["ipv4"].as_str());
    assert_eq!(got.volumes.len(), 3);
    let list = vms
        .list_vms(authed(pb::ListVmsRequest::default(), &m.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.vms.len(), 1);
    assert_eq!(list.pagination.unwrap().total_entries, 1);
    let renamed = vms
        .update_vm(authed(
            pb::UpdateVmRequest {
                id: vm.id.clone(),
                name: Some("grpc-2".into()),
                labels: Some(pb::Labels {
                    labels: [("env".to_owned(), "test".to_owned())].into(),
                }),
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renamed.vm.unwrap().name, "grpc-2");
    let delete = vms
        .delete_vm(authed(pb::DeleteVmRequest { id: vm.id.clone() }, &m.token))
        .await
        .unwrap()
        .into_inner();
    let mut stream = actions
        .watch_actions(authed(
            pb::WatchActionsRequest {
                id: vec![delete.id.clone()],
            },
            &m.token,
        ))
        .await
        .unwrap()
        .into_inner();
    let mut last = None;
    while let Some(a) = stream.next().await {
        last = Some(a.unwrap());
    }
    assert_eq!(last.unwrap().status, "success");
    refused(
        vms.get_vm(authed(pb::GetVmRequest { id: vm.id.clone() }, &m.token)),
        Code::NotFound,
    )
    .await;

    // Both calls that changed something are in the audit log, as gRPC.
    let audit = m.get("/v1/audit?operation=vm_create").await.body;
    let entry = &audit["audit_entries"][0];
    assert_eq!(entry["method"], "GRPC");
    assert_eq!(entry["path"], "/meson.v1.VmService/CreateVm");
    assert_eq!(entry["resource_id"], vm.id.as_str());
    assert_eq!(entry["action_id"], action.id.as_str());
    assert_eq!(entry["correlation_id"], "grpc-create-1");
    assert_eq!(entry["status"], 200);
    m.stop().await;
}

#[tokio::test]
async fn grpc_meets_the_same_gate_and_errors_carry_the_rest_code() {
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut vms = VmServiceClient::new(ch.clone());
    let mut actions = ActionServiceClient::new(ch);
    let created = vms
        .create_vm(authed(seed_vm("owned"), &m.token))
        .await
        .unwrap()
        .into_inner();
    let (vm, action) = (created.vm.unwrap().id, created.action.unwrap().id);

    // No token, or a bad one: Unauthenticated, and nothing said why.
    refused(
        vms.list_vms(Request::new(pb::ListVmsRequest::default())),
        Code::Unauthenticated,
    )
    .await;
    let e = vms
        .list_vms(authed(pb::ListVmsRequest::default(), "not.a.jwt"))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::Unauthenticated, "unauthorized")
    );

    // Another tenant's ids: NotFound everywhere; its own list is empty.
    let other = m.token("acme", "eve", meson_api::Role::Admin);
    refused(
        vms.get_vm(authed(pb::GetVmRequest { id: vm.clone() }, &other)),
        Code::NotFound,
    )
    .await;
    refused(
        vms.delete_vm(authed(pb::DeleteVmRequest { id: vm.clone() }, &other)),
        Code::NotFound,
    )
    .await;
    refused(
        actions.get_action(authed(pb::GetActionRequest { id: action.clone() }, &other)),
        Code::NotFound,
    )
    .await;
    refused(
        actions.watch_actions(authed(
            pb::WatchActionsRequest {
                id: vec![action.clone()],
            },
            &other,
        )),
        Code::NotFound,
    )
    .await;
    let listed = vms
        .list_vms(authed(pb::ListVmsRequest::default(), &other))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.vms.is_empty());
    let found = actions
        .list_actions(authed(
            pb::ListActionsRequest {
                id: vec![action.clone()],
                ..Default::default()
            },
            &other,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(found.actions.is_empty());

    // A viewer may read, not create.
    let viewer = m.token("dev", "vera", meson_api::Role::Viewer);
    vms.get_vm(authed(pb::GetVmRequest { id: vm.clone() }, &viewer))
        .await
        .expect("read");
    let e = refused(
        vms.create_vm(authed(seed_vm("x"), &viewer)),
        Code::PermissionDenied,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "forbidden"
    );

    // Invalid input names the REST field; a taken name; a malformed id.
    let mut bad = seed_vm("bad name!");
    bad.specs
        .as_mut()
        .unwrap()
        .req
        .as_mut()
        .unwrap()
        .cpu
        .as_mut()
        .unwrap()
        .number_of_cores = 0;
    let e = vms.create_vm(authed(bad, &m.token)).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let d = e.get_error_details();
    assert_eq!(d.error_info().unwrap().reason, "invalid_input");
    assert_eq!(d.error_info().unwrap().domain, "meson.elemento.cloud");
    let mut fields: Vec<String> = d
        .bad_request()
        .unwrap()
        .field_violations
        .iter()
        .map(|v| v.field.clone())
        .collect();
    fields.sort();
    fields.dedup();
    assert_eq!(fields, ["specs.req.cpu.numberOfCores", "specs.vm_name"]);
    let e = refused(
        vms.create_vm(authed(seed_vm("owned"), &m.token)),
        Code::AlreadyExists,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "uniqueness_error"
    );
    refused(
        vms.get_vm(authed(pb::GetVmRequest { id: "nope".into() }, &m.token)),
        Code::InvalidArgument,
    )
    .await;

    // While the create runs, another mutation is Aborted naming the action.
    let e = vms
        .power_vm(authed(
            pb::PowerVmRequest {
                id: vm.clone(),
                command: "reboot".into(),
            },
            &m.token,
        ))
        .await
        .unwrap_err();
    if e.code() == Code::Aborted {
        let info = e.get_error_details().error_info().unwrap().clone();
        assert_eq!(
            (info.reason.as_str(), info.metadata["action_id"].as_str()),
            ("locked", action.as_str())
        );
    } else {
        // The create was quicker: the VM is running, and reboots.
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    }
    m.stop().await;
}

#[tokio::test]
async fn over_the_rate_limit_grpc_is_resource_exhausted_with_retry_info() {
    let m = Meson::start_with(|o| {
        o.api.rate_limits = meson_api::ratelimit::RateLimitConfig {
            api_per_minute: 2,
            polling_per_minute: 100,
        };
    })
    .await;
    let mut vms = VmServiceClient::new(channel(&m).await);
    for left in ["1", "0"] {
        let r = vms
            .list_vms(authed(pb::ListVmsRequest::default(), &m.token))
            .await
            .unwrap();
        assert_eq!(r.metadata().get("ratelimit-remaining").unwrap(), left);
    }
    let e = refused(
        vms.list_vms(authed(pb::ListVmsRequest::default(), &m.token)),
        Code::ResourceExhausted,
    )
    .await;
    let d = e.get_error_details();
    assert_eq!(d.error_info().unwrap().reason, "rate_limit_exceeded");
    assert!(d.retry_info().unwrap().retry_delay.unwrap() >= Duration::from_secs(1));
    assert_eq!(e.metadata().get("ratelimit-remaining").unwrap(), "0");
    m.stop().await;
}

#[tokio::test]
async fn reflection_lists_the_services_and_health_answers() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let m = Meson::start().await;
    let ch = channel(&m).await;
    // No token: discovery and health are for anyone.
    let mut reflection = ServerReflectionClient::new(ch.clone());
    let ask = futures::stream::iter([ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    }]);
    let mut answers = reflection
        .server_reflection_info(ask)
        .await
        .unwrap()
        .into_inner();
    let Some(Ok(answer)) = answers.next().await else {
        panic!("no reflection answer")
    };
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("{answer:?}")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for s in meson_api::grpc::SERVICES {
        assert!(names.iter().any(|n| n == s), "{s} not in {names:?}");
    }
    assert!(
        names.iter().any(|n| n == "grpc.health.v1.Health"),
        "{names:?}"
    );

    let mut health = tonic_health::pb::health_client::HealthClient::new(ch);
    for service in ["", "meson.v1.VmService"] {
        let r = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            r.status(),
            tonic_health::pb::health_check_response::ServingStatus::Serving
        );
    }
    m.stop().await;
}

#[tokio::test]
async fn usage_statements_and_prices_are_read_and_a_price_added_over_grpc() {
    use pb::usage_service_client::UsageServiceClient;
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut vms = VmServiceClient::new(ch.clone());
    let mut actions = ActionServiceClient::new(ch.clone());
    let mut usage = UsageServiceClient::new(ch);
    // `m.token` is an operator (admin) of tenant `dev`; these are its own.
    let owner = m.token("dev", "olga", meson_api::Role::Owner);
    let viewer = m.token("dev", "vera", meson_api::Role::Viewer);

    // A running VM, so that there is usage.
    let created = vms
        .create_vm(authed(seed_vm("metered"), &m.token))
        .await
        .expect("create")
        .into_inner();
    let vm = created.vm.unwrap().id;
    let mut stream = actions
        .watch_actions(authed(
            pb::WatchActionsRequest {
                id: vec![created.action.unwrap().id],
            },
            &m.token,
        ))
        .await
        .expect("watch")
        .into_inner();
    let mut last = None;
    while let Some(a) = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("the stream moves")
    {
        last = Some(a.expect("an action"));
    }
    assert_eq!(last.map(|a| a.status).as_deref(), Some("success"));
    // Long enough for a quantity of six decimals (hours) to read above 0.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Usage within a window that is over, so that every reading agrees.
    let to = chrono::Utc::now();
    let from = to - chrono::Duration::hours(1);
    let rfc =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let window = pb::GetUsageRequest {
        from: rfc(from),
        to: rfc(to),
        ..Default::default()
    };
    let own = usage
        .get_usage(authed(window.clone(), &viewer))
        .await
        .expect("GetUsage")
        .into_inner();
    assert_eq!(own.group_by, "resource");
    assert_eq!(own.from.unwrap().seconds, from.timestamp());
    assert_eq!(own.to.unwrap().seconds, to.timestamp());
    let line = own
        .lines
        .iter()
        .find(|l| l.meter == "vm" && l.group.as_deref() == Some(vm.as_str()))
        .unwrap_or_else(|| panic!("no line for the VM: {own:?}"))
        .clone();
    assert_eq!(
        (
            line.tenant.as_str(),
            line.unit.as_str(),
            line.name.as_deref()
        ),
        ("dev", "hour", Some("metered")),
        "{line:?}"
    );
    let quantity: f64 = line.quantity.parse().expect("a decimal quantity");
    assert!(quantity > 0.0 && quantity < 1.0, "{line:?}");
    assert!(line.cost.parse::<f64>().is_ok(), "{line:?}");
    assert!(
        own.totals.iter().any(|t| t.currency == line.currency),
        "{own:?}"
    );
    for t in &own.totals {
        let (_, cents) = t.amount.split_once('.').expect("to the cent");
        assert_eq!(cents.len(), 2, "{t:?}");
    }
    // As REST reads it; an operator naming the tenant reads the same.
    let rest = m
        .get(&format!(
            "/v1/usage?tenant=dev&from={}&to={}",
            window.from, window.to
        ))
        .await
        .body;
    let as_rest: Vec<(String, Option<String>, String, String, String)> = rest["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .map(|l| {
            (
                l["meter"].as_str().unwrap().to_owned(),
                l["group"].as_str().map(str::to_owned),
                l["quantity"].as_str().unwrap().to_owned(),
                l["cost"].as_str().unwrap().to_owned(),
                l["currency"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let as_grpc: Vec<_> = own
        .lines
        .iter()
        .map(|l| {
            (
                l.meter.clone(),
                l.group.clone(),
                l.quantity.clone(),
                l.cost.clone(),
                l.currency.clone(),
            )
        })
        .collect();
    assert_eq!(as_grpc, as_rest, "{rest}");
    assert_eq!(
        own.totals
            .iter()
            .map(|t| (t.currency.as_str(), t.amount.as_str()))
            .collect::<Vec<_>>(),
        rest["totals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (
                t["currency"].as_str().unwrap(),
                t["amount"].as_str().unwrap()
            ))
            .collect::<Vec<_>>()
    );
    let named = usage
        .get_usage(authed(
            pb::GetUsageRequest {
                tenant: "dev".into(),
                ..window.clone()
            },
            &m.token,
        ))
        .await
        .expect("an operator's GetUsage")
        .into_inner();
    assert_eq!(named, own);
    let by_day = usage
        .get_usage(authed(
            pb::GetUsageRequest {
                group_by: "day".into(),
                ..window.clone()
            },
            &owner,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_day.group_by, "day");
    // A line per day (UTC) the window touches.
    let days = [from, to].map(|t| t.format("%Y-%m-%d").to_string());
    assert!(
        by_day
            .lines
            .iter()
            .any(|l| l.meter == "vm" && days.iter().any(|d| l.group.as_ref() == Some(d))),
        "{by_day:?}"
    );
    // Bad parameters are named as REST names them; another tenant's usage
    // is an operator's only.
    for (bad, field) in [
        (
            pb::GetUsageRequest {
                group_by: "week".into(),
                ..Default::default()
            },
            "group_by",
        ),
        (
            pb::GetUsageRequest {
                from: "yesterday".into(),
                ..Default::default()
            },
            "from",
        ),
        (
            pb::GetUsageRequest {
                from: window.to.clone(),
                to: window.from.clone(),
                ..Default::default()
            },
            "to",
        ),
    ] {
        let e = refused(
            usage.get_usage(authed(bad.clone(), &owner)),
            Code::InvalidArgument,
        )
        .await;
        assert_eq!(rejected_fields(&e), [field], "{bad:?}");
    }
    let e = refused(
        usage.get_usage(authed(
            pb::GetUsageRequest {
                tenant: "acme".into(),
                ..Default::default()
            },
            &owner,
        )),
        Code::PermissionDenied,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "forbidden"
    );

    // Statements: the running month first, as `current`, without lines.
    let listed = usage
        .list_statements(authed(pb::ListStatementsRequest::default(), &viewer))
        .await
        .expect("ListStatements")
        .into_inner();
    let current = listed.statements.first().expect("the running month");
    assert_eq!(
        (
            current.id.as_str(),
            current.tenant.as_str(),
            current.status.as_str()
        ),
        ("current", "dev", "open"),
        "{listed:?}"
    );
    assert!(current.lines.is_empty(), "{current:?}");
    assert!(current.closed.is_none(), "{current:?}");
    let now = chrono::Utc::now().timestamp();
    let (start, end) = (
        current.period_start.unwrap().seconds,
        current.period_end.unwrap().seconds,
    );
    assert!(start <= now && now < end, "{current:?}");
    let rest = m.get("/v1/statements?tenant=dev").await.body;
    assert_eq!(rest["statements"][0]["id"], "current", "{rest}");
    assert_eq!(
        rest["statements"].as_array().unwrap().len(),
        listed.statements.len()
    );

    // `current` with its lines, the VM's among them.
    let get = |id: &str| pb::GetStatementRequest {
        id: id.into(),
        tenant: String::new(),
    };
    let statement = usage
        .get_statement(authed(get("current"), &owner))
        .await
        .expect("GetStatement current")
        .into_inner();
    assert_eq!(
        (statement.id.as_str(), statement.status.as_str()),
        ("current", "open")
    );
    assert!(!statement.lines.is_empty(), "{statement:?}");
    let vm_line = statement
        .lines
        .iter()
        .find(|l| l.meter == "vm" && l.resource_id == vm)
        .unwrap_or_else(|| panic!("no line for the VM: {statement:?}"));
    assert_eq!(
        (vm_line.resource_name.as_str(), vm_line.unit.as_str()),
        ("metered", "hour")
    );
    assert!(statement.total.parse::<f64>().is_ok(), "{statement:?}");
    // An operator names whose running month; a bad or unknown id.
    let e = refused(
        usage.get_statement(authed(get("current"), &m.token)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["tenant"]);
    let theirs = usage
        .get_statement(authed(
            pb::GetStatementRequest {
                id: "current".into(),
                tenant: "dev".into(),
            },
            &m.token,
        ))
        .await
        .expect("an operator's GetStatement")
        .into_inner();
    assert_eq!(theirs.tenant, "dev");
    let e = refused(
        usage.get_statement(authed(get("nope"), &owner)),
        Code::InvalidArgument,
    )
    .await;
    assert_eq!(rejected_fields(&e), ["id"]);
    refused(
        usage.get_statement(authed(get(&uuid::Uuid::new_v4().to_string()), &owner)),
        Code::NotFound,
    )
    .await;

    // The price list, for anyone admitted.
    let prices = usage
        .list_prices(authed(pb::ListPricesRequest {}, &viewer))
        .await
        .expect("ListPrices")
        .into_inner()
        .prices;
    assert!(!prices.is_empty());
    for p in &prices {
        assert!(
            ["volume", "cluster", "image", "backup"].contains(&p.meter.as_str()),
            "{p:?}"
        );
        assert!(p.unit_price.parse::<f64>().is_ok(), "{p:?}");
        assert!(p.effective_from.is_some(), "{p:?}");
    }
    assert!(
        prices
            .iter()
            .any(|p| (p.meter.as_str(), p.provider.as_str(), p.unit.as_str())
                == ("volume", "*", "GB-hour")),
        "{prices:?}"
    );

    // Adding a price: operators only; bad fields named as REST names them.
    let add = |meter: &str, unit_price: &str| pb::CreatePriceRequest {
        meter: meter.into(),
        provider: "ionos".into(),
        unit_price: unit_price.into(),
        currency: "EUR".into(),
        effective_from: "2099-01-01T00:00:00Z".into(),
    };
    let e = refused(
        usage.create_price(authed(add("volume", "0.00009"), &owner)),
        Code::PermissionDenied,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "forbidden"
    );
    for (bad, fields) in [
        (add("vm", "0.00009"), vec!["meter"]),
        (add("volume", "-1"), vec!["unit_price"]),
        (
            pb::CreatePriceRequest {
                currency: "eur".into(),
                effective_from: "soon".into(),
                ..add("volume", "0.00009")
            },
            vec!["currency", "effective_from"],
        ),
        (
            pb::CreatePriceRequest::default(),
            vec!["currency", "meter", "unit_price"],
        ),
    ] {
        let e = refused(
            usage.create_price(authed(bad.clone(), &m.token)),
            Code::InvalidArgument,
        )
        .await;
        assert_eq!(rejected_fields(&e), fields, "{bad:?}");
    }
    let added = usage
        .create_price(authed(add("volume", "0.00009"), &m.token))
        .await
        .expect("CreatePrice")
        .into_inner();
    assert_eq!(
        (
            added.meter.as_str(),
            added.provider.as_str(),
            added.unit.as_str(),
            added.unit_price.as_str(),
            added.currency.as_str()
        ),
        ("volume", "ionos", "GB-hour", "0.00009", "EUR"),
        "{added:?}"
    );
    assert_eq!(
        added.effective_from.unwrap().seconds,
        chrono::DateTime::parse_from_rfc3339("2099-01-01T00:00:00Z")
            .unwrap()
            .timestamp()
    );
    let prices = usage
        .list_prices(authed(pb::ListPricesRequest {}, &owner))
        .await
        .unwrap()
        .into_inner()
        .prices;
    assert!(prices.contains(&added), "{prices:?}");
    // The same again: that meter and provider has a price from then.
    let e = refused(
        usage.create_price(authed(add("volume", "0.00009"), &m.token)),
        Code::FailedPrecondition,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "conflict"
    );
    let audit = m.get("/v1/audit?operation=price_create").await.body;
    assert!(
        audit["audit_entries"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["method"] == "GRPC"
                && e["path"] == "/meson.v1.UsageService/CreatePrice"
                && e["status"] == 200),
        "{audit}"
    );
    m.stop().await;
}

#[tokio::test]
async fn plans_are_made_and_a_tenant_put_on_one_over_grpc() {
    use pb::plan_service_client::PlanServiceClient;
    use pb::quota_service_client::QuotaServiceClient;
    use std::collections::HashMap;
    let m = Meson::start().await;
    let ch = channel(&m).await;
    let mut plans = PlanServiceClient::new(ch.clone());
    let mut quotas = QuotaServiceClient::new(ch);
    // `m.token` is an operator (admin) of tenant `dev`.
    let owner = m.token("dev", "olga", meson_api::Role::Owner);
    let viewer = m.token("dev", "vera", meson_api::Role::Viewer);
    let small = |vms: i64| pb::PutPlanRequest {
        name: "small".into(),
        description: "Try it out".into(),
        quotas: HashMap::from([("vms".into(), vms), ("clusters".into(), 0)]),
    };
    let limit = |q: &pb::Quota, name: &str| {
        q.limits
            .iter()
            .find(|l| l.name == name)
            .unwrap_or_else(|| panic!("no {name} in {q:?}"))
            .clone()
    };

    // An operator makes a plan of one VM; making it again replaces it.
    let put = plans
        .put_plan(authed(small(1), &m.token))
        .await
        .expect("PutPlan")
        .into_inner();
    assert!(put.created, "{put:?}");
    let plan = put.plan.unwrap();
    assert_eq!(
        (plan.name.as_str(), plan.description.as_str()),
        ("small", "Try it out")
    );
    assert_eq!(
        plan.quotas[0],
        pb::PlanQuota {
            name: "vms".into(),
            quota: 1,
            default: false
        }
    );
    let again = plans
        .put_plan(authed(small(1), &m.token))
        .await
        .expect("PutPlan again")
        .into_inner();
    assert!(!again.created, "{again:?}");
    // As REST shows it.
    let rest = m.get("/v1/plans/small").await.body;
    assert_eq!(rest["plan"]["quotas"][0]["quota"], 1, "{rest}");
    assert_eq!(
        rest["plan"]["quotas"].as_array().unwrap().len(),
        plan.quotas.len()
    );

    // Not an owner's to make; bad fields are named as REST names them.
    let e = refused(
        plans.put_plan(authed(
            pb::PutPlanRequest {
                name: "mine".into(),
                ..Default::default()
            },
            &owner,
        )),
        Code::PermissionDenied,
    )
    .await;
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "forbidden"
    );
    for (bad, fields) in [
        (small(-1), vec!["quotas.vms"]),
        (
            pb::PutPlanRequest {
                quotas: HashMap::from([("vms".into(), -1), ("cpus".into(), 1)]),
                ..small(1)
            },
            vec!["quotas.cpus", "quotas.vms"],
        ),
        (
            pb::PutPlanRequest {
                name: "Big".into(),
                ..small(1)
            },
            vec!["name"],
        ),
        (
            pb::PutPlanRequest {
                name: "default".into(),
                ..small(1)
            },
            vec!["name"],
        ),
    ] {
        let e = refused(
            plans.put_plan(authed(bad.clone(), &m.token)),
            Code::InvalidArgument,
        )
        .await;
        assert_eq!(rejected_fields(&e), fields, "{bad:?}");
    }

    // Anyone reads the plans: the defaults first.
    let listed = plans
        .list_plans(authed(pb::ListPlansRequest {}, &viewer))
        .await
        .expect("ListPlans")
        .into_inner()
        .plans;
    let names: Vec<&str> = listed.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["default", "small"]);
    assert!(listed[0].quotas.iter().all(|q| q.default), "{listed:?}");
    let got = plans
        .get_plan(authed(
            pb::GetPlanRequest {
                name: "small".into(),
            },
            &viewer,
        ))
        .await
        .expect("GetPlan")
        .into_inner();
    assert_eq!(got, plan);
    refused(
        plans.get_plan(authed(
            pb::GetPlanRequest {
                name: "nope".into(),
            },
            &viewer,
        )),
        Code::NotFound,
    )
    .await;

    // The tenant goes on it, with its own vCPU quota over the plan's.
    let q = quotas
        .update_tenant_quota(authed(
            pb::UpdateTenantQuotaRequest {
                tenant: "dev".into(),
                quotas: HashMap::from([("vcpus".into(), 99)]),
                plan: Some("small".into()),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .expect("UpdateTenantQuota")
        .into_inner();
    assert_eq!(q.plan.as_deref(), Some("small"), "{q:?}");
    assert_eq!(
        (limit(&q, "vms").quota, limit(&q, "vms").default),
        (1, false)
    );
    assert_eq!(limit(&q, "vcpus").quota, 99);
    assert!(limit(&q, "nodes").default, "{q:?}");
    // The tenant's own read, and an operator's, show it; as REST does.
    let own = quotas
        .get_quota(authed(pb::GetQuotaRequest {}, &viewer))
        .await
        .expect("GetQuota")
        .into_inner();
    assert_eq!(own, q);
    let theirs = quotas
        .get_tenant_quota(authed(
            pb::GetTenantQuotaRequest {
                tenant: "dev".into(),
            },
            &m.token,
        ))
        .await
        .expect("GetTenantQuota")
        .into_inner();
    assert_eq!(theirs, q);
    let rest = m.get("/v1/quotas").await.body;
    assert_eq!(rest["quota"]["plan"], "small", "{rest}");
    refused(
        quotas.get_tenant_quota(authed(
            pb::GetTenantQuotaRequest {
                tenant: "dev".into(),
            },
            &owner,
        )),
        Code::PermissionDenied,
    )
    .await;
    // An unknown plan, a bad amount, a quota both set and reset.
    for (bad, fields) in [
        (
            pb::UpdateTenantQuotaRequest {
                tenant: "dev".into(),
                plan: Some("nope".into()),
                ..Default::default()
            },
            vec!["plan"],
        ),
        (
            pb::UpdateTenantQuotaRequest {
                tenant: "dev".into(),
                quotas: HashMap::from([("vms".into(), -1)]),
                ..Default::default()
            },
            vec!["vms"],
        ),
        (
            pb::UpdateTenantQuotaRequest {
                tenant: "dev".into(),
                quotas: HashMap::from([("vms".into(), 1)]),
                reset: vec!["vms".into()],
                ..Default::default()
            },
            vec!["reset"],
        ),
    ] {
        let e = refused(
            quotas.update_tenant_quota(authed(bad.clone(), &m.token)),
            Code::InvalidArgument,
        )
        .await;
        assert_eq!(rejected_fields(&e), fields, "{bad:?}");
    }

    // A plan in use stays (`conflict`), and so does `default`.
    for name in ["small", "default"] {
        let e = refused(
            plans.delete_plan(authed(
                pb::DeletePlanRequest { name: name.into() },
                &m.token,
            )),
            Code::FailedPrecondition,
        )
        .await;
        assert_eq!(
            e.get_error_details().error_info().unwrap().reason,
            "conflict",
            "{name}"
        );
    }
    // Off it (an empty plan: on none), the tenant has the defaults again,
    // its own vCPU quota kept until reset; then the plan can go.
    let q = quotas
        .update_tenant_quota(authed(
            pb::UpdateTenantQuotaRequest {
                tenant: "dev".into(),
                plan: Some(String::new()),
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .expect("off the plan")
        .into_inner();
    assert_eq!(q.plan, None, "{q:?}");
    assert!(limit(&q, "vms").default, "{q:?}");
    assert_eq!(limit(&q, "vcpus").quota, 99);
    let q = quotas
        .update_tenant_quota(authed(
            pb::UpdateTenantQuotaRequest {
                tenant: "dev".into(),
                reset: vec!["vcpus".into()],
                ..Default::default()
            },
            &m.token,
        ))
        .await
        .expect("reset")
        .into_inner();
    assert!(q.limits.iter().all(|l| l.default), "{q:?}");
    plans
        .delete_plan(authed(
            pb::DeletePlanRequest {
                name: "small".into(),
            },
            &m.token,
        ))
        .await
        .expect("DeletePlan");
    refused(
        plans.delete_plan(authed(
            pb::DeletePlanRequest {
                name: "small".into(),
            },
            &m.token,
        )),
        Code::NotFound,
    )
    .await;
    let audit = m.get("/v1/audit?operation=plan_delete").await.body;
    assert!(
        audit["audit_entries"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["method"] == "GRPC"
                && e["path"] == "/meson.v1.PlanService/DeletePlan"
                && e["resource_id"] == "small"
                && e["status"] == 200),
        "{audit}"
    );
    m.stop().await;
}
