//! The recording pipeline every audio source goes through: microphone, WAV file or samples.
//!
//! ```text
//!  AudioSource ──events──► capture thread ──► Converter (24 kHz mono i16)
//!   (cpal / file)           │                 ├─► WAV asset (hound; fsync ≤ 250 ms, header current)
//!                           │                 └─► engine (100 ms chunks with their WAV offsets)
//!                           └─ silence (2 s), overrun, backpressure, write failure → halt
//! ```
//!
//! Invariants:
//! - `recording.started` is durable before the source starts; `recording.finished` follows
//!   the engine's drain, with the real duration, the outcome and the gaps.
//! - The capture thread never blocks on the provider for a live source: a full engine queue
//!   is backpressure and halts capture visibly. A file source waits instead (it can).
//! - The WAV bytes of a chunk are written (and, at the cadence, fsynced) before the chunk is
//!   handed to the engine, so its WAV range can be verified and referenced.

use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};

use super::convert::{Converter, extend_pcm16_le, i16_to_f32};
use super::source::{
    AudioSource, EVENT_QUEUE_DEPTH, Silence, SilenceDetector, SourceError, SourceEvent,
    SourceFormat,
};
use super::{CHUNK_SAMPLES, CaptureError, FSYNC_INTERVAL, Transcription, WAV_HEADER_BYTES};
use crate::realtime::engine::{
    self, AudioChunk, AudioSender, CaptureLink, EngineState, EngineView, RemovalOutcome, SendError,
    WavRange,
};
use crate::realtime::protocol::{PCM_RATE_HZ, Settings};
use crate::session::assets::CaptureAsset;
use crate::session::format::{EntryBody, Outcome, RecordingFinished, RecordingStarted};
use crate::session::store::{Continuation, new_id};

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
                if factor > 0.0 {
                    let due =
                        Duration::from_secs_f64(sent as f64 / f64::from(PCM_RATE_HZ) / factor);
                    if let Some(wait) = due.checked_sub(started.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
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

/// How the capture thread ended.
struct CaptureEnd {
    data_bytes: u64,
    failure: Option<String>,
    wav_ok: bool,
}

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
    mut continuation: Continuation,
    settings: Settings,
    api_key: String,
    mut source: Box<dyn AudioSource>,
    kind: SourceKind,
    mut stop: watch::Receiver<bool>,
    tap: Option<LiveTap>,
) -> Result<Transcription, CaptureError> {
    let (view_tx, level, mut removals) = match tap {
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
    let engine = engine::start(settings, api_key, continuation.clone(), Some(link));
    if let Some(tx) = view_tx {
        let _ = tx.send(engine.view());
    }
    let (events_tx, events_rx) = sync_channel(EVENT_QUEUE_DEPTH);
    let source_started = source.start(events_tx);
    let stop_flag = Arc::new(AtomicBool::new(false));
    let thread = {
        let audio = engine.audio_sender();
        let view = engine.view();
        let stop_flag = stop_flag.clone();
        let asset = asset_name.clone();
        let start_error = source_started.err().map(|e| e.code().to_owned());
        std::thread::spawn(move || {
            let mut end = match start_error {
                Some(code) => CaptureEnd {
                    data_bytes: 0,
                    failure: Some(code),
                    wav_ok: true,
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
            failure: Some("capture thread failed".into()),
            wav_ok: false,
        },
    };
    let report = engine.stop().await;
    let leaf = report
        .leaf
        .clone()
        .or_else(|| continuation.leaf().map(str::to_owned));
    continuation.set_leaf(leaf);
    let duration_ms = end.data_bytes / 2 * 1000 / u64::from(PCM_RATE_HZ);
    let complete = report.complete && end.failure.is_none() && end.wav_ok;
    continuation.append_one(EntryBody::RecordingFinished(RecordingFinished {
        recording_id: recording_id.clone(),
        duration_ms,
        outcome: if complete {
            Outcome::Complete
        } else {
            Outcome::Incomplete
        },
        gaps: (!report.gaps.is_empty()).then(|| report.gaps.clone()),
    }))?;
    if !end.wav_ok {
        return Err(CaptureError::WavWrite);
    }
    Ok(Transcription {
        recording_id,
        duration_ms,
        report,
        halted: end.failure,
    })
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
    audio: AudioSender,
    view: watch::Receiver<engine::EngineView>,
    stop: Arc<AtomicBool>,
    asset: String,
    kind: SourceKind,
    level: Option<Arc<AtomicU32>>,
}

fn sync_wav(wav: &mut hound::WavWriter<BufWriter<File>>, capture: &CaptureAsset) -> bool {
    // hound's flush writes the buffered samples and the current header sizes.
    wav.flush().is_ok() && capture.sync().is_ok()
}

fn capture_loop(mut c: CaptureLoop<'_>) -> CaptureEnd {
    let started = Instant::now();
    let mut silence = SilenceDetector::new();
    let mut offset = WAV_HEADER_BYTES;
    let mut synced = WAV_HEADER_BYTES;
    let mut last_sync = Instant::now();
    let mut pending: Vec<i16> = Vec::with_capacity(CHUNK_SAMPLES * 2);
    let mut failure: Option<String> = None;
    let mut ended = false;
    let mut converted = Vec::new();
    let mut stopping = false;
    while failure.is_none() {
        // The caller's stop, or a confirmed deletion of the session asking its local
        // captures to stop (`CaptureAsset::stop_requested`).
        if !stopping && (c.stop.load(Ordering::SeqCst) || c.capture.stop_requested()) {
            // Stop: keep what the source already delivered, then end.
            stopping = true;
        }
        if let EngineState::Halted(reason) = &c.view.borrow().state {
            failure = Some(reason.clone());
            break;
        }
        let next = if stopping {
            c.events.try_recv().map_err(|e| match e {
                std::sync::mpsc::TryRecvError::Empty => RecvTimeoutError::Disconnected,
                std::sync::mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            })
        } else {
            c.events.recv_timeout(Duration::from_millis(50))
        };
        match next {
            Ok(SourceEvent::Frames(frames)) => {
                converted.clear();
                c.converter.push(&frames, &mut converted);
                pending.extend_from_slice(&converted);
                if c.kind == SourceKind::Live && silence.feed(&converted) == Silence::Silent {
                    failure = Some("capture.silent-input".into());
                }
            }
            Ok(SourceEvent::Error(e)) => {
                if e.is_fatal() || matches!(e, SourceError::Overrun { .. }) {
                    failure = Some(e.code().to_owned());
                }
            }
            Ok(SourceEvent::Ended) | Err(RecvTimeoutError::Disconnected) => ended = true,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if c.kind == SourceKind::Live && silence.poll(started.elapsed()) == Silence::Silent {
            failure.get_or_insert_with(|| "capture.silent-input".into());
        }
        if ended {
            converted.clear();
            c.converter.flush(&mut converted);
            pending.extend_from_slice(&converted);
        }
        // Hand over whole 100 ms chunks (and the remainder at the end).
        while pending.len() >= CHUNK_SAMPLES || (ended && !pending.is_empty()) {
            let n = pending.len().min(CHUNK_SAMPLES);
            let chunk: Vec<i16> = pending.drain(..n).collect();
            if let Err(code) = deliver(&mut c, &chunk, &mut offset, &mut synced, &mut last_sync) {
                failure = Some(code);
                break;
            }
        }
        if ended {
            break;
        }
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
    }
}

/// Writes one chunk to the WAV (fsync at the cadence) and hands it to the engine.
fn deliver(
    c: &mut CaptureLoop<'_>,
    chunk: &[i16],
    offset: &mut u64,
    synced: &mut u64,
    last_sync: &mut Instant,
) -> Result<(), String> {
    for &s in chunk {
        c.wav
            .write_sample(s)
            .map_err(|_| "capture.wav-write".to_owned())?;
    }
    if let Some(level) = &c.level {
        level.store(rms(chunk).to_bits(), Ordering::Relaxed);
    }
    let mut pcm = Vec::with_capacity(chunk.len() * 2);
    extend_pcm16_le(chunk, &mut pcm);
    let range = WavRange {
        asset: c.asset.clone(),
        offset: *offset,
    };
    *offset += pcm.len() as u64;
    // Cadence: every 250 ms of wall time, and at least every second of audio (a file source
    // may run far faster than real time).
    if last_sync.elapsed() >= FSYNC_INTERVAL || *offset - *synced >= u64::from(PCM_RATE_HZ) * 2 {
        if !sync_wav(&mut c.wav, c.capture) {
            return Err("capture.wav-write".into());
        }
        *synced = *offset;
        c.durable.send_replace(*offset);
        *last_sync = Instant::now();
    }
    let chunk = AudioChunk {
        pcm,
        wav: Some(range),
    };
    let sent = match c.kind {
        SourceKind::Live => c.audio.try_send(chunk),
        SourceKind::Replay => c.audio.blocking_send(chunk),
    };
    match sent {
        Ok(()) => Ok(()),
        Err(SendError::Backpressure) => Err("capture.backpressure".into()),
        // The engine stopped (halted or finished): keep recording to the WAV? No: stop.
        Err(SendError::Stopped) => Err("engine.stopped".into()),
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
