//! The compiled-guest cache is native code the process runs: nothing is
//! taken from it unverified, and nothing in it is written through a link
//! or into a directory others can write (docs/sandbox.md, section 5).

mod common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use warden_host::{
    CacheWarning, DefinitionOptions, GuestSource, Sandbox, SandboxConfig, SchemaRef,
};

const INPUT: &str = r#"{"type":"object","additionalProperties":false,"required":["q"],
  "properties":{"q":{"type":"string","maxLength":8}}}"#;

/// A fresh directory of this test with `mode`.
fn dir(name: &str, mode: u32) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("guest-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

fn cached_in(dir: &Path) -> SandboxConfig {
    SandboxConfig {
        cache_dir: Some(dir.to_path_buf()),
        ..SandboxConfig::default()
    }
}

/// The entries (`.cwasm` files) in `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    found.sort();
    found
}

fn works(sandbox: &Sandbox) {
    let schema = SchemaRef {
        key: "k",
        text: INPUT,
    };
    assert_eq!(
        sandbox
            .validate_arguments("acct", schema, r#"{"q":"abc"}"#)
            .unwrap(),
        Ok(())
    );
    let refused = sandbox
        .validate_arguments("acct", schema, r#"{"q":1}"#)
        .unwrap();
    assert!(refused.is_err(), "{refused:?}");
}

fn entry_refused(sandbox: &Sandbox, why: &str) {
    let warnings = &sandbox.info().cache_warnings;
    assert!(
        warnings.iter().any(
            |w| matches!(w, CacheWarning::EntryRefused { reason, .. } if reason.contains(why))
        ),
        "expected an entry refused because {why:?}: {warnings:?}"
    );
}

#[test]
fn a_tampered_entry_is_not_loaded_and_is_replaced() {
    let dir = dir("tampered", 0o700);
    let first = Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap();
    assert!(!first.info().from_cache);
    assert!(
        first.info().cache_warnings.is_empty(),
        "{:?}",
        first.info().cache_warnings
    );
    drop(first);
    let [entry] = entries(&dir).try_into().unwrap();

    // One flipped byte in the middle of the compiled code.
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&entry, &bytes).unwrap();

    let second = Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap();
    assert!(!second.info().from_cache, "a tampered entry was loaded");
    entry_refused(&second, "SHA-256 does not match");
    works(&second);
    drop(second);

    // The entry was rewritten: the next start uses it again.
    let third = Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap();
    assert!(third.info().from_cache);
    assert!(third.info().cache_warnings.is_empty());
    works(&third);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_entry_of_another_guest_is_not_used() {
    let dir = dir("foreign", 0o700);
    let custom = GuestSource::Path(common::build_guest(
        "../examples/guests/prefixed-names",
        "prefixed_names_guest",
    ));
    drop(Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap());
    let [default_entry] = entries(&dir).try_into().unwrap();
    drop(Sandbox::load_with(custom.clone(), cached_in(&dir)).unwrap());
    let custom_entry = entries(&dir)
        .into_iter()
        .find(|e| *e != default_entry)
        .expect("the custom guest has its own entry");

    // The default guest's compilation under the custom guest's name.
    std::fs::copy(&default_entry, &custom_entry).unwrap();

    let loaded = Sandbox::load_with(custom, cached_in(&dir)).unwrap();
    assert!(
        !loaded.info().from_cache,
        "another guest's compilation was loaded"
    );
    entry_refused(&loaded, "another guest");
    // It is the custom guest that runs: its house rule holds.
    let v = loaded
        .check_definition(
            "acct",
            &common::order_definition("order_status"),
            DefinitionOptions::default(),
        )
        .unwrap()
        .unwrap_err();
    assert_eq!(v[0].rule, "name-prefix-required");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_directory_others_can_write_is_not_used() {
    for (name, mode) in [("world", 0o777), ("group", 0o770)] {
        let dir = dir(name, mode);
        for _ in 0..2 {
            let loaded = Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap();
            assert!(!loaded.info().from_cache, "{name}-writable cache was read");
            assert!(
                matches!(
                    loaded.info().cache_warnings.as_slice(),
                    [CacheWarning::DirectoryRefused { reason, .. }] if reason.contains("writable by group or others")
                ),
                "{:?}",
                loaded.info().cache_warnings
            );
            works(&loaded);
        }
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "{name}-writable cache was written"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_missing_directory_is_created_private() {
    let parent = dir("created", 0o700);
    let dir = parent.join("a/b");
    let loaded = Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap();
    assert!(
        loaded.info().cache_warnings.is_empty(),
        "{:?}",
        loaded.info().cache_warnings
    );
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let [entry] = entries(&dir).try_into().unwrap();
    let mode = std::fs::metadata(&entry).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let _ = std::fs::remove_dir_all(&parent);
}

#[test]
fn a_link_planted_at_the_old_temporary_name_is_not_followed() {
    let dir = dir("tmplink", 0o700);
    drop(Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap());
    let [entry] = entries(&dir).try_into().unwrap();
    std::fs::remove_file(&entry).unwrap();

    // Before: the entry was written to `<entry>.tmp<pid>`, following links.
    let victim = dir.with_extension("victim");
    std::fs::write(&victim, b"not yours").unwrap();
    let planted = entry.with_extension(format!("tmp{}", std::process::id()));
    symlink(&victim, &planted).unwrap();

    let loaded = Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap();
    assert!(!loaded.info().from_cache);
    works(&loaded);
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"not yours",
        "the link was followed"
    );
    assert!(
        std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // The entry was written all the same, as a file of its own.
    assert!(
        std::fs::symlink_metadata(&entry)
            .unwrap()
            .file_type()
            .is_file()
    );
    drop(loaded);
    assert!(
        Sandbox::load_with(GuestSource::Default, cached_in(&dir))
            .unwrap()
            .info()
            .from_cache
    );
    let _ = std::fs::remove_file(&victim);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_link_at_the_entry_name_is_not_followed() {
    let dir = dir("entrylink", 0o700);
    drop(Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap());
    let [entry] = entries(&dir).try_into().unwrap();

    // A valid compilation, but in a place anyone could have written.
    let elsewhere = dir.with_extension("elsewhere");
    std::fs::rename(&entry, &elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o666)).unwrap();
    let planted = std::fs::read(&elsewhere).unwrap();
    symlink(&elsewhere, &entry).unwrap();

    let loaded = Sandbox::load_with(GuestSource::Default, cached_in(&dir)).unwrap();
    assert!(
        !loaded.info().from_cache,
        "the entry was read through a link"
    );
    entry_refused(&loaded, "symbolic link");
    works(&loaded);
    // The link was replaced by a file of its own; its target is untouched.
    assert!(
        std::fs::symlink_metadata(&entry)
            .unwrap()
            .file_type()
            .is_file()
    );
    assert_eq!(std::fs::read(&elsewhere).unwrap(), planted);
    let _ = std::fs::remove_file(&elsewhere);
    let _ = std::fs::remove_dir_all(&dir);
}
