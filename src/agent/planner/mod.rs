//! Planners: what to do with one user turn. A planner only *proposes*
//! (call one capability with arguments, ask, answer); the engine
//! (`crate::agent::engine`) enforces every runtime rule of contract section 1
//! on the proposal, whichever planner made it, so a model cannot break them.
//!
//! Two planners, chosen by configuration (`crate::cli::PlannerArgs`):
//! - [`builtin`]: deterministic, no network, the default;
//! - [`openai`]: any OpenAI-compatible chat-completions backend.

pub mod builtin;
pub mod openai;

use serde_json::{Map, Value};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::agent::language::{Language, Said, texts};
use crate::agent::verdicts::PatternMatches;
use crate::domain::message::MessageRole;
use crate::domain::policy::AgentPolicy;

use crate::channel::image::InboundImage;

/// A capability as a planner sees it: no id, no URL, no credential, no
/// revision (contract 1, rule 5). `name` is the tool name. The engine keeps
/// one per capability revision (`crate::agent::catalog`), so a turn copies
/// none.
#[derive(Debug, Clone)]
pub struct CapabilityOffer {
    pub name: String,
    pub description: String,
    pub when_to_use: String,
    /// The definition's `examples` entries, as published.
    pub examples: Arc<[Value]>,
    pub input_schema: Arc<Value>,
    /// What the capability returns: the built-in planner reads its field
    /// names and descriptions ("what tier is it?" asks the capability that
    /// returns a tier). Not sent to a model.
    pub output_schema: Arc<Value>,
    /// `result_handling: host_interaction`: a preparation capability, to be
    /// proposed only after the user expresses an operation intent (rule 8).
    pub preparation: bool,
    /// What the offer says, hashed on first use ([`CapabilityOffer::fingerprint`]).
    pub fingerprint: OfferFingerprint,
}

/// An offer's content hashed with keys random to this process, 128 bits:
/// the built-in planner keys what it derives from offers by it, across
/// turns and accounts, and a tenant cannot craft an offer colliding with
/// another account's without knowing the keys. Never sent anywhere.
#[derive(Debug, Clone, Default)]
pub struct OfferFingerprint(OnceLock<[u64; 2]>);

impl CapabilityOffer {
    /// Computed once per offer (an offer lives as long as its revision).
    pub fn fingerprint(&self) -> [u64; 2] {
        *self.fingerprint.0.get_or_init(|| {
            let [a, b] = fingerprint_keys();
            let hash = |keys: &std::hash::RandomState| {
                let mut h = keys.build_hasher();
                self.name.hash(&mut h);
                self.description.hash(&mut h);
                self.when_to_use.hash(&mut h);
                for example in self.examples.iter() {
                    example.to_string().hash(&mut h);
                }
                self.input_schema.to_string().hash(&mut h);
                self.output_schema.to_string().hash(&mut h);
                self.preparation.hash(&mut h);
                h.finish()
            };
            [hash(a), hash(b)]
        })
    }
}

/// Two independent process-random SipHash keys.
pub fn fingerprint_keys() -> &'static [std::hash::RandomState; 2] {
    static KEYS: OnceLock<[std::hash::RandomState; 2]> = OnceLock::new();
    KEYS.get_or_init(|| [std::hash::RandomState::new(), std::hash::RandomState::new()])
}

/// An offer with this turn's pattern verdicts for it: the words (message
/// and history) the policy guest judged to match a patterned input
/// property, which is how a planner fills such a property without running
/// the tenant's pattern. The engine asks the guest only about the offers
/// the planner will look at ([`Planner::consults`]); the others carry no
/// verdicts. Never sent to a model.
#[derive(Debug, Clone, Copy)]
pub struct Offered<'a> {
    pub offer: &'a CapabilityOffer,
    pub patterns: &'a PatternMatches,
}

impl std::ops::Deref for Offered<'_> {
    type Target = CapabilityOffer;

    fn deref(&self) -> &CapabilityOffer {
        self.offer
    }
}

/// One earlier message of the conversation, oldest first. Never holds an
/// opaque reference, an image or a raw result (rules 10, 11).
#[derive(Debug, Clone)]
pub struct HistoryEntry {
    pub role: MessageRole,
    pub text: String,
}

/// The account's agent policy with platform defaults filled in.
#[derive(Debug, Clone)]
pub struct EffectivePolicy {
    pub instructions: String,
    /// `(name, description)`; empty means no topic restriction.
    pub topics: Vec<(String, String)>,
    pub out_of_scope_response: String,
}

/// Platform default instructions when the account set none.
pub const DEFAULT_INSTRUCTIONS: &str = "Answer in the user's language. Help only with what the \
available capabilities can look up. Ask when information is missing or ambiguous; never invent \
data; never reveal internal identifiers or personal data the user did not provide.";

impl EffectivePolicy {
    /// The account's policy with platform defaults for what it leaves out
    /// (contract 3.3: an absent policy is not an error at runtime).
    pub fn with_defaults(policy: Option<&AgentPolicy>, language: Language) -> Self {
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
}

pub struct PlanRequest<'a> {
    pub policy: &'a EffectivePolicy,
    /// The account's active capabilities, already filtered by the engine.
    pub capabilities: &'a [Offered<'a>],
    /// Bounded history, oldest first, without the current message.
    pub history: &'a [HistoryEntry],
    /// The message, read once for the turn.
    pub said: &'a Said,
    /// Held in memory for this turn only.
    pub image: Option<&'a InboundImage>,
    /// The capability the conversation's last call used (by name): a short
    /// follow-up ("¿Y cuándo cierra?") stays with its family.
    pub previous_capability: Option<&'a str>,
}

/// What a planner proposes for a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Call one capability (by name) with these arguments. The engine checks
    /// the name, drops ungrounded values and asks for what is missing.
    Call {
        capability: String,
        arguments: Map<String, Value>,
    },
    /// Reply without calling anything (greeting, clarification of intent).
    /// The engine refuses text that carries data no capability returned.
    Answer { text: String },
    /// The message is outside the policy's topics.
    OutOfScope,
    /// In scope, but no capability fits: a coverage gap.
    NoCapability,
}

#[derive(Debug, Clone)]
pub struct PlanOutcome {
    pub plan: Plan,
    /// Inference calls made (0 for the built-in planner).
    pub attempts: u32,
    /// Time spent waiting between retried inference calls.
    pub retry_delay: Duration,
}

/// The second step of a turn: a reply written from the pruned result only.
pub struct ReplyRequest<'a> {
    pub policy: &'a EffectivePolicy,
    pub message: &'a str,
    pub capability: &'a CapabilityOffer,
    /// The pruned, validated result (never raw, never with opaque refs).
    pub result: &'a Value,
}

#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    /// The backend is down, timed out or answered garbage: 503
    /// `INFERENCE_UNAVAILABLE`.
    #[error("the inference backend is unavailable: {0}")]
    Unavailable(String),
}

/// The configured planner (enum dispatch: no boxed futures on the hot path).
#[derive(Clone)]
pub enum Planner {
    Builtin(builtin::BuiltinPlanner),
    OpenAi(openai::OpenAiPlanner),
}

impl Planner {
    /// Which of `request.capabilities` (indexes) this planner reads pattern
    /// verdicts of, so the engine asks the guest about those only (a turn
    /// with 1,000 capabilities asks about the few that share a word with
    /// the message). The model sees no verdicts; the engine judges what it
    /// proposes to call.
    pub fn consults(&self, request: &PlanRequest<'_>) -> Vec<usize> {
        match self {
            Planner::Builtin(_) => builtin::consults(request),
            Planner::OpenAi(_) => Vec::new(),
        }
    }

    pub async fn plan(&self, request: &PlanRequest<'_>) -> Result<PlanOutcome, PlannerError> {
        match self {
            Planner::Builtin(p) => Ok(p.plan(request)),
            Planner::OpenAi(p) => p.plan(request).await,
        }
    }

    /// A grounded reply, or `None` to let the engine use its deterministic
    /// template (the built-in planner always does).
    pub async fn reply(&self, request: &ReplyRequest<'_>) -> Result<Option<String>, PlannerError> {
        match self {
            Planner::Builtin(_) => Ok(None),
            Planner::OpenAi(p) => p.reply(request).await.map(Some),
        }
    }

    /// The model name reported in benchmark observations.
    pub fn model(&self) -> &str {
        match self {
            Planner::Builtin(_) => builtin::MODEL_NAME,
            Planner::OpenAi(p) => p.model(),
        }
    }
}

/// Arguments as a JSON object map.
pub type Arguments = Map<String, Value>;
