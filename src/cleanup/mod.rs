//! Clean-up of dictated text: the user's replacements and an optional language-model pass,
//! stored beside the spoken words and checked before anything is delivered.
//!
//! ```text
//!  spoken messages (committed) ──► replacements (instant) ──► model (optional, deadline)
//!                                        │                        │ extract → guard
//!                                        ▼                        ▼
//!                             persyk.cleanup / persyk.cleanup-attempt entries at the tip
//! ```
//!
//! Invariants:
//! - What was spoken is canonical: the recognizer's `message` entries are committed before a
//!   clean-up starts, and nothing here rewrites them ([`record`]).
//! - Never instead of the words: a model is asked only about more than [`MIN_WORDS`] - 1
//!   words; its result is delivered only when it arrives within the deadline, was not
//!   cancelled, and passes the fidelity guard ([`guard`]). In every other case the spoken
//!   words (after replacements) are delivered at once, with a reason code.
//! - Never slower than the words: [`Job::wait`] returns by the deadline or at the cancel,
//!   whichever comes first, whatever the server does; the request itself runs on its own
//!   thread under the client's total timeout, and a result that comes after the wait gave
//!   up is stored with `delivery: "late"` (or as an attempt, if the guard refuses it).
//! - Exactly one writer decides "delivered or late" for a model result: the worker, under the
//!   job's state lock, so a result racing the deadline is never both pasted and stored late.
//! - No dictated text in codes, errors or attempt entries.

pub mod client;
pub mod controls;
pub mod diff;
pub mod guard;
pub mod prompt;
pub mod record;
pub mod replace;
pub mod settings;

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::session::format::EntryBody;
use crate::session::store::SessionHandle;

use client::{Client, max_tokens_for};
use prompt::ModelMode;
use record::{Delivery, Engine, Provenance, SourceRef, append_at_tip};
use replace::Replacements;

/// The default delivery deadline for a model clean-up.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(3);
/// The fewest words worth a model clean-up (three words or fewer are delivered as spoken).
pub const MIN_WORDS: usize = 4;
/// How long the wait takes a result the worker already claimed for delivery (it is being
/// written to the session).
const CLAIMED_GRACE: Duration = Duration::from_secs(5);

/// A model pass: which mode, through which server.
#[derive(Debug, Clone)]
pub struct ModelSetup {
    pub mode: ModelMode,
    pub client: Arc<Client>,
}

/// What to do after a dictation.
#[derive(Debug, Clone)]
pub struct Cleaner {
    pub replacements: Replacements,
    pub model: Option<ModelSetup>,
    pub deadline: Duration,
}

impl Default for Cleaner {
    fn default() -> Cleaner {
        Cleaner {
            replacements: Replacements::default(),
            model: None,
            deadline: DEFAULT_DEADLINE,
        }
    }
}

/// One spoken message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub id: String,
    pub text: String,
}

/// Which text was delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chosen {
    /// The words as recognized.
    Spoken,
    /// The words after the replacements.
    Replaced,
    /// The model's clean-up.
    Model,
}

/// The outcome of [`Job::wait`].
#[derive(Debug, Clone, PartialEq)]
pub struct Cleaned {
    /// What to copy or paste.
    pub text: String,
    pub chosen: Chosen,
    /// Why the model's clean-up was not delivered (`cleanup.timeout`,
    /// `cleanup.words-missing`, …); `None` when it was, or when no model was asked.
    pub reason: Option<&'static str>,
    /// A store failure while writing the clean-up entries (the delivery happens anyway).
    pub store_error: Option<&'static str>,
    /// From stop of the words to this result.
    pub latency: Duration,
    /// The guard's figures for the model's reply, when there was one in time.
    pub fidelity: Option<guard::Fidelity>,
}

/// What became of a model result that arrived after [`Job::wait`] returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Late {
    /// Stored as a `persyk.cleanup` with `delivery: "late"`.
    Stored { entry_id: String },
    /// Refused or failed; stored as an attempt with this code.
    Attempt { reason: &'static str },
    /// Could not be written.
    StoreFailed { code: &'static str },
}

type LateHook = Box<dyn FnOnce(Late) + Send>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Waiting,
    /// The worker claimed its result for delivery.
    Claimed,
    /// The waiter gave up (deadline or cancel).
    GaveUp,
}

struct Shared {
    phase: Mutex<Phase>,
}

enum Msg {
    /// The worker's result, already stored.
    Done(Box<WorkerResult>),
    Cancel,
}

struct WorkerResult {
    outcome: Result<String, &'static str>,
    fidelity: Option<guard::Fidelity>,
    store_error: Option<&'static str>,
}

/// A clean-up in progress.
pub struct Job {
    started: Instant,
    deadline: Duration,
    spoken: String,
    replaced: String,
    replaced_count: usize,
    provenance_base: Provenance,
    handle: SessionHandle,
    model_running: Option<(Receiver<Msg>, Arc<Shared>)>,
    cancel: Sender<Msg>,
    /// Why no model ran although one is set up ("too few words").
    skipped: Option<&'static str>,
    /// The provenance of the model pass (mode, prompt hash, engine), when one runs.
    model_provenance: Option<Provenance>,
}

/// Cancels a waiting [`Job`] (Esc during "Cleaning…"): the spoken words are delivered.
#[derive(Clone)]
pub struct Canceller(Sender<Msg>);

impl Canceller {
    pub fn cancel(&self) {
        let _ = self.0.send(Msg::Cancel);
    }
}

impl Cleaner {
    /// Starts the clean-up of `sources` (committed messages of the session behind
    /// `handle`, in order). `on_late` hears about a model result that arrives after
    /// [`Job::wait`] gave up; it runs on the worker thread.
    pub fn start(
        &self,
        handle: &SessionHandle,
        sources: &[Source],
        on_late: Option<LateHook>,
    ) -> Job {
        let started = Instant::now();
        let spoken = sources
            .iter()
            .map(|s| s.text.trim())
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let applied = self.replacements.apply(&spoken);
        let base = Provenance {
            sources: sources
                .iter()
                .map(|s| SourceRef::new(s.id.clone(), &s.text))
                .collect(),
            input_sha256: record::sha256_hex(&spoken),
            mode: "replacements".to_owned(),
            prompt_sha256: None,
            engine: Engine {
                kind: "replacements".to_owned(),
                model: None,
                location: None,
            },
            latency_ms: 0,
            fidelity: None,
            replacements: Some(applied.count),
        };
        let (tx, rx) = mpsc::channel();
        let mut job = Job {
            started,
            deadline: self.deadline,
            spoken,
            replaced: applied.text,
            replaced_count: applied.count,
            provenance_base: base,
            handle: handle.clone(),
            model_running: None,
            cancel: tx.clone(),
            skipped: None,
            model_provenance: None,
        };
        let Some(model) = &self.model else {
            return job;
        };
        if replace::words(&job.replaced).len() < MIN_WORDS {
            job.skipped = Some("cleanup.too-short");
            return job;
        }
        let mut provenance = job.provenance_base.clone();
        provenance.mode = model.mode.name();
        // The prompt hash does not depend on the transcript or the nonce.
        provenance.prompt_sha256 = Some(prompt::build(&model.mode, "", "-").sha256);
        provenance.engine = Engine {
            kind: "openai-compatible".to_owned(),
            model: Some(model.client.config().model.clone()),
            location: Some(model.client.location().to_owned()),
        };
        job.model_provenance = Some(provenance.clone());
        let shared = Arc::new(Shared {
            phase: Mutex::new(Phase::Waiting),
        });
        let worker = Worker {
            model: model.clone(),
            input: job.replaced.clone(),
            provenance,
            handle: handle.clone(),
            shared: shared.clone(),
            started,
            tx,
            on_late,
        };
        let spawned = std::thread::Builder::new()
            .name("persyk-cleanup".into())
            .spawn(move || worker.run());
        match spawned {
            Ok(_) => job.model_running = Some((rx, shared)),
            Err(_) => job.skipped = Some("cleanup.no-thread"),
        }
        job
    }
}

impl Job {
    pub fn canceller(&self) -> Canceller {
        Canceller(self.cancel.clone())
    }

    /// Whether a model is being asked (the window says "Cleaning…" meanwhile).
    pub fn asks_a_model(&self) -> bool {
        self.model_running.is_some()
    }

    /// Waits for the clean-up until the deadline or a cancel and says what to deliver.
    pub fn wait(self) -> Cleaned {
        let Some((rx, shared)) = &self.model_running else {
            return self.without_model(self.skipped, None);
        };
        let end = self.started + self.deadline;
        let left = end.saturating_duration_since(Instant::now());
        let gave_up = match rx.recv_timeout(left) {
            Ok(Msg::Done(result)) => return self.with_worker_result(*result),
            Ok(Msg::Cancel) => "cleanup.cancelled",
            Err(RecvTimeoutError::Timeout) => "cleanup.timeout",
            // Unreachable while the job holds a sender; kept total.
            Err(RecvTimeoutError::Disconnected) => "cleanup.worker-failed",
        };
        let mut phase = lock(&shared.phase);
        if *phase == Phase::Claimed {
            // The result won the race and is being stored as delivered: take it (a cancel
            // queued before it is moot).
            drop(phase);
            let until = Instant::now() + CLAIMED_GRACE;
            while let Ok(msg) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                if let Msg::Done(result) = msg {
                    return self.with_worker_result(*result);
                }
            }
            return self.without_model(Some("cleanup.worker-failed"), None);
        }
        *phase = Phase::GaveUp;
        drop(phase);
        let mut cleaned = self.without_model(Some(gave_up), None);
        if let Some(p) = &self.model_provenance {
            let mut p = p.clone();
            p.latency_ms = self.started.elapsed().as_millis() as u64;
            let attempt = record::attempt_entry(gave_up, &p);
            let attempt_error = append_at_tip(&self.handle, attempt).err().map(|e| e.code());
            cleaned.store_error = cleaned.store_error.or(attempt_error);
        }
        cleaned
    }

    fn with_worker_result(&self, result: WorkerResult) -> Cleaned {
        match result.outcome {
            Ok(text) => Cleaned {
                text,
                chosen: Chosen::Model,
                reason: None,
                store_error: result.store_error,
                latency: self.started.elapsed(),
                fidelity: result.fidelity,
            },
            Err(reason) => {
                let mut cleaned = self.without_model(Some(reason), result.fidelity);
                cleaned.store_error = cleaned.store_error.or(result.store_error);
                cleaned
            }
        }
    }

    /// Delivers the words after replacements, storing them when the replacements changed
    /// anything.
    fn without_model(
        &self,
        reason: Option<&'static str>,
        fidelity: Option<guard::Fidelity>,
    ) -> Cleaned {
        let mut store_error = None;
        let chosen = if self.replaced_count > 0 {
            let mut p = self.provenance_base.clone();
            p.latency_ms = self.started.elapsed().as_millis() as u64;
            let entry = record::cleanup_entry(&self.replaced, &p, Delivery::Delivered, false);
            store_error = append_at_tip(&self.handle, entry).err().map(|e| e.code());
            Chosen::Replaced
        } else {
            Chosen::Spoken
        };
        Cleaned {
            text: if self.replaced_count > 0 {
                self.replaced.clone()
            } else {
                self.spoken.clone()
            },
            chosen,
            reason,
            store_error,
            latency: self.started.elapsed(),
            fidelity,
        }
    }
}

struct Worker {
    model: ModelSetup,
    input: String,
    provenance: Provenance,
    handle: SessionHandle,
    shared: Arc<Shared>,
    started: Instant,
    tx: Sender<Msg>,
    on_late: Option<LateHook>,
}

/// One model pass over `input`: the request, the reply's text, the guard.
struct Answer {
    /// The clean-up, or why there is none (a client or guard code).
    outcome: Result<String, &'static str>,
    /// What the guard found (absent when no reply came).
    report: Option<guard::Report>,
    /// The model's text as the guard judged it, refused or not (for `persyk cleanup` only).
    text: Option<String>,
}

fn ask(model: &ModelSetup, input: &str, quote: bool) -> Answer {
    let nonce = prompt::nonce();
    let built = prompt::build(&model.mode, input, &nonce);
    let reply = match model.client.complete(&built, max_tokens_for(input)) {
        Ok(reply) => reply,
        Err(e) => {
            return Answer {
                outcome: Err(e.code()),
                report: None,
                text: None,
            };
        }
    };
    let text = reply
        .schema_sent
        .then(|| prompt::structured_text(&reply.content))
        .flatten()
        .unwrap_or_else(|| {
            let plain = prompt::extract(&reply.content, &nonce, input);
            // A structured reply in a code fence is still structured.
            prompt::structured_text(&plain).unwrap_or(plain)
        });
    // Controls and bidi overrides never reach the guard, the clipboard or the file.
    let text = controls::strip(&text);
    let strictness = model.mode.strictness();
    let report = if quote {
        guard::report(input, &text, strictness)
    } else {
        let (fidelity, verdict) = guard::check(input, &text, strictness);
        guard::Report {
            fidelity,
            verdict,
            edits: Vec::new(),
        }
    };
    Answer {
        outcome: report
            .verdict
            .map(|()| text.clone())
            .map_err(guard::Rejection::code),
        report: Some(report),
        text: quote.then_some(text),
    }
}

/// What a clean-up would deliver, written nowhere (`persyk cleanup`).
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// What would be copied or pasted.
    pub text: String,
    pub chosen: Chosen,
    /// Why the model's clean-up would not be delivered; `None` when it would be, or when no
    /// model was asked.
    pub reason: Option<&'static str>,
    /// What the guard found in the model's reply, edits quoted.
    pub report: Option<guard::Report>,
    /// The model's clean-up as judged, whether delivered or refused.
    pub model_text: Option<String>,
    pub latency: Duration,
}

impl Cleaner {
    /// The clean-up of `spoken` as a dictation would get it — replacements, the model within
    /// the deadline, the guard — with nothing stored. A reply after the deadline is dropped.
    pub fn preview(&self, spoken: &str) -> Preview {
        let started = Instant::now();
        let applied = self.replacements.apply(spoken.trim());
        let (fallback, chosen) = if applied.count > 0 {
            (applied.text.clone(), Chosen::Replaced)
        } else {
            (spoken.trim().to_owned(), Chosen::Spoken)
        };
        let as_spoken = |reason: Option<&'static str>, answer: Option<Answer>| {
            let (report, model_text) = answer.map_or((None, None), |a| (a.report, a.text));
            Preview {
                text: fallback.clone(),
                chosen,
                reason,
                report,
                model_text,
                latency: started.elapsed(),
            }
        };
        let Some(model) = &self.model else {
            return as_spoken(None, None);
        };
        if replace::words(&applied.text).len() < MIN_WORDS {
            return as_spoken(Some("cleanup.too-short"), None);
        }
        let (tx, rx) = mpsc::channel();
        let (model, input) = (model.clone(), applied.text.clone());
        let spawned = std::thread::Builder::new()
            .name("persyk-cleanup".into())
            .spawn(move || {
                let _ = tx.send(ask(&model, &input, true));
            });
        if spawned.is_err() {
            return as_spoken(Some("cleanup.no-thread"), None);
        }
        let left = (started + self.deadline).saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Answer {
                outcome: Ok(text),
                report,
                text: model_text,
            }) => Preview {
                text,
                chosen: Chosen::Model,
                reason: None,
                report,
                model_text,
                latency: started.elapsed(),
            },
            Ok(
                answer @ Answer {
                    outcome: Err(code), ..
                },
            ) => as_spoken(Some(code), Some(answer)),
            Err(RecvTimeoutError::Timeout) => as_spoken(Some("cleanup.timeout"), None),
            Err(RecvTimeoutError::Disconnected) => as_spoken(Some("cleanup.worker-failed"), None),
        }
    }
}

impl Worker {
    fn run(self) {
        let answer = ask(&self.model, &self.input, false);
        let latency_ms = self.started.elapsed().as_millis() as u64;
        let strictness = self.model.mode.strictness();
        let outcome = answer.outcome;
        let fidelity = answer.report.map(|r| r.fidelity);
        let mut provenance = self.provenance;
        provenance.latency_ms = latency_ms;
        provenance.fidelity = fidelity;

        // Claim delivery, or learn that the waiter gave up.
        let delivered = {
            let mut phase = lock(&self.shared.phase);
            if *phase == Phase::Waiting {
                *phase = Phase::Claimed;
                true
            } else {
                false
            }
        };
        let body: EntryBody = match &outcome {
            Ok(text) => record::cleanup_entry(
                text,
                &provenance,
                if delivered {
                    Delivery::Delivered
                } else {
                    Delivery::Late
                },
                strictness.rewrites(),
            ),
            Err(reason) => record::attempt_entry(reason, &provenance),
        };
        let written = append_at_tip(&self.handle, body);
        if delivered {
            let store_error = written.as_ref().err().map(|e| e.code());
            let _ = self.tx.send(Msg::Done(Box::new(WorkerResult {
                outcome,
                fidelity,
                store_error,
            })));
        } else if let Some(hook) = self.on_late {
            hook(match (written, outcome) {
                (Err(e), _) => Late::StoreFailed { code: e.code() },
                (Ok(entry_id), Ok(_)) => Late::Stored { entry_id },
                (Ok(_), Err(reason)) => Late::Attempt { reason },
            });
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
