//! Capabilities and their revision history. Publishing is one transaction
//! (every capability of an import, its first revision and the idempotency
//! record, or nothing); revisions and state transitions are compare-and-set
//! on the current revision, so two writers with one `If-Match` cannot both win.

use super::accounts::{KeyAnd, KeyRefusal, KeyRow};
use super::credentials::{CredentialRow, KnownCredential};
use super::direct::{ColumnsFrom, Param, ReadRow, from_read_row, required, word};
use super::idempotency::{Completion, complete_in_tx};
use super::{Constraint, Store, StoreError, StoreResult, on_pool};
use crate::clock::now_millis;
use crate::domain::account::AccountId;
use crate::domain::capability::{CapabilityId, LifecycleStatus, RevisionChange};

/// A capability about to be published (its definition already validated).
pub struct NewCapability {
    pub id: CapabilityId,
    pub name: String,
    pub definition: String,
    /// The definition's `auth.credential_ref`, kept in a column of its own
    /// for [`Store::authenticate_for_call`].
    pub credential_ref: Option<String>,
}

/// A capability's new definition (already validated), for
/// [`Store::revise_capability`].
pub struct RevisedDefinition<'a> {
    pub domain: &'a str,
    pub name: &'a str,
    pub definition: &'a str,
    /// The definition's `auth.credential_ref` (see [`NewCapability`]).
    pub credential_ref: Option<&'a str>,
}

#[derive(Debug, Clone)]
pub struct CapabilityRow {
    pub id: String,
    pub name: String,
    pub domain: String,
    pub lifecycle_status: LifecycleStatus,
    pub revision: i64,
    pub definition: String,
    pub created_at: i64,
    pub updated_at: i64,
}

from_read_row!(CapabilityRow);

impl CapabilityRow {
    /// The row of [`COLUMNS`], in their order: its one decoding, for both
    /// drivers.
    fn read(row: &dyn ReadRow) -> StoreResult<Self> {
        Ok(CapabilityRow {
            id: required(row.text(0)?, 0)?,
            name: required(row.text(1)?, 1)?,
            domain: required(row.text(2)?, 2)?,
            lifecycle_status: word(row, 3, LifecycleStatus::parse)?,
            revision: required(row.int(4)?, 4)?,
            definition: required(row.text(5)?, 5)?,
            created_at: required(row.int(6)?, 6)?,
            updated_at: required(row.int(7)?, 7)?,
        })
    }
}

/// Which revision of a capability is current, and its state: what a turn
/// checks before using the definitions it already parsed.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CapabilityHead {
    pub id: String,
    pub lifecycle_status: LifecycleStatus,
    pub revision: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RevisionRow {
    pub revision: i64,
    pub change: RevisionChange,
    pub lifecycle_status: LifecycleStatus,
    /// The definition as it stood at this revision (JSON text).
    pub definition: String,
    pub created_at: i64,
}

/// Why a revision-guarded write did not happen.
#[derive(Debug, PartialEq, Eq)]
pub enum GuardedWriteError {
    NotFound,
    StaleRevision { current: i64 },
    AlreadyInState,
    NameTaken,
}

/// The columns [`CapabilityRow::read`] decodes, in its order.
macro_rules! columns {
    () => {
        "id, name, domain, lifecycle_status, revision, definition, created_at, updated_at"
    };
}
const COLUMNS: &str = columns!();

const SELECT_ONE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM capabilities WHERE account_id = $1 AND id = $2"
);

/// A capability as a call needs it: its row and the credential its
/// definition names, read together ([`Store::authenticate_for_call`]).
#[derive(Debug)]
pub struct CapabilityForCall {
    pub capability: CapabilityRow,
    pub credential: CredentialRead,
}

/// The credential read with a capability.
#[derive(Debug)]
pub enum CredentialRead {
    /// The capability's row does not say which credential its definition
    /// names (an older build wrote it): the caller reads it on its own.
    NotRead,
    /// The account's credential of this reference as stored; `None` when
    /// there is none.
    Read {
        credential_ref: String,
        row: Option<CredentialRow>,
    },
}

impl CredentialRead {
    /// The credential as the executor takes it, when it was read.
    pub fn known(&self) -> Option<KnownCredential<'_>> {
        match self {
            CredentialRead::NotRead => None,
            CredentialRead::Read {
                credential_ref,
                row,
            } => Some(KnownCredential {
                credential_ref,
                row: row.as_ref(),
            }),
        }
    }
}

/// A key's row, the capability it asks for (of the key's account) and that
/// capability's credential, in one statement: a contract test needs all
/// three before anything else, and on PostgreSQL each statement is a round
/// trip. Both joins are by primary key.
struct KeyAndCapabilityRow;

impl KeyAndCapabilityRow {
    const SELECT: &str = "SELECT k.account_id, k.environment, k.revoked_at, \
         c.id, c.name, c.domain, c.lifecycle_status, c.revision, c.definition, c.created_at, c.updated_at, \
         c.credential_ref, \
         cr.account_id, cr.credential_ref, cr.auth_type, cr.header_name, cr.status, cr.master_key_id, cr.nonce, cr.ciphertext \
         FROM api_keys k \
         LEFT JOIN capabilities c ON c.account_id = k.account_id AND c.id = $2 \
         LEFT JOIN capability_credentials cr ON cr.account_id = c.account_id AND cr.credential_ref = c.credential_ref \
         WHERE k.key_hash = $1";
    /// Where the capability's [`COLUMNS`], its `credential_ref` and the
    /// credential's columns start.
    const CAPABILITY: usize = 3;
    const CREDENTIAL_REF: usize = 11;
    const CREDENTIAL: usize = 12;

    fn read(row: &dyn ReadRow) -> StoreResult<KeyAnd<Option<CapabilityForCall>>> {
        let key = KeyRow::read(row)?;
        let capability = match row.text(Self::CAPABILITY)? {
            None => None,
            Some(_) => Some(CapabilityForCall {
                capability: CapabilityRow::read(&ColumnsFrom {
                    row,
                    first: Self::CAPABILITY,
                })?,
                credential: match row.text(Self::CREDENTIAL_REF)? {
                    None => CredentialRead::NotRead,
                    Some(credential_ref) => CredentialRead::Read {
                        credential_ref,
                        row: match row.int(Self::CREDENTIAL)? {
                            None => None,
                            Some(_) => Some(CredentialRow::read(&ColumnsFrom {
                                row,
                                first: Self::CREDENTIAL,
                            })?),
                        },
                    },
                },
            }),
        };
        Ok(KeyAnd {
            key,
            joined: capability,
        })
    }
}

/// The outcome of a guarded write: the row as written, or why not.
pub type Guarded = Result<CapabilityRow, GuardedWriteError>;

impl Store {
    /// Publishes every capability as `active` at revision 1, and completes the
    /// idempotency claim, in one transaction. A name already used by the
    /// account is `Conflict(CapabilityName)`; a lost claim is `NotFound`.
    pub async fn publish_capabilities(
        &self,
        account: &AccountId,
        domain: &str,
        capabilities: &[NewCapability],
        completion: &Completion<'_>,
    ) -> StoreResult<()> {
        let now = now_millis();
        let begin = self.write_transaction_statement();
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            for cap in capabilities {
                sqlx::query(
                    "INSERT INTO capabilities (id, account_id, name, domain, lifecycle_status, revision, definition, created_at, updated_at, credential_ref) \
                     VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $7, $8)",
                )
                .bind(cap.id.as_str())
                .bind(account.number())
                .bind(&cap.name)
                .bind(domain)
                .bind(LifecycleStatus::Active)
                .bind(&cap.definition)
                .bind(now)
                .bind(cap.credential_ref.as_deref())
                .execute(&mut *tx)
                .await?;
                insert_revision!(tx, Revision {
                    capability: &cap.id,
                    revision: 1,
                    change: RevisionChange::Created,
                    status: LifecycleStatus::Active,
                    domain,
                    definition: &cap.definition,
                    at: now,
                })?;
            }
            if !complete_in_tx!(tx, account, completion)? {
                return Err(StoreError::NotFound);
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// Names among `names` already used by another of the account's capabilities.
    pub async fn capability_names_in_use(
        &self,
        account: &AccountId,
        names: &[&str],
        except: Option<&CapabilityId>,
    ) -> StoreResult<Vec<String>> {
        let rows: Vec<(String, String)> = on_pool!(self, pool => {
            sqlx::query_as("SELECT id, name FROM capabilities WHERE account_id = $1")
                .bind(account.number())
                .fetch_all(pool)
                .await
        })?;
        Ok(rows
            .into_iter()
            .filter(|(id, name)| {
                except.is_none_or(|e| e.as_str() != id) && names.contains(&name.as_str())
            })
            .map(|(_, name)| name)
            .collect())
    }

    pub async fn list_capabilities(&self, account: &AccountId) -> StoreResult<Vec<CapabilityRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM capabilities WHERE account_id = $1 ORDER BY created_at, name, id"
        );
        Ok(
            on_pool!(self, pool => sqlx::query_as(&sql).bind(account.number()).fetch_all(pool).await)?,
        )
    }

    /// [`Self::list_capabilities`] without the definitions, in the same order.
    pub async fn capability_heads(&self, account: &AccountId) -> StoreResult<Vec<CapabilityHead>> {
        let sql = "SELECT id, lifecycle_status, revision FROM capabilities WHERE account_id = $1 \
                   ORDER BY created_at, name, id";
        Ok(
            on_pool!(self, pool => sqlx::query_as(sql).bind(account.number()).fetch_all(pool).await)?,
        )
    }

    pub async fn get_capability(
        &self,
        account: &AccountId,
        id: &CapabilityId,
    ) -> StoreResult<Option<CapabilityRow>> {
        self.read_optional(
            SELECT_ONE,
            &[Param::Int(account.number()), Param::Text(id.as_str())],
            CapabilityRow::read,
        )
        .await
    }

    /// [`Self::authenticate`] and, for the key's account, the capability
    /// `id` with its credential ([`CapabilityForCall`]; `None` when the
    /// account has no such capability), as of the same moment, in one
    /// statement.
    pub async fn authenticate_for_call(
        &self,
        key_hash: &str,
        environment: &str,
        id: &CapabilityId,
    ) -> StoreResult<Result<(AccountId, Option<CapabilityForCall>), KeyRefusal>> {
        self.authenticate_joined(
            KeyAndCapabilityRow::SELECT,
            &[Param::Text(key_hash), Param::Text(id.as_str())],
            KeyAndCapabilityRow::read,
            environment,
        )
        .await
    }

    /// The revision history of one of the account's capabilities, oldest
    /// first (empty for another account's or an absent one).
    pub async fn capability_history(
        &self,
        account: &AccountId,
        id: &CapabilityId,
    ) -> StoreResult<Vec<RevisionRow>> {
        Ok(on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT r.revision, r.change, r.lifecycle_status, r.definition, r.created_at FROM capability_revisions r \
                 JOIN capabilities c ON c.id = r.capability_id \
                 WHERE c.account_id = $1 AND r.capability_id = $2 ORDER BY r.revision",
            )
            .bind(account.number())
            .bind(id.as_str())
            .fetch_all(pool)
            .await
        })?)
    }

    /// Replaces the definition if the current revision is `expected`; keeps the state.
    pub async fn revise_capability(
        &self,
        account: &AccountId,
        id: &CapabilityId,
        expected: i64,
        revised: &RevisedDefinition<'_>,
    ) -> StoreResult<Guarded> {
        let RevisedDefinition {
            domain,
            name,
            definition,
            credential_ref,
        } = *revised;
        let now = now_millis();
        let begin = self.write_transaction_statement();
        let _gate = self.write_turn().await;
        let update = format!(
            "UPDATE capabilities SET name = $4, domain = $5, definition = $6, revision = revision + 1, updated_at = $7, \
             credential_ref = $8 \
             WHERE account_id = $1 AND id = $2 AND revision = $3 RETURNING {COLUMNS}"
        );
        let select =
            format!("SELECT {COLUMNS} FROM capabilities WHERE account_id = $1 AND id = $2");
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let updated: Option<CapabilityRow> = match sqlx::query_as(&update)
                .bind(account.number()).bind(id.as_str()).bind(expected).bind(name).bind(domain).bind(definition).bind(now).bind(credential_ref)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::from)
            {
                Ok(row) => row,
                Err(StoreError::Conflict(Constraint::CapabilityName)) => {
                    return Ok(Err(GuardedWriteError::NameTaken))
                }
                Err(err) => return Err(err),
            };
            let Some(row) = updated else {
                let current: Option<CapabilityRow> = sqlx::query_as(&select).bind(account.number()).bind(id.as_str()).fetch_optional(&mut *tx).await?;
                return Ok(Err(match current {
                    None => GuardedWriteError::NotFound,
                    Some(row) => GuardedWriteError::StaleRevision { current: row.revision },
                }));
            };
            insert_revision!(tx, Revision {
                capability: id,
                revision: row.revision,
                change: RevisionChange::Revised,
                status: row.lifecycle_status,
                domain,
                definition,
                at: now,
            })?;
            tx.commit().await?;
            Ok(Ok(row))
        })
    }

    /// Moves the capability to `target` if the current revision is `expected`.
    pub async fn transition_capability(
        &self,
        account: &AccountId,
        id: &CapabilityId,
        expected: i64,
        target: LifecycleStatus,
    ) -> StoreResult<Guarded> {
        let now = now_millis();
        let begin = self.write_transaction_statement();
        let _gate = self.write_turn().await;
        let update = format!(
            "UPDATE capabilities SET lifecycle_status = $4, revision = revision + 1, updated_at = $5 \
             WHERE account_id = $1 AND id = $2 AND revision = $3 AND lifecycle_status <> $4 RETURNING {COLUMNS}"
        );
        let select =
            format!("SELECT {COLUMNS} FROM capabilities WHERE account_id = $1 AND id = $2");
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let updated: Option<CapabilityRow> = sqlx::query_as(&update)
                .bind(account.number()).bind(id.as_str()).bind(expected).bind(target).bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(row) = updated else {
                let current: Option<CapabilityRow> = sqlx::query_as(&select).bind(account.number()).bind(id.as_str()).fetch_optional(&mut *tx).await?;
                return Ok(Err(match current {
                    None => GuardedWriteError::NotFound,
                    Some(row) if row.revision != expected => GuardedWriteError::StaleRevision { current: row.revision },
                    Some(_) => GuardedWriteError::AlreadyInState,
                }));
            };
            insert_revision!(tx, Revision {
                capability: id,
                revision: row.revision,
                change: RevisionChange::into_state(target),
                status: target,
                domain: &row.domain,
                definition: &row.definition,
                at: now,
            })?;
            tx.commit().await?;
            Ok(Ok(row))
        })
    }

    /// Counts the account's capabilities and revision rows (tests, diagnostics).
    pub async fn count_capability_rows(&self, account: &AccountId) -> StoreResult<(i64, i64)> {
        Ok(on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT (SELECT COUNT(*) FROM capabilities WHERE account_id = $1), \
                 (SELECT COUNT(*) FROM capability_revisions r JOIN capabilities c ON c.id = r.capability_id WHERE c.account_id = $1)",
            )
            .bind(account.number())
            .fetch_one(pool)
            .await
        })?)
    }
}

/// One row of a capability's revision history, as it is appended.
struct Revision<'a> {
    capability: &'a CapabilityId,
    revision: i64,
    change: RevisionChange,
    status: LifecycleStatus,
    domain: &'a str,
    definition: &'a str,
    at: i64,
}

/// Appends a [`Revision`] inside the caller's transaction (a macro because
/// each backend's transaction is its own type).
macro_rules! insert_revision {
    ($tx:expr, $revision:expr) => {{
        let row: Revision<'_> = $revision;
        sqlx::query(
            "INSERT INTO capability_revisions (capability_id, revision, change, lifecycle_status, domain, definition, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(row.capability.as_str())
        .bind(row.revision)
        .bind(row.change)
        .bind(row.status)
        .bind(row.domain)
        .bind(row.definition)
        .bind(row.at)
        .execute(&mut *$tx)
        .await
        .map(|_| ())
    }};
}
use insert_revision;
