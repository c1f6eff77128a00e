//! `match-pattern` in batches: a turn's pattern questions answered in one
//! trip, the guest asked once per distinct schema text, its verdicts
//! remembered per token ([`PatternMemo`]). The memo holds verdicts, never
//! patterns: a tenant's pattern still runs only in the guest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use warden_host::{Sandbox, SandboxError, SchemaRef, Violation};

use super::dispatch::{
    INLINE_BUDGET, INLINE_INPUT_BYTES, SlowSchemas, ThreadCpu, guest_fault, guest_span,
    judge_overrun,
};
use super::{PolicySandbox, scope};
use crate::domain::account::AccountId;

/// One `match-pattern` question of a batch.
pub struct PatternQuestion {
    /// The guest's cache key for the schema (capability revision).
    pub schema_key: String,
    pub input_schema: Arc<str>,
    pub property: String,
    pub candidates: Vec<String>,
}

/// The guest's answer to one question: the indexes of the matching candidates.
pub type PatternVerdict = Result<Result<Vec<usize>, Vec<Violation>>, SandboxError>;

/// How long one batch may keep asking the guest (each call also has the
/// sandbox's own deadline); questions left are answered with a deadline
/// error, which the agent treats as "nothing matches".
const PATTERN_BATCH_BUDGET: Duration = Duration::from_millis(250);

/// The guest's verdicts remembered: (account scope, schema text, property)
/// → token → matches. The guest is a pure function of its inputs (it links
/// no import: no clock, no randomness), so the same question gets the same
/// answer; the schema *text* is the key, not the capability, so capabilities
/// sharing a schema share verdicts. Bounded: cleared whole when full.
#[derive(Default)]
pub struct PatternMemo {
    by_schema: HashMap<(String, Arc<str>, String), HashMap<String, bool>>,
    tokens: usize,
}

/// Tokens remembered at most, over all accounts (a few MiB).
const PATTERN_MEMO_TOKENS: usize = 100_000;

impl PatternMemo {
    pub(super) fn get(&self, key: &(String, Arc<str>, String)) -> Option<&HashMap<String, bool>> {
        self.by_schema.get(key)
    }

    pub(super) fn put(&mut self, key: (String, Arc<str>, String), verdicts: Vec<(String, bool)>) {
        if self.tokens + verdicts.len() > PATTERN_MEMO_TOKENS {
            self.by_schema.clear();
            self.tokens = 0;
        }
        let known = self.by_schema.entry(key).or_default();
        for (token, matched) in verdicts {
            if known.insert(token, matched).is_none() {
                self.tokens += 1;
            }
        }
    }
}

impl PolicySandbox {
    /// Many [`Self::match_pattern`] questions in one trip to the blocking
    /// pool, answered in order. Tokens the guest already judged against the
    /// same schema text and property come from the memo; the rest go to the
    /// guest, once per distinct schema text, within [`PATTERN_BATCH_BUDGET`].
    pub async fn match_patterns(
        &self,
        account: &AccountId,
        questions: Vec<PatternQuestion>,
    ) -> Vec<PatternVerdict> {
        let scope = scope(account);
        let count = questions.len();
        let span = guest_span("match-pattern");
        let started = Instant::now();
        // Where it is asked first: usually every token is in the memo, or
        // the few new ones are short calls.
        let inline = answer_batch(
            &self.inline,
            &scope,
            &self.memo,
            &questions,
            BatchMode::Inline { slow: &self.slow },
        );
        let verdicts = match inline {
            Ok(verdicts) => verdicts,
            Err(Unfinished { overran }) => {
                if let Some(Overrun { schema_key, cpu }) = overran {
                    judge_overrun(&self.slow, "match-pattern", &scope, &schema_key, cpu.used());
                }
                // The rest on the blocking pool; verdicts found inline are
                // in the memo by now.
                let (sandbox, memo) = (self.sandbox.clone(), self.memo.clone());
                tokio::task::spawn_blocking(move || {
                    // The pool's batch always finishes (`Unfinished` is
                    // the inline mode's); were it not to, nothing is lost.
                    answer_batch(&sandbox, &scope, &memo, &questions, BatchMode::Pool)
                        .unwrap_or_else(|_| unavailable(count, "the batch did not finish"))
                })
                .await
                .unwrap_or_else(|join| {
                    unavailable(count, &format!("sandbox call panicked: {join}"))
                })
            }
        };
        drop(span);
        // One batch, one observation: its worst verdict.
        let outcome = verdicts
            .iter()
            .find_map(|v| v.as_ref().err().map(guest_fault))
            .or_else(|| {
                verdicts
                    .iter()
                    .any(|v| matches!(v, Ok(Err(_))))
                    .then_some("refused")
            })
            .unwrap_or("ok");
        crate::metrics::guest_call("match-pattern", outcome, started.elapsed());
        verdicts
    }
}

/// Where a batch of pattern questions is answered.
#[derive(Clone, Copy)]
enum BatchMode<'a> {
    /// On the blocking pool: every question answered within
    /// [`PATTERN_BATCH_BUDGET`], those left over with a deadline error.
    Pool,
    /// Where it is asked, with the [`INLINE_BUDGET`] sandbox: stops, to be
    /// finished on the pool, at the first question that is not short (its
    /// inputs, or its schema known slow), overruns, or finds the batch's
    /// time spent.
    Inline { slow: &'a Mutex<SlowSchemas> },
}

/// An inline batch left for the pool; `overran` is the guest call that
/// overran the budget, if that was why.
struct Unfinished {
    overran: Option<Overrun>,
}

/// The schema whose inline guest call overran, and the thread's CPU clock
/// read just before that call (read only when the guest is asked: a batch
/// answered from the memo costs no system call).
struct Overrun {
    schema_key: String,
    cpu: ThreadCpu,
}

fn answer_batch(
    sandbox: &Sandbox,
    scope: &str,
    memo: &Mutex<PatternMemo>,
    questions: &[PatternQuestion],
    mode: BatchMode<'_>,
) -> Result<Vec<PatternVerdict>, Unfinished> {
    let started = Instant::now();
    // Verdicts found in this batch, for questions repeating an earlier one.
    let mut fresh = FreshVerdicts::new();
    let mut out = Vec::with_capacity(questions.len());
    for q in questions {
        let key = (scope.to_owned(), q.input_schema.clone(), q.property.clone());
        let known = |token: &str| -> Option<bool> {
            if let Some(v) = fresh.get(&key).and_then(|m| m.get(token)) {
                return Some(*v);
            }
            let memo = memo.lock().ok()?;
            memo.get(&key).and_then(|m| m.get(token)).copied()
        };
        let verdicts: Vec<Option<bool>> = q.candidates.iter().map(|c| known(c)).collect();
        let unknown: Vec<&String> = q
            .candidates
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.is_none())
            .map(|(c, _)| c)
            .collect();
        let asked = if unknown.is_empty() {
            Vec::new()
        } else {
            match mode {
                BatchMode::Inline { slow } => {
                    let size =
                        q.input_schema.len() + unknown.iter().map(|c| c.len()).sum::<usize>();
                    let known_slow = slow
                        .lock()
                        .map(|slow| slow.contains(scope, &q.schema_key))
                        .unwrap_or(true);
                    if size > INLINE_INPUT_BYTES || known_slow || started.elapsed() > INLINE_BUDGET
                    {
                        return Err(Unfinished { overran: None });
                    }
                }
                BatchMode::Pool if started.elapsed() > PATTERN_BATCH_BUDGET => {
                    out.push(Err(SandboxError::Deadline(PATTERN_BATCH_BUDGET)));
                    continue;
                }
                BatchMode::Pool => {}
            }
            let cpu = matches!(mode, BatchMode::Inline { .. }).then(ThreadCpu::start);
            match ask_guest(sandbox, scope, memo, &mut fresh, &key, q, &unknown) {
                Ok(Ok(answered)) => answered,
                // Only the inline handle stops at a budget.
                Err(SandboxError::OverBudget(_)) => {
                    return Err(Unfinished {
                        overran: cpu.map(|cpu| Overrun {
                            schema_key: q.schema_key.clone(),
                            cpu,
                        }),
                    });
                }
                Ok(Err(violations)) => {
                    out.push(Ok(Err(violations)));
                    continue;
                }
                Err(err) => {
                    out.push(Err(err));
                    continue;
                }
            }
        };
        let matched = q
            .candidates
            .iter()
            .zip(verdicts)
            .enumerate()
            .filter(|(_, (c, v))| v.unwrap_or_else(|| asked.iter().any(|(t, m)| *m && t == *c)))
            .map(|(i, _)| i)
            .collect();
        out.push(Ok(Ok(matched)));
    }
    Ok(out)
}

/// What the memo is keyed by: (account scope, schema text, property).
type MemoKey = (String, Arc<str>, String);

/// The verdicts a batch found, by memo key and token.
type FreshVerdicts = HashMap<MemoKey, HashMap<String, bool>>;

/// The guest's verdict on each asked token, or its refusal.
type Answered = Result<Vec<(String, bool)>, Vec<Violation>>;

/// Asks the guest about a question's `unknown` tokens; what it answers is
/// remembered in the memo and in `fresh`. Refusals and faults are not
/// remembered: they are asked again next turn.
fn ask_guest(
    sandbox: &Sandbox,
    scope: &str,
    memo: &Mutex<PatternMemo>,
    fresh: &mut FreshVerdicts,
    key: &MemoKey,
    q: &PatternQuestion,
    unknown: &[&String],
) -> Result<Answered, SandboxError> {
    let schema = SchemaRef {
        key: &q.schema_key,
        text: &q.input_schema,
    };
    let indexes = match sandbox.match_pattern(scope, schema, &q.property, unknown)? {
        Ok(indexes) => indexes,
        Err(violations) => return Ok(Err(violations)),
    };
    let answered: Vec<(String, bool)> = unknown
        .iter()
        .enumerate()
        .map(|(i, c)| ((*c).clone(), indexes.contains(&i)))
        .collect();
    if let Ok(mut memo) = memo.lock() {
        memo.put(key.clone(), answered.clone());
    }
    fresh
        .entry(key.clone())
        .or_default()
        .extend(answered.iter().cloned());
    Ok(Ok(answered))
}

/// `count` verdicts saying the sandbox could not answer.
fn unavailable(count: usize, why: &str) -> Vec<PatternVerdict> {
    (0..count)
        .map(|_| Err(SandboxError::Unavailable(why.to_owned())))
        .collect()
}
