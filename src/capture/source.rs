//! Audio sources: where capture's frames come from, before conversion.
//!
//! ```text
//!  FileSource (any WAV, paced) ─┐                        ┌─► Converter (24 kHz mono i16)
//!                               ├─► SyncSender<SourceEvent>
//!  CpalSource (microphone) ─────┘    (bounded; Frames, Error, Ended)
//! ```
//!
//! An [`AudioSource`] announces its [`SourceFormat`] before it starts, then delivers
//! interleaved `f32` frames in that format through a bounded channel the pipeline owns. The
//! pipeline builds a [`super::convert::Converter`] from the format, feeds the frames through
//! it, and watches the result with a [`SilenceDetector`].
//!
//! Invariants:
//! - A source never blocks an audio callback: the microphone source uses `try_send` and, when
//!   the channel is full, counts the frames it dropped and reports them as
//!   [`SourceError::Overrun`] (not fatal) as soon as there is room again. Dropped audio is
//!   always reported, never silent.
//! - Errors are values with stable codes; nothing here panics on a device, file or stream
//!   failure. After a fatal error a source sends nothing more.
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

use super::convert::{OUTPUT_RATE_HZ, int_to_f32};

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
    /// Frames were lost between the device and the pipeline; capture goes on.
    /// `dropped_frames` is `None` when the device reported the loss without a count.
    #[error("capture.overrun: audio was dropped because it was not consumed in time")]
    Overrun { dropped_frames: Option<u64> },
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
            SourceError::Overrun { .. } => "capture.overrun",
            SourceError::SilentInput => "capture.silent-input",
            SourceError::AlreadyStarted => "capture.already-started",
        }
    }

    /// Whether the source stops after this error. An overrun is recorded (as a gap) and
    /// capture continues; silent input is the pipeline's call.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, SourceError::Overrun { .. } | SourceError::SilentInput)
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

    /// Frames in the file, from its header.
    pub fn len_frames(&self) -> Option<u64> {
        self.reader.as_ref().map(|r| u64::from(r.duration()))
    }
}

impl AudioSource for FileSource {
    fn format(&self) -> SourceFormat {
        self.format
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
            if factor > 0.0 {
                let due = Duration::from_secs_f64(
                    sent_frames as f64 / f64::from(format.rate_hz) / factor,
                );
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    sleep_unless_stopped(wait, stop);
                }
            }
        }
        if ended {
            deliver(events, SourceEvent::Ended, stop);
            return;
        }
    }
}

/// Sends `event`, waiting for room while not stopped. False if stopped or disconnected.
fn deliver(events: &SyncSender<SourceEvent>, mut event: SourceEvent, stop: &AtomicBool) -> bool {
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

fn sleep_unless_stopped(wait: Duration, stop: &AtomicBool) {
    let deadline = Instant::now() + wait;
    while !stop.load(Ordering::SeqCst) {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return;
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
pub use mic::{CpalSource, input_devices};

#[cfg(feature = "app")]
mod mic {
    use std::sync::mpsc::{SyncSender, TrySendError};

    use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
    use cpal::{BufferSize, ErrorKind, FromSample, SampleFormat, SizedSample, SupportedBufferSize};

    use super::{AudioSource, SourceError, SourceEvent, SourceFormat};

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
        stream: Option<cpal::Stream>,
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
                stream: None,
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
            let stream = match build_any(&self.device, self.config.sample_format(), config, &events)
            {
                Err(_) if fixed => {
                    config.buffer_size = BufferSize::Default;
                    build_any(&self.device, self.config.sample_format(), config, &events)
                }
                other => other,
            }?;
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
        events: &SyncSender<SourceEvent>,
    ) -> Result<cpal::Stream, SourceError> {
        let events = events.clone();
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

    /// The data callback's state: the sender and frames dropped while the channel was full.
    struct Feed {
        events: SyncSender<SourceEvent>,
        channels: usize,
        dropped_frames: u64,
    }

    impl Feed {
        fn deliver(&mut self, samples: Vec<f32>) {
            if self.dropped_frames > 0 {
                let report = SourceEvent::Error(SourceError::Overrun {
                    dropped_frames: Some(self.dropped_frames),
                });
                match self.events.try_send(report) {
                    Ok(()) => self.dropped_frames = 0,
                    Err(TrySendError::Full(_)) => {
                        self.dropped_frames += (samples.len() / self.channels) as u64;
                        return;
                    }
                    Err(TrySendError::Disconnected(_)) => return,
                }
            }
            let frames = (samples.len() / self.channels) as u64;
            if let Err(TrySendError::Full(_)) = self.events.try_send(SourceEvent::Frames(samples)) {
                self.dropped_frames += frames;
            }
        }
    }

    fn build<T>(
        device: &cpal::Device,
        config: cpal::StreamConfig,
        events: SyncSender<SourceEvent>,
    ) -> Result<cpal::Stream, cpal::Error>
    where
        T: SizedSample + Send + 'static,
        f32: FromSample<T>,
    {
        let errors = events.clone();
        let mut feed = Feed {
            events,
            channels: usize::from(config.channels.max(1)),
            dropped_frames: 0,
        };
        device.build_input_stream::<T, _, _>(
            config,
            move |data: &[T], _: &cpal::InputCallbackInfo| {
                feed.deliver(data.iter().map(|&s| f32::from_sample_(s)).collect());
            },
            move |err: cpal::Error| {
                let Some(error) = stream_error(&err) else {
                    return;
                };
                if error.is_fatal() {
                    // Never block the audio thread; a fatal error must still arrive, so a
                    // helper waits for room (or for the receiver to go away).
                    let errors = errors.clone();
                    let _ = std::thread::Builder::new()
                        .name("persyk-capture-error".into())
                        .spawn(move || {
                            let _ = errors.send(SourceEvent::Error(error));
                        });
                } else {
                    let _ = errors.try_send(SourceEvent::Error(error));
                }
            },
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
            ErrorKind::Xrun => Some(SourceError::Overrun {
                dropped_frames: None,
            }),
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
}
