//! Frame time of the app's window with a 10-minute transcript on screen, beside baselines
//! measured in the same run.
//!
//! A 10-minute dictation at 150 words per minute is 1,500 words; at ~12 words per utterance
//! that is 125 canonical messages (two gaps, one provisional item). The window is 520×600
//! points like the real one. Each frame is a full egui pass of `PersykUi::ui` (layout) plus
//! tessellation into meshes — the CPU side of a frame; the GPU upload and draw are not
//! included (they are the same for any egui app of this size).
//!
//! Baselines: (1) the same window idle (no recording); (2) the cheapest way to show the same
//! text: one label with all of it in a scroll area.
//!
//! Run: `cargo bench --bench app`. Nothing is asserted.

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use eframe::egui;
use persyk::app::backend::{BackendConfig, BackendHandle, KeyStore, Microphone};
use persyk::app::effects::Effects;
use persyk::app::model::{AudioOrigin, Live, Update, Waker};
use persyk::app::ui::PersykUi;
use persyk::capture::pipeline::SourceKind;
use persyk::capture::source::AudioSource;
use persyk::realtime::engine::{EngineState, EngineView, PublishedMessage};
use persyk::realtime::ordering::Speaker;
use persyk::settings::Settings;

struct NoMic;
impl Microphone for NoMic {
    fn open(&self, _: Option<&str>, _: u32) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        Err("bench.no-microphone".into())
    }
}

struct NoKeys;
impl KeyStore for NoKeys {
    fn get(&self) -> Result<String, String> {
        Ok("sk-bench".into())
    }
    fn set(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn delete(&self) -> Result<(), String> {
        Ok(())
    }
}

struct NoEffects;
impl Effects for NoEffects {
    fn copy(&mut self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn notify(&mut self, _: &str, _: &str) {}
}

fn new_ui() -> PersykUi {
    let dir = std::env::temp_dir().join(format!("persyk-bench-app-{}", std::process::id()));
    let mut settings = Settings::default();
    settings.sessions.directory = Some(dir.clone());
    let backend = BackendHandle::spawn(
        BackendConfig {
            settings_path: None,
            dev: true,
            microphone: Arc::new(NoMic),
            keys: Arc::new(NoKeys),
            replay_factor: 0.0,
        },
        settings.clone(),
        Waker::new(),
    )
    .expect("backend");
    PersykUi::new(backend, Box::new(NoEffects), Waker::new(), settings, true)
}

fn raw_input() -> egui::RawInput {
    egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(520.0, 600.0),
        )),
        ..Default::default()
    }
}

/// Median and 95th percentile time (µs) of `frames` frames drawn by `draw`, after 30
/// warm-up frames, each a full pass plus tessellation.
fn frame_times(mut draw: impl FnMut(&mut egui::Ui), frames: usize) -> (f64, f64) {
    let ctx = egui::Context::default();
    let mut times = Vec::with_capacity(frames);
    for i in 0..frames + 30 {
        let start = Instant::now();
        let out = ctx.run_ui(raw_input(), &mut draw);
        std::hint::black_box(ctx.tessellate(out.shapes, out.pixels_per_point));
        if i >= 30 {
            times.push(start.elapsed());
        }
    }
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (
        us(times[times.len() / 2]),
        us(times[times.len() * 95 / 100]),
    )
}

fn main() {
    let frames: usize = std::env::var("PERSYK_BENCH_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let texts = support::sentences(125, 12, 0x5eed);
    let words: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    let view = EngineView {
        state: EngineState::Streaming,
        provisional: vec![("item_live".into(), "and the last words are still".into())],
        messages: texts
            .iter()
            .enumerate()
            .map(|(i, t)| PublishedMessage {
                entry_id: format!("entry-{i}"),
                item_id: format!("item_{i}"),
                speaker: Speaker::User,
                text: t.clone(),
                removed: i % 40 == 39,
            })
            .collect(),
        gaps: 2,
        gap_at: vec![40, 90],
    };

    // The window while recording, 10 minutes in.
    let mut live_ui = new_ui();
    let (_tx, rx) = tokio::sync::watch::channel(view);
    live_ui.apply(Update::Started {
        session: PathBuf::from("/tmp/persyk-bench-session"),
        origin: AudioOrigin::Microphone,
        live: Live {
            view: rx,
            level: Arc::new(AtomicU32::new(0.1f32.to_bits())),
        },
    });
    let live = frame_times(|ui| live_ui.ui(ui), frames);

    // Baseline 1: the same window, idle.
    let mut idle_ui = new_ui();
    let idle = frame_times(|ui| idle_ui.ui(ui), frames);

    // Baseline 2: one label with the same text.
    let all = texts.join(" ");
    let label = frame_times(
        |ui| {
            egui::ScrollArea::vertical()
                .stick_to_bottom(true)
                .show(ui, |ui| ui.label(&all));
        },
        frames,
    );

    println!("app frame (layout + tessellation, 520x600 pt, {frames} frames after 30 warm-up)");
    println!(
        "  10-minute transcript ({} messages, {words} words): median {:>8.1} µs  p95 {:>8.1} µs",
        texts.len(),
        live.0,
        live.1
    );
    println!(
        "  baseline: idle window                          median {:>8.1} µs  p95 {:>8.1} µs",
        idle.0, idle.1
    );
    println!(
        "  baseline: one label, same text                 median {:>8.1} µs  p95 {:>8.1} µs",
        label.0, label.1
    );
    println!(
        "  ratio transcript / one label: {:.2}x; frame budget at 60 Hz: 16,667 µs",
        live.0 / label.0
    );
}
