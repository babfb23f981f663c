//! Capture: where a recording's audio comes from.
//!
//! [`source`] delivers audio as interleaved `f32` frames over a bounded channel: from a WAV
//! file ([`source::FileSource`], paced), from any other audio or video file symphonia decodes
//! ([`decode::DecodedSource`]; [`open_file`] picks) or, with the `app` feature, from a cpal microphone
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

pub mod decode;
pub mod preroll;
pub mod source;

use std::path::Path;

use source::{AudioSource, FileSource, SourceError};

/// A source for the audio file at `path`: a WAV file hound reads through
/// [`source::FileSource`] (Persyk's own format, read as before), every other file through
/// [`decode::DecodedSource`].
pub fn open_file(path: &Path, realtime_factor: f64) -> Result<Box<dyn AudioSource>, SourceError> {
    let riff = std::fs::File::open(path)
        .and_then(|mut f| {
            let mut head = [0u8; 12];
            std::io::Read::read_exact(&mut f, &mut head).map(|()| head)
        })
        .is_ok_and(|h| &h[..4] == b"RIFF" && &h[8..12] == b"WAVE");
    if riff && let Ok(wav) = FileSource::open(path, realtime_factor) {
        return Ok(Box::new(wav));
    }
    Ok(Box::new(decode::DecodedSource::open(
        path,
        realtime_factor,
    )?))
}
