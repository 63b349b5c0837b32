//! Backups: answers (and a VM's backup policy), and requests as the REST
//! ones.

use super::json::Obj;
use super::meta::{list_query, map, timestamp};
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::Value;

pub fn backup(b: wire::backup::Backup) -> pb::Backup {
    pb::Backup {
        id: b.id.to_string(),
        name: b.name,
        vm: b.vm.to_string(),
        vm_name: b.vm_name,
        kind: b.kind,
        status: b.status,
        size: b.size,
        volumes: b
            .volumes
            .into_iter()
            .map(|v| pb::BackupVolume {
                volume: v.volume.map(|id| id.to_string()),
                kind: v.kind,
                size: v.size,
            })
            .collect(),
        host: b.host,
        provider: b.provider,
        region: b.region,
        labels: map(&b.labels),
        error: b.error,
        created: Some(timestamp(b.created)),
        expires: b.expires.map(timestamp),
    }
}

pub fn backup_policy(p: wire::backup::BackupPolicy) -> pb::BackupPolicy {
    pb::BackupPolicy {
        window: p.window,
        keep: p.keep,
    }
}

/// An `EnableBackupsRequest` as the REST body of
/// `POST /v1/vms/{id}/actions/enable-backups`: an empty window and a zero
/// `keep` are absent (the defaults apply).
pub fn backup_policy_request(r: &pb::EnableBackupsRequest) -> Value {
    Obj::new()
        .str("window", &r.window)
        .num("keep", r.keep)
        .value()
}

/// A `BackupRequest` as the REST body of `POST /v1/vms/{id}/actions/backup`.
pub fn backup_create(r: &pb::BackupRequest) -> Value {
    Obj::new()
        .str("name", &r.name)
        .labels("labels", &r.labels)
        .value()
}

/// A `RestoreRequest` as the REST body of `POST /v1/vms/{id}/actions/restore`:
/// empty fields are absent (and `backup` named as missing).
pub fn restore(r: &pb::RestoreRequest) -> Value {
    Obj::new()
        .str("backup", &r.backup)
        .str("into", &r.into)
        .str("name", &r.name)
        .value()
}

/// `ListBackupsRequest` as the REST list's query pairs: an empty field
/// filters nothing.
pub fn backup_list_query(r: &pb::ListBackupsRequest) -> Vec<(String, String)> {
    let mut q = list_query(r.options.as_ref());
    if !r.vm.is_empty() {
        q.push(("vm".into(), r.vm.clone()));
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_backup_requests_are_the_rest_ones() {
        let enable = pb::EnableBackupsRequest {
            id: "x".into(),
            window: "22-02".into(),
            keep: 3,
        };
        assert_eq!(
            backup_policy_request(&enable),
            json!({"window": "22-02", "keep": 3})
        );
        assert_eq!(
            backup_policy_request(&pb::EnableBackupsRequest::default()),
            json!({})
        );
        let take = pb::BackupRequest {
            vm: "x".into(),
            name: "before".into(),
            labels: [("env".to_owned(), "prod".to_owned())].into(),
        };
        assert_eq!(
            backup_create(&take),
            json!({"name": "before", "labels": {"env": "prod"}})
        );
        let r = pb::RestoreRequest {
            id: "x".into(),
            backup: "b".into(),
            into: "new".into(),
            name: String::new(),
        };
        assert_eq!(restore(&r), json!({"backup": "b", "into": "new"}));
        let list = pb::ListBackupsRequest {
            options: Some(pb::ListOptions {
                status: vec!["available".into()],
                ..Default::default()
            }),
            vm: "v".into(),
        };
        assert_eq!(
            backup_list_query(&list),
            [
                ("status".to_owned(), "available".to_owned()),
                ("vm".to_owned(), "v".to_owned())
            ]
        );
    }
}
