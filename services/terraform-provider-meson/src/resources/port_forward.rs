//! `meson_port_forward`: a public port of the AtomOS host of a private
//! network's VM, relayed to a port of the VM.

use super::{Json, Notes, number, obj, parse_id, text, wait};
use crate::diag::{Failure, Res, map_field};
use crate::schema::{Attr, Block, Step, timeouts_block};
use crate::value::Ty;
use meson_client::Client;
use meson_client::types::port_forward::{PortForward, PortForwardCreateRequest};
use std::time::Duration;
use uuid::Uuid;

pub fn block() -> Block {
    Block {
        description: "A port forward: `public_port` of the AtomOS host of the VM `vm_id` (a VM \
                      on the private network `network_id`, running or off) relayed to the \
                      VM's `private_port`, reached at `public_ip:public_port`. Every attribute \
                      replaces it. A create waits until the host forwards the port; one that \
                      fails (the port is in use on the host) is removed again and reported. \
                      While a VM has forwards it cannot migrate or leave their network; \
                      deleting the VM deletes them. A forward whose host no longer has it is \
                      `error`: `terraform apply -replace` makes it again. Import as \
                      `NETWORK_ID/FORWARD_ID`.",
        attrs: vec![
            Attr::computed("id", Ty::Str, "The forward's id."),
            Attr::required("network_id", Ty::Str, "The private network.")
                .force_new()
                .tracked(),
            Attr::required("vm_id", Ty::Str, "The VM: on the network, running or off.")
                .force_new()
                .tracked(),
            Attr::defaulted("protocol", Ty::Str, "`tcp` (the default) or `udp`.")
                .force_new()
                .tracked(),
            Attr::required(
                "public_port",
                Ty::Num,
                "The port on the VM's host, 1 to 65535: free there, whichever tenant's.",
            )
            .force_new()
            .tracked(),
            Attr::required(
                "private_port",
                Ty::Num,
                "The VM's port it reaches, 1 to 65535.",
            )
            .force_new()
            .tracked(),
            Attr::computed(
                "public_ip",
                Ty::Str,
                "Where it is reached: its host's address.",
            )
            .tracked(),
            Attr::computed(
                "host",
                Ty::Str,
                "The AtomOS host it forwards on (its VM's).",
            )
            .tracked(),
            Attr::computed(
                "status",
                Ty::Str,
                "`active`; `error` when its host no longer has it; `deleting`.",
            )
            .tracked(),
        ],
        blocks: vec![timeouts_block()],
    }
}

pub fn field(f: &str) -> Option<Vec<Step>> {
    map_field(
        &[
            ("vm", &["vm_id"]),
            ("protocol", &["protocol"]),
            ("public_port", &["public_port"]),
            ("private_port", &["private_port"]),
        ],
        f,
    )
}

fn err(e: meson_client::Error) -> Failure {
    Failure::from_client(e, field)
}

fn to_json(f: &PortForward) -> Json {
    obj([
        ("id", Json::from(f.id.to_string())),
        ("network_id", Json::from(f.network.to_string())),
        ("vm_id", Json::from(f.vm.to_string())),
        ("protocol", Json::from(f.protocol.clone())),
        ("public_port", Json::from(f.public_port)),
        ("private_port", Json::from(f.private_port)),
        ("public_ip", Json::from(f.public_ip.clone())),
        ("host", Json::from(f.host.clone())),
        ("status", Json::from(f.status.clone())),
    ])
}

/// The attribute `k` as an id.
fn id_at(p: &Json, k: &str) -> Res<Uuid> {
    parse_id(&text(p, k).unwrap_or_default()).map_err(|f| f.at(vec![Step::Attr(k.into())]))
}

/// The attribute `k` as a port: 1 to 65535.
fn port(p: &Json, k: &str) -> Res<u16> {
    match number(p, k).and_then(|n| u16::try_from(n).ok()) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(Failure::msg(
            format!("bad {k}: {}", p.get(k).unwrap_or(&Json::Null)),
            "a port is a whole number from 1 to 65535",
        )
        .at(vec![Step::Attr(k.into())])),
    }
}

/// The network's id and the forward's, from a state.
fn ids(state: &Json) -> Res<(Uuid, Uuid)> {
    Ok((id_at(state, "network_id")?, id_at(state, "id")?))
}

pub async fn create(c: &Client, p: &Json, t: Duration, notes: &mut Notes) -> Res<Json> {
    let network = id_at(p, "network_id")?;
    let req = PortForwardCreateRequest {
        protocol: text(p, "protocol"),
        public_port: port(p, "public_port")?,
        vm: id_at(p, "vm_id")?,
        private_port: port(p, "private_port")?,
    };
    let r = c.port_forward_create(network, &req).await.map_err(err)?;
    notes.extend(r.warnings);
    let id = r.port_forward.id;
    let waited = c
        .wait_for_with(
            &[r.action.id],
            meson_client::WaitOpts::default(),
            tokio::time::sleep(t),
        )
        .await;
    match waited {
        Ok(_) => {}
        // The host does not forward it: the forward is `error`, holding
        // nothing. It is removed, so that nothing Terraform does not hold
        // is left; the apply fails with the action's error.
        Err(e @ meson_client::Error::ActionFailed { .. }) => {
            let mut f = err(e);
            if let Err(left) = discard(c, network, id, t).await {
                f.detail.push_str(&format!(
                    "\nThe failed forward {id} could not be removed ({}): delete it with \
                     `mesonctl port-forward delete {network} {id}`.",
                    left.summary
                ));
            }
            return Err(f);
        }
        // Still going (a timeout): kept, tainted, to replace or destroy.
        Err(e) => {
            let mut f = err(e).created(id);
            f.created = f.created.map(|mut j| {
                j["network_id"] = Json::from(network.to_string());
                j
            });
            return Err(f);
        }
    }
    Ok(to_json(
        &c.port_forward_get(network, id).await.map_err(err)?,
    ))
}

/// Deletes a forward whose create failed, and waits until it is gone.
async fn discard(c: &Client, network: Uuid, id: Uuid, t: Duration) -> Res<()> {
    match c.port_forward_delete(network, id).await {
        Ok(a) => wait(c, &[a.id], t, field).await,
        Err(e) if e.code() == Some("not_found") => Ok(()),
        Err(e) => Err(err(e)),
    }
}

/// `None` when the forward (or its network) is gone.
pub async fn read(c: &Client, state: &Json) -> Res<Option<Json>> {
    let (network, id) = ids(state)?;
    match c.port_forward_get(network, id).await {
        Ok(f) => Ok(Some(to_json(&f))),
        Err(e) if e.code() == Some("not_found") => Ok(None),
        Err(e) => Err(err(e)),
    }
}

/// Every attribute replaces it: only `timeouts` changes in place, and
/// meson has nothing to do for that.
pub async fn update(c: &Client, prior: &Json) -> Res<Json> {
    let (network, id) = ids(prior)?;
    Ok(to_json(
        &c.port_forward_get(network, id).await.map_err(err)?,
    ))
}

pub async fn delete(c: &Client, prior: &Json, t: Duration) -> Res<()> {
    let (network, id) = ids(prior)?;
    let a = c.port_forward_delete(network, id).await.map_err(err)?;
    wait(c, &[a.id], t, field).await
}

/// The state an import starts from: `NETWORK_ID/FORWARD_ID`.
pub fn import_state(id: &str) -> Res<Json> {
    let (network, forward) = id.split_once('/').ok_or_else(|| {
        Failure::msg(
            "import a port forward as NETWORK_ID/FORWARD_ID",
            format!("got {id:?}"),
        )
    })?;
    parse_id(network)?;
    parse_id(forward)?;
    Ok(serde_json::json!({"id": forward, "network_id": network}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_imports() {
        let p = serde_json::json!({"public_port": 2222, "private_port": 0, "big": 70000});
        assert_eq!(port(&p, "public_port").unwrap(), 2222);
        let f = port(&p, "private_port").unwrap_err();
        assert_eq!(f.path, Some(vec![Step::Attr("private_port".into())]));
        assert!(port(&p, "big").is_err());
        assert!(port(&p, "missing").is_err());
        let (n, f) = (Uuid::new_v4(), Uuid::new_v4());
        let s = import_state(&format!("{n}/{f}")).unwrap();
        assert_eq!(ids(&s).unwrap(), (n, f));
        assert!(import_state(&f.to_string()).is_err());
        assert!(import_state("a/b").is_err());
        assert_eq!(field("vm"), Some(vec![Step::Attr("vm_id".into())]));
    }
}
