//! Sub-organisations: an owner carves one out of the organisation it acts
//! in, with quotas that count as held by the parent; the parent's owners
//! and managers act in it (`Meson-Organization`) at their own role.

use super::App;
use crate::auth::Principal;
use meson_core::organization::{OrgCreate, OrgUpdate, Organization, child_id};
use meson_core::{Error, Result, TenantId};
use meson_db::organizations::Node;
use meson_db::scope;

/// Whether `id` lies strictly below `org`.
fn below(id: &str, org: &TenantId) -> bool {
    id.strip_prefix(org.as_str())
        .is_some_and(|rest| rest.starts_with('.') && rest.len() > 1)
}

impl App {
    /// The organisation the call acts in and every one below it.
    pub async fn org_list(&self, p: &Principal) -> Result<Vec<Node>> {
        scope::system(meson_db::organizations::tree(&self.pool, &p.tenant)).await
    }

    /// The organisation the call acts in, or one below it; any other is
    /// `not_found`.
    pub async fn org_get(&self, p: &Principal, id: &str) -> Result<Node> {
        let tree = self.org_list(p).await?;
        tree.into_iter()
            .find(|n| n.org.id.as_str() == id)
            .ok_or_else(|| Error::not_found("organization", id))
    }

    /// A sub-organisation of the organisation the call acts in. Its quotas
    /// must fit in what the parent holds no use for: the parent's quota,
    /// less its own resources and its other sub-organisations' quotas.
    pub async fn org_create(&self, p: &Principal, body: &serde_json::Value) -> Result<Node> {
        let req = OrgCreate::parse(body)?;
        let id = child_id(&p.tenant, &req.name)?;
        scope::system(async {
            let mut tx = meson_db::begin(&self.pool).await?;
            let held = self.hold_usage(&mut tx, &p.tenant).await?;
            if meson_db::organizations::taken(&mut tx, &id).await? {
                return Err(Error::AlreadyExists {
                    kind: "organization",
                    field: "name".to_owned(),
                });
            }
            meson_db::organizations::ensure(&mut tx, &p.tenant, &p.subject).await?;
            let org = meson_db::organizations::insert(
                &mut tx,
                &Organization {
                    id: id.clone(),
                    parent: Some(p.tenant.clone()),
                    name: req.name,
                    created_by: p.subject.clone(),
                    created: chrono::Utc::now(),
                },
            )
            .await?;
            let quotas = meson_core::quota::QuotaOverrides::from_array(
                req.quotas.entries().map(|(_, v)| Some(v)),
            );
            meson_db::quotas::set(&mut *tx, &id, &quotas, &p.subject).await?;
            self.within_quotas(&mut tx, &p.tenant, &held).await?;
            meson_db::commit(tx).await?;
            tracing::info!(organization = %id, ?quotas, "sub-organisation created");
            Ok(Node {
                org,
                depth: 1,
                quotas,
            })
        })
        .await
    }

    /// Changes a sub-organisation's quotas (those named): a rise must fit
    /// in its parent's as a creation's does; a cut always passes.
    pub async fn org_update(
        &self,
        p: &Principal,
        id: &str,
        body: &serde_json::Value,
    ) -> Result<Node> {
        let req = OrgUpdate::parse(body)?;
        let node = self.org_get(p, id).await?;
        let parent = match (&node.org.parent, below(id, &p.tenant)) {
            (Some(parent), true) => parent.clone(),
            _ => {
                return Err(Error::Forbidden {
                    message: "an organisation's quotas are set by the organisation above it"
                        .to_owned(),
                });
            }
        };
        scope::system(async {
            let mut tx = meson_db::begin(&self.pool).await?;
            let held = self.hold_usage(&mut tx, &parent).await?;
            let current = meson_db::quotas::get(&mut *tx, &node.org.id).await?;
            let next = req.quotas.over(&current);
            meson_db::quotas::set(&mut *tx, &node.org.id, &next, &p.subject).await?;
            self.within_quotas(&mut tx, &parent, &held).await?;
            meson_db::commit(tx).await?;
            tracing::info!(organization = %id, quotas = ?next, "sub-organisation's quotas set");
            Ok(Node {
                quotas: next,
                ..node
            })
        })
        .await
    }

    /// Ends a sub-organisation below the one the call acts in, once it
    /// holds nothing and has none below it.
    pub async fn org_delete(&self, p: &Principal, id: &str) -> Result<Node> {
        let node = self.org_get(p, id).await?;
        if !below(id, &p.tenant) {
            return Err(Error::Forbidden {
                message: "an organisation is ended by the organisation above it".to_owned(),
            });
        }
        let tree = scope::system(meson_db::organizations::tree(&self.pool, &node.org.id)).await?;
        if tree.len() > 1 {
            return Err(Error::Conflict {
                message: format!(
                    "organisation {id} has sub-organisations: end them first ({})",
                    tree[1].org.id
                ),
            });
        }
        scope::system(async {
            let mut tx = meson_db::begin(&self.pool).await?;
            let held = self.hold_usage(&mut tx, &node.org.id).await?;
            let holds: Vec<String> = held
                .entries()
                .iter()
                .filter(|(_, v)| *v != 0)
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            if !holds.is_empty() {
                return Err(Error::Conflict {
                    message: format!(
                        "organisation {id} still holds resources ({}): delete them first",
                        holds.join(", ")
                    ),
                });
            }
            meson_db::organizations::delete(&mut tx, &node.org.id, &p.subject).await?;
            meson_db::commit(tx).await?;
            tracing::info!(organization = %id, "sub-organisation ended");
            Ok(node)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn below_is_strictly_below() {
        let acme = meson_core::TenantId("acme".into());
        assert!(super::below("acme.team", &acme));
        assert!(super::below("acme.team.x", &acme));
        assert!(!super::below("acme", &acme));
        assert!(!super::below("acme.", &acme));
        assert!(!super::below("acmex.team", &acme));
    }
}
