//! Every example the OpenAPI document shows is one meson accepts, and one
//! the typed requests of meson-types (the SDK's) carry unchanged.
//!
//! For each request body example (and each typed response example): it
//! deserializes into its meson-types type; serializing that gives the
//! canonical form, which deserializes to the same value; and meson-core's
//! reader of the body reads the example and its canonical form alike,
//! warnings included. `openapi/meson.json` is
//! the document the server builds (`cargo test -p meson-api openapi`
//! keeps it so).
//!
//! And for every request body, example or not: meson-core's reader of it
//! looks at exactly the fields its typed request has (its module's
//! `BODIES`, or `body_of`, names both).

use meson_api::{Read, canonical, shown};
use meson_core::kaas::{KaasCreate, PoolSpec};
use meson_core::kubernetes;
use meson_core::patch::NameLabels;
use meson_core::target::Target;
use meson_core::vm::VmCreate;
use meson_core::volume::VolumeCreate;
use meson_types::admin::{QuotaUpdateRequest, TargetCreateRequest, TargetUpdateRequest};
use meson_types::cluster::ClusterUpdateRequest;
use meson_types::kaas::{KaasCreateRequest, NodePoolRequest};
use meson_types::ops::{Health, Index};
use meson_types::pool::{NodePoolUpdateRequest, PoolDeleteNodesRequest};
use meson_types::quote::QuoteRequest;
use meson_types::requests::{NameLabelsUpdate, VmCreateRequest};
use meson_types::upgrade::ClusterUpgradeRequest;
use meson_types::volume::VolumeCreateRequest;
use serde_json::Value;
use std::collections::BTreeSet;
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

/// How meson takes one operation's request body: the meson-types request
/// (its canonical form of a body) and meson-core's reader of it.
struct Body {
    canonical: fn(&Value) -> Result<Value, String>,
    read: fn(&Value) -> Read,
}

fn read(canonical: fn(&Value) -> Result<Value, String>, read: fn(&Value) -> Read) -> Option<Body> {
    Some(Body { canonical, read })
}

/// The request body of `method path`: one place per operation, its
/// module's `BODIES` for a resource whose API is one module.
fn body_of(method: &str, path: &str) -> Option<Body> {
    if let Some(b) = meson_api::bodies().find(|b| (b.method, b.path) == (method, path)) {
        return read(b.canonical, b.read);
    }
    match (method, path) {
        ("post", "/v1/vms") => read(canonical::<VmCreateRequest>, |v| shown(vm(v))),
        ("post", "/v1/quotes") => read(canonical::<QuoteRequest>, |v| {
            if v.get("specs").is_some() {
                shown(vm(v))
            } else {
                shown(kaas(v))
            }
        }),
        ("post", "/v1/clusters" | "/v1/kaas") => {
            read(canonical::<KaasCreateRequest>, |v| shown(kaas(v)))
        }
        ("post", "/v1/clusters/{id}/pools") => {
            read(canonical::<NodePoolRequest>, |v| shown(PoolSpec::parse(v)))
        }
        ("post", "/v1/volumes") => read(canonical::<VolumeCreateRequest>, |v| {
            shown(VolumeCreate::parse(v, &[]))
        }),
        ("patch", "/v1/vms/{id}" | "/v1/volumes/{id}") => {
            read(canonical::<NameLabelsUpdate>, |v| {
                shown(NameLabels::parse(v, 63))
            })
        }
        ("post", "/v1/members") => {
            read(canonical::<meson_types::member::MemberCreateRequest>, |v| {
                shown(meson_core::member::MemberCreate::parse(v))
            })
        }
        ("patch", "/v1/members/{subject}") => {
            read(canonical::<meson_types::member::MemberUpdateRequest>, |v| {
                shown(meson_core::member::MemberUpdate::parse(v))
            })
        }
        ("post", "/v1/invitations") => read(
            canonical::<meson_types::member::InvitationCreateRequest>,
            |v| shown(meson_core::member::InvitationCreate::parse(v)),
        ),
        ("post", "/v1/invitations/accept") => read(
            canonical::<meson_types::member::InvitationAcceptRequest>,
            |v| shown(meson_core::member::InvitationAccept::parse(v)),
        ),
        ("post", "/v1/organizations") => read(
            canonical::<meson_types::organization::OrganizationCreateRequest>,
            |v| shown(meson_core::organization::OrgCreate::parse(v)),
        ),
        ("patch", "/v1/organizations/{id}") => read(
            canonical::<meson_types::organization::OrganizationUpdateRequest>,
            |v| shown(meson_core::organization::OrgUpdate::parse(v)),
        ),
        ("post", "/v1/targets") => read(canonical::<TargetCreateRequest>, |v| shown(target(v))),
        ("post", "/v1/admin/prices") => {
            read(canonical::<meson_types::usage::PriceCreateRequest>, |v| {
                shown(meson_core::price::PriceCreate::parse(v))
            })
        }
        ("patch", "/v1/backups/{id}") => read(canonical::<NameLabelsUpdate>, |v| {
            shown(NameLabels::parse(
                v,
                meson_core::backup::MAX_BACKUP_NAME_LEN,
            ))
        }),
        ("post", "/v1/vms/{id}/actions/enable-backups") => {
            read(canonical::<meson_types::backup::BackupPolicyRequest>, |v| {
                shown(meson_core::backup::BackupPolicy::parse(
                    v,
                    uuid::Uuid::nil().into(),
                ))
            })
        }
        ("post", "/v1/vms/{id}/actions/backup") => {
            read(canonical::<meson_types::backup::BackupCreateRequest>, |v| {
                shown(meson_core::backup::BackupCreate::parse(v))
            })
        }
        ("post", "/v1/vms/{id}/actions/restore") => {
            read(canonical::<meson_types::backup::RestoreRequest>, |v| {
                shown(meson_core::backup::Restore::parse(v))
            })
        }
        ("post", "/v1/vms/{id}/actions/resize") => {
            read(canonical::<meson_types::vm::VmResizeRequest>, |v| {
                shown(meson_core::vm::VmResize::parse(v))
            })
        }
        ("post", "/v1/vms/{id}/actions/rebuild") => {
            read(canonical::<meson_types::vm::VmRebuildRequest>, |v| {
                shown(meson_core::vm::VmRebuild::parse(v))
            })
        }
        ("post", "/v1/vms/{id}/actions/migrate") => {
            read(canonical::<meson_types::vm::VmMigrateRequest>, |v| {
                shown(meson_core::vm::VmMigrate::parse(v))
            })
        }
        ("post", "/v1/vms/{id}/actions/attach-network" | "/v1/vms/{id}/actions/detach-network") => {
            read(canonical::<meson_types::vm::VmNetworkRequest>, |v| {
                shown(meson_core::vm::VmNetworkChange::parse(v))
            })
        }
        ("post", "/v1/volumes/{id}/actions/attach") => {
            read(canonical::<meson_types::volume::VolumeAttachRequest>, |v| {
                shown(meson_core::volume::VolumeAttach::parse(v))
            })
        }
        ("post", "/v1/volumes/{id}/actions/move") => {
            read(canonical::<meson_types::volume::VolumeMoveRequest>, |v| {
                shown(meson_core::volume::VolumeMove::parse(v))
            })
        }
        ("post", "/v1/volumes/{id}/actions/resize") => {
            read(canonical::<meson_types::volume::VolumeResizeRequest>, |v| {
                shown(meson_core::volume::VolumeResize::parse(v))
            })
        }
        ("patch", "/v1/clusters/{id}") => read(canonical::<ClusterUpdateRequest>, |v| {
            shown(meson_core::kaas::ClusterUpdate::parse(v))
        }),
        ("patch", "/v1/clusters/{id}/pools/{pool_id}") => {
            read(canonical::<NodePoolUpdateRequest>, |v| {
                shown(meson_core::kaas::PoolPatch::parse(v))
            })
        }
        ("post", "/v1/clusters/{id}/actions/upgrade") => {
            read(canonical::<ClusterUpgradeRequest>, |v| {
                shown(meson_core::kaas::UpgradeRequest::parse(v))
            })
        }
        ("put", "/v1/admin/plans/{name}") => {
            read(canonical::<meson_types::admin::PlanPutRequest>, |v| {
                shown(meson_core::quota::parse_plan(v))
            })
        }
        ("patch", "/v1/tenants/{tenant}/quotas") => read(canonical::<QuotaUpdateRequest>, |v| {
            shown(meson_core::quota::QuotaOverrides::default().patch_tenant(v))
        }),
        ("patch", "/v1/targets/{id}") => read(canonical::<TargetUpdateRequest>, |v| {
            shown(a_target().patched(v))
        }),
        ("post", "/v1/admin/orphans/{id}/actions/adopt") => {
            read(canonical::<meson_types::admin::OrphanAdoptRequest>, |v| {
                shown(meson_core::orphan::Decision::parse_adopt(
                    v,
                    &meson_core::orphan::Orphan::example("vm-0190e3a0c9a87d3c8b1f2e4d5a6b7c8d"),
                ))
            })
        }
        ("post", "/v1/clusters/{id}/pools/{pool_id}/actions/delete-nodes") => {
            read(canonical::<PoolDeleteNodesRequest>, |v| {
                shown(meson_core::kaas::delete_nodes(v))
            })
        }
        _ => None,
    }
}

/// The example and its canonical form read alike with meson's reader.
fn parse_alike(read: fn(&Value) -> Read, example: &Value, canonical: &Value) -> Result<(), String> {
    let first = read(example).map_err(|e| format!("meson refuses it: {e}"))?;
    let again =
        read(canonical).map_err(|e| format!("meson refuses {canonical} (canonical): {e}"))?;
    if first != again {
        return Err(format!(
            "its canonical form {canonical} parses as {again}, not {first}"
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

/// A target, for a PATCH to apply to (the fields its own reader looks at
/// recorded apart).
fn a_target() -> Target {
    let body = serde_json::json!({"name": "ionos-1", "host": "10.0.0.5", "provider": "ionos",
        "region": "de-fra", "continent": "europe"});
    let (parsed, _) = meson_core::parse::keys::recorded(|| target(&body));
    parsed.expect("a target").0
}

/// Checks one request body example of `method path`.
fn request(method: &str, path: &str, ex: &Value) -> Result<(), String> {
    let body = body_of(method, path)
        .ok_or("no meson-types request type is known for it: add it to its module's BODIES")?;
    let json = (body.canonical)(ex)?;
    parse_alike(body.read, ex, &json)
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
    parse_alike(|v| shown(vm(v)), &ex, &json).expect("meson reads both alike");
    let kaas_ex = meson_types::kaas::kaas_create_example();
    let json = canonical::<KaasCreateRequest>(&kaas_ex).expect("typed");
    assert_eq!(json["req"]["nodes_subnet"]["dhcp"], true);
    parse_alike(|v| shown(kaas(v)), &kaas_ex, &json).expect("meson reads both alike");
}

/// `schema` with its `$ref` followed.
fn resolved<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/components/schemas/");
            resolved(doc, &doc["components"]["schemas"][name])
        }
        None => schema,
    }
}

/// The variants of a `oneOf`/`anyOf` (`null` left out), or the schema.
fn variants<'a>(doc: &'a Value, schema: &'a Value) -> Vec<&'a Value> {
    let schema = resolved(doc, schema);
    let listed = ["oneOf", "anyOf"]
        .iter()
        .find_map(|k| schema.get(*k).and_then(Value::as_array));
    match listed {
        Some(vs) => vs
            .iter()
            .filter(|v| v.get("type") != Some(&Value::from("null")))
            .flat_map(|v| variants(doc, v))
            .collect(),
        None => vec![schema],
    }
}

/// The dotted paths of every field `schema` names (an array's items as
/// `[]`; the keys of a free-form map, such as labels, are not fields).
fn schema_fields(doc: &Value, schema: &Value, at: &str, out: &mut BTreeSet<String>) {
    for v in variants(doc, schema) {
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (key, prop) in props {
                let path = meson_core::parse::join(at, key);
                out.insert(path.clone());
                schema_fields(doc, prop, &path, out);
            }
        }
        if let Some(items) = v.get("items") {
            schema_fields(doc, items, &format!("{at}[]"), out);
        }
    }
}

/// A body with every field `schema` names present, each a value of its
/// type (its example where it has one): every field there for a reader to
/// look at, valid or not.
fn sample(doc: &Value, schema: &Value) -> Value {
    // Of several shapes, the one naming most fields.
    let shape = variants(doc, schema)
        .into_iter()
        .max_by_key(|v| {
            let mut fields = BTreeSet::new();
            schema_fields(doc, v, "", &mut fields);
            fields.len()
        })
        .expect("a schema has a shape");
    if let Some(props) = shape.get("properties").and_then(Value::as_object) {
        return Value::Object(
            props
                .iter()
                .map(|(k, p)| (k.clone(), sample(doc, p)))
                .collect(),
        );
    }
    if let Some(example) = shape.get("example") {
        return example.clone();
    }
    if let Some(first) = shape
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let kind = match &shape["type"] {
        Value::Array(kinds) => kinds
            .iter()
            .find(|k| *k != "null")
            .and_then(Value::as_str)
            .unwrap_or("null"),
        other => other.as_str().unwrap_or("object"),
    };
    match kind {
        "array" => Value::Array(vec![sample(doc, &shape["items"])]),
        "string" => Value::from("x"),
        "integer" => shape.get("minimum").cloned().unwrap_or(Value::from(1)),
        "number" => Value::from(1.5),
        "boolean" => Value::from(true),
        _ => Value::Object(Default::default()),
    }
}

/// Every request body meson-core reads names the fields its meson-types
/// request has, no more and no fewer: the typed request (the SDK's, and
/// what the OpenAPI document shows) is the one definition of the body's
/// shape, and its reader (which names every bad field at once and reports
/// unknown ones) is held to it. A field added to one and not the other
/// fails here.
#[test]
fn every_reader_reads_the_fields_of_its_typed_request() {
    let doc = document();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let Some(schema) = op.pointer("/requestBody/content/application~1json/schema") else {
                continue;
            };
            let Some(body) = body_of(method, path) else {
                failures.push(format!(
                    "{method} {path}: no meson-types request type is known for it: add it to \
                     its module's BODIES (or, for a layered resource, to body_of)"
                ));
                continue;
            };
            let read = body.read;
            // A body of several shapes (a quote: of a VM or of a cluster),
            // each on its own.
            for shape in variants(&doc, schema) {
                let mut typed = BTreeSet::new();
                schema_fields(&doc, shape, "", &mut typed);
                let sample = sample(&doc, shape);
                let (_, looked_at) = meson_core::parse::keys::recorded(|| read(&sample));
                let unread: Vec<_> = typed.difference(&looked_at).collect();
                let untyped: Vec<_> = looked_at.difference(&typed).collect();
                if !unread.is_empty() || !untyped.is_empty() {
                    failures.push(format!(
                        "{method} {path}: typed but not read: {unread:?}; read but not typed: \
                         {untyped:?} (from {sample})"
                    ));
                }
                checked += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 15, "only {checked} readers checked");
}
