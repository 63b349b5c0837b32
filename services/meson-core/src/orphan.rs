//! Orphans: VMs a host holds that meson has no record of.
//!
//! A database restored from a backup has lost every VM created after the
//! backup was taken, while the hosts kept running them. The reconciler
//! compares each host's inventory with meson's rows: a VM whose name meson
//! gave ([`crate::naming::parse_vm_atomos_name`]) and whose tenant tag
//! names a tenant meson knows is adopted back into that tenant; any other
//! (a cluster's node, an unknown tag, a name meson never gave) is an
//! orphan, kept until an operator decides: adopt it into a tenant, or
//! delete it from its host. Nothing is deleted without that decision.

use crate::naming::VmOwner;
use crate::{OrphanId, TargetId, TenantId, VmId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One of an orphan's volumes, as its host's storage lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrphanVolume {
    pub atomos_id: String,
    pub name: String,
    pub size_gb: f64,
    pub bootable: bool,
    pub readonly: bool,
    pub cloudinit: bool,
}

/// What an operator decided for an orphan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Into this tenant, under this name (its AtomOS name if `None`).
    Adopt {
        tenant: TenantId,
        name: Option<String>,
    },
    Delete,
}

impl Decision {
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Adopt { .. } => "adopt",
            Decision::Delete => "delete",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Orphan {
    pub id: OrphanId,
    pub target_id: TargetId,
    /// The target's name.
    pub host: String,
    pub atomos_id: String,
    pub atomos_name: String,
    /// What the name says, when meson gave it.
    pub owner: Option<VmOwner>,
    /// The tenant the name's tag names, among those meson knows.
    pub tenant: Option<TenantId>,
    pub state: String,
    pub vcpus: u32,
    pub ram_mib: u64,
    pub ipv4: Option<std::net::Ipv4Addr>,
    pub volumes: Vec<OrphanVolume>,
    /// Why it was not adopted by itself.
    pub reason: String,
    pub decision: Option<Decision>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    /// What stopped the decision the last time the reconciler tried it.
    pub error_message: Option<String>,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
}

impl Orphan {
    /// The id an adopted VM gets: the one its name carries, or a new one.
    pub fn vm_id(&self) -> VmId {
        self.owner.as_ref().map_or_else(VmId::new, |o| o.vm)
    }

    /// Why an orphan is not adopted without an operator: `None` when it
    /// may be (meson named it, for a tenant meson knows, and it is no
    /// cluster's node).
    pub fn held_because(owner: Option<&VmOwner>, tenant: Option<&TenantId>) -> Option<String> {
        let Some(owner) = owner else {
            return Some("meson did not name this VM: it was made outside meson".into());
        };
        if let Some((cluster, _)) = &owner.cluster_prefix {
            return Some(format!(
                "a node of cluster {cluster}…: a cluster's nodes follow its node pools, so an \
                 operator decides whether it stays (adopted as a plain VM) or goes"
            ));
        }
        match (&owner.tenant_tag, tenant) {
            (None, _) => {
                Some("its name carries no tenant tag (named before meson wrote them)".into())
            }
            (Some(tag), None) => Some(format!("its tenant tag {tag} names no tenant meson knows")),
            (Some(_), Some(_)) => None,
        }
    }
}

impl Decision {
    /// An operator's `adopt` body for `orphan`: `tenant` (required; when
    /// the orphan's name carries a tenant tag, the tenant must be the one
    /// it names) and `name` (optional, a VM name; the AtomOS name if
    /// absent).
    pub fn parse_adopt(
        body: &serde_json::Value,
        orphan: &Orphan,
    ) -> crate::Result<(Decision, Vec<crate::parse::Warning>)> {
        let mut p = crate::parse::Parser::default();
        let mut root = p.body(body)?;
        let tenant = p.string(&mut root, "tenant", true).and_then(|(path, t)| {
            if !TenantId::valid(t) {
                p.errors.add(
                    path,
                    format!(
                        "must be 1 to {} characters from [A-Za-z0-9._:@-]",
                        TenantId::MAX_LEN
                    ),
                );
                return None;
            }
            let tenant = TenantId(t.to_owned());
            let tag = orphan.owner.as_ref().and_then(|o| o.tenant_tag.as_deref());
            match tag {
                Some(tag) if crate::naming::tenant_tag(&tenant) != tag => {
                    p.errors.add(
                        path,
                        format!(
                            "is not the VM's tenant: its name carries tenant tag {tag}, \
                                 and {t}'s tag is {}",
                            crate::naming::tenant_tag(&tenant)
                        ),
                    );
                    None
                }
                _ => Some(tenant),
            }
        });
        let name = p.atomos_name(&mut root, "name", false, crate::vm::MAX_NAME_LEN);
        p.done(root);
        let crate::parse::Parser { errors, warnings } = p;
        let decision = Decision::Adopt {
            tenant: tenant.unwrap_or_else(|| TenantId(String::new())),
            name,
        };
        errors.finish((decision, warnings))
    }
}

/// An orphan named `name` on a host, running and undecided, for tests
/// (its ids nil, first and last seen at the epoch).
#[cfg(any(test, feature = "testing"))]
impl Orphan {
    pub fn example(name: &str) -> Orphan {
        Orphan {
            id: uuid::Uuid::nil().into(),
            target_id: uuid::Uuid::nil().into(),
            host: "h".into(),
            atomos_id: "x".into(),
            atomos_name: name.into(),
            owner: crate::naming::parse_vm_atomos_name(name),
            tenant: None,
            state: "running".into(),
            vcpus: 1,
            ram_mib: 512,
            ipv4: None,
            volumes: Vec::new(),
            reason: String::new(),
            decision: None,
            decided_by: None,
            decided_at: None,
            error_message: None,
            first_seen: DateTime::UNIX_EPOCH,
            last_seen: DateTime::UNIX_EPOCH,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn orphan(name: &str) -> Orphan {
        Orphan::example(name)
    }

    #[test]
    fn an_adoption_names_the_tenant_the_vm_carries() {
        let acme = TenantId("acme".into());
        let tagged = orphan(&crate::naming::vm_atomos_name(VmId::new(), &acme));
        let (d, _) = Decision::parse_adopt(&json!({"tenant": "acme"}), &tagged).unwrap();
        assert_eq!(
            d,
            Decision::Adopt {
                tenant: acme,
                name: None
            }
        );
        let e = Decision::parse_adopt(&json!({"tenant": "globex"}), &tagged).unwrap_err();
        assert!(e.to_string().contains("tenant"), "{e}");
        // A VM meson did not name goes where the operator says.
        let foreign = orphan("web-1");
        let (d, _) =
            Decision::parse_adopt(&json!({"tenant": "globex", "name": "web"}), &foreign).unwrap();
        assert_eq!(
            d,
            Decision::Adopt {
                tenant: TenantId("globex".into()),
                name: Some("web".into())
            }
        );
        for bad in [
            json!({}),
            json!({"tenant": "*"}),
            json!({"tenant": "a", "name": "no_underscores"}),
            json!([]),
        ] {
            assert!(Decision::parse_adopt(&bad, &foreign).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_standalone_vm_named_for_a_known_tenant_is_adopted_unasked() {
        let acme = TenantId("acme".into());
        let id = VmId::new();
        let owner = crate::naming::parse_vm_atomos_name(&crate::naming::vm_atomos_name(id, &acme));
        assert_eq!(Orphan::held_because(owner.as_ref(), Some(&acme)), None);
        assert!(
            Orphan::held_because(owner.as_ref(), None)
                .unwrap()
                .contains("names no tenant")
        );
        let node = crate::naming::parse_vm_atomos_name(&crate::naming::node_atomos_name(
            crate::ClusterId::new(),
            true,
            id,
            &acme,
        ));
        assert!(
            Orphan::held_because(node.as_ref(), Some(&acme))
                .unwrap()
                .contains("cluster")
        );
        assert!(
            Orphan::held_because(None, None)
                .unwrap()
                .contains("outside meson")
        );
    }
}
