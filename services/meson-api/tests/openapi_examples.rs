//! Every example the OpenAPI document shows is one meson accepts, and one
//! the typed requests of meson-types (the SDK's) carry unchanged.
//!
//! For each request body example (and each typed response example): it
//! deserializes into its meson-types type; serializing that gives the
//! canonical form, which deserializes to the same value; and where meson
//! has a lenient parser for the body (meson-core), the example and its
//! canonical form parse alike, warnings included. `openapi/meson.json` is
//! the document the server builds (`cargo test -p meson-api openapi`
//! keeps it so).

use meson_core::kaas::{KaasCreate, PoolSpec};
use meson_core::kubernetes;
use meson_core::network::NetworkCreate;
use meson_core::patch::NameLabels;
use meson_core::port_forward::PortForwardCreate;
use meson_core::target::Target;
use meson_core::vm::VmCreate;
use meson_core::volume::VolumeCreate;
use meson_types::admin::{QuotaUpdateRequest, TargetCreateRequest, TargetUpdateRequest};
use meson_types::cluster::ClusterUpdateRequest;
use meson_types::kaas::{KaasCreateRequest, NodePoolRequest};
use meson_types::network::NetworkCreateRequest;
use meson_types::ops::{Health, Index};
use meson_types::pool::{NodePoolUpdateRequest, PoolDeleteNodesRequest};
use meson_types::port_forward::PortForwardCreateRequest;
use meson_types::quote::QuoteRequest;
use meson_types::requests::{NameLabelsUpdate, VmCreateRequest};
use meson_types::upgrade::ClusterUpgradeRequest;
use meson_types::volume::VolumeCreateRequest;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt::Debug;
use std::path::Path;

fn document() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../openapi/meson.json");
    let text = std::fs::read_to_string(&path).expect("openapi/meson.json");
    serde_json::from_str(&text).expect("the document is JSON")
}

/// The examples of one media type: `example` and every `examples.*.value`.
fn examples(content: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = content.get("example").into_iter().cloned().collect();
    if let Some(named) = content.get("examples").and_then(Value::as_object) {
        out.extend(named.values().filter_map(|e| e.get("value")).cloned());
    }
    out
}

/// `example` through `T`: its canonical JSON, checked to read back as the
/// same `T`.
fn canonical<T>(example: &Value) -> Result<Value, String>
where
    T: DeserializeOwned + Serialize + PartialEq + Debug,
{
    let typed: T = meson_types::lenient::from_value(example.clone())
        .map_err(|e| format!("does not deserialize: {e}"))?;
    let json = serde_json::to_value(&typed).map_err(|e| format!("does not serialize: {e}"))?;
    let again: T = serde_json::from_value(json.clone())
        .map_err(|e| format!("its canonical form {json} does not deserialize: {e}"))?;
    if again != typed {
        return Err(format!("{typed:?} came back as {again:?}"));
    }
    Ok(json)
}

/// The example and its canonical form parse alike with meson's parser.
fn parse_alike<R: PartialEq + Debug, E: Debug>(
    parse: impl Fn(&Value) -> Result<R, E>,
    example: &Value,
    canonical: &Value,
) -> Result<(), String> {
    let first = parse(example).map_err(|e| format!("meson refuses it: {e:?}"))?;
    let again =
        parse(canonical).map_err(|e| format!("meson refuses {canonical} (canonical): {e:?}"))?;
    if first != again {
        return Err(format!(
            "its canonical form {canonical} parses as {again:?}, not {first:?}"
        ));
    }
    Ok(())
}

fn vm(v: &Value) -> meson_core::Result<VmCreate> {
    VmCreate::parse(v)
}

fn kaas(v: &Value) -> meson_core::Result<KaasCreate> {
    KaasCreate::parse(v, kubernetes::today())
}

/// A target as meson parses it, with one id (each parse draws a new one).
fn target(v: &Value) -> meson_core::Result<(Target, Vec<meson_core::parse::Warning>)> {
    Target::parse_new(v).map(|(t, warnings)| {
        let t = Target {
            id: uuid::Uuid::nil().into(),
            ..t
        };
        (t, warnings)
    })
}

/// Checks one request body example of `method path`.
fn request(method: &str, path: &str, ex: &Value) -> Result<(), String> {
    match (method, path) {
        ("post", "/v1/vms") => parse_alike(vm, ex, &canonical::<VmCreateRequest>(ex)?),
        ("post", "/v1/quotes") => {
            let json = canonical::<QuoteRequest>(ex)?;
            if ex.get("specs").is_some() {
                parse_alike(vm, ex, &json)
            } else {
                parse_alike(kaas, ex, &json)
            }
        }
        ("post", "/v1/clusters" | "/v1/kaas") => {
            parse_alike(kaas, ex, &canonical::<KaasCreateRequest>(ex)?)
        }
        ("post", "/v1/clusters/{id}/pools") => {
            parse_alike(PoolSpec::parse, ex, &canonical::<NodePoolRequest>(ex)?)
        }
        ("post", "/v1/networks/{id}/port-forwards") => parse_alike(
            PortForwardCreate::parse,
            ex,
            &canonical::<PortForwardCreateRequest>(ex)?,
        ),
        ("post", "/v1/networks") => parse_alike(
            NetworkCreate::parse,
            ex,
            &canonical::<NetworkCreateRequest>(ex)?,
        ),
        ("post", "/v1/volumes") => parse_alike(
            |v| VolumeCreate::parse(v, &[]),
            ex,
            &canonical::<VolumeCreateRequest>(ex)?,
        ),
        ("patch", "/v1/vms/{id}" | "/v1/networks/{id}" | "/v1/volumes/{id}") => parse_alike(
            |v| NameLabels::parse(v, 63),
            ex,
            &canonical::<NameLabelsUpdate>(ex)?,
        ),
        ("post", "/v1/tokens") => parse_alike(
            meson_core::token::TokenCreate::parse,
            ex,
            &canonical::<meson_types::token::TokenCreateRequest>(ex)?,
        ),
        ("post", "/v1/members") => parse_alike(
            meson_core::member::MemberCreate::parse,
            ex,
            &canonical::<meson_types::member::MemberCreateRequest>(ex)?,
        ),
        ("patch", "/v1/members/{subject}") => parse_alike(
            meson_core::member::MemberUpdate::parse,
            ex,
            &canonical::<meson_types::member::MemberUpdateRequest>(ex)?,
        ),
        ("post", "/v1/invitations") => parse_alike(
            meson_core::member::InvitationCreate::parse,
            ex,
            &canonical::<meson_types::member::InvitationCreateRequest>(ex)?,
        ),
        ("post", "/v1/invitations/accept") => parse_alike(
            meson_core::member::InvitationAccept::parse,
            ex,
            &canonical::<meson_types::member::InvitationAcceptRequest>(ex)?,
        ),
        ("post", "/v1/organizations") => parse_alike(
            meson_core::organization::OrgCreate::parse,
            ex,
            &canonical::<meson_types::organization::OrganizationCreateRequest>(ex)?,
        ),
        ("patch", "/v1/organizations/{id}") => parse_alike(
            meson_core::organization::OrgUpdate::parse,
            ex,
            &canonical::<meson_types::organization::OrganizationUpdateRequest>(ex)?,
        ),
        ("post", "/v1/targets") => parse_alike(target, ex, &canonical::<TargetCreateRequest>(ex)?),
        // Parsed in meson-api's app layer, not by meson-core: the types only.
        ("patch", "/v1/targets/{id}") => canonical::<TargetUpdateRequest>(ex).map(drop),
        ("put", "/v1/admin/plans/{name}") => {
            canonical::<meson_types::admin::PlanPutRequest>(ex).map(drop)
        }
        // Parsed against the orphan it names (its tenant tag): the types only.
        ("post", "/v1/admin/orphans/{id}/actions/adopt") => {
            canonical::<meson_types::admin::OrphanAdoptRequest>(ex).map(drop)
        }
        ("post", "/v1/admin/prices") => parse_alike(
            meson_core::price::PriceCreate::parse,
            ex,
            &canonical::<meson_types::usage::PriceCreateRequest>(ex)?,
        ),
        ("patch", "/v1/tenants/{tenant}/quotas") => canonical::<QuotaUpdateRequest>(ex).map(drop),
        ("patch", "/v1/clusters/{id}") => canonical::<ClusterUpdateRequest>(ex).map(drop),
        ("patch", "/v1/clusters/{id}/pools/{pool_id}") => {
            canonical::<NodePoolUpdateRequest>(ex).map(drop)
        }
        ("post", "/v1/clusters/{id}/pools/{pool_id}/actions/delete-nodes") => {
            canonical::<PoolDeleteNodesRequest>(ex).map(drop)
        }
        ("post", "/v1/clusters/{id}/actions/upgrade") => {
            canonical::<ClusterUpgradeRequest>(ex).map(drop)
        }
        _ => Err("no meson-types request type is known for it: add it to this test".into()),
    }
}

/// Checks one response example of a typed answer, by its schema's name;
/// `None` for answers this test does not type.
fn response(schema: &str, ex: &Value) -> Option<Result<(), String>> {
    let exact = |json: Result<Value, String>| {
        json.and_then(|j| {
            if &j == ex {
                Ok(())
            } else {
                Err(format!("serializes as {j}"))
            }
        })
    };
    Some(match schema {
        "#/components/schemas/Index" => exact(canonical::<Index>(ex)),
        "#/components/schemas/Health" => exact(canonical::<Health>(ex)),
        _ => return None,
    })
}

#[test]
fn every_example_parses_and_round_trips_through_the_types() {
    let doc = document();
    let mut failures = Vec::new();
    let (mut requests, mut responses) = (0, 0);
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let Some(op) = op.as_object() else { continue };
            let bodies = op
                .get("requestBody")
                .and_then(|b| b.get("content"))
                .and_then(Value::as_object);
            for (media, content) in bodies.into_iter().flatten() {
                for ex in examples(content) {
                    requests += 1;
                    if let Err(e) = request(method, path, &ex) {
                        failures.push(format!("{method} {path} ({media}) example {ex}: {e}"));
                    }
                }
            }
            let answers = op.get("responses").and_then(Value::as_object);
            for (code, answer) in answers.into_iter().flatten() {
                let contents = answer.get("content").and_then(Value::as_object);
                for content in contents.into_iter().flatten().map(|(_, c)| c) {
                    let schema = content["schema"]["$ref"].as_str().unwrap_or_default();
                    for ex in examples(content) {
                        if let Some(checked) = response(schema, &ex) {
                            responses += 1;
                            if let Err(e) = checked {
                                failures.push(format!("{method} {path} {code} example {ex}: {e}"));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The document has examples of both kinds: the walk found them.
    assert!(requests >= 5, "only {requests} request examples");
    assert!(responses >= 2, "only {responses} response examples");
}

/// The quirks the examples carry ("True", 0/1, a map of PCI devices) are
/// read, and serialize canonically.
#[test]
fn the_vm_example_reads_its_quirks_and_serializes_canonically() {
    let ex = meson_types::requests::vm_create_example();
    let json = canonical::<VmCreateRequest>(&ex).expect("typed");
    assert_eq!(json["specs"]["volumes"][0]["private"], true);
    assert_eq!(json["specs"]["volumes"][0]["readonly"], false);
    assert_eq!(json["specs"]["req"]["mem"]["requireECC"], false);
    assert_eq!(
        json["specs"]["req"]["pci"]["devices"],
        serde_json::json!([])
    );
    parse_alike(vm, &ex, &json).expect("meson reads both alike");
    let kaas_ex = meson_types::kaas::kaas_create_example();
    let json = canonical::<KaasCreateRequest>(&kaas_ex).expect("typed");
    assert_eq!(json["req"]["nodes_subnet"]["dhcp"], true);
    parse_alike(kaas, &kaas_ex, &json).expect("meson reads both alike");
}
