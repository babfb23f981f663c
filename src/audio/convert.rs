//! Sample conversion: interleaved `f32` frames at any rate and channel count in, 24 kHz mono
//! PCM16 out — the one format that goes both to the WAV asset and to the provider.
//!
//! ```text
//!  interleaved f32 ─► downmix (average) ─► resample to 24 kHz (rubato) ─► clamp, ×32768 ─► i16
//!   (any rate,          mono f32            skipped at 24 kHz                              │
//!    any channels)                                                              WAV + socket bytes
//! ```
//!
//! Resampling uses rubato's synchronous FFT resampler ([`rubato::Fft`], `FixedSync::Both`)
//! with one FFT block of about 20 ms of input per call; partial blocks wait in the
//! converter until the next [`Converter::push`] or [`Converter::flush`]. The resampler's
//! startup delay is trimmed, and [`Converter::flush`] pumps out the tail, so output sample `n`
//! lines up with input time `n / 24000` s and a stream of `F` input frames yields exactly
//! `round(F × 24000 / rate)` samples. Rates whose smallest exact FFT block would be longer
//! than 50 ms (a rate sharing few factors with 24,000, e.g. 44,099 Hz) use rubato's
//! asynchronous sinc resampler instead, with the same trimming and tail.
//!
//! Invariants:
//! - Output depends only on the concatenated input, never on how it was split into pushes:
//!   the resampler always sees the same blocks, so results are bit-identical.
//! - Nothing here allocates per sample or blocks; [`Converter::push`] never panics.
//! - `f32 → i16` is `round(x × 32768)` clamped to `i16`, the inverse of [`i16_to_f32`], so
//!   PCM16 that passes through `f32` at 24 kHz mono comes out unchanged.

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{
    Async, Fft, FixedAsync, FixedSync, Indexing, Resampler, SincInterpolationParameters,
    SincInterpolationType, WindowFunction,
};

use crate::audio::PCM_RATE_HZ;

/// The converter's output rate: what the WAV asset and the provider carry.
pub const OUTPUT_RATE_HZ: u32 = PCM_RATE_HZ;
/// Lowest input rate accepted.
pub const MIN_INPUT_RATE_HZ: u32 = 4_000;
/// Highest input rate accepted.
pub const MAX_INPUT_RATE_HZ: u32 = 768_000;
/// Most input channels accepted.
pub const MAX_CHANNELS: u16 = 64;
/// Target input block per resampler call, as a fraction of a second (1/50 s = 20 ms).
const BLOCKS_PER_SECOND: u32 = 50;
/// Longest exact FFT block accepted before falling back to the sinc resampler (1/20 s).
const MAX_FFT_BLOCK_FRACTION: u32 = 20;

/// Why a converter could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    #[error(
        "capture.unsupported-format: {rate_hz} Hz with {channels} channels is outside what capture accepts"
    )]
    UnsupportedFormat { rate_hz: u32, channels: u16 },
    #[error("capture.resampler-failed: the resampler could not be set up")]
    ResamplerFailed,
}

impl ConvertError {
    /// The stable diagnostic code.
    pub fn code(&self) -> &'static str {
        match self {
            ConvertError::UnsupportedFormat { .. } => "capture.unsupported-format",
            ConvertError::ResamplerFailed => "capture.resampler-failed",
        }
    }
}

/// Which resampler a converter uses (for reports and benches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResamplerKind {
    /// Input is already 24 kHz: downmix and quantize only.
    Passthrough,
    /// rubato `Fft`, `FixedSync::Both`, one FFT block per call.
    Fft { block_in: usize, block_out: usize },
    /// rubato `Async::new_sinc`, `FixedAsync::Input`.
    Sinc { block_in: usize },
}

/// Interleaved `f32` at any rate and channel count to 24 kHz mono `i16`, streaming.
pub struct Converter {
    input_rate_hz: u32,
    channels: usize,
    /// Samples of an incomplete trailing frame, kept for the next push.
    carry: Vec<f32>,
    /// Mono input not yet handed to the resampler (less than one block after a push).
    pending: Vec<f32>,
    stage: Option<Stage>,
    kind: ResamplerKind,
    frames_in: u64,
    frames_out: u64,
}

struct Stage {
    resampler: Box<dyn Resampler<f32>>,
    out: Vec<f32>,
    /// Output frames of startup delay still to drop.
    trim: usize,
}

impl std::fmt::Debug for Converter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Converter")
            .field("input_rate_hz", &self.input_rate_hz)
            .field("channels", &self.channels)
            .field("kind", &self.kind)
            .field("frames_in", &self.frames_in)
            .field("frames_out", &self.frames_out)
            .finish_non_exhaustive()
    }
}

impl Converter {
    /// A converter from `channels` interleaved channels at `input_rate_hz` to 24 kHz mono.
    pub fn new(input_rate_hz: u32, channels: u16) -> Result<Converter, ConvertError> {
        if !(MIN_INPUT_RATE_HZ..=MAX_INPUT_RATE_HZ).contains(&input_rate_hz)
            || channels == 0
            || channels > MAX_CHANNELS
        {
            return Err(ConvertError::UnsupportedFormat {
                rate_hz: input_rate_hz,
                channels,
            });
        }
        let (stage, kind) = if input_rate_hz == OUTPUT_RATE_HZ {
            (None, ResamplerKind::Passthrough)
        } else {
            let (resampler, kind) = build_resampler(input_rate_hz)?;
            let out = vec![0.0; resampler.output_frames_max()];
            let trim = resampler.output_delay();
            (
                Some(Stage {
                    resampler,
                    out,
                    trim,
                }),
                kind,
            )
        };
        let block = match kind {
            ResamplerKind::Passthrough => 0,
            ResamplerKind::Fft { block_in, .. } | ResamplerKind::Sinc { block_in } => block_in,
        };
        Ok(Converter {
            input_rate_hz,
            channels: usize::from(channels),
            carry: Vec::with_capacity(usize::from(channels)),
            pending: Vec::with_capacity(block * 2),
            stage,
            kind,
            frames_in: 0,
            frames_out: 0,
        })
    }

    pub fn input_rate_hz(&self) -> u32 {
        self.input_rate_hz
    }

    pub fn channels(&self) -> u16 {
        self.channels as u16
    }

    /// The resampler in use.
    pub fn resampler_kind(&self) -> ResamplerKind {
        self.kind
    }

    /// Input frames taken since construction or the last flush.
    pub fn frames_in(&self) -> u64 {
        self.frames_in
    }

    /// Output samples emitted since construction or the last flush.
    pub fn frames_out(&self) -> u64 {
        self.frames_out
    }

    /// The output length a stream of `input_frames` frames ends with after [`Self::flush`].
    pub fn expected_output_len(&self, input_frames: u64) -> u64 {
        expected_len(input_frames, self.input_rate_hz)
    }

    /// Converts `interleaved` (any length; a trailing partial frame waits for the next call)
    /// and appends every output sample that is ready to `out`. Input shorter than one
    /// resampler block is held back until more arrives or [`Self::flush`].
    pub fn push(&mut self, interleaved: &[f32], out: &mut Vec<i16>) {
        let before = self.pending.len();
        self.downmix_into_pending(interleaved);
        self.frames_in += (self.pending.len() - before) as u64;
        match self.stage.as_mut() {
            None => {
                out.extend(self.pending.iter().map(|&s| f32_to_i16(s)));
                self.frames_out += self.pending.len() as u64;
                self.pending.clear();
            }
            Some(stage) => {
                let mut pos = 0;
                loop {
                    let need = stage.resampler.input_frames_next();
                    if self.pending.len() - pos < need {
                        break;
                    }
                    let emitted = stage.run(&self.pending[pos..pos + need], None, u64::MAX, out);
                    self.frames_out += emitted;
                    pos += need;
                }
                self.pending.drain(..pos);
            }
        }
    }

    /// Ends the stream: resamples what is held back, pumps out the resampler's tail, and
    /// appends it to `out`, so that the whole stream produced exactly
    /// `round(frames_in × 24000 / rate)` samples. A trailing partial frame is dropped. The
    /// converter is then reset and ready for a new stream.
    pub fn flush(&mut self, out: &mut Vec<i16>) {
        let total = expected_len(self.frames_in, self.input_rate_hz);
        if let Some(stage) = self.stage.as_mut() {
            let limit = total.saturating_sub(self.frames_out);
            let mut emitted = 0u64;
            if !self.pending.is_empty() {
                let len = self.pending.len();
                emitted += stage.run(&self.pending, Some(len), limit, out);
            }
            // A zero-length partial block feeds silence; each call emits at least one block
            // of output once the delay is trimmed, so this ends.
            let mut guard = 0;
            while emitted < limit && guard < 1_000_000 {
                emitted += stage.run(&[], Some(0), limit - emitted, out);
                guard += 1;
            }
            stage.resampler.reset();
            stage.trim = stage.resampler.output_delay();
        }
        self.pending.clear();
        self.carry.clear();
        self.frames_in = 0;
        self.frames_out = 0;
    }

    fn downmix_into_pending(&mut self, mut interleaved: &[f32]) {
        let ch = self.channels;
        if ch == 1 {
            self.pending.extend_from_slice(interleaved);
            return;
        }
        if !self.carry.is_empty() {
            let take = (ch - self.carry.len()).min(interleaved.len());
            self.carry.extend_from_slice(&interleaved[..take]);
            interleaved = &interleaved[take..];
            if self.carry.len() < ch {
                return;
            }
            let frame = average(&self.carry);
            self.pending.push(frame);
            self.carry.clear();
        }
        let whole = interleaved.len() / ch * ch;
        let (frames, rest) = interleaved.split_at(whole);
        if ch == 2 {
            self.pending
                .extend(frames.chunks_exact(2).map(|f| (f[0] + f[1]) * 0.5));
        } else {
            self.pending.extend(frames.chunks_exact(ch).map(average));
        }
        self.carry.extend_from_slice(rest);
    }
}

impl Stage {
    /// Runs one resampler call on `input` (a full block, or a partial one with
    /// `partial = Some(len)`), drops startup delay, and appends at most `limit` samples.
    fn run(
        &mut self,
        input: &[f32],
        partial: Option<usize>,
        limit: u64,
        out: &mut Vec<i16>,
    ) -> u64 {
        let frames = input.len();
        let capacity = self.out.len();
        let produced = match (
            InterleavedSlice::new(input, 1, frames),
            InterleavedSlice::new_mut(&mut self.out, 1, capacity),
        ) {
            (Ok(inp), Ok(mut outp)) => {
                let indexing = partial.map(|len| Indexing::new().partial_len(len));
                match self
                    .resampler
                    .process_into_buffer(&inp, &mut outp, indexing.as_ref())
                {
                    Ok((_, written)) => written,
                    Err(_) => {
                        // Unreachable with the buffers sized above; keep the timeline intact
                        // with silence rather than panic.
                        let n = self.resampler.output_frames_next().min(self.out.len());
                        self.out[..n].fill(0.0);
                        n
                    }
                }
            }
            _ => 0,
        };
        let skip = self.trim.min(produced);
        self.trim -= skip;
        let ready = &self.out[skip..produced];
        let n = ready
            .len()
            .min(usize::try_from(limit).unwrap_or(usize::MAX));
        out.extend(ready[..n].iter().map(|&s| f32_to_i16(s)));
        n as u64
    }
}

fn build_resampler(
    input_rate_hz: u32,
) -> Result<(Box<dyn Resampler<f32>>, ResamplerKind), ConvertError> {
    let rate_in = input_rate_hz as usize;
    let rate_out = OUTPUT_RATE_HZ as usize;
    let block_target = (input_rate_hz / BLOCKS_PER_SECOND) as usize;
    let min_block_in = rate_in / gcd(rate_in, rate_out);
    if min_block_in <= (input_rate_hz / MAX_FFT_BLOCK_FRACTION) as usize {
        let fft = Fft::<f32>::new_custom(
            rate_in,
            rate_out,
            block_target,
            1,
            1,
            WindowFunction::BlackmanHarris2,
            FixedSync::Both,
        )
        .map_err(|_| ConvertError::ResamplerFailed)?;
        let kind = ResamplerKind::Fft {
            block_in: fft.input_frames_next(),
            block_out: fft.output_frames_next(),
        };
        Ok((Box::new(fft), kind))
    } else {
        let params = SincInterpolationParameters {
            sinc_len: 128,
            f_cutoff: None,
            oversampling_factor: 256,
            interpolation: SincInterpolationType::Linear,
            window: WindowFunction::BlackmanHarris2,
        };
        let sinc = Async::<f32>::new_sinc(
            rate_out as f64 / rate_in as f64,
            1.0,
            &params,
            block_target,
            1,
            FixedAsync::Input,
        )
        .map_err(|_| ConvertError::ResamplerFailed)?;
        let kind = ResamplerKind::Sinc {
            block_in: sinc.input_frames_next(),
        };
        Ok((Box::new(sinc), kind))
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn expected_len(input_frames: u64, input_rate_hz: u32) -> u64 {
    let rate = u128::from(input_rate_hz);
    ((u128::from(input_frames) * u128::from(OUTPUT_RATE_HZ) * 2 + rate) / (2 * rate)) as u64
}

fn average(frame: &[f32]) -> f32 {
    frame.iter().sum::<f32>() / frame.len() as f32
}

/// `f32` in `[-1, 1]` to PCM16: `round(x × 32768)`, clamped; NaN becomes 0.
#[inline]
pub fn f32_to_i16(sample: f32) -> i16 {
    // `as` saturates and maps NaN to 0.
    (sample * 32768.0).round() as i16
}

/// PCM16 to `f32`: `s / 32768` (the same mapping cpal's `FromSample` uses).
#[inline]
pub fn i16_to_f32(sample: i16) -> f32 {
    f32::from(sample) / 32768.0
}

/// Unsigned 16-bit (origin 32768) to `f32`.
#[inline]
pub fn u16_to_f32(sample: u16) -> f32 {
    (f32::from(sample) - 32768.0) / 32768.0
}

/// 32-bit integer to `f32`: `s / 2³¹`.
#[inline]
pub fn i32_to_f32(sample: i32) -> f32 {
    (f64::from(sample) / 2_147_483_648.0) as f32
}

/// A signed integer sample of `bits` significant bits (8..=32, as WAV files carry them) to
/// `f32`: `s / 2^(bits-1)`.
#[inline]
pub fn int_to_f32(sample: i32, bits: u16) -> f32 {
    let scale = (1u64 << (bits.clamp(1, 32) - 1)) as f64;
    (f64::from(sample) / scale) as f32
}

/// Appends `samples` as PCM16 little-endian bytes: the bytes of the WAV data chunk and of an
/// `input_audio_buffer.append`, identical by construction.
pub fn extend_pcm16_le(samples: &[i16], bytes: &mut Vec<u8>) {
    bytes.reserve(samples.len() * 2);
    for s in samples {
        bytes.extend_from_slice(&s.to_le_bytes());
    }
}
