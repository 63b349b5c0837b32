//! Actions.

use super::meta::timestamp;
use meson_proto::meson::v1 as pb;
use meson_types as wire;

pub fn action(a: wire::Action) -> pb::Action {
    pb::Action {
        id: a.id.to_string(),
        command: a.command,
        status: a.status,
        progress: u32::from(a.progress),
        started: Some(timestamp(a.started)),
        finished: a.finished.map(timestamp),
        resources: a
            .resources
            .into_iter()
            .map(|r| pb::ActionResource {
                id: r.id.to_string(),
                r#type: r.kind,
            })
            .collect(),
        error: a.error.map(|e| pb::ActionError {
            code: e.code,
            message: e.message,
        }),
    }
}
