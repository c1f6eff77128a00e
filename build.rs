//! `sqlx::migrate!` reads `migrations/` when the crate compiles, but on a
//! stable compiler nothing tells cargo to compile it again when only a
//! migration was added or edited: a build would then serve the old
//! schema. This makes any change under `migrations/` rebuild the crate.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
