//! Hotkey → capture start latency with the start sound on vs off (issue 14: the sound must
//! never delay capture).
//!
//! The whole app path runs: a `ShellEvent::hotkey(true)` posted the way the global-hotkey
//! callback posts it, `Shell::tick` on this thread (as eframe's `logic`), the UI's `Start`,
//! the real backend (key, store, session creation with its fsyncs, the pipeline, the engine
//! connecting to the fake provider on loopback), and the start cue chosen in the same tick.
//! The microphone is a stand-in that delivers 10 ms buffers of a tone at 48 kHz, like cpal,
//! and stamps the instant its first buffer is handed to the pipeline: that instant minus the
//! hotkey's is the figure. Each recording ends by itself after half a second of audio.
//!
//! "on" and "off" are two shells that differ only in `feedback.sounds`, run alternately
//! (so drift on a shared machine hits both). Both have the same cue player: the default
//! output device when the machine has one; otherwise a stand-in that does what the real
//! player does besides the device (decode the cue, render it for 48 kHz stereo, hold for its
//! length) on the player's own thread.
//!
//! Run: `cargo bench --bench app_latency` (`PERSYK_LATENCY_STARTS` sets the starts per side,
//! default 30). Nothing is asserted.

mod support;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eframe::egui;
use persyk::app::backend::{BackendConfig, BackendHandle, Microphone};
use persyk::app::event::{Post, ShellEvent};
use persyk::app::model::Waker;
use persyk::app::shell::{Shell, ShellOptions};
use persyk::app::sounds::{self, Cue, Sounds};
use persyk::app::tray::TrayError;
use persyk::app::ui::PersykUi;
use persyk::capture::source::{AudioSource, SourceError, SourceEvent, SourceFormat};
use persyk::pipeline::SourceKind;
use persyk::realtime::fake::{self, FakeServer, Scenario};
use persyk::settings::Settings;
use support::app::{BenchKeys, NoEffects};

const WARMUP: usize = 3;
const RATE_HZ: u32 = 48_000;
/// Audio per recording: the recording ends by itself after it.
const AUDIO_MS: u64 = 500;

type Stamp = Arc<Mutex<Option<Instant>>>;

/// A microphone whose source stamps its first buffer.
struct StampMic(Stamp);

impl Microphone for StampMic {
    fn open(&self, _: Option<&str>, _: u32) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        Ok((
            Box::new(StampSource {
                first: self.0.clone(),
                stop: Arc::new(AtomicBool::new(false)),
                worker: None,
            }),
            SourceKind::Live,
        ))
    }
}

struct StampSource {
    first: Stamp,
    stop: Arc<AtomicBool>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl AudioSource for StampSource {
    fn format(&self) -> SourceFormat {
        SourceFormat {
            rate_hz: RATE_HZ,
            channels: 1,
        }
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        let (first, stop) = (self.first.clone(), self.stop.clone());
        self.worker = Some(std::thread::spawn(move || {
            let frames = RATE_HZ as usize / 100;
            let started = Instant::now();
            for n in 0..AUDIO_MS / 10 {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let buffer = (0..frames)
                    .map(|i| {
                        let t = (n as usize * frames + i) as f32 / RATE_HZ as f32;
                        (t * 440.0 * std::f32::consts::TAU).sin() * 0.25
                    })
                    .collect();
                if events.send(SourceEvent::Frames(buffer)).is_err() {
                    return;
                }
                if n == 0 {
                    *first.lock().unwrap() = Some(Instant::now());
                }
                let due = started + Duration::from_millis((n + 1) * 10);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
            let _ = events.send(SourceEvent::Ended);
        }));
        Ok(())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// One connection per recording, each transcribing its first 200 ms.
fn scenario(recordings: usize) -> Scenario {
    let one = r#"{"utterances": [{"end_ms": 200, "transcript": "Latency.", "delay_ms": 10}],
                  "close_after_commit_ms": 50}"#;
    let connections = vec![one; recordings].join(",");
    Scenario::from_json(&format!(
        r#"{{"name": "latency", "accept_timeout_ms": 600000, "connections": [{connections}]}}"#
    ))
    .expect("scenario")
}

/// A shell over the real backend; the tray is absent (as on a desktop without one).
struct Side {
    name: &'static str,
    shell: Shell,
    post: Post,
    ctx: egui::Context,
    stamp: Stamp,
    _fake: FakeServer,
    _dir: PathBuf,
    latencies_us: Vec<f64>,
}

fn side(
    name: &'static str,
    sounds_on: bool,
    rt: &tokio::runtime::Runtime,
    recordings: usize,
    player: fn(Cue),
) -> Side {
    let dir = std::env::temp_dir().join(format!(
        "persyk-bench-latency-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let fake = rt
        .block_on(fake::spawn(scenario(recordings)))
        .expect("fake");
    let mut settings = Settings::default();
    settings.sessions.directory = Some(dir.clone());
    settings.provider.transcription_model = Some("gpt-transcribe".into());
    settings.provider.base_url = Some(format!("ws://{}/v1", fake.addr));
    settings.feedback.sounds = Some(sounds_on);
    let stamp: Stamp = Arc::default();
    let waker = Waker::new();
    let backend = BackendHandle::spawn(
        BackendConfig {
            settings_path: None,
            dev: true,
            microphone: Arc::new(StampMic(stamp.clone())),
            keys: Arc::new(BenchKeys),
            replay_factor: 1.0,
            frontmost: persyk::app::frontmost::unknown(),
            updates: persyk::app::backend::UpdateConfig::off(),
        },
        settings.clone(),
        waker.clone(),
    )
    .expect("backend");
    let ui = PersykUi::new(backend, Box::new(NoEffects), waker, settings, true);
    let ctx = egui::Context::default();
    let mut shell = Shell::with_tray(
        &ctx,
        ui,
        ShellOptions {
            hidden: false,
            no_hotkey: true,
            play_sounds: false,
        },
        |_| Err(TrayError::NoHost),
    );
    shell.set_sounds(Sounds::spawn(player));
    let post = shell.poster();
    Side {
        name,
        shell,
        post,
        ctx,
        stamp,
        _fake: fake,
        _dir: dir,
        latencies_us: Vec::new(),
    }
}

impl Side {
    fn tick(&mut self) {
        let shell = &mut self.shell;
        let mut out = self
            .ctx
            .run_ui(egui::RawInput::default(), |ui| shell.tick(ui.ctx()));
        // Nothing is drawn: the font texture is not uploaded anywhere.
        out.textures_delta.clear();
    }

    /// One hotkey press → first buffer; then waits for the recording to end by itself.
    fn start_once(&mut self) -> Duration {
        *self.stamp.lock().unwrap() = None;
        let pressed = Instant::now();
        (self.post)(ShellEvent::hotkey(true));
        self.tick();
        let deadline = pressed + Duration::from_secs(10);
        let first = loop {
            if let Some(t) = *self.stamp.lock().unwrap() {
                break t;
            }
            assert!(
                Instant::now() < deadline,
                "{}: capture never started",
                self.name
            );
            std::thread::sleep(Duration::from_micros(200));
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            self.tick();
            if !self.shell.view().is_recording() {
                break;
            }
            assert!(Instant::now() < deadline, "{}: never ended", self.name);
            std::thread::sleep(Duration::from_millis(5));
        }
        first.duration_since(pressed)
    }
}

/// The cue player when there is no output device: what `play_on_default_output` does
/// besides the device.
fn stand_in_player(cue: Cue) {
    if let Some(audio) = cue.audio() {
        let rendered = sounds::render(&audio, RATE_HZ, 2);
        let length_ms = rendered.len() as u64 * 1000 / (u64::from(RATE_HZ) * 2);
        std::hint::black_box(&rendered);
        std::thread::sleep(Duration::from_millis(length_ms));
    }
}

/// Whether the default output device can tell its format (what the real player asks first).
fn has_output_device() -> bool {
    use cpal::traits::{DeviceTrait, HostTrait};
    cpal::default_host()
        .default_output_device()
        .is_some_and(|d| d.default_output_config().is_ok())
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

fn main() {
    let starts: usize = std::env::var("PERSYK_LATENCY_STARTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let device = has_output_device();
    let player: fn(Cue) = if device {
        sounds::play_on_default_output
    } else {
        stand_in_player
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let recordings = WARMUP + starts;
    let mut on = side("on", true, &rt, recordings, player);
    let mut off = side("off", false, &rt, recordings, player);
    on.tick();
    off.tick();
    for i in 0..recordings {
        for s in [&mut on, &mut off] {
            let latency = s.start_once();
            if i >= WARMUP {
                s.latencies_us.push(latency.as_secs_f64() * 1e6);
            }
        }
    }
    println!(
        "hotkey → first captured buffer, {starts} starts per side (after {WARMUP} warm-up), \
         cue player: {}",
        if device {
            "the default output device"
        } else {
            "stand-in (no output device: decode + render + hold for the cue's length)"
        }
    );
    println!("{:<12} {:>12} {:>12}", "start sound", "median", "p95");
    for s in [&mut on, &mut off] {
        s.latencies_us.sort_by(f64::total_cmp);
        println!(
            "{:<12} {:>9.2} ms {:>9.2} ms",
            s.name,
            quantile(&s.latencies_us, 0.5) / 1000.0,
            quantile(&s.latencies_us, 0.95) / 1000.0
        );
    }
    for s in [&on, &off] {
        let _ = std::fs::remove_dir_all(&s._dir);
    }
}
