//! Compute (matcher) daemon: VM backups (create, list, search by VM,
//! delete, restore into volumes of the host).
//!
//! Elemento's compute daemon names `POST /backup`, `POST /backup/restore`,
//! `POST /backup/schedule`, `GET|DELETE /backups` and `GET /backups/search`;
//! only the create's answer `{"backup_id"}` is public. The bodies here are
//! meson's design (docs/atomos.md); `/backup/schedule` is not called: meson
//! schedules backups itself.

use crate::client::{AtomosClient, Call, Daemon};
use crate::error::DriverError;
use crate::schema::compute::{
    BackupCreateBody, BackupIdBody, BackupList, BackupObject, BackupRestoreBody,
    BackupRestoreVolume, BackupVolumeObject,
};
use crate::storage::size_to_gb;
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

/// A backup of a VM: a crash-consistent copy of each volume it had attached
/// (but its cloud-init ISO), kept on the VM's host, independent of the
/// volumes (later writes to them do not change it) and of the VM (it
/// outlives it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Backup {
    /// `backup_id`, chosen by the caller (or the host when it gave none).
    pub id: String,
    /// The VM's `uniqueID`; the VM may be gone since.
    pub vm_id: String,
    /// The VM's name when the backup was taken.
    pub vm_name: String,
    pub name: String,
    /// When the copy was taken, by the host's clock; `None` when the host
    /// gave no date this crate can read.
    pub created: Option<SystemTime>,
    /// GB, the sum of the copies'.
    pub size_gb: f64,
    pub volumes: Vec<BackupVolume>,
}

/// One volume's copy in a [`Backup`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BackupVolume {
    /// The source volume's id: the copy's handle in
    /// [`AtomosClient::backup_restore`].
    pub volume_id: String,
    /// The source volume's name when the backup was taken.
    pub name: String,
    pub size_gb: f64,
    /// sha256 (hex) standing for the copy's bytes, when the host tells it
    /// (the simulator does).
    pub content_hash: Option<String>,
}

/// Route label of the search: its path carries the VM's id.
const SEARCH_ROUTE: &str = "vm/backups/search";

impl AtomosClient {
    /// `POST /backup`: copies every volume VM `vm_id` has attached (its
    /// cloud-init ISO aside), running or off, on its host. `backup_id` is
    /// the caller's choice (empty lets the host choose), so that a create
    /// repeated after a lost answer finds the backup the first made: the
    /// same id for the same VM answers it again. `name` empty lets the host
    /// name it. Never retried automatically.
    ///
    /// Refusals: [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) (404,
    /// `[VmNotFound]`) for a VM not on the host;
    /// [`ErrorKind::AlreadyExists`](crate::ErrorKind::AlreadyExists) (409,
    /// `[BackupExists]`) when the id is another VM's backup;
    /// [`ErrorKind::Capacity`](crate::ErrorKind::Capacity) (507,
    /// `[BackupNotAllocable]`) when the copies do not fit on the host's disk.
    ///
    /// A host that answers `{"backup_id"}` alone (the one confirmed field)
    /// is asked for its backups, and the one with that id is answered.
    pub async fn backup_create(
        &self,
        vm_id: &str,
        backup_id: &str,
        name: &str,
    ) -> Result<Backup, DriverError> {
        let call = Call::post(Daemon::Compute, "/backup");
        let body = BackupCreateBody {
            local_index: vm_id.to_owned(),
            backup_id: Some(backup_id.to_owned()).filter(|id| !id.is_empty()),
            name: Some(name.to_owned()).filter(|n| !n.is_empty()),
        };
        let answer: BackupObject = self.send_json(&call, &body).await?.json(&call.route)?;
        if answer.local_index.is_empty() && answer.volumes.is_empty() {
            // The create succeeded: a list that fails or lags behind leaves
            // the answer as it is.
            if let Ok(listed) = self.backups().await
                && let Some(found) = listed.into_iter().find(|b| b.id == answer.backup_id)
            {
                return Ok(found);
            }
        }
        let mut backup = backup_from_wire(answer);
        if backup.vm_id.is_empty() {
            backup.vm_id = vm_id.to_owned();
        }
        Ok(backup)
    }

    /// `GET /backups`: every backup on the host, of VMs present or gone.
    pub async fn backups(&self) -> Result<Vec<Backup>, DriverError> {
        let list: BackupList = self.get_json(Daemon::Compute, "/backups").await?;
        Ok(list.into_vec().into_iter().map(backup_from_wire).collect())
    }

    /// `GET /backups/search?local_index=<vm_id>`: the backups of VM `vm_id`,
    /// which may be gone since (an unknown VM has none). Rows naming another
    /// VM are left out, in case a host ignores the query.
    pub async fn backups_of(&self, vm_id: &str) -> Result<Vec<Backup>, DriverError> {
        let path = format!("/backups/search?local_index={}", query_value(vm_id));
        let call = Call::get(Daemon::Compute, &path).with_route(SEARCH_ROUTE);
        let list: BackupList = self.get_call_json(&call).await?;
        Ok(list
            .into_vec()
            .into_iter()
            .map(backup_from_wire)
            .filter(|b| b.vm_id.is_empty() || b.vm_id == vm_id)
            .collect())
    }

    /// `DELETE /backups` with a JSON body `{"backup_id"}`, freeing its room
    /// on the host. An unknown id is
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) (404,
    /// `[BackupNotFound]`): already gone.
    pub async fn backup_delete(&self, id: &str) -> Result<(), DriverError> {
        let call = Call::delete(Daemon::Compute, "/backups");
        self.send_json(
            &call,
            &BackupIdBody {
                backup_id: id.to_owned(),
            },
        )
        .await?;
        Ok(())
    }

    /// `POST /backup/restore`: for each `(from, into)`, writes the copy of
    /// volume `from` (a [`BackupVolume::volume_id`] of backup `id`) into
    /// volume `into` of the host, which then holds the copy's bytes and
    /// grows to the copy's size if smaller. In place (`into` the VM's own
    /// volumes) or into others, such as a new VM's fresh volumes. All or
    /// nothing; never retried automatically (repeating it writes the same
    /// bytes again).
    ///
    /// Refusals: [`ErrorKind::Invalid`](crate::ErrorKind::Invalid) (409,
    /// `[VmRunning]`) when a target is attached to a VM that is not off,
    /// and (400) when a `from` is not in the backup (`[BackupVolumeNotFound]`,
    /// naming it) or a target is a cloud-init ISO;
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) (404) for an
    /// unknown backup (`[BackupNotFound]`) or target (`[VolumeNotFound]`);
    /// [`ErrorKind::Capacity`](crate::ErrorKind::Capacity) (507) when the
    /// growth does not fit on the host's disk.
    pub async fn backup_restore<F: AsRef<str>, I: AsRef<str>>(
        &self,
        id: &str,
        volumes: &[(F, I)],
    ) -> Result<(), DriverError> {
        let call = Call::post(Daemon::Compute, "/backup/restore");
        let body = BackupRestoreBody {
            backup_id: id.to_owned(),
            volumes: volumes
                .iter()
                .map(|(from, into)| BackupRestoreVolume {
                    from: from.as_ref().to_owned(),
                    into: into.as_ref().to_owned(),
                })
                .collect(),
        };
        self.send_json(&call, &body).await?;
        Ok(())
    }
}

/// Percent-encodes a query value: everything but RFC 3986's unreserved
/// characters.
pub(crate) fn query_value(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn backup_volume_from_wire(v: BackupVolumeObject) -> BackupVolume {
    BackupVolume {
        volume_id: v.volume_id,
        name: v.name,
        size_gb: size_to_gb(v.size),
        content_hash: v.content_hash.filter(|h| !h.is_empty()),
    }
}

fn backup_from_wire(b: BackupObject) -> Backup {
    let volumes: Vec<BackupVolume> = b.volumes.into_iter().map(backup_volume_from_wire).collect();
    // A host that leaves the total out: the sum of the copies.
    let size_gb = if b.size > 0.0 {
        size_to_gb(b.size)
    } else {
        volumes.iter().map(|v| v.size_gb).sum()
    };
    Backup {
        id: b.backup_id,
        vm_id: b.local_index,
        vm_name: b.vm_name,
        name: b.name,
        created: b.creation_date.as_deref().and_then(parse_date),
        size_gb,
        volumes,
    }
}

/// Reads RFC 3339 (`2026-01-02T03:04:05.678Z`, any offset; none is UTC) or
/// the GUI's `M/D/YYYY, HH:MM:SS` (UTC, as `/status` writes
/// `creation_date`).
pub(crate) fn parse_date(raw: &str) -> Option<SystemTime> {
    let raw = raw.trim();
    if let Some((date, time)) = raw.split_once(", ") {
        let mut parts = date.split('/');
        let (m, d, y) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let (secs, nanos, rest) = time_of_day(time)?;
        if !rest.is_empty() || nanos != 0 {
            return None;
        }
        return at((number(y)?, number(m)?, number(d)?), i64::from(secs), 0);
    }
    if raw.len() < 11 || !raw.is_char_boundary(10) {
        return None;
    }
    let (date, time) = raw.split_at(10);
    let time = time.strip_prefix(['T', 't', ' '])?;
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (secs, nanos, offset) = time_of_day(time)?;
    let offset_secs: i64 = match offset {
        "" | "Z" | "z" => 0,
        _ => {
            let sign = match offset.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (h, m) = offset[1..].split_once(':')?;
            let (h, m) = (number(h)?, number(m)?);
            if h > 23 || m > 59 {
                return None;
            }
            sign * i64::from(h * 3600 + m * 60)
        }
    };
    at(
        (number(y)?, number(m)?, number(d)?),
        i64::from(secs) - offset_secs,
        nanos,
    )
}

/// `HH:MM:SS[.fraction]` and what follows: seconds of the day,
/// nanoseconds, the rest.
fn time_of_day(time: &str) -> Option<(u32, u32, &str)> {
    let bytes = time.as_bytes();
    if bytes.len() < 8 || bytes[2] != b':' || bytes[5] != b':' {
        return None;
    }
    let (h, m, s) = (
        number(time.get(..2)?)?,
        number(time.get(3..5)?)?,
        number(time.get(6..8)?)?,
    );
    // 60: a leap second.
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    let mut rest = time.get(8..)?;
    let mut nanos = 0u32;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let kept = &fraction[..digits.min(9)];
        nanos = number(kept)? * 10u32.pow(9 - kept.len() as u32);
        rest = &fraction[digits..];
    }
    Some((h * 3600 + m * 60 + s, nanos, rest))
}

fn number(digits: &str) -> Option<u32> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `secs` (possibly negative, after an offset) into the day `(y, m, d)`, UTC.
fn at((y, m, d): (u32, u32, u32), secs: i64, nanos: u32) -> Option<SystemTime> {
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    let total = days_from_civil(i64::from(y), m, d) * 86_400 + secs;
    let since = Duration::new(total.unsigned_abs(), 0);
    let whole = if total >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(since)?
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(since)?
    };
    whole.checked_add(Duration::from_nanos(u64::from(nanos)))
}

fn days_in_month(y: u32, m: u32) -> u32 {
    match m {
        2 if y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to `y-m-d` (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn unix(secs: u64, nanos: u32) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
    }

    #[test]
    fn dates_are_read_in_both_forms() {
        // 2026-01-02T03:04:05Z
        let base = 1_767_323_045;
        assert_eq!(parse_date("2026-01-02T03:04:05Z"), Some(unix(base, 0)));
        assert_eq!(
            parse_date("2026-01-02T03:04:05.678Z"),
            Some(unix(base, 678_000_000))
        );
        assert_eq!(
            parse_date("2026-01-02t03:04:05.123456789123z"),
            Some(unix(base, 123_456_789))
        );
        assert_eq!(parse_date("2026-01-02 03:04:05"), Some(unix(base, 0)));
        assert_eq!(parse_date("2026-01-02T05:04:05+02:00"), Some(unix(base, 0)));
        assert_eq!(parse_date("2026-01-01T23:04:05-04:00"), Some(unix(base, 0)));
        assert_eq!(parse_date("1/2/2026, 03:04:05"), Some(unix(base, 0)));
        assert_eq!(parse_date("1970-01-01T00:00:00Z"), Some(unix(0, 0)));
        assert_eq!(
            parse_date("2024-02-29T00:00:00Z"),
            Some(unix(1_709_164_800, 0))
        );
        assert!(parse_date("1969-12-31T23:59:59Z").is_some());
        for bad in [
            "",
            "yesterday",
            "2026-13-02T03:04:05Z",
            "2025-02-29T00:00:00Z",
            "2026-01-02T24:00:00Z",
            "2026-01-02T03:04:05.Z",
            "2026-01-02T03:04:05+2",
            "2026-01-02T03:04:05 UTC",
            "2026-1-2T03:04:05Z",
            "1/2/2026, 3:04:05",
            "1/2/2026/1, 03:04:05",
            "é2026-01-02T03:04:05Z",
            "2026-01-02T03:04:0é",
        ] {
            assert_eq!(parse_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn backups_normalize() {
        let b: BackupObject = serde_json::from_value(json!({
            "backup_id": "b-1", "local_index": "v-1", "vm_name": "web", "name": "nightly",
            "creation_date": "1970-01-01T00:01:00Z", "size": 11,
            "volumes": [
                {"volume_id": "a8", "name": "web-boot", "size": 10, "content_hash": "ab"},
                {"volume_id": "c9", "name": "web-data0", "size": 1_073_741_824u64,
                 "content_hash": ""}
            ]
        }))
        .unwrap();
        assert_eq!(
            backup_from_wire(b),
            Backup {
                id: "b-1".into(),
                vm_id: "v-1".into(),
                vm_name: "web".into(),
                name: "nightly".into(),
                created: Some(unix(60, 0)),
                size_gb: 11.0,
                volumes: vec![
                    BackupVolume {
                        volume_id: "a8".into(),
                        name: "web-boot".into(),
                        size_gb: 10.0,
                        content_hash: Some("ab".into()),
                    },
                    BackupVolume {
                        volume_id: "c9".into(),
                        name: "web-data0".into(),
                        size_gb: 1.0,
                        content_hash: None,
                    },
                ],
            }
        );
        // No total: the copies' sum; no date: none.
        let lean: BackupObject = serde_json::from_value(json!({
            "backup_id": "b-2", "volumes": [{"volume_id": "a", "size": 2}, {"volume_id": "b", "size": 3}]
        }))
        .unwrap();
        let lean = backup_from_wire(lean);
        assert_eq!((lean.size_gb, lean.created), (5.0, None));
    }

    /// A compute daemon stand-in on a loopback port: answers each request
    /// with `answer(request line)` (status, JSON body) and records the
    /// request lines. Raw HTTP/1.1, one request per connection.
    async fn stub(
        answer: fn(&str) -> (u16, &'static str),
    ) -> (AtomosClient, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    let line = text.lines().next().unwrap_or_default().to_owned();
                    let (status, body) = answer(&line);
                    log.lock().unwrap().push(line);
                    let response = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        let target = crate::Target {
            name: "stub".into(),
            host: "127.0.0.1".into(),
            ports: crate::Ports {
                compute: port,
                ..crate::Ports::default()
            },
            provider: String::new(),
            region: String::new(),
            continent: String::new(),
        };
        let opts = crate::ClientOptions {
            retries: 0,
            ..crate::ClientOptions::default()
        };
        (AtomosClient::new(target, opts).unwrap(), seen)
    }

    const LISTED: &str = r#"[{"backup_id": "b-9", "local_index": "v-1", "vm_name": "web",
        "volumes": [{"volume_id": "a8", "size": 2}]},
        {"backup_id": "b-8", "local_index": "v-2", "vm_name": "db"}]"#;

    #[tokio::test]
    async fn a_create_answering_only_the_id_is_completed_from_the_list() {
        let (c, seen) = stub(|line| match line {
            l if l.starts_with("POST /api/v1.0/client/vm/backup ") => {
                (200, r#"{"backup_id": "b-9"}"#)
            }
            l if l.starts_with("GET /api/v1.0/client/vm/backups ") => (200, LISTED),
            _ => (404, r#"{"detail": "Not Found"}"#),
        })
        .await;
        let b = c.backup_create("v-1", "b-9", "").await.unwrap();
        assert_eq!(
            (b.id.as_str(), b.vm_name.as_str(), b.size_gb),
            ("b-9", "web", 2.0)
        );
        assert_eq!(seen.lock().unwrap().len(), 2);

        // No list to complete it from: the answer, with the VM asked for.
        let (c, _) = stub(|line| match line {
            l if l.starts_with("POST /api/v1.0/client/vm/backup ") => {
                (200, r#"{"backup_id": "b-7"}"#)
            }
            _ => (404, r#"{"detail": "Not Found"}"#),
        })
        .await;
        let b = c.backup_create("v-1", "", "").await.unwrap();
        assert_eq!(
            (b.id.as_str(), b.vm_id.as_str(), b.created),
            ("b-7", "v-1", None)
        );
    }

    #[tokio::test]
    async fn a_search_sends_the_vm_in_the_query_and_keeps_its_rows_only() {
        // A host that ignores the query and lists everything.
        let (c, seen) = stub(|line| match line {
            l if l.starts_with("GET /api/v1.0/client/vm/backups/search?") => (200, LISTED),
            _ => (404, r#"{"detail": "Not Found"}"#),
        })
        .await;
        let found = c.backups_of("v-1").await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "b-9");
        assert_eq!(
            seen.lock().unwrap()[0],
            "GET /api/v1.0/client/vm/backups/search?local_index=v-1 HTTP/1.1"
        );
        let err = c.backups().await.unwrap_err();
        assert_eq!(
            (err.kind, err.route.as_str()),
            (crate::ErrorKind::NotFound, "vm/backups")
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(
            query_value("6f1c1b1e-8a4e-4a57-9a53-0d7b8f0f3c11"),
            "6f1c1b1e-8a4e-4a57-9a53-0d7b8f0f3c11"
        );
        assert_eq!(query_value("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}
