//! Bad VM payloads, table-driven: each is refused naming its field, and nothing is written.

use crate::harness::{Meson, seed_vm};
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};

/// What a row sends.
enum Body {
    /// The seed payload with one change applied.
    Edit(Box<dyn Fn(&mut Value)>),
    /// Raw bytes, sent as `application/json`.
    Raw(Vec<u8>),
}

/// One bad request and the answer it must get.
struct Case {
    what: &'static str,
    body: Body,
    status: StatusCode,
    code: &'static str,
    /// Exactly the names in `details.fields` (any order); empty for `json_error`.
    fields: &'static [&'static str],
}

const BAD: StatusCode = StatusCode::BAD_REQUEST;

/// The value at a JSON pointer of the seed, which every row's pointer must name.
fn at<'a>(v: &'a mut Value, pointer: &str) -> &'a mut Value {
    v.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("the seed has no {pointer}"))
}

/// The seed with the value at `pointer` replaced.
fn set(
    what: &'static str,
    pointer: &'static str,
    value: Value,
    fields: &'static [&'static str],
) -> Case {
    edit(what, fields, move |v| *at(v, pointer) = value.clone())
}

/// The seed with the key at `pointer` removed.
fn remove(what: &'static str, pointer: &'static str, fields: &'static [&'static str]) -> Case {
    edit(what, fields, move |v| {
        let (parent, key) = pointer.rsplit_once('/').expect("pointer has a parent");
        let parent = if parent.is_empty() { v } else { at(v, parent) };
        parent
            .as_object_mut()
            .expect("parent is an object")
            .remove(key)
            .unwrap_or_else(|| panic!("the seed has no {pointer}"));
    })
}

/// The seed changed by `f`, refused as `invalid_input`.
fn edit(
    what: &'static str,
    fields: &'static [&'static str],
    f: impl Fn(&mut Value) + 'static,
) -> Case {
    Case {
        what,
        body: Body::Edit(Box::new(f)),
        status: BAD,
        code: "invalid_input",
        fields,
    }
}

/// A whole body, refused with `code`.
fn raw(
    what: &'static str,
    body: impl Into<Vec<u8>>,
    code: &'static str,
    fields: &'static [&'static str],
) -> Case {
    Case {
        what,
        body: Body::Raw(body.into()),
        status: BAD,
        code,
        fields,
    }
}

fn nested(depth: usize) -> String {
    format!(
        "{{\"specs\": {{\"x\": {}1{}}}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

const CPU: &str = "/specs/req/cpu";
const SSH_DSA: &str = "ssh-dss AAAAB3NzaC1kc3MAAACBAP1/U4EddRIpUt9KnC7s5Of2EbdSPO9EAMMeP4C2USZpRV1AIlH7WT2NWPq/xfW6MPbLm1Vs14E7gB00b/JmYLdrmVClpJ+f6AR7ECLCT7up1/63xhv4O1fnxqimFQ8E+4P208UewwI1VBNaFpEy9nXzrith1yrv8iIDGZ3RSAHHAAAAFQCXYFCPFSMLzLKSuYKi64QL8Fgc9QAAAIEA9+GghdabPd7LvKtcNrhXuXmUr7v6OuqC+VdMCz0HgmdRWVeOutRZT+ZxBxCBgLRJFnEj6EwoFhO3zwkyjMim4TwWeotUfI0o4KOuHiuzpnWRbqN/C/ohNWLx+2J6ASQ7zKTxvqhRkImog9/hWuWfBpKLZl6Ae1UlZAFMO/7PSSo= user@host";

fn cases() -> Vec<Case> {
    vec![
        // --- wrong types, field by field ---
        set(
            "smtEnabled as a word",
            "/specs/req/cpu/smtEnabled",
            json!("yes"),
            &["specs.req.cpu.smtEnabled"],
        ),
        set(
            "smtEnabled as 2",
            "/specs/req/cpu/smtEnabled",
            json!(2),
            &["specs.req.cpu.smtEnabled"],
        ),
        set(
            "smtEnabled as an array",
            "/specs/req/cpu/smtEnabled",
            json!([true]),
            &["specs.req.cpu.smtEnabled"],
        ),
        set(
            "numberOfCores as a string",
            "/specs/req/cpu/numberOfCores",
            json!("2"),
            &["specs.req.cpu.numberOfCores"],
        ),
        set(
            "numberOfCores as a float",
            "/specs/req/cpu/numberOfCores",
            json!(2.5),
            &["specs.req.cpu.numberOfCores"],
        ),
        set(
            "numberOfCores as a boolean",
            "/specs/req/cpu/numberOfCores",
            json!(true),
            &["specs.req.cpu.numberOfCores"],
        ),
        set(
            "numberOfCores 0",
            "/specs/req/cpu/numberOfCores",
            json!(0),
            &["specs.req.cpu.numberOfCores"],
        ),
        set(
            "numberOfCores 129",
            "/specs/req/cpu/numberOfCores",
            json!(129),
            &["specs.req.cpu.numberOfCores"],
        ),
        set(
            "numberOfCores negative",
            "/specs/req/cpu/numberOfCores",
            json!(-2),
            &["specs.req.cpu.numberOfCores"],
        ),
        set(
            "numberOfCores beyond 64 bits",
            "/specs/req/cpu/numberOfCores",
            json!(u64::MAX),
            &["specs.req.cpu.numberOfCores"],
        ),
        set(
            "numberOfCores 1e300",
            "/specs/req/cpu/numberOfCores",
            json!(1e300),
            &["specs.req.cpu.numberOfCores"],
        ),
        set(
            "numberOfThreads 9",
            "/specs/req/cpu/numberOfThreads",
            json!(9),
            &["specs.req.cpu.numberOfThreads"],
        ),
        set(
            "numberOfThreads as a string",
            "/specs/req/cpu/numberOfThreads",
            json!("1"),
            &["specs.req.cpu.numberOfThreads"],
        ),
        set(
            "numberOfThreads 2 without SMT",
            "/specs/req/cpu/numberOfThreads",
            json!(2),
            &["specs.req.cpu.numberOfThreads"],
        ),
        set(
            "min_frequency 0",
            "/specs/req/cpu/min_frequency",
            json!(0),
            &["specs.req.cpu.min_frequency"],
        ),
        set(
            "min_frequency 99",
            "/specs/req/cpu/min_frequency",
            json!(99),
            &["specs.req.cpu.min_frequency"],
        ),
        set(
            "min_frequency negative",
            "/specs/req/cpu/min_frequency",
            json!(-1.5),
            &["specs.req.cpu.min_frequency"],
        ),
        set(
            "min_frequency as a string",
            "/specs/req/cpu/min_frequency",
            json!("fast"),
            &["specs.req.cpu.min_frequency"],
        ),
        set(
            "unknown arch",
            "/specs/req/cpu/arch",
            json!(["MIPS"]),
            &["specs.req.cpu.arch"],
        ),
        set(
            "empty arch list",
            "/specs/req/cpu/arch",
            json!([]),
            &["specs.req.cpu.arch"],
        ),
        set(
            "arch as a number",
            "/specs/req/cpu/arch",
            json!(64),
            &["specs.req.cpu.arch"],
        ),
        set(
            "arch as an object",
            "/specs/req/cpu/arch",
            json!({"X86_64": true}),
            &["specs.req.cpu.arch"],
        ),
        set(
            "arch item as a number",
            "/specs/req/cpu/arch",
            json!([86]),
            &["specs.req.cpu.arch[0]"],
        ),
        set(
            "flags as a string",
            "/specs/req/cpu/flags",
            json!("sse2"),
            &["specs.req.cpu.flags"],
        ),
        set(
            "flags as an object",
            "/specs/req/cpu/flags",
            json!({"sse2": true}),
            &["specs.req.cpu.flags"],
        ),
        set(
            "flag with a space",
            "/specs/req/cpu/flags",
            json!(["sse 2"]),
            &["specs.req.cpu.flags"],
        ),
        set(
            "empty flag",
            "/specs/req/cpu/flags",
            json!([""]),
            &["specs.req.cpu.flags"],
        ),
        set(
            "flag as a number",
            "/specs/req/cpu/flags",
            json!([2]),
            &["specs.req.cpu.flags[0]"],
        ),
        set("cpu as an array", CPU, json!([2]), &["specs.req.cpu"]),
        set(
            "capacity 0",
            "/specs/req/mem/capacity",
            json!(0),
            &["specs.req.mem.capacity"],
        ),
        set(
            "capacity huge",
            "/specs/req/mem/capacity",
            json!(1_000_000_000_000_i64),
            &["specs.req.mem.capacity"],
        ),
        set(
            "capacity negative",
            "/specs/req/mem/capacity",
            json!(-4096),
            &["specs.req.mem.capacity"],
        ),
        set(
            "capacity as a string",
            "/specs/req/mem/capacity",
            json!("4096"),
            &["specs.req.mem.capacity"],
        ),
        set(
            "capacity as a fraction",
            "/specs/req/mem/capacity",
            json!(4096.5),
            &["specs.req.mem.capacity"],
        ),
        set(
            "requireECC as a word",
            "/specs/req/mem/requireECC",
            json!("yes"),
            &["specs.req.mem.requireECC"],
        ),
        set(
            "requireECC 2",
            "/specs/req/mem/requireECC",
            json!(2),
            &["specs.req.mem.requireECC"],
        ),
        set(
            "mem as a string",
            "/specs/req/mem",
            json!("4 GiB"),
            &["specs.req.mem"],
        ),
        // --- PCI ---
        set(
            "PCI quantity 0",
            "/specs/req/pci/devices",
            json!({"10de:1bb1": 0}),
            &["specs.req.pci.devices.10de:1bb1"],
        ),
        set(
            "PCI quantity 9",
            "/specs/req/pci/devices",
            json!({"10de:1bb1": 9}),
            &["specs.req.pci.devices.10de:1bb1"],
        ),
        set(
            "PCI quantity as a string",
            "/specs/req/pci/devices",
            json!({"10de:1bb1": "one"}),
            &["specs.req.pci.devices.10de:1bb1"],
        ),
        set(
            "PCI ids not hex",
            "/specs/req/pci/devices",
            json!({"nvid:gpu1": 1}),
            &["specs.req.pci.devices.nvid:gpu1"],
        ),
        set(
            "PCI id without a colon",
            "/specs/req/pci/devices",
            json!({"10de1bb1": 1}),
            &["specs.req.pci.devices.10de1bb1"],
        ),
        set(
            "PCI id too long",
            "/specs/req/pci/devices",
            json!({"10de0:1bb1": 1}),
            &["specs.req.pci.devices.10de0:1bb1"],
        ),
        set(
            "PCI device named twice",
            "/specs/req/pci/devices",
            json!({"10de:1bb1": 1, "10DE:1BB1": 1}),
            &["specs.req.pci.devices"],
        ),
        set(
            "PCI list item with a bad model",
            "/specs/req/pci/devices",
            json!([{"vendor": "10de", "model": "xyz1", "quantity": 1}]),
            &["specs.req.pci.devices[0]"],
        ),
        set(
            "PCI list item quantity 0",
            "/specs/req/pci/devices",
            json!([{"vendor": "10de", "model": "1bb1", "quantity": 0}]),
            &["specs.req.pci.devices[0].quantity"],
        ),
        set(
            "PCI list item without a vendor",
            "/specs/req/pci/devices",
            json!([{"model": "1bb1", "quantity": 1}]),
            &["specs.req.pci.devices[0].vendor"],
        ),
        set(
            "PCI list item not an object",
            "/specs/req/pci/devices",
            json!(["10de:1bb1"]),
            &["specs.req.pci.devices[0]"],
        ),
        set(
            "PCI devices as a string",
            "/specs/req/pci/devices",
            json!("10de:1bb1"),
            &["specs.req.pci.devices"],
        ),
        set(
            "pci as an array",
            "/specs/req/pci",
            json!([]),
            &["specs.req.pci"],
        ),
        // --- OS ---
        set(
            "unsupported osDistribution",
            "/specs/req/misc/osDistribution",
            json!("TempleOS"),
            &["specs.req.misc.osDistribution"],
        ),
        set(
            "osDistribution as a number",
            "/specs/req/misc/osDistribution",
            json!(12),
            &["specs.req.misc.osDistribution"],
        ),
        set(
            "misc as a string",
            "/specs/req/misc",
            json!("Debian"),
            &["specs.req.misc"],
        ),
        // --- volumes ---
        set(
            "volumes as a string",
            "/specs/volumes",
            json!("test"),
            &["specs.volumes"],
        ),
        set(
            "volumes as an object",
            "/specs/volumes",
            json!({"name": "test", "size": 30}),
            &["specs.volumes"],
        ),
        set(
            "volume not an object",
            "/specs/volumes/0",
            json!("test"),
            &["specs.volumes[0]"],
        ),
        set(
            "volume name with a space",
            "/specs/volumes/0/name",
            json!("my disk"),
            &["specs.volumes[0].name"],
        ),
        set(
            "volume name with an underscore",
            "/specs/volumes/0/name",
            json!("my_disk"),
            &["specs.volumes[0].name"],
        ),
        set(
            "volume name too long",
            "/specs/volumes/0/name",
            json!("d".repeat(41)),
            &["specs.volumes[0].name"],
        ),
        set(
            "volume name empty",
            "/specs/volumes/0/name",
            json!(""),
            &["specs.volumes[0].name"],
        ),
        set(
            "volume name as a number",
            "/specs/volumes/0/name",
            json!(7),
            &["specs.volumes[0].name"],
        ),
        remove(
            "volume without a name",
            "/specs/volumes/0/name",
            &["specs.volumes[0].name"],
        ),
        set(
            "volume size 0",
            "/specs/volumes/0/size",
            json!(0),
            &["specs.volumes[0].size"],
        ),
        set(
            "volume size huge",
            "/specs/volumes/0/size",
            json!(10_000_000),
            &["specs.volumes[0].size"],
        ),
        set(
            "volume size negative",
            "/specs/volumes/0/size",
            json!(-30),
            &["specs.volumes[0].size"],
        ),
        set(
            "volume size as a string",
            "/specs/volumes/0/size",
            json!("30"),
            &["specs.volumes[0].size"],
        ),
        set(
            "volume size as a fraction",
            "/specs/volumes/0/size",
            json!(30.5),
            &["specs.volumes[0].size"],
        ),
        set(
            "volume private as a word",
            "/specs/volumes/0/private",
            json!("yes"),
            &["specs.volumes[0].private"],
        ),
        set(
            "volume readonly 2",
            "/specs/volumes/0/readonly",
            json!(2),
            &["specs.volumes[0].readonly"],
        ),
        edit(
            "shareable and bootable",
            &["specs.volumes[0].shareable"],
            |v| {
                *at(v, "/specs/volumes/0/shareable") = json!("True");
                *at(v, "/specs/volumes/0/bootable") = json!(true);
            },
        ),
        edit("duplicate volume names", &["specs.volumes[1].name"], |v| {
            let first = at(v, "/specs/volumes/0").clone();
            at(v, "/specs/volumes")
                .as_array_mut()
                .expect("volumes")
                .push(first);
        }),
        edit("nine volumes", &["specs.volumes"], |v| {
            *at(v, "/specs/volumes") = (0..9)
                .map(|i| json!({"name": format!("d{i}"), "size": 1}))
                .collect();
        }),
        // --- SSH keys ---
        set(
            "placeholder SSH key",
            "/specs/authentication/ssh-key",
            json!("ssh-rsa AAAA... user@host"),
            &["specs.authentication.ssh-key"],
        ),
        set(
            "DSA SSH key",
            "/specs/authentication/ssh-key",
            json!(SSH_DSA),
            &["specs.authentication.ssh-key"],
        ),
        set(
            "garbage SSH key",
            "/specs/authentication/ssh-key",
            json!("hello world"),
            &["specs.authentication.ssh-key"],
        ),
        set(
            "empty SSH key",
            "/specs/authentication/ssh-key",
            json!(""),
            &["specs.authentication.ssh-key"],
        ),
        set(
            "SSH key whose data is another type",
            "/specs/authentication/ssh-key",
            json!(crate::harness::SSH_KEY.replace("ssh-ed25519 ", "ssh-rsa ")),
            &["specs.authentication.ssh-key"],
        ),
        set(
            "SSH key on two lines",
            "/specs/authentication/ssh-key",
            json!(format!(
                "{}\n{}",
                crate::harness::SSH_KEY,
                crate::harness::SSH_KEY
            )),
            &["specs.authentication.ssh-key"],
        ),
        set(
            "SSH key as a number",
            "/specs/authentication/ssh-key",
            json!(42),
            &["specs.authentication.ssh-key"],
        ),
        edit(
            "bad key in ssh-keys",
            &["specs.authentication.ssh-keys[1]"],
            |v| {
                *at(v, "/specs/authentication") =
                    json!({"ssh-keys": [crate::harness::SSH_KEY, "ssh-ed25519 nope"]});
            },
        ),
        set(
            "authentication as a string",
            "/specs/authentication",
            json!(crate::harness::SSH_KEY),
            &["specs.authentication"],
        ),
        // --- names AtomOS cannot hold ---
        set(
            "vm_name with an underscore",
            "/specs/vm_name",
            json!("my_vm"),
            &["specs.vm_name"],
        ),
        set(
            "vm_name with a dot",
            "/specs/vm_name",
            json!("my.vm"),
            &["specs.vm_name"],
        ),
        set(
            "vm_name with a leading dash",
            "/specs/vm_name",
            json!("-vm"),
            &["specs.vm_name"],
        ),
        set(
            "vm_name of 64 characters",
            "/specs/vm_name",
            json!("v".repeat(64)),
            &["specs.vm_name"],
        ),
        set(
            "vm_name empty",
            "/specs/vm_name",
            json!(""),
            &["specs.vm_name"],
        ),
        set(
            "vm_name not ASCII",
            "/specs/vm_name",
            json!("mäschine"),
            &["specs.vm_name"],
        ),
        set(
            "vm_name as a number",
            "/specs/vm_name",
            json!(1),
            &["specs.vm_name"],
        ),
        remove("vm_name missing", "/specs/vm_name", &["specs.vm_name"]),
        // --- placement ---
        set(
            "unknown provider",
            "/provider",
            json!("nosuchcloud"),
            &["provider"],
        ),
        set("provider as a number", "/provider", json!(7), &["provider"]),
        set(
            "provider with spaces",
            "/provider",
            json!("my cloud!"),
            &["provider"],
        ),
        edit("unknown continent", &["continent"], |v| {
            v["continent"] = json!("antarctica");
        }),
        edit("unknown region", &["region"], |v| {
            v["region"] = json!("mars-1");
        }),
        edit("continent as an object", &["continent"], |v| {
            v["continent"] = json!({"name": "europe"});
        }),
        // --- labels ---
        edit("label with a bad key", &["labels.-env"], |v| {
            v["labels"] = json!({"-env": "prod"});
        }),
        edit("label with a number value", &["labels.env"], |v| {
            v["labels"] = json!({"env": 3});
        }),
        edit("label with a bad value", &["labels.env"], |v| {
            v["labels"] = json!({"env": "has space"});
        }),
        edit(
            "label with a reserved prefix",
            &["labels.meson.elemento.cloud/x"],
            |v| {
                v["labels"] = json!({"meson.elemento.cloud/x": "y"});
            },
        ),
        edit(
            "label key too long",
            &["labels.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"],
            |v| {
                v["labels"] = json!({"k".repeat(64): "v"});
            },
        ),
        edit("label value too long", &["labels.env"], |v| {
            v["labels"] = json!({"env": "v".repeat(64)});
        }),
        edit("65 labels", &["labels"], |v| {
            v["labels"] = (0..65)
                .map(|i| (format!("k{i}"), json!("v")))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }),
        edit("labels as an array", &["labels"], |v| {
            v["labels"] = json!(["env=prod"]);
        }),
        // --- missing sections ---
        remove("specs missing", "/specs", &["specs"]),
        set("specs as an array", "/specs", json!([]), &["specs"]),
        remove("req missing", "/specs/req", &["specs.req"]),
        remove("cpu missing", "/specs/req/cpu", &["specs.req.cpu"]),
        remove("mem missing", "/specs/req/mem", &["specs.req.mem"]),
        remove(
            "numberOfCores missing",
            "/specs/req/cpu/numberOfCores",
            &["specs.req.cpu.numberOfCores"],
        ),
        remove(
            "capacity missing",
            "/specs/req/mem/capacity",
            &["specs.req.mem.capacity"],
        ),
        // --- many bad fields at once: every one is named ---
        edit(
            "several bad fields",
            &[
                "specs.req.cpu.numberOfCores",
                "specs.req.mem.capacity",
                "specs.volumes[0].size",
                "specs.vm_name",
                "labels.env",
            ],
            |v| {
                *at(v, "/specs/req/cpu/numberOfCores") = json!(0);
                *at(v, "/specs/req/mem/capacity") = json!("big");
                *at(v, "/specs/volumes/0/size") = json!(-1);
                *at(v, "/specs/vm_name") = json!("a b");
                v["labels"] = json!({"env": 1});
            },
        ),
        // --- bodies that are not a VM payload at all ---
        raw("body is an array", "[]", "invalid_input", &["(body)"]),
        raw("body is a string", "\"vm\"", "invalid_input", &["(body)"]),
        raw("body is null", "null", "invalid_input", &["(body)"]),
        raw("body is a number", "42", "invalid_input", &["(body)"]),
        raw("empty body", "", "json_error", &[]),
        raw("truncated JSON", "{\"specs\":", "json_error", &[]),
        raw(
            "trailing comma",
            "{\"provider\": \"ovh\",}",
            "json_error",
            &[],
        ),
        raw(
            "invalid UTF-8",
            b"{\"specs\": \"\xff\xfe\"}".to_vec(),
            "json_error",
            &[],
        ),
        Case {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            ..raw(
                "body over 1 MiB",
                {
                    let mut v = seed_vm();
                    v["padding"] = json!("x".repeat(1024 * 1024 + 1));
                    v.to_string()
                },
                "payload_too_large",
                &[],
            )
        },
        raw("nesting 10000 deep", nested(10_000), "json_error", &[]),
        raw("nesting 200 deep", nested(200), "json_error", &[]),
    ]
}

/// How the answer `status`, `body` to case `c` differs from what the case
/// wants: its status, error code and exactly its fields, each with a message.
fn mismatch(c: &Case, status: StatusCode, body: &Value) -> Option<String> {
    let err = &body["error"];
    let mut got: Vec<&str> = err["details"]["fields"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["name"].as_str()).collect())
        .unwrap_or_default();
    got.sort_unstable();
    let mut want = c.fields.to_vec();
    want.sort_unstable();
    let messages_ok = err["details"]["fields"].as_array().is_none_or(|fields| {
        fields
            .iter()
            .all(|f| f["messages"].as_array().is_some_and(|m| !m.is_empty()))
    });
    let ok = status == c.status
        && err["code"] == c.code
        && got == want
        && err["message"].is_string()
        && messages_ok;
    (!ok).then(|| {
        format!(
            "{}: want {} {} {want:?}, got {status} {body}",
            c.what, c.status, c.code
        )
    })
}

async fn send(m: &Meson, body: &Body) -> (StatusCode, Value) {
    let req = m
        .http
        .post(format!("{}/v1/vms", m.base))
        .bearer_auth(&m.token);
    let req = match body {
        Body::Edit(f) => {
            let mut v = seed_vm();
            f(&mut v);
            req.json(&v)
        }
        Body::Raw(bytes) => req
            .header(CONTENT_TYPE, "application/json")
            .body(bytes.clone()),
    };
    let res = req.send().await.expect("request sent");
    let status = res.status();
    let text = res.text().await.expect("body read");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

#[tokio::test]
async fn bad_vm_payloads_are_refused_naming_the_field_and_write_nothing() {
    let m = Meson::start().await;
    let cases = cases();
    assert!(cases.len() >= 40, "{} cases", cases.len());

    let mut failures = Vec::new();
    for c in &cases {
        let (status, body) = send(&m, &c.body).await;
        failures.extend(mismatch(c, status, &body));
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );

    let r = m.get("/v1/vms").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["vms"], json!([]), "a refused request wrote a VM");
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 0);
    let r = m.get("/v1/volumes").await;
    assert_eq!(
        r.body["volumes"],
        json!([]),
        "a refused request wrote a volume"
    );
    assert_eq!(
        m.inventory_counts(),
        (0, 0),
        "a refused request reached AtomOS"
    );
    m.stop().await;
}

#[tokio::test]
async fn unknown_fields_are_accepted_and_reported_as_warnings() {
    let m = Meson::start().await;
    let mut v = seed_vm();
    v["colour"] = json!("blue");
    v["specs"]["req"]["cpu"]["turbo"] = json!(true);
    v["specs"]["volumes"][0]["encrypted"] = json!("True");
    v["specs"]["req"]["misc"]["kernel"] = json!({"version": 6});
    let r = m.post("/v1/vms", &v).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let mut warned: Vec<&str> = r.body["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w["field"].as_str())
        .collect();
    warned.sort_unstable();
    assert_eq!(
        warned,
        [
            "colour",
            "specs.req.cpu.turbo",
            "specs.req.misc.kernel",
            "specs.volumes[0].encrypted",
        ]
    );
    assert!(
        r.body["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|w| w["message"].as_str().is_some_and(|m| !m.is_empty()))
    );
    let done = m
        .wait_action(r.body["action"]["id"].as_str().expect("action id"))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    m.stop().await;
}

// ---- KaaS payloads: POST /v1/clusters does not exist yet, so they go to
// POST /v1/quotes, which validates them exactly as a create will. ----

const POOL: &str = "/req/nodepool/0";
const SUBNET: &str = "/req/nodes_subnet";

/// Bad KaaS payloads: the canonical one (docs/payloads.md) with one thing wrong.
fn kaas_cases() -> Vec<Case> {
    vec![
        // --- names ---
        set(
            "cluster name with capitals",
            "/req/name",
            json!("Test8"),
            &["req.name"],
        ),
        set(
            "cluster name with an underscore",
            "/req/name",
            json!("test_8"),
            &["req.name"],
        ),
        set(
            "cluster name of 33 characters",
            "/req/name",
            json!("c".repeat(33)),
            &["req.name"],
        ),
        set(
            "cluster name with a trailing dash",
            "/req/name",
            json!("test8-"),
            &["req.name"],
        ),
        remove("cluster name missing", "/req/name", &["req.name"]),
        set(
            "cluster name as a number",
            "/req/name",
            json!(8),
            &["req.name"],
        ),
        set(
            "pool name with a dot",
            "/req/nodepool/0/pool_name",
            json!("pool.1"),
            &["req.nodepool[0].pool_name"],
        ),
        set(
            "pool name of 25 characters",
            "/req/nodepool/0/pool_name",
            json!("p".repeat(25)),
            &["req.nodepool[0].pool_name"],
        ),
        edit(
            "duplicate pool names",
            &["req.nodepool[1].pool_name"],
            |v| {
                let first = at(v, POOL).clone();
                at(v, "/req/nodepool")
                    .as_array_mut()
                    .expect("nodepool")
                    .push(first);
            },
        ),
        // --- pools ---
        set("no pools", "/req/nodepool", json!([]), &["req.nodepool"]),
        set(
            "nodepool as an object",
            "/req/nodepool",
            json!({"pool_name": "a"}),
            &["req.nodepool"],
        ),
        remove("nodepool missing", "/req/nodepool", &["req.nodepool"]),
        edit("seventeen pools", &["req.nodepool"], |v| {
            let first = at(v, POOL).clone();
            *at(v, "/req/nodepool") = (0..17)
                .map(|i| {
                    let mut p = first.clone();
                    p["pool_name"] = json!(format!("p{i}"));
                    p
                })
                .collect();
        }),
        set(
            "pool not an object",
            POOL,
            json!("1poolname"),
            &["req.nodepool[0]"],
        ),
        set(
            "min_nodes above max_nodes",
            "/req/nodepool/0/min_nodes",
            json!(4),
            &["req.nodepool[0].min_nodes"],
        ),
        set(
            "desired_nodes below min_nodes",
            "/req/nodepool/0/desired_nodes",
            json!(2),
            &["req.nodepool[0].desired_nodes"],
        ),
        edit(
            "desired_nodes above max_nodes",
            &["req.nodepool[0].desired_nodes"],
            |v| {
                *at(v, "/req/nodepool/0/min_nodes") = json!(1);
                *at(v, "/req/nodepool/0/desired_nodes") = json!(4);
            },
        ),
        set(
            "max_nodes 101",
            "/req/nodepool/0/max_nodes",
            json!(101),
            &["req.nodepool[0].max_nodes"],
        ),
        set(
            "min_nodes negative",
            "/req/nodepool/0/min_nodes",
            json!(-1),
            &["req.nodepool[0].min_nodes"],
        ),
        set(
            "desired_nodes as a string",
            "/req/nodepool/0/desired_nodes",
            json!("3"),
            &["req.nodepool[0].desired_nodes"],
        ),
        set(
            "autoscale as a word",
            "/req/nodepool/0/autoscale",
            json!("sometimes"),
            &["req.nodepool[0].autoscale"],
        ),
        edit(
            "no worker node and no autoscaling",
            &["req.nodepool"],
            |v| {
                *at(v, "/req/nodepool/0/min_nodes") = json!(0);
                *at(v, "/req/nodepool/0/desired_nodes") = json!(0);
            },
        ),
        // --- node size ---
        set(
            "cpu 0",
            "/req/nodepool/0/specs/cpu",
            json!(0),
            &["req.nodepool[0].specs.cpu"],
        ),
        set(
            "cpu 129",
            "/req/nodepool/0/specs/cpu",
            json!(129),
            &["req.nodepool[0].specs.cpu"],
        ),
        set(
            "ram 512 MiB",
            "/req/nodepool/0/specs/ram",
            json!(512),
            &["req.nodepool[0].specs.ram"],
        ),
        set(
            "ram as a string",
            "/req/nodepool/0/specs/ram",
            json!("4 GiB"),
            &["req.nodepool[0].specs.ram"],
        ),
        set(
            "storage 10 GB",
            "/req/nodepool/0/specs/storage",
            json!(10),
            &["req.nodepool[0].specs.storage"],
        ),
        set(
            "gpu negative",
            "/req/nodepool/0/specs/gpu",
            json!(-1),
            &["req.nodepool[0].specs.gpu"],
        ),
        set(
            "gpu 9",
            "/req/nodepool/0/specs/gpu",
            json!(9),
            &["req.nodepool[0].specs.gpu"],
        ),
        set(
            "specs as a string",
            "/req/nodepool/0/specs",
            json!("neon"),
            &["req.nodepool[0].specs"],
        ),
        set(
            "billing WEEKLY",
            "/req/nodepool/0/billing",
            json!("WEEKLY"),
            &["req.nodepool[0].billing"],
        ),
        // --- pool labels and taints ---
        edit(
            "pool label with a reserved prefix",
            &["req.nodepool[0].labels.kubernetes.io/role"],
            |v| {
                at(v, POOL)["labels"] = json!({"kubernetes.io/role": "web"});
            },
        ),
        edit(
            "pool label with a bad value",
            &["req.nodepool[0].labels.tier"],
            |v| {
                at(v, POOL)["labels"] = json!({"tier": "has space"});
            },
        ),
        edit(
            "taint with an unknown effect",
            &["req.nodepool[0].taints[0]"],
            |v| {
                at(v, POOL)["taints"] = json!(["dedicated=gpu:Sometimes"]);
            },
        ),
        edit(
            "taint without an effect",
            &["req.nodepool[0].taints[0]"],
            |v| {
                at(v, POOL)["taints"] = json!(["dedicated=gpu"]);
            },
        ),
        edit("taint given twice", &["req.nodepool[0].taints[1]"], |v| {
            at(v, POOL)["taints"] = json!(["a=b:NoSchedule", "a:NoSchedule"]);
        }),
        // --- cluster settings ---
        set(
            "unknown update_policy",
            "/req/update_policy",
            json!("SOMETIMES"),
            &["req.update_policy"],
        ),
        set(
            "unsupported Kubernetes version",
            "/req/kubernetes_version",
            json!("1.26.0"),
            &["req.kubernetes_version"],
        ),
        set(
            "unknown patch of a supported minor",
            "/req/kubernetes_version",
            json!("1.29.3"),
            &["req.kubernetes_version"],
        ),
        set(
            "Kubernetes version that is no version",
            "/req/kubernetes_version",
            json!("latest"),
            &["req.kubernetes_version"],
        ),
        set(
            "Kubernetes version as a number",
            "/req/kubernetes_version",
            json!(1.29),
            &["req.kubernetes_version"],
        ),
        set(
            "metadata as an array",
            "/req/metadata",
            json!([]),
            &["req.metadata"],
        ),
        edit("unknown cni", &["req.cni"], |v| {
            at(v, "/req")["cni"] = json!("weave");
        }),
        edit(
            "two control-plane nodes",
            &["req.control_plane.nodes"],
            |v| {
                at(v, "/req")["control_plane"] = json!({"nodes": 2});
            },
        ),
        edit(
            "control plane with one vCPU",
            &["req.control_plane.specs.cpu"],
            |v| {
                at(v, "/req")["control_plane"] = json!({"specs": {"cpu": 1}});
            },
        ),
        // --- the nodes subnet ---
        set(
            "dhcp as a word",
            "/req/nodes_subnet/dhcp",
            json!("maybe"),
            &["req.nodes_subnet.dhcp"],
        ),
        set(
            "subnet without a prefix",
            "/req/nodes_subnet/subnet_netmask",
            json!("192.168.1.0"),
            &["req.nodes_subnet.subnet_netmask"],
        ),
        set(
            "subnet /30",
            "/req/nodes_subnet/subnet_netmask",
            json!("192.168.1.0/30"),
            &["req.nodes_subnet.subnet_netmask"],
        ),
        set(
            "subnet /7",
            "/req/nodes_subnet/subnet_netmask",
            json!("10.0.0.0/7"),
            &["req.nodes_subnet.subnet_netmask"],
        ),
        set(
            "subnet with host bits set",
            "/req/nodes_subnet/subnet_netmask",
            json!("192.168.1.5/24"),
            &["req.nodes_subnet.subnet_netmask"],
        ),
        set(
            "loopback subnet",
            "/req/nodes_subnet/subnet_netmask",
            json!("127.0.0.0/24"),
            &["req.nodes_subnet.subnet_netmask"],
        ),
        set(
            "start_address outside the subnet",
            "/req/nodes_subnet/start_address",
            json!("192.168.2.1"),
            &["req.nodes_subnet.start_address"],
        ),
        set(
            "last_address outside the subnet",
            "/req/nodes_subnet/last_address",
            json!("10.0.0.24"),
            &["req.nodes_subnet.last_address"],
        ),
        set(
            "start_address after last_address",
            "/req/nodes_subnet/start_address",
            json!("192.168.1.30"),
            &["req.nodes_subnet.last_address"],
        ),
        set(
            "start_address the broadcast address",
            "/req/nodes_subnet/start_address",
            json!("192.168.1.255"),
            &["req.nodes_subnet.start_address"],
        ),
        set(
            "start_address not an address",
            "/req/nodes_subnet/start_address",
            json!("192.168.1"),
            &["req.nodes_subnet.start_address"],
        ),
        edit(
            "static range too small for every node at max",
            &["req.nodes_subnet"],
            |v| {
                *at(v, "/req/nodes_subnet/dhcp") = json!("False");
                *at(v, "/req/nodes_subnet/last_address") = json!("192.168.1.3");
            },
        ),
        remove("nodes_subnet missing", SUBNET, &["req.nodes_subnet"]),
        remove(
            "subnet_netmask missing",
            "/req/nodes_subnet/subnet_netmask",
            &["req.nodes_subnet.subnet_netmask"],
        ),
        edit(
            "pod network overlapping the nodes subnet",
            &["req.pod_cidr"],
            |v| {
                at(v, "/req")["pod_cidr"] = json!("192.168.0.0/16");
            },
        ),
        edit(
            "service network overlapping the pod network",
            &["req.service_cidr"],
            |v| {
                at(v, "/req")["service_cidr"] = json!("10.244.0.0/16");
            },
        ),
        // --- placement, labels, sections ---
        set(
            "unknown provider",
            "/provider",
            json!("nosuchcloud"),
            &["provider"],
        ),
        edit("cluster label with a bad key", &["req.labels.-env"], |v| {
            at(v, "/req")["labels"] = json!({"-env": "prod"});
        }),
        set("req as a string", "/req", json!("test8"), &["req"]),
        edit("both specs and req", &["(body)"], |v| {
            v["specs"] = json!({});
        }),
        edit(
            "several bad fields",
            &[
                "req.name",
                "req.nodepool[0].min_nodes",
                "req.nodepool[0].specs.ram",
                "req.nodes_subnet.last_address",
                "req.kubernetes_version",
            ],
            |v| {
                *at(v, "/req/name") = json!("bad name");
                *at(v, "/req/nodepool/0/min_nodes") = json!(5);
                *at(v, "/req/nodepool/0/specs/ram") = json!(0);
                *at(v, "/req/nodes_subnet/last_address") = json!("192.168.9.9");
                *at(v, "/req/kubernetes_version") = json!("1.99.0");
            },
        ),
        raw(
            "neither specs nor req",
            "{\"provider\": \"ovh\"}",
            "invalid_input",
            &["(body)"],
        ),
    ]
}

/// Sends each case to `path` (edits apply to `seed()`) and describes every
/// answer that is not the expected one.
async fn run_table(m: &Meson, path: &str, seed: fn() -> Value, cases: &[Case]) -> Vec<String> {
    let mut failures = Vec::new();
    for c in cases {
        let req = m
            .http
            .post(format!("{}{path}", m.base))
            .bearer_auth(&m.token);
        let req = match &c.body {
            Body::Edit(f) => {
                let mut v = seed();
                f(&mut v);
                req.json(&v)
            }
            Body::Raw(bytes) => req
                .header(CONTENT_TYPE, "application/json")
                .body(bytes.clone()),
        };
        let res = req.send().await.expect("request sent");
        let status = res.status();
        let text = res.text().await.expect("body read");
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        failures.extend(mismatch(c, status, &body));
    }
    failures
}

#[tokio::test]
async fn bad_kaas_payloads_are_refused_naming_the_field_and_write_nothing() {
    let m = Meson::start().await;
    // The seed itself is fine.
    let r = m.post("/v1/quotes", &crate::harness::seed_kaas()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);

    let cases = kaas_cases();
    assert!(cases.len() >= 25, "{} cases", cases.len());
    let failures = run_table(&m, "/v1/quotes", crate::harness::seed_kaas, &cases).await;
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert_eq!(m.get("/v1/vms").await.body["vms"], json!([]));
    assert_eq!(
        m.inventory_counts(),
        (0, 0),
        "a refused request reached AtomOS"
    );
    m.stop().await;
}

/// Every integer of `v` (a JSON number with no fraction) written as the
/// float `f` makes of it.
fn floats(v: &mut Value, f: &dyn Fn(i64) -> Value) -> usize {
    match v {
        Value::Number(n) if n.is_i64() => {
            *v = f(n.as_i64().unwrap());
            1
        }
        Value::Array(items) => items.iter_mut().map(|i| floats(i, f)).sum(),
        Value::Object(map) => map.values_mut().map(|i| floats(i, f)).sum(),
        _ => 0,
    }
}

#[tokio::test]
async fn an_integer_may_be_written_as_any_json_number_without_a_fraction() {
    // One rule, documented in docs/payloads.md: JSON has one number type,
    // so `2`, `2.0` and `2e0` are the same integer in every field, while
    // `2.5` and the string `"2"` are refused (the tables above).
    let m = Meson::start().await;
    for seed in [seed_vm(), crate::harness::seed_kaas()] {
        let want = m.post("/v1/quotes", &seed).await;
        assert_eq!(want.status, StatusCode::OK, "{}", want.body);
        for form in [
            &(|i: i64| json!(i as f64)) as &dyn Fn(i64) -> Value,
            // `2e0`, `4.096e3`: the exponent form serde_json would never write.
            &|i: i64| serde_json::from_str(&format!("{}e-2", i * 100)).unwrap(),
        ] {
            let mut body = seed.clone();
            assert!(floats(&mut body, form) >= 5, "{body}");
            let text = body.to_string();
            let r = m
                .http
                .post(format!("{}/v1/quotes", m.base))
                .bearer_auth(&m.token)
                .header(CONTENT_TYPE, "application/json")
                .body(text.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{text}");
            let got: Value = r.json().await.unwrap();
            assert_eq!(got, want.body, "{text}");
        }
    }
    m.stop().await;
}
