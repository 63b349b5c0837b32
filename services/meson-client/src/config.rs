//! Where a client of meson (mesonctl, the Terraform provider) finds meson
//! and its token, first found wins, the URL and the token each on their own:
//! 1. `--url` / `--token` (the provider's `endpoint` / `token`);
//! 2. `MESON_URL` / `MESON_TOKEN`;
//! 3. the config file: `--config FILE`, else `$XDG_CONFIG_HOME/meson/config.toml`,
//!    else `~/.config/meson/config.toml` (`url = "..."`, `token = "..."`);
//! 4. the running `mesond dev`'s: the URL it writes to `<data dir>/dev.json`
//!    (whatever port it got) and the token in `<data dir>/dev-token`. The data
//!    dir is `$MESON_DATA_DIR`, else the nearest `.meson` in the working
//!    directory or a parent (as git finds `.git`);
//! 5. `http://127.0.0.1:8080`, `mesond dev`'s default address.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// `mesond dev`'s REST address.
pub const DEV_URL: &str = "http://127.0.0.1:8080";

/// What the process was given: flags and environment (read by
/// [`Inputs::from_env`]; tests build it by hand).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub flag_url: Option<String>,
    pub flag_token: Option<String>,
    /// `--config FILE`: must exist.
    pub flag_config: Option<PathBuf>,
    pub env_url: Option<String>,
    pub env_token: Option<String>,
    pub xdg_config_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
    /// `mesond dev`'s data dir (`MESON_DATA_DIR`, else found from the
    /// working directory).
    pub data_dir: Option<PathBuf>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Inputs {
    pub fn from_env(
        flag_url: Option<String>,
        flag_token: Option<String>,
        flag_config: Option<PathBuf>,
    ) -> Inputs {
        Inputs {
            flag_url,
            flag_token,
            flag_config,
            env_url: env("MESON_URL"),
            env_token: env("MESON_TOKEN"),
            xdg_config_home: env("XDG_CONFIG_HOME").map(PathBuf::from),
            home: env("HOME").map(PathBuf::from),
            data_dir: std::env::current_dir().ok().map(|cwd| {
                meson_types::dev::data_dir(env("MESON_DATA_DIR").map(PathBuf::from), &cwd)
            }),
        }
    }

    /// The config file to read, and whether it must exist.
    pub fn config_file(&self) -> Option<(PathBuf, bool)> {
        if let Some(p) = &self.flag_config {
            return Some((p.clone(), true));
        }
        self.xdg_config_home
            .as_ref()
            .map(|x| x.join("meson/config.toml"))
            .or_else(|| {
                self.home
                    .as_ref()
                    .map(|h| h.join(".config/meson/config.toml"))
            })
            .map(|p| (p, false))
    }

    fn dev_data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(meson_types::dev::DATA_DIR_NAME))
    }

    fn dev_token_file(&self) -> PathBuf {
        self.dev_data_dir().join(meson_types::dev::TOKEN_FILE)
    }
}

/// The config file's contents.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub url: Option<String>,
    pub token: Option<String>,
}

/// Where a setting came from (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env,
    File(PathBuf),
    /// A running `mesond dev`'s `dev.json`.
    DevServer(PathBuf),
    DevDefault,
    DevToken(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag => write!(f, "the command line"),
            Source::Env => write!(f, "the environment"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::DevServer(p) => write!(f, "{}", p.display()),
            Source::DevDefault => write!(f, "mesond dev's default"),
            Source::DevToken(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Where meson is and how to authenticate to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub url: String,
    pub url_from: Source,
    pub token: String,
    pub token_from: Source,
}

fn read_file(path: &Path, must_exist: bool) -> Result<Option<File>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => return Ok(None),
        Err(e) => {
            return Err(format!(
                "cannot read the config file {}: {e}",
                path.display()
            ));
        }
    };
    toml::from_str::<File>(&text)
        .map(Some)
        .map_err(|e| format!("bad config file {}: {}", path.display(), e.message()))
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// Resolves the URL and token from `inputs`, reading the config file and
/// the dev token as needed. The error names what is missing and where it
/// was looked for.
pub fn resolve(inputs: &Inputs) -> Result<Settings, String> {
    let file_path = inputs.config_file();
    let file = match &file_path {
        Some((p, must)) => read_file(p, *must)?,
        None => None,
    };
    let file_src = || {
        Source::File(
            file_path
                .as_ref()
                .map(|(p, _)| p.clone())
                .unwrap_or_default(),
        )
    };
    let (file_url, file_token) = match file {
        Some(f) => (nonempty(f.url), nonempty(f.token)),
        None => (None, None),
    };

    let (url, url_from) = if let Some(u) = nonempty(inputs.flag_url.clone()) {
        (u, Source::Flag)
    } else if let Some(u) = nonempty(inputs.env_url.clone()) {
        (u, Source::Env)
    } else if let Some(u) = file_url {
        (u, file_src())
    } else if let Some(server) = meson_types::dev::DevServer::read(&inputs.dev_data_dir()) {
        let path = inputs.dev_data_dir().join(meson_types::dev::SERVER_FILE);
        (server.url, Source::DevServer(path))
    } else {
        (DEV_URL.to_owned(), Source::DevDefault)
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "the meson URL from {url_from} must start with http:// or https://, got {url:?}"
        ));
    }

    let (token, token_from) = if let Some(t) = nonempty(inputs.flag_token.clone()) {
        (t, Source::Flag)
    } else if let Some(t) = nonempty(inputs.env_token.clone()) {
        (t, Source::Env)
    } else if let Some(t) = file_token {
        (t, file_src())
    } else {
        let dev = inputs.dev_token_file();
        match std::fs::read_to_string(&dev) {
            Ok(t) if !t.trim().is_empty() => (t.trim().to_owned(), Source::DevToken(dev)),
            _ => {
                return Err(format!(
                    "no meson token: give --token, set MESON_TOKEN, put token = \"...\" in {}, \
                     or work in (or under) the directory where `mesond dev` runs (no {}; \
                     or set MESON_DATA_DIR)",
                    file_path
                        .as_ref()
                        .map_or("~/.config/meson/config.toml".into(), |(p, _)| p
                            .display()
                            .to_string()),
                    dev.display()
                ));
            }
        }
    };
    Ok(Settings {
        url,
        url_from,
        token,
        token_from,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> PathBuf {
        let d = std::env::temp_dir().join(format!("meson-client-config-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn flags_then_env_then_file_then_dev_defaults() {
        let home = tmp();
        std::fs::create_dir_all(home.join(".config/meson")).unwrap();
        std::fs::write(
            home.join(".config/meson/config.toml"),
            "url = \"http://file:1\"\ntoken = \"file-token\"\n",
        )
        .unwrap();
        let mut i = Inputs {
            flag_url: Some("http://flag:1".into()),
            flag_token: Some("flag-token".into()),
            env_url: Some("http://env:1".into()),
            env_token: Some("env-token".into()),
            home: Some(home.clone()),
            ..Inputs::default()
        };
        let s = resolve(&i).unwrap();
        assert_eq!(
            (s.url.as_str(), s.token.as_str()),
            ("http://flag:1", "flag-token")
        );
        assert_eq!(s.url_from, Source::Flag);

        i.flag_url = None;
        i.flag_token = None;
        let s = resolve(&i).unwrap();
        assert_eq!(
            (s.url.as_str(), s.token.as_str()),
            ("http://env:1", "env-token")
        );

        i.env_url = None;
        let s = resolve(&i).unwrap();
        assert_eq!(
            (s.url.as_str(), s.token.as_str()),
            ("http://file:1", "env-token")
        );
        assert!(matches!(s.url_from, Source::File(_)));

        i.env_token = None;
        assert_eq!(resolve(&i).unwrap().token, "file-token");

        // XDG_CONFIG_HOME wins over HOME.
        let xdg = tmp();
        std::fs::create_dir_all(xdg.join("meson")).unwrap();
        std::fs::write(xdg.join("meson/config.toml"), "token = \"xdg\"\n").unwrap();
        i.xdg_config_home = Some(xdg.clone());
        let s = resolve(&i).unwrap();
        assert_eq!((s.url.as_str(), s.token.as_str()), (DEV_URL, "xdg"));

        // Nothing but mesond dev's token file.
        let data = tmp();
        std::fs::write(data.join("dev-token"), "dev\n").unwrap();
        let i = Inputs {
            home: Some(tmp()),
            data_dir: Some(data.clone()),
            ..Inputs::default()
        };
        let s = resolve(&i).unwrap();
        assert_eq!((s.url.as_str(), s.token.as_str()), (DEV_URL, "dev"));
        assert_eq!(s.token_from, Source::DevToken(data.join("dev-token")));
        // A running mesond dev's URL, whatever port it got.
        let server = meson_types::dev::DevServer {
            pid: 1,
            url: "http://127.0.0.1:41234".into(),
            grpc: "127.0.0.1:41235".into(),
            autoscaler: None,
            token_file: data.join("dev-token"),
            postgres_dir: None,
        };
        std::fs::write(
            data.join("dev.json"),
            serde_json::to_string(&server).unwrap(),
        )
        .unwrap();
        let s = resolve(&i).unwrap();
        assert_eq!(s.url, "http://127.0.0.1:41234");
        assert_eq!(s.url_from, Source::DevServer(data.join("dev.json")));
        // The config file's URL still wins over it.
        std::fs::create_dir_all(data.join("home/.config/meson")).unwrap();
        std::fs::write(
            data.join("home/.config/meson/config.toml"),
            "url = \"http://file:1\"\n",
        )
        .unwrap();
        let s = resolve(&Inputs {
            home: Some(data.join("home")),
            ..i.clone()
        })
        .unwrap();
        assert_eq!((s.url.as_str(), s.token.as_str()), ("http://file:1", "dev"));
        for d in [home, xdg, data] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn errors_name_what_is_missing() {
        let empty = tmp();
        let i = Inputs {
            home: Some(empty.clone()),
            data_dir: Some(empty.join("nowhere")),
            ..Inputs::default()
        };
        let e = resolve(&i).unwrap_err();
        assert!(
            e.contains("no meson token") && e.contains("MESON_TOKEN"),
            "{e}"
        );
        assert!(e.contains("dev-token"), "{e}");

        let e = resolve(&Inputs {
            flag_url: Some("127.0.0.1:8080".into()),
            flag_token: Some("t".into()),
            ..Inputs::default()
        })
        .unwrap_err();
        assert!(e.contains("http://"), "{e}");

        std::fs::write(empty.join("bad.toml"), "tokn = 1\n").unwrap();
        let e = resolve(&Inputs {
            flag_config: Some(empty.join("bad.toml")),
            ..Inputs::default()
        })
        .unwrap_err();
        assert!(e.contains("bad.toml"), "{e}");
        let e = resolve(&Inputs {
            flag_config: Some(empty.join("missing.toml")),
            ..Inputs::default()
        })
        .unwrap_err();
        assert!(e.contains("missing.toml"), "{e}");
        let _ = std::fs::remove_dir_all(empty);
    }
}
