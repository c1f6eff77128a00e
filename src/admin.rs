//! `warden admin …`: operator commands. Each prints one JSON object on
//! standard output; failures return an error (message on stderr, exit 1).

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::cli::{
    AccountCommand, AdminCommand, DataCommand, DatabaseArgs, GuestCommand, KeyCommand,
    MasterKeyArgs, MasterKeyCommand, McpCommand, PromptIntegrationCommand, SigningKeyCommand,
    WebhookCommand,
};
use crate::crypto::{api_key, master_key};
use crate::store::{Constraint, DatabaseKind, Store, StoreError};
use crate::vault;

pub const MAX_ACCOUNT_NAME_CHARS: usize = 64;

pub async fn run(
    database: DatabaseArgs,
    master_key: MasterKeyArgs,
    command: AdminCommand,
) -> anyhow::Result<()> {
    if let AdminCommand::Guest(GuestCommand::Check { path }) = &command {
        return check_guest(path).await;
    }
    let store = Store::connect(&database.database_url)
        .await
        .context("cannot open the database")?;
    let outcome = execute(&store, &database, &master_key, command).await;
    store.close().await;
    println!("{}", outcome?);
    Ok(())
}

pub async fn execute(
    store: &Store,
    database: &DatabaseArgs,
    master_key: &MasterKeyArgs,
    command: AdminCommand,
) -> anyhow::Result<Value> {
    let environment = database.environment.as_str();
    match command {
        AdminCommand::Account(AccountCommand::Create { name }) => {
            check_account_name(&name)?;
            match store.create_account(&name).await {
                Ok(_) => {
                    tracing::info!(account = %name, "account created");
                    Ok(json!({"account": name}))
                }
                Err(StoreError::Conflict(Constraint::AccountName)) => {
                    bail!("account {name:?} already exists")
                }
                Err(err) => Err(err.into()),
            }
        }
        AdminCommand::Key(KeyCommand::Issue { account }) => {
            let id = store
                .find_account(&account)
                .await?
                .with_context(|| format!("no account named {account:?}"))?;
            let key = api_key::issue();
            store
                .insert_api_key(&id, &key.key_id, &key.hash, environment)
                .await?;
            tracing::info!(account = %account, key_id = %key.key_id, environment, "API key issued");
            Ok(json!({"account": account, "api_key": key.secret, "key_id": key.key_id}))
        }
        AdminCommand::Key(KeyCommand::Revoke { key_id }) => {
            match store.revoke_api_key(&key_id).await {
                Ok(()) => {
                    tracing::info!(key_id = %key_id, "API key revoked");
                    Ok(json!({"key_id": key_id, "status": "revoked"}))
                }
                Err(StoreError::NotFound) => bail!("no API key with id {key_id:?}"),
                Err(err) => Err(err.into()),
            }
        }
        AdminCommand::Guest(GuestCommand::Check { path }) => {
            let report =
                tokio::task::spawn_blocking(move || warden_host::check_guest(&path)).await?;
            Ok(serde_json::to_value(report)?)
        }
        AdminCommand::SigningKey(SigningKeyCommand::Rotate {
            activate_in_secs,
            grace_secs,
        }) => {
            let keyring = keyring(database, master_key)?;
            let rotation = crate::signing::keys::rotate(
                store,
                &keyring,
                std::time::Duration::from_secs(activate_in_secs),
                std::time::Duration::from_secs(grace_secs),
            )
            .await?;
            tracing::info!(kid = %rotation.kid, previous = ?rotation.previous_kid, "signing key rotated");
            Ok(serde_json::to_value(rotation)?)
        }
        AdminCommand::Webhook(command) => webhook(store, database, master_key, command).await,
        AdminCommand::PromptIntegration(command) => prompt_integration(store, command).await,
        AdminCommand::Mcp(McpCommand::Calls { account, limit }) => {
            let id = find_account(store, &account).await?;
            let calls: Vec<Value> = store
                .list_mcp_calls(&id, limit)
                .await?
                .into_iter()
                .map(|call| {
                    json!({
                        "at": crate::clock::to_rfc3339(call.created_at),
                        "id": call.id,
                        "key_id": call.key_id,
                        "capability_id": call.capability_id,
                        "revision": call.revision,
                        "status": call.status,
                        "reason": call.reason,
                        "duration_ms": call.duration_ms,
                        "attempts": call.attempts,
                    })
                })
                .collect();
            Ok(json!({"account": account, "calls": calls}))
        }
        AdminCommand::Data(command) => data_request(store, command).await,
        AdminCommand::MasterKey(MasterKeyCommand::Rotate) => {
            let keyring = keyring(database, master_key)?;
            let mut counts = vault::rotate_master_key(store, &keyring)
                .await
                .context("rotation aborted, nothing changed")?;
            // Platform access tokens: their own transaction; running the
            // rotation again finishes it if this one fails.
            let tokens = store
                .reseal_platform_tokens(|row| crate::platform::access_token::reseal(&keyring, row))
                .await
                .context("platform access tokens not re-sealed; run the rotation again")?;
            counts.resealed += tokens.resealed;
            counts.already_current += tokens.already_current;
            let id = keyring.current().id();
            tracing::info!(master_key_id = %id, resealed = counts.resealed, "stored secrets re-sealed under the current master key");
            Ok(
                json!({"master_key_id": id, "resealed": counts.resealed, "already_current": counts.already_current}),
            )
        }
    }
}

/// `warden admin webhook …`: numbers of the platform channel and its queue.
async fn webhook(
    store: &Store,
    database: &DatabaseArgs,
    master_key: &MasterKeyArgs,
    command: WebhookCommand,
) -> anyhow::Result<Value> {
    use crate::platform::access_token;
    match command {
        WebhookCommand::Register {
            account,
            phone_number_id,
            access_token_file,
        } => {
            check_phone_number_id(&phone_number_id)?;
            let id = find_account(store, &account).await?;
            let sealed = match &access_token_file {
                Some(path) => {
                    let text = read_bounded(path, access_token::MAX_TOKEN_BYTES + 2)
                        .with_context(|| format!("cannot read {}", path.display()))?;
                    let token = zeroize::Zeroizing::new(text);
                    let token = access_token::from_file_text(&token).map_err(anyhow::Error::msg)?;
                    let keyring = keyring(database, master_key)?;
                    Some(access_token::seal(&keyring, id, &phone_number_id, token))
                }
                None => None,
            };
            if !store
                .register_platform_number(&id, &phone_number_id, sealed.as_ref())
                .await?
            {
                bail!("phone number id {phone_number_id:?} is registered to another account");
            }
            let token = if sealed.is_some() {
                "sealed"
            } else {
                "server_fallback"
            };
            tracing::info!(account = %account, phone_number_id = %phone_number_id, access_token = token, "platform number registered");
            Ok(
                json!({"account": account, "phone_number_id": phone_number_id, "access_token": token}),
            )
        }
        WebhookCommand::List { account } => {
            let id = find_account(store, &account).await?;
            let numbers: Vec<Value> = store
                .list_platform_numbers(&id)
                .await?
                .into_iter()
                .map(|n| {
                    let token = if n.sealed_token().is_some() {
                        "sealed"
                    } else {
                        "server_fallback"
                    };
                    json!({
                        "phone_number_id": n.phone_number_id,
                        "access_token": token,
                        "registered_at": crate::clock::to_rfc3339(n.created_at),
                    })
                })
                .collect();
            Ok(json!({"account": account, "numbers": numbers}))
        }
        WebhookCommand::Unregister { phone_number_id } => {
            if !store.unregister_platform_number(&phone_number_id).await? {
                bail!("phone number id {phone_number_id:?} is not registered");
            }
            tracing::info!(phone_number_id = %phone_number_id, "platform number unregistered");
            Ok(json!({"phone_number_id": phone_number_id, "status": "unregistered"}))
        }
        WebhookCommand::Queue { account } => {
            let id = match &account {
                Some(name) => Some(find_account(store, name).await?),
                None => None,
            };
            let counts = store.platform_queue_counts(id.as_ref()).await?;
            let mut out = serde_json::to_value(counts)?;
            if let Some(name) = account {
                out["account"] = json!(name);
            }
            Ok(out)
        }
    }
}

/// `warden admin prompt-integration …`: each prints the public bundle.
async fn prompt_integration(
    store: &Store,
    command: PromptIntegrationCommand,
) -> anyhow::Result<Value> {
    use crate::prompt::manifest::{self, Bundle, BundleSettings, Manifest};
    use crate::store::prompt_integrations::{
        IntegrationStatus, NewPromptIntegration, PromptIntegrationRow,
    };
    let settings = |bundle: &crate::cli::BundleArgs| BundleSettings {
        public_base_url: bundle.public_base_url.clone(),
        sitekey: bundle.challenge_sitekey.clone(),
    };
    let bundle_of =
        |row: &PromptIntegrationRow, settings: &BundleSettings| -> anyhow::Result<Value> {
            let manifest: Manifest = serde_json::from_str(&row.manifest)
                .with_context(|| format!("the stored manifest of {} is unreadable", row.id))?;
            Ok(serde_json::to_value(Bundle::of(row, &manifest, settings))?)
        };
    let read_manifest = |path: &std::path::Path| {
        read_bounded(path, manifest::MAX_MANIFEST_BYTES)
            .with_context(|| format!("cannot read the manifest {}", path.display()))
    };
    let found = |row: Option<PromptIntegrationRow>, id: &str| {
        row.with_context(|| format!("no prompt integration with id {id:?}"))
    };
    let now = crate::clock::now_millis();
    match command {
        PromptIntegrationCommand::Create {
            account,
            manifest: path,
            bundle,
            sandbox,
        } => {
            let account_id = find_account(store, &account).await?;
            let text = read_manifest(&path)?;
            let sandbox = crate::sandbox::PolicySandbox::load(&sandbox)?;
            let parsed = Manifest::parse(&text, &sandbox, &account_id).await?;
            let id = manifest::new_public_id();
            let action = manifest::new_challenge_action();
            store
                .create_prompt_integration(
                    &account_id,
                    &NewPromptIntegration {
                        id: &id,
                        name: &parsed.name,
                        origin: &parsed.origin,
                        challenge_action: &action,
                        manifest: &serde_json::to_string(&parsed)?,
                    },
                    now,
                )
                .await?;
            tracing::info!(account = %account, integration = %id, origin = %parsed.origin, "prompt integration created");
            let row = found(store.get_prompt_integration(&id).await?, &id)?;
            bundle_of(&row, &settings(&bundle))
        }
        PromptIntegrationCommand::List { account, bundle } => {
            let account_id = find_account(store, &account).await?;
            let settings = settings(&bundle);
            let bundles = store
                .list_prompt_integrations(&account_id)
                .await?
                .iter()
                .map(|row| bundle_of(row, &settings))
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(json!({"account": account, "prompt_integrations": bundles}))
        }
        PromptIntegrationCommand::Show { id, bundle } => {
            let row = found(store.get_prompt_integration(&id).await?, &id)?;
            bundle_of(&row, &settings(&bundle))
        }
        PromptIntegrationCommand::Disable { id, bundle } => {
            if !store
                .set_prompt_integration_status(&id, IntegrationStatus::Disabled, now)
                .await?
            {
                bail!("no prompt integration with id {id:?}");
            }
            tracing::info!(integration = %id, "prompt integration disabled");
            let row = found(store.get_prompt_integration(&id).await?, &id)?;
            bundle_of(&row, &settings(&bundle))
        }
        PromptIntegrationCommand::Enable { id, bundle } => {
            if !store
                .set_prompt_integration_status(&id, IntegrationStatus::Active, now)
                .await?
            {
                bail!("no prompt integration with id {id:?}");
            }
            tracing::info!(integration = %id, "prompt integration enabled");
            let row = found(store.get_prompt_integration(&id).await?, &id)?;
            bundle_of(&row, &settings(&bundle))
        }
        PromptIntegrationCommand::Update {
            id,
            manifest: path,
            bundle,
            sandbox,
        } => {
            let row = found(store.get_prompt_integration(&id).await?, &id)?;
            let text = read_manifest(&path)?;
            let sandbox = crate::sandbox::PolicySandbox::load(&sandbox)?;
            let parsed = Manifest::parse(&text, &sandbox, &row.account()).await?;
            store
                .update_prompt_integration(
                    &id,
                    &parsed.name,
                    &parsed.origin,
                    &serde_json::to_string(&parsed)?,
                    now,
                )
                .await?
                .with_context(|| format!("no prompt integration with id {id:?}"))?;
            tracing::info!(integration = %id, origin = %parsed.origin, "prompt integration updated");
            let row = found(store.get_prompt_integration(&id).await?, &id)?;
            bundle_of(&row, &settings(&bundle))
        }
    }
}

/// `warden admin data …`: one end user's erasure or export.
async fn data_request(store: &Store, command: DataCommand) -> anyhow::Result<Value> {
    match command {
        DataCommand::Erase { subject } => {
            let (id, user) = data_subject(store, &subject).await?;
            let removed = store
                .erase_user(&id, &user, crate::clock::now_millis())
                .await
                .context("erasure interrupted; run it again to finish")?;
            // Pages that held the rows may still sit in SQLite's log.
            let checkpoint = store.checkpoint_wal().await?;
            // Counts only, and never the user id.
            tracing::info!(account = %subject.account, conversations = removed.conversations,
                messages = removed.messages, "an end user's data was erased");
            Ok(
                json!({"account": subject.account, "user": user, "removed": removed,
                      "wal_checkpoint": checkpoint}),
            )
        }
        DataCommand::Export { subject } => {
            let (id, user) = data_subject(store, &subject).await?;
            let export = store.export_user(&id, &user).await?;
            Ok(json!({
                "account": subject.account,
                "user": user,
                "exported_at": crate::clock::to_rfc3339(crate::clock::now_millis()),
                "conversations": export.conversations,
                "queued_platform_messages": export.queued_platform_messages,
            }))
        }
    }
}

/// The account and the user id as its conversations store it.
async fn data_subject(
    store: &Store,
    subject: &crate::cli::DataSubject,
) -> anyhow::Result<(crate::domain::account::AccountId, String)> {
    let id = find_account(store, &subject.account).await?;
    let user = match (&subject.user, &subject.platform_sender) {
        (Some(user), None) => user.clone(),
        (None, Some(sender)) => {
            let (_, salt) = store.account_identity(&id).await?;
            crate::signing::context::user_subject(&salt, sender)
        }
        _ => bail!("give --user or --platform-sender"),
    };
    if user.is_empty() || user.chars().count() > 256 {
        bail!("the user id must be 1 to 256 characters");
    }
    Ok((id, user))
}

async fn find_account(
    store: &Store,
    name: &str,
) -> anyhow::Result<crate::domain::account::AccountId> {
    store
        .find_account(name)
        .await?
        .with_context(|| format!("no account named {name:?}"))
}

/// The platform's number ids are digits; they go into the send API's path.
fn check_phone_number_id(id: &str) -> anyhow::Result<()> {
    if !crate::platform::inbound::is_phone_number_id(id) {
        bail!("a phone number id is 1 to 32 digits");
    }
    Ok(())
}

/// A small file, refused when larger than `max` bytes.
fn read_bounded(path: &std::path::Path, max: usize) -> anyhow::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(max as u64 + 1)
        .read_to_string(&mut text)?;
    if text.len() > max {
        bail!("the file is larger than {max} bytes");
    }
    Ok(text)
}

fn keyring(
    database: &DatabaseArgs,
    master_key: &MasterKeyArgs,
) -> anyhow::Result<master_key::Keyring> {
    crate::startup::keyring(master_key, &DatabaseKind::of_url(&database.database_url)?)
}

/// Prints the report whatever it says; fails (exit 1) when the guest would be refused.
async fn check_guest(path: &std::path::Path) -> anyhow::Result<()> {
    let path = path.to_path_buf();
    let report = tokio::task::spawn_blocking(move || warden_host::check_guest(&path)).await?;
    println!("{}", serde_json::to_string(&report)?);
    if !report.ok {
        bail!(
            "the guest is not deployable: {}",
            report.load_error.clone().unwrap_or_else(|| format!(
                "{} required self-test case(s) failed",
                report.failed_required
            ))
        );
    }
    Ok(())
}

fn check_account_name(name: &str) -> anyhow::Result<()> {
    let valid = (1..=MAX_ACCOUNT_NAME_CHARS).contains(&name.chars().count())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !valid {
        bail!(
            "account names are 1 to {MAX_ACCOUNT_NAME_CHARS} characters of letters, digits, '.', '_' or '-'"
        );
    }
    Ok(())
}
