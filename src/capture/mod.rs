//! Capture: audio in, a crash-safe WAV asset and provider-ready chunks out.
//!
//! [`convert`] turns any input (rate, channels, sample format) into 24 kHz mono PCM16 with
//! rubato; [`source`] delivers audio from a WAV file or (with the `app` feature) a cpal
//! microphone. The pipeline below is what `persyk transcribe` uses: a WAV file streamed
//! through exactly the pipeline the microphone will use — `recording.started` durable before
//! the first sample, the WAV asset (exclusive, locked for the capture's life) written
//! continuously with a bounded fsync cadence and a current header, each chunk sent with its
//! WAV byte offset, then `recording.finished` with the real duration, outcome and gaps.
//!
//! Invariants:
//! - The bytes sent to the provider are exactly the bytes written to the WAV data chunk
//!   (PCM16 LE mono 24 kHz), so media references can point at WAV ranges.
//! - The durable-length watch only ever reports bytes that were fsynced.
//! - The WAV header's sizes are rewritten at every fsync, so a crash loses at most one
//!   cadence window; interrupted-WAV recovery fixes the rest.

pub mod convert;
pub mod source;

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::realtime::engine::{self, AudioChunk, CaptureLink, EngineReport, WavRange};
use crate::realtime::protocol::{PCM_RATE_HZ, Settings};
use crate::session::format::{EntryBody, Outcome, RecordingFinished, RecordingStarted};
use crate::session::store::{Continuation, StoreError, new_id};

/// Bytes of the canonical PCM WAV header hound writes for 16-bit mono.
pub const WAV_HEADER_BYTES: u64 = 44;
/// Samples per chunk sent to the provider (100 ms).
pub const CHUNK_SAMPLES: usize = (PCM_RATE_HZ / 10) as usize;
/// Default fsync cadence of the WAV asset.
pub const FSYNC_INTERVAL: Duration = Duration::from_millis(250);

/// Why a capture could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    #[error("capture.input-unreadable: the input WAV could not be read")]
    InputUnreadable,
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
            CaptureError::InputUnreadable => "capture.input-unreadable",
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

/// The end of a file transcription.
#[derive(Debug)]
pub struct Transcription {
    pub recording_id: String,
    pub duration_ms: u64,
    pub report: EngineReport,
}

/// Reads any WAV file hound understands (8/16/24/32-bit integer or 32-bit float, any channel
/// count and rate) and converts it with [`convert::Converter`] — downmix, rubato resampling —
/// to the 24 kHz mono PCM16 the WAV asset and the provider get.
pub fn read_input(path: &Path) -> Result<Vec<i16>, CaptureError> {
    let reader = hound::WavReader::open(path).map_err(|_| CaptureError::InputUnreadable)?;
    let spec = reader.spec();
    let frames: Vec<f32> = match spec.sample_format {
        hound::SampleFormat::Float => reader
            .into_samples::<f32>()
            .collect::<Result<_, _>>()
            .map_err(|_| CaptureError::InputUnreadable)?,
        hound::SampleFormat::Int => reader
            .into_samples::<i32>()
            .map(|s| s.map(|v| convert::int_to_f32(v, spec.bits_per_sample)))
            .collect::<Result<_, _>>()
            .map_err(|_| CaptureError::InputUnreadable)?,
    };
    let mut converter = convert::Converter::new(spec.sample_rate, spec.channels)
        .map_err(|_| CaptureError::UnsupportedInput)?;
    let mut out = Vec::with_capacity(
        converter.expected_output_len(frames.len() as u64 / u64::from(spec.channels.max(1)))
            as usize,
    );
    converter.push(&frames, &mut out);
    converter.flush(&mut out);
    Ok(out)
}

/// Streams `samples` through the capture pipeline into the session of `continuation`.
pub async fn transcribe_samples(
    mut continuation: Continuation,
    settings: Settings,
    api_key: String,
    samples: &[i16],
    options: FileOptions,
) -> Result<Transcription, CaptureError> {
    let handle = continuation.handle().clone();
    let recording_id = new_id();
    let asset_name = format!("{recording_id}.wav");
    // The recording exists on disk before its first sample.
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
    let mut wav = hound::WavWriter::new(BufWriter::new(wav_file), spec)
        .map_err(|_| CaptureError::WavWrite)?;
    let (durable_tx, durable_rx) = watch::channel(0u64);
    let link = CaptureLink {
        asset: asset_name.clone(),
        file: verify_file,
        durable: durable_rx,
    };
    let engine = engine::start(settings, api_key, continuation.clone(), Some(link));

    let mut offset = WAV_HEADER_BYTES;
    let mut last_sync = Instant::now();
    let started = Instant::now();
    let mut sent_ms = 0u64;
    let mut failure = None;
    for chunk in samples.chunks(CHUNK_SAMPLES) {
        let mut pcm = Vec::with_capacity(chunk.len() * 2);
        for &s in chunk {
            if wav.write_sample(s).is_err() {
                failure = Some(CaptureError::WavWrite);
                break;
            }
            pcm.extend_from_slice(&s.to_le_bytes());
        }
        if failure.is_some() {
            break;
        }
        let range = WavRange {
            asset: asset_name.clone(),
            offset,
        };
        offset += pcm.len() as u64;
        // Cadence: every 250 ms of wall time, and at least every second of audio (a file
        // source may run far faster than real time).
        if last_sync.elapsed() >= FSYNC_INTERVAL
            || offset - durable_tx.borrow().max(WAV_HEADER_BYTES) >= u64::from(PCM_RATE_HZ) * 2
        {
            if sync_wav(&mut wav, &capture).is_err() {
                failure = Some(CaptureError::WavWrite);
                break;
            }
            durable_tx.send_replace(offset);
            last_sync = Instant::now();
        }
        if engine
            .send_audio_wait(AudioChunk {
                pcm,
                wav: Some(range),
            })
            .await
            .is_err()
        {
            break;
        }
        sent_ms += chunk.len() as u64 * 1000 / u64::from(PCM_RATE_HZ);
        if options.realtime_factor > 0.0 {
            let due = Duration::from_secs_f64(sent_ms as f64 / 1000.0 / options.realtime_factor);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        if matches!(engine.view().borrow().state, engine::EngineState::Halted(_)) {
            break;
        }
    }
    // Final flush: header sizes current and everything durable.
    if failure.is_none() && sync_wav(&mut wav, &capture).is_err() {
        failure = Some(CaptureError::WavWrite);
    }
    if failure.is_none() {
        durable_tx.send_replace(offset);
    }
    let data_bytes = offset - WAV_HEADER_BYTES;
    let finalized = wav.finalize().is_ok() && capture.sync().is_ok();
    drop(capture);
    let report = engine.stop().await;
    let leaf = report
        .leaf
        .clone()
        .or_else(|| continuation.leaf().map(str::to_owned));
    continuation.set_leaf(leaf);
    let duration_ms = data_bytes / 2 * 1000 / u64::from(PCM_RATE_HZ);
    let complete = report.complete && failure.is_none() && finalized;
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
    if let Some(f) = failure {
        return Err(f);
    }
    Ok(Transcription {
        recording_id,
        duration_ms,
        report,
    })
}

fn sync_wav(
    wav: &mut hound::WavWriter<BufWriter<File>>,
    capture: &crate::session::assets::CaptureAsset,
) -> Result<(), CaptureError> {
    // hound's flush writes the buffered samples and the current header sizes.
    wav.flush().map_err(|_| CaptureError::WavWrite)?;
    capture.sync().map_err(CaptureError::Store)
}
