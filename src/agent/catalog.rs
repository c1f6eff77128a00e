//! The account's active capabilities as a turn needs them, parsed once per
//! capability revision.
//!
//! A revision never changes (every edit and every lifecycle change makes a
//! new one), so what is derived from it — the parsed definition, the input
//! schema as the text the guest is given — is kept per `(id, revision)`. Each
//! turn still asks the database which revisions are current (one light
//! query: ids, revisions, states, no definitions), so a change made by
//! another replica is seen on the next turn; the definitions are read only
//! when a revision is not known yet.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::domain::account::AccountId;
use serde_json::Value;

use crate::domain::capability::{CapabilityDefinition, LifecycleStatus};
use crate::store::{Store, StoreError};

/// One active capability at its current revision.
pub struct Cataloged {
    pub id: String,
    pub revision: i64,
    pub definition: Arc<CapabilityDefinition>,
    /// `definition.input_schema` serialized, as the guest receives it.
    pub input_schema_text: Arc<str>,
    /// The parts a planner's offer holds, shared rather than copied per
    /// turn (with 1,000 capabilities, copying them was a third of a turn's
    /// CPU). They duplicate the definition's, once per revision.
    pub input_schema: Arc<Value>,
    pub output_schema: Arc<Value>,
    pub examples: Arc<[Value]>,
}

/// Revisions kept at most (all accounts); cleared whole when full.
const MAX_REVISIONS: usize = 20_000;

/// Parsed revisions by (capability id, revision).
type ByRevision = HashMap<(String, i64), Arc<Cataloged>>;

/// Shared by the engine's clones.
#[derive(Clone, Default)]
pub struct Catalog {
    by_revision: Arc<Mutex<ByRevision>>,
}

impl Catalog {
    /// The account's active capabilities, in the store's list order.
    pub async fn active(
        &self,
        store: &Store,
        account: &AccountId,
    ) -> Result<Vec<Arc<Cataloged>>, StoreError> {
        let heads = store.capability_heads(account).await?;
        if let Ok(known) = self.by_revision.lock() {
            let found: Option<Vec<Arc<Cataloged>>> = heads
                .iter()
                .filter(|h| h.lifecycle_status == LifecycleStatus::Active)
                .map(|h| known.get(&(h.id.clone(), h.revision)).cloned())
                .collect();
            if let Some(found) = found {
                return Ok(found);
            }
        }
        let mut out = Vec::new();
        for row in store.list_capabilities(account).await? {
            if row.lifecycle_status != LifecycleStatus::Active {
                continue;
            }
            let definition: CapabilityDefinition = serde_json::from_str(&row.definition)
                .map_err(|e| StoreError::Corrupt(format!("capability {}: {e}", row.id)))?;
            out.push(Arc::new(Cataloged {
                input_schema_text: definition.input_schema.to_string().into(),
                input_schema: Arc::new(definition.input_schema.clone()),
                output_schema: Arc::new(definition.output_schema.clone()),
                examples: Arc::from(definition.examples.clone()),
                id: row.id,
                revision: row.revision,
                definition: Arc::new(definition),
            }));
        }
        if let Ok(mut known) = self.by_revision.lock() {
            if known.len() + out.len() > MAX_REVISIONS {
                known.clear();
            }
            for c in &out {
                known.insert((c.id.clone(), c.revision), c.clone());
            }
        }
        Ok(out)
    }
}
