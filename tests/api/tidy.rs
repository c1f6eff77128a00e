//! Architecture invariants kept by a test (rust-analyzer's `tidy` style): it
//! reads the source tree as text and fails, naming the file and line, when a
//! boundary of ARCHITECTURE.md is crossed.

use std::collections::{BTreeMap, BTreeSet};
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
fn the_database_drivers_stay_in_the_store() {
    for driver in ["sqlx", "rusqlite"] {
        let hits = offenders(driver, &["src/store/"]);
        assert!(
            hits.is_empty(),
            "{driver} outside src/store/ (classify in the store instead):\n{}",
            hits.join("\n")
        );
    }
    // The second drivers serve only the hot statements: SQLite's on each
    // runtime thread, PostgreSQL's on the lane.
    for (driver, home) in [
        ("rusqlite", "src/store/direct.rs"),
        ("tokio_postgres", "src/store/pg_lane.rs"),
    ] {
        let hits = offenders(driver, &[home]);
        assert!(
            hits.is_empty(),
            "{driver} outside {home}:\n{}",
            hits.join("\n")
        );
    }
}

#[test]
fn the_sandbox_crate_is_opened_only_by_its_door() {
    // admin.rs runs `warden admin guest check`, which loads a guest without a server.
    let hits = offenders("warden_host", &["src/sandbox/", "src/admin.rs"]);
    assert!(
        hits.is_empty(),
        "warden_host outside src/sandbox/:\n{}",
        hits.join("\n")
    );
}

#[test]
fn outbound_http_stays_in_the_executor_and_the_planner() {
    // signing/ only names reqwest's header types for the signature it adds.
    let allowed = [
        "src/executor/",
        "src/agent/planner/openai/",
        "src/signing/",
        "src/platform/send_api.rs",
        "src/prompt/challenge.rs",
        // The trace exporter, to the operator's own collector.
        "src/telemetry/otlp.rs",
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
fn no_statement_deletes_an_account_or_a_capability() {
    // PostgreSQL's records carry no foreign key to either (migration
    // 0023): a path that deletes one must delete those rows itself, and
    // this test is where it is noticed.
    // No other table's name starts with either, so the bare prefix is the
    // needle: it also finds a statement whose line ends at the table.
    let mut hits = Vec::new();
    for table in ["accounts", "capabilities"] {
        let needle = format!("DELETE FROM {table}");
        hits.extend(offenders(&needle, &[]));
        hits.extend(offenders(&needle.to_lowercase(), &[]));
    }
    assert!(
        hits.is_empty(),
        "an account or a capability deleted: delete its records too (migration 0023), then allow it here:\n{}",
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

mod imports;

/// ARCHITECTURE.md's floors: each top-level module of `src/` (`agent` for
/// everything under `src/agent/`) and the number of its floor, read from
/// the numbered list under `## Floors` (the backquoted names before the dash).
fn floors() -> BTreeMap<String, usize> {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let section = map
        .split("\n## ")
        .find(|s| s.starts_with("Floors"))
        .expect("ARCHITECTURE.md has a `## Floors` section");
    let mut floors = BTreeMap::new();
    for line in section.lines() {
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(floor) = number.parse::<usize>() else {
            continue;
        };
        let names = rest.split(" — ").next().unwrap();
        for name in names.split('`').skip(1).step_by(2) {
            let name = name.trim_end_matches('/').trim_end_matches(".rs");
            let earlier = floors.insert(name.to_owned(), floor);
            assert!(earlier.is_none(), "`{name}` stands on two floors");
        }
    }
    floors
}

fn top_module(file: &str) -> &str {
    file.split('/').next().unwrap().trim_end_matches(".rs")
}

#[test]
fn no_module_imports_from_a_floor_above_its_own() {
    let floors = floors();
    let src = root().join("src");
    let unplaced: Vec<String> = rust_files(&src)
        .iter()
        .map(|f| f.strip_prefix(&src).unwrap().to_string_lossy().into_owned())
        .filter(|f| f != "lib.rs" && !floors.contains_key(top_module(f)))
        .collect();
    assert!(
        unplaced.is_empty(),
        "src/ files whose module ARCHITECTURE.md puts on no floor: {unplaced:?}"
    );
    let hits: Vec<String> = imports::imports(&src)
        .into_iter()
        .filter_map(|import| {
            let (from, to) = (top_module(&import.from), top_module(&import.to));
            let (low, high) = (floors[from], floors[to]);
            (high > low).then(|| {
                format!(
                    "src/{}:{}: `{}` ({from}, floor {low}, imports {to}, floor {high})",
                    import.from, import.line, import.path
                )
            })
        })
        .collect();
    assert!(
        hits.is_empty(),
        "imports from a floor above (ARCHITECTURE.md, Floors):\n{}",
        hits.join("\n")
    );
}

#[test]
fn no_import_circle_between_files_of_src() {
    let imports = imports::imports(&root().join("src"));
    let mut circles = Vec::new();
    for files in strongly_connected(&imports) {
        let edges: Vec<String> = imports
            .iter()
            .filter(|i| files.contains(&i.from) && files.contains(&i.to))
            .map(|i| format!("  src/{}:{}: `{}` -> src/{}", i.from, i.line, i.path, i.to))
            .collect();
        circles.push(format!("{files:?}\n{}", edges.join("\n")));
    }
    assert!(
        circles.is_empty(),
        "import circles between files of src/ (move the shared piece to one side):\n{}",
        circles.join("\n")
    );
}

/// The groups of two or more files that import each other, directly or
/// through others (Tarjan's strongly connected components).
fn strongly_connected(imports: &[imports::Import]) -> Vec<BTreeSet<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for import in imports {
        next.entry(&import.from).or_default().push(&import.to);
        next.entry(&import.to).or_default();
    }
    struct Walk<'a> {
        next: &'a BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, file: &'a str) {
        let n = walk.index.len();
        walk.index.insert(file, (n, n));
        walk.stack.push(file);
        for &to in &walk.next[file] {
            let low = match walk.index.get(to) {
                None => {
                    visit(walk, to);
                    walk.index[to].1
                }
                Some(&(index, _)) if walk.stack.contains(&to) => index,
                Some(_) => continue,
            };
            let entry = walk.index.get_mut(file).unwrap();
            entry.1 = entry.1.min(low);
        }
        let (index, low) = walk.index[file];
        if index == low {
            let at = walk.stack.iter().rposition(|f| *f == file).unwrap();
            let group: BTreeSet<String> = walk.stack.drain(at..).map(str::to_owned).collect();
            if group.len() > 1 {
                walk.found.push(group);
            }
        }
    }
    let mut walk = Walk {
        next: &next,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for &file in next.keys() {
        if !walk.index.contains_key(file) {
            visit(&mut walk, file);
        }
    }
    walk.found
}
