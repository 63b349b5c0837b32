//! `sqlx::migrate!` embeds `migrations/` at compile time, but cargo does not
//! know that: without this, an edited or added migration would not rebuild
//! the crate, and a build could carry the old schema.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
