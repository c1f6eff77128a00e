//! Platform engineers swap the policy guest by configuration, without
//! rebuilding the server; a guest that does not fit is refused at start.

use crate::helpers::fixtures::*;
use crate::helpers::*;
use std::path::{Path, PathBuf};

fn guest(dir: &str, artifact: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    warden_guest_build::build_guest(&source, artifact, Path::new(env!("CARGO_TARGET_TMPDIR")))
}

#[tokio::test]
async fn the_example_guest_swapped_in_by_configuration_changes_the_rules() {
    let db = TestDb::new(Backend::Sqlite).await;
    let path = guest("examples/guests/prefixed-names", "prefixed_names_guest");
    let key = cli_account_with_key(&db, "acme").await;
    let server =
        ServerProcess::start(&db, &[("WARDEN_POLICY_GUEST", path.to_str().unwrap())]).await;
    let api = server.api(&key);
    configure_credential(&api).await;
    let import =
        |name: &str, idem: &str| api.import_capabilities(idem, vec![valid_definition(name)]);
    let (status, body) = import("order_status", "k1").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        violation_pairs(&body),
        vec![(
            "/capabilities/0/name".to_owned(),
            "name-prefix-required".to_owned()
        )]
    );
    let (status, body) = import("acme_order_status", "k2").await;
    assert_eq!(status, 201, "{body}");
    let logs = server.logs.lock().unwrap().join("\n");
    assert!(
        logs.contains("prefixed_names_guest.wasm"),
        "the log names the guest in use"
    );
}

#[tokio::test]
async fn a_guest_of_another_world_is_refused_at_start_naming_what_is_missing() {
    let db = TestDb::new(Backend::Sqlite).await;
    let path = guest("host/tests/guests", "hostile_wrong_world");
    let out = warden_command(&db)
        .arg("serve")
        .env("WARDEN_LISTEN", "127.0.0.1:0")
        .env("WARDEN_MASTER_KEY", MASTER_KEY)
        .env("WARDEN_POLICY_GUEST", &path)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warden:policy/validator"), "{stderr}");

    let report = warden_command(&db)
        .args(["admin", "guest", "check"])
        .arg(&path)
        .output()
        .await
        .unwrap();
    assert!(!report.status.success());
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["satisfies_world"], false);
}
