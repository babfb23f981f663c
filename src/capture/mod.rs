//! Capture: where a recording's audio comes from.
//!
//! [`source`] delivers audio as interleaved `f32` frames over a bounded channel: from a WAV
//! file ([`source::FileSource`], paced) or, with the `app` feature, from a cpal microphone
//! ([`source::CpalSource`]; its real-time callback neither allocates nor locks), with the
//! silence detector that notices a dead input. [`preroll`] keeps a warm input's last ≤ 500 ms
//! so the first word after the hotkey is not cut. What happens to the audio next (the WAV
//! asset, the recognizer) is the dictation pipeline's (`crate::pipeline`), one floor up.
//!
//! Invariants:
//! - Capture imports only `audio` and `session` below it: it never knows which recognizer
//!   will hear the audio.
//! - A source reports its end ([`source::SourceEvent::Ended`]); a channel that closes without
//!   it is a disconnect, never a clean end.

pub mod preroll;
pub mod source;
