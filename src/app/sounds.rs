//! Start and stop cues: two short, quiet chimes played through the default output device.
//!
//! The cues are synthesized by `scripts/make-sounds` (no third-party audio) and embedded in
//! the binary. [`Sounds::play`] hands a cue to a thread of its own and returns at once, so a
//! cue never delays the start of capture; the thread opens the output for the cue's length
//! and closes it again (nothing stays open while idle). An output that cannot play is logged
//! once per run and otherwise ignored: a missing chime must never stop a dictation.
//!
//! Invariants:
//! - `play` never blocks and never fails; at most two cues wait, later ones are dropped.
//! - The real-time output callback does not allocate or lock: it copies from a buffer
//!   prepared (resampled, per channel) before the stream starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

/// Which cue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cue {
    Start,
    Stop,
}

const START_WAV: &[u8] = include_bytes!("../../assets/sounds/start.wav");
const STOP_WAV: &[u8] = include_bytes!("../../assets/sounds/stop.wav");

/// A cue's samples (mono, in -1..1) and their rate.
#[derive(Debug, Clone, PartialEq)]
pub struct CueAudio {
    pub rate_hz: u32,
    pub samples: Vec<f32>,
}

impl Cue {
    /// The embedded cue, decoded.
    pub fn audio(self) -> Option<CueAudio> {
        let bytes = match self {
            Cue::Start => START_WAV,
            Cue::Stop => STOP_WAV,
        };
        let reader = hound::WavReader::new(std::io::Cursor::new(bytes)).ok()?;
        let spec = reader.spec();
        if spec.channels != 1 || spec.bits_per_sample != 16 {
            return None;
        }
        let samples = reader
            .into_samples::<i16>()
            .map(|s| s.map(|v| f32::from(v) / 32768.0))
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        Some(CueAudio {
            rate_hz: spec.sample_rate,
            samples,
        })
    }
}

/// `audio` at `rate_hz`, interleaved for `channels` channels (linear interpolation: the cues
/// are two soft tones, far below any rate's Nyquist limit).
pub fn render(audio: &CueAudio, rate_hz: u32, channels: usize) -> Vec<f32> {
    let channels = channels.max(1);
    if audio.samples.is_empty() || rate_hz == 0 {
        return Vec::new();
    }
    let ratio = f64::from(audio.rate_hz) / f64::from(rate_hz);
    let frames = (audio.samples.len() as f64 / ratio).floor() as usize;
    let last = audio.samples.len() - 1;
    let mut out = Vec::with_capacity(frames * channels);
    for i in 0..frames {
        let pos = i as f64 * ratio;
        let at = (pos.floor() as usize).min(last);
        let frac = (pos - at as f64) as f32;
        let next = audio.samples[(at + 1).min(last)];
        let v = audio.samples[at] * (1.0 - frac) + next * frac;
        out.extend(std::iter::repeat_n(v, channels));
    }
    out
}

/// The cue player: a thread that plays cues one after the other.
#[derive(Debug)]
pub struct Sounds {
    queue: SyncSender<Cue>,
}

impl Sounds {
    /// Starts the player thread. `output` plays one cue (blocking for its length); tests
    /// pass a recorder, the app [`play_on_default_output`].
    pub fn spawn(output: impl FnMut(Cue) + Send + 'static) -> Option<Sounds> {
        let (queue, cues) = sync_channel(2);
        std::thread::Builder::new()
            .name("persyk-sounds".into())
            .spawn(move || run(cues, output))
            .ok()?;
        Some(Sounds { queue })
    }

    /// Queues `cue` and returns at once.
    pub fn play(&self, cue: Cue) {
        match self.queue.try_send(cue) {
            Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

fn run(cues: Receiver<Cue>, mut output: impl FnMut(Cue)) {
    while let Ok(cue) = cues.recv() {
        output(cue);
    }
}

/// Plays `cue` on the system's default output device and returns when it has played.
pub fn play_on_default_output(cue: Cue) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if let Err(reason) = output::play(cue)
        && !WARNED.swap(true, Ordering::Relaxed)
    {
        eprintln!("persyk: start/stop sounds unavailable ({reason})");
    }
}

/// The position shared by the output callback and the player thread.
#[derive(Debug, Default)]
struct Cursor {
    at: AtomicUsize,
    done: AtomicBool,
}

/// Copies the next part of `buffer` into `out` (silence after the end). Allocation- and
/// lock-free: what the real-time callback runs.
fn fill<T: Copy>(out: &mut [T], buffer: &[f32], cursor: &Cursor, convert: impl Fn(f32) -> T) {
    let at = cursor.at.load(Ordering::Relaxed);
    let n = out.len().min(buffer.len().saturating_sub(at));
    for (o, &s) in out.iter_mut().zip(&buffer[at..at + n]) {
        *o = convert(s);
    }
    for o in &mut out[n..] {
        *o = convert(0.0);
    }
    cursor.at.store(at + n, Ordering::Relaxed);
    if at + n >= buffer.len() {
        cursor.done.store(true, Ordering::Release);
    }
}

mod output {
    use super::*;
    use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
    use cpal::{FromSample, SampleFormat, SizedSample};

    pub(super) fn play(cue: Cue) -> Result<(), &'static str> {
        let audio = cue.audio().ok_or("cue not decodable")?;
        let host = cpal::default_host();
        let device = host.default_output_device().ok_or("no output device")?;
        let config = device
            .default_output_config()
            .map_err(|_| "no output configuration")?;
        let channels = usize::from(config.channels());
        let buffer: Arc<[f32]> = render(&audio, config.sample_rate(), channels).into();
        let cursor = Arc::new(Cursor::default());
        let stream = match config.sample_format() {
            SampleFormat::F32 => build::<f32>(&device, &config, &buffer, &cursor),
            SampleFormat::I16 => build::<i16>(&device, &config, &buffer, &cursor),
            SampleFormat::I32 => build::<i32>(&device, &config, &buffer, &cursor),
            SampleFormat::U16 => build::<u16>(&device, &config, &buffer, &cursor),
            SampleFormat::F64 => build::<f64>(&device, &config, &buffer, &cursor),
            _ => return Err("unsupported output format"),
        }?;
        stream.play().map_err(|_| "output did not start")?;
        // The callback may take the whole cue at once into the device's buffer: wait until
        // it was taken *and* the cue's length has passed (at most half a second more), then
        // give the device a moment to drain before the stream is closed.
        let started = std::time::Instant::now();
        let frames = buffer.len() / channels.max(1);
        let length = Duration::from_secs_f64(frames as f64 / f64::from(config.sample_rate()));
        while (!cursor.done.load(Ordering::Acquire) || started.elapsed() < length)
            && started.elapsed() < length + Duration::from_millis(500)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(80));
        drop(stream);
        Ok(())
    }

    fn build<T>(
        device: &cpal::Device,
        config: &cpal::SupportedStreamConfig,
        buffer: &Arc<[f32]>,
        cursor: &Arc<Cursor>,
    ) -> Result<cpal::Stream, &'static str>
    where
        T: SizedSample + FromSample<f32> + Send + 'static,
    {
        let (buffer, cursor) = (buffer.clone(), cursor.clone());
        device
            .build_output_stream::<T, _, _>(
                config.config(),
                move |out: &mut [T], _: &cpal::OutputCallbackInfo| {
                    fill(out, &buffer, &cursor, T::from_sample)
                },
                |_err: cpal::Error| {},
                None,
            )
            .map_err(|_| "output stream refused")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_cues_are_short_quiet_and_click_free() {
        for cue in [Cue::Start, Cue::Stop] {
            let audio = cue.audio().expect("decodes");
            assert_eq!(audio.rate_hz, 48_000);
            let ms = audio.samples.len() as u64 * 1000 / u64::from(audio.rate_hz);
            assert!((100..=250).contains(&ms), "{cue:?}: {ms} ms");
            let peak = audio.samples.iter().fold(0f32, |m, s| m.max(s.abs()));
            let peak_dbfs = 20.0 * peak.log10();
            assert!(
                (-30.0..=-15.0).contains(&peak_dbfs),
                "{cue:?}: {peak_dbfs} dBFS"
            );
            // Starts and ends at (near) silence: no click.
            assert!(
                audio.samples[0].abs() < 1e-3
                    && audio.samples[audio.samples.len() - 1].abs() < 1e-3
            );
        }
        assert_ne!(Cue::Start.audio(), Cue::Stop.audio());
    }

    #[test]
    fn render_resamples_and_duplicates_channels() {
        let audio = Cue::Start.audio().expect("decodes");
        let out = render(&audio, 44_100, 2);
        let frames = out.len() / 2;
        let expected = audio.samples.len() * 44_100 / 48_000;
        assert!(frames.abs_diff(expected) <= 1, "{frames} vs {expected}");
        assert!(out.chunks(2).all(|f| f[0] == f[1]));
        assert_eq!(render(&audio, 48_000, 1), audio.samples);
    }

    #[test]
    fn fill_plays_the_buffer_then_silence_and_says_when_done() {
        let buffer = [0.5f32, -0.5, 0.25];
        let cursor = Cursor::default();
        let mut out = [9i16; 2];
        fill(&mut out, &buffer, &cursor, |s| (s * 100.0) as i16);
        assert_eq!(out, [50, -50]);
        assert!(!cursor.done.load(Ordering::Acquire));
        fill(&mut out, &buffer, &cursor, |s| (s * 100.0) as i16);
        assert_eq!(out, [25, 0]);
        assert!(cursor.done.load(Ordering::Acquire));
    }

    #[test]
    fn play_returns_at_once_and_the_thread_plays_in_order() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let sounds = Sounds::spawn(move |cue| {
            let _ = gate_rx.recv();
            let _ = tx.send(cue);
        })
        .expect("thread");
        // The player is blocked in the first cue: play still returns, and excess cues drop.
        for _ in 0..10 {
            sounds.play(Cue::Start);
        }
        sounds.play(Cue::Stop);
        for _ in 0..3 {
            let _ = gate_tx.send(());
        }
        let first = rx.recv_timeout(Duration::from_secs(10)).expect("played");
        assert_eq!(first, Cue::Start);
        let mut rest = Vec::new();
        while let Ok(c) = rx.recv_timeout(Duration::from_millis(500)) {
            rest.push(c);
        }
        assert!(rest.len() <= 2, "at most two waited: {rest:?}");
    }
}
