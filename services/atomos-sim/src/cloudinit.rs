//! Just enough YAML to read a NoCloud seed: `phone_home`, `hostname` and `fqdn` from user-data, `instance-id` and `local-hostname` from meta-data.
//!
//! Block mappings and sequences by indentation, flow `[...]`/`{...}`
//! collections and plain, single- and double-quoted scalars. Everything
//! else (block scalars, anchors, tags) is skipped, never an error: the
//! input is whatever a client uploaded.

use crate::state::{PhoneHome, SimFile};

/// A parsed YAML value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    Scalar(String),
    List(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(pairs) => get(pairs, key),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(s),
            _ => None,
        }
    }
}

fn get<'a>(pairs: &'a [(String, Node)], key: &str) -> Option<&'a Node> {
    // YAML's last duplicate key wins in most loaders, cloud-init's included.
    pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn get_str<'a>(pairs: &'a [(String, Node)], key: &str) -> Option<&'a str> {
    get(pairs, key)
        .and_then(Node::as_str)
        .filter(|s| !s.is_empty())
}

/// One significant line: its indentation in spaces and the rest.
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

fn lines(doc: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    for raw in doc.lines() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let text = raw.trim_start_matches(' ');
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed == "---" {
            continue;
        }
        if trimmed == "..." {
            break;
        }
        out.push(Line {
            indent: raw.len() - text.len(),
            text: text.trim_end(),
        });
    }
    out
}

/// The top-level mapping of a document (empty when it is not a mapping).
pub(crate) fn parse(doc: &str) -> Vec<(String, Node)> {
    let lines = lines(doc.strip_prefix('\u{feff}').unwrap_or(doc));
    let Some(first) = lines.first() else {
        return Vec::new();
    };
    if first.text.starts_with('{') {
        // A JSON or flow-style document (meta-data is often JSON).
        let joined: Vec<&str> = lines.iter().map(|l| l.text).collect();
        return match flow_or_scalar(&joined.join(" ")) {
            Node::Map(pairs) => pairs,
            _ => Vec::new(),
        };
    }
    let mut i = 0;
    parse_map(&lines, &mut i, first.indent)
}

fn is_seq_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

fn parse_map(lines: &[Line<'_>], i: &mut usize, indent: usize) -> Vec<(String, Node)> {
    let mut out = Vec::new();
    while let Some(line) = lines.get(*i) {
        if line.indent < indent {
            break;
        }
        *i += 1;
        // Deeper lines here belong to something skipped (a block scalar).
        if line.indent > indent || is_seq_item(line.text) {
            continue;
        }
        let Some((key, rest)) = split_key(line.text) else {
            continue;
        };
        let node = if !rest.is_empty() {
            flow_or_scalar(rest)
        } else {
            nested(lines, i, indent)
        };
        out.push((key, node));
    }
    out
}

/// The value of a key written alone on its line: a deeper block, or a
/// sequence at the key's own indentation (legal YAML).
fn nested(lines: &[Line<'_>], i: &mut usize, indent: usize) -> Node {
    match lines.get(*i) {
        Some(next) if next.indent > indent => {
            if is_seq_item(next.text) {
                Node::List(parse_seq(lines, i, next.indent))
            } else {
                Node::Map(parse_map(lines, i, next.indent))
            }
        }
        Some(next) if next.indent == indent && is_seq_item(next.text) => {
            Node::List(parse_seq(lines, i, indent))
        }
        _ => Node::Scalar(String::new()),
    }
}

fn parse_seq(lines: &[Line<'_>], i: &mut usize, indent: usize) -> Vec<Node> {
    let mut out = Vec::new();
    while let Some(line) = lines.get(*i) {
        if line.indent < indent || (line.indent == indent && !is_seq_item(line.text)) {
            break;
        }
        *i += 1;
        if line.indent > indent {
            continue;
        }
        let item = line.text[1..].trim_start();
        let node = if item.is_empty() {
            nested(lines, i, indent)
        } else if let Some((key, rest)) = split_key(item) {
            // `- name: x` and its continuation lines, aligned after the dash.
            let inner = indent + (line.text.len() - item.len());
            let first = if rest.is_empty() {
                nested(lines, i, inner)
            } else {
                flow_or_scalar(rest)
            };
            let mut pairs = vec![(key, first)];
            pairs.extend(parse_map(lines, i, inner));
            Node::Map(pairs)
        } else {
            flow_or_scalar(item)
        };
        out.push(node);
    }
    out
}

/// `key: rest` → (unquoted key, rest). `None` when the line is no mapping entry.
fn split_key(text: &str) -> Option<(String, &str)> {
    let bytes = text.as_bytes();
    match bytes.first()? {
        b'"' | b'\'' => {
            let mut pos = 0;
            let key = quoted(text, &mut pos)?;
            let rest = text[pos..].trim_start();
            let rest = rest.strip_prefix(':')?;
            if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
                return None;
            }
            Some((key, rest.trim()))
        }
        b'[' | b'{' => None,
        _ => {
            let colon = (0..bytes.len()).find(|&j| {
                bytes[j] == b':' && bytes.get(j + 1).is_none_or(|c| *c == b' ' || *c == b'\t')
            })?;
            let key = text[..colon].trim();
            if key.is_empty() || key.contains(" #") {
                return None;
            }
            Some((key.to_owned(), text[colon + 1..].trim()))
        }
    }
}

/// A value written after `key:` or `- `: flow collection or scalar.
fn flow_or_scalar(text: &str) -> Node {
    let text = text.trim();
    if text.starts_with(['[', '{']) {
        let mut pos = 0;
        if let Some(node) = flow(text, &mut pos, 0) {
            return node;
        }
    }
    Node::Scalar(scalar(text))
}

/// A scalar on its own: quotes removed, a trailing comment dropped.
fn scalar(text: &str) -> String {
    if text.starts_with(['"', '\'']) {
        let mut pos = 0;
        if let Some(s) = quoted(text, &mut pos) {
            return s;
        }
    }
    let end = text.find(" #").unwrap_or(text.len());
    text[..end].trim().to_owned()
}

/// A quoted scalar starting at `*pos`; advances past the closing quote.
fn quoted(text: &str, pos: &mut usize) -> Option<String> {
    let bytes = text.as_bytes();
    let quote = *bytes.get(*pos)?;
    let start = *pos + 1;
    let mut j = start;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' if quote == b'"' => j += 2,
            b'\'' if quote == b'\'' && bytes.get(j + 1) == Some(&b'\'') => j += 2,
            c if c == quote => {
                *pos = j + 1;
                let inner = &text[start..j];
                return Some(if quote == b'"' {
                    // JSON's escapes are YAML's common ones; fall back to the
                    // two that matter when YAML-only escapes make JSON fail.
                    serde_json::from_str(&text[start - 1..=j])
                        .unwrap_or_else(|_| inner.replace("\\\"", "\"").replace("\\\\", "\\"))
                } else {
                    inner.replace("''", "'")
                });
            }
            _ => j += 1,
        }
    }
    None
}

/// Deep enough for any real seed, shallow enough for the stack.
const MAX_DEPTH: usize = 32;

fn skip_ws(text: &str, pos: &mut usize) {
    let bytes = text.as_bytes();
    while bytes
        .get(*pos)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
    {
        *pos += 1;
    }
}

/// A flow value at `*pos`: `[..]`, `{..}`, a quoted or a plain scalar.
fn flow(text: &str, pos: &mut usize, depth: usize) -> Option<Node> {
    if depth > MAX_DEPTH {
        return None;
    }
    skip_ws(text, pos);
    let bytes = text.as_bytes();
    match *bytes.get(*pos)? {
        b'[' => {
            *pos += 1;
            let mut items = Vec::new();
            loop {
                skip_ws(text, pos);
                match bytes.get(*pos)? {
                    b']' => {
                        *pos += 1;
                        return Some(Node::List(items));
                    }
                    b',' => *pos += 1,
                    _ => items.push(flow(text, pos, depth + 1)?),
                }
            }
        }
        b'{' => {
            *pos += 1;
            let mut pairs = Vec::new();
            loop {
                skip_ws(text, pos);
                match bytes.get(*pos)? {
                    b'}' => {
                        *pos += 1;
                        return Some(Node::Map(pairs));
                    }
                    b',' => *pos += 1,
                    _ => {
                        let key = match flow(text, pos, depth + 1)? {
                            Node::Scalar(k) => k,
                            _ => return None,
                        };
                        skip_ws(text, pos);
                        let value = if bytes.get(*pos) == Some(&b':') {
                            *pos += 1;
                            skip_ws(text, pos);
                            match bytes.get(*pos)? {
                                b',' | b'}' => Node::Scalar(String::new()),
                                _ => flow(text, pos, depth + 1)?,
                            }
                        } else {
                            Node::Scalar(String::new())
                        };
                        pairs.push((key, value));
                    }
                }
            }
        }
        b'"' | b'\'' => quoted(text, pos).map(Node::Scalar),
        _ => {
            // A plain scalar ends at a flow indicator or at `: ` (a key).
            let start = *pos;
            while let Some(&c) = bytes.get(*pos) {
                let key_end =
                    c == b':' && bytes.get(*pos + 1).is_none_or(|n| b" \t,}]".contains(n));
                if matches!(c, b',' | b']' | b'}') || key_end {
                    break;
                }
                *pos += 1;
            }
            if *pos == start {
                // Nothing readable here (`[:]`, `{]`): not flow YAML we know.
                return None;
            }
            Some(Node::Scalar(text[start..*pos].trim().to_owned()))
        }
    }
}

/// cloud-init's `post: all`.
const POST_ALL: [&str; 6] = [
    "pub_key_rsa",
    "pub_key_ecdsa",
    "pub_key_ed25519",
    "instance_id",
    "hostname",
    "fqdn",
];

/// cloud-init's default and our ceiling for `tries`.
const MAX_TRIES: u32 = 10;

/// The user-data and meta-data of a cloud-init volume's files: by name,
/// else user-data is the file starting with `#cloud-config`.
pub(crate) fn seed_files(files: &[SimFile]) -> (Option<&str>, Option<&str>) {
    let named = |n: &str| {
        files
            .iter()
            .find(|f| f.name == n)
            .map(|f| f.content.as_str())
    };
    let user = named("user-data").or_else(|| {
        files
            .iter()
            .find(|f| f.content.trim_start().starts_with("#cloud-config"))
            .map(|f| f.content.as_str())
    });
    (user, named("meta-data"))
}

/// The static IPv4 addresses a NoCloud `network-config` (version 2)
/// assigns, in order: `ethernets.<nic>.addresses[]`, prefix dropped. The
/// guest would configure them and the hypervisor's agent report them.
pub(crate) fn static_addresses(files: &[SimFile]) -> Vec<std::net::Ipv4Addr> {
    let Some(doc) = files.iter().find(|f| f.name == "network-config") else {
        return Vec::new();
    };
    let top = parse(&doc.content);
    let Some(Node::Map(nics)) = get(&top, "ethernets") else {
        return Vec::new();
    };
    nics.iter()
        .filter_map(|(_, nic)| match nic.get("addresses") {
            Some(Node::List(items)) => Some(items),
            _ => None,
        })
        .flatten()
        .filter_map(Node::as_str)
        .filter_map(|a| a.split('/').next()?.trim().parse().ok())
        .collect()
}

/// The phone-home call a VM named `vm_name` (id `vm_id`) makes once booted,
/// if its user-data is a `#cloud-config` with a `phone_home.url`.
pub(crate) fn phone_home(
    user_data: &str,
    meta_data: Option<&str>,
    vm_name: &str,
    vm_id: &str,
) -> Option<PhoneHome> {
    let user_data = user_data.strip_prefix('\u{feff}').unwrap_or(user_data);
    // cloud-init only reads cloud-config from a part with this header.
    if !user_data.trim_start().starts_with("#cloud-config") {
        return None;
    }
    let user = parse(user_data);
    let config = get(&user, "phone_home")?;
    let url = config.get("url").and_then(Node::as_str)?.trim();
    if url.is_empty() {
        return None;
    }
    let meta = meta_data.map(parse).unwrap_or_default();
    let instance_id = get_str(&meta, "instance-id").unwrap_or(vm_id);
    let hostname = get_str(&user, "hostname")
        .or_else(|| get_str(&meta, "local-hostname"))
        .unwrap_or(vm_name);
    let fqdn = get_str(&user, "fqdn").unwrap_or(hostname);
    let keys: Vec<String> = match config.get("post") {
        None => POST_ALL.map(str::to_owned).to_vec(),
        Some(Node::Scalar(s)) if s == "all" || s.is_empty() => POST_ALL.map(str::to_owned).to_vec(),
        Some(Node::Scalar(s)) => vec![s.clone()],
        Some(Node::List(items)) => items
            .iter()
            .filter_map(Node::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Node::Map(_)) => Vec::new(),
    };
    let form = keys
        .into_iter()
        .map(|k| {
            // The simulated guest has no host keys; cloud-init posts "N/A"
            // for anything it cannot read.
            let v = match k.as_str() {
                "instance_id" => instance_id,
                "hostname" => hostname,
                "fqdn" => fqdn,
                _ => "N/A",
            };
            (k, v.to_owned())
        })
        .collect();
    let tries = config
        .get("tries")
        .and_then(Node::as_str)
        .and_then(|t| t.parse::<u32>().ok())
        .unwrap_or(MAX_TRIES)
        .clamp(1, MAX_TRIES);
    Some(PhoneHome {
        url: url
            .replace("${INSTANCE_ID}", instance_id)
            .replace("$INSTANCE_ID", instance_id),
        form,
        tries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Node {
        Node::Scalar(v.to_owned())
    }

    /// What meson's `VmCloudInit` renders (meson-core/src/cloudinit.rs).
    const MESON_USER_DATA: &str = "#cloud-config\nhostname: \"web-1\"\npreserve_hostname: false\n\
        ssh_pwauth: false\nusers:\n  - default\n  - name: \"elemento\"\n    shell: \"/bin/bash\"\n\
        \x20   sudo: \"ALL=(ALL) NOPASSWD:ALL\"\n    lock_passwd: true\n    ssh_authorized_keys:\n\
        \x20     - \"ssh-ed25519 AAAA user@host\"\n\
        phone_home:\n  url: \"http://127.0.0.1:8080/v1/vms/x/phone-home\"\n\
        \x20 post: [\"instance_id\", \"hostname\"]\n  tries: 10\n";
    const MESON_META_DATA: &str =
        "instance-id: \"0190a6f4-0000-7000-8000-000000000001\"\nlocal-hostname: \"web-1\"\n";

    #[test]
    fn reads_what_meson_renders() {
        let ph = phone_home(MESON_USER_DATA, Some(MESON_META_DATA), "vm", "id").unwrap();
        assert_eq!(ph.url, "http://127.0.0.1:8080/v1/vms/x/phone-home");
        assert_eq!(
            ph.form,
            vec![
                (
                    "instance_id".into(),
                    "0190a6f4-0000-7000-8000-000000000001".into()
                ),
                ("hostname".into(), "web-1".into()),
            ]
        );
        assert_eq!(ph.tries, 10);
        let doc = parse(MESON_USER_DATA);
        let users = get(&doc, "users").unwrap();
        let Node::List(users) = users else {
            panic!("{users:?}")
        };
        assert_eq!(users[0], s("default"));
        assert_eq!(users[1].get("shell"), Some(&s("/bin/bash")));
        assert_eq!(
            users[1].get("ssh_authorized_keys"),
            Some(&Node::List(vec![s("ssh-ed25519 AAAA user@host")]))
        );
    }

    #[test]
    fn plain_block_and_flow_forms() {
        let plain = "#cloud-config\nphone_home:\n    url: http://h:1/p/$INSTANCE_ID # done\n    \
                     post:\n      - hostname\n      - 'fqdn'\n    tries: 99\nhostname: h1\n\
                     fqdn: h1.example\n";
        let ph = phone_home(plain, Some("instance-id: i-1\n"), "vm", "id").unwrap();
        assert_eq!(ph.url, "http://h:1/p/i-1");
        assert_eq!(
            ph.form,
            vec![
                ("hostname".into(), "h1".into()),
                ("fqdn".into(), "h1.example".into())
            ]
        );
        assert_eq!(ph.tries, 10, "capped");

        let flow = "#cloud-config\nphone_home: {url: 'http://h/it''s', post: all, tries: 2}\n";
        let ph = phone_home(flow, None, "vm-9", "id-9").unwrap();
        assert_eq!(ph.url, "http://h/it's");
        assert_eq!(ph.tries, 2);
        assert_eq!(ph.form.len(), 6);
        assert!(ph.form.contains(&("instance_id".into(), "id-9".into())));
        assert!(ph.form.contains(&("hostname".into(), "vm-9".into())));
        assert!(ph.form.contains(&("pub_key_rsa".into(), "N/A".into())));

        let json_meta = r#"{"instance-id": "i-json", "local-hostname": "lh"}"#;
        let seq_same_indent = "#cloud-config\nphone_home:\n  url: \"http://h/${INSTANCE_ID}\"\n  \
                               post:\n  - hostname\n  - instance_id\n";
        let ph = phone_home(seq_same_indent, Some(json_meta), "vm", "id").unwrap();
        assert_eq!(ph.url, "http://h/i-json");
        assert_eq!(
            ph.form,
            vec![
                ("hostname".into(), "lh".into()),
                ("instance_id".into(), "i-json".into())
            ]
        );
    }

    #[test]
    fn no_phone_home_without_header_or_url() {
        assert_eq!(
            phone_home("phone_home:\n  url: http://h\n", None, "a", "b"),
            None
        );
        assert_eq!(
            phone_home("#cloud-config\nhostname: x\n", None, "a", "b"),
            None
        );
        assert_eq!(
            phone_home("#cloud-config\nphone_home:\n  post: all\n", None, "a", "b"),
            None
        );
        assert_eq!(
            phone_home("#cloud-config\nphone_home: http://h\n", None, "a", "b"),
            None
        );
        // Nested deeper than the module reads: not a top-level key.
        assert_eq!(
            phone_home(
                "#cloud-config\nx:\n  phone_home:\n    url: http://h\n",
                None,
                "a",
                "b"
            ),
            None
        );
    }

    #[test]
    fn block_scalars_are_skipped() {
        let doc = "#cloud-config\nwrite_files:\n  - path: /x\n    content: |\n      phone_home:\n        \
                   url: http://wrong\n      # comment\nruncmd: [ls]\nphone_home:\n  url: http://right\n";
        let ph = phone_home(doc, None, "a", "b").unwrap();
        assert_eq!(ph.url, "http://right");
        assert_eq!(get(&parse(doc), "runcmd"), Some(&Node::List(vec![s("ls")])));
    }

    #[test]
    fn static_addresses_from_network_config() {
        let file = |name: &str, content: &str| SimFile {
            name: name.to_owned(),
            content: content.to_owned(),
        };
        let nc = "version: 2\nethernets:\n  nic0:\n    match:\n      name: \"e*\"\n    \
                  addresses: [\"192.168.1.5/24\"]\n  nic1:\n    addresses:\n      - 10.0.0.9/8\n";
        let files = vec![
            file("user-data", "#cloud-config\n"),
            file("network-config", nc),
        ];
        assert_eq!(
            static_addresses(&files),
            vec![
                "192.168.1.5".parse::<std::net::Ipv4Addr>().unwrap(),
                "10.0.0.9".parse().unwrap()
            ]
        );
        assert!(static_addresses(&files[..1]).is_empty());
        assert!(static_addresses(&[file("network-config", "ethernets: nope\n")]).is_empty());
    }

    #[test]
    fn garbage_is_not_a_panic() {
        for doc in [
            "",
            "#cloud-config",
            "#cloud-config\n:",
            "#cloud-config\n- a\n- b",
            "#cloud-config\nphone_home: [[[[",
            "#cloud-config\nphone_home: {url: \"unterminated}",
            "#cloud-config\nphone_home: {: }",
            "#cloud-config\n\"key\nphone_home:\n  url:",
            "#cloud-config\n\t\tphone_home:\n\turl: x",
            "#cloud-config\nphone_home:\n  url: \"\\x41\"\n",
            "\u{feff}#cloud-config\nphone_home:\n  url: ok\n",
        ] {
            let _ = phone_home(doc, Some(doc), "a", "b");
        }
        let deep = format!("#cloud-config\nphone_home: {}", "[".repeat(10_000));
        assert_eq!(phone_home(&deep, None, "a", "b"), None);
        let ph = phone_home(
            "#cloud-config\nphone_home:\n  url: \"\\x41\"\n",
            None,
            "a",
            "b",
        )
        .unwrap();
        assert_eq!(ph.url, "\\x41", "YAML-only escapes are kept verbatim");
    }

    #[test]
    fn seed_files_by_name_or_header() {
        let f = |n: &str, c: &str| SimFile {
            name: n.into(),
            content: c.into(),
        };
        let files = [
            f("meta-data", "instance-id: i"),
            f("user-data", "#cloud-config\n"),
        ];
        assert_eq!(
            seed_files(&files),
            (Some("#cloud-config\n"), Some("instance-id: i"))
        );
        let unnamed = [f("file", "#cloud-config\nx: 1")];
        assert_eq!(seed_files(&unnamed), (Some("#cloud-config\nx: 1"), None));
    }
}
