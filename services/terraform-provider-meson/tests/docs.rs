//! `docs/terraform/`'s reference pages are the schemas' (rewrite them with
//! `MESON_WRITE_DOCS=1`).

use std::path::Path;

#[test]
fn reference_pages_match_the_schemas() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/terraform");
    let write = std::env::var("MESON_WRITE_DOCS").is_ok_and(|v| v == "1");
    for (name, text) in terraform_provider_meson::docs::pages() {
        let path = dir.join(&name);
        if write {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == text,
            "docs/terraform/{name} is not the schema's: run \
             MESON_WRITE_DOCS=1 cargo test -p terraform-provider-meson --test docs"
        );
    }
}

#[test]
fn the_readme_shows_the_example_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("docs/terraform-quickstart.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/terraform/main.tf")).unwrap();
    assert!(
        readme.contains(&format!("```hcl\n{example}```\n")),
        "docs/terraform-quickstart.md shows examples/terraform/main.tf as it is"
    );
}
