//! How clients find a running `mesond dev`: its data directory, and the
//! file (`dev.json`) it writes there while it runs.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The data directory's name when `MESON_DATA_DIR` is unset.
pub const DATA_DIR_NAME: &str = ".meson";

/// The file in the data directory naming the running dev server.
pub const SERVER_FILE: &str = "dev.json";

/// The file in the data directory holding the dev tenant's admin token.
pub const TOKEN_FILE: &str = "dev-token";

/// `mesond dev`'s data directory: `MESON_DATA_DIR` when set, else the
/// nearest `.meson` directory in `cwd` or one of its parents (as git finds
/// `.git`), else `cwd/.meson`.
pub fn data_dir(env: Option<PathBuf>, cwd: &Path) -> PathBuf {
    if let Some(dir) = env {
        return if dir.is_absolute() {
            dir
        } else {
            cwd.join(dir)
        };
    }
    cwd.ancestors()
        .map(|d| d.join(DATA_DIR_NAME))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| cwd.join(DATA_DIR_NAME))
}

/// What `<data dir>/dev.json` holds while `mesond dev` runs (removed when it
/// stops).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevServer {
    /// The process id of the `mesond dev` holding the data directory.
    pub pid: u32,
    /// The REST API's base URL, `http://host:port`.
    pub url: String,
    /// The gRPC API's `host:port`.
    pub grpc: String,
    /// The autoscalers' endpoint's `host:port`, if served.
    #[serde(default)]
    pub autoscaler: Option<String>,
    /// The admin token's file.
    pub token_file: PathBuf,
    /// The private PostgreSQL cluster's directory, if one runs.
    #[serde(default)]
    pub postgres_dir: Option<PathBuf>,
}

impl DevServer {
    /// Reads `<data dir>/dev.json`; `None` when absent or unreadable.
    pub fn read(data_dir: &Path) -> Option<DevServer> {
        let text = std::fs::read_to_string(data_dir.join(SERVER_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_data_dir_up_the_tree_wins() {
        let root = std::env::temp_dir().join(format!("meson-dd-{}", uuid::Uuid::new_v4().simple()));
        let deep = root.join("a/b/c");
        std::fs::create_dir_all(&deep).unwrap();
        // None yet: the working directory's own.
        assert_eq!(data_dir(None, &deep), deep.join(".meson"));
        std::fs::create_dir_all(root.join(".meson")).unwrap();
        assert_eq!(data_dir(None, &deep), root.join(".meson"));
        std::fs::create_dir_all(root.join("a/.meson")).unwrap();
        assert_eq!(data_dir(None, &deep), root.join("a/.meson"));
        // A file named .meson is not a data directory.
        std::fs::write(root.join("a/b/.meson"), "").unwrap();
        assert_eq!(data_dir(None, &deep), root.join("a/.meson"));
        // MESON_DATA_DIR wins, relative to the working directory.
        assert_eq!(data_dir(Some("x".into()), &deep), deep.join("x"));
        assert_eq!(data_dir(Some("/x".into()), &deep), PathBuf::from("/x"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
