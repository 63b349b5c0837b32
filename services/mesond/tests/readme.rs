//! The shell blocks of the README and of the `docs/` pages it sends the
//! reader to, run as written against a `mesond dev`, so they cannot drift
//! from what meson does.
//!
//! Every fenced block of those documents ([`DOCUMENTS`]) whose language is
//! `sh` runs, in document order, in one `bash` with `set -euo pipefail`, from a directory holding
//! the dev server's `.meson/` and the repository's `examples/`, with
//! `mesonctl` on `PATH`. The only substitution is the dev server's URL (it
//! listens on a free port). A block preceded by the comment
//! `<!-- readme-test: skip: <why> -->` is not run (it starts meson itself,
//! needs Docker, a Kubernetes cluster, or a tool the test machine lacks);
//! the reason is mandatory.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::{Mesond, Scratch};

const SKIP: &str = "<!-- readme-test: skip:";

/// The README and the pages of `docs/` its "Where to go next" lists, in
/// that order, with the other pages of `docs/` that hold shell blocks
/// (`every_page_with_shell_blocks_is_run` keeps this list whole).
const DOCUMENTS: &[&str] = &[
    "README.md",
    "docs/getting-started.md",
    "docs/tenants.md",
    "docs/internals.md",
    "docs/configuration.md",
    "docs/deployment.md",
    "docs/elemento.md",
    "docs/cli.md",
    "docs/kops.md",
    "docs/terraform-quickstart.md",
    "docs/development.md",
];

/// One fenced `sh` block: where it starts and its text, dedented.
#[derive(Debug, PartialEq)]
struct Block {
    line: usize,
    text: String,
    skip: Option<String>,
}

/// The `sh` blocks of a Markdown document, with their skip reasons.
fn sh_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut last_text: Option<&str> = None;
    let mut lines = markdown.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let trimmed = line.trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            if !trimmed.is_empty() {
                last_text = Some(trimmed);
            }
            continue;
        };
        let indent = line.len() - trimmed.len();
        let mut body = Vec::new();
        for (_, inner) in lines.by_ref() {
            if inner.trim_start().starts_with("```") {
                break;
            }
            body.push(inner.get(indent..).unwrap_or(inner.trim_start()));
        }
        if info.split_whitespace().next() == Some("sh") {
            let skip = last_text
                .and_then(|t| t.strip_prefix(SKIP))
                .map(|r| r.trim_end_matches("-->").trim().to_owned());
            blocks.push(Block {
                line: n + 1,
                text: body.join("\n"),
                skip,
            });
        }
        last_text = None;
    }
    blocks
}

#[test]
fn blocks_are_found_with_their_skip_reasons() {
    let md = "intro\n\n```sh\necho one\n```\n\n<!-- readme-test: skip: needs Docker -->\n```sh\ndocker compose up\n```\n\n```rust\nfn main() {}\n```\n\n1. list\n\n   ```sh\n   echo indented\n     more\n   ```\n";
    let blocks = sh_blocks(md);
    assert_eq!(
        blocks,
        vec![
            Block {
                line: 3,
                text: "echo one".into(),
                skip: None
            },
            Block {
                line: 8,
                text: "docker compose up".into(),
                skip: Some("needs Docker".into())
            },
            Block {
                line: 18,
                text: "echo indented\n  more".into(),
                skip: None
            },
        ]
    );
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Each page of `docs/` with a shell block is run. `docs/terraform/` is
/// the provider's generated reference: its blocks are `terraform import`
/// templates (`NAME`, `ID`), its quickstart is `docs/terraform-quickstart.md`.
#[test]
fn every_page_with_shell_blocks_is_run() {
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(repo_root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
        let text = std::fs::read_to_string(&path).unwrap();
        if !sh_blocks(&text).is_empty() && !DOCUMENTS.contains(&name.as_str()) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "pages whose shell blocks no test runs: {missing:?}"
    );
}

#[test]
fn every_skipped_block_says_why() {
    let blocks: Vec<Block> = DOCUMENTS
        .iter()
        .flat_map(|d| sh_blocks(&std::fs::read_to_string(repo_root().join(d)).unwrap()))
        .collect();
    assert!(blocks.iter().filter(|b| b.skip.is_none()).count() >= 4);
    for b in &blocks {
        if let Some(reason) = &b.skip {
            assert!(
                !reason.is_empty(),
                "README.md:{}: a skip needs a reason",
                b.line
            );
        }
    }
}

/// `mesonctl`, built beside `mesond` (`cargo test --workspace` builds every
/// binary; a lone `cargo test -p mesond` builds it here).
fn mesonctl_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_mesond"))
        .parent()
        .unwrap()
        .to_owned();
    if !dir.join("mesonctl").exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "mesonctl"])
            .current_dir(repo_root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building mesonctl");
    }
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_runs_as_written() {
    // The README, then the pages it sends the reader to, in its order: each
    // goes on from where the one before stops.
    let documents: Vec<(&str, String)> = DOCUMENTS
        .iter()
        .map(|d| (*d, std::fs::read_to_string(repo_root().join(d)).unwrap()))
        .collect();
    let scratch = Scratch::new(0o755);
    let dir = &scratch.dir;
    std::os::unix::fs::symlink(
        repo_root().join("examples").canonicalize().unwrap(),
        dir.join("examples"),
    )
    .unwrap();
    // Started as the README says, from the directory the blocks run in.
    let mut dev = Mesond::spawn(dir, &[]);
    let http = reqwest::Client::new();
    dev.wait_ready(&http).await;
    let base = dev.base.clone();

    let mut script = String::from("set -euo pipefail\n");
    for (name, text) in &documents {
        for b in sh_blocks(text).iter().filter(|b| b.skip.is_none()) {
            script.push_str(&format!("\n# {name}:{}\n", b.line));
            script.push_str(&b.text.replace("http://127.0.0.1:8080", &base));
            script.push('\n');
        }
    }
    let path = format!(
        "{}:{}",
        mesonctl_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", dir)
        .env_remove("MESON_URL")
        .env_remove("MESON_TOKEN")
        .env_remove("MESON_DATA_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::null())
        .output()
        .expect("bash runs");
    let out = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "the blocks of the README and its pages failed ({}):\n--- stdout\n{out}\n--- stderr\n{err}",
        run.status
    );
    let kubeconfig = std::fs::read_to_string(dir.join("kubeconfig")).expect("a kubeconfig");
    assert!(
        kubeconfig.contains("kind: Config") && kubeconfig.contains("certificate-authority-data"),
        "{kubeconfig}"
    );
    assert!(dev.terminate().await.success(), "{}", dev.output());
}

/// Every name an `.rs` file under `services/` and `tests/` gives a
/// function or itself (its stem).
fn rust_names() -> std::collections::BTreeSet<String> {
    fn walk(dir: &Path, names: &mut std::collections::BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    walk(&path, names);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            names.insert(path.file_stem().unwrap().to_string_lossy().into_owned());
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, _) in text.match_indices("fn ") {
                let name: String = text[i + 3..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
        }
    }
    let mut names = std::collections::BTreeSet::new();
    for dir in ["services", "tests"] {
        walk(&repo_root().join(dir), &mut names);
    }
    names
}

/// The `` `code` `` spans of a Markdown line.
fn code_spans(line: &str) -> impl Iterator<Item = &str> {
    line.split('`').skip(1).step_by(2)
}

/// `docs/architecture.md`'s "Adding a resource" table names files that
/// exist (a path from the repository's root, without a `<placeholder>`)
/// and tests that exist (its last column), so the checklist cannot go
/// stale when a file moves or a test is renamed.
#[test]
fn the_resource_checklist_names_what_exists() {
    let doc = std::fs::read_to_string(repo_root().join("docs/architecture.md")).unwrap();
    let start = doc.find("\n## Adding a resource").expect("the checklist");
    let section = &doc[start + 1..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let names = rust_names();
    let roots = [
        "services/",
        "migrations/",
        "proto/",
        "tests/",
        "docs/",
        "openapi/",
        "scripts/",
    ];
    let (mut rows, mut gone) = (0, Vec::new());
    for line in section.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        let [_, files, held] = cells[..] else {
            panic!("a row of three cells: {line}");
        };
        if files.trim() == "file" {
            continue;
        }
        rows += 1;
        for path in code_spans(files) {
            if roots.iter().any(|r| path.starts_with(r))
                && !path.contains('<')
                && !repo_root().join(path).exists()
            {
                gone.push(format!("file {path}"));
            }
        }
        for test in code_spans(held) {
            let ident = test.chars().all(|c| c.is_ascii_lowercase() || c == '_');
            if ident && !names.contains(test) {
                gone.push(format!("test {test}"));
            }
        }
    }
    assert!(rows >= 10, "only {rows} rows read");
    assert!(
        gone.is_empty(),
        "the checklist names what is gone: {gone:?}"
    );
}
