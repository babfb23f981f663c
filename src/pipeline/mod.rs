//! The dictation pipeline: a source in, a durable WAV asset and a recognizer out. Every
//! recording goes through it, from the microphone, a WAV file or samples in memory.
//!
//! ```text
//!  AudioSource ──events──► capture thread ──► Converter (24 kHz mono i16)
//!   (cpal / file)           │                 ├─► WAV asset (hound; fsync ≤ 250 ms, header current)
//!                           │                 └─► engine (100 ms chunks with their WAV offsets)
//!                           └─ silence (2 s), overrun, backpressure, write failure,
//!                              source gone, length cap → halt
//! ```
//!
//! The engine is the Realtime provider's ([`crate::realtime::engine`]) or the on-device one
//! ([`crate::local::dictation`]), chosen per recording ([`Recognition`]) and driven only
//! through the [`Recognizer`] seam; the capture side is the same for both. This room sits
//! above the engines and capture: it is the one place that knows both.
//!
//! Invariants:
//! - `recording.started` is durable before the source starts; `recording.finished` follows
//!   the engine's drain, with the real duration, the outcome and the gaps. A halt of capture
//!   itself (a `capture.*` code) makes the outcome `incomplete` and is recorded as a gap
//!   `{reason, startMs}` at the point the audio stops.
//! - Only [`SourceEvent::Ended`] (or the caller's stop) ends a recording cleanly: a source
//!   channel that closes without it is `capture.source-disconnected`. Device overloads that
//!   lost no frame here are counted ([`Transcription::input_overloads`]), not a halt.
//! - The WAV data never exceeds [`RecordOptions::max_data_bytes`] (at most
//!   [`MAX_WAV_DATA_BYTES`], what the 32-bit RIFF sizes can describe): at the cap the
//!   recording ends as `capture.max-length` with a valid header.
//! - The capture thread never blocks on the provider for a live source: a full engine queue
//!   is backpressure and halts capture visibly. A file source waits instead (it can).
//! - The engine's failure never stops capture (the connection refused, the key refused, a
//!   dropped connection, any halt): the WAV keeps recording until the source ends or the
//!   user stops, and the engine gets no more audio. After the stop, the audio the engine did
//!   not recognize — from the earliest of the failure point and its gaps over unrecognized
//!   tail audio, or all of it when it published nothing — is recognized by the on-device
//!   fallback ([`RecordOptions::fallback`], through the same [`Recognizer`] seam; it writes
//!   its own `model_change`), or, without one, is one gap `{reason: <the failure's code>,
//!   startMs, endMs}` and the outcome is `incomplete` ("Transcribe again" can recognize the
//!   whole WAV later). The codes: `provider.unauthorized` (HTTP 401), `provider.unreachable`,
//!   `provider.connect-failed`, `provider.disconnected`, `provider.no-session`, … ([`halt_code`]).
//! - The WAV bytes of a chunk are written (and, at the cadence, fsynced) before the chunk is
//!   handed to the engine, so its WAV range can be verified and referenced.

use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};

use crate::audio::convert::{Converter, extend_pcm16_le, i16_to_f32};
use crate::audio::{PCM_RATE_HZ, WAV_HEADER_BYTES};
use crate::capture::source::{
    AudioSource, EVENT_QUEUE_DEPTH, Silence, SilenceDetector, SourceError, SourceEvent,
    SourceFormat, pace,
};
use crate::local::{self, dictation::LocalSetup};
use crate::realtime::{self, protocol::Settings};
use crate::recognize::{
    AudioChunk, AudioSink, CaptureLink, EngineReport, EngineState, EngineView, Recognizer,
    RemovalOutcome, SendError, WavRange,
};
use crate::session::assets::CaptureAsset;
use crate::session::format::{EntryBody, Gap, Outcome, RecordingFinished, RecordingStarted};
use crate::session::store::{Continuation, StoreError, new_id};

/// Samples per chunk sent to the provider (100 ms).
pub const CHUNK_SAMPLES: usize = (PCM_RATE_HZ / 10) as usize;
/// The most WAV data one recording writes: the RIFF size field (data + 36 header bytes) is
/// 32-bit, so the data chunk may hold at most `u32::MAX - 36` bytes; rounded down to whole
/// 16-bit samples, that is 2,147,483,629 samples, about 24 h 51 min at 24 kHz. A recording
/// that reaches it ends cleanly as `capture.max-length` (see docs/format.md).
pub const MAX_WAV_DATA_BYTES: u64 = (u32::MAX as u64 - 36) / 2 * 2;
/// Default fsync cadence of the WAV asset.
pub const FSYNC_INTERVAL: Duration = Duration::from_millis(250);

/// Why a capture could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    #[error("capture.unsupported-input: the input's sample rate or channel count is not supported")]
    UnsupportedInput,
    #[error("capture.wav-write: writing the recording failed")]
    WavWrite,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CaptureError {
    pub fn code(&self) -> &'static str {
        match self {
            CaptureError::UnsupportedInput => "capture.unsupported-input",
            CaptureError::WavWrite => "capture.wav-write",
            CaptureError::Store(e) => e.code(),
        }
    }
}

/// How to stream a file.
#[derive(Debug, Clone, Copy)]
pub struct FileOptions {
    /// 1.0 = real time, 4.0 = four times faster, 0 = as fast as the engine takes it.
    pub realtime_factor: f64,
}

/// The end of a recording.
#[derive(Debug)]
pub struct Transcription {
    pub recording_id: String,
    pub duration_ms: u64,
    pub report: EngineReport,
    /// Why capture stopped early (a stable code or the engine's reason), if it did.
    pub halted: Option<String>,
    /// Input overloads the device reported (`capture.input-overload`) that lost no frame in
    /// Persyk's pipeline: counted, not a halt.
    pub input_overloads: u64,
    /// The engine's failure (its stable code, e.g. `provider.unauthorized`) when the capture
    /// outlived it: the audio from that point was recognized by the fallback
    /// ([`RecordOptions::fallback`]) or recorded as a gap with this reason.
    pub engine_failure: Option<String>,
    /// Whether the on-device fallback recognized the audio the engine could not.
    pub recovered_locally: bool,
}

/// Streams 24 kHz mono `samples` through [`record`] into the session of
/// `continuation`, paced by `options.realtime_factor`.
pub async fn transcribe_samples(
    continuation: Continuation,
    settings: Settings,
    api_key: String,
    samples: &[i16],
    options: FileOptions,
) -> Result<Transcription, CaptureError> {
    let source = SamplesSource::new(samples.to_vec(), options.realtime_factor);
    let (_stop_tx, stop_rx) = watch::channel(false);
    record(
        continuation,
        settings,
        api_key,
        Box::new(source),
        SourceKind::Replay,
        stop_rx,
    )
    .await
}

/// Which recognizer a recording feeds: the Realtime provider or the on-device engine
/// ([`crate::local::dictation`]). Everything else (the WAV asset, its cadence, the halts) is
/// the same pipeline for both.
pub enum Recognition {
    Realtime { settings: Settings, api_key: String },
    Local(LocalSetup),
}

/// How the pipeline treats its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A microphone: never wait on the engine; detect silence.
    Live,
    /// A file or buffer: wait for the engine when it is busy.
    Replay,
}

/// 24 kHz mono samples already in memory, delivered at a pace (tests, `transcribe_samples`).
pub struct SamplesSource {
    samples: Arc<Vec<i16>>,
    realtime_factor: f64,
    stop: Arc<AtomicBool>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl SamplesSource {
    pub fn new(samples: Vec<i16>, realtime_factor: f64) -> SamplesSource {
        SamplesSource {
            samples: Arc::new(samples),
            realtime_factor,
            stop: Arc::new(AtomicBool::new(false)),
            worker: None,
        }
    }
}

impl AudioSource for SamplesSource {
    fn format(&self) -> SourceFormat {
        SourceFormat {
            rate_hz: PCM_RATE_HZ,
            channels: 1,
        }
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        if self.worker.is_some() {
            return Err(SourceError::AlreadyStarted);
        }
        let (samples, stop, factor) = (
            self.samples.clone(),
            self.stop.clone(),
            self.realtime_factor,
        );
        self.worker = Some(std::thread::spawn(move || {
            let started = Instant::now();
            let mut sent = 0usize;
            for chunk in samples.chunks(CHUNK_SAMPLES) {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let frames = chunk.iter().map(|&s| i16_to_f32(s)).collect();
                if events.send(SourceEvent::Frames(frames)).is_err() {
                    return;
                }
                sent += chunk.len();
                pace(sent as u64, PCM_RATE_HZ, factor, started, &stop);
            }
            let _ = events.send(SourceEvent::Ended);
        }));
        Ok(())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// The live side of a recording, for a user interface: the engine's view, the input level
/// and removals of published messages while the provider connection is open.
pub struct LiveTap {
    /// Receives the engine's view once the engine has started.
    pub view: oneshot::Sender<watch::Receiver<EngineView>>,
    /// RMS level (0.0–1.0, stored as `f32` bits) of the latest 100 ms chunk.
    pub level: Arc<AtomicU32>,
    /// Removal requests, served in order while the recording runs. A request still queued
    /// when the recording ends gets no reply (its sender is dropped).
    pub removals: mpsc::Receiver<RemovalRequest>,
}

/// "Remove this canonical message": answered after the provider's acknowledgement.
pub struct RemovalRequest {
    pub entry_id: String,
    pub reply: oneshot::Sender<RemovalOutcome>,
}

/// The halt of a recording that reached [`RecordOptions::max_data_bytes`].
pub const MAX_LENGTH_CODE: &str = "capture.max-length";

/// Per-recording options of [`record_with`].
pub struct RecordOptions {
    /// The live side for a user interface, if any.
    pub tap: Option<LiveTap>,
    /// The most WAV data (bytes after the 44-byte header) one recording writes; at this
    /// length it ends as `capture.max-length`. [`MAX_WAV_DATA_BYTES`] unless a test lowers it.
    pub max_data_bytes: u64,
    /// The on-device engine that recognizes, after the user stops, the audio the Realtime
    /// engine could not (it never connected, the key was refused, the connection dropped).
    pub fallback: Option<Fallback>,
    /// The source is a file being transcribed: a stop before its end cancels, and the
    /// recording is incomplete with a `capture.cancelled` gap for the rest.
    pub stop_cancels: bool,
}

/// Makes the on-device engine's setup when the Realtime engine failed (loading the model is
/// deferred to then; `None` when no model can be loaded). Called at most once, on a blocking
/// thread.
pub type Fallback = Box<dyn FnOnce() -> Option<LocalSetup> + Send>;

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            tap: None,
            max_data_bytes: MAX_WAV_DATA_BYTES,
            fallback: None,
            stop_cancels: false,
        }
    }
}

/// How the capture thread ended.
struct CaptureEnd {
    data_bytes: u64,
    failure: Option<Failure>,
    wav_ok: bool,
    input_overloads: u64,
    /// The engine halted or stopped while capture went on: its reason and the WAV offset
    /// from which no audio was handed to it.
    engine_lost: Option<(String, u64)>,
}

/// Why capture stopped early: its own halt (a stable `capture.*` code), recorded as a gap of
/// the recording. The engine's failure never stops capture.
struct Failure(String);

impl Failure {
    fn capture(error: &SourceError) -> Failure {
        Failure(error.code().to_owned())
    }

    fn reason(&self) -> &str {
        &self.0
    }
}

/// The gap of a file whose transcription was stopped before the file's end.
pub const CANCELLED_CODE: &str = "capture.cancelled";

/// Records from `source` into the session of `continuation` until the source ends or `stop`
/// turns true, streaming to the provider; returns the engine's report and the recording.
pub async fn record(
    continuation: Continuation,
    settings: Settings,
    api_key: String,
    source: Box<dyn AudioSource>,
    kind: SourceKind,
    stop: watch::Receiver<bool>,
) -> Result<Transcription, CaptureError> {
    record_live(continuation, settings, api_key, source, kind, stop, None).await
}

/// [`record`] with a [`LiveTap`]: the caller watches the transcript and level and may ask
/// for removals while it runs.
pub async fn record_live(
    continuation: Continuation,
    settings: Settings,
    api_key: String,
    source: Box<dyn AudioSource>,
    kind: SourceKind,
    stop: watch::Receiver<bool>,
    tap: Option<LiveTap>,
) -> Result<Transcription, CaptureError> {
    let options = RecordOptions {
        tap,
        ..RecordOptions::default()
    };
    record_with(continuation, settings, api_key, source, kind, stop, options).await
}

/// [`record`] with [`RecordOptions`].
pub async fn record_with(
    continuation: Continuation,
    settings: Settings,
    api_key: String,
    source: Box<dyn AudioSource>,
    kind: SourceKind,
    stop: watch::Receiver<bool>,
    options: RecordOptions,
) -> Result<Transcription, CaptureError> {
    let recognition = Recognition::Realtime { settings, api_key };
    record_to(continuation, recognition, source, kind, stop, options).await
}

/// [`record_with`] for either recognizer ([`Recognition`]).
pub async fn record_to(
    mut continuation: Continuation,
    recognition: Recognition,
    mut source: Box<dyn AudioSource>,
    kind: SourceKind,
    mut stop: watch::Receiver<bool>,
    options: RecordOptions,
) -> Result<Transcription, CaptureError> {
    let max_data_bytes = options.max_data_bytes;
    let stop_cancels = options.stop_cancels;
    let fallback = options.fallback;
    let (view_tx, level, mut removals) = match options.tap {
        Some(t) => (Some(t.view), Some(t.level), Some(t.removals)),
        None => (None, None, None),
    };
    let handle = continuation.handle().clone();
    let recording_id = new_id();
    let asset_name = format!("{recording_id}.wav");
    let format = source.format();
    let converter = Converter::new(format.rate_hz, format.channels)
        .map_err(|_| CaptureError::UnsupportedInput)?;
    continuation.append_one(EntryBody::RecordingStarted(RecordingStarted {
        recording_id: recording_id.clone(),
        asset: format!("assets/{asset_name}"),
    }))?;
    let capture = handle.start_capture(&asset_name)?;
    let wav_file = capture.try_clone_file()?;
    let verify_file = Arc::new(capture.try_clone_file()?);
    let read_file = verify_file.clone();
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: PCM_RATE_HZ,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let wav = hound::WavWriter::new(BufWriter::new(wav_file), spec)
        .map_err(|_| CaptureError::WavWrite)?;
    let (durable_tx, durable_rx) = watch::channel(0u64);
    let link = CaptureLink {
        asset: asset_name.clone(),
        file: verify_file,
        durable: durable_rx,
    };
    let realtime = matches!(recognition, Recognition::Realtime { .. });
    let engine: Box<dyn Recognizer> = match recognition {
        Recognition::Realtime { settings, api_key } => Box::new(realtime::engine::start(
            settings,
            api_key,
            continuation.clone(),
            Some(link),
        )),
        Recognition::Local(setup) => Box::new(local::dictation::start(
            setup,
            continuation.clone(),
            &recording_id,
            link,
        )),
    };
    if let Some(tx) = view_tx {
        let _ = tx.send(engine.view());
    }
    let (events_tx, events_rx) = sync_channel(EVENT_QUEUE_DEPTH);
    let source_started = source.start(events_tx);
    let stop_flag = Arc::new(AtomicBool::new(false));
    let thread = {
        let audio = engine.sink();
        let view = engine.view();
        let stop_flag = stop_flag.clone();
        let asset = asset_name.clone();
        let start_error = source_started.err();
        std::thread::spawn(move || {
            let mut end = match start_error {
                Some(error) => CaptureEnd {
                    data_bytes: 0,
                    failure: Some(Failure::capture(&error)),
                    wav_ok: true,
                    input_overloads: 0,
                    engine_lost: None,
                },
                None => capture_loop(CaptureLoop {
                    events: events_rx,
                    converter,
                    wav,
                    capture: &capture,
                    durable: durable_tx,
                    audio,
                    view,
                    stop: stop_flag,
                    asset,
                    kind,
                    level,
                    max_data_bytes,
                    stop_cancels,
                    engine_lost: None,
                }),
            };
            source.stop();
            end.wav_ok &= capture.sync().is_ok();
            drop(capture);
            end
        })
    };
    // Wait for the source to end or for the caller's stop.
    let finished = Arc::new(tokio::sync::Notify::new());
    let joined = {
        let finished = finished.clone();
        tokio::task::spawn_blocking(move || {
            let r = thread.join();
            finished.notify_one();
            r
        })
    };
    // Serve removals meanwhile: each waits for the provider's answer (bounded by the
    // engine's removal deadline) before the next request or the stop is looked at.
    loop {
        tokio::select! {
            _ = finished.notified() => break,
            _ = stop_requested(&mut stop) => break,
            Some(req) = next_removal(&mut removals) => {
                let outcome = engine.remove(&req.entry_id).await;
                let _ = req.reply.send(outcome);
            }
        }
    }
    drop(removals);
    stop_flag.store(true, Ordering::SeqCst);
    let end = match joined.await {
        Ok(Ok(end)) => end,
        _ => CaptureEnd {
            data_bytes: 0,
            failure: Some(Failure("capture.thread-failed".into())),
            wav_ok: false,
            input_overloads: 0,
            engine_lost: None,
        },
    };
    // A file's Cancel abandons what the engine has not recognized yet, also when it came
    // after the whole file was read and while the engine drains: the user waits for
    // nothing, and the rest is a gap.
    let canceller = engine.canceller().filter(|_| stop_cancels);
    let report = match canceller {
        Some(cancel) => {
            // A Cancel that came before the drain abandons it from the start.
            let mut cancelled = *stop.borrow_and_update();
            if cancelled {
                cancel();
            }
            let stopping = engine.stop();
            tokio::pin!(stopping);
            loop {
                tokio::select! {
                    report = &mut stopping => break report,
                    _ = stop_requested(&mut stop), if !cancelled => {
                        // A sender gone without a stop is no Cancel: stop listening only.
                        cancelled = true;
                        if *stop.borrow() {
                            cancel();
                        }
                    }
                }
            }
        }
        None => engine.stop().await,
    };
    let leaf = report
        .leaf
        .clone()
        .or_else(|| continuation.leaf().map(str::to_owned));
    continuation.set_leaf(leaf);
    let duration_ms = end.data_bytes / 2 * 1000 / u64::from(PCM_RATE_HZ);
    // The engine failed while the capture went on: what it did not recognize is recognized
    // by the fallback, or is one gap with the failure's code.
    // The engine's own reason first (a stopped engine tells capture only "stopped").
    let failure = report
        .halted
        .clone()
        .or_else(|| end.engine_lost.as_ref().map(|(r, _)| r.clone()));
    let (report, engine_failure, recovered_locally) = match failure {
        Some(reason) => {
            let lost_at = end.engine_lost.as_ref().map(|(_, o)| *o);
            let span = Span {
                asset: &asset_name,
                file: &read_file,
                data_end: WAV_HEADER_BYTES + end.data_bytes,
                lost_at,
            };
            let fallback = fallback.filter(|_| realtime && end.wav_ok);
            let (report, recovered) = recover(
                report,
                &reason,
                span,
                fallback,
                &mut continuation,
                &recording_id,
            )
            .await;
            (report, Some(halt_code(&reason).to_owned()), recovered)
        }
        None => (report, None, false),
    };
    let complete = report.complete && end.failure.is_none() && end.wav_ok;
    // Capture's own halt is recorded as a gap from where the audio stops: the reason is in
    // the session, not only on a terminal.
    let mut gaps = report.gaps.clone();
    let wav_failure = (!end.wav_ok && end.failure.is_none()).then(|| CaptureError::WavWrite.code());
    if let Some(reason) = match &end.failure {
        Some(Failure(code)) => Some(code.as_str()),
        _ => wav_failure,
    } {
        gaps.push(Gap {
            reason: reason.to_owned(),
            item_id: None,
            start_ms: Some(duration_ms),
            end_ms: None,
        });
    }
    continuation.append_one(EntryBody::RecordingFinished(RecordingFinished {
        recording_id: recording_id.clone(),
        duration_ms,
        outcome: if complete {
            Outcome::Complete
        } else {
            Outcome::Incomplete
        },
        gaps: (!gaps.is_empty()).then_some(gaps),
    }))?;
    if !end.wav_ok {
        return Err(CaptureError::WavWrite);
    }
    Ok(Transcription {
        recording_id,
        duration_ms,
        report,
        halted: end.failure.map(|f| f.reason().to_owned()),
        input_overloads: end.input_overloads,
        engine_failure,
        recovered_locally,
    })
}

/// `customType` of the entry that says a recording came from a file, not a microphone.
pub use crate::session::SOURCE_FILE_TYPE;

/// The entry that names the file a recording was transcribed from, by its file name only —
/// never a folder of the user's disk (issue #38 item 4): `{"name": "memo.m4a"}`.
pub fn source_file_entry(path: &std::path::Path) -> EntryBody {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    EntryBody::Custom(crate::session::format::Custom {
        custom_type: SOURCE_FILE_TYPE.to_owned(),
        data: serde_json::json!({ "name": name }),
    })
}

/// The stable dotted code a halt reason starts with (`provider.unauthorized: HTTP 401` →
/// `provider.unauthorized`), or `engine.halted` for a reason without one.
pub fn halt_code(reason: &str) -> &str {
    let head = reason.split(':').next().unwrap_or_default().trim();
    let dotted = head.split_once('.').is_some_and(|(a, b)| {
        !a.is_empty()
            && !b.is_empty()
            && head
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
    });
    if dotted { head } else { "engine.halted" }
}

/// Gap reasons of the Realtime engine over audio it never had recognized at its end (sent
/// and not committed, or never sent): the fallback starts at the earliest of them.
const UNRECOGNIZED_TAIL: [&str; 3] = [
    realtime::engine::NOT_COMMITTED,
    realtime::engine::NO_SESSION,
    realtime::engine::COMMIT_UNANSWERED,
];

/// The recording's audio as the recovery after an engine failure sees it.
struct Span<'a> {
    asset: &'a str,
    file: &'a Arc<File>,
    /// The WAV offset just past the last sample.
    data_end: u64,
    /// Where capture stopped handing audio to the engine, if it did.
    lost_at: Option<u64>,
}

const BYTES_PER_MS: u64 = PCM_RATE_HZ as u64 * 2 / 1000;

/// After the engine failed: from the earliest audio it did not recognize (all of it when it
/// published nothing), the fallback recognizes the rest of the WAV; without a fallback that
/// audio is one gap with the failure's code. Returns the merged report and whether the
/// fallback ran.
async fn recover(
    mut report: EngineReport,
    reason: &str,
    span: Span<'_>,
    fallback: Option<Fallback>,
    continuation: &mut Continuation,
    recording_id: &str,
) -> (EngineReport, bool) {
    let mut from = span.lost_at.unwrap_or(span.data_end).min(span.data_end);
    for g in &report.gaps {
        if let Some(start) = g
            .start_ms
            .filter(|_| UNRECOGNIZED_TAIL.contains(&g.reason.as_str()))
        {
            from = from.min(WAV_HEADER_BYTES + start * BYTES_PER_MS);
        }
    }
    if report.messages.is_empty() {
        // Nothing was recognized: all of it, so no earlier gap stays open.
        from = WAV_HEADER_BYTES;
    }
    if from >= span.data_end {
        // Nothing after the failure point: the engine's own report says what was lost.
        return (report, false);
    }
    // The gaps the recovery covers: the tail ones, or every one when it starts at the top.
    let all = from == WAV_HEADER_BYTES;
    report
        .gaps
        .retain(|g| !all && !UNRECOGNIZED_TAIL.contains(&g.reason.as_str()));
    let from_ms = (from - WAV_HEADER_BYTES) / BYTES_PER_MS;
    let setup = match fallback {
        Some(make) => tokio::task::spawn_blocking(make).await.ok().flatten(),
        None => None,
    };
    let Some(setup) = setup else {
        report.gaps.push(Gap {
            reason: halt_code(reason).to_owned(),
            item_id: None,
            start_ms: Some(from_ms),
            end_ms: Some((span.data_end - WAV_HEADER_BYTES) / BYTES_PER_MS),
        });
        report.complete = false;
        return (report, false);
    };
    let (_durable_tx, durable) = watch::channel(span.data_end);
    let link = CaptureLink {
        asset: span.asset.to_owned(),
        file: span.file.clone(),
        durable,
    };
    let local: Box<dyn Recognizer> = Box::new(local::dictation::start(
        setup,
        continuation.clone(),
        recording_id,
        link,
    ));
    let fed = match local.sink() {
        Some(sink) => {
            let (file, asset, end) = (span.file.clone(), span.asset.to_owned(), span.data_end);
            tokio::task::spawn_blocking(move || feed(&*sink, &file, &asset, from, end))
                .await
                .unwrap_or(false)
        }
        None => false,
    };
    let local = local.stop().await;
    if let Some(leaf) = local.leaf.clone() {
        continuation.set_leaf(Some(leaf));
    }
    let complete = fed && local.complete && report.gaps.is_empty();
    report.messages.extend(local.messages);
    report.gaps.extend(local.gaps);
    if !fed {
        report.gaps.push(Gap {
            reason: halt_code(reason).to_owned(),
            item_id: None,
            start_ms: Some(from_ms),
            end_ms: Some((span.data_end - WAV_HEADER_BYTES) / BYTES_PER_MS),
        });
    }
    report.complete = complete;
    report.halted = local.halted;
    report.leaf = local.leaf.or(report.leaf);
    (report, true)
}

/// Hands the WAV bytes `from..end` to `sink` in 100 ms chunks with their ranges.
fn feed(sink: &dyn AudioSink, file: &File, asset: &str, from: u64, end: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let mut at = from;
    while at < end {
        let n = (end - at).min(CHUNK_SAMPLES as u64 * 2);
        let mut pcm = vec![0u8; usize::try_from(n).unwrap_or(0)];
        if file.read_exact_at(&mut pcm, at).is_err() {
            return false;
        }
        let chunk = AudioChunk {
            pcm,
            wav: Some(WavRange {
                asset: asset.to_owned(),
                offset: at,
            }),
        };
        if sink.blocking_send(chunk).is_err() {
            return false;
        }
        at += n;
    }
    true
}

/// Resolves when `stop` turns true or its sender goes away.
async fn stop_requested(stop: &mut watch::Receiver<bool>) {
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        if stop.changed().await.is_err() {
            return;
        }
    }
}

async fn next_removal(
    removals: &mut Option<mpsc::Receiver<RemovalRequest>>,
) -> Option<RemovalRequest> {
    match removals {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

struct CaptureLoop<'a> {
    events: std::sync::mpsc::Receiver<SourceEvent>,
    converter: Converter,
    wav: hound::WavWriter<BufWriter<File>>,
    capture: &'a CaptureAsset,
    durable: watch::Sender<u64>,
    audio: Option<Box<dyn AudioSink>>,
    view: watch::Receiver<EngineView>,
    stop: Arc<AtomicBool>,
    asset: String,
    kind: SourceKind,
    level: Option<Arc<AtomicU32>>,
    max_data_bytes: u64,
    stop_cancels: bool,
    /// Set when the engine halted or stopped: its reason and the first WAV offset it did not
    /// get.
    engine_lost: Option<(String, u64)>,
}

fn sync_wav(wav: &mut hound::WavWriter<BufWriter<File>>, capture: &CaptureAsset) -> bool {
    // hound's flush writes the buffered samples and the current header sizes.
    wav.flush().is_ok() && capture.sync().is_ok()
}

fn capture_loop(mut c: CaptureLoop<'_>) -> CaptureEnd {
    use std::sync::mpsc::TryRecvError;
    let started = Instant::now();
    let mut silence = SilenceDetector::new();
    let mut offset = WAV_HEADER_BYTES;
    let mut synced = WAV_HEADER_BYTES;
    let mut last_sync = Instant::now();
    let mut pending: Vec<i16> = Vec::with_capacity(CHUNK_SAMPLES * 2);
    let mut failure: Option<Failure> = None;
    let mut ended = false;
    let mut converted = Vec::new();
    let mut stopping = false;
    let mut source_ended = false;
    let mut input_overloads = 0u64;
    // Whole samples only, and never past what a WAV header can describe.
    let max_data_bytes = c.max_data_bytes.min(MAX_WAV_DATA_BYTES) / 2 * 2;
    while failure.is_none() {
        // The caller's stop, or a confirmed deletion of the session asking its local
        // captures to stop (`CaptureAsset::stop_requested`).
        if !stopping && (c.stop.load(Ordering::SeqCst) || c.capture.stop_requested()) {
            // Stop: keep what the source already delivered, then end.
            stopping = true;
            // A file cancelled ends here: it delivers as fast as it decodes, so "what was
            // delivered" would be the rest of the file. What is queued is not written; the
            // gap starts where the WAV ends.
            if c.stop_cancels {
                break;
            }
        }
        // The engine's halt never stops capture: the WAV keeps the audio, the engine gets no
        // more of it, and the recovery after the stop deals with the rest.
        if c.engine_lost.is_none() {
            let halted = match &c.view.borrow().state {
                EngineState::Halted(reason) => Some(reason.clone()),
                _ => None,
            };
            if let Some(reason) = halted {
                c.engine_lost = Some((reason, offset));
                c.audio = None;
            }
        }
        let next = if stopping {
            // Stopping: an empty or closed channel is the end of what was delivered.
            c.events.try_recv().map_err(|_: TryRecvError| None)
        } else {
            c.events
                .recv_timeout(Duration::from_millis(50))
                .map_err(Some)
        };
        match next {
            Ok(SourceEvent::Frames(frames)) => {
                converted.clear();
                c.converter.push(&frames, &mut converted);
                pending.extend_from_slice(&converted);
                if c.kind == SourceKind::Live && silence.feed(&converted) == Silence::Silent {
                    failure = Some(Failure::capture(&SourceError::SilentInput));
                }
            }
            Ok(SourceEvent::Error(SourceError::InputOverload { count })) => {
                // The device's overload, no frame lost here: counted, not a halt.
                input_overloads = input_overloads.saturating_add(count);
            }
            Ok(SourceEvent::Error(e)) => {
                if e.is_fatal() || matches!(e, SourceError::Overrun { .. }) {
                    failure = Some(Failure::capture(&e));
                }
            }
            Ok(SourceEvent::Ended) => {
                source_ended = true;
                ended = true;
            }
            Err(None) => ended = true,
            // The channel closed without `Ended`: the source died (a panic in its thread, a
            // stream torn down). What it delivered is kept; the recording is incomplete.
            Err(Some(RecvTimeoutError::Disconnected)) => {
                failure = Some(Failure::capture(&SourceError::SourceDisconnected));
                ended = true;
            }
            Err(Some(RecvTimeoutError::Timeout)) => {}
        }
        if c.kind == SourceKind::Live && silence.poll(started.elapsed()) == Silence::Silent {
            failure.get_or_insert_with(|| Failure::capture(&SourceError::SilentInput));
        }
        if ended {
            converted.clear();
            c.converter.flush(&mut converted);
            pending.extend_from_slice(&converted);
        }
        // Hand over whole 100 ms chunks (and the remainder at the end), up to the length cap.
        while pending.len() >= CHUNK_SAMPLES || (ended && !pending.is_empty()) {
            let room =
                usize::try_from(max_data_bytes.saturating_sub(offset - WAV_HEADER_BYTES) / 2)
                    .unwrap_or(usize::MAX);
            if room == 0 {
                failure.get_or_insert(Failure(MAX_LENGTH_CODE.into()));
                break;
            }
            let n = pending.len().min(CHUNK_SAMPLES).min(room);
            let chunk: Vec<i16> = pending.drain(..n).collect();
            if let Err(f) = deliver(&mut c, &chunk, &mut offset, &mut synced, &mut last_sync) {
                failure = Some(f);
                break;
            }
        }
        if ended {
            break;
        }
    }
    // A file stopped before its end is cancelled, not finished: the rest was never heard,
    // so the recording is incomplete with a gap from where it stopped (issue #38 item 3).
    if stopping && c.stop_cancels && !source_ended {
        failure.get_or_insert(Failure(CANCELLED_CODE.into()));
    }
    let wav_ok = sync_wav(&mut c.wav, c.capture);
    if wav_ok {
        c.durable.send_replace(offset);
    }
    let wav_ok = c.wav.finalize().is_ok() && wav_ok;
    CaptureEnd {
        data_bytes: offset - WAV_HEADER_BYTES,
        failure,
        wav_ok,
        input_overloads,
        engine_lost: c.engine_lost,
    }
}

/// Writes one chunk to the WAV (fsync at the cadence) and hands it to the engine.
fn deliver(
    c: &mut CaptureLoop<'_>,
    chunk: &[i16],
    offset: &mut u64,
    synced: &mut u64,
    last_sync: &mut Instant,
) -> Result<(), Failure> {
    let wav_write = || Failure(CaptureError::WavWrite.code().to_owned());
    for &s in chunk {
        c.wav.write_sample(s).map_err(|_| wav_write())?;
    }
    if let Some(level) = &c.level {
        level.store(rms(chunk).to_bits(), Ordering::Relaxed);
    }
    let mut pcm = Vec::with_capacity(chunk.len() * 2);
    extend_pcm16_le(chunk, &mut pcm);
    let range_start = *offset;
    let range = WavRange {
        asset: c.asset.clone(),
        offset: *offset,
    };
    *offset += pcm.len() as u64;
    // Cadence: every 250 ms of wall time, and at least every second of audio (a file source
    // may run far faster than real time).
    if last_sync.elapsed() >= FSYNC_INTERVAL || *offset - *synced >= u64::from(PCM_RATE_HZ) * 2 {
        if !sync_wav(&mut c.wav, c.capture) {
            return Err(wav_write());
        }
        *synced = *offset;
        c.durable.send_replace(*offset);
        *last_sync = Instant::now();
    }
    let chunk = AudioChunk {
        pcm,
        wav: Some(range),
    };
    let sent = match (&c.audio, c.kind) {
        (Some(audio), SourceKind::Live) => audio.try_send(chunk),
        (Some(audio), SourceKind::Replay) => audio.blocking_send(chunk),
        // The engine is gone: the WAV alone keeps the audio.
        (None, _) => Ok(()),
    };
    match sent {
        Ok(()) => Ok(()),
        Err(SendError::Backpressure) => Err(Failure("capture.backpressure".into())),
        // The engine stopped (halted or finished): capture goes on without it; this chunk is
        // the first it did not get.
        Err(SendError::Stopped) => {
            c.engine_lost
                .get_or_insert_with(|| ("engine.stopped".into(), range_start));
            c.audio = None;
            Ok(())
        }
    }
}

/// Root-mean-square of `samples`, 0.0–1.0 of full scale.
pub fn rms(samples: &[i16]) -> f32 {
    if samples.is_empty() {
        return 0.0;
    }
    let sum: f64 = samples.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    ((sum / samples.len() as f64).sqrt() / 32768.0) as f32
}
