//! Audio sources: where capture's frames come from, before conversion.
//!
//! ```text
//!  FileSource (any WAV, paced) ──────────────┐                 ┌─► Converter (24 kHz mono i16)
//!                                            ├─► SyncSender<SourceEvent>
//!  CpalSource (microphone) ─► ring ─► drain ─┘    (bounded; Frames, Error, Ended)
//! ```
//!
//! An [`AudioSource`] announces its [`SourceFormat`] before it starts, then delivers
//! interleaved `f32` frames in that format through a bounded channel the pipeline owns. The
//! pipeline builds a [`crate::audio::convert::Converter`] from the format, feeds the frames through
//! it, and watches the result with a [`SilenceDetector`].
//!
//! Invariants:
//! - A source never blocks an audio callback. The microphone's data callback only converts
//!   samples into a preallocated lock-free ring (`InputLink`, `rtrb`) and bumps atomic
//!   counters: no allocation, no lock (`tests/capture_rt_alloc.rs` counts). A drain thread
//!   turns the ring into events; frames the callback could not store are reported as
//!   [`SourceError::Overrun`] with their count, and the pipeline halts on it. Dropped audio
//!   is always reported, never silent.
//! - A device overload (an xrun, e.g. CoreAudio's processor overload) that lost nothing in
//!   Persyk's pipeline is [`SourceError::InputOverload`]: counted, not fatal.
//! - Errors are values with stable codes; nothing here panics on a device, file or stream
//!   failure, nor on an extreme pacing factor. After a fatal error a source sends nothing
//!   more. A finite source ends with [`SourceEvent::Ended`]; a channel that closes without
//!   it is a failure (`capture.source-disconnected`), never a clean end.
//! - After [`AudioSource::stop`] returns, a source sends no more frames and has dropped its
//!   senders, so the receiver sees the channel disconnect once it has drained it.
//!
//! What can be detected about microphone permission: on macOS, cpal maps CoreAudio's
//! `kAudioUnitErr_Unauthorized` and file-permission errors to `ErrorKind::PermissionDenied`,
//! which becomes [`SourceError::PermissionDenied`]. But when the user has denied the app
//! microphone access in Privacy & Security, CoreAudio usually opens the stream anyway and
//! delivers digital silence (all zeros) — no error at all. That case is only visible as
//! [`SourceError::SilentInput`] from the [`SilenceDetector`]; the app should then point the
//! user at the privacy setting. (Asking `AVCaptureDevice.authorizationStatus` would tell
//! directly; that belongs in the app shell, not here.) On Linux, ALSA permission problems
//! (not in the `audio` group) surface as `PermissionDenied` when the backend reports EACCES,
//! otherwise as [`SourceError::StreamFailed`].

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::audio::convert::{OUTPUT_RATE_HZ, int_to_f32};

/// A sensible bound for the event channel: at the 20 ms callback period `CpalSource` asks
/// for, about 5 s of audio.
pub const EVENT_QUEUE_DEPTH: usize = 256;
/// How much leading input [`SilenceDetector`] judges.
pub const SILENCE_WINDOW: Duration = Duration::from_secs(2);

/// The shape of a source's frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceFormat {
    pub rate_hz: u32,
    pub channels: u16,
}

/// What a source sends.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceEvent {
    /// Interleaved `f32` samples in the source's format; always whole frames.
    Frames(Vec<f32>),
    /// A failure. Fatal unless [`SourceError::is_fatal`] says otherwise; nothing follows a
    /// fatal one.
    Error(SourceError),
    /// A finite source (a file) has delivered everything.
    Ended,
}

/// Why a source could not start or keep going.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    #[error("capture.no-microphone: there is no default input device")]
    NoMicrophone,
    #[error("capture.device-not-found: the chosen input device is not available")]
    DeviceNotFound,
    #[error("capture.permission-denied: the system denied access to the microphone")]
    PermissionDenied,
    #[error("capture.stream-failed: the audio stream failed ({detail})")]
    StreamFailed { detail: &'static str },
    #[error(
        "capture.unsupported-format: the device or file uses a sample format capture cannot read"
    )]
    UnsupportedFormat,
    #[error("capture.input-unreadable: the input WAV could not be read")]
    InputUnreadable,
    /// Not an audio or video file Persyk reads (empty, renamed, text).
    #[error(
        "capture.unrecognized-file: the file is not an audio or video file Persyk can read (MP3, M4A/AAC, ALAC, FLAC, WAV, AIFF, Ogg Vorbis, MP4, MOV, MKV)"
    )]
    UnrecognizedFile,
    /// A media file without an audio track.
    #[error("capture.no-audio-track: the file has no audio track")]
    NoAudioTrack,
    /// An audio codec this build does not decode.
    #[error(
        "capture.unsupported-codec: the file's audio is {name}, which Persyk cannot decode; convert it to M4A, MP3 or WAV (for example with the Music app or ffmpeg) and try again"
    )]
    UnsupportedCodec { name: &'static str },
    /// The stream breaks off or is damaged: what came before it was delivered.
    #[error("capture.input-damaged: the file is damaged or cut off from here on")]
    InputDamaged,
    /// Frames were lost between the device and the pipeline (Persyk's own queue was full):
    /// the pipeline halts. `dropped_frames` is `None` when the loss has no count.
    #[error("capture.overrun: audio was dropped because it was not consumed in time")]
    Overrun { dropped_frames: Option<u64> },
    /// The device reported `count` processor overloads (xruns; CoreAudio reports one for
    /// every `kAudioDeviceProcessorOverload`). No frame was lost in Persyk's pipeline:
    /// counted, capture goes on.
    #[error("capture.input-overload: the audio device reported an overload")]
    InputOverload { count: u64 },
    /// The input device stopped working while it was kept warm (unplugged, taken away) and
    /// could not be reopened.
    #[error("capture.device-lost: the input device stopped working and could not be reopened")]
    DeviceLost,
    /// The source's channel closed without [`SourceEvent::Ended`]: its thread died.
    #[error("capture.source-disconnected: the audio source stopped without finishing")]
    SourceDisconnected,
    #[error(
        "capture.silent-input: the first seconds of input were silent; check the microphone and its permission"
    )]
    SilentInput,
    #[error("capture.already-started: the source was already started")]
    AlreadyStarted,
}

impl SourceError {
    /// The stable diagnostic code.
    pub fn code(&self) -> &'static str {
        match self {
            SourceError::NoMicrophone => "capture.no-microphone",
            SourceError::DeviceNotFound => "capture.device-not-found",
            SourceError::PermissionDenied => "capture.permission-denied",
            SourceError::StreamFailed { .. } => "capture.stream-failed",
            SourceError::UnsupportedFormat => "capture.unsupported-format",
            SourceError::InputUnreadable => "capture.input-unreadable",
            SourceError::UnrecognizedFile => "capture.unrecognized-file",
            SourceError::NoAudioTrack => "capture.no-audio-track",
            SourceError::UnsupportedCodec { .. } => "capture.unsupported-codec",
            SourceError::InputDamaged => "capture.input-damaged",
            SourceError::Overrun { .. } => "capture.overrun",
            SourceError::InputOverload { .. } => "capture.input-overload",
            SourceError::DeviceLost => "capture.device-lost",
            SourceError::SourceDisconnected => "capture.source-disconnected",
            SourceError::SilentInput => "capture.silent-input",
            SourceError::AlreadyStarted => "capture.already-started",
        }
    }

    /// Whether the source stops after this error. After an overrun or an input overload
    /// the source goes on (the pipeline decides: it halts on an overrun, counts overloads);
    /// silent input is the pipeline's call.
    pub fn is_fatal(&self) -> bool {
        !matches!(
            self,
            SourceError::Overrun { .. }
                | SourceError::InputOverload { .. }
                | SourceError::SilentInput
        )
    }
}

/// A producer of interleaved `f32` frames.
pub trait AudioSource: Send {
    /// The format of every [`SourceEvent::Frames`], known before `start`.
    fn format(&self) -> SourceFormat;
    /// Starts delivering events into `events`. A source starts once.
    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError>;
    /// Stops delivering and drops the senders. Idempotent.
    fn stop(&mut self);
    /// A fresh, unstarted source for the same input, for a warm input whose device was lost
    /// ([`super::preroll::WarmInput`]); `None` for sources that cannot be reopened (files,
    /// buffers).
    fn reopen(&self) -> Option<Result<Box<dyn AudioSource>, SourceError>> {
        None
    }
    /// Frames the input holds, when it is finite and says (a file's header or container).
    fn len_frames(&self) -> Option<u64> {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// File source

/// Frames per event for the file source (10 ms).
const FILE_EVENTS_PER_SECOND: u32 = 100;

/// Any PCM or float WAV file hound reads (8/16/24/32-bit integer, 32-bit float; any channel
/// count and rate), delivered at `realtime_factor` × real time (0 = as fast as the receiver
/// takes it).
pub struct FileSource {
    format: SourceFormat,
    realtime_factor: f64,
    reader: Option<hound::WavReader<BufReader<File>>>,
    stop: Arc<AtomicBool>,
    worker: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FileSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSource")
            .field("format", &self.format)
            .field("realtime_factor", &self.realtime_factor)
            .field("started", &self.reader.is_none())
            .finish_non_exhaustive()
    }
}

impl FileSource {
    /// Opens `path` and reads its header.
    pub fn open(path: &Path, realtime_factor: f64) -> Result<FileSource, SourceError> {
        let reader = hound::WavReader::open(path).map_err(|e| match e {
            hound::Error::Unsupported => SourceError::UnsupportedFormat,
            _ => SourceError::InputUnreadable,
        })?;
        let spec = reader.spec();
        let supported = match spec.sample_format {
            hound::SampleFormat::Int => (8..=32).contains(&spec.bits_per_sample),
            hound::SampleFormat::Float => spec.bits_per_sample == 32,
        };
        if !supported || spec.channels == 0 || spec.sample_rate == 0 {
            return Err(SourceError::UnsupportedFormat);
        }
        Ok(FileSource {
            format: SourceFormat {
                rate_hz: spec.sample_rate,
                channels: spec.channels,
            },
            realtime_factor: if realtime_factor.is_finite() && realtime_factor > 0.0 {
                realtime_factor
            } else {
                0.0
            },
            reader: Some(reader),
            stop: Arc::new(AtomicBool::new(false)),
            worker: None,
        })
    }
}

impl AudioSource for FileSource {
    fn format(&self) -> SourceFormat {
        self.format
    }

    /// Frames in the file, from its header.
    fn len_frames(&self) -> Option<u64> {
        self.reader.as_ref().map(|r| u64::from(r.duration()))
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        let reader = self.reader.take().ok_or(SourceError::AlreadyStarted)?;
        let stop = self.stop.clone();
        let format = self.format;
        let factor = self.realtime_factor;
        let worker = std::thread::Builder::new()
            .name("persyk-file-source".into())
            .spawn(move || file_worker(reader, format, factor, &events, &stop))
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
        self.reader = None;
    }
}

impl Drop for FileSource {
    fn drop(&mut self) {
        self.stop();
    }
}

fn file_worker(
    mut reader: hound::WavReader<BufReader<File>>,
    format: SourceFormat,
    factor: f64,
    events: &SyncSender<SourceEvent>,
    stop: &AtomicBool,
) {
    let spec = reader.spec();
    let channels = usize::from(format.channels);
    let frames_per_event = (format.rate_hz / FILE_EVENTS_PER_SECOND).max(1) as usize;
    let samples_per_event = frames_per_event * channels;
    let started = Instant::now();
    let mut sent_frames = 0u64;
    let mut read_one: Box<dyn FnMut() -> Option<Result<f32, hound::Error>> + '_> =
        match spec.sample_format {
            hound::SampleFormat::Float => {
                let mut it = reader.samples::<f32>();
                Box::new(move || it.next())
            }
            hound::SampleFormat::Int => {
                let bits = spec.bits_per_sample;
                let mut it = reader.samples::<i32>();
                Box::new(move || it.next().map(|r| r.map(|s| int_to_f32(s, bits))))
            }
        };
    loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let mut block = Vec::with_capacity(samples_per_event);
        let mut ended = false;
        while block.len() < samples_per_event {
            match read_one() {
                Some(Ok(s)) => block.push(s),
                Some(Err(_)) => {
                    // What was read before the damage still goes out, in whole frames.
                    block.truncate(block.len() / channels * channels);
                    if block.is_empty() || deliver(events, SourceEvent::Frames(block), stop) {
                        deliver(
                            events,
                            SourceEvent::Error(SourceError::InputUnreadable),
                            stop,
                        );
                    }
                    return;
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        // A truncated file may end mid-frame: deliver whole frames only.
        block.truncate(block.len() / channels * channels);
        if !block.is_empty() {
            let frames = (block.len() / channels) as u64;
            if !deliver(events, SourceEvent::Frames(block), stop) {
                return;
            }
            sent_frames += frames;
            pace(sent_frames, format.rate_hz, factor, started, stop);
        }
        if ended {
            deliver(events, SourceEvent::Ended, stop);
            return;
        }
    }
}

/// Sends `event`, waiting for room while not stopped. False if stopped or disconnected.
pub(crate) fn deliver(
    events: &SyncSender<SourceEvent>,
    mut event: SourceEvent,
    stop: &AtomicBool,
) -> bool {
    let mut backoff = Duration::from_micros(50);
    loop {
        match events.try_send(event) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(back)) => {
                if stop.load(Ordering::SeqCst) {
                    return false;
                }
                event = back;
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(2));
            }
        }
    }
}

/// Waits until `sent_frames` at `rate_hz` are due at `factor` × real time since `started`,
/// or until `stop`. A factor that is not finite and positive means "no pacing". A due time
/// too far away for a `Duration` (an extreme factor) waits for `stop`: never a panic.
pub(crate) fn pace(
    sent_frames: u64,
    rate_hz: u32,
    factor: f64,
    started: Instant,
    stop: &AtomicBool,
) {
    if !(factor.is_finite() && factor > 0.0) {
        return;
    }
    let due_s = sent_frames as f64 / f64::from(rate_hz.max(1)) / factor;
    match Duration::try_from_secs_f64(due_s) {
        Ok(due) => {
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                sleep_unless_stopped(wait, stop);
            }
        }
        Err(_) => sleep_unless_stopped(Duration::MAX, stop),
    }
}

fn sleep_unless_stopped(wait: Duration, stop: &AtomicBool) {
    // `None`: further away than an `Instant` reaches, so in practice never.
    let deadline = Instant::now().checked_add(wait);
    while !stop.load(Ordering::SeqCst) {
        let left = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) => left,
                None => return,
            },
            None => Duration::MAX,
        };
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

// ---------------------------------------------------------------------------------------------
// Silence detection

/// What [`SilenceDetector`] has concluded about the start of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Silence {
    /// Less than the window has been seen, all of it silent.
    Undecided,
    /// A non-zero sample arrived within the window: the input is live.
    Sound,
    /// The window passed — in samples or in wall time — without one non-zero sample.
    Silent,
}

/// Detects a dead input: the first [`SILENCE_WINDOW`] of converted 24 kHz samples all zero,
/// or no samples at all for that long. The verdict is final once reached.
///
/// Feed every converted sample with [`Self::feed`] in order; call [`Self::poll`] with the
/// time since the source started (after feeding everything received) to catch a source
/// whose callbacks never come. "Zero" means exactly 0: a denied macOS microphone delivers
/// digital silence, while a live microphone in a quiet room still has noise in the low bits.
#[derive(Debug, Clone)]
pub struct SilenceDetector {
    window: Duration,
    window_samples: u64,
    seen_samples: u64,
    verdict: Silence,
}

impl Default for SilenceDetector {
    fn default() -> Self {
        Self::new()
    }
}

impl SilenceDetector {
    /// A detector with the standard 2 s window.
    pub fn new() -> Self {
        Self::with_window(SILENCE_WINDOW)
    }

    pub fn with_window(window: Duration) -> Self {
        let window_samples = (window.as_secs_f64() * f64::from(OUTPUT_RATE_HZ)).ceil() as u64;
        SilenceDetector {
            window,
            window_samples,
            seen_samples: 0,
            verdict: Silence::Undecided,
        }
    }

    /// Takes the next converted samples.
    pub fn feed(&mut self, samples: &[i16]) -> Silence {
        if self.verdict != Silence::Undecided {
            return self.verdict;
        }
        let room = usize::try_from(self.window_samples - self.seen_samples).unwrap_or(usize::MAX);
        let head = &samples[..samples.len().min(room)];
        if head.iter().any(|&s| s != 0) {
            self.verdict = Silence::Sound;
        } else {
            self.seen_samples += head.len() as u64;
            if self.seen_samples >= self.window_samples {
                self.verdict = Silence::Silent;
            }
        }
        self.verdict
    }

    /// Judges by wall time: `elapsed` since the source started.
    pub fn poll(&mut self, elapsed: Duration) -> Silence {
        if self.verdict == Silence::Undecided && elapsed >= self.window {
            self.verdict = Silence::Silent;
        }
        self.verdict
    }

    pub fn verdict(&self) -> Silence {
        self.verdict
    }

    /// `capture.silent-input` once the verdict is [`Silence::Silent`].
    pub fn error(&self) -> Option<SourceError> {
        (self.verdict == Silence::Silent).then_some(SourceError::SilentInput)
    }
}

// ---------------------------------------------------------------------------------------------
// Microphone source (cpal)

#[cfg(feature = "app")]
pub use mic::{CpalSource, InputCallback, InputErrors, InputLink, input_devices};

#[cfg(feature = "app")]
mod mic {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::mpsc::SyncSender;
    use std::sync::{Arc, Mutex};
    use std::thread::JoinHandle;
    use std::time::Duration;

    use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
    use cpal::{BufferSize, ErrorKind, FromSample, SampleFormat, SizedSample, SupportedBufferSize};
    use rtrb::{Consumer, Producer, RingBuffer};

    use super::{AudioSource, SourceError, SourceEvent, SourceFormat, deliver};

    /// Requested callback period: 1/50 s (20 ms) of frames.
    const CALLBACKS_PER_SECOND: u32 = 50;

    /// The names of the default host's input devices, as [`CpalSource::open`] accepts them.
    /// Empty when the host cannot list devices.
    pub fn input_devices() -> Vec<String> {
        let host = cpal::default_host();
        let Ok(devices) = host.input_devices() else {
            return Vec::new();
        };
        devices.filter_map(|d| device_name(&d)).collect()
    }

    fn device_name(device: &cpal::Device) -> Option<String> {
        device.description().ok().map(|d| d.name().to_owned())
    }

    /// Whether `device` answers to `name`: its display name or its backend id (on Linux with
    /// PulseAudio, e.g. `vsink.monitor`).
    fn answers_to(device: &cpal::Device, name: &str) -> bool {
        device_name(device).as_deref() == Some(name) || device.id().is_ok_and(|id| id.id() == name)
    }

    /// A microphone through cpal: the default input device, or one chosen by name, in its
    /// default input configuration (whatever rate, channel count and sample format the device
    /// prefers; every integer and float format is converted to `f32`).
    pub struct CpalSource {
        device: cpal::Device,
        config: cpal::SupportedStreamConfig,
        /// The name `open` was given, for [`AudioSource::reopen`].
        requested: Option<String>,
        stream: Option<cpal::Stream>,
        link: Option<InputLink>,
        started: bool,
    }

    impl std::fmt::Debug for CpalSource {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("CpalSource")
                .field("format", &self.format())
                .field("sample_format", &self.config.sample_format())
                .field("running", &self.stream.is_some())
                .finish_non_exhaustive()
        }
    }

    impl CpalSource {
        /// Opens the default input device (`None`) or the input device named `device`.
        pub fn open(device: Option<&str>) -> Result<CpalSource, SourceError> {
            let host = cpal::default_host();
            let requested = device;
            let device = match device {
                None => host
                    .default_input_device()
                    .ok_or(SourceError::NoMicrophone)?,
                Some(name) => host
                    .input_devices()
                    .map_err(|e| open_error(&e))?
                    .find(|d| answers_to(d, name))
                    .ok_or(SourceError::DeviceNotFound)?,
            };
            let config = device.default_input_config().map_err(|e| open_error(&e))?;
            if matches!(
                config.sample_format(),
                SampleFormat::DsdU8 | SampleFormat::DsdU16 | SampleFormat::DsdU32
            ) {
                return Err(SourceError::UnsupportedFormat);
            }
            Ok(CpalSource {
                device,
                config,
                requested: requested.map(str::to_owned),
                stream: None,
                link: None,
                started: false,
            })
        }

        /// The device's display name.
        pub fn device_name(&self) -> Option<String> {
            device_name(&self.device)
        }

        /// The device's sample format as cpal reports it (e.g. `f32`, `i16`).
        pub fn sample_format(&self) -> &'static str {
            match self.config.sample_format() {
                SampleFormat::I8 => "i8",
                SampleFormat::I16 => "i16",
                SampleFormat::I24 => "i24",
                SampleFormat::I32 => "i32",
                SampleFormat::I64 => "i64",
                SampleFormat::U8 => "u8",
                SampleFormat::U16 => "u16",
                SampleFormat::U24 => "u24",
                SampleFormat::U32 => "u32",
                SampleFormat::U64 => "u64",
                SampleFormat::F32 => "f32",
                SampleFormat::F64 => "f64",
                _ => "other",
            }
        }
    }

    impl AudioSource for CpalSource {
        fn format(&self) -> SourceFormat {
            SourceFormat {
                rate_hz: self.config.sample_rate(),
                channels: self.config.channels(),
            }
        }

        fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
            if self.started {
                return Err(SourceError::AlreadyStarted);
            }
            self.started = true;
            // Ask for a fixed callback period where the device allows it: with its default
            // buffer attributes PulseAudio delivers capture in fragments of up to 2 s. If the
            // device refuses the fixed size after all, fall back to its default.
            let mut config: cpal::StreamConfig = self.config.config();
            let period = self.config.sample_rate().div_ceil(CALLBACKS_PER_SECOND);
            let fixed = match *self.config.buffer_size() {
                SupportedBufferSize::Range { min, max } if (min..=max).contains(&period) => {
                    config.buffer_size = BufferSize::Fixed(period);
                    true
                }
                _ => false,
            };
            let format = self.format();
            let sample_format = self.config.sample_format();
            let attempt = |config: cpal::StreamConfig| {
                let (link, callback) = InputLink::start(format, events.clone())?;
                let stream = build_any(&self.device, sample_format, config, callback)?;
                Ok::<_, SourceError>((link, stream))
            };
            let (link, stream) = match attempt(config) {
                Err(_) if fixed => {
                    config.buffer_size = BufferSize::Default;
                    attempt(config)
                }
                other => other,
            }?;
            self.link = Some(link);
            stream.play().map_err(|e| open_error(&e))?;
            self.stream = Some(stream);
            Ok(())
        }

        fn stop(&mut self) {
            // Dropping the stream stops the callbacks and drops the sender they own.
            if let Some(stream) = self.stream.take() {
                let _ = stream.pause();
                drop(stream);
            }
            if let Some(mut link) = self.link.take() {
                link.stop();
            }
        }

        fn reopen(&self) -> Option<Result<Box<dyn AudioSource>, SourceError>> {
            Some(
                CpalSource::open(self.requested.as_deref())
                    .map(|s| Box::new(s) as Box<dyn AudioSource>),
            )
        }
    }

    impl Drop for CpalSource {
        fn drop(&mut self) {
            self.stop();
        }
    }

    /// Builds the input stream for whatever sample format the device delivers.
    fn build_any(
        device: &cpal::Device,
        format: SampleFormat,
        config: cpal::StreamConfig,
        events: InputCallback,
    ) -> Result<cpal::Stream, SourceError> {
        match format {
            SampleFormat::I8 => build::<i8>(device, config, events),
            SampleFormat::I16 => build::<i16>(device, config, events),
            SampleFormat::I24 => build::<cpal::I24>(device, config, events),
            SampleFormat::I32 => build::<i32>(device, config, events),
            SampleFormat::I64 => build::<i64>(device, config, events),
            SampleFormat::U8 => build::<u8>(device, config, events),
            SampleFormat::U16 => build::<u16>(device, config, events),
            SampleFormat::U24 => build::<cpal::U24>(device, config, events),
            SampleFormat::U32 => build::<u32>(device, config, events),
            SampleFormat::U64 => build::<u64>(device, config, events),
            SampleFormat::F32 => build::<f32>(device, config, events),
            SampleFormat::F64 => build::<f64>(device, config, events),
            _ => return Err(SourceError::UnsupportedFormat),
        }
        .map_err(|e| open_error(&e))
    }

    /// Seconds of audio the ring between the data callback and the drain thread holds.
    const RING_SECONDS: usize = 2;
    /// The ring's bound in samples, whatever the device's rate and channel count.
    const MAX_RING_SAMPLES: usize = 1 << 24;
    /// How long the drain thread sleeps when it found nothing to do.
    const DRAIN_IDLE: Duration = Duration::from_millis(5);

    /// What the callbacks tell the drain thread besides samples: counters and flags only, so
    /// the data callback never locks.
    #[derive(Default)]
    struct LinkState {
        /// Frames the data callback could not store because the ring was full.
        lost_frames: AtomicU64,
        /// Overloads (xruns) the device reported.
        overloads: AtomicU64,
        /// A fatal stream error, from the error callback (not the real-time data callback).
        fatal: Mutex<Option<SourceError>>,
        has_fatal: AtomicBool,
        stop: AtomicBool,
    }

    /// The link between a device's real-time callbacks and the pipeline's event channel.
    ///
    /// ```text
    ///  data callback ──► rtrb ring (f32, 2 s, preallocated) ──► drain thread ──► SyncSender
    ///  error callback ─► counters / fatal slot ───────────────────┘   (Frames, Error)
    /// ```
    ///
    /// [`InputLink::start`] returns the callback half, [`InputCallback`], which the cpal
    /// stream's data callback drives (and tests drive without a device). The data callback
    /// only converts samples into the preallocated single-producer single-consumer ring and
    /// bumps atomic counters: no allocation, no lock, no system call. The drain thread
    /// (`persyk-capture-drain`) turns the ring into [`SourceEvent::Frames`], reports frames
    /// the callback could not store as [`SourceError::Overrun`] (Persyk's queue was full:
    /// the pipeline halts), overloads as [`SourceError::InputOverload`] (counted, not a
    /// halt) and delivers a fatal stream error, after which it sends nothing more.
    pub struct InputLink {
        state: Arc<LinkState>,
        drain: Option<JoinHandle<()>>,
    }

    impl InputLink {
        /// Links callbacks delivering frames of `format` to `events`.
        pub fn start(
            format: SourceFormat,
            events: SyncSender<SourceEvent>,
        ) -> Result<(InputLink, InputCallback), SourceError> {
            let channels = usize::from(format.channels.max(1));
            let capacity = usize::try_from(format.rate_hz)
                .unwrap_or(usize::MAX)
                .saturating_mul(RING_SECONDS)
                .saturating_mul(channels)
                .clamp(channels, MAX_RING_SAMPLES / channels * channels);
            let (producer, consumer) = RingBuffer::new(capacity);
            let state = Arc::new(LinkState::default());
            let drain = {
                let state = state.clone();
                std::thread::Builder::new()
                    .name("persyk-capture-drain".into())
                    .spawn(move || drain(consumer, channels, &events, &state))
                    .map_err(|_| SourceError::StreamFailed {
                        detail: "thread-spawn",
                    })?
            };
            Ok((
                InputLink {
                    state: state.clone(),
                    drain: Some(drain),
                },
                InputCallback {
                    producer,
                    channels,
                    state,
                },
            ))
        }

        /// Stops the drain thread, which drops the event sender. Idempotent.
        pub fn stop(&mut self) {
            self.state.stop.store(true, Ordering::SeqCst);
            if let Some(drain) = self.drain.take() {
                let _ = drain.join();
            }
        }
    }

    impl Drop for InputLink {
        fn drop(&mut self) {
            self.stop();
        }
    }

    /// What a cpal input stream's data callback runs (real-time: no allocation, no lock).
    pub struct InputCallback {
        producer: Producer<f32>,
        channels: usize,
        state: Arc<LinkState>,
    }

    impl InputCallback {
        /// The data callback's body: one buffer of interleaved samples, whole frames of it
        /// converted into the ring; if they do not fit, they are counted as lost.
        pub fn on_data<T>(&mut self, data: &[T])
        where
            T: SizedSample,
            f32: FromSample<T>,
        {
            let whole = data.len() / self.channels * self.channels;
            let data = &data[..whole];
            match self.producer.write_chunk_uninit(whole) {
                Ok(chunk) => {
                    chunk.fill_from_iter(data.iter().map(|&s| f32::from_sample_(s)));
                }
                Err(_) => {
                    self.state
                        .lost_frames
                        .fetch_add((whole / self.channels) as u64, Ordering::Relaxed);
                }
            }
        }

        /// The handler for the stream's error callback.
        pub fn errors(&self) -> InputErrors {
            InputErrors {
                state: self.state.clone(),
            }
        }
    }

    /// What a cpal input stream's error callback runs.
    #[derive(Clone)]
    pub struct InputErrors {
        state: Arc<LinkState>,
    }

    impl InputErrors {
        /// The error callback's body: an overload is counted (an atomic add); a fatal error
        /// is handed to the drain thread, which delivers it.
        pub fn on_error(&self, err: &cpal::Error) {
            match stream_error(err) {
                None => {}
                Some(SourceError::InputOverload { count }) => {
                    self.state.overloads.fetch_add(count, Ordering::Relaxed);
                }
                Some(error) => {
                    let mut slot = self.state.fatal.lock().unwrap_or_else(|p| p.into_inner());
                    slot.get_or_insert(error);
                    self.state.has_fatal.store(true, Ordering::SeqCst);
                }
            }
        }
    }

    /// The drain thread: ring → events, counters → error events, until stopped, after a
    /// fatal error, or once the callback half is gone and the ring is empty.
    fn drain(
        mut consumer: Consumer<f32>,
        channels: usize,
        events: &SyncSender<SourceEvent>,
        state: &LinkState,
    ) {
        let stop = &state.stop;
        let (mut reported_lost, mut reported_overloads) = (0u64, 0u64);
        while !stop.load(Ordering::SeqCst) {
            let mut busy = false;
            let ready = consumer.slots() / channels * channels;
            if ready > 0
                && let Ok(chunk) = consumer.read_chunk(ready)
            {
                busy = true;
                let (head, tail) = chunk.as_slices();
                let mut frames = Vec::with_capacity(ready);
                frames.extend_from_slice(head);
                frames.extend_from_slice(tail);
                chunk.commit_all();
                if !deliver(events, SourceEvent::Frames(frames), stop) {
                    return;
                }
            }
            let overloads = state.overloads.load(Ordering::Relaxed);
            if overloads > reported_overloads {
                busy = true;
                let count = overloads - reported_overloads;
                reported_overloads = overloads;
                let event = SourceEvent::Error(SourceError::InputOverload { count });
                if !deliver(events, event, stop) {
                    return;
                }
            }
            let lost = state.lost_frames.load(Ordering::Relaxed);
            if lost > reported_lost {
                busy = true;
                let dropped_frames = Some(lost - reported_lost);
                reported_lost = lost;
                let event = SourceEvent::Error(SourceError::Overrun { dropped_frames });
                if !deliver(events, event, stop) {
                    return;
                }
            }
            if state.has_fatal.load(Ordering::SeqCst) {
                let fatal = state.fatal.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(error) = fatal {
                    deliver(events, SourceEvent::Error(error), stop);
                }
                return;
            }
            if !busy {
                if consumer.is_abandoned() && consumer.slots() < channels {
                    return;
                }
                std::thread::sleep(DRAIN_IDLE);
            }
        }
    }

    fn build<T>(
        device: &cpal::Device,
        config: cpal::StreamConfig,
        mut callback: InputCallback,
    ) -> Result<cpal::Stream, cpal::Error>
    where
        T: SizedSample + Send + 'static,
        f32: FromSample<T>,
    {
        let errors = callback.errors();
        device.build_input_stream::<T, _, _>(
            config,
            move |data: &[T], _: &cpal::InputCallbackInfo| callback.on_data(data),
            move |err: cpal::Error| errors.on_error(&err),
            None,
        )
    }

    /// A failure while opening or starting.
    fn open_error(err: &cpal::Error) -> SourceError {
        match err.kind() {
            ErrorKind::PermissionDenied => SourceError::PermissionDenied,
            ErrorKind::DeviceNotAvailable => SourceError::DeviceNotFound,
            ErrorKind::UnsupportedConfig => SourceError::UnsupportedFormat,
            kind => SourceError::StreamFailed {
                detail: kind_label(kind),
            },
        }
    }

    /// A failure reported by a running stream; `None` for those that change nothing.
    fn stream_error(err: &cpal::Error) -> Option<SourceError> {
        match err.kind() {
            // Rerouted to the new default device, or real-time priority refused: the stream
            // keeps running.
            ErrorKind::DeviceChanged | ErrorKind::RealtimeDenied => None,
            // A processor overload (CoreAudio) or an xrun the backend noticed: the device's
            // business. Persyk's own losses are counted by the link, never reported here.
            ErrorKind::Xrun => Some(SourceError::InputOverload { count: 1 }),
            ErrorKind::PermissionDenied => Some(SourceError::PermissionDenied),
            kind => Some(SourceError::StreamFailed {
                detail: kind_label(kind),
            }),
        }
    }

    fn kind_label(kind: ErrorKind) -> &'static str {
        match kind {
            ErrorKind::DeviceBusy => "device-busy",
            ErrorKind::DeviceNotAvailable => "device-not-available",
            ErrorKind::HostUnavailable => "host-unavailable",
            ErrorKind::InvalidInput => "invalid-input",
            ErrorKind::ResourceExhausted => "resource-exhausted",
            ErrorKind::StreamInvalidated => "stream-invalidated",
            ErrorKind::UnsupportedConfig => "unsupported-config",
            ErrorKind::UnsupportedOperation => "unsupported-operation",
            ErrorKind::BackendError => "backend-error",
            _ => "other",
        }
    }

    #[cfg(test)]
    mod tests {
        use std::sync::mpsc::sync_channel;
        use std::time::Duration;

        use super::*;

        #[test]
        fn frames_the_ring_cannot_hold_are_an_overrun_with_their_count() {
            // 1 kHz mono: a 2,000-sample ring. The pipeline's channel holds one event and
            // nobody reads it yet, so the drain thread stalls and the ring fills.
            let format = SourceFormat {
                rate_hz: 1_000,
                channels: 1,
            };
            let (tx, rx) = sync_channel(1);
            let (mut link, mut callback) = InputLink::start(format, tx).expect("link");
            let buffer = [0.25f32; 100];
            let pushed = 100 * buffer.len() as u64;
            for _ in 0..100 {
                callback.on_data(&buffer);
            }
            let (mut frames, mut dropped, mut overruns) = (0u64, 0u64, 0);
            while frames + dropped < pushed {
                match rx.recv_timeout(Duration::from_secs(10)).expect("an event") {
                    SourceEvent::Frames(f) => frames += f.len() as u64,
                    SourceEvent::Error(SourceError::Overrun {
                        dropped_frames: Some(n),
                    }) => {
                        dropped += n;
                        overruns += 1;
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert_eq!(frames + dropped, pushed, "every frame delivered or counted");
            // At most the ring and two events' worth got through; the rest was counted.
            assert!(overruns >= 1 && dropped >= 4_000, "dropped {dropped}");
            drop(callback);
            link.stop();
        }

        #[test]
        fn an_xrun_is_an_overload_and_a_lost_device_is_fatal() {
            assert_eq!(
                stream_error(&cpal::Error::new(ErrorKind::Xrun)),
                Some(SourceError::InputOverload { count: 1 })
            );
            let gone = stream_error(&cpal::Error::new(ErrorKind::DeviceNotAvailable));
            assert!(gone.is_some_and(|e| e.is_fatal()));
        }
    }
}
