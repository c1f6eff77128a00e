//! The account's active capabilities as a turn needs them, parsed once per
//! capability revision.
//!
//! A revision never changes (every edit and every lifecycle change makes a
//! new one), so what is derived from it — the parsed definition, the
//! planner's offer, the input schema as the text the guest is given — is
//! kept per `(id, revision)`. Each turn asks the database one value, the
//! account's capability version (moved by triggers on every change to its
//! capabilities, from any replica), and reuses the account's last active set
//! while it has not moved; when it has, the heads (ids, revisions, states)
//! are listed and only unknown revisions' definitions read.
//!
//! The same version moves with every change to the account's credentials
//! (migration 0021), so the active set carries the credential rows its
//! capabilities name, still sealed: a call opens the row it is given
//! instead of reading it again (one round trip fewer per PostgreSQL turn).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::agent::planner::CapabilityOffer;
use crate::domain::account::AccountId;
use crate::domain::capability::{CapabilityDefinition, LifecycleStatus};
use crate::executor::CapabilityAtRevision;
use crate::store::capabilities::CapabilityHead;
use crate::store::credentials::{CredentialRow, KnownCredential};
use crate::store::{Store, StoreError};

/// One active capability at its current revision, as the executor calls it
/// and a planner sees it, built once per revision: a turn shares it and
/// copies nothing of it.
pub struct Cataloged {
    pub at: CapabilityAtRevision,
    pub offer: CapabilityOffer,
    /// `definition.input_schema` serialized, as the guest receives it.
    pub input_schema_text: Arc<str>,
}

impl Cataloged {
    fn new(id: String, revision: i64, definition: CapabilityDefinition) -> Cataloged {
        let offer = CapabilityOffer {
            name: definition.name.clone(),
            description: definition.description.clone(),
            when_to_use: definition.when_to_use.clone(),
            examples: Arc::from(definition.examples.clone()),
            input_schema: Arc::new(definition.input_schema.clone()),
            output_schema: Arc::new(definition.output_schema.clone()),
            preparation: definition.is_host_interaction(),
            fingerprint: Default::default(),
        };
        Cataloged {
            input_schema_text: definition.input_schema.to_string().into(),
            offer,
            at: CapabilityAtRevision {
                id,
                revision,
                definition: Arc::new(definition),
            },
        }
    }
}

/// Revisions kept at most (all accounts); cleared whole when full.
const MAX_REVISIONS: usize = 20_000;
/// Accounts whose last active set is kept; cleared whole when full.
const MAX_ACCOUNTS: usize = 10_000;

/// Parsed revisions by (capability id, revision).
type ByRevision = HashMap<(String, i64), Arc<Cataloged>>;

/// The account's active capabilities, in the store's list order, and the
/// credential rows they name (sealed, as stored; revoked ones too), as of
/// one capability version.
#[derive(Clone)]
pub struct Active {
    pub capabilities: Arc<[Arc<Cataloged>]>,
    credentials: Arc<HashMap<String, CredentialRow>>,
}

impl Active {
    /// The credential `capability`'s definition names, as read with this
    /// set: what the executor opens instead of reading it.
    pub fn credential_of<'a>(
        &'a self,
        capability: &'a CapabilityAtRevision,
    ) -> KnownCredential<'a> {
        let credential_ref = capability.definition.auth.credential_ref.as_str();
        KnownCredential {
            credential_ref,
            row: self.credentials.get(credential_ref),
        }
    }
}

/// An account's active set as last read, and the account's capability
/// version (`TurnBasis::capability_version`) read before it.
struct ActiveSet {
    version: i64,
    active: Active,
}

/// Shared by the engine's clones.
#[derive(Clone, Default)]
pub struct Catalog {
    by_revision: Arc<Mutex<ByRevision>>,
    by_account: Arc<Mutex<HashMap<AccountId, ActiveSet>>>,
}

impl Catalog {
    /// The account's active capabilities and their credentials.
    /// `version` is the account's capability version, read before this call
    /// (`Store::turn_basis`): the set read here is at least that new, so it
    /// is never kept under a version newer than itself.
    pub async fn active(
        &self,
        store: &Store,
        account: &AccountId,
        version: i64,
    ) -> Result<Active, StoreError> {
        // Unchanged since the account's last turn: one value read, nothing
        // listed (any replica's change moves the version).
        if let Ok(sets) = self.by_account.lock()
            && let Some(set) = sets.get(account)
            && set.version == version
        {
            return Ok(set.active.clone());
        }
        let heads = store.capability_heads(account).await?;
        let capabilities = self.read(store, account, &heads).await?;
        let named: std::collections::HashSet<&str> = capabilities
            .iter()
            .map(|c| c.at.definition.auth.credential_ref.as_str())
            .collect();
        let credentials = store
            .account_credentials(account)
            .await?
            .into_iter()
            .filter(|row| named.contains(row.credential_ref.as_str()))
            .map(|row| (row.credential_ref.clone(), row))
            .collect();
        let active = Active {
            capabilities,
            credentials: Arc::new(credentials),
        };
        if let Ok(mut sets) = self.by_account.lock() {
            if sets.len() >= MAX_ACCOUNTS && !sets.contains_key(account) {
                sets.clear();
            }
            sets.insert(
                *account,
                ActiveSet {
                    version,
                    active: active.clone(),
                },
            );
        }
        Ok(active)
    }

    /// The active revisions of `heads`, parsed ones reused, the rest read.
    async fn read(
        &self,
        store: &Store,
        account: &AccountId,
        heads: &[CapabilityHead],
    ) -> Result<Arc<[Arc<Cataloged>]>, StoreError> {
        if let Ok(known) = self.by_revision.lock() {
            let found: Option<Vec<Arc<Cataloged>>> = heads
                .iter()
                .filter(|h| h.lifecycle_status == LifecycleStatus::Active)
                .map(|h| known.get(&(h.id.clone(), h.revision)).cloned())
                .collect();
            if let Some(found) = found {
                return Ok(found.into());
            }
        }
        let mut out = Vec::new();
        for row in store.list_capabilities(account).await? {
            if row.lifecycle_status != LifecycleStatus::Active {
                continue;
            }
            let definition: CapabilityDefinition = serde_json::from_str(&row.definition)
                .map_err(|e| StoreError::Corrupt(format!("capability {}: {e}", row.id)))?;
            out.push(Arc::new(Cataloged::new(row.id, row.revision, definition)));
        }
        if let Ok(mut known) = self.by_revision.lock() {
            if known.len() + out.len() > MAX_REVISIONS {
                known.clear();
            }
            for c in &out {
                known.insert((c.at.id.clone(), c.at.revision), c.clone());
            }
        }
        Ok(out.into())
    }
}
