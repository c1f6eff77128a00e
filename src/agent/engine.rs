//! One user turn, from the parsed message to the stored reply. The planner
//! proposes; this module decides, and enforces contract section 1 whatever
//! was proposed:
//!
//! | rule | where |
//! |---|---|
//! | 1 one call per turn | `decide` reaches `execute` at most once |
//! | 2 no invented arguments | `grounded_arguments`, `complete_arguments`; the executor revalidates in the guest |
//! | 3 history reuse, confirmation | `complete_arguments` (history candidates) |
//! | 4 name-like references | `complete_arguments` + `references::harvest` |
//! | 5 no internal identifiers | `grounding`, offers carry names only |
//! | 6 grounded replies | `reply_from_result`, fixed texts on empty or failed results |
//! | 7 read-only | only active (read-only) capabilities are offered or callable |
//! | 8 just-in-time preparation | `decide` refuses preparation without intent |
//! | 9 not-found text | `interaction_outcome` |
//! | 10 opaque refs | only in the response's `interaction`; never stored or sent to a model |
//! | 11 images | held in `InboundMessage` for the turn only |
//! | 12 pending operations, `cancelar` | `pending`, `continue_pending` |
//! | 13 exclusion clause | first check in `decide`, no executor I/O |

use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::arguments::{self, Property};
use super::catalog::{Catalog, Cataloged};
use super::grounding::{
    answer_is_safe, is_empty_result, labelled_facts, reply_is_grounded, written_in,
};
use super::language::{
    Language, has_exclusion_clause, has_operation_intent, is_cancel, is_closing, is_no, is_yes,
    refers_to_other, words,
};
use super::lexicon;
use super::patterns::{self, PatternMatches};
use super::pending::{self, PendingOperation};
use super::planner::{
    CapabilityOffer, EffectivePolicy, HistoryEntry, Offered, Plan, PlanRequest, Planner,
    PlannerError, ReplyRequest, Role,
};
use super::references;
use super::response::{AssistantMessage, BenchmarkObservation, MessageResponse};
use super::texts;
use super::trace::{Reason, Trace};
use crate::clock::{now_millis, to_rfc3339};
use crate::crypto::master_key::Keyring;
use crate::domain::account::AccountId;
use crate::domain::diagnostics::DiagnosticMode;
use crate::executor::{Call, CallFailure, CallResult, Executor};
use crate::sandbox::{InteractionKind, ShapedInteraction};
use crate::store::conversations::{
    ConversationRow, MessageRole, NewConversation, NewInteraction, NewMessage, PendingChange,
    StoredReference, TurnRecord,
};
use crate::store::gap_events::GapEvent;
use crate::store::{Store, StoreError};
use warden_channel::inbound::InboundMessage;

/// Messages of history given to planners and searched for earlier values.
pub const HISTORY_MESSAGES: i64 = 20;
/// Interactions never outlive this, whatever the host's `expires_at`.
pub const MAX_INTERACTION_MILLIS: i64 = 24 * 60 * 60 * 1000;
/// Metadata key that asks for a `benchmark_observation` (its value is the
/// correlation id).
pub const BENCHMARK_METADATA_KEY: &str = "benchmark_correlation_id";

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("no such conversation")]
    ConversationNotFound,
    #[error(transparent)]
    Inference(#[from] PlannerError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Clone)]
pub struct Engine {
    store: Store,
    executor: Executor,
    planner: Planner,
    keyring: Keyring,
    catalog: Catalog,
}

/// One of the turn's capabilities (the catalog's, shared: `at`, `offer`
/// and `input_schema_text` through `Deref`) with this turn's pattern
/// verdicts for it, which the guest gives only for the capabilities
/// something reads them of ([`Engine::judge`]).
#[derive(Clone, Copy)]
struct Loaded<'c> {
    cataloged: &'c Cataloged,
    patterns: &'c PatternMatches,
}

impl std::ops::Deref for Loaded<'_> {
    type Target = Cataloged;

    fn deref(&self) -> &Cataloged {
        self.cataloged
    }
}

/// The account's active capabilities for this turn, shared with the
/// catalog (nothing is copied per capability per turn), and the guest's
/// verdicts for those judged, by index.
struct Capabilities {
    active: Arc<[Arc<Cataloged>]>,
    judged: HashMap<usize, PatternMatches>,
}

/// The verdicts of a capability nobody asked the guest about: none.
static NOT_JUDGED: std::sync::LazyLock<PatternMatches> =
    std::sync::LazyLock::new(PatternMatches::default);

impl Capabilities {
    fn get(&self, i: usize) -> Loaded<'_> {
        Loaded {
            cataloged: &self.active[i],
            patterns: self.judged.get(&i).unwrap_or(&NOT_JUDGED),
        }
    }

    fn iter(&self) -> impl Iterator<Item = Loaded<'_>> {
        (0..self.active.len()).map(|i| self.get(i))
    }

    fn position(&self, found: impl Fn(&Cataloged) -> bool) -> Option<usize> {
        self.active.iter().position(|c| found(c))
    }

    /// The planner's view, with the verdicts given so far.
    fn offered(&self) -> Vec<Offered<'_>> {
        self.iter()
            .map(|c| Offered {
                offer: &c.cataloged.offer,
                patterns: c.patterns,
            })
            .collect()
    }
}

/// What a clarification asks: to confirm a value from history (none: ask
/// for it outright), or which of several values the user means.
enum Question {
    Candidates(Vec<Value>),
    WhichOf(Vec<Value>),
}

/// Everything a turn reads before deciding.
struct Context<'a> {
    account: &'a AccountId,
    inbound: &'a InboundMessage,
    conversation_id: String,
    language: Language,
    /// This turn's text fixes the conversation's language (none did yet).
    decides_language: bool,
    policy: EffectivePolicy,
    capabilities: Capabilities,
    history: Vec<HistoryEntry>,
    references: Vec<StoredReference>,
    pending: Option<PendingOperation>,
    /// The capability the conversation's last call used.
    last_capability: Option<String>,
}

/// What a turn decided.
struct Outcome {
    text: String,
    reason: Reason,
    interaction: Option<IssuedInteraction>,
    set_references: Vec<StoredReference>,
    clear_references: Vec<(String, String)>,
    pending: PendingChange,
    gap: Option<Gap>,
    observation: Observation,
    /// The capability this turn called (its name), if one was called.
    called: Option<String>,
}

/// An interaction this turn issues: the response object (the only place
/// its opaque refs go) and what is stored of it.
struct IssuedInteraction {
    response: Map<String, Value>,
    id: String,
    kind: &'static str,
    operation: String,
    expires_at: i64,
}

/// A diagnostics gap event this turn records.
struct Gap {
    kind: &'static str,
    reason: &'static str,
    capability: Option<String>,
}

#[derive(Default)]
struct Observation {
    capability: String,
    argument_category: &'static str,
    fixture_result: &'static str,
}

impl Outcome {
    fn reply(text: impl Into<String>, reason: Reason) -> Self {
        Outcome {
            text: text.into(),
            reason,
            interaction: None,
            set_references: Vec::new(),
            clear_references: Vec::new(),
            pending: PendingChange::Keep,
            gap: None,
            called: None,
            observation: Observation {
                capability: String::new(),
                argument_category: "none",
                fixture_result: "not_called",
            },
        }
    }

    fn with_gap(mut self, kind: &'static str, reason: &'static str, cap: Option<&str>) -> Self {
        self.gap = Some(Gap {
            kind,
            reason,
            capability: cap.map(str::to_owned),
        });
        self
    }
}

impl Engine {
    pub fn new(store: Store, executor: Executor, planner: Planner, keyring: Keyring) -> Self {
        Engine {
            store,
            executor,
            planner,
            keyring,
            catalog: Catalog::default(),
        }
    }

    pub fn planner(&self) -> &Planner {
        &self.planner
    }

    /// Runs one turn and answers the message response (contract 2.2).
    pub async fn turn(
        &self,
        account: &AccountId,
        inbound: &InboundMessage,
    ) -> Result<MessageResponse, TurnError> {
        let started = Instant::now();
        let mut trace = Trace::default();
        let existing = match &inbound.conversation_id {
            Some(id) => Some(
                self.store
                    .find_conversation(account, id)
                    .await?
                    .ok_or(TurnError::ConversationNotFound)?,
            ),
            None => None,
        };
        let conversation_id = existing
            .as_ref()
            .map_or_else(|| super::new_id("conv_"), |c| c.id().to_owned());
        let context = self
            .load_context(account, inbound, conversation_id, existing.as_ref())
            .await?;
        trace.timing.preparation = started.elapsed();

        let outcome = self.decide(&context, &mut trace).await?;
        trace.responded(outcome.reason);

        let message_id = super::new_id("msg_");
        let user_message_id = super::new_id("msg_");
        let metadata = (!inbound.metadata.is_empty())
            .then(|| Value::Object(inbound.metadata.clone()).to_string());
        let interaction_record = outcome.interaction.as_ref().map(|i| NewInteraction {
            id: &i.id,
            kind: i.kind,
            operation: &i.operation,
            expires_at: i.expires_at,
        });
        let record = TurnRecord {
            conversation_id: &context.conversation_id,
            new_conversation: existing.is_none().then_some(NewConversation {
                user_id: inbound.user_id.as_deref(),
            }),
            decided_language: context.decides_language.then_some(context.language),
            called_capability: outcome.called.as_deref(),
            user_message: NewMessage {
                id: &user_message_id,
                body: &inbound.body,
                metadata: metadata.as_deref(),
            },
            assistant_message: NewMessage {
                id: &message_id,
                body: &outcome.text,
                metadata: None,
            },
            interaction: interaction_record,
            set_references: outcome.set_references.clone(),
            clear_references: outcome.clear_references.clone(),
            pending: match &outcome.pending {
                PendingChange::Keep => PendingChange::Keep,
                PendingChange::Clear => PendingChange::Clear,
                PendingChange::Set(p) => PendingChange::Set(p.clone()),
            },
        };
        self.store.commit_turn(account, &record).await?;
        if let Some(gap) = &outcome.gap {
            self.record_gap(account, &context, gap).await;
        }

        let run_id = super::new_id("run_");
        // One line per turn for operators: what ran and why, never the text.
        tracing::info!(
            run = %run_id,
            conversation = %context.conversation_id,
            capability = %outcome.observation.capability,
            reason = outcome.reason.as_str(),
            executor_attempts = trace.timing.executor_attempts,
            e2e_ms = started.elapsed().as_millis() as u64,
            "turn answered"
        );
        let benchmark_observation = match inbound.metadata.get(BENCHMARK_METADATA_KEY) {
            Some(Value::String(correlation)) => {
                let o = &outcome.observation;
                Some(BenchmarkObservation {
                    argument_category: o.argument_category,
                    capability: o.capability.clone(),
                    correlation_id: correlation.clone(),
                    fixture_result: o.fixture_result,
                    model: self.planner.model().to_owned(),
                    status: 200,
                })
            }
            _ => None,
        };
        Ok(MessageResponse {
            benchmark_observation,
            capability_trace: trace.render(&run_id, &message_id, started.elapsed()),
            conversation_id: context.conversation_id,
            interaction: outcome.interaction.map(|i| i.response),
            message: AssistantMessage::text(message_id, outcome.text),
        })
    }

    async fn load_context<'a>(
        &self,
        account: &'a AccountId,
        inbound: &'a InboundMessage,
        conversation_id: String,
        existing: Option<&ConversationRow>,
    ) -> Result<Context<'a>, TurnError> {
        // Decided by the conversation's first message with text, then kept
        // (a bare value such as "M12345" says nothing about the language);
        // an image with no text decides nothing.
        let (language, decides_language) = match existing.and_then(ConversationRow::language) {
            Some(kept) => (kept, false),
            None => (Language::of(&inbound.body), !inbound.body.trim().is_empty()),
        };
        // The policy and the capability version in one statement.
        let basis = self.store.turn_basis(account).await?;
        let policy = basis.policy.map(|p| p.policy);
        let policy = effective_policy(policy.as_ref(), language);
        let mut capabilities = Capabilities {
            active: self
                .catalog
                .active(&self.store, account, basis.capability_version)
                .await?,
            judged: HashMap::new(),
        };
        let (history, references, pending) = if let Some(conversation) = existing {
            let history = self
                .store
                .recent_messages(conversation, HISTORY_MESSAGES)
                .await?
                .into_iter()
                .map(|m| HistoryEntry {
                    role: match m.role {
                        MessageRole::User => Role::User,
                        MessageRole::Assistant => Role::Assistant,
                    },
                    text: m.body,
                })
                .collect();
            let references = self.store.conversation_references(conversation).await?;
            let pending = match self.store.pending_operation(conversation).await? {
                Some(stored) => pending::open(&self.keyring, account, &conversation_id, &stored),
                None => None,
            };
            (history, references, pending)
        } else {
            (Vec::new(), Vec::new(), None)
        };
        let last_capability = existing
            .and_then(ConversationRow::last_capability)
            .map(str::to_owned);
        // Rules 2 and 3 read values from this message and the user's earlier
        // ones: the guest judges their tokens against the patterns of the
        // capabilities the turn may look at (the pending one, those the
        // planner consults), in one batch (not for an exclusion clause:
        // rule 13 runs nothing). A capability proposed later is judged then.
        if !has_exclusion_clause(&inbound.body) {
            let mut wanted: Vec<usize> = pending
                .as_ref()
                .and_then(|p: &PendingOperation| {
                    capabilities
                        .position(|c| c.at.id == p.capability_id && c.at.revision == p.revision)
                })
                .into_iter()
                .collect();
            wanted.extend(self.planner.consults(&PlanRequest {
                policy: &policy,
                capabilities: &capabilities.offered(),
                history: &history,
                message: &inbound.body,
                previous_capability: last_capability.as_deref(),
                image: inbound.image.as_ref(),
            }));
            wanted.sort_unstable();
            wanted.dedup();
            capabilities.judged = self
                .judge(
                    account,
                    &inbound.body,
                    &history,
                    &capabilities.active,
                    &wanted,
                )
                .await;
        }
        Ok(Context {
            account,
            inbound,
            conversation_id,
            language,
            decides_language,
            policy,
            capabilities,
            history,
            references,
            pending,
            last_capability,
        })
    }

    /// Asks the guest, in one batch, which of this turn's words match the
    /// patterns of `capabilities[wanted]`: their verdicts by index.
    async fn judge(
        &self,
        account: &AccountId,
        message: &str,
        history: &[HistoryEntry],
        capabilities: &[Arc<Cataloged>],
        wanted: &[usize],
    ) -> HashMap<usize, PatternMatches> {
        let mut texts = vec![message];
        texts.extend(
            history
                .iter()
                .rev()
                .filter(|h| h.role == Role::User)
                .map(|h| h.text.as_str()),
        );
        let asked: Vec<_> = wanted
            .iter()
            .map(|&i| {
                (
                    &capabilities[i].at,
                    capabilities[i].input_schema_text.clone(),
                )
            })
            .collect();
        let judged = patterns::judge_all(&self.executor, account, &asked, &texts).await;
        wanted.iter().copied().zip(judged).collect()
    }

    async fn decide(&self, cx: &Context<'_>, trace: &mut Trace) -> Result<Outcome, TurnError> {
        let message = cx.inbound.body.as_str();
        let lang = cx.language;
        // Rule 13 first: no planner, no executor.
        if has_exclusion_clause(message) {
            return Ok(Outcome::reply(
                texts::exclusion_fallback(lang),
                Reason::CapabilityExcluded,
            ));
        }
        if is_cancel(message) && (cx.pending.is_some() || words(message).len() <= 3) {
            // Rule 12; a bare `cancelar` with nothing waiting says so.
            return Ok(if cx.pending.is_some() {
                let mut outcome = Outcome::reply(texts::cancelled(lang), Reason::Cancelled);
                outcome.pending = PendingChange::Clear;
                outcome
            } else {
                Outcome::reply(texts::nothing_to_cancel(lang), Reason::NothingToCancel)
            });
        }
        if is_closing(message) {
            // Thanks or a goodbye end whatever was waiting.
            let mut outcome = Outcome::reply(texts::closing(lang), Reason::Closing);
            outcome.pending = PendingChange::Clear;
            return Ok(outcome);
        }
        if message.trim().is_empty() && cx.inbound.image.is_some() {
            // Rule 12: an image alone does not say what to extract.
            return Ok(Outcome::reply(
                texts::image_needs_instructions(lang),
                Reason::ImageNeedsInstructions,
            ));
        }
        if let Some(outcome) = self.proposal_refused(cx) {
            return Ok(outcome);
        }
        if let Some((loaded, args)) = self.continue_pending(cx) {
            trace.selected(&loaded.offer.name, loaded.at.revision, "pending_operation");
            return self
                .complete_and_execute(cx, trace, &loaded, args, "clarified")
                .await;
        }

        let started = Instant::now();
        let planned = self
            .planner
            .plan(&PlanRequest {
                policy: &cx.policy,
                capabilities: &cx.capabilities.offered(),
                history: &cx.history,
                message,
                previous_capability: cx.last_capability.as_deref(),
                image: cx.inbound.image.as_ref(),
            })
            .await;
        trace.timing.selection_inference = started.elapsed();
        let planned = planned?;
        trace.timing.selection_inference_attempts = planned.attempts;
        trace.timing.selection_retry_delay = planned.retry_delay;

        match planned.plan {
            Plan::Answer { text } => Ok(if answer_is_safe(&text, message) {
                Outcome::reply(text, Reason::Answered)
            } else {
                tracing::warn!("planner answer refused: it states data no capability returned");
                Outcome::reply(texts::no_capability(lang), Reason::AnswerRefused)
            }),
            Plan::OutOfScope => Ok(Outcome::reply(
                cx.policy.out_of_scope_response.clone(),
                Reason::OutOfScope,
            )),
            // An operation asked for that nothing prepares ("Cancel my
            // order") is said as such; either way a coverage gap.
            Plan::NoCapability
                if has_operation_intent(message) && !asked_operations(message).is_empty() =>
            {
                Ok(Outcome::reply(
                    texts::operation_not_offered(lang),
                    Reason::OperationNotOffered,
                )
                .with_gap("coverage_gap", "no_matching_capability", None))
            }
            Plan::NoCapability => Ok(Outcome::reply(
                texts::no_capability(lang),
                Reason::NoCapability,
            )
            .with_gap("coverage_gap", "no_matching_capability", None)),
            Plan::Call {
                capability,
                arguments,
            } => {
                // Rule 7: only an offered (active, read-only) capability.
                let Some(at) = cx.capabilities.position(|c| c.offer.name == capability) else {
                    tracing::warn!("planner proposed a capability that is not offered; refused");
                    return Ok(Outcome::reply(
                        texts::no_capability(lang),
                        Reason::CapabilityRefused,
                    )
                    .with_gap("agent_dead_end", "capability_refused", None));
                };
                let loaded = cx.capabilities.get(at);
                // Rule 8: preparation only after an operation intent.
                if loaded.offer.preparation && !has_operation_intent(message) {
                    return Ok(Outcome::reply(
                        texts::preparation_without_intent(lang),
                        Reason::PreparationWithoutIntent,
                    ));
                }
                // ... and for the operation asked for: a model preparing a
                // return when the user asked to cancel is refused.
                if loaded.offer.preparation && !prepares_what_was_asked(message, &loaded.offer) {
                    tracing::warn!("planner proposed a preparation for another operation; refused");
                    return Ok(Outcome::reply(
                        texts::operation_not_offered(lang),
                        Reason::OperationNotOffered,
                    )
                    .with_gap(
                        "agent_dead_end",
                        "preparation_mismatch",
                        Some(&loaded.offer.name),
                    ));
                }
                trace.selected(&loaded.offer.name, loaded.at.revision, "matched");
                // A capability the planner proposed without consulting its
                // patterns (a model's proposal) is judged now.
                let judged_now;
                let loaded = if cx.capabilities.judged.contains_key(&at) {
                    loaded
                } else {
                    judged_now = self
                        .judge(
                            cx.account,
                            message,
                            &cx.history,
                            &cx.capabilities.active,
                            &[at],
                        )
                        .await;
                    Loaded {
                        cataloged: loaded.cataloged,
                        patterns: judged_now.get(&at).unwrap_or(&NOT_JUDGED),
                    }
                };
                let loaded = &loaded;
                let args = self.grounded_arguments(cx, loaded, arguments);
                self.complete_and_execute(cx, trace, loaded, args, "known")
                    .await
            }
        }
    }

    /// Rule 2: keep only declared properties whose values the user wrote
    /// (this message or an earlier one). With an image attached to this
    /// turn, a model may read values from it: those cannot be checked
    /// against text and are kept (the guest still validates them).
    fn grounded_arguments(
        &self,
        cx: &Context<'_>,
        loaded: &Loaded<'_>,
        proposed: Map<String, Value>,
    ) -> Map<String, Value> {
        let declared = arguments::properties(&loaded.offer.input_schema);
        let mut sources: Vec<&str> = vec![cx.inbound.body.as_str()];
        sources.extend(
            cx.history
                .iter()
                .filter(|h| h.role == Role::User)
                .map(|h| h.text.as_str()),
        );
        let from_image = cx.inbound.image.is_some() && matches!(self.planner, Planner::OpenAi(_));
        proposed
            .into_iter()
            .filter(|(name, value)| {
                let Some(property) = declared.iter().find(|p| p.name == name) else {
                    return false;
                };
                let in_message = arguments::is_grounded(value, &sources[..1]);
                // Rule 3: a value only history holds is taken when history
                // is unambiguous; otherwise the engine asks to confirm.
                let from_history = !in_message
                    && arguments::is_grounded(value, &sources[1..])
                    && history_candidates(cx, loaded.patterns, property).len() <= 1;
                let ok = property.schema.get("const") == Some(value)
                    || from_image
                    || in_message
                    || from_history;
                if !ok {
                    tracing::info!(property = %name, "argument dropped: not in the user's words");
                }
                ok
            })
            .collect()
    }

    /// Rule 3: a bare "no" to "do you mean A-1002?" (no other value named,
    /// not "the other one") asks which, offering every value history held.
    fn proposal_refused(&self, cx: &Context<'_>) -> Option<Outcome> {
        let pending = cx.pending.as_ref()?;
        let proposed = pending.proposed.clone()?;
        let message = cx.inbound.body.as_str();
        if !is_no(message) || refers_to_other(message) {
            return None;
        }
        let loaded = cx
            .capabilities
            .iter()
            .find(|c| c.at.id == pending.capability_id && c.at.revision == pending.revision)?;
        let properties = arguments::properties(&loaded.offer.input_schema);
        let missing = properties.iter().find(|p| p.name == pending.missing)?;
        if !missing.candidates(message, loaded.patterns).is_empty() {
            return None;
        }
        let mut options = vec![proposed];
        options.extend(pending.alternatives.iter().cloned());
        Some(self.ask(
            cx,
            &loaded,
            pending.arguments.clone(),
            missing,
            Question::WhichOf(options),
        ))
    }

    /// Rule 12: a pending operation answered by this message.
    fn continue_pending<'c>(
        &self,
        cx: &'c Context<'_>,
    ) -> Option<(Loaded<'c>, Map<String, Value>)> {
        let pending = cx.pending.as_ref()?;
        let loaded = cx
            .capabilities
            .iter()
            .find(|c| c.at.id == pending.capability_id && c.at.revision == pending.revision)?;
        let properties = arguments::properties(&loaded.offer.input_schema);
        let missing = properties.iter().find(|p| p.name == pending.missing)?;
        let message = cx.inbound.body.as_str();
        let mut candidates = missing.candidates(message, loaded.patterns);
        let answer = if candidates.len() == 1 {
            candidates.pop()
        } else if candidates.is_empty() && pending.proposed.is_some() && is_yes(message) {
            pending.proposed.clone()
        } else if candidates.is_empty()
            && is_no(message)
            && refers_to_other(message)
            && pending.alternatives.len() == 1
        {
            // "no, el otro": the one value left.
            pending.alternatives.first().cloned()
        } else if candidates.is_empty() && !is_no(message) {
            missing.whole_answer(message)
        } else {
            None
        }?;
        let mut args = pending.arguments.clone();
        args.insert(pending.missing.clone(), answer);
        for (k, v) in arguments::extract(&loaded.offer.input_schema, loaded.patterns, message) {
            args.entry(k).or_insert(v);
        }
        Some((loaded, args))
    }

    /// Fills what is missing from references (rule 4) and history (rule 3),
    /// asks when it cannot (rule 2), then makes the one call (rule 1).
    async fn complete_and_execute(
        &self,
        cx: &Context<'_>,
        trace: &mut Trace,
        loaded: &Loaded<'_>,
        mut args: Map<String, Value>,
        mut category: &'static str,
    ) -> Result<Outcome, TurnError> {
        let schema = &loaded.offer.input_schema;
        let properties = arguments::properties(schema);
        let message = cx.inbound.body.as_str();
        for property in &properties {
            // Rule 4: a value the user names now wins over one carried from
            // earlier ("¿Y a qué hora abre la Tienda Triana?" after Centro).
            let mut named = property.candidates(message, loaded.patterns);
            // A proposed value the user wrote stays, unless the property is
            // patterned and the guest did not judge that form to match: a
            // model copying "a-1002" gets the "A-1002" the guest accepted.
            let proposed_now = args.get(property.name).is_some_and(|v| {
                arguments::is_grounded(v, &[message])
                    && (!property.is_patterned() || named.contains(v) || named.is_empty())
            });
            if named.len() == 1 && !proposed_now {
                args.insert(property.name.to_owned(), named.remove(0));
            }
        }
        for name in arguments::required(schema) {
            if args.contains_key(name) {
                continue;
            }
            let Some(property) = properties.iter().find(|p| p.name == name) else {
                continue;
            };
            // "The status of orders B-2001 and B-2002?": one call per turn
            // (rule 1), so which one — never a reference or history value
            // in place of what the user just wrote.
            let named = property.candidates(message, loaded.patterns);
            if named.len() > 1 {
                return Ok(self.ask(cx, loaded, args, property, Question::WhichOf(named)));
            }
            if let Some(value) = reference_for(cx, loaded, name) {
                args.insert(name.to_owned(), Value::String(value));
                category = "reference";
                continue;
            }
            let candidates = history_candidates(cx, loaded.patterns, property);
            match candidates.as_slice() {
                [one] => {
                    args.insert(name.to_owned(), one.clone());
                    category = "history";
                }
                _ => {
                    return Ok(self.ask(
                        cx,
                        loaded,
                        args,
                        property,
                        Question::Candidates(candidates),
                    ));
                }
            }
        }
        self.execute(cx, trace, loaded, args, category).await
    }

    /// A clarification: the question, and the operation kept pending, so
    /// the next message can complete it (rule 3: nothing called, nothing
    /// assumed).
    fn ask(
        &self,
        cx: &Context<'_>,
        loaded: &Loaded<'_>,
        args: Map<String, Value>,
        property: &Property<'_>,
        question: Question,
    ) -> Outcome {
        let what = what_to_ask(cx, property);
        let (text, proposed, alternatives, reason) = match question {
            // The most recent candidate from history is proposed for
            // confirmation; the others stay as the alternatives.
            Question::Candidates(candidates) => match candidates.split_first() {
                Some((first, rest)) => {
                    let shown = candidates.iter().map(shown).collect::<Vec<_>>();
                    (
                        texts::confirm_value(cx.language, &what, &shown[0], &shown[1..]),
                        Some(first.clone()),
                        rest.to_vec(),
                        Reason::Confirmation,
                    )
                }
                None => (
                    texts::ask_for(cx.language, &what),
                    None,
                    Vec::new(),
                    Reason::Clarification,
                ),
            },
            Question::WhichOf(options) => {
                let shown = options.iter().map(shown).collect::<Vec<_>>();
                (
                    texts::which_one(cx.language, &what, &shown),
                    None,
                    options,
                    Reason::Clarification,
                )
            }
        };
        let pending = PendingOperation {
            capability_id: loaded.at.id.clone(),
            revision: loaded.at.revision,
            arguments: args,
            missing: property.name.to_owned(),
            proposed,
            alternatives,
        };
        let mut outcome = Outcome::reply(text, reason);
        outcome.pending = PendingChange::Set(pending::seal(
            &self.keyring,
            cx.account,
            &cx.conversation_id,
            &pending,
        ));
        outcome.observation = Observation {
            capability: loaded.offer.name.clone(),
            argument_category: "missing",
            fixture_result: "not_called",
        };
        outcome
    }

    async fn execute(
        &self,
        cx: &Context<'_>,
        trace: &mut Trace,
        loaded: &Loaded<'_>,
        args: Map<String, Value>,
        category: &'static str,
    ) -> Result<Outcome, TurnError> {
        let arguments = Value::Object(args.clone());
        let started = Instant::now();
        let report = self
            .executor
            .call(Call {
                account: cx.account,
                user_id: cx.inbound.user_id.as_deref(),
                capability: &loaded.at,
                arguments: &arguments,
            })
            .await;
        trace.timing.execution = started.elapsed();
        trace.timing.executor_attempts = report.attempts;
        let name = loaded.offer.name.as_str();
        let called = Some(name.to_owned());
        let observe = |fixture: &'static str| Observation {
            capability: name.to_owned(),
            argument_category: category,
            fixture_result: fixture,
        };
        let mut outcome = match report.outcome {
            Ok(CallResult::Data(result)) => {
                let empty = is_empty_result(&result);
                trace.executed(name, loaded.at.revision, if empty { "empty" } else { "ok" });
                let consumers = cx.capabilities.active.iter().map(|c| &*c.at.definition);
                let (set, clear) = references::harvest(name, &result, consumers);
                let mut outcome = if empty {
                    let mut o =
                        Outcome::reply(texts::empty_result(cx.language), Reason::EmptyResult);
                    o.observation = observe("empty");
                    o
                } else {
                    let mut o = self.reply_from_result(cx, trace, loaded, &result).await;
                    o.observation = observe("non_empty");
                    o
                };
                outcome.set_references = set;
                outcome.clear_references = clear;
                outcome
            }
            Ok(CallResult::Interaction(shaped)) => {
                trace.executed(name, loaded.at.revision, "ok");
                let mut o = interaction_outcome(cx, shaped);
                o.observation = observe(if o.interaction.is_some() {
                    "interaction"
                } else {
                    "not_found"
                });
                o
            }
            Err(CallFailure::ArgumentsInvalid(violations)) => {
                // The guest refused an argument: ask for it, never guess.
                trace.executed(name, loaded.at.revision, "arguments_invalid");
                let properties = arguments::properties(&loaded.offer.input_schema);
                let bad = violations
                    .iter()
                    .find_map(|v| {
                        let top = v.pointer.trim_start_matches('/').split('/').next()?;
                        properties.iter().find(|p| p.name == top)
                    })
                    .or_else(|| {
                        let required = arguments::required(&loaded.offer.input_schema);
                        properties.iter().find(|p| required.contains(&p.name))
                    });
                let mut args = args;
                match bad {
                    Some(property) => {
                        args.remove(property.name);
                        self.ask(cx, loaded, args, property, Question::Candidates(Vec::new()))
                    }
                    None => Outcome::reply(texts::failed(cx.language), Reason::CapabilityFailed)
                        .with_gap("agent_dead_end", "arguments_invalid", Some(name)),
                }
            }
            Err(failure) => {
                let reason = failure.reason_code();
                trace.executed(name, loaded.at.revision, reason);
                let mut o = Outcome::reply(texts::failed(cx.language), Reason::CapabilityFailed)
                    .with_gap("agent_dead_end", reason, Some(name));
                o.observation = observe("failed");
                o
            }
        };
        if matches!(outcome.pending, PendingChange::Keep) {
            // The pending operation (if any) was answered or replaced.
            outcome.pending = PendingChange::Clear;
        }
        outcome.called = called;
        Ok(outcome)
    }

    /// Rule 6: the planner's reply when it is grounded in the result, the
    /// deterministic summary otherwise.
    async fn reply_from_result(
        &self,
        cx: &Context<'_>,
        trace: &mut Trace,
        loaded: &Loaded<'_>,
        result: &Value,
    ) -> Outcome {
        let started = Instant::now();
        let written = self
            .planner
            .reply(&ReplyRequest {
                policy: &cx.policy,
                message: &cx.inbound.body,
                capability: &loaded.offer,
                result,
            })
            .await;
        trace.timing.grounded_inference = started.elapsed();
        let template = || {
            let facts = labelled_facts(
                result,
                &loaded.at.definition.output_schema,
                cx.language,
                &cx.inbound.body,
                &loaded.offer.name,
            );
            texts::result_summary(cx.language, &facts)
        };
        match written {
            Ok(Some(text))
                if reply_is_grounded(&text, result, &cx.inbound.body)
                    && !cx.language.is_plainly_not(&text) =>
            {
                Outcome::reply(text, Reason::Grounded)
            }
            Ok(Some(_)) => {
                // Ungrounded, or in the other language than the
                // conversation's (kept since its first message).
                tracing::warn!(
                    "model reply refused: not grounded in the result or not in the conversation's language"
                );
                Outcome::reply(template(), Reason::GroundedTemplate)
            }
            Ok(None) => Outcome::reply(template(), Reason::Grounded),
            Err(err) => {
                tracing::warn!(error = %err, "grounded reply unavailable; using the template");
                Outcome::reply(template(), Reason::GroundedTemplate)
            }
        }
    }

    async fn record_gap(&self, account: &AccountId, cx: &Context<'_>, gap: &Gap) {
        let mode = match self.store.get_diagnostic_mode(account).await {
            Ok(mode) => mode.unwrap_or_default(),
            Err(err) => {
                tracing::warn!(error = %err, "gap event not recorded");
                return;
            }
        };
        let event = GapEvent {
            id: super::new_id("gap_"),
            kind: gap.kind.to_owned(),
            reason_code: gap.reason.to_owned(),
            conversation_id: Some(cx.conversation_id.clone()),
            capability: gap.capability.clone(),
            message_text: (mode == DiagnosticMode::Text).then(|| cx.inbound.body.clone()),
            occurred_at: now_millis(),
        };
        if let Err(err) = self.store.record_gap_event(account, &event).await {
            tracing::warn!(error = %err, "gap event not recorded");
        }
    }
}

/// How a question names `property`: its description when it is written in
/// the conversation's language; else the lexicon's words for what it names;
/// else its name in words. An English question never embeds "el número de
/// pedido", nor a Spanish one "card".
fn what_to_ask(cx: &Context<'_>, property: &Property<'_>) -> String {
    let name = property.name.replace(['_', '-'], " ");
    match property.description() {
        Some(d) if written_in(d, cx.language) => d.trim_end_matches('.').to_owned(),
        _ => match lexicon::ask_label(&name, cx.language) {
            Some(label) => label.to_owned(),
            None if cx.language == Language::English && !name.starts_with("the ") => {
                format!("the {name}")
            }
            None => name,
        },
    }
}

/// The operations (lexicon concepts) a message names: "devolver", "cancel".
fn asked_operations(message: &str) -> Vec<&'static str> {
    lexicon::concepts(message)
        .into_iter()
        .filter(|c| c.operation)
        .map(|c| c.key)
        .collect()
}

/// Rule 8 for a preparation: the message names no operation, or one the
/// capability speaks of, or the capability speaks of none (a domain the
/// lexicon does not know is never refused for it).
fn prepares_what_was_asked(message: &str, offer: &CapabilityOffer) -> bool {
    let asked = asked_operations(message);
    let mut offered: HashSet<String> = asked_operations(&format!(
        "{} {} {}",
        offer.name.replace(['_', '-'], " "),
        offer.description,
        offer.when_to_use
    ))
    .into_iter()
    .map(str::to_owned)
    .collect();
    // Spanish "devolver" asks for a return or a refund; "refund" only for one.
    lexicon::widen(&mut offered);
    asked.is_empty() || offered.is_empty() || asked.iter().any(|a| offered.contains(*a))
}

/// A value as the user reads it in a question.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Rule 4: the bound reference for `input`, if this conversation holds one.
fn reference_for(cx: &Context<'_>, loaded: &Loaded<'_>, input: &str) -> Option<String> {
    let (from, field) = references::binding(&loaded.at.definition, input)?;
    cx.references
        .iter()
        .find(|r| r.capability == from && r.field == field)
        .map(|r| r.value.clone())
}

/// Rule 3: distinct values for `property` in earlier user messages, most
/// recent first (patterned ones as the guest judged them this turn).
fn history_candidates(
    cx: &Context<'_>,
    patterns: &PatternMatches,
    property: &Property<'_>,
) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for entry in cx.history.iter().rev().filter(|h| h.role == Role::User) {
        for value in property.remembered(&entry.text, patterns) {
            if !out.contains(&value) {
                out.push(value);
            }
        }
    }
    out
}

/// Rules 9 and 10: the closed interaction. Opaque refs go into the response
/// object only; the stored record and the text never carry them.
fn interaction_outcome(cx: &Context<'_>, shaped: ShapedInteraction) -> Outcome {
    if shaped.kind == InteractionKind::NotFound {
        let mut o = Outcome::reply(texts::NOT_FOUND, Reason::NotFound);
        o.pending = PendingChange::Clear;
        return o;
    }
    let public = Value::Object(shaped.public);
    let refs = Value::Object(shaped.refs);
    let interaction_id = super::new_id("int_");
    let operation = public["operation"].as_str().unwrap_or_default().to_owned();
    let now = now_millis();
    let host_expiry = public["expires_at"].as_str().and_then(parse_any_offset);
    if host_expiry.is_some_and(|at| at <= now) {
        // Nothing the user could still confirm: a failed preparation.
        tracing::warn!(operation = %operation, "the host prepared an interaction that had already expired");
        let mut o = Outcome::reply(texts::failed(cx.language), Reason::InteractionExpired)
            .with_gap("agent_dead_end", "interaction_expired", None);
        o.pending = PendingChange::Clear;
        return o;
    }
    let expires_at = host_expiry
        .unwrap_or(now + MAX_INTERACTION_MILLIS)
        .min(now + MAX_INTERACTION_MILLIS);
    let mut object = json!({"interaction_id": interaction_id, "owner": "host"});
    if let (Value::Object(target), Value::Object(fields)) = (&mut object, &public) {
        for (k, v) in fields {
            target.insert(k.clone(), v.clone());
        }
    }
    object["expires_at"] = json!(to_rfc3339(expires_at));
    let (kind, text) = match shaped.kind {
        InteractionKind::Selection => {
            object["selection_ref"] = refs["selection_ref"].clone();
            if let (Some(options), Some(option_refs)) = (
                object["options"].as_array_mut(),
                refs["option_refs"].as_array(),
            ) {
                for (option, r) in options.iter_mut().zip(option_refs) {
                    option["option_ref"] = r.clone();
                }
            }
            let title = public["title"].as_str().unwrap_or_default();
            ("selection", texts::choose_option(cx.language, title))
        }
        _ => {
            object["operation_ref"] = refs["operation_ref"].clone();
            let title = public["preview"]["title"].as_str().unwrap_or_default();
            (
                "confirm_operation",
                texts::confirm_interaction(cx.language, title),
            )
        }
    };
    let mut o = Outcome::reply(text, Reason::InteractionRequired);
    // Built as an object above.
    let response = match object {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    o.interaction = Some(IssuedInteraction {
        response,
        id: interaction_id,
        kind,
        operation,
        expires_at,
    });
    o.pending = PendingChange::Clear;
    o
}

fn parse_any_offset(text: &str) -> Option<i64> {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// The account's policy with platform defaults for what it leaves out
/// (contract 3.3: an absent policy is not an error at runtime).
fn effective_policy(
    policy: Option<&crate::domain::policy::AgentPolicy>,
    language: Language,
) -> EffectivePolicy {
    let topics: Vec<(String, String)> = policy
        .and_then(|p| p.allowed_topics.as_ref())
        .map(|t| {
            t.iter()
                .map(|t| (t.name.clone(), t.description.clone()))
                .collect()
        })
        .unwrap_or_default();
    EffectivePolicy {
        instructions: policy
            .and_then(|p| p.instructions.clone())
            .unwrap_or_else(|| DEFAULT_INSTRUCTIONS.to_owned()),
        out_of_scope_response: policy
            .and_then(|p| p.out_of_scope_response.clone())
            .unwrap_or_else(|| texts::out_of_scope_default(language, &topics)),
        topics,
    }
}

/// Platform default instructions when the account set none.
pub const DEFAULT_INSTRUCTIONS: &str = "Answer in the user's language. Help only with what the \
available capabilities can look up. Ask when information is missing or ambiguous; never invent \
data; never reveal internal identifiers or personal data the user did not provide.";

#[cfg(test)]
mod tests {
    use super::*;

    fn preparation(name: &str, description: &str) -> CapabilityOffer {
        CapabilityOffer {
            name: name.into(),
            description: description.into(),
            when_to_use: String::new(),
            examples: Arc::from(Vec::new()),
            input_schema: Arc::new(json!({})),
            output_schema: Arc::new(json!({})),
            preparation: true,
            fingerprint: Default::default(),
        }
    }

    #[test]
    fn a_preparation_must_prepare_the_operation_asked_for() {
        let ret = preparation("prepare_return", "Prepara la devolución de un pedido");
        let change = preparation("prepare_address_change", "Prepares an address change");
        let unknown = preparation("prepare_thing", "Prepara la gestión solicitada");
        assert!(prepares_what_was_asked(
            "Quiero devolver el pedido A-1",
            &ret
        ));
        assert!(!prepares_what_was_asked(
            "Cancel my order B-2001, please",
            &ret
        ));
        assert!(!prepares_what_was_asked(
            "Quiero devolver el pedido A-1",
            &change
        ));
        assert!(prepares_what_was_asked(
            "Quiero cambiar la dirección",
            &change
        ));
        // A refund is not a return, and a return not a refund; Spanish
        // "devolución" may be either.
        let refund = preparation("prepare_refund", "Refunds the amount paid for an order");
        assert!(!prepares_what_was_asked(
            "Please refund my order A-1001",
            &ret
        ));
        assert!(!prepares_what_was_asked(
            "I want to return order A-1",
            &refund
        ));
        assert!(prepares_what_was_asked(
            "Please refund my order A-1001",
            &refund
        ));
        assert!(prepares_what_was_asked(
            "Quiero la devolución del pedido A-1",
            &refund
        ));
        // No operation named, or none the capability speaks of: not refused here.
        assert!(prepares_what_was_asked("Hazlo con el pedido A-1", &ret));
        assert!(prepares_what_was_asked("Cancel my order B-2001", &unknown));
    }
}
