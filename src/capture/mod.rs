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
//! [`segment`] is the voice-activity rule that cuts a recording into utterances, shared by
//! client-side turn commits and on-device recognition.
//!
//! Invariants:
//! - The bytes sent to the provider are exactly the bytes written to the WAV data chunk
//!   (PCM16 LE mono 24 kHz), so media references can point at WAV ranges.
//! - The durable-length watch only ever reports bytes that were fsynced.
//! - The WAV header's sizes are rewritten at every fsync, so a crash loses at most one
//!   cadence window; interrupted-WAV recovery fixes the rest.

pub mod convert;
pub mod pipeline;
pub mod preroll;
pub mod segment;
pub mod source;

use std::time::Duration;

use tokio::sync::watch;

use crate::realtime::engine::EngineReport;
use crate::realtime::protocol::{PCM_RATE_HZ, Settings};
use crate::session::store::{Continuation, StoreError};

/// Bytes of the canonical PCM WAV header hound writes for 16-bit mono.
pub const WAV_HEADER_BYTES: u64 = 44;
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
}

/// Streams 24 kHz mono `samples` through [`pipeline::record`] into the session of
/// `continuation`, paced by `options.realtime_factor`.
pub async fn transcribe_samples(
    continuation: Continuation,
    settings: Settings,
    api_key: String,
    samples: &[i16],
    options: FileOptions,
) -> Result<Transcription, CaptureError> {
    let source = pipeline::SamplesSource::new(samples.to_vec(), options.realtime_factor);
    let (_stop_tx, stop_rx) = watch::channel(false);
    pipeline::record(
        continuation,
        settings,
        api_key,
        Box::new(source),
        pipeline::SourceKind::Replay,
        stop_rx,
    )
    .await
}
