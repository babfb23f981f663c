//! Audio: the floor every recognizer and every source stands on.
//!
//! Sample work: [`convert`] turns any input (rate, channels, sample format) into 24 kHz mono
//! PCM16 with rubato; [`segment`] is the one voice-activity rule that cuts a recording into
//! utterances (client-side turn commits and on-device recognition both use it); [`clip`]
//! reads a stretch of a session's WAV asset back for playback (the only file I/O here, through
//! the session store's asset check); the constants here fix the one PCM format that the WAV
//! asset, the provider and the on-device engine share.
//!
//! Invariants:
//! - This module imports nothing from the rooms above it (capture, the engines, the
//!   pipeline, the app): it knows samples, not where they come from or go.
//! - The PCM format is one: 16-bit little-endian mono at [`PCM_RATE_HZ`], written to the WAV
//!   data chunk exactly as it is sent for recognition, so a byte range of the WAV names the
//!   audio a message was recognized from.

pub mod clip;
pub mod convert;
pub mod segment;

/// Sample rate of the recording's PCM (WAV asset, Realtime `audio/pcm` both ways, the
/// on-device engine's input).
pub const PCM_RATE_HZ: u32 = 24_000;

/// Bytes of the canonical PCM WAV header hound writes for 16-bit mono.
pub const WAV_HEADER_BYTES: u64 = 44;
