//! Live on-device dictation: the engine the recording pipeline feeds instead of the Realtime
//! provider when recognition is local.
//!
//! ```text
//!  pipeline chunks ─► intake thread ─► Segmenter ─► utterance jobs ─► recognizer thread
//!   (bounded)          (samples of the open          (bounded)          (Recognize, then
//!                       utterance only)                                  message or gap)
//!                                                    view (watch): provisional, messages
//! ```
//!
//! Each utterance the [`Segmenter`] closes is recognized on the recognizer thread while the
//! user keeps talking; its result is appended to the session as a canonical user message
//! with an audio block that references the utterance's byte range of the capture WAV.
//!
//! Invariants:
//! - Inference runs only on the engine's own recognizer thread, never on a tokio worker or the
//!   UI thread; utterances are recognized and published one at a time, in speech order.
//! - A message is only ever a recognizer's [`Verdict::Text`]: [`Verdict::NoSpeech`] writes
//!   nothing; a failed recognition is a gap `{reason: local.*, startMs, endMs}` recorded with
//!   the recording, never text.
//! - A message references its WAV range only once the capture reports those bytes durable
//!   (fsynced) and they equal the recognized samples; otherwise the samples go to their own
//!   exclusive asset first (the Realtime path's rule).
//! - An utterance shows in the view's `provisional` list ("transcribing…") from its end until
//!   its message or gap is written; provisional text is never persisted.
//! - A pause of [`SPECULATE_AFTER_MS`] inside an open utterance, with the recognizer idle,
//!   makes a guess: the utterance so far (to where a pause would end it) is recognized ahead.
//!   The guess lives only on the recognizer thread, is never shown or persisted, and becomes
//!   the verdict of the utterance it covers only when that utterance ends exactly there (the
//!   pause reaches its 600 ms, or the stop comes during it); otherwise it is dropped. So a stop
//!   during the pause after the last word finds the text ready or in progress. (Joining a
//!   guess with a separately recognized rest was tried and lost words at the cut: jfk.wav's
//!   WER went from 0 to 0.32.)
//! - Stop recognizes what is left within the drain deadline; past it every unrecognized
//!   utterance (and audio not yet segmented) becomes a `local.deadline` gap, and nothing is
//!   appended by this engine after [`LocalEngine::stop`] returns.
//! - Removal has no remote party: `message.removed` is appended directly (docs/format.md).
//! - Queues are bounded: [`CHUNK_QUEUE`] chunks into the intake, [`JOB_QUEUE`] utterances
//!   into the recognizer. A live source meets a full intake as backpressure (capture halts
//!   visibly); a file source waits.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, json};
use tokio::sync::{oneshot, watch};

use super::{LocalError, Verdict};
use crate::audio::segment::{SegmentEvent, Segmenter, SegmenterConfig, Utterance};
use crate::audio::{PCM_RATE_HZ, WAV_HEADER_BYTES};
use crate::recognize::{
    AudioChunk, AudioSink, CAPTURE_DURABLE_WAIT, CaptureLink, EngineFuture, EngineReport,
    EngineState, EngineView, PublishedMessage, Recognizer, RemovalOutcome, SendError, Speaker,
};
use crate::session::format::{
    AssetRef, Block, ByteRange, EntryBody, Gap, Message, MessageRemoved, ModelChange, MsRange, Role,
};
use crate::session::store::{Continuation, new_id};

/// Chunks (100 ms each) queued into the intake: 25.6 s of audio.
pub const CHUNK_QUEUE: usize = 256;
/// Utterances queued for recognition.
pub const JOB_QUEUE: usize = 32;
/// Stop's default deadline for recognizing what is left.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(30);
/// The gap reason of utterances not recognized before the stop deadline.
pub const DEADLINE_REASON: &str = "local.deadline";
/// Non-speech after the last voiced frame of an open utterance after which it is recognized
/// ahead (speculatively), in case it ends there.
pub const SPECULATE_AFTER_MS: u64 = 300;
/// What the view shows for an utterance being recognized.
pub const PROVISIONAL_TEXT: &str = "transcribing…";
/// The provider name in `model_change` and on messages.
pub const PROVIDER: &str = "local";

/// Recognizes one utterance of 24 kHz mono PCM16 (the seam for tests: a recognizer that
/// fails on purpose).
pub trait Recognize: Send {
    fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError>;
}

/// Where the text comes from, for `model_change` and the messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The model's id (`ggml-tiny.en`).
    pub model_id: String,
    /// The runtime and its version (`whisper.cpp 1.7.6`), recorded as `model_change.api`.
    pub api: String,
}

/// Everything a local recording needs besides the pipeline's own parts.
pub struct LocalSetup {
    pub recognizer: Box<dyn Recognize>,
    pub provenance: Provenance,
    /// How long stop waits for the utterances left to recognize.
    pub drain_deadline: Duration,
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
}

impl LocalSender {
    /// Without waiting; a full intake is backpressure.
    pub fn try_send(&self, chunk: AudioChunk) -> Result<(), SendError> {
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

/// One utterance waiting for (or in) recognition, or a guess at the open one.
struct Job {
    /// The utterance's index; `None` for a speculative guess at the open utterance.
    index: Option<u64>,
    start_sample: u64,
    pcm: Vec<i16>,
}

impl Job {
    fn end_sample(&self) -> u64 {
        self.start_sample + self.pcm.len() as u64
    }
}

/// What does not change during a recording.
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
    /// Ended utterances not yet resolved: (index, startMs, endMs).
    pending: VecDeque<(u64, u64, u64)>,
    /// Samples the intake has segmented so far.
    segmented_samples: u64,
    /// A speculative guess is queued or being recognized.
    speculating: bool,
    intake_done: bool,
    provenance: Provenance,
}

impl Writer {
    fn view(&self) -> EngineView {
        EngineView {
            state: self.state.clone(),
            provisional: self
                .pending
                .iter()
                .map(|(i, _, _)| (format!("utterance-{i}"), PROVISIONAL_TEXT.to_owned()))
                .collect(),
            messages: self.messages.clone(),
            gaps: self.gaps.len(),
            gap_at: self.gap_at.clone(),
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
        pending: VecDeque::new(),
        segmented_samples: 0,
        speculating: false,
        intake_done: false,
        provenance: setup.provenance,
    };
    let shared = Arc::new(Shared {
        writer: Mutex::new(writer),
        view: view_tx,
    });
    shared.publish(&shared.lock());
    let (chunk_tx, chunk_rx) = sync_channel::<AudioChunk>(CHUNK_QUEUE);
    let (job_tx, job_rx) = sync_channel::<Job>(JOB_QUEUE);
    let (done_tx, done) = oneshot::channel();
    {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("persyk-local-intake".into())
            .spawn(move || intake(chunk_rx, job_tx, &shared))
            .ok();
    }
    {
        let shared = shared.clone();
        let recognizer = setup.recognizer;
        std::thread::Builder::new()
            .name("persyk-local-recognizer".into())
            .spawn(move || {
                recognize_loop(job_rx, recognizer, &shared, &capture);
                let _ = done_tx.send(());
            })
            .ok();
    }
    LocalEngine {
        sender: Some(LocalSender { tx: chunk_tx }),
        shared,
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

    /// Ends the audio, recognizes what is left (within the drain deadline) and reports.
    pub async fn stop(mut self) -> EngineReport {
        self.sender = None;
        {
            let mut w = self.shared.lock();
            if !matches!(w.state, EngineState::Halted(_)) {
                w.state = EngineState::Finishing;
            }
            self.shared.publish(&w);
        }
        if let Some(done) = self.done.take() {
            let _ = tokio::time::timeout(self.drain_deadline, done).await;
        }
        let mut w = self.shared.lock();
        w.closed = true;
        // What is left past the deadline: each unrecognized utterance is a gap, and so is the
        // audio the intake never segmented.
        let left: Vec<_> = w.pending.drain(..).collect();
        for (_, start_ms, end_ms) in left {
            w.gap(Gap {
                reason: DEADLINE_REASON.into(),
                item_id: None,
                start_ms: Some(start_ms),
                end_ms: Some(end_ms),
            });
        }
        if !w.intake_done {
            let start_ms = ms(w.segmented_samples);
            w.gap(Gap {
                reason: DEADLINE_REASON.into(),
                item_id: None,
                start_ms: Some(start_ms),
                end_ms: None,
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

    fn stop(self: Box<Self>) -> EngineFuture<'static, EngineReport> {
        Box::pin(LocalEngine::stop(*self))
    }
}

/// The intake thread: segments the chunks and hands each ended utterance's samples over.
fn intake(chunks: Receiver<AudioChunk>, jobs: SyncSender<Job>, shared: &Shared) {
    let mut segmenter = Segmenter::new(SegmenterConfig::for_rate(PCM_RATE_HZ));
    let keep_back = u64::from(PCM_RATE_HZ) * 3;
    // Samples from `base` on (only what an utterance may still need).
    let mut buf: Vec<i16> = Vec::new();
    let mut base = 0u64;
    let mut open_start: Option<u64> = None;
    let mut events = Vec::new();
    let mut samples = Vec::new();
    let mut index = 0u64;
    // The last range guessed at: each pause is guessed at once.
    let mut guessed: Option<(u64, u64)> = None;
    let speculate_after = u64::from(PCM_RATE_HZ) * SPECULATE_AFTER_MS / 1000;
    let ended = |u: Utterance, buf: &[i16], base: u64, index: &mut u64| -> bool {
        let (from, to) = (
            (u.start_sample.max(base) - base) as usize,
            (u.end_sample.saturating_sub(base) as usize).min(buf.len()),
        );
        if from >= to {
            return true;
        }
        let job = Job {
            index: Some(*index),
            start_sample: base + from as u64,
            pcm: buf[from..to].to_vec(),
        };
        {
            let mut w = shared.lock();
            if w.closed {
                return false;
            }
            let end = base + to as u64;
            w.pending.push_back((
                *index,
                ms(job.start_sample),
                ms(end).max(ms(job.start_sample) + 1),
            ));
            shared.publish(&w);
        }
        *index += 1;
        jobs.send(job).is_ok()
    };
    let mut alive = true;
    while alive {
        let chunk = chunks.recv();
        let finished = chunk.is_err();
        events.clear();
        if let Ok(chunk) = chunk {
            samples.clear();
            samples.extend(
                chunk
                    .pcm
                    .chunks_exact(2)
                    .map(|b| i16::from_le_bytes([b[0], b[1]])),
            );
            buf.extend_from_slice(&samples);
            segmenter.push(&samples, &mut events);
        } else {
            segmenter.finish(&mut events);
        }
        for e in &events {
            match *e {
                SegmentEvent::Started { start_sample } => open_start = Some(start_sample),
                SegmentEvent::Ended(u) => {
                    open_start = None;
                    alive &= ended(u, &buf, base, &mut index);
                }
            }
        }
        // Drop what no utterance can need any more.
        let position = segmenter.position();
        let keep_from = open_start.unwrap_or(position.saturating_sub(keep_back));
        if keep_from > base + u64::from(PCM_RATE_HZ) {
            let n = ((keep_from - base) as usize).min(buf.len());
            buf.drain(..n);
            base += n as u64;
        }
        // A pause inside the open utterance: guess at it while the recognizer is idle, so
        // that if it ends here (the pause goes on, or the user stops) its text is ready.
        let guess = segmenter.open_utterance().filter(|open| {
            !finished
                && position >= open.last_voiced_end + speculate_after
                && open.hangover_end <= position
                && open.start_sample >= base
                && guessed != Some((open.start_sample, open.hangover_end))
                && super::worth_recognizing(open.voiced_ms)
        });
        let mut w = shared.lock();
        w.segmented_samples = position;
        if finished {
            w.intake_done = true;
            break;
        }
        if w.closed {
            break;
        }
        if let Some(open) = guess
            && w.pending.is_empty()
            && !w.speculating
        {
            let (from, to) = (
                (open.start_sample - base) as usize,
                ((open.hangover_end - base) as usize).min(buf.len()),
            );
            let job = Job {
                index: None,
                start_sample: open.start_sample,
                pcm: buf[from..to].to_vec(),
            };
            if jobs.try_send(job).is_ok() {
                w.speculating = true;
                guessed = Some((open.start_sample, open.hangover_end));
            }
        }
    }
}

/// The verdict on `job`: the guess when it covers exactly the same samples, else a
/// recognition of the utterance.
fn verdict_for(
    job: &Job,
    guess: Option<(u64, u64, Verdict)>,
    recognizer: &mut dyn Recognize,
) -> Result<Verdict, LocalError> {
    match guess {
        Some((start, end, verdict)) if start == job.start_sample && end == job.end_sample() => {
            Ok(verdict)
        }
        _ => recognizer.transcribe(&job.pcm),
    }
}

/// The recognizer thread: one utterance at a time, in order.
fn recognize_loop(
    jobs: Receiver<Job>,
    mut recognizer: Box<dyn Recognize>,
    shared: &Shared,
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
    // The last guess (start, end, verdict): only ever used for the utterance it guessed at,
    // never published.
    let mut guess: Option<(u64, u64, Verdict)> = None;
    while let Ok(job) = jobs.recv() {
        let Some(index) = job.index else {
            let verdict = recognizer.transcribe(&job.pcm);
            let mut w = shared.lock();
            w.speculating = false;
            if w.closed {
                return;
            }
            guess = verdict
                .ok()
                .map(|v| (job.start_sample, job.end_sample(), v));
            continue;
        };
        let verdict = verdict_for(&job, guess.take(), recognizer.as_mut());
        let Some((start_ms, end_ms)) = shared
            .lock()
            .pending
            .iter()
            .find(|p| p.0 == index)
            .map(|p| (p.1, p.2))
        else {
            return;
        };
        // The reference waits (bounded) for the capture's fsync, outside the lock.
        let audio = match &verdict {
            Ok(Verdict::Text(_)) => Some(audio_block(
                &fixed, &handle, capture, &job, start_ms, end_ms,
            )),
            _ => None,
        };
        let mut w = shared.lock();
        if w.closed {
            return;
        }
        match verdict {
            Ok(Verdict::NoSpeech) => {}
            Ok(Verdict::Text(text)) => {
                match audio.unwrap_or_else(|| Err("local.internal".into())) {
                    Ok(asset) => {
                        let body = message_body(&fixed, asset, &text, start_ms, end_ms);
                        match w.continuation.append_one(body) {
                            Ok(entry_id) => w.messages.push(PublishedMessage {
                                entry_id,
                                item_id: format!("utterance-{index}"),
                                speaker: Speaker::User,
                                text,
                                removed: false,
                            }),
                            Err(e) => {
                                w.halt(e.code());
                                w.closed = true;
                            }
                        }
                    }
                    Err(code) => {
                        w.halt(&code);
                        w.closed = true;
                    }
                }
            }
            Err(e) => w.gap(Gap {
                reason: e.code().to_owned(),
                item_id: None,
                start_ms: Some(start_ms),
                end_ms: Some(end_ms),
            }),
        }
        w.pending.retain(|p| p.0 != index);
        shared.publish(&w);
        if w.closed {
            return;
        }
    }
}

/// The asset reference of an utterance: its WAV range once durable and equal, else its own
/// asset.
fn audio_block(
    w: &Fixed,
    handle: &crate::session::SessionHandle,
    capture: &CaptureLink,
    job: &Job,
    start_ms: u64,
    end_ms: u64,
) -> Result<Block, String> {
    let mut bytes = Vec::with_capacity(job.pcm.len() * 2);
    crate::audio::convert::extend_pcm16_le(&job.pcm, &mut bytes);
    let start = WAV_HEADER_BYTES + job.start_sample * 2;
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

fn message_body(w: &Fixed, audio: Block, text: &str, start_ms: u64, end_ms: u64) -> EntryBody {
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

    /// Says how many samples it heard, and remembers each call's length.
    #[derive(Default)]
    struct Counting(Vec<usize>);

    impl Recognize for Counting {
        fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
            self.0.push(pcm_24k.len());
            Ok(Verdict::Text(format!("heard {}", pcm_24k.len())))
        }
    }

    fn job(start: u64, len: usize) -> Job {
        Job {
            index: Some(0),
            start_sample: start,
            pcm: vec![1; len],
        }
    }

    fn text(t: &str) -> Verdict {
        Verdict::Text(t.into())
    }

    #[test]
    fn a_guess_at_the_same_range_is_the_verdict_without_recognizing_again() {
        let mut r = Counting::default();
        let v = verdict_for(&job(100, 50), Some((100, 150, text("guess"))), &mut r);
        assert_eq!(v.expect("verdict"), text("guess"));
        let v = verdict_for(&job(100, 50), Some((100, 150, Verdict::NoSpeech)), &mut r);
        assert_eq!(v.expect("verdict"), Verdict::NoSpeech);
        assert!(r.0.is_empty());
    }

    #[test]
    fn a_guess_at_other_samples_is_not_used() {
        // The utterance went on after the guess, started elsewhere, or ended before it.
        for guess in [(100, 150), (0, 180), (100, 200)] {
            let mut r = Counting::default();
            let v = verdict_for(&job(100, 80), Some((guess.0, guess.1, text("x"))), &mut r);
            assert_eq!(v.expect("verdict"), text("heard 80"), "{guess:?}");
            assert_eq!(r.0, [80]);
        }
        let mut r = Counting::default();
        let v = verdict_for(&job(100, 80), None, &mut r);
        assert_eq!(v.expect("verdict"), text("heard 80"));
        let v = verdict_for(&job(100, 80), None, &mut FailingRecognizer);
        assert_eq!(v.map_err(|e| e.code()), Err("local.inference-failed"));
    }
}
