//! Cluster upgrades and credential rotation: the `upgrade_cluster` and
//! `rotate_credentials` actions.

use super::{App, new_action};
use crate::auth::Principal;
use meson_core::action::{Action, Command, ResourceType};
use meson_core::kubernetes::{self, KubeVersion};
use meson_core::parse::{Parser, Warning};
use meson_core::{ClusterId, Error, Result};
use meson_workflows::cluster_upgrade::{self, MAX_ROLLOUT, UpgradeParams};

/// What `POST /v1/clusters/{id}/actions/upgrade` asked for.
struct UpgradeRequest {
    /// As the client wrote it (`1.30`, `v1.30.14`...).
    version: String,
    max_surge: u32,
    max_unavailable: u32,
}

fn parse_upgrade(body: &serde_json::Value) -> Result<(UpgradeRequest, Vec<Warning>)> {
    let mut parser = Parser::default();
    let Some(mut root) = parser.root(body) else {
        return Err(parser
            .errors
            .into_error()
            .unwrap_or_else(|| Error::invalid("(body)", "must be an object")));
    };
    let version = parser
        .string(&mut root, "kubernetes_version", true)
        .map(|(_, s)| s.to_owned());
    let range = 0..=i64::from(MAX_ROLLOUT);
    let max_surge = parser.int(&mut root, "max_surge", range.clone(), false);
    let max_unavailable = parser.int(&mut root, "max_unavailable", range, false);
    parser.done(root);
    let Parser { errors, warnings } = parser;
    errors.finish(())?;
    // In range: checked above.
    let as_u32 =
        |n: Option<i64>, default: u32| n.map_or(default, |n| u32::try_from(n).unwrap_or(default));
    let req = UpgradeRequest {
        version: version.unwrap_or_default(),
        max_surge: as_u32(max_surge, cluster_upgrade::DEFAULT_MAX_SURGE),
        max_unavailable: as_u32(max_unavailable, cluster_upgrade::DEFAULT_MAX_UNAVAILABLE),
    };
    if req.max_surge == 0 && req.max_unavailable == 0 {
        return Err(Error::invalid(
            "max_surge",
            "max_surge and max_unavailable cannot both be 0: nothing could be replaced",
        ));
    }
    Ok((req, warnings))
}

fn not_running(status: &str, what: &str) -> Error {
    Error::Conflict {
        message: format!("the cluster is {status}; {what} needs it running"),
    }
}

impl App {
    /// Starts a rolling upgrade of a running cluster to a later patch of
    /// its minor or a patch of the next minor (`invalid_input` on
    /// `kubernetes_version` otherwise), `locked` while another action runs
    /// on it, `conflict` when it is not `running`.
    pub async fn cluster_upgrade(
        &self,
        p: &Principal,
        id: ClusterId,
        body: &serde_json::Value,
    ) -> Result<(Action, Vec<Warning>)> {
        let (req, mut warnings) = parse_upgrade(body)?;
        let cluster = meson_db::clusters::get(&self.pool, &p.tenant, id).await?;
        let from: KubeVersion = cluster.kubernetes_version.parse().map_err(|e| {
            Error::internal(format!(
                "cluster version {}: {e}",
                cluster.kubernetes_version
            ))
        })?;
        let resolved = kubernetes::resolve_upgrade(&from, &req.version)
            .map_err(|m| Error::invalid("kubernetes_version", m))?;
        let to = resolved.release.version;
        warnings.extend(
            resolved
                .warnings(&req.version, kubernetes::today())
                .into_iter()
                .map(|message| Warning {
                    field: "kubernetes_version".to_owned(),
                    message,
                }),
        );
        // Without DHCP every replacement takes an address before the node
        // it replaces frees its own.
        let subnet = &cluster.spec.nodes_subnet;
        if !subnet.dhcp {
            let nodes = meson_db::clusters::nodes(&self.pool, id).await?.len() as u64;
            // The API endpoint holds one address.
            let free = subnet.capacity().saturating_sub(nodes + 1);
            let at_once = u64::from(req.max_surge + req.max_unavailable).max(1);
            if free == 0 {
                return Err(Error::Conflict {
                    message: "the nodes' subnet has no free address for a replacement node"
                        .to_owned(),
                });
            }
            if at_once > free {
                return Err(Error::invalid(
                    "max_surge",
                    format!(
                        "replacing {at_once} nodes at once needs {at_once} free addresses in \
                         the nodes' subnet; it has {free}"
                    ),
                ));
            }
        }
        let action = new_action(
            p,
            Command::UpgradeCluster,
            vec![(ResourceType::Cluster, id.0)],
        );
        let params = UpgradeParams {
            cluster_id: id,
            kubernetes_version: to.to_string(),
            max_surge: req.max_surge,
            max_unavailable: req.max_unavailable,
        };
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        cluster_upgrade::enqueue(&mut tx, &params, action.id, &p.tenant)
            .await?
            .or_locked("cluster", id)?;
        // Under the cluster's lock now: still running, at the version checked?
        if !meson_db::cluster_upgrades::begin_update(
            &mut tx,
            id,
            Some(&cluster.kubernetes_version),
            None,
        )
        .await?
        {
            let now = meson_db::clusters::get(&mut *tx, &p.tenant, id).await?;
            if now.kubernetes_version != cluster.kubernetes_version {
                return Err(Error::Conflict {
                    message: format!(
                        "the cluster now runs Kubernetes {}; check the upgrade again",
                        now.kubernetes_version
                    ),
                });
            }
            return Err(not_running(now.status.as_str(), "an upgrade"));
        }
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %id, action = %action.id, from = %from, to = %to,
            max_surge = req.max_surge, max_unavailable = req.max_unavailable,
            "cluster upgrade accepted");
        Ok((action, warnings))
    }

    /// Starts rotating a running cluster's credentials (a new admin CA for
    /// kubeconfigs, a new bootstrap token; every control-plane node
    /// replaced): `locked` while another action runs on it, `conflict`
    /// when it is not `running`.
    pub async fn cluster_rotate_credentials(&self, p: &Principal, id: ClusterId) -> Result<Action> {
        // Whoever may hold the cluster may cut others off it.
        meson_db::clusters::get(&self.pool, &p.tenant, id).await?;
        let action = new_action(
            p,
            Command::RotateCredentials,
            vec![(ResourceType::Cluster, id.0)],
        );
        let mut tx = meson_db::begin(&self.pool).await?;
        meson_db::actions::insert(&mut tx, &action).await?;
        meson_workflows::cluster_rotate_credentials::enqueue(&mut tx, id, action.id, &p.tenant)
            .await?
            .or_locked("cluster", id)?;
        if !meson_db::cluster_upgrades::begin_update(&mut tx, id, None, None).await? {
            let now = meson_db::clusters::get(&mut *tx, &p.tenant, id).await?;
            return Err(not_running(now.status.as_str(), "a credentials rotation"));
        }
        meson_db::commit(tx).await?;
        tracing::info!(cluster = %id, action = %action.id, "credentials rotation accepted");
        Ok(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(e: &Error) -> String {
        match e {
            Error::InvalidInput { fields } => fields[0].name.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn upgrade_requests_default_to_surge_one_and_name_bad_fields() {
        let (r, w) = parse_upgrade(&json!({"kubernetes_version": "1.30"})).unwrap();
        assert_eq!(
            (r.version.as_str(), r.max_surge, r.max_unavailable),
            ("1.30", 1, 0)
        );
        assert!(w.is_empty());
        let (r, w) = parse_upgrade(
            &json!({"kubernetes_version": "1.30.4", "max_surge": 0, "max_unavailable": 2, "x": 1}),
        )
        .unwrap();
        assert_eq!((r.max_surge, r.max_unavailable), (0, 2));
        assert_eq!(w[0].field, "x");
        for (body, name) in [
            (json!({}), "kubernetes_version"),
            (json!({"kubernetes_version": 1.3}), "kubernetes_version"),
            (
                json!({"kubernetes_version": "1.30", "max_surge": -1}),
                "max_surge",
            ),
            (
                json!({"kubernetes_version": "1.30", "max_surge": 11}),
                "max_surge",
            ),
            (
                json!({"kubernetes_version": "1.30", "max_unavailable": "1"}),
                "max_unavailable",
            ),
            (
                json!({"kubernetes_version": "1.30", "max_surge": 0, "max_unavailable": 0}),
                "max_surge",
            ),
        ] {
            let e = parse_upgrade(&body)
                .err()
                .unwrap_or_else(|| panic!("{body} accepted"));
            assert_eq!(field(&e), name, "{body}");
        }
        assert!(parse_upgrade(&json!([1])).is_err());
    }
}
