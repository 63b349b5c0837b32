//! The reference pages under `docs/terraform/`, rendered from the schemas
//! (so the pages and what the provider accepts cannot drift apart; a test
//! compares them, `MESON_WRITE_DOCS=1` rewrites them).

use crate::resources::Kind;
use crate::resources::data::Data;
use crate::schema::{Attr, Block, Mode, Nesting};
use crate::value::Ty;

fn ty(t: &Ty) -> String {
    match t {
        Ty::Str => "string".into(),
        Ty::Num => "number".into(),
        Ty::Bool => "bool".into(),
        Ty::List(t) => format!("list of {}", ty(t)),
        Ty::Map(t) => format!("map of {}", ty(t)),
        Ty::Obj(attrs) => format!(
            "object ({})",
            attrs
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn row(a: &Attr) -> String {
    let mode = match a.mode {
        Mode::Required => "required",
        Mode::Optional => "optional",
        Mode::Computed => "computed",
        // Its default is planned when unset: optional, as the reader sees it.
        Mode::OptionalComputed if a.default.is_some() => "optional",
        Mode::OptionalComputed => "optional, computed",
    };
    let mut notes = Vec::new();
    if a.force_new {
        notes.push("replaces");
    }
    if a.sensitive {
        notes.push("sensitive");
    }
    format!(
        "| `{}` | {} | {}{} | {} |\n",
        a.name,
        ty(&a.ty),
        mode,
        if notes.is_empty() {
            String::new()
        } else {
            format!(", {}", notes.join(", "))
        },
        a.description.replace('|', "\\|")
    )
}

fn table(b: &Block, out: &mut String) {
    out.push_str("| Attribute | Type | | Description |\n| --- | --- | --- | --- |\n");
    for a in &b.attrs {
        out.push_str(&row(a));
    }
    for n in &b.blocks {
        out.push_str(&format!(
            "\n### Block `{}` ({})\n\n{}\n\n",
            n.name,
            match (n.nesting, n.min) {
                (Nesting::Single, 1) => "one, required",
                (Nesting::Single, _) => "at most one",
                (Nesting::List, _) => "any number, in order",
            },
            n.block.description
        ));
        table(&n.block, out);
    }
}

fn page(title: &str, what: &str, b: &Block, import: Option<&str>) -> String {
    let mut out = format!(
        "<!-- Rendered from the provider's schema (services/terraform-provider-meson/src/docs.rs): \
         MESON_WRITE_DOCS=1 cargo test -p terraform-provider-meson --test docs -->\n\n\
         # {title} ({what})\n\n{}\n\n\
         \"replaces\": a change to it destroys and re-creates the {what}.\n\n## Attributes\n\n",
        b.description
    );
    table(b, &mut out);
    if let Some(i) = import {
        out.push_str(&format!("\n## Import\n\n```sh\n{i}\n```\n"));
    }
    out
}

/// Every page: its file name under `docs/terraform/` and its text.
pub fn pages() -> Vec<(String, String)> {
    let mut pages = Vec::new();
    for k in Kind::ALL {
        let import = match k {
            Kind::Pool => format!("terraform import {}.NAME CLUSTER_ID/POOL_ID", k.name()),
            Kind::VolumeAttachment => {
                format!("terraform import {}.NAME VOLUME_ID/VM_ID", k.name())
            }
            Kind::PortForward => {
                format!("terraform import {}.NAME NETWORK_ID/FORWARD_ID", k.name())
            }
            _ => format!("terraform import {}.NAME ID", k.name()),
        };
        pages.push((
            format!("{}.md", k.name()),
            page(k.name(), "resource", &k.block(), Some(&import)),
        ));
    }
    for d in Data::ALL {
        pages.push((
            format!("data-{}.md", d.name()),
            page(d.name(), "data source", &d.block(), None),
        ));
    }
    pages
}
