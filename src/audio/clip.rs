//! A clip: the PCM16 samples of one stretch of a session's recording, read for playback.
//!
//! A [`ClipRequest`] names a WAV asset of the session (`assets/<NAME>`) and a [`Span`] of it:
//! the whole recording, a message's audio block (`range: {startMs, endMs}`), or the byte range
//! a Realtime message's `replay.audio` carries. [`read_clip`] reads exactly the samples of
//! that span from the file, with hound parsing the header, and returns them mono at the
//! file's own rate; the caller (the app) plays them.
//!
//! Invariants:
//! - Reading never writes, never panics and never aborts: any file, any range, gives a
//!   [`Clip`] or a [`ClipError`] with a stable code. The header is not trusted for sizes: a
//!   rate outside [`MIN_RATE`]–[`MAX_RATE`] or more than [`MAX_CHANNELS`] channels is
//!   `clip.wrong-format`; a clip holds at most [`MAX_CLIP_SAMPLES`] samples and reads at
//!   most [`MAX_CLIP_BYTES`] bytes, whatever the caller's limit in milliseconds (a longer
//!   span is cut and marked [`Clip::truncated`]); its memory is reserved with
//!   `try_reserve` (`clip.too-large` when it cannot be had), never asked of the allocator
//!   in a way that aborts.
//! - Only the file's real samples are read: the span is clamped to the shorter of the data
//!   chunk the header declares and the data the file actually holds (a recording still being
//!   written, torn or recovered may be shorter than a range that names it). A header that
//!   declares no data at all (a capture whose sizes were not written yet) counts as unknown:
//!   the file's length decides. A span that lies wholly beyond the end is
//!   `clip.out-of-range`, never an empty clip.
//! - The asset is opened through the store's one asset check (`assets::open_existing_asset`:
//!   a plain name under a real `assets/` folder, no symlinks), never by joining a path.
//! - Sample `n` of a span starts at `start` frames: `startMs × rate / 1000` (rounded down),
//!   and a byte range's frames are counted from the data chunk's first byte, so at 24 kHz a
//!   message's range is exactly `24 × (endMs − startMs)` samples.

use std::fs::File;
use std::io::{BufReader, Seek};
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde_json::{Map, Value};

use crate::session::ASSETS_DIR;
use crate::session::assets::open_existing_asset;
use crate::session::format::{AssetRef, Block, ByteRange, MsRange};
use crate::session::store::StoreError;

/// Frames read from the file at a time.
const READ_FRAMES: usize = 16_384;
/// The lowest sample rate read (telephone audio).
pub const MIN_RATE: u32 = 8_000;
/// The highest sample rate read (studio audio).
pub const MAX_RATE: u32 = 192_000;
/// The most channels read (7.1 surround).
pub const MAX_CHANNELS: u16 = 8;
/// The most samples a clip holds: 30 minutes at 48 kHz (165 MiB of `i16`). Persyk's own
/// 24 kHz recordings reach it after an hour.
pub const MAX_CLIP_SAMPLES: u64 = 48_000 * 60 * 30;
/// The most bytes of the file a clip reads: 30 minutes of 48 kHz stereo PCM16.
pub const MAX_CLIP_BYTES: u64 = MAX_CLIP_SAMPLES * 4;

/// Which stretch of the asset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// The whole recording.
    Whole,
    /// Milliseconds from the recording's start (an audio block's `range`).
    Ms(MsRange),
    /// Bytes of the WAV file, half-open (a Realtime message's `replay.audio.byteRange`).
    Bytes(ByteRange),
}

/// A stretch of a session's WAV asset to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClipRequest {
    /// The asset's name inside `assets/` (`<recording>.wav`).
    pub asset: String,
    pub span: Span,
}

impl ClipRequest {
    /// The whole recording `assets/<asset>`.
    pub fn whole(asset: impl Into<String>) -> ClipRequest {
        ClipRequest {
            asset: asset.into(),
            span: Span::Whole,
        }
    }

    /// What an `audio` block plays: its `range` of its WAV asset (its asset's `byteRange`
    /// when it has no `range`). `None` for other blocks, an asset that is missing or not a
    /// WAV (an utterance kept in its own `.pcm` asset), or a path outside `assets/`.
    pub fn of_block(block: &Block) -> Option<ClipRequest> {
        let Block::Audio { asset, range, .. } = block else {
            return None;
        };
        let AssetRef::Available {
            path,
            mime_type,
            byte_range,
            ..
        } = asset
        else {
            return None;
        };
        if mime_type != "audio/wav" && !path.ends_with(".wav") {
            return None;
        }
        let span = match (range, byte_range) {
            (Some(r), _) => Span::Ms(*r),
            (None, Some(b)) => Span::Bytes(*b),
            (None, None) => Span::Whole,
        };
        Some(ClipRequest {
            asset: asset_name(path)?.to_owned(),
            span,
        })
    }

    /// What a message plays: its first playable audio block, else the capture WAV bytes its
    /// `replay.audio` names (`{"path": "assets/<recording>.wav", "byteRange": {…}}`, what the
    /// Realtime engine writes for a client turn). `None`: the message has no audio.
    pub fn of_message(
        content: &[Block],
        replay: Option<&Map<String, Value>>,
    ) -> Option<ClipRequest> {
        content.iter().find_map(ClipRequest::of_block).or_else(|| {
            let audio = replay?.get("audio")?;
            let path = audio.get("path")?.as_str()?;
            let range = audio.get("byteRange")?;
            let start = range.get("start")?.as_u64()?;
            let end = range.get("end")?.as_u64()?;
            let asset = asset_name(path).filter(|_| path.ends_with(".wav") && start < end)?;
            Some(ClipRequest {
                asset: asset.to_owned(),
                span: Span::Bytes(ByteRange { start, end }),
            })
        })
    }
}

/// `assets/<NAME>` → `NAME` (a plain name: the asset check refuses anything else).
fn asset_name(path: &str) -> Option<&str> {
    path.strip_prefix(ASSETS_DIR)?
        .strip_prefix('/')
        .filter(|n| !n.is_empty() && !n.contains('/'))
}

/// The samples of a span, mono PCM16.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clip {
    /// One sample per frame (channels averaged when the file has more than one).
    pub samples: Vec<i16>,
    /// The file's sample rate (24 kHz for Persyk's recordings).
    pub sample_rate: u32,
    /// The first frame read, from the start of the recording.
    pub start_frame: u64,
    /// Frames the span asked for.
    pub requested_frames: u64,
    /// The span reached past the end of the file's samples: fewer were read.
    pub clamped: bool,
    /// The span was longer than the caller's limit: only its first part was read.
    pub truncated: bool,
}

impl Clip {
    /// The clip's length in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        (self.samples.len() as u64 * 1000)
            .checked_div(u64::from(self.sample_rate))
            .unwrap_or(0)
    }
}

/// Why a clip cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClipError {
    #[error("clip.invalid-path: the asset is not a plain file inside the session's assets folder")]
    InvalidPath,
    #[error("clip.missing: the recording's file is not there")]
    Missing,
    #[error("clip.unreadable: the recording's file could not be read: {0}")]
    Unreadable(#[source] std::io::Error),
    #[error("clip.wrong-format: the recording's file is not 16-bit PCM WAV")]
    WrongFormat,
    #[error("clip.out-of-range: the range lies beyond the end of the recording")]
    OutOfRange,
    #[error("clip.too-large: there is not enough memory to hold the recording's samples")]
    TooLarge,
}

impl ClipError {
    pub fn code(&self) -> &'static str {
        match self {
            ClipError::InvalidPath => "clip.invalid-path",
            ClipError::Missing => "clip.missing",
            ClipError::Unreadable(_) => "clip.unreadable",
            ClipError::WrongFormat => "clip.wrong-format",
            ClipError::OutOfRange => "clip.out-of-range",
            ClipError::TooLarge => "clip.too-large",
        }
    }
}

/// Reads `request` from the session folder `session_dir`, at most `max_ms` milliseconds of it
/// (a longer span is cut there and marked [`Clip::truncated`]). Blocking I/O.
pub fn read_clip(
    session_dir: &Path,
    request: &ClipRequest,
    max_ms: u64,
) -> Result<Clip, ClipError> {
    let file = match open_existing_asset(session_dir, &request.asset, false) {
        Ok(Some(f)) => f,
        Ok(None) | Err(StoreError::StaleHandle) => return Err(ClipError::Missing),
        Err(StoreError::Io { source, .. }) => return Err(ClipError::Unreadable(source)),
        Err(_) => return Err(ClipError::InvalidPath),
    };
    read_clip_from(&file, request.span, max_ms)
}

/// [`read_clip`] of an open WAV file.
pub fn read_clip_from(file: &File, span: Span, max_ms: u64) -> Result<Clip, ClipError> {
    // hound reads the header (format, declared data length) and stops at the data's first
    // byte; the samples are then read by offset.
    let mut buffered = BufReader::new(file);
    let (spec, declared) = {
        // The file opened: a header hound cannot read (too short, not RIFF/WAVE, a format it
        // does not know) is the file's format, not the disk.
        let reader = hound::WavReader::new(&mut buffered).map_err(|_| ClipError::WrongFormat)?;
        (reader.spec(), u64::from(reader.duration()))
    };
    let data_at = buffered.stream_position().map_err(ClipError::Unreadable)?;
    // The header's own numbers decide every size below: refuse the ones no recording has.
    if spec.sample_format != hound::SampleFormat::Int
        || spec.bits_per_sample != 16
        || !(1..=MAX_CHANNELS).contains(&spec.channels)
        || !(MIN_RATE..=MAX_RATE).contains(&spec.sample_rate)
    {
        return Err(ClipError::WrongFormat);
    }
    let channels = u64::from(spec.channels);
    let align = 2 * channels;
    let length = file.metadata().map_err(ClipError::Unreadable)?.len();
    let in_file = length.saturating_sub(data_at) / align;
    let available = if declared == 0 {
        in_file
    } else {
        declared.min(in_file)
    };
    let rate = u64::from(spec.sample_rate);
    let ms_to_frame =
        |ms: u64| u64::try_from(u128::from(ms) * u128::from(rate) / 1000).unwrap_or(u64::MAX);
    let (start, end) = match span {
        Span::Whole => (0, available),
        Span::Ms(r) => (ms_to_frame(r.start_ms), ms_to_frame(r.end_ms)),
        Span::Bytes(b) => (
            b.start.saturating_sub(data_at) / align,
            b.end.saturating_sub(data_at) / align,
        ),
    };
    let requested = end.saturating_sub(start);
    let clamped_end = end.min(available);
    if start >= clamped_end {
        return Err(ClipError::OutOfRange);
    }
    // The caller's limit in time, and ours in samples and in bytes read.
    let most = ms_to_frame(max_ms)
        .min(MAX_CLIP_SAMPLES)
        .min(MAX_CLIP_BYTES / align);
    let cut_end = clamped_end.min(start.saturating_add(most));
    let frames = cut_end - start;
    // Read a chunk at a time: a long clip holds its samples once, not its bytes as well.
    let frame_bytes = usize::try_from(align).map_err(|_| ClipError::WrongFormat)?;
    let mut left = usize::try_from(frames).map_err(|_| ClipError::TooLarge)?;
    let mut samples = Vec::new();
    samples
        .try_reserve_exact(left)
        .map_err(|_| ClipError::TooLarge)?;
    let mut buffer = vec![0u8; READ_FRAMES * frame_bytes];
    let mut at = data_at + start * align;
    while left > 0 {
        let n = left.min(READ_FRAMES);
        let bytes = &mut buffer[..n * frame_bytes];
        file.read_exact_at(bytes, at)
            .map_err(ClipError::Unreadable)?;
        samples.extend(bytes.chunks_exact(frame_bytes).map(|frame| {
            let sum: i32 = frame
                .chunks_exact(2)
                .map(|s| i32::from(i16::from_le_bytes([s[0], s[1]])))
                .sum();
            // The mean of i16 values is an i16.
            i16::try_from(sum / i32::from(spec.channels)).unwrap_or_default()
        }));
        at += (n * frame_bytes) as u64;
        left -= n;
    }
    Ok(Clip {
        samples,
        sample_rate: spec.sample_rate,
        start_frame: start,
        requested_frames: requested,
        clamped: clamped_end < end,
        truncated: cut_end < clamped_end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const RATE: u32 = 24_000;

    /// A session folder with `assets/<name>` holding `samples` (mono PCM16 at `rate`).
    fn session_with(name: &str, samples: &[i16], rate: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        std::fs::create_dir_all(session.join(ASSETS_DIR)).unwrap();
        write_wav(&session.join(ASSETS_DIR).join(name), samples, rate, 1);
        (dir, session)
    }

    fn write_wav(path: &Path, samples: &[i16], rate: u32, channels: u16) {
        let spec = hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::create(path, spec).unwrap();
        for &s in samples {
            w.write_sample(s).unwrap();
        }
        w.finalize().unwrap();
    }

    /// Sample `i` is `i % 30_000`: every read can be checked by value.
    fn ramp(n: usize) -> Vec<i16> {
        (0..n).map(|i| (i % 30_000) as i16).collect()
    }

    fn ms(start_ms: u64, end_ms: u64) -> Span {
        Span::Ms(MsRange { start_ms, end_ms })
    }

    fn req(span: Span) -> ClipRequest {
        ClipRequest {
            asset: "r.wav".into(),
            span,
        }
    }

    #[test]
    fn a_range_reads_exactly_its_samples() {
        let all = ramp(RATE as usize * 2);
        let (_d, s) = session_with("r.wav", &all, RATE);
        let clip = read_clip(&s, &req(ms(100, 350)), u64::MAX).unwrap();
        assert_eq!(clip.samples.len(), 24 * 250);
        assert_eq!(clip.samples, all[2_400..8_400]);
        assert_eq!((clip.start_frame, clip.requested_frames), (2_400, 6_000));
        assert!(!clip.clamped && !clip.truncated);
        assert_eq!(clip.sample_rate, RATE);
        assert_eq!(clip.duration_ms(), 250);
        // One millisecond is 24 samples; the whole file is every sample.
        assert_eq!(
            read_clip(&s, &req(ms(0, 1)), u64::MAX).unwrap().samples,
            all[..24]
        );
        let whole = read_clip(&s, &ClipRequest::whole("r.wav"), u64::MAX).unwrap();
        assert_eq!(whole.samples, all);
    }

    #[test]
    fn a_byte_range_counts_from_the_data_chunk() {
        let all = ramp(4_800);
        let (_d, s) = session_with("r.wav", &all, RATE);
        // Sample n is at byte 44 + 2n in the WAV Persyk writes.
        let span = Span::Bytes(ByteRange {
            start: 44 + 2 * 1_000,
            end: 44 + 2 * 1_480,
        });
        let clip = read_clip(&s, &req(span), u64::MAX).unwrap();
        assert_eq!(clip.samples, all[1_000..1_480]);
    }

    #[test]
    fn a_range_past_the_end_is_clamped_and_one_beyond_it_refused() {
        let all = ramp(RATE as usize); // 1 s
        let (_d, s) = session_with("r.wav", &all, RATE);
        let clip = read_clip(&s, &req(ms(900, 1_500)), u64::MAX).unwrap();
        assert_eq!(clip.samples, all[21_600..]);
        assert!(clip.clamped);
        assert_eq!(clip.requested_frames, 24 * 600);
        let e = read_clip(&s, &req(ms(1_000, 1_200)), u64::MAX).unwrap_err();
        assert_eq!(e.code(), "clip.out-of-range");
    }

    #[test]
    fn a_file_shorter_than_its_header_says_is_read_to_its_real_end() {
        let all = ramp(RATE as usize);
        let (_d, s) = session_with("r.wav", &all, RATE);
        // Torn: the header still declares 1 s, the file holds 0.5 s and half a sample.
        let path = s.join(ASSETS_DIR).join("r.wav");
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(44 + 2 * 12_000 + 1).unwrap();
        let clip = read_clip(&s, &req(ms(400, 900)), u64::MAX).unwrap();
        assert_eq!(clip.samples, all[9_600..12_000]);
        assert!(clip.clamped);
        let whole = read_clip(&s, &ClipRequest::whole("r.wav"), u64::MAX).unwrap();
        assert_eq!(whole.samples, all[..12_000]);
    }

    #[test]
    fn a_capture_whose_header_declares_nothing_yet_reads_what_the_file_holds() {
        let all = ramp(2_400);
        let (_d, s) = session_with("r.wav", &all, RATE);
        // The data chunk's size field (bytes 40..44) still zero, as before the first sync.
        let path = s.join(ASSETS_DIR).join("r.wav");
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0, 0, 0, 0], 40).unwrap();
        let clip = read_clip(&s, &req(ms(50, 100)), u64::MAX).unwrap();
        assert_eq!(clip.samples, all[1_200..2_400]);
    }

    #[test]
    fn a_long_span_is_cut_at_the_limit() {
        let all = ramp(4_800);
        let (_d, s) = session_with("r.wav", &all, RATE);
        let clip = read_clip(&s, &ClipRequest::whole("r.wav"), 50).unwrap();
        assert_eq!(clip.samples, all[..1_200]);
        assert!(clip.truncated && !clip.clamped);
    }

    #[test]
    fn other_rates_and_channels() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        std::fs::create_dir_all(session.join(ASSETS_DIR)).unwrap();
        // Stereo at 16 kHz: frames are averaged, ms count at the file's rate.
        let frames: Vec<i16> = (0..1_600)
            .flat_map(|i| [i as i16, (i + 2) as i16])
            .collect();
        write_wav(&session.join(ASSETS_DIR).join("r.wav"), &frames, 16_000, 2);
        let clip = read_clip(&session, &req(ms(10, 20)), u64::MAX).unwrap();
        assert_eq!(clip.sample_rate, 16_000);
        assert_eq!(
            clip.samples,
            (160..320).map(|i| i as i16 + 1).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_missing_or_unsafe_asset_says_so() {
        let (_d, s) = session_with("r.wav", &ramp(100), RATE);
        let missing = read_clip(&s, &ClipRequest::whole("gone.wav"), u64::MAX).unwrap_err();
        assert_eq!(missing.code(), "clip.missing");
        let bad = read_clip(&s, &ClipRequest::whole("../r.wav"), u64::MAX).unwrap_err();
        assert_eq!(bad.code(), "clip.invalid-path");
        // A symlinked assets folder is never followed.
        let (_d2, other) = session_with("r.wav", &ramp(100), RATE);
        std::fs::rename(other.join(ASSETS_DIR), other.join("real")).unwrap();
        std::os::unix::fs::symlink(other.join("real"), other.join(ASSETS_DIR)).unwrap();
        let link = read_clip(&other, &ClipRequest::whole("r.wav"), u64::MAX).unwrap_err();
        assert_eq!(link.code(), "clip.invalid-path");
        // No session folder at all.
        let none = read_clip(&s.join("nope"), &ClipRequest::whole("r.wav"), u64::MAX);
        assert_eq!(none.unwrap_err().code(), "clip.missing");
    }

    #[test]
    fn a_file_that_is_not_pcm16_wav_is_the_wrong_format() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        let assets = session.join(ASSETS_DIR);
        std::fs::create_dir_all(&assets).unwrap();
        std::fs::write(
            assets.join("text.wav"),
            b"not a wav file at all, just words",
        )
        .unwrap();
        std::fs::write(assets.join("empty.wav"), b"").unwrap();
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: RATE,
            bits_per_sample: 32,
            sample_format: hound::SampleFormat::Float,
        };
        let mut w = hound::WavWriter::create(assets.join("float.wav"), spec).unwrap();
        w.write_sample(0.5f32).unwrap();
        w.finalize().unwrap();
        for name in ["text.wav", "empty.wav", "float.wav"] {
            let e = read_clip(&session, &ClipRequest::whole(name), u64::MAX).unwrap_err();
            assert_eq!(e.code(), "clip.wrong-format", "{name}");
        }
    }

    #[test]
    fn a_message_plays_its_audio_block_or_its_replay_range() {
        let wav = |path: &str| AssetRef::Available {
            path: path.into(),
            mime_type: "audio/wav".into(),
            byte_range: None,
            encoding: None,
            sha256: None,
        };
        let block = Block::Audio {
            asset: wav("assets/rec-1.wav"),
            recording_id: Some("rec-1".into()),
            range: Some(MsRange {
                start_ms: 100,
                end_ms: 900,
            }),
        };
        let text = Block::Text { text: "hi".into() };
        let r = ClipRequest::of_message(&[block, text.clone()], None).unwrap();
        assert_eq!(r.asset, "rec-1.wav");
        assert_eq!(r.span, ms(100, 900));
        // An utterance kept in its own `.pcm` asset, a missing asset, a path outside assets/.
        let pcm = Block::Audio {
            asset: AssetRef::Available {
                path: "assets/utterance-1.pcm".into(),
                mime_type: "application/octet-stream".into(),
                byte_range: None,
                encoding: Some("pcm_s16le".into()),
                sha256: None,
            },
            recording_id: None,
            range: None,
        };
        let missing = Block::Audio {
            asset: AssetRef::Missing {
                reason: "gone".into(),
                source: None,
            },
            recording_id: None,
            range: None,
        };
        let outside = Block::Audio {
            asset: wav("elsewhere/rec-1.wav"),
            recording_id: None,
            range: None,
        };
        for b in [&pcm, &missing, &outside, &text] {
            assert_eq!(ClipRequest::of_block(b), None, "{b:?}");
        }
        // A Realtime client turn: the replay's byte range of the capture WAV.
        let replay: Map<String, Value> = serde_json::from_str(
            r#"{"itemId": "i", "audio": {"path": "assets/rec-2.wav",
                "byteRange": {"start": 44, "end": 4844}}}"#,
        )
        .unwrap();
        let r = ClipRequest::of_message(std::slice::from_ref(&text), Some(&replay)).unwrap();
        assert_eq!(r.asset, "rec-2.wav");
        assert_eq!(
            r.span,
            Span::Bytes(ByteRange {
                start: 44,
                end: 4844
            })
        );
        assert_eq!(ClipRequest::of_message(&[text], None), None);
    }
}
