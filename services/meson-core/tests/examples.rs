//! The payloads the repository shows its readers are ones meson accepts:
//! every `examples/*.json`, and every ```json block of `docs/*.md` that is
//! a request (a VM, a cluster, a standalone volume or a network), parsed
//! with the same lenient parsers the API uses. Besides the remarks
//! docs/payloads.md explains (a Kubernetes minor resolved to its latest
//! patch or past its end of life, a range clamped off the network address),
//! they draw no warnings, in particular no unknown field. Every other
//! ```json block must at least be JSON, and docs/payloads.md must show both
//! examples exactly.

use meson_core::kaas::KaasCreate;
use meson_core::kubernetes;
use meson_core::network::NetworkCreate;
use meson_core::parse::Warning;
use meson_core::vm::VmCreate;
use meson_core::volume::VolumeCreate;
use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Which request a JSON object is, by its required top-level fields.
#[derive(Debug, PartialEq)]
enum Kind {
    Vm,
    Kaas,
    Volume,
    Network,
    /// Not a request (a response, an error, a fragment): only JSON.
    Other,
}

fn kind(v: &Value) -> Kind {
    let has = |k: &str| v.get(k).is_some();
    if has("specs") {
        Kind::Vm
    } else if has("req") {
        Kind::Kaas
    } else if has("name") && has("size") {
        Kind::Volume
    } else if has("name") && has("cidr") {
        Kind::Network
    } else {
        Kind::Other
    }
}

/// A warning docs/payloads.md tells the reader to expect for an accepted
/// cluster request: the version's notes and the subnet range's clamping.
fn expected_kaas_remark(w: &Warning) -> bool {
    match w.field.as_str() {
        "req.kubernetes_version" => {
            w.message.contains("resolved to its latest supported patch")
                || w.message.contains("reached end of life")
        }
        "req.nodes_subnet.start_address" => w.message.contains("the range starts at"),
        _ => false,
    }
}

/// Parses `v` as the request it is; `Err` says why it is not accepted as
/// the docs promise.
fn check(v: &Value) -> Result<Kind, String> {
    let k = kind(v);
    let warnings = match k {
        Kind::Vm => VmCreate::parse(v).map(|c| c.warnings),
        Kind::Kaas => KaasCreate::parse(v, kubernetes::today()).map(|c| {
            c.warnings
                .into_iter()
                .filter(|w| !expected_kaas_remark(w))
                .collect()
        }),
        Kind::Volume => VolumeCreate::parse(v, &[]).map(|c| c.warnings),
        Kind::Network => NetworkCreate::parse(v).map(|c| c.warnings),
        Kind::Other => Ok(Vec::new()),
    }
    .map_err(|e| format!("refused as a {k:?} request: {e:?}"))?;
    if warnings.is_empty() {
        Ok(k)
    } else {
        Err(format!(
            "accepted as a {k:?} request, with warnings {warnings:?}"
        ))
    }
}

/// The ```json blocks of a Markdown document, with their line numbers.
fn json_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (event, range) in Parser::new(markdown).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info)))
                if info.split_whitespace().next() == Some("json") =>
            {
                let line = markdown[..range.start].matches('\n').count() + 1;
                current = Some((line, String::new()));
            }
            Event::Text(text) => {
                if let Some((_, body)) = current.as_mut() {
                    body.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(current.take()),
            _ => {}
        }
    }
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The shipped examples, by file name.
fn examples() -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = std::fs::read_dir(repo().join("examples"))
        .expect("examples/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let v = serde_json::from_str(&read(&p))
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn the_shipped_examples_are_accepted() {
    let examples = examples();
    let names: Vec<&str> = examples.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"vm.json") && names.contains(&"kaas.json"),
        "{names:?}"
    );
    for (name, v) in &examples {
        match check(v) {
            Ok(Kind::Other) => panic!("examples/{name}: not a request meson knows"),
            Ok(_) => {}
            Err(why) => panic!("examples/{name}: {why}"),
        }
    }
    assert_eq!(
        kind(&examples.iter().find(|e| e.0 == "vm.json").unwrap().1),
        Kind::Vm
    );
    assert_eq!(
        kind(&examples.iter().find(|e| e.0 == "kaas.json").unwrap().1),
        Kind::Kaas
    );
}

#[test]
fn the_docs_json_blocks_are_accepted() {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    let mut failures = Vec::new();
    let mut requests = 0;
    for doc in &docs {
        let name = doc
            .strip_prefix(repo())
            .unwrap_or(doc)
            .display()
            .to_string();
        for (line, block) in json_blocks(&read(doc)) {
            match serde_json::from_str::<Value>(&block) {
                Err(e) => failures.push(format!("{name}:{line}: not JSON: {e}")),
                Ok(v) => match check(&v) {
                    Ok(Kind::Other) => {}
                    Ok(_) => requests += 1,
                    Err(why) => failures.push(format!("{name}:{line}: {why}")),
                },
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The VM and KaaS payloads (and a volume and a network) at least.
    assert!(
        requests >= 4,
        "only {requests} request payloads found in docs/"
    );
}

#[test]
fn the_payloads_page_shows_the_examples_exactly() {
    let page = read(&repo().join("docs/payloads.md"));
    let shown: Vec<Value> = json_blocks(&page)
        .into_iter()
        .filter_map(|(_, b)| serde_json::from_str(&b).ok())
        .collect();
    for (name, v) in examples() {
        assert!(
            shown.contains(&v),
            "docs/payloads.md shows no ```json block equal to examples/{name}"
        );
    }
}

#[test]
fn json_blocks_are_found_with_their_lines() {
    let md = "intro\n\n```json\n{\"a\": 1}\n```\n\n```sh\necho\n```\n\n1. item\n\n   ```json\n   [1,\n    2]\n   ```\n";
    assert_eq!(
        json_blocks(md),
        vec![
            (3, "{\"a\": 1}\n".to_owned()),
            (13, "[1,\n 2]\n".to_owned())
        ]
    );
}

#[test]
fn a_payload_with_an_unknown_field_fails_the_check() {
    let (_, mut vm) = examples().into_iter().find(|e| e.0 == "vm.json").unwrap();
    vm["specs"]["colour"] = Value::from("blue");
    let why = check(&vm).unwrap_err();
    assert!(why.contains("specs.colour"), "{why}");
}
