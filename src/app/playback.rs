//! Playback of saved recordings in history: the [`Player`] seam the window drives, and
//! [`OutputPlayer`], which plays through the system's default output device with cpal.
//!
//! The window reads nothing itself: the backend reads a clip's samples from the session's WAV
//! asset (`audio::clip`), the window hands them to its player and asks [`Player::state`] each
//! frame while something plays. Tests substitute a recorder for the player.
//!
//! Invariants:
//! - One playback at a time: [`Player::play`] stops whatever played before.
//! - `play`, `stop` and `state` never block and never fail: playing happens on a thread of
//!   the playback's own, and a device that cannot play is [`PlayerState::Failed`] with a
//!   [`PlaybackError`] whose sentence the window shows (no output device is a sentence, never
//!   a panic).
//! - The real-time output callback neither allocates nor locks: it reads the samples shared
//!   with it, converts them to the device's rate by linear interpolation and writes the same
//!   value to every channel, and publishes its position in an atomic.
//! - Nothing stays open while idle: the output stream lives only as long as its playback.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Where playback stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlayerState {
    /// Nothing plays (never started, stopped, or played to its end).
    Idle,
    /// Playing: how far, of how long.
    Playing { position_ms: u64, length_ms: u64 },
    /// The last playback could not play.
    Failed(PlaybackError),
}

/// Why a playback could not play.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PlaybackError {
    #[error("playback.no-device: there is no sound output device")]
    NoDevice,
    #[error("playback.no-config: the output device offers no usable format")]
    NoConfig,
    #[error("playback.output-failed: the output stream could not be opened or started")]
    OutputFailed,
    #[error("playback.thread-failed: the playback thread could not start")]
    Thread,
}

impl PlaybackError {
    pub fn code(&self) -> &'static str {
        match self {
            PlaybackError::NoDevice => "playback.no-device",
            PlaybackError::NoConfig => "playback.no-config",
            PlaybackError::OutputFailed => "playback.output-failed",
            PlaybackError::Thread => "playback.thread-failed",
        }
    }

    /// What the window says (fixed text; the code goes to the details line and the log).
    pub fn sentence(&self) -> &'static str {
        match self {
            PlaybackError::NoDevice => {
                "The recording cannot be played: no sound output was found. Connect speakers or \
                 headphones and try again."
            }
            PlaybackError::NoConfig | PlaybackError::OutputFailed => {
                "The recording cannot be played: the sound output could not be used."
            }
            PlaybackError::Thread => "The recording cannot be played right now.",
        }
    }
}

/// What the window plays recordings with.
pub trait Player: Send {
    /// Starts playing `samples` (mono PCM16 at `sample_rate` Hz) from their start, stopping
    /// whatever played before. Returns at once.
    fn play(&mut self, samples: Vec<i16>, sample_rate: u32);
    /// Stops playback at once (nothing happens when nothing plays).
    fn stop(&mut self);
    /// Where playback stands now.
    fn state(&self) -> PlayerState;
}

/// One playback's shared state: the player, its thread and the output callback.
#[derive(Debug)]
struct Playback {
    stop: AtomicBool,
    /// Source frames the output has taken so far.
    consumed: AtomicU64,
    /// Microseconds from the last callback until the end of what it wrote is heard (the
    /// device's latency plus that buffer): how long the stream must stay open after the
    /// last sample was taken.
    tail_us: AtomicU64,
    /// The thread has ended (played to the end, stopped, or failed).
    ended: AtomicBool,
    failure: OnceLock<PlaybackError>,
    /// When the output stream started: what is heard is at most this long.
    started: OnceLock<Instant>,
    frames: u64,
    rate_hz: u32,
}

impl Playback {
    fn ms(&self, frames: u64) -> u64 {
        (frames * 1000)
            .checked_div(u64::from(self.rate_hz))
            .unwrap_or(0)
    }
}

/// Plays on the system's default output device (cpal: CoreAudio on macOS, PulseAudio or ALSA
/// on Linux), one thread per playback. `wake` is called when a playback ends or fails, so
/// the window repaints.
pub struct OutputPlayer {
    wake: Arc<dyn Fn() + Send + Sync>,
    current: Option<Arc<Playback>>,
}

impl std::fmt::Debug for OutputPlayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputPlayer")
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl OutputPlayer {
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> OutputPlayer {
        OutputPlayer {
            wake: Arc::new(wake),
            current: None,
        }
    }
}

impl Player for OutputPlayer {
    fn play(&mut self, samples: Vec<i16>, sample_rate: u32) {
        self.stop();
        let playback = Arc::new(Playback {
            stop: AtomicBool::new(false),
            consumed: AtomicU64::new(0),
            tail_us: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            failure: OnceLock::new(),
            started: OnceLock::new(),
            frames: samples.len() as u64,
            rate_hz: sample_rate,
        });
        self.current = Some(playback.clone());
        let wake = self.wake.clone();
        let shared = playback.clone();
        let spawned = std::thread::Builder::new()
            .name("persyk-playback".into())
            .spawn(move || {
                if let Err(e) = output::play(samples.into(), sample_rate, &shared) {
                    eprintln!("persyk: playback: {}", e.code());
                    let _ = shared.failure.set(e);
                }
                shared.ended.store(true, Ordering::Release);
                wake();
            });
        if spawned.is_err() {
            let _ = playback.failure.set(PlaybackError::Thread);
            playback.ended.store(true, Ordering::Release);
        }
    }

    fn stop(&mut self) {
        if let Some(p) = self.current.take() {
            p.stop.store(true, Ordering::Relaxed);
        }
    }

    fn state(&self) -> PlayerState {
        let Some(p) = &self.current else {
            return PlayerState::Idle;
        };
        if let Some(e) = p.failure.get() {
            return PlayerState::Failed(*e);
        }
        if p.ended.load(Ordering::Acquire) {
            return PlayerState::Idle;
        }
        // The device takes samples ahead of what it plays (a PulseAudio server buffers up to
        // seconds): the position is what it took less its latency, never more than the time
        // since it started.
        let tail_ms = p.tail_us.load(Ordering::Relaxed) / 1000;
        let taken = p
            .ms(p.consumed.load(Ordering::Relaxed).min(p.frames))
            .saturating_sub(tail_ms);
        let heard = p.started.get().map_or(0, |t| {
            u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
        });
        PlayerState::Playing {
            position_ms: taken.min(heard),
            length_ms: p.ms(p.frames),
        }
    }
}

impl Drop for OutputPlayer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Fills `out` (interleaved, `channels` per frame) from `samples` at `rate_ratio` source
/// frames per output frame, starting at output frame `*next`; past the end, silence.
/// Returns the source frames consumed so far. Allocation- and lock-free: the callback's work.
fn fill<T: Copy>(
    out: &mut [T],
    channels: usize,
    samples: &[i16],
    rate_ratio: f64,
    next: &mut u64,
    convert: impl Fn(f32) -> T,
) -> u64 {
    let last = samples.len().saturating_sub(1);
    for frame in out.chunks_mut(channels.max(1)) {
        let pos = *next as f64 * rate_ratio;
        *next += 1;
        let at = pos.floor() as usize;
        let v = if at < samples.len() {
            let frac = (pos - at as f64) as f32;
            let a = f32::from(samples[at]);
            let b = f32::from(samples[(at + 1).min(last)]);
            (a + (b - a) * frac) / 32768.0
        } else {
            0.0
        };
        for o in frame {
            *o = convert(v);
        }
    }
    ((*next as f64 * rate_ratio) as u64).min(samples.len() as u64)
}

mod output {
    use super::*;
    use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
    use cpal::{FromSample, SampleFormat, SizedSample};

    /// How often the playback thread looks at the stop flag and the position.
    const POLL: Duration = Duration::from_millis(10);
    /// After the last sample was heard (by the device's own account), the stream stays open
    /// this much longer before it closes.
    const DRAIN: Duration = Duration::from_millis(150);
    /// The longest a device's latency is waited for after the last sample was taken (a
    /// PulseAudio stream buffers 2 s by default).
    const MAX_TAIL: Duration = Duration::from_secs(4);
    /// A device that stops taking samples is given up this long after the clip's length.
    const STALL: Duration = Duration::from_secs(2);

    /// Plays `samples` to the end (or until stopped) on the default output device.
    pub(super) fn play(
        samples: Arc<[i16]>,
        rate_hz: u32,
        playback: &Arc<Playback>,
    ) -> Result<(), PlaybackError> {
        if samples.is_empty() || rate_hz == 0 {
            return Ok(());
        }
        let host = cpal::default_host();
        let device = host
            .default_output_device()
            .ok_or(PlaybackError::NoDevice)?;
        let config = device
            .default_output_config()
            .map_err(|_| PlaybackError::NoConfig)?;
        let stream = match config.sample_format() {
            SampleFormat::F32 => build::<f32>(&device, &config, &samples, rate_hz, playback),
            SampleFormat::I16 => build::<i16>(&device, &config, &samples, rate_hz, playback),
            SampleFormat::I32 => build::<i32>(&device, &config, &samples, rate_hz, playback),
            SampleFormat::U16 => build::<u16>(&device, &config, &samples, rate_hz, playback),
            SampleFormat::F64 => build::<f64>(&device, &config, &samples, rate_hz, playback),
            _ => Err(PlaybackError::NoConfig),
        }?;
        stream.play().map_err(|_| PlaybackError::OutputFailed)?;
        let length = Duration::from_secs_f64(samples.len() as f64 / f64::from(rate_hz));
        let started = Instant::now();
        let _ = playback.started.set(started);
        // The device may take the whole clip into its buffer at once: wait until it was
        // taken *and* its length has passed.
        loop {
            if playback.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let taken = playback.consumed.load(Ordering::Relaxed) >= samples.len() as u64;
            if taken && started.elapsed() >= length {
                break;
            }
            if started.elapsed() > length + STALL {
                break;
            }
            std::thread::sleep(POLL);
        }
        // The last samples are in the device's buffer: let them play out (a stop ends it;
        // closing the stream earlier would cut the end off).
        let tail = Duration::from_micros(playback.tail_us.load(Ordering::Relaxed)).min(MAX_TAIL);
        let drained = Instant::now();
        while drained.elapsed() < tail + DRAIN && !playback.stop.load(Ordering::Relaxed) {
            std::thread::sleep(POLL);
        }
        drop(stream);
        Ok(())
    }

    fn build<T>(
        device: &cpal::Device,
        config: &cpal::SupportedStreamConfig,
        samples: &Arc<[i16]>,
        rate_hz: u32,
        playback: &Arc<Playback>,
    ) -> Result<cpal::Stream, PlaybackError>
    where
        T: SizedSample + FromSample<f32> + Send + 'static,
    {
        let channels = usize::from(config.channels());
        let device_rate = config.sample_rate();
        if device_rate == 0 || channels == 0 {
            return Err(PlaybackError::NoConfig);
        }
        let ratio = f64::from(rate_hz) / f64::from(device_rate);
        let (samples, playback) = (samples.clone(), playback.clone());
        let mut next = 0u64;
        device
            .build_output_stream::<T, _, _>(
                config.config(),
                move |out: &mut [T], info: &cpal::OutputCallbackInfo| {
                    if playback.stop.load(Ordering::Relaxed) {
                        out.fill(T::from_sample(0.0f32));
                        return;
                    }
                    let consumed = fill(out, channels, &samples, ratio, &mut next, T::from_sample);
                    let t = info.timestamp();
                    let latency = t.playback.duration_since(t.callback);
                    let buffer = (out.len() / channels) as u64 * 1_000_000 / u64::from(device_rate);
                    let tail = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
                    playback
                        .tail_us
                        .store(tail.saturating_add(buffer), Ordering::Relaxed);
                    playback.consumed.store(consumed, Ordering::Relaxed);
                },
                |_err: cpal::Error| {},
                None,
            )
            .map_err(|_| PlaybackError::OutputFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_resamples_by_interpolation_and_duplicates_channels() {
        let samples = [0i16, 16_384, -16_384, 8_192];
        // Same rate, stereo: every sample twice, then silence.
        let mut next = 0;
        let mut out = [9.0f32; 10];
        let consumed = fill(&mut out, 2, &samples, 1.0, &mut next, |v| v);
        assert_eq!(out, [0.0, 0.0, 0.5, 0.5, -0.5, -0.5, 0.25, 0.25, 0.0, 0.0]);
        assert_eq!(consumed, 4);
        // 24 kHz onto 48 kHz mono: the points between are interpolated.
        let mut next = 0;
        let mut out = [0.0f32; 4];
        let consumed = fill(&mut out, 1, &samples, 0.5, &mut next, |v| v);
        assert_eq!(out, [0.0, 0.25, 0.5, 0.0]);
        assert_eq!(consumed, 2);
        // Carried on from where the last call stopped.
        let consumed = fill(&mut out, 1, &samples, 0.5, &mut next, |v| v);
        assert_eq!(out, [-0.5, -0.125, 0.25, 0.25]);
        assert_eq!(consumed, 4);
    }

    #[test]
    fn fill_counts_frames_for_any_device_rate() {
        // 24 kHz onto 44.1 kHz: one second of source is about a second of output frames.
        let samples = vec![1_000i16; 24_000];
        let mut next = 0;
        let mut out = vec![0i16; 44_100 * 2];
        let consumed = fill(&mut out, 2, &samples, 24_000.0 / 44_100.0, &mut next, |v| {
            (v * 32768.0) as i16
        });
        assert!((23_999..=24_000).contains(&consumed), "{consumed}");
        assert!(out.iter().all(|&s| s == 1_000));
    }

    #[test]
    fn a_player_says_where_it_stands_and_stops_at_once() {
        let woken = Arc::new(AtomicU64::new(0));
        let w = woken.clone();
        let mut player = OutputPlayer::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(player.state(), PlayerState::Idle);
        // Whatever this machine has (a device or none), a playback is either playing, ended
        // or failed with a sentence; stop makes it idle at once.
        player.play(vec![0; 24_000 * 5], 24_000);
        match player.state() {
            PlayerState::Playing { length_ms, .. } => assert_eq!(length_ms, 5_000),
            PlayerState::Failed(e) => assert!(!e.sentence().is_empty()),
            PlayerState::Idle => {}
        }
        player.stop();
        assert_eq!(player.state(), PlayerState::Idle);
        // An empty clip ends at once, and the window is woken.
        player.play(Vec::new(), 24_000);
        let deadline = Instant::now() + Duration::from_secs(10);
        while player.state() != PlayerState::Idle && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(player.state(), PlayerState::Idle);
        assert!(woken.load(Ordering::SeqCst) >= 1);
    }
}
