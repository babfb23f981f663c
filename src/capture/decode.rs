//! Audio files people have — a phone's voice memo (M4A/AAC), an MP3, FLAC, Ogg Vorbis, AIFF,
//! the audio track of an MP4, MOV or MKV video — decoded in pure Rust by symphonia and
//! delivered as a [`super::source::AudioSource`], like the WAV file source.
//!
//! Invariants:
//! - Streamed: one packet decoded at a time, never the whole file in memory.
//! - Every input gives frames or a stable code, never a panic: a file that is no audio file
//!   (empty, renamed, text) is `capture.unrecognized-file`, one without an audio track
//!   `capture.no-audio-track`, an audio codec this build cannot decode
//!   `capture.unsupported-codec` (with the codec's name: Opus, AC-3, …), and a stream that
//!   breaks off or is damaged delivers what came before it and then
//!   `capture.input-damaged` — which the pipeline records as a gap from where the audio
//!   stops, so the recording is never "complete".
//! - The format (rate and channels) is the first decoded packet's, known before `start`; a
//!   stream that changes it midway is damaged from there.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;
use std::time::Instant;

use symphonia::core::audio::{SampleBuffer, SignalSpec};
use symphonia::core::codecs::{self, CODEC_TYPE_NULL, Decoder, DecoderOptions};
use symphonia::core::errors::Error;
use symphonia::core::formats::{FormatOptions, FormatReader};
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

use super::source::{AudioSource, SourceError, SourceEvent, SourceFormat, deliver, pace};

/// Packets tried before the first decoded audio; past it the file holds no usable audio.
const FIRST_AUDIO_PACKETS: usize = 64;

/// A decoded audio file, delivered at `realtime_factor` × real time (0: as fast as taken).
pub struct DecodedSource {
    format: SourceFormat,
    realtime_factor: f64,
    state: Option<Decoding>,
    stop: Arc<AtomicBool>,
    worker: Option<JoinHandle<()>>,
}

struct Decoding {
    reader: Box<dyn FormatReader>,
    decoder: Box<dyn Decoder>,
    track: u32,
    spec: SignalSpec,
    /// Frames the container says the track has, when it says.
    expected_frames: Option<u64>,
    /// The first packet's samples, decoded while opening.
    first: Vec<f32>,
    /// Where the next packet should start (the track's time base: frames for audio), from
    /// the first packet on: a packet that starts later means the reader skipped damaged data
    /// (an Ogg page whose checksum failed), which must not pass for a complete stream.
    next_ts: Option<u64>,
}

impl std::fmt::Debug for DecodedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodedSource")
            .field("format", &self.format)
            .field("realtime_factor", &self.realtime_factor)
            .finish_non_exhaustive()
    }
}

/// The name of an audio codec this build cannot decode, for the sentence that says so.
fn codec_name(codec: codecs::CodecType) -> &'static str {
    match codec {
        codecs::CODEC_TYPE_OPUS => "Opus",
        codecs::CODEC_TYPE_SPEEX => "Speex",
        codecs::CODEC_TYPE_WAVPACK => "WavPack",
        codecs::CODEC_TYPE_MUSEPACK => "Musepack",
        codecs::CODEC_TYPE_ATRAC1
        | codecs::CODEC_TYPE_ATRAC3
        | codecs::CODEC_TYPE_ATRAC3PLUS
        | codecs::CODEC_TYPE_ATRAC9 => "ATRAC",
        codecs::CODEC_TYPE_MONKEYS_AUDIO => "Monkey's Audio",
        codecs::CODEC_TYPE_TTA => "TTA",
        codecs::CODEC_TYPE_EAC3 | codecs::CODEC_TYPE_AC4 => "Dolby Digital",
        codecs::CODEC_TYPE_DCA => "DTS",
        codecs::CODEC_TYPE_WMA => "Windows Media Audio",
        codecs::CODEC_TYPE_MP1 | codecs::CODEC_TYPE_MP2 => "MPEG audio layer I/II",
        _ => "an audio codec Persyk does not read",
    }
}

impl DecodedSource {
    /// Opens `path`, finds its first audio track and decodes its first packet (so the
    /// format is known).
    pub fn open(path: &Path, realtime_factor: f64) -> Result<DecodedSource, SourceError> {
        let file = File::open(path).map_err(|_| SourceError::InputUnreadable)?;
        let stream = MediaSourceStream::new(Box::new(file), Default::default());
        let mut hint = Hint::new();
        if let Some(ext) = path.extension().and_then(|e| e.to_str()) {
            hint.with_extension(ext);
        }
        let probed = symphonia::default::get_probe()
            .format(
                &hint,
                stream,
                &FormatOptions {
                    enable_gapless: true,
                    ..Default::default()
                },
                &MetadataOptions::default(),
            )
            .map_err(|_| {
                // A media file's own signature with nothing readable after it is a damaged
                // or cut-off file (an MP4 whose index never arrived), not a renamed one.
                if media_signature(path) {
                    SourceError::InputDamaged
                } else {
                    SourceError::UnrecognizedFile
                }
            })?;
        let reader = probed.format;
        // The first audio track: one that has a codec and a sample rate (a video's picture
        // tracks have neither here).
        let track = reader
            .tracks()
            .iter()
            .find(|t| {
                t.codec_params.codec != CODEC_TYPE_NULL && t.codec_params.sample_rate.is_some()
            })
            .ok_or(SourceError::NoAudioTrack)?;
        let (track_id, params) = (track.id, track.codec_params.clone());
        let decoder = symphonia::default::get_codecs()
            .make(&params, &DecoderOptions::default())
            .map_err(|_| SourceError::UnsupportedCodec {
                name: codec_name(params.codec),
            })?;
        let mut decoding = Decoding {
            reader,
            decoder,
            track: track_id,
            spec: SignalSpec::new(params.sample_rate.unwrap_or(0), Default::default()),
            expected_frames: params.n_frames,
            first: Vec::new(),
            next_ts: None,
        };
        // Decode until the first packet that gives audio: its spec is the format.
        let mut tried = 0;
        loop {
            tried += 1;
            if tried > FIRST_AUDIO_PACKETS {
                return Err(SourceError::NoAudioTrack);
            }
            match decoding.next()? {
                Next::Samples(samples, spec) if !samples.is_empty() => {
                    decoding.spec = spec;
                    decoding.first = samples;
                    break;
                }
                Next::Samples(..) => {}
                Next::End => return Err(SourceError::NoAudioTrack),
                Next::Damaged => return Err(SourceError::InputDamaged),
            }
        }
        let channels = u16::try_from(decoding.spec.channels.count()).unwrap_or(0);
        if decoding.spec.rate == 0 || channels == 0 {
            return Err(SourceError::UnsupportedFormat);
        }
        Ok(DecodedSource {
            format: SourceFormat {
                rate_hz: decoding.spec.rate,
                channels,
            },
            realtime_factor: if realtime_factor.is_finite() && realtime_factor > 0.0 {
                realtime_factor
            } else {
                0.0
            },
            state: Some(decoding),
            stop: Arc::new(AtomicBool::new(false)),
            worker: None,
        })
    }
}

enum Next {
    /// Interleaved samples of one packet (maybe none) and their spec.
    Samples(Vec<f32>, SignalSpec),
    /// The stream ended.
    End,
    /// The stream is damaged here.
    Damaged,
}

impl Decoding {
    fn next(&mut self) -> Result<Next, SourceError> {
        loop {
            let packet = match self.reader.next_packet() {
                Ok(p) => p,
                // The usual end of a stream, and also how a cut-off one ends: the worker
                // compares what came with what the container announced.
                Err(Error::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return Ok(Next::End);
                }
                Err(_) => return Ok(Next::Damaged),
            };
            if packet.track_id() != self.track {
                continue;
            }
            if let Some(expected) = self.next_ts
                && packet.ts() > expected + packet.dur().max(1024)
            {
                return Ok(Next::Damaged);
            }
            return match self.decoder.decode(&packet) {
                Ok(buffer) => {
                    let spec = *buffer.spec();
                    self.next_ts = Some(packet.ts() + packet.dur());
                    let mut samples = SampleBuffer::<f32>::new(buffer.capacity() as u64, spec);
                    samples.copy_interleaved_ref(buffer);
                    Ok(Next::Samples(samples.samples().to_vec(), spec))
                }
                Err(Error::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    Ok(Next::End)
                }
                Err(_) => Ok(Next::Damaged),
            };
        }
    }
}

impl AudioSource for DecodedSource {
    fn format(&self) -> SourceFormat {
        self.format
    }

    /// Frames the container says the audio has, when it says.
    fn len_frames(&self) -> Option<u64> {
        self.state.as_ref().and_then(|s| s.expected_frames)
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        let state = self.state.take().ok_or(SourceError::AlreadyStarted)?;
        let stop = self.stop.clone();
        let format = self.format;
        let factor = self.realtime_factor;
        let worker = std::thread::Builder::new()
            .name("persyk-decode-source".into())
            .spawn(move || decode_worker(state, format, factor, &events, &stop))
            .map_err(|_| SourceError::StreamFailed {
                detail: "thread-spawn",
            })?;
        self.worker = Some(worker);
        Ok(())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        self.state = None;
    }
}

impl Drop for DecodedSource {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether the file begins like an audio or video container Persyk reads.
fn media_signature(path: &Path) -> bool {
    let mut head = [0u8; 12];
    let read = File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
    if read.is_err() {
        return false;
    }
    &head[4..8] == b"ftyp"
        || head.starts_with(b"ID3")
        || (head[0] == 0xFF && head[1] & 0xE0 == 0xE0)
        || head.starts_with(b"fLaC")
        || head.starts_with(b"OggS")
        || head.starts_with(b"FORM")
        || head.starts_with(&[0x1A, 0x45, 0xDF, 0xA3])
        || head.starts_with(b"RIFF")
}

/// A stream that ends this many frames or more short of what its container announced was
/// cut off (a packet or two of padding and priming is normal).
const SHORT_BY_FRAMES: u64 = 8_192;

fn decode_worker(
    mut state: Decoding,
    format: SourceFormat,
    factor: f64,
    events: &SyncSender<SourceEvent>,
    stop: &AtomicBool,
) {
    let channels = usize::from(format.channels);
    let started = Instant::now();
    let mut sent_frames = 0u64;
    let send = |samples: Vec<f32>, sent_frames: &mut u64| -> bool {
        let frames = (samples.len() / channels) as u64;
        if frames == 0 {
            return true;
        }
        if !deliver(events, SourceEvent::Frames(samples), stop) {
            return false;
        }
        *sent_frames += frames;
        pace(*sent_frames, format.rate_hz, factor, started, stop);
        true
    };
    let first = std::mem::take(&mut state.first);
    if !send(first, &mut sent_frames) {
        return;
    }
    loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let next = match state.next() {
            Ok(n) => n,
            Err(e) => {
                deliver(events, SourceEvent::Error(e), stop);
                return;
            }
        };
        match next {
            Next::Samples(samples, spec) => {
                if spec.rate != format.rate_hz || spec.channels.count() != channels {
                    deliver(events, SourceEvent::Error(SourceError::InputDamaged), stop);
                    return;
                }
                if !send(samples, &mut sent_frames) {
                    return;
                }
            }
            Next::End => {
                let cut_off = state
                    .expected_frames
                    .is_some_and(|n| sent_frames.saturating_add(SHORT_BY_FRAMES) < n);
                let last = if cut_off {
                    SourceEvent::Error(SourceError::InputDamaged)
                } else {
                    SourceEvent::Ended
                };
                deliver(events, last, stop);
                return;
            }
            Next::Damaged => {
                deliver(events, SourceEvent::Error(SourceError::InputDamaged), stop);
                return;
            }
        }
    }
}
