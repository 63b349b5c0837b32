//! The fleet's optional state directory: one JSON file per host, written
//! through on every acknowledged mutation and replaced atomically, so a
//! simulator started again on it (even after `kill -9`) finds every VM,
//! volume, network, port forward and backup where it was.

use crate::state::{HostState, lock};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Version of the files' layout; a file of another version is refused.
const FORMAT: u32 = 1;

/// Suffix of the file a write goes to before it is renamed over the state file.
const TEMP_SUFFIX: &str = ".tmp";

#[derive(Serialize)]
struct HostFileOut<'a> {
    format: u32,
    host: &'a str,
    #[serde(flatten)]
    state: &'a HostState,
}

#[derive(Deserialize)]
struct HostFileIn {
    format: u32,
    host: String,
    #[serde(flatten)]
    state: HostState,
}

/// Where one host's state is written through.
pub(crate) struct Store {
    host: String,
    path: PathBuf,
    state: Arc<Mutex<HostState>>,
    /// The write lock, holding the bytes last written. The snapshot is taken
    /// under it, so a file is never replaced by an older snapshot, and an
    /// unchanged state is not written again.
    written: Mutex<Vec<u8>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The file of host `name` in `dir`: the name with every byte outside
/// `[A-Za-z0-9_-]` written `%XX`, so any name makes one distinct file name.
pub(crate) fn host_file(dir: &Path, name: &str) -> PathBuf {
    let mut file = String::with_capacity(name.len() + 5);
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            file.push(char::from(b));
        } else {
            file.push_str(&format!("%{b:02X}"));
        }
    }
    file.push_str(".json");
    dir.join(file)
}

fn invalid_data(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "simulator state file {} is unreadable: {why}; move it away to start that host empty",
            path.display()
        ),
    )
}

fn with_path(path: &Path, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

impl Store {
    pub(crate) fn new(dir: &Path, host: &str, state: Arc<Mutex<HostState>>) -> Store {
        Store {
            host: host.to_owned(),
            path: host_file(dir, host),
            state,
            written: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the host's current state to its file, unless the file already
    /// holds it. Blocking: callers on the runtime go through
    /// [`crate::SimHost::save`].
    pub(crate) fn save(&self) -> io::Result<()> {
        let mut written = lock(&self.written);
        let bytes = {
            let state = lock(&self.state);
            serde_json::to_vec(&HostFileOut {
                format: FORMAT,
                host: &self.host,
                state: &state,
            })
            .map_err(io::Error::other)?
        };
        if bytes == *written {
            return Ok(());
        }
        write_atomically(&self.path, &bytes)?;
        *written = bytes;
        Ok(())
    }
}

/// Replaces `path` by a file holding `bytes` so that a crash at any moment
/// leaves either the old or the new file: the bytes go to a temporary file
/// in the same directory, reach the disk, and are renamed over `path`, and
/// the rename reaches the disk too.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = path.as_os_str().to_owned();
    temp.push(TEMP_SUFFIX);
    let temp = PathBuf::from(temp);
    let mut file = File::create(&temp).map_err(|e| with_path(&temp, "creating", e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| with_path(&temp, "writing", e))?;
    drop(file);
    std::fs::rename(&temp, path).map_err(|e| with_path(path, "replacing", e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| with_path(dir, "syncing", e))
}

/// Reads every host's state from `dir`, creating the directory when it does
/// not exist. Only hosts named in `configured` are returned; a file of
/// another host is skipped with a warning. An unreadable file is an error
/// naming it. Temporary files of interrupted writes are removed.
pub(crate) fn load(dir: &Path, configured: &[&str]) -> io::Result<HashMap<String, HostState>> {
    std::fs::create_dir_all(dir).map_err(|e| with_path(dir, "creating", e))?;
    let mut found = HashMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| with_path(dir, "reading", e))?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        paths.push(entry.map_err(|e| with_path(dir, "reading", e))?.path());
    }
    paths.sort();
    for path in paths {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(&format!(".json{TEMP_SUFFIX}")) {
            // A write that never reached its rename: the state file before it stands.
            std::fs::remove_file(&path).map_err(|e| with_path(&path, "removing", e))?;
            continue;
        }
        if !name.ends_with(".json") {
            continue;
        }
        let raw = std::fs::read(&path).map_err(|e| with_path(&path, "reading", e))?;
        let file: HostFileIn = serde_json::from_slice(&raw).map_err(|e| invalid_data(&path, e))?;
        if file.format != FORMAT {
            return Err(invalid_data(
                &path,
                format!("format {} (this simulator reads {FORMAT})", file.format),
            ));
        }
        if host_file(dir, &file.host) != path {
            return Err(invalid_data(
                &path,
                format!(
                    "it holds host {:?}, whose file is {}",
                    file.host,
                    host_file(dir, &file.host).display()
                ),
            ));
        }
        if !configured.contains(&file.host.as_str()) {
            tracing::warn!(
                host = %file.host,
                file = %path.display(),
                "the state directory holds a host that is not configured; skipped"
            );
            continue;
        }
        found.insert(file.host, file.state);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_make_distinct_safe_file_names() {
        let dir = Path::new("/s");
        assert_eq!(host_file(dir, "ovh-gra-1"), Path::new("/s/ovh-gra-1.json"));
        assert_eq!(host_file(dir, "../x"), Path::new("/s/%2E%2E%2Fx.json"));
        assert_ne!(host_file(dir, "a.b"), host_file(dir, "a%2Eb"));
    }
}
