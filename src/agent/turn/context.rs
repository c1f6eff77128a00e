//! The first stage: everything a turn reads before deciding, loaded once
//! and derived once. The message is read once (`Said`: its words, clauses,
//! concepts and focus); its language is the conversation's, or decided by
//! this message; the guest judges, in one batch, the tokens of the
//! patterned properties of the capabilities the turn may look at.

use std::collections::HashMap;
use std::sync::LazyLock;

use warden_channel::inbound::InboundMessage;

use super::{Engine, TurnError};
use crate::agent::arguments::{self, Property};
use crate::agent::catalog::{Active, Cataloged};
use crate::agent::language::{Language, Said};
use crate::agent::patterns;
use crate::agent::pending::{self, PendingOperation};
use crate::agent::planner::{EffectivePolicy, HistoryEntry, Offered, PlanRequest};
use crate::agent::verdicts::PatternMatches;
use crate::domain::account::AccountId;
use crate::domain::message::MessageRole;
use crate::store::conversations::{ConversationRow, StoredReference};
use crate::store::policy::TurnBasis;

/// Messages of history given to planners and searched for earlier values.
pub const HISTORY_MESSAGES: i64 = 20;

/// Everything a turn reads before deciding.
pub(super) struct Context<'a> {
    pub account: &'a AccountId,
    pub inbound: &'a InboundMessage,
    /// The message, read once.
    pub said: Said,
    /// `None` for a conversation this turn starts.
    pub existing: Option<ConversationRow>,
    pub conversation_id: String,
    pub language: Language,
    /// This turn's text fixes the conversation's language (none did yet).
    pub decides_language: bool,
    pub policy: EffectivePolicy,
    pub capabilities: Capabilities,
    pub history: Vec<HistoryEntry>,
    pub references: Vec<StoredReference>,
    pub pending: Option<PendingOperation>,
    /// The capability the conversation's last call used.
    pub last_capability: Option<String>,
    /// When the turn began (Unix ms), before anything was read.
    pub started_at: i64,
}

/// One of the turn's capabilities (the catalog's, shared: `at`, `offer`
/// and `input_schema_text` through `Deref`) with this turn's pattern
/// verdicts for it, which the guest gives only for the capabilities
/// something reads them of ([`judge`]).
#[derive(Clone, Copy)]
pub(super) struct Loaded<'c> {
    pub cataloged: &'c Cataloged,
    pub patterns: &'c PatternMatches,
}

impl std::ops::Deref for Loaded<'_> {
    type Target = Cataloged;

    fn deref(&self) -> &Cataloged {
        self.cataloged
    }
}

/// A capability the turn works with (the pending one, or the one it
/// calls), with its input properties taken once.
pub(super) struct Target<'c> {
    pub loaded: Loaded<'c>,
    pub properties: Vec<Property<'c>>,
}

impl<'c> Target<'c> {
    pub fn of(loaded: Loaded<'c>) -> Self {
        Target {
            properties: arguments::properties(&loaded.cataloged.offer.input_schema),
            loaded,
        }
    }

    pub fn property(&self, name: &str) -> Option<&Property<'c>> {
        self.properties.iter().find(|p| p.name == name)
    }

    pub fn required(&self) -> Vec<&'c str> {
        arguments::required(&self.loaded.cataloged.offer.input_schema)
    }
}

/// The pending operation (rule 12) with its capability, if that is still
/// active at the revision it was asked for, and the property it waits for.
pub(super) struct Waiting<'c> {
    pub operation: &'c PendingOperation,
    pub target: Target<'c>,
    /// Index into `target.properties`.
    missing: usize,
}

impl<'c> Waiting<'c> {
    pub fn missing(&self) -> &Property<'c> {
        &self.target.properties[self.missing]
    }
}

/// The account's active capabilities for this turn, shared with the
/// catalog (nothing is copied per capability per turn), and the guest's
/// verdicts for those judged, by index.
pub(super) struct Capabilities {
    pub active: Active,
    pub judged: HashMap<usize, PatternMatches>,
}

/// The verdicts of a capability nobody asked the guest about: none.
pub(super) static NOT_JUDGED: LazyLock<PatternMatches> = LazyLock::new(PatternMatches::default);

impl Capabilities {
    pub fn get(&self, i: usize) -> Loaded<'_> {
        Loaded {
            cataloged: &self.active.capabilities[i],
            patterns: self.judged.get(&i).unwrap_or(&NOT_JUDGED),
        }
    }

    pub fn position(&self, found: impl Fn(&Cataloged) -> bool) -> Option<usize> {
        self.active.capabilities.iter().position(|c| found(c))
    }

    /// The planner's view, with the verdicts given so far.
    pub fn offered(&self) -> Vec<Offered<'_>> {
        (0..self.active.capabilities.len())
            .map(|i| {
                let c = self.get(i);
                Offered {
                    offer: &c.cataloged.offer,
                    patterns: c.patterns,
                }
            })
            .collect()
    }
}

impl Context<'_> {
    /// The planner's request for this turn.
    pub fn plan_request<'r>(&'r self, offered: &'r [Offered<'r>]) -> PlanRequest<'r> {
        PlanRequest {
            policy: &self.policy,
            capabilities: offered,
            history: &self.history,
            said: &self.said,
            previous_capability: self.last_capability.as_deref(),
            image: self.inbound.image.as_ref(),
        }
    }

    /// The pending operation's capability and the property it waits for,
    /// when both still exist.
    pub fn waiting(&self) -> Option<Waiting<'_>> {
        let operation = self.pending.as_ref()?;
        let at = self.capabilities.position(|c| {
            c.at.id == operation.capability_id && c.at.revision == operation.revision
        })?;
        let target = Target::of(self.capabilities.get(at));
        let missing = target
            .properties
            .iter()
            .position(|p| p.name == operation.missing)?;
        Some(Waiting {
            operation,
            target,
            missing,
        })
    }

    /// The user's words: this message first, then earlier user messages,
    /// most recent first.
    pub fn user_texts(&self) -> Vec<&str> {
        let mut texts = vec![self.said.text()];
        texts.extend(
            self.history
                .iter()
                .rev()
                .filter(|h| h.role == MessageRole::User)
                .map(|h| h.text.as_str()),
        );
        texts
    }
}

/// Loads the turn's context (404 for a conversation of another account),
/// on `basis` when the caller's key brought it (read here otherwise).
pub(super) async fn load<'a>(
    engine: &Engine,
    account: &'a AccountId,
    basis: Option<TurnBasis>,
    inbound: &'a InboundMessage,
) -> Result<Context<'a>, TurnError> {
    let started_at = crate::clock::now_millis();
    let existing = match &inbound.conversation_id {
        Some(id) => Some(
            engine
                .store
                .find_conversation(account, id)
                .await?
                .ok_or(TurnError::ConversationNotFound)?,
        ),
        None => None,
    };
    let conversation_id = existing
        .as_ref()
        .map_or_else(|| crate::agent::new_id("conv_"), |c| c.id().to_owned());
    let said = Said::new(&inbound.body);
    // Decided by the conversation's first message with text, then kept
    // (a bare value such as "M12345" says nothing about the language);
    // an image with no text decides nothing.
    let (language, decides_language) = match existing.as_ref().and_then(ConversationRow::language) {
        Some(kept) => (kept, false),
        None => (said.language(), !said.is_blank()),
    };
    // The policy and the capability version in one statement.
    let basis = match basis {
        Some(basis) => basis,
        None => engine.store.turn_basis(account).await?,
    };
    let policy = EffectivePolicy::with_defaults(basis.policy.map(|p| p.policy).as_ref(), language);
    let capabilities = Capabilities {
        active: engine
            .catalog
            .active(&engine.store, account, basis.capability_version)
            .await?,
        judged: HashMap::new(),
    };
    let (history, references, pending) = match &existing {
        Some(conversation) => {
            let history = engine
                .store
                .recent_messages(conversation, HISTORY_MESSAGES)
                .await?
                .into_iter()
                .map(|m| HistoryEntry {
                    role: m.role,
                    text: m.body,
                })
                .collect();
            let references = engine.store.conversation_references(conversation).await?;
            let pending = match engine.store.pending_operation(conversation).await? {
                Some(stored) => pending::open(&engine.keyring, account, &conversation_id, &stored),
                None => None,
            };
            (history, references, pending)
        }
        None => (Vec::new(), Vec::new(), None),
    };
    let last_capability = existing
        .as_ref()
        .and_then(ConversationRow::last_capability)
        .map(str::to_owned);
    let mut context = Context {
        account,
        inbound,
        said,
        existing,
        conversation_id,
        language,
        decides_language,
        policy,
        capabilities,
        history,
        references,
        pending,
        last_capability,
        started_at,
    };
    // Rules 2 and 3 read values from this message and the user's earlier
    // ones: the guest judges their tokens against the patterns of the
    // capabilities the turn may look at (the pending one, those the
    // planner consults), in one batch (not for an exclusion clause: rule
    // 13 runs nothing). A capability proposed later is judged then.
    if !context.said.has_exclusion_clause() {
        let mut wanted: Vec<usize> = context
            .pending
            .as_ref()
            .and_then(|p| {
                context
                    .capabilities
                    .position(|c| c.at.id == p.capability_id && c.at.revision == p.revision)
            })
            .into_iter()
            .collect();
        let offered = context.capabilities.offered();
        wanted.extend(engine.planner.consults(&context.plan_request(&offered)));
        drop(offered);
        wanted.sort_unstable();
        wanted.dedup();
        context.capabilities.judged = judge(engine, &context, &wanted).await;
    }
    Ok(context)
}

/// Asks the guest, in one batch, which of this turn's words match the
/// patterns of the capabilities at `wanted`: their verdicts by index.
pub(super) async fn judge(
    engine: &Engine,
    cx: &Context<'_>,
    wanted: &[usize],
) -> HashMap<usize, PatternMatches> {
    let texts = cx.user_texts();
    let active = &cx.capabilities.active.capabilities;
    let asked: Vec<_> = wanted
        .iter()
        .map(|&i| (&active[i].at, active[i].input_schema_text.clone()))
        .collect();
    let judged = patterns::judge_all(&engine.executor, cx.account, &asked, &texts).await;
    wanted.iter().copied().zip(judged).collect()
}
