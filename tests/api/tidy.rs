//! Architecture invariants kept by a test (rust-analyzer's `tidy` style): it
//! reads the source tree as text and fails, naming the file and line, when a
//! boundary of ARCHITECTURE.md is crossed.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Lines of `src/` files not under `allowed` that contain `needle` in code
/// (comment lines are skipped).
fn offenders(needle: &str, allowed: &[&str]) -> Vec<String> {
    let root = root();
    let mut hits = Vec::new();
    for file in rust_files(&root.join("src")) {
        let relative = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if allowed.iter().any(|a| relative.starts_with(a)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if !code.starts_with("//") && code.contains(needle) {
                hits.push(format!("{relative}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    hits
}

#[test]
fn the_database_driver_stays_in_the_store() {
    let hits = offenders("sqlx", &["src/store/"]);
    assert!(
        hits.is_empty(),
        "sqlx outside src/store/ (classify in the store instead):\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_sandbox_crate_is_opened_only_by_its_door() {
    // admin.rs runs `warden admin guest check`, which loads a guest without a server.
    let hits = offenders("warden_host", &["src/sandbox.rs", "src/admin.rs"]);
    assert!(
        hits.is_empty(),
        "warden_host outside src/sandbox.rs:\n{}",
        hits.join("\n")
    );
}

#[test]
fn outbound_http_stays_in_the_executor_and_the_planner() {
    // signing/ only names reqwest's header types for the signature it adds.
    let allowed = [
        "src/executor/",
        "src/agent/planner/openai.rs",
        "src/signing/",
        "src/platform/send_api.rs",
        "src/prompt/challenge.rs",
    ];
    let hits = offenders("reqwest", &allowed);
    assert!(
        hits.is_empty(),
        "reqwest outside the outbound clients:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_server_links_only_the_address_table_of_the_rule_library() {
    // The rule library is linked natively for its address table alone (one
    // table for the guest and the executor); every other rule is the guest's.
    let hits: Vec<String> = offenders("warden_policy_rules", &[])
        .into_iter()
        .filter(|line| !line.contains("warden_policy_rules::address"))
        .collect();
    assert!(
        hits.is_empty(),
        "rules judged natively instead of in the guest:\n{}",
        hits.join("\n")
    );
}

#[test]
fn no_regex_engine_runs_tenant_patterns_in_the_server() {
    let hits = offenders("regress", &[]);
    assert!(
        hits.is_empty(),
        "tenant patterns are judged in the guest:\n{}",
        hits.join("\n")
    );
}

#[test]
fn only_the_store_vouches_for_an_account() {
    // An `AccountId` is proof that the account was resolved (from a key or
    // a row): the store is its only maker.
    let hits = offenders(
        "AccountId::from_stored",
        &["src/store/", "src/domain/account.rs"],
    );
    assert!(
        hits.is_empty(),
        "an AccountId made outside the store:\n{}",
        hits.join("\n")
    );
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let root = root();
    let mut hits = Vec::new();
    for dir in ["src", "host/src", "channel/src"] {
        for file in rust_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (n, line) in lines.iter().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//")
                    || !(code.contains("unsafe {")
                        || code.starts_with("unsafe fn")
                        || code.starts_with("unsafe impl"))
                {
                    continue;
                }
                // The SAFETY comment stands in the comment block right above.
                let justified = lines[..n]
                    .iter()
                    .rev()
                    .take_while(|l| {
                        l.trim_start().starts_with("//") || l.trim().is_empty() || !l.contains(';')
                    })
                    .take(12)
                    .any(|l| l.contains("SAFETY:"));
                if !justified {
                    hits.push(format!(
                        "{}:{}: {}",
                        file.strip_prefix(&root).unwrap().display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "unsafe without a SAFETY: comment:\n{}",
        hits.join("\n")
    );
}

#[test]
fn architecture_md_names_every_source_module() {
    let root = root();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    for file in rust_files(&root.join("src")) {
        let relative = file.strip_prefix(root.join("src")).unwrap();
        // A module is named by its file (`startup.rs`) or, inside a folder, by its stem (`engine`).
        let stem = relative.file_stem().unwrap().to_string_lossy().into_owned();
        let named = stem == "mod"
            || stem == "lib"
            || map.contains(&format!("`{}`", relative.display()))
            || map.contains(&format!("`{stem}`"))
            || map.contains(&format!("`{stem}.rs`"))
            || map.contains(&format!("{stem}.rs"));
        if !named {
            missing.push(relative.display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "modules ARCHITECTURE.md does not name: {missing:?}"
    );
}
