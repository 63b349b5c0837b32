//! Every key a request's conversion writes is one its REST reader looks
//! at: a message with every field set (built from the `meson.v1`
//! descriptors, so a field added to a `.proto` is in it) is converted, and
//! meson-core's reader of the REST body records what it reads
//! (`meson_core::parse::keys`). A key the conversion misspells, or one the
//! REST request no longer has, fails here rather than being ignored as an
//! unknown field. (The REST readers are held to the typed requests by
//! `tests/openapi_examples.rs`.)

use meson_proto::meson::v1 as pb;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MapKey, MessageDescriptor, Value};
use std::collections::{BTreeSet, HashMap};

/// The key every map field is given: a label's or a quota's name, not a
/// field of the body.
const MAP_KEY: &str = "free-form-key";

/// A message of type `name` with every field set: strings `"x"`, numbers
/// 1, booleans true, one item in each list and map, nested messages filled
/// the same way (to a depth of 6).
pub(crate) fn filled<M: Message + Default>(name: &str) -> M {
    let pool = DescriptorPool::decode(meson_proto::FILE_DESCRIPTOR_SET).expect("descriptors");
    let desc = pool
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("no message {name}"));
    let bytes = message(&desc, 6).encode_to_vec();
    M::decode(bytes.as_slice()).expect("a filled message decodes")
}

fn message(desc: &MessageDescriptor, depth: u32) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    if depth == 0 {
        return m;
    }
    for field in desc.fields() {
        let one = |kind: &Kind| scalar(kind, depth);
        let value = if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                unreachable!("a map's entries are messages")
            };
            let key = MapKey::String(MAP_KEY.to_owned());
            let value = one(&entry.map_entry_value_field().kind());
            Value::Map(HashMap::from([(key, value)]))
        } else if field.is_list() {
            Value::List(vec![one(&field.kind())])
        } else {
            one(&field.kind())
        };
        m.set_field(&field, value);
    }
    m
}

fn scalar(kind: &Kind, depth: u32) -> Value {
    match kind {
        Kind::Double => Value::F64(1.0),
        Kind::Float => Value::F32(1.0),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(1),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(1),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(1),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(1),
        Kind::Bool => Value::Bool(true),
        Kind::String => Value::String("x".to_owned()),
        Kind::Bytes => Value::Bytes(b"x".to_vec().into()),
        Kind::Enum(e) => Value::EnumNumber(e.values().last().map_or(0, |v| v.number())),
        Kind::Message(m) => Value::Message(message(m, depth - 1)),
    }
}

/// The dotted paths of `v`'s keys (an array's items as `[]`), a map
/// field's entries left out.
fn keys(v: &serde_json::Value, at: &str, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if k == MAP_KEY {
                    continue;
                }
                let path = meson_core::parse::join(at, k);
                out.insert(path.clone());
                keys(v, &path, out);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                keys(item, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

/// The keys in `body` its reader never looked at.
pub(crate) fn unread(
    body: &serde_json::Value,
    read: impl FnOnce(&serde_json::Value),
) -> Vec<String> {
    let mut written = BTreeSet::new();
    keys(body, "", &mut written);
    let ((), looked_at) = meson_core::parse::keys::recorded(|| read(body));
    written.difference(&looked_at).cloned().collect()
}

macro_rules! check {
    ($failures:ident, $msg:ident, $convert:expr, $read:expr) => {
        check!($failures, $msg, $convert, $read, |_: &mut pb::$msg| {})
    };
    ($failures:ident, $msg:ident, $convert:expr, $read:expr, $prepare:expr) => {{
        let mut m: pb::$msg = filled(concat!("meson.v1.", stringify!($msg)));
        $prepare(&mut m);
        let body = $convert(&m);
        let unread = unread(&body, |v| drop($read(v)));
        if !unread.is_empty() {
            $failures.push(format!(
                "{}: written, never read: {unread:?} (in {body})",
                stringify!($msg)
            ));
        }
    }};
}

#[test]
fn every_key_a_conversion_writes_is_read() {
    use super::*;
    use meson_core as core;
    let vm = uuid::Uuid::nil().into();
    let mut failures = Vec::new();
    check!(failures, EnableBackupsRequest, backup_policy_request, |v| {
        core::backup::BackupPolicy::parse(v, vm)
    });
    check!(
        failures,
        BackupRequest,
        backup_create,
        core::backup::BackupCreate::parse
    );
    check!(
        failures,
        RestoreRequest,
        restore,
        core::backup::Restore::parse
    );
    check!(failures, CreateClusterRequest, cluster_create, |v| {
        core::kaas::KaasCreate::parse(v, core::kubernetes::today())
    });
    check!(
        failures,
        UpdateClusterRequest,
        cluster_update,
        core::kaas::ClusterUpdate::parse
    );
    check!(
        failures,
        UpgradeClusterRequest,
        cluster_upgrade,
        core::kaas::UpgradeRequest::parse
    );
    check!(
        failures,
        UpdatePoolRequest,
        pool_update,
        core::kaas::PoolPatch::parse
    );
    check!(
        failures,
        CreateMemberRequest,
        member_create,
        core::member::MemberCreate::parse
    );
    check!(
        failures,
        UpdateMemberRequest,
        member_update,
        core::member::MemberUpdate::parse,
        // The limits lifted are named, as map keys are.
        |m: &mut pb::UpdateMemberRequest| m.lift_limits = vec![MAP_KEY.to_owned()]
    );
    check!(
        failures,
        CreateInvitationRequest,
        invitation_create,
        core::member::InvitationCreate::parse
    );
    check!(
        failures,
        AcceptInvitationRequest,
        invitation_accept,
        core::member::InvitationAccept::parse
    );
    check!(
        failures,
        UpdateVolumeRequest,
        |r: &pb::UpdateVolumeRequest| name_labels(&r.name, &r.labels),
        |v| core::patch::NameLabels::parse(v, 63)
    );
    check!(
        failures,
        CreateOrganizationRequest,
        organization_create,
        core::organization::OrgCreate::parse
    );
    check!(
        failures,
        UpdateOrganizationRequest,
        organization_update,
        core::organization::OrgUpdate::parse
    );
    check!(
        failures,
        NodePoolRequest,
        pool_create,
        core::kaas::PoolSpec::parse
    );
    check!(failures, PutPlanRequest, plan_put, core::quota::parse_plan);
    check!(
        failures,
        UpdateTenantQuotaRequest,
        |r: &pb::UpdateTenantQuotaRequest| quota_update(r).expect("a quota PATCH"),
        |v| core::quota::QuotaOverrides::default().patch_tenant(v),
        // Quotas are named as map keys are; none set and reset at once.
        |m: &mut pb::UpdateTenantQuotaRequest| m.reset.clear()
    );
    check!(
        failures,
        CreatePriceRequest,
        price_create,
        core::price::PriceCreate::parse
    );
    check!(
        failures,
        CreateVmRequest,
        vm_create,
        core::vm::VmCreate::parse
    );
    check!(
        failures,
        MigrateVmRequest,
        vm_migrate,
        core::vm::VmMigrate::parse
    );
    check!(
        failures,
        VmNetworkRequest,
        vm_network,
        core::vm::VmNetworkChange::parse
    );
    check!(
        failures,
        RebuildVmRequest,
        vm_rebuild,
        core::vm::VmRebuild::parse
    );
    check!(
        failures,
        ResizeVmRequest,
        vm_resize,
        core::vm::VmResize::parse
    );
    check!(failures, CreateVolumeRequest, volume_create, |v| {
        core::volume::VolumeCreate::parse(v, &[])
    });
    check!(
        failures,
        AttachVolumeRequest,
        volume_attach,
        core::volume::VolumeAttach::parse
    );
    check!(
        failures,
        ResizeVolumeRequest,
        volume_resize,
        core::volume::VolumeResize::parse
    );
    check!(
        failures,
        MoveVolumeRequest,
        volume_move,
        core::volume::VolumeMove::parse
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
