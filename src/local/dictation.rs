//! Live on-device dictation: the engine the recording pipeline feeds instead of the Realtime
//! provider when recognition is local.
//!
//! ```text
//!  pipeline chunks ─► intake thread ─► pending audio (every sample) ─► recognizer thread
//!   (bounded)          Segmenter: where      + pause cuts                (windows ≤ 25/29 s,
//!                      the pauses are                                     timed segments,
//!                                                                         commit rule)
//!                                                    view (watch): provisional, messages
//! ```
//!
//! Every sample of the recording reaches the recognizer: the voice-activity rule only says
//! where a window may end (a pause), never what is heard — Whisper tells speech from noise
//! and silence itself, at any level. The recognizer thread takes the audio not yet committed
//! as a window: up to a pause the segmenter saw ([`MIN_WINDOW_MS`] or more), or, while the
//! user keeps talking, everything so far once [`STEP_MS`] of new audio arrived (at most
//! [`MAX_WINDOW_MS`]; a file's windows up to [`file_window_ms`]). Each window is decoded into
//! timed segments with whisper.cpp's full window, and [`commit_rule`] decides what is final:
//! a window that ends in a pause or at the stop commits all of it; an open one commits every
//! segment but the last, which is decoded again with what follows (so a word is never cut at
//! a window's edge). The committed text of a window becomes one canonical user message with
//! an audio block on its WAV range.
//!
//! Stop to text stays short without trading words: a pause of [`SPECULATE_AFTER_MS`] inside
//! an utterance makes the idle recognizer decode it ahead, to where the pause would end it
//! (used only if the utterance does end there: the pause lasts or the stop comes); at the
//! stop, the step window being decoded is abandoned (whisper.cpp's abort callback, checked
//! after the encoder and each decoder step) and what is left is decoded once. Those two —
//! the window ahead of a pause and the rest after the stop — are what the user waits for, so
//! they are decoded with a reduced encoder window first (the audio and 4 s of padding, not
//! whisper.cpp's fixed 30 s), kept only if [`super::check::doubt`] finds nothing wrong with
//! the result (no words in the padding, no loop, no more words than anyone says, text up to
//! where the voice ended), else decoded again with the full window. All of this only for a
//! live source: a file is read faster than real time and gets none of it.
//!
//! Invariants:
//! - Every sample is either inside a committed window (recognized; its speech, if any, is a
//!   message) or inside a recorded gap: a failed recognition is a gap over its window, and
//!   what the stop's deadline leaves is one `local.deadline` gap. Nothing is skipped for being
//!   quiet.
//! - Inference runs only on the engine's own recognizer thread, never on a tokio worker or the
//!   UI thread; windows are recognized and published one at a time, in speech order.
//! - A message is only ever text the guard ([`judge`]) accepted for a committed segment; a
//!   failure is a gap `{reason: local.*, startMs, endMs}`, never text.
//! - A message references its WAV range only once the capture reports those bytes durable
//!   (fsynced) and they equal the recognized samples; otherwise the samples go to their own
//!   exclusive asset first (the Realtime path's rule).
//! - Carried text shows in the view's `provisional` list until it is committed; provisional
//!   text is never persisted.
//! - Stop recognizes what is left for as long as recognition goes on: it gives up only when
//!   no window has finished for the drain deadline (time held back does not count), and
//!   what is then left is a `local.deadline` gap; nothing is appended by this engine after
//!   [`LocalEngine::stop`] returns.
//! - While the setup's hold is set (a file waiting for a dictation), no window is started:
//!   the window in hand is finished and the recognizer goes idle until the hold is lifted.
//! - [`LocalEngine::canceller`] abandons recognition (a file's Cancel): the window being
//!   decoded is aborted, no other is started, the stop returns without draining, and every
//!   sample not recognized is a `local.cancelled` gap.
//! - Removal has no remote party: `message.removed` is appended directly (docs/format.md).
//! - The intake queue is bounded ([`CHUNK_QUEUE`] chunks); a live source meets a full one as
//!   backpressure (capture halts visibly), a file source waits. A file's pending audio is
//!   bounded too ([`FILE_AHEAD_SAMPLES`]): memory is flat in the file's length.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, json};
use tokio::sync::{oneshot, watch};

use super::{LocalError, Recognition, Verdict, judge};
use crate::audio::segment::{EndReason, SegmentEvent, Segmenter, SegmenterConfig};
use crate::audio::{PCM_RATE_HZ, WAV_HEADER_BYTES};
use crate::recognize::{
    AudioChunk, AudioSink, CAPTURE_DURABLE_WAIT, Canceller, CaptureLink, EngineFuture,
    EngineReport, EngineState, EngineView, PublishedMessage, Recognizer, RemovalOutcome, SendError,
    Speaker,
};
use crate::session::format::{
    AssetRef, Block, ByteRange, EntryBody, Gap, Message, MessageRemoved, ModelChange, MsRange, Role,
};
use crate::session::store::{Continuation, new_id};

/// Chunks (100 ms each) queued into the intake: 25.6 s of audio.
pub const CHUNK_QUEUE: usize = 256;

/// A file's audio waiting to be recognized, at most (one minute at 24 kHz, 2.9 MB): past it
/// the intake waits for the recognizer, so a file is never held in memory whole. Twice the
/// longest window, so a full window can always be cut.
pub const FILE_AHEAD_SAMPLES: usize = PCM_RATE_HZ as usize * 60;
/// The longest window: whisper.cpp's 30 s less room for the segment that carries over.
pub const MAX_WINDOW_MS: u64 = 25_000;
/// The longest window of a file for a model bigger than tiny ([`file_window_ms`]).
pub const FILE_WINDOW_MS: u64 = 29_000;

/// The longest window a file's audio is cut into, for a model whose encoder has
/// `audio_layers` layers. Every window costs the encoder whisper.cpp's 30 s whatever it
/// holds, so fuller windows cost less per second of audio; but tiny models (4 layers) drop
/// whole passages from windows longer than [`MAX_WINDOW_MS`], so theirs stay there, while
/// larger ones keep their words in [`FILE_WINDOW_MS`] (measured on a 10-minute file,
/// docs/verification.md, #38: tiny.en WER 0.175 at 25 s, 0.192 at 27 s; base 0.162 at 25 s,
/// 0.160 at 27 s and 29 s, its CPU time down by a quarter). A file's windows still end only
/// at pauses, or at the segmenter's length limit (a cut at its quietest frame).
pub fn file_window_ms(audio_layers: i32) -> u64 {
    if audio_layers <= 4 {
        MAX_WINDOW_MS
    } else {
        FILE_WINDOW_MS
    }
}
/// A live recording's text is committed at the first pause once this much audio waits;
/// until then each pause decodes everything since the last commit again, ahead (shown, not
/// committed), so each utterance is recognized with the ones before it, as in one
/// whole-file call, and a stop in a pause finds all of it recognized.
pub const BATCH_MS: u64 = 15_000;
/// The shortest window a pause closes (shorter audio waits for more, or for the stop).
pub const MIN_WINDOW_MS: u64 = 1_000;
/// New audio after which an open window (no pause yet) is recognized again.
pub const STEP_MS: u64 = 3_000;
/// What an open window in which nothing was recognized keeps for the next one (speech may
/// be starting at its end).
pub const OPEN_TAIL_MS: u64 = 1_000;
/// A pause this long inside an utterance the segmenter has not closed yet makes the idle
/// recognizer decode the utterance ahead, to where the pause would end it; the result is
/// used only if the utterance does end there (the pause lasts, or the stop comes).
pub const SPECULATE_AFTER_MS: u64 = 300;
/// Whether live windows the user waits for (the rest after a stop, the window ahead of a
/// pause) try a reduced encoder window first (`whisper::ShortWindow`, checked by
/// `local::check::doubt`, the full window again when in doubt). Off: measured on a quiet
/// 2-core VM in one session (tiny.en, `PERSYK_BENCH_PART=tails`, stops mid-speech), stop →
/// text p95 was 2.20 / 2.24 / 2.44 / 1.08 / 2.93 s for 1 / 3 / 6 / 10 / 20 s of speech with
/// it and 1.80 / 1.68 / 1.93 / 1.97 / 2.32 s without: a stop mid-speech is doubted almost
/// every time, so the reduced decode is paid on top of the full one. The mechanism and its
/// bench part (`short`) stay for a model or check that makes it stand.
pub const REDUCED_WINDOWS_LIVE: bool = false;

/// Stop's default deadline for recognizing what is left: how long it waits for the next
/// window to finish (a stop waits while windows keep finishing).
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(30);
/// A file's drain deadline: a file's stop may find a minute and more of audio still to
/// recognize (up to [`FILE_AHEAD_SAMPLES`] and the intake's queue), and one full window of a
/// big model on a slow Mac takes far longer than a dictation's tail.
pub const FILE_DRAIN_DEADLINE: Duration = Duration::from_secs(300);
/// The gap reason of utterances not recognized before the stop deadline.
pub const DEADLINE_REASON: &str = "local.deadline";
/// The gap reason of audio delivered to the engine but not recognized because recognition
/// was cancelled ([`LocalEngine::canceller`]).
pub const CANCELLED_REASON: &str = "local.cancelled";
/// What the view shows for an utterance being recognized.
pub const PROVISIONAL_TEXT: &str = "transcribing…";
/// The provider name in `model_change` and on messages.
pub const PROVIDER: &str = "local";

/// Recognizes one utterance of 24 kHz mono PCM16 (the seam for tests: a recognizer that
/// fails on purpose).
pub trait Recognize: Send {
    /// One utterance through the guard.
    fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError>;

    /// A window of audio as timed segments, before the guard (the engine judges each one).
    /// The default is one segment over the whole window with [`Recognize::transcribe`]'s
    /// verdict (recognizers without timestamps).
    fn segments(&mut self, pcm_24k: &[i16]) -> Result<Vec<Segment>, LocalError> {
        Ok(match self.transcribe(pcm_24k)? {
            Verdict::Text(text) => vec![Segment {
                start_sample: 0,
                end_sample: pcm_24k.len() as u64,
                text,
                no_speech_probability: 0.0,
                heard: None,
            }],
            Verdict::NoSpeech => Vec::new(),
        })
    }

    /// [`Recognize::segments`] as `how` says (an abort flag). The default ignores `how`.
    fn decode(&mut self, pcm_24k: &[i16], how: &Decode) -> Result<Vec<Segment>, LocalError> {
        let _ = how;
        self.segments(pcm_24k)
    }

    /// The longest window of a file (a live recording's stay at [`MAX_WINDOW_MS`]).
    fn file_window_ms(&self) -> u64 {
        MAX_WINDOW_MS
    }
}

/// How to decode one window.
#[derive(Debug, Clone, Default)]
pub struct Decode {
    /// Once set, the inference is abandoned (`local.aborted`).
    pub abort: Option<Arc<AtomicBool>>,
    /// Try a reduced encoder window first (the user is waiting for the text); its result
    /// stands only if nothing about it is doubtful ([`super::check::doubt`]).
    pub short_window: Option<ShortWindow>,
}

/// What a reduced window's result is checked against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShortWindow {
    /// The end of the last frame the segmenter heard as voice in the window (samples from
    /// its start), if it heard one: the text must reach it.
    pub voiced_end: Option<u64>,
}

/// One timed piece of a window's recognition; samples (24 kHz) from the window's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub start_sample: u64,
    pub end_sample: u64,
    pub text: String,
    pub no_speech_probability: f32,
    /// The words as the model heard them when the vocabulary rewrote some of `text`
    /// ([`super::vocabulary`]); kept beside the message as `replay.heard`.
    pub heard: Option<String>,
}

/// Where the text comes from, for `model_change` and the messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The model's id (`ggml-tiny.en`).
    pub model_id: String,
    /// The runtime and its version (`whisper.cpp 1.7.6`), recorded as `model_change.api`.
    pub api: String,
    /// The language the model was told to hear (`"de"`); `None`: detected (or English for
    /// an English-only model). Recorded in each message's `replay.language`.
    pub language: Option<String>,
    /// The words were translated into English (`replay.task: "translate"`).
    pub translated: bool,
}

/// Everything a local recording needs besides the pipeline's own parts.
pub struct LocalSetup {
    pub recognizer: Box<dyn Recognize>,
    pub provenance: Provenance,
    /// How long stop waits for the next window to finish (it waits while they do).
    pub drain_deadline: Duration,
    /// Set: no new window is started (the window in hand is finished); the drain deadline
    /// does not run meanwhile. A file transcribed while a dictation records holds here.
    pub hold: Option<Arc<AtomicBool>>,
}

/// The model id of a model file: its file stem (`ggml-tiny.en`).
pub fn model_id(path: &std::path::Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .unwrap_or("whisper")
        .to_owned()
}

/// Hands chunks from the capture thread to the intake.
#[derive(Debug, Clone)]
pub struct LocalSender {
    tx: SyncSender<AudioChunk>,
    /// Set once audio arrives in real time (a live source sends without waiting).
    live: Arc<AtomicBool>,
}

impl LocalSender {
    /// Without waiting; a full intake is backpressure.
    pub fn try_send(&self, chunk: AudioChunk) -> Result<(), SendError> {
        self.live.store(true, Ordering::Relaxed);
        self.tx.try_send(chunk).map_err(|e| match e {
            TrySendError::Full(_) => SendError::Backpressure,
            TrySendError::Disconnected(_) => SendError::Stopped,
        })
    }

    /// Waiting for room (blocking: a file source).
    pub fn blocking_send(&self, chunk: AudioChunk) -> Result<(), SendError> {
        self.tx.send(chunk).map_err(|_| SendError::Stopped)
    }
}

struct Fixed {
    asset: String,
    recording_id: String,
    provenance: Provenance,
}

/// What the writer side knows; every append goes through it (one lock, so nothing is
/// appended once `closed`).
struct Writer {
    continuation: Continuation,
    recording_id: String,
    asset: String,
    closed: bool,
    state: EngineState,
    messages: Vec<PublishedMessage>,
    gaps: Vec<Gap>,
    gap_at: Vec<usize>,
    /// What the view shows for audio not yet final: the text of a carried segment, or
    /// [`PROVISIONAL_TEXT`] while a closed window is being recognized. Never persisted.
    transcribing: Option<String>,
    provenance: Provenance,
    /// The end of the last window recognized (ms): the view's `heard_ms`.
    heard_ms: u64,
}

impl Writer {
    fn view(&self) -> EngineView {
        EngineView {
            state: self.state.clone(),
            provisional: self
                .transcribing
                .iter()
                .map(|t| ("open".to_owned(), t.clone()))
                .collect(),
            messages: self.messages.clone(),
            gaps: self.gaps.len(),
            gap_at: self.gap_at.clone(),
            heard_ms: self.heard_ms,
        }
    }

    fn gap(&mut self, gap: Gap) {
        self.gap_at.push(self.messages.len());
        self.gaps.push(gap);
    }

    fn halt(&mut self, code: &str) {
        self.state = EngineState::Halted(code.to_owned());
    }
}

struct Shared {
    writer: Mutex<Writer>,
    view: watch::Sender<EngineView>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, w: &Writer) {
        self.view.send_replace(w.view());
    }
}

/// A running local engine.
pub struct LocalEngine {
    sender: Option<LocalSender>,
    shared: Arc<Shared>,
    audio: Arc<Audio>,
    view: watch::Receiver<EngineView>,
    done: Option<oneshot::Receiver<()>>,
    drain_deadline: Duration,
}

impl std::fmt::Debug for LocalEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEngine").finish_non_exhaustive()
    }
}

fn ms(samples: u64) -> u64 {
    samples * 1000 / u64::from(PCM_RATE_HZ)
}

/// Starts the engine: appends `model_change` (provenance), then starts the intake and
/// recognizer threads. `capture` is the WAV the pipeline writes.
pub fn start(
    setup: LocalSetup,
    mut continuation: Continuation,
    recording_id: &str,
    capture: CaptureLink,
) -> LocalEngine {
    let (view_tx, view) = watch::channel(EngineView::default());
    let mut state = EngineState::Streaming;
    if let Err(e) = continuation.append_one(EntryBody::ModelChange(ModelChange {
        provider: PROVIDER.into(),
        model_id: setup.provenance.model_id.clone(),
        api: Some(setup.provenance.api.clone()),
    })) {
        state = EngineState::Halted(e.code().to_owned());
    }
    let halted = matches!(state, EngineState::Halted(_));
    let writer = Writer {
        continuation,
        recording_id: recording_id.to_owned(),
        asset: capture.asset.clone(),
        closed: halted,
        state,
        messages: Vec::new(),
        gaps: Vec::new(),
        gap_at: Vec::new(),
        transcribing: None,
        provenance: setup.provenance,
        heard_ms: 0,
    };
    let shared = Arc::new(Shared {
        writer: Mutex::new(writer),
        view: view_tx,
    });
    shared.publish(&shared.lock());
    let (chunk_tx, chunk_rx) = sync_channel::<AudioChunk>(CHUNK_QUEUE);
    let (done_tx, done) = oneshot::channel();
    let audio = Arc::new(Audio {
        pending: Mutex::new(Pending {
            file_window_ms: setup.recognizer.file_window_ms(),
            ..Pending::default()
        }),
        ready: Condvar::new(),
        live: Arc::new(AtomicBool::new(false)),
        hold: setup.hold,
    });
    {
        let audio = audio.clone();
        std::thread::Builder::new()
            .name("persyk-local-intake".into())
            .spawn(move || intake(chunk_rx, &audio))
            .ok();
    }
    {
        let shared = shared.clone();
        let audio = audio.clone();
        let recognizer = setup.recognizer;
        std::thread::Builder::new()
            .name("persyk-local-recognizer".into())
            .spawn(move || {
                recognize_loop(recognizer, &shared, &audio, &capture);
                let _ = done_tx.send(());
            })
            .ok();
    }
    LocalEngine {
        sender: Some(LocalSender {
            tx: chunk_tx,
            live: audio.live.clone(),
        }),
        shared,
        audio,
        view,
        done: Some(done),
        drain_deadline: setup.drain_deadline,
    }
}

impl LocalEngine {
    pub fn view(&self) -> watch::Receiver<EngineView> {
        self.view.clone()
    }

    /// A sender for the capture thread (none after stop).
    pub fn sender(&self) -> Option<LocalSender> {
        self.sender.clone()
    }

    /// Removes a canonical message of this recording: `message.removed` is appended directly
    /// (there is no provider copy to delete).
    pub async fn remove(&self, entry_id: &str) -> RemovalOutcome {
        let shared = self.shared.clone();
        let entry_id = entry_id.to_owned();
        tokio::task::spawn_blocking(move || {
            let mut w = shared.lock();
            if w.closed {
                return RemovalOutcome::NotRemovable;
            }
            let Some(i) = w
                .messages
                .iter()
                .position(|m| m.entry_id == entry_id && !m.removed)
            else {
                return RemovalOutcome::NotRemovable;
            };
            let body = EntryBody::MessageRemoved(MessageRemoved {
                target_id: entry_id,
            });
            match w.continuation.append_one(body) {
                Ok(_) => {
                    w.messages[i].removed = true;
                    shared.publish(&w);
                    RemovalOutcome::Removed
                }
                Err(e) => RemovalOutcome::Rejected(Some(e.code().to_owned())),
            }
        })
        .await
        .unwrap_or(RemovalOutcome::NotRemovable)
    }

    /// Something that abandons this engine's recognition, even while its stop drains
    /// (a file's Cancel): see the module's invariants.
    pub fn canceller(&self) -> Canceller {
        let audio = self.audio.clone();
        Box::new(move || audio.abandon())
    }

    /// Waits for the recognizer thread to end: while windows keep finishing (or the hold
    /// is set), for as long as it takes; it gives up once none has finished for the drain
    /// deadline, or at once when recognition is abandoned.
    async fn drain(&self, mut done: oneshot::Receiver<()>) {
        let tick = Duration::from_millis(100).min(self.drain_deadline);
        let mut seen = self.audio.lock().decoded;
        let mut since = tokio::time::Instant::now();
        loop {
            if tokio::time::timeout(tick, &mut done).await.is_ok() {
                return;
            }
            let (decoded, abandoned) = {
                let p = self.audio.lock();
                (p.decoded, p.abandoned)
            };
            if abandoned {
                return;
            }
            if decoded != seen || self.audio.held() {
                seen = decoded;
                since = tokio::time::Instant::now();
            } else if since.elapsed() >= self.drain_deadline {
                return;
            }
        }
    }

    /// Ends the audio, recognizes what is left (while the recognizer makes progress, see
    /// [`Self::drain`]) and reports.
    pub async fn stop(mut self) -> EngineReport {
        self.sender = None;
        {
            // No new step window; the one being decoded is abandoned (the rest is decoded
            // as one last window once the intake has seen the end).
            let mut p = self.audio.lock();
            p.stopping = true;
            // Only a step window; any other stays abortable by a cancel.
            if p.in_flight.as_ref().is_some_and(|(_, step)| *step)
                && let Some((flag, _)) = p.in_flight.take()
            {
                flag.store(true, Ordering::Relaxed);
            }
            self.audio.ready.notify_all();
        }
        {
            let mut w = self.shared.lock();
            if !matches!(w.state, EngineState::Halted(_)) {
                w.state = EngineState::Finishing;
            }
            self.shared.publish(&w);
        }
        if let Some(done) = self.done.take() {
            self.drain(done).await;
        }
        let abandoned = self.audio.lock().abandoned;
        if abandoned {
            // The intake still hands over what the capture delivered (memory copies): the
            // gap then ends where the audio did.
            for _ in 0..40 {
                if self.audio.lock().finished {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
        let mut w = self.shared.lock();
        w.closed = true;
        w.transcribing = None;
        // What is left past the deadline is one gap: from the first sample not committed to
        // the end of what arrived (open-ended if the intake never saw the end).
        let (pieces, ended) = {
            let mut p = self.audio.lock();
            p.closed = true;
            self.audio.ready.notify_all();
            (left_unheard(&p), p.finished)
        };
        let reason = if abandoned {
            CANCELLED_REASON
        } else {
            DEADLINE_REASON
        };
        let last = pieces.len().saturating_sub(1);
        for (i, (from, to)) in pieces.into_iter().enumerate() {
            w.gap(Gap {
                reason: reason.into(),
                item_id: None,
                start_ms: Some(ms(from)),
                end_ms: (ended || i < last).then(|| ms(to).max(ms(from) + 1)),
            });
        }
        let halted = match &w.state {
            EngineState::Halted(r) => Some(r.clone()),
            _ => None,
        };
        if halted.is_none() {
            w.state = EngineState::Finished;
        }
        self.shared.publish(&w);
        EngineReport {
            complete: halted.is_none() && w.gaps.is_empty(),
            gaps: w.gaps.clone(),
            messages: w.messages.clone(),
            halted,
            connection_id: String::new(),
            leaf: w.continuation.leaf().map(str::to_owned),
        }
    }
}

impl AudioSink for LocalSender {
    fn try_send(&self, chunk: AudioChunk) -> Result<(), SendError> {
        LocalSender::try_send(self, chunk)
    }

    fn blocking_send(&self, chunk: AudioChunk) -> Result<(), SendError> {
        LocalSender::blocking_send(self, chunk)
    }
}

impl Recognizer for LocalEngine {
    fn view(&self) -> watch::Receiver<EngineView> {
        LocalEngine::view(self)
    }

    fn sink(&self) -> Option<Box<dyn AudioSink>> {
        self.sender().map(|s| Box::new(s) as Box<dyn AudioSink>)
    }

    fn remove<'a>(&'a self, entry_id: &'a str) -> EngineFuture<'a, RemovalOutcome> {
        Box::pin(LocalEngine::remove(self, entry_id))
    }

    fn canceller(&self) -> Option<Canceller> {
        Some(LocalEngine::canceller(self))
    }

    fn stop(self: Box<Self>) -> EngineFuture<'static, EngineReport> {
        Box::pin(LocalEngine::stop(*self))
    }
}

/// The audio the recognizer has not committed yet, shared by the intake and the recognizer.
#[derive(Default)]
struct Pending {
    /// Samples from `base` on; `base` is the first sample not yet committed.
    buf: Vec<i16>,
    base: u64,
    /// Every sample received so far.
    total: u64,
    /// Where a pause ended an utterance (the segmenter's end of it): windows end there.
    cuts: VecDeque<u64>,
    /// Where the last window that kept its tail ended (a new one waits for more audio).
    tried_to: u64,
    /// The source ended (stop): the rest is one last window.
    finished: bool,
    /// The engine closed: nothing more is recognized.
    closed: bool,
    /// The stop was asked for: no new open window is started, and the one being decoded
    /// (through `in_flight`) is abandoned.
    stopping: bool,
    /// The abort flag of the window being decoded, and whether the stop abandons it (a step
    /// window of live speech; any window is abandoned by a cancel).
    in_flight: Option<(Arc<AtomicBool>, bool)>,
    /// Recognition was cancelled: no window is started, the stop does not drain.
    abandoned: bool,
    /// Windows decoded so far (whatever their outcome): the stop's sign of progress.
    decoded: u64,
    /// The longest window of a file, in ms ([`Recognize::file_window_ms`]); 0: the live
    /// [`MAX_WINDOW_MS`].
    file_window_ms: u64,
    /// The end of the last voiced frame the segmenter saw.
    last_voiced: u64,
    /// Where the open utterance would end if its current pause lasts (its hangover end),
    /// once the pause is [`SPECULATE_AFTER_MS`] long; cleared when the voice comes back.
    pause_end: Option<u64>,
}

struct Audio {
    pending: Mutex<Pending>,
    ready: Condvar,
    /// The setup's hold: while set, no window is started.
    hold: Option<Arc<AtomicBool>>,
    /// The source is live: audio arrives in real time, so decoding ahead of a pause and a
    /// reduced encoder window buy a short stop → text. A file (sent as fast as it reads)
    /// gets neither: every window with the full encoder window.
    live: Arc<AtomicBool>,
}

impl Audio {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn held(&self) -> bool {
        self.hold.as_ref().is_some_and(|h| h.load(Ordering::SeqCst))
    }

    /// Abandons recognition: the window in hand is aborted and no other is started.
    fn abandon(&self) {
        let mut p = self.lock();
        p.abandoned = true;
        if let Some((flag, _)) = p.in_flight.take() {
            flag.store(true, Ordering::Relaxed);
        }
        self.ready.notify_all();
    }
}

/// One stretch of audio handed to the recognizer.
struct Window {
    start_sample: u64,
    pcm: Vec<i16>,
    /// As long as a window gets ([`MAX_WINDOW_MS`], a file's [`file_window_ms`]).
    full: bool,
    /// The pauses inside it (samples of the recording): its committed text is split there,
    /// one message per stretch of speech.
    cuts: Vec<u64>,
    /// Why it was taken.
    kind: Kind,
}

/// Why a window was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The user keeps talking: everything so far, every [`STEP_MS`] of new audio.
    Open,
    /// Up to a pause the segmenter closed.
    Pause,
    /// Ahead of time, up to where a pause the segmenter has not closed yet would end the
    /// utterance ([`SPECULATE_AFTER_MS`]); final only if the utterance does end there.
    Ahead,
    /// The rest of the recording after the stop.
    Last,
}

impl Window {
    fn end_sample(&self) -> u64 {
        self.start_sample + self.pcm.len() as u64
    }

    /// Ends where nothing more can follow in this window's speech: a pause (the segmenter
    /// saw it, or it is decoded ahead of), or the end of the recording.
    fn closed(&self) -> bool {
        self.kind != Kind::Open
    }
}

/// What a window's recognition commits: up to `commit_to` (a sample of the recording) the
/// text is final; `carried` (the last segment of a window that did not end in a pause) is
/// recognized again with what follows.
#[derive(Debug, Clone, PartialEq)]
struct Commit {
    commit_to: u64,
    committed: Vec<Segment>,
    carried: Option<Segment>,
}

/// The commit rule. A closed window commits all of it. An open one (speech may go on)
/// commits every segment but the last and carries the last from its start, so a word is
/// never cut at a window's edge; with no segment at all it keeps its last
/// [`OPEN_TAIL_MS`] (speech may be starting) and commits the rest.
fn commit_rule(window: &Window, segments: Vec<Segment>) -> Commit {
    let end = window.end_sample();
    if window.closed() {
        return Commit {
            commit_to: end,
            committed: segments,
            carried: None,
        };
    }
    let tail = u64::from(PCM_RATE_HZ) * OPEN_TAIL_MS / 1000;
    let mut segments = segments;
    match segments.pop() {
        None => Commit {
            commit_to: end.saturating_sub(tail).max(window.start_sample),
            committed: Vec::new(),
            carried: None,
        },
        Some(last) => {
            let carry_from = (window.start_sample + last.start_sample).min(end);
            if segments.is_empty() && carry_from <= window.start_sample {
                if window.full {
                    // One segment over a whole window: commit it, or nothing ever would be.
                    return Commit {
                        commit_to: end,
                        committed: vec![last],
                        carried: None,
                    };
                }
                // One segment from the very start: nothing is final yet.
                return Commit {
                    commit_to: window.start_sample,
                    committed: Vec::new(),
                    carried: Some(last),
                };
            }
            Commit {
                commit_to: carry_from,
                committed: segments,
                carried: Some(last),
            }
        }
    }
}

/// The next window, or `None` when there is nothing to recognize yet. `pending` is
/// consulted under its lock; the window's samples are copied out. `ahead` is where a
/// window decoded ahead of a pause ends while its result waits for the pause to close.
fn next_window(p: &mut Pending, ahead: Option<u64>, live: bool) -> Option<Window> {
    let rate = u64::from(PCM_RATE_HZ);
    let max_ms = match p.file_window_ms {
        ms if ms > 0 && !live => ms,
        _ => MAX_WINDOW_MS,
    };
    let (min, step, batch, max) = (
        rate * MIN_WINDOW_MS / 1000,
        rate * STEP_MS / 1000,
        rate * BATCH_MS / 1000,
        rate * max_ms / 1000,
    );
    while p.cuts.front().is_some_and(|&c| c <= p.base) {
        p.cuts.pop_front();
    }
    let available = p.total - p.base;
    // The last pause a window may end at. Live, a window ends at each pause (the text comes
    // while the user speaks); a file's windows end at the last pause before the longest
    // window (closed utterances batched, so each is recognized with the others around it,
    // as one whole-file call would).
    let cut = p
        .cuts
        .iter()
        .copied()
        .rfind(|&c| c - p.base <= max)
        .filter(|&c| c - p.base >= min);
    let (end, kind) = if p.finished && available <= max {
        if available == 0 {
            return None;
        }
        (p.total, Kind::Last)
    } else if let Some(cut) =
        cut.filter(|&c| p.finished || available >= max || (live && c - p.base >= batch))
    {
        (cut, Kind::Pause)
    } else if available >= max {
        (p.base + max, Kind::Open)
    } else if !live || p.stopping || ahead.is_some() {
        // A file waits for the longest window or its end; at the stop the rest waits for
        // the end of the audio; a result decoded ahead waits for the stop (or the voice to
        // come back).
        return None;
    } else if let Some(pause) = p
        .pause_end
        .or_else(|| p.cuts.back().copied())
        .filter(|&e| e > p.base && e - p.base >= min && e - p.base <= max)
        .filter(|&e| e <= p.total && p.tried_to < e)
    {
        (pause, Kind::Ahead)
    } else if available >= batch && p.total >= p.tried_to.max(p.base) + step {
        (p.total, Kind::Open)
    } else {
        return None;
    };
    let len = (end - p.base) as usize;
    Some(Window {
        start_sample: p.base,
        pcm: p.buf[..len.min(p.buf.len())].to_vec(),
        full: end - p.base >= max,
        cuts: p.cuts.iter().copied().filter(|&c| c < end).collect(),
        kind,
    })
}

/// The intake thread: every sample goes into the pending audio; the segmenter only says
/// where pauses are (window ends, the pause a window is decoded ahead of), never what is
/// heard.
fn intake(chunks: Receiver<AudioChunk>, audio: &Audio) {
    let config = SegmenterConfig::for_rate(PCM_RATE_HZ);
    let hangover = u64::from(PCM_RATE_HZ) * u64::from(config.hangover_ms) / 1000;
    let speculate_after = u64::from(PCM_RATE_HZ) * SPECULATE_AFTER_MS / 1000;
    let mut segmenter = Segmenter::new(config);
    let mut events = Vec::new();
    let mut samples = Vec::new();
    loop {
        let chunk = chunks.recv();
        events.clear();
        samples.clear();
        match &chunk {
            Ok(chunk) => {
                samples.extend(
                    chunk
                        .pcm
                        .chunks_exact(2)
                        .map(|b| i16::from_le_bytes([b[0], b[1]])),
                );
                segmenter.push(&samples, &mut events);
            }
            Err(_) => segmenter.finish(&mut events),
        }
        let open = segmenter.open_utterance();
        let position = segmenter.position();
        let mut p = audio.lock();
        // A file waits while the recognizer is a minute behind: its audio is never all in
        // memory (a long file's pending audio stays the same size whatever its length), and
        // the file's progress follows the words. A live source never waits here.
        while !audio.live.load(Ordering::Relaxed)
            && p.buf.len() >= FILE_AHEAD_SAMPLES
            && !p.closed
            && !p.stopping
        {
            p = match audio.ready.wait_timeout(p, Duration::from_millis(50)) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        if p.closed {
            return;
        }
        p.buf.extend_from_slice(&samples);
        p.total += samples.len() as u64;
        for e in &events {
            if let SegmentEvent::Ended(u) = e {
                p.cuts.push_back(u.end_sample);
                let voiced_end = match u.reason {
                    EndReason::Pause => u.end_sample.saturating_sub(hangover),
                    _ => u.end_sample,
                };
                p.last_voiced = p.last_voiced.max(voiced_end);
            }
        }
        p.pause_end = open.and_then(|o| {
            (position >= o.last_voiced_end + speculate_after)
                .then_some(o.hangover_end.min(position))
        });
        if let Some(o) = open {
            p.last_voiced = p.last_voiced.max(o.last_voiced_end);
        }
        if chunk.is_err() {
            p.finished = true;
        }
        audio.ready.notify_all();
        if chunk.is_err() {
            return;
        }
    }
}

/// The recognizer thread: windows in order, each committed by [`commit_rule`].
fn recognize_loop(
    mut recognizer: Box<dyn Recognize>,
    shared: &Shared,
    audio: &Audio,
    capture: &CaptureLink,
) {
    let (fixed, handle) = {
        let w = shared.lock();
        let fixed = Fixed {
            asset: w.asset.clone(),
            recording_id: w.recording_id.clone(),
            provenance: w.provenance.clone(),
        };
        (fixed, w.continuation.handle().clone())
    };
    let mut index = 0u64;
    // A window decoded ahead of a pause and its segments, until the pause closes it.
    let mut ahead: Option<(Window, Vec<Segment>)> = None;
    loop {
        let (window, decoded, abort, short_window) = {
            let mut p = audio.lock();
            loop {
                if p.closed || p.abandoned {
                    return;
                }
                if audio.held() {
                    // A dictation has the recognizer: nothing new is started meanwhile.
                    p = audio
                        .ready
                        .wait_timeout(p, Duration::from_millis(50))
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
                    continue;
                }
                if let Some((w, _)) = &ahead {
                    match p.ahead(w.start_sample, w.end_sample()) {
                        // The stop came in the pause the window ends in: its result is final.
                        Ahead::Final => {
                            let (w, segments) = ahead.take().expect("checked");
                            break (w, Some(segments), None, None);
                        }
                        // The voice came back: the utterance goes on.
                        Ahead::Stale => ahead = None,
                        Ahead::Waiting => {}
                    }
                }
                let live = audio.live.load(Ordering::Relaxed);
                if let Some(w) =
                    next_window(&mut p, ahead.as_ref().map(|(w, _)| w.end_sample()), live)
                {
                    // A step window of live speech may be abandoned at the stop (the rest is
                    // then one last window); any window by a cancel.
                    let abort = Arc::new(AtomicBool::new(false));
                    p.in_flight = Some((abort.clone(), w.kind == Kind::Open && !w.full));
                    let abort = Some(abort);
                    if w.kind == Kind::Ahead {
                        p.tried_to = w.end_sample();
                    }
                    // The user waits for these (the stop came, or may come in this pause):
                    // a reduced encoder window first, checked against where the voice was —
                    // when REDUCED_WINDOWS_LIVE is on (it is not; see there).
                    let short_window = (REDUCED_WINDOWS_LIVE
                        && live
                        && matches!(w.kind, Kind::Last | Kind::Ahead))
                    .then(|| ShortWindow {
                        voiced_end: (p.last_voiced > w.start_sample)
                            .then(|| p.last_voiced.min(w.end_sample()) - w.start_sample),
                    });
                    break (w, None, abort, short_window);
                }
                if p.finished && ahead.is_none() {
                    return;
                }
                p = audio
                    .ready
                    .wait_timeout(p, Duration::from_millis(100))
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        };
        let result = match decoded {
            Some(segments) => Ok(segments),
            None => {
                if window.closed() && window.kind != Kind::Ahead {
                    let mut w = shared.lock();
                    w.transcribing = Some(PROVISIONAL_TEXT.to_owned());
                    shared.publish(&w);
                }
                let result = recognizer.decode(
                    &window.pcm,
                    &Decode {
                        abort,
                        short_window,
                    },
                );
                {
                    let mut p = audio.lock();
                    p.in_flight = None;
                    p.decoded += 1;
                }
                match result {
                    Err(LocalError::Aborted) => continue,
                    Ok(segments) if window.kind == Kind::Ahead => {
                        // Final only if the stop comes in this pause (checked above); shown
                        // meanwhile, never saved.
                        let mut w = shared.lock();
                        w.transcribing = final_text(&segments);
                        shared.publish(&w);
                        drop(w);
                        ahead = Some((window, segments));
                        continue;
                    }
                    // A failure ahead is no loss: the window is decoded again when it closes.
                    Err(_) if window.kind == Kind::Ahead => continue,
                    other => other,
                }
            }
        };
        let (start_ms, window_end_ms) = (
            ms(window.start_sample),
            ms(window.end_sample()).max(ms(window.start_sample) + 1),
        );
        let commit = match result {
            Ok(segments) => commit_rule(&window, segments),
            Err(e) => {
                // A failure is a gap over the whole window, never text.
                let mut w = shared.lock();
                w.transcribing = None;
                w.gap(Gap {
                    reason: e.code().to_owned(),
                    item_id: None,
                    start_ms: Some(start_ms),
                    end_ms: Some(window_end_ms),
                });
                w.heard_ms = w.heard_ms.max(window_end_ms);
                shared.publish(&w);
                audio
                    .lock()
                    .advance(window.end_sample(), window.end_sample());
                continue;
            }
        };
        // One message per stretch between the pauses inside the window (batched windows keep
        // one message per utterance); each covers its stretch of the WAV.
        let stretches = stretches(&window, &commit);
        let mut blocks = Vec::new();
        for Stretch {
            from,
            to,
            text,
            heard,
        } in stretches
        {
            let (s_ms, e_ms) = (ms(from), ms(to).max(ms(from) + 1));
            let pcm = &window.pcm
                [(from - window.start_sample) as usize..(to - window.start_sample) as usize];
            let block = audio_block(&fixed, &handle, capture, from, pcm, s_ms, e_ms);
            blocks.push((text, heard, block, s_ms, e_ms));
        }
        let mut w = shared.lock();
        if w.closed {
            return;
        }
        w.transcribing = commit
            .carried
            .as_ref()
            .map(|s| s.text.trim().to_owned())
            .filter(|t| !t.is_empty());
        for (text, heard, block, s_ms, e_ms) in blocks {
            match block {
                Ok(asset) => {
                    let spoken = Spoken {
                        text: &text,
                        heard: heard.as_deref(),
                        start_ms: s_ms,
                        end_ms: e_ms,
                    };
                    let body = message_body(&fixed, asset, &spoken);
                    match w.continuation.append_one(body) {
                        Ok(entry_id) => {
                            w.messages.push(PublishedMessage {
                                entry_id,
                                item_id: format!("utterance-{index}"),
                                speaker: Speaker::User,
                                text,
                                removed: false,
                            });
                        }
                        Err(e) => {
                            w.halt(e.code());
                            w.closed = true;
                            break;
                        }
                    }
                }
                Err(code) => {
                    w.halt(&code);
                    w.closed = true;
                    break;
                }
            }
            index += 1;
        }
        w.heard_ms = w.heard_ms.max(ms(commit.commit_to));
        shared.publish(&w);
        if w.closed {
            audio.lock().closed = true;
            return;
        }
        // Under the writer's lock: a stop that closes the writer next finds the committed
        // audio gone from what is left (no gap over a message's audio).
        audio.lock().advance(commit.commit_to, window.end_sample());
        drop(w);
    }
}

/// What the stop's deadline leaves unrecognized: the pending audio split at its pauses,
/// without the pieces that are digital silence (nothing could have been said there). When
/// the intake never saw the end, the last piece is open-ended.
fn left_unheard(p: &Pending) -> Vec<(u64, u64)> {
    let mut bounds: Vec<u64> = p
        .cuts
        .iter()
        .copied()
        .filter(|&c| c > p.base && c < p.total)
        .collect();
    bounds.push(p.total);
    let mut out = Vec::new();
    let mut from = p.base;
    for to in bounds {
        let samples = &p.buf[(from - p.base) as usize..((to - p.base) as usize).min(p.buf.len())];
        if samples.iter().any(|s| s.unsigned_abs() > SILENT_PEAK) || (!p.finished && to == p.total)
        {
            out.push((from, to));
        }
        from = to;
    }
    out
}

/// The loudest sample of audio taken for digital silence (about −60 dBFS).
pub const SILENT_PEAK: u16 = 32;

impl Pending {
    /// Moves the pending audio's start to `commit_to` (dropping what is committed) and notes
    /// that the audio up to `tried_to` was tried.
    fn advance(&mut self, commit_to: u64, tried_to: u64) {
        let n = (commit_to.saturating_sub(self.base) as usize).min(self.buf.len());
        self.buf.drain(..n);
        self.base += n as u64;
        self.tried_to = tried_to;
    }

    /// What becomes of a result decoded ahead over `start..end`: final once the stop came in
    /// the pause it ends in, stale once the voice came back (or something was committed
    /// meanwhile), else it waits.
    fn ahead(&self, start: u64, end: u64) -> Ahead {
        let current = start == self.base && self.last_voiced <= end;
        if !current {
            Ahead::Stale
        } else if self.finished && self.cuts.contains(&end) {
            Ahead::Final
        } else {
            Ahead::Waiting
        }
    }
}

/// One message's worth of a committed window: samples `from..to` of the recording.
#[derive(Debug, Clone, PartialEq)]
struct Stretch {
    from: u64,
    to: u64,
    text: String,
    /// The words as the model heard them, when the vocabulary rewrote some.
    heard: Option<String>,
}

/// See [`Pending::ahead`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ahead {
    Final,
    Stale,
    Waiting,
}

/// The committed part of a window as stretches `(from, to, text)` of the recording, split at
/// the window's pauses: a segment belongs to the stretch its middle falls in; stretches
/// without speech (after the guard) give no message.
fn stretches(window: &Window, commit: &Commit) -> Vec<Stretch> {
    let mut bounds: Vec<u64> = window
        .cuts
        .iter()
        .copied()
        .filter(|&c| c > window.start_sample && c < commit.commit_to)
        .collect();
    bounds.push(commit.commit_to);
    let mut out = Vec::new();
    let mut from = window.start_sample;
    let mut segments = commit.committed.iter().peekable();
    for to in bounds {
        let mut mine = Vec::new();
        while let Some(s) = segments.peek() {
            let middle = window.start_sample + (s.start_sample + s.end_sample) / 2;
            if middle < to || to == commit.commit_to {
                mine.push((*s).clone());
                segments.next();
            } else {
                break;
            }
        }
        if let Some(text) = final_text(&mine) {
            // What the model heard, when the vocabulary rewrote any of it.
            let heard = mine.iter().any(|s| s.heard.is_some()).then(|| {
                let as_heard: Vec<Segment> = mine
                    .iter()
                    .map(|s| Segment {
                        text: s.heard.clone().unwrap_or_else(|| s.text.clone()),
                        heard: None,
                        ..s.clone()
                    })
                    .collect();
                final_text(&as_heard).unwrap_or_default()
            });
            out.push(Stretch {
                from,
                to,
                text,
                heard,
            });
        }
        from = to;
    }
    out
}

/// The committed segments' text after the guard, or `None` when nothing in them is speech.
fn final_text(segments: &[Segment]) -> Option<String> {
    let parts: Vec<String> = segments
        .iter()
        .filter_map(|s| {
            match judge(&Recognition {
                text: s.text.clone(),
                no_speech_probability: s.no_speech_probability,
            }) {
                Verdict::Text(t) => Some(t),
                Verdict::NoSpeech => None,
            }
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// The asset reference of an utterance: its WAV range once durable and equal, else its own
/// asset.
fn audio_block(
    w: &Fixed,
    handle: &crate::session::SessionHandle,
    capture: &CaptureLink,
    start_sample: u64,
    pcm: &[i16],
    start_ms: u64,
    end_ms: u64,
) -> Result<Block, String> {
    let mut bytes = Vec::with_capacity(pcm.len() * 2);
    crate::audio::convert::extend_pcm16_le(pcm, &mut bytes);
    let start = WAV_HEADER_BYTES + start_sample * 2;
    let asset = if wav_range_matches(capture, start, &bytes) {
        AssetRef::Available {
            path: format!("assets/{}", w.asset),
            mime_type: "audio/wav".into(),
            byte_range: Some(ByteRange {
                start,
                end: start + bytes.len() as u64,
            }),
            encoding: Some("pcm_s16le".into()),
            sha256: None,
        }
    } else {
        let name = format!("utterance-{}.pcm", new_id());
        handle
            .write_asset(&name, &bytes, "application/octet-stream", Some("pcm_s16le"))
            .map_err(|e| e.code().to_owned())?
    };
    Ok(Block::Audio {
        asset,
        recording_id: Some(w.recording_id.clone()),
        range: Some(MsRange { start_ms, end_ms }),
    })
}

/// Waits (bounded) until the capture made `start..start+len` durable, then compares.
fn wav_range_matches(capture: &CaptureLink, start: u64, bytes: &[u8]) -> bool {
    let end = start + bytes.len() as u64;
    let deadline = Instant::now() + CAPTURE_DURABLE_WAIT;
    while *capture.durable.borrow() < end {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    read_equal(&capture.file, start, bytes)
}

fn read_equal(file: &File, start: u64, bytes: &[u8]) -> bool {
    let mut on_disk = vec![0u8; bytes.len()];
    file.read_exact_at(&mut on_disk, start).is_ok() && on_disk == bytes
}

/// What one message says, and where in the recording it was said.
struct Spoken<'a> {
    text: &'a str,
    /// The model's own words when the vocabulary rewrote some (`replay.heard`).
    heard: Option<&'a str>,
    start_ms: u64,
    end_ms: u64,
}

fn message_body(w: &Fixed, audio: Block, spoken: &Spoken<'_>) -> EntryBody {
    let Spoken {
        text,
        heard,
        start_ms,
        end_ms,
    } = *spoken;
    let now_ms = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
    let mut m = Message::new(
        Role::User,
        vec![audio, Block::text(text)],
        now_ms.max(0) as u64,
    );
    m.provider = Some(PROVIDER.into());
    m.api = Some(w.provenance.api.clone());
    m.model = Some(w.provenance.model_id.clone());
    let mut replay = Map::new();
    replay.insert("recordingId".into(), json!(w.recording_id));
    replay.insert("startMs".into(), json!(start_ms));
    replay.insert("endMs".into(), json!(end_ms));
    if let Some(language) = &w.provenance.language {
        replay.insert("language".into(), json!(language));
    }
    if w.provenance.translated {
        replay.insert("task".into(), json!("translate"));
    }
    if let Some(heard) = heard {
        replay.insert("heard".into(), json!(heard));
    }
    m.replay = Some(replay);
    EntryBody::Message(m)
}

/// A recognizer that fails every utterance (`local.inference-failed`): the seam tests use to
/// see a failure become a gap.
#[derive(Debug, Default)]
pub struct FailingRecognizer;

impl Recognize for FailingRecognizer {
    fn transcribe(&mut self, _pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
        Err(LocalError::InferenceFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = PCM_RATE_HZ as u64;

    fn seg(start_s: f64, end_s: f64, text: &str) -> Segment {
        Segment {
            start_sample: (start_s * SECOND as f64) as u64,
            end_sample: (end_s * SECOND as f64) as u64,
            text: text.into(),
            no_speech_probability: 0.0,
            heard: None,
        }
    }

    fn window(start: u64, seconds: u64, closed: bool) -> Window {
        Window {
            start_sample: start,
            pcm: vec![0; (seconds * SECOND) as usize],
            full: seconds * 1000 >= MAX_WINDOW_MS,
            cuts: Vec::new(),
            kind: if closed { Kind::Pause } else { Kind::Open },
        }
    }

    #[test]
    fn a_closed_window_commits_everything() {
        let w = window(SECOND, 6, true);
        let c = commit_rule(&w, vec![seg(0.0, 2.0, "a"), seg(2.0, 5.5, "b")]);
        assert_eq!(c.commit_to, 7 * SECOND);
        assert_eq!(c.committed.len(), 2);
        assert_eq!(c.carried, None);
    }

    #[test]
    fn an_open_window_carries_its_last_segment_from_its_start() {
        let w = window(SECOND, 6, false);
        let c = commit_rule(&w, vec![seg(0.0, 2.0, "a"), seg(2.5, 6.0, "b")]);
        assert_eq!(c.commit_to, SECOND + 2 * SECOND + SECOND / 2);
        assert_eq!(c.committed, vec![seg(0.0, 2.0, "a")]);
        assert_eq!(c.carried, Some(seg(2.5, 6.0, "b")));
        // One segment from the start: nothing is final yet…
        let c = commit_rule(&w, vec![seg(0.0, 6.0, "a b c")]);
        assert_eq!((c.commit_to, c.committed.len()), (SECOND, 0));
        // …unless the window is as long as a window gets.
        let full = window(0, MAX_WINDOW_MS / 1000, false);
        let c = commit_rule(&full, vec![seg(0.0, 25.0, "long")]);
        assert_eq!((c.commit_to, c.committed.len()), (full.end_sample(), 1));
        // Nothing heard: keep the last second for the next window.
        let c = commit_rule(&w, Vec::new());
        assert_eq!(c.commit_to, 7 * SECOND - SECOND * OPEN_TAIL_MS / 1000);
    }

    #[test]
    fn live_windows_batch_pauses_step_through_long_speech_and_never_exceed_the_longest() {
        let mut p = Pending::default();
        let push = |p: &mut Pending, seconds: u64| {
            p.buf
                .extend(std::iter::repeat_n(0i16, (seconds * SECOND) as usize));
            p.total += seconds * SECOND;
        };
        push(&mut p, 4);
        assert!(
            next_window(&mut p, None, true).is_none(),
            "speech, no pause yet"
        );
        p.cuts.push_back(3 * SECOND);
        let w = next_window(&mut p, None, true).expect("a pause: decoded ahead");
        assert_eq!(
            (w.kind, w.end_sample(), w.closed()),
            (Kind::Ahead, 3 * SECOND, true)
        );
        p.tried_to = w.end_sample();
        assert!(next_window(&mut p, None, true).is_none(), "once per pause");
        push(&mut p, 13);
        let w = next_window(&mut p, None, true).expect("17 s without a pause since");
        assert_eq!(
            (w.kind, w.end_sample(), w.closed()),
            (Kind::Open, 17 * SECOND, false)
        );
        p.tried_to = w.end_sample();
        assert!(
            next_window(&mut p, None, true).is_none(),
            "the next step is 3 s on"
        );
        p.cuts.push_back(16 * SECOND);
        let w = next_window(&mut p, None, true).expect("a pause after 15 s: committed");
        assert_eq!(
            (w.kind, w.end_sample(), w.closed()),
            (Kind::Pause, 16 * SECOND, true)
        );
        push(&mut p, 40);
        p.cuts.clear();
        let w = next_window(&mut p, None, true).expect("a full window");
        assert_eq!(w.pcm.len() as u64, SECOND * MAX_WINDOW_MS / 1000);
        assert!(!w.closed() && w.full);
        p.finished = true;
        let w = next_window(&mut p, None, true).expect("the rest, in windows");
        assert!(w.full && !w.closed(), "57 s is three windows");
    }

    #[test]
    fn a_pause_is_decoded_ahead_and_the_stop_starts_no_new_step() {
        let mut p = Pending::default();
        p.buf
            .extend(std::iter::repeat_n(0i16, (2 * SECOND) as usize));
        p.total = 2 * SECOND;
        p.last_voiced = SECOND + SECOND / 2;
        p.pause_end = Some(SECOND + SECOND * 7 / 10);
        assert!(
            next_window(&mut p, None, false).is_none(),
            "a file: nothing ahead"
        );
        let w = next_window(&mut p, None, true).expect("ahead of the pause");
        assert_eq!(
            (w.kind, w.end_sample(), w.closed()),
            (Kind::Ahead, SECOND * 17 / 10, true)
        );
        p.tried_to = w.end_sample();
        assert!(
            next_window(&mut p, None, true).is_none(),
            "decoded ahead once per pause"
        );
        p.buf
            .extend(std::iter::repeat_n(0i16, (3 * SECOND) as usize));
        p.total += 3 * SECOND;
        assert!(
            next_window(&mut p, Some(SECOND * 17 / 10), true).is_none(),
            "a result waits for its pause: no step meanwhile"
        );
        p.pause_end = None;
        p.stopping = true;
        assert!(
            next_window(&mut p, None, true).is_none(),
            "stopping: no new step"
        );
        p.finished = true;
        let w = next_window(&mut p, None, true).expect("the rest");
        assert_eq!(
            (w.kind, w.end_sample(), w.closed()),
            (Kind::Last, 5 * SECOND, true)
        );
    }

    #[test]
    fn a_file_batches_its_utterances_into_long_windows() {
        let mut p = Pending::default();
        p.buf
            .extend(std::iter::repeat_n(0i16, (12 * SECOND) as usize));
        p.total = 12 * SECOND;
        p.cuts.extend([3 * SECOND, 7 * SECOND]);
        assert!(
            next_window(&mut p, None, false).is_none(),
            "a file waits for more"
        );
        let w = next_window(&mut p, None, true).expect("live: everything to the last pause");
        assert_eq!((w.kind, w.end_sample()), (Kind::Ahead, 7 * SECOND));
        p.finished = true;
        let w = next_window(&mut p, None, false).expect("the whole file");
        assert_eq!((w.kind, w.end_sample()), (Kind::Last, 12 * SECOND));
        p.buf
            .extend(std::iter::repeat_n(0i16, (20 * SECOND) as usize));
        p.total += 20 * SECOND;
        let w = next_window(&mut p, None, false).expect("up to the last pause within 25 s");
        assert_eq!(
            (w.kind, w.end_sample(), w.closed()),
            (Kind::Pause, 7 * SECOND, true)
        );
    }

    #[test]
    fn a_file_for_a_model_bigger_than_tiny_gets_fuller_windows_and_live_speech_does_not() {
        assert_eq!(file_window_ms(4), MAX_WINDOW_MS, "tiny: 4 encoder layers");
        assert_eq!(file_window_ms(6), FILE_WINDOW_MS, "base");
        assert_eq!(file_window_ms(32), FILE_WINDOW_MS, "large");
        let filled = |file_window_ms: u64| {
            let mut p = Pending {
                file_window_ms,
                ..Pending::default()
            };
            p.buf
                .extend(std::iter::repeat_n(0i16, (40 * SECOND) as usize));
            p.total = 40 * SECOND;
            p.cuts
                .extend([10 * SECOND, 20 * SECOND, 28 * SECOND, 35 * SECOND]);
            p
        };
        let end = |file_window_ms: u64, live: bool| {
            let w = next_window(&mut filled(file_window_ms), None, live).expect("a window");
            (w.kind, w.end_sample())
        };
        assert_eq!(
            end(0, false),
            (Kind::Pause, 20 * SECOND),
            "the default: 25 s"
        );
        assert_eq!(end(MAX_WINDOW_MS, false), (Kind::Pause, 20 * SECOND));
        assert_eq!(end(FILE_WINDOW_MS, false), (Kind::Pause, 28 * SECOND));
        // Live speech commits at each pause once 15 s wait, whatever the model.
        assert_eq!(end(FILE_WINDOW_MS, true), end(0, true));
        // With no pause in reach, the open window is as long as the file's limit.
        let mut p = filled(FILE_WINDOW_MS);
        p.cuts.clear();
        let w = next_window(&mut p, None, false).expect("an open window");
        assert_eq!(
            (w.kind, w.end_sample(), w.full),
            (Kind::Open, 29 * SECOND, true)
        );
    }

    /// Drives the window rules (`next_window`, `commit_rule`, the ahead rule) the way the
    /// recognizer thread does, with a recognizer that cuts each window into random segments:
    /// audio arrives in random pieces with random pauses, live or from a file, stopped at a
    /// random point. Returns the committed ranges in order.
    fn drive(
        live: bool,
        file_window_ms: u64,
        pieces: &[(u64, bool)],
        cuts_every: u64,
        split: &[u64],
        voice_back: &[bool],
    ) -> (Vec<(u64, u64)>, u64) {
        let mut p = Pending {
            file_window_ms,
            ..Pending::default()
        };
        let mut committed = Vec::new();
        let mut ahead: Option<(u64, u64)> = None;
        let (mut next_piece, mut n) = (0, 0usize);
        for _ in 0..10_000 {
            if let Some((start, end)) = ahead {
                match p.ahead(start, end) {
                    Ahead::Final => {
                        committed.push((start, end));
                        p.advance(end, end);
                        ahead = None;
                        continue;
                    }
                    Ahead::Stale => ahead = None,
                    Ahead::Waiting => {}
                }
            }
            match next_window(&mut p, ahead.map(|(_, e)| e), live) {
                Some(w) => {
                    n += 1;
                    if w.kind == Kind::Ahead {
                        p.tried_to = w.end_sample();
                        ahead = Some((w.start_sample, w.end_sample()));
                        if voice_back[n % voice_back.len()] && !p.finished {
                            // The user goes on talking after the pause.
                            p.last_voiced = w.end_sample() + 1;
                        }
                        continue;
                    }
                    // The recognizer's segments: the window cut at random points.
                    let len = w.pcm.len() as u64;
                    let mut bounds: Vec<u64> = split
                        .iter()
                        .map(|&f| f * len / 1000)
                        .filter(|&b| b > 0 && b < len)
                        .collect();
                    bounds.sort_unstable();
                    bounds.dedup();
                    let mut from = 0;
                    let mut segments = Vec::new();
                    for to in bounds.into_iter().chain([len]) {
                        segments.push(Segment {
                            start_sample: from,
                            end_sample: to,
                            text: "w".into(),
                            no_speech_probability: 0.0,
                            heard: None,
                        });
                        from = to;
                    }
                    let c = commit_rule(&w, segments);
                    assert!(c.commit_to >= w.start_sample && c.commit_to <= w.end_sample());
                    if c.commit_to > w.start_sample {
                        committed.push((w.start_sample, c.commit_to));
                    }
                    p.advance(c.commit_to, w.end_sample());
                }
                None if next_piece < pieces.len() => {
                    // More audio: a piece of speech (voiced to its end) or of pause.
                    let (ms, voiced) = pieces[next_piece];
                    next_piece += 1;
                    let samples = ms * SECOND / 1000;
                    p.buf.extend(std::iter::repeat_n(0i16, samples as usize));
                    p.total += samples;
                    if voiced {
                        p.last_voiced = p.total;
                        p.pause_end = None;
                    } else if samples > 0 {
                        let end = (p.last_voiced + SECOND / 5).min(p.total);
                        p.pause_end = Some(end);
                        if ms >= cuts_every && end > p.base {
                            p.cuts.push_back(end);
                            p.pause_end = None;
                        }
                    }
                }
                None if !p.finished => {
                    // The stop: the segmenter closes the open utterance at its hangover.
                    p.stopping = true;
                    p.finished = true;
                    let end = (p.last_voiced + SECOND / 5).min(p.total);
                    if end > p.base && !p.cuts.contains(&end) {
                        p.cuts.push_back(end);
                    }
                }
                None => break,
            }
        }
        (committed, p.total)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(384))]

        /// Every sample of a recording ends up inside exactly one committed window (the
        /// invariant behind "nothing skipped for being quiet": a window's failure or the stop
        /// deadline turns such a window into a gap), in order, whatever the pauses, the
        /// recognizer's segments, the voice coming back after a pause, live or a file (its
        /// longest window a tiny model's or a bigger one's).
        #[test]
        fn every_sample_is_in_exactly_one_committed_window(
            live in proptest::prelude::any::<bool>(),
            file_window_ms in proptest::sample::select(vec![0, MAX_WINDOW_MS, FILE_WINDOW_MS]),
            pieces in proptest::collection::vec((1u64..9_000, proptest::prelude::any::<bool>()), 1..24),
            cuts_every in 300u64..1_500,
            split in proptest::collection::vec(1u64..1000, 0..5),
            voice_back in proptest::collection::vec(proptest::prelude::any::<bool>(), 1..4),
        ) {
            let (committed, total) =
                drive(live, file_window_ms, &pieces, cuts_every, &split, &voice_back);
            let mut at = 0;
            for &(from, to) in &committed {
                proptest::prop_assert_eq!(from, at, "{:?}", committed);
                proptest::prop_assert!(to > from);
                at = to;
            }
            proptest::prop_assert_eq!(at, total, "{:?}", committed);
        }
    }
}
