//! Frame time of the app's window, page by page, with a 10-minute recording on screen and a
//! 500-session history, beside baselines measured in the same run.
//!
//! The state: a recording 10 minutes in with 600 canonical messages of 12 words (the
//! segmenter's short turns; two gaps, one provisional item) and 500 saved sessions on disk,
//! all 500 listed on the Search page (the backend's real listing, "More results" asked until
//! none follow). Each page of that one state is measured: Dictation (the live transcript,
//! the rows in view laid out), Search, Settings. The window is 520×600 points like the real
//! one, with the app's style installed. Each frame is a full egui pass of `PersykUi::ui`
//! (layout) plus tessellation into meshes — the CPU side of a frame; the GPU upload and draw
//! are not included (they are the same for any egui app of this size).
//!
//! Baselines: (1) the scenario of the first version of this bench, whose figure was 447 µs:
//! a 125-message recording on the Dictation page; (2) the window idle (no recording);
//! (3) the cheapest way to show the 600 messages' text: one label in a scroll area.
//!
//! Run: `cargo bench --bench app`. Nothing is asserted.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use eframe::egui;
use eframe::egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use persyk::app::backend::{BackendConfig, BackendHandle};
use persyk::app::model::{AudioOrigin, Live, Update, Waker};
use persyk::app::ui::{Page, PersykUi, style};
use persyk::recognize::Speaker;
use persyk::recognize::{EngineState, EngineView, PublishedMessage};
use persyk::settings::Settings;
use support::app::{BenchKeys, NoEffects, NoMic};

fn new_ui() -> PersykUi {
    new_ui_in(std::env::temp_dir().join(format!("persyk-bench-app-{}", std::process::id())))
}

/// A window over the real backend with `dir` as the sessions folder.
fn new_ui_in(dir: PathBuf) -> PersykUi {
    let mut settings = Settings::default();
    settings.sessions.directory = Some(dir.clone());
    let backend = BackendHandle::spawn(
        BackendConfig {
            settings_path: None,
            dev: true,
            microphone: Arc::new(NoMic),
            keys: Arc::new(BenchKeys),
            replay_factor: 0.0,
            frontmost: persyk::app::frontmost::unknown(),
            updates: persyk::app::backend::UpdateConfig::off(),
        },
        settings.clone(),
        Waker::new(),
    )
    .expect("backend");
    PersykUi::new(backend, Box::new(NoEffects), Waker::new(), settings, true)
}

/// Writes `count` saved sessions of one or two short messages under `root`.
fn write_history(root: &Path, count: usize) {
    let texts = support::sentences(count * 2, 10, 0x415);
    for i in 0..count {
        let dir = root.join(format!("s{i:04}"));
        std::fs::create_dir_all(&dir).expect("session dir");
        let id = format!("00000000-0000-4000-8000-{i:012}");
        let created = format!(
            "2026-{:02}-{:02}T{:02}:{:02}:00.000Z",
            1 + (i / 28) % 12,
            1 + i % 28,
            8 + i % 12,
            i % 60
        );
        let mut out = serde_json::json!({
            "type": "session", "version": 1, "id": id, "timestamp": created
        })
        .to_string();
        out.push('\n');
        let mut parent = serde_json::Value::Null;
        for (j, text) in texts[i * 2..i * 2 + 1 + i % 2].iter().enumerate() {
            let mid = format!("{id}-m{j}");
            let line = serde_json::json!({
                "type": "message", "id": mid, "parentId": parent, "timestamp": created,
                "message": {"role": "user", "timestamp": 1,
                            "content": [{"type": "text", "text": text}]}
            });
            out.push_str(&line.to_string());
            out.push('\n');
            parent = serde_json::Value::String(mid);
        }
        std::fs::write(dir.join("session.jsonl"), out).expect("session file");
    }
}

/// A recording `messages` canonical messages long (two gaps, one provisional item).
fn live_view(texts: &[String]) -> EngineView {
    EngineView {
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
        gap_at: vec![texts.len() / 3, texts.len() * 2 / 3],
        heard_ms: 0,
    }
}

/// Shows `view` as the running recording of `ui`; the sender keeps it alive.
fn start_recording(ui: &mut PersykUi, view: EngineView) -> tokio::sync::watch::Sender<EngineView> {
    let (tx, rx) = tokio::sync::watch::channel(view);
    ui.apply(Update::Started {
        session: PathBuf::from("/tmp/persyk-bench-session"),
        origin: AudioOrigin::Microphone,
        live: Live {
            view: rx,
            level: Arc::new(AtomicU32::new(0.1f32.to_bits())),
        },
        cleanup: None,
        app: None,
    });
    tx
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
    style::install(&ctx);
    let mut times = Vec::with_capacity(frames);
    for i in 0..frames + 30 {
        let start = Instant::now();
        let mut out = ctx.run_ui(raw_input(), &mut draw);
        std::hint::black_box(ctx.tessellate(out.shapes, out.pixels_per_point));
        // No renderer takes the font atlas updates here.
        out.textures_delta.clear();
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
    let texts = support::sentences(600, 12, 0x5eed);
    let words: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    const SESSIONS: usize = 500;

    // One state: the recording and the history, the Search page listing all 500 sessions
    // (set up through the window as a user would: open Search, "More results" until none).
    let dir = std::env::temp_dir().join(format!("persyk-bench-app-history-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("history dir");
    write_history(&dir, SESSIONS);
    let mut state = new_ui_in(dir.clone());
    let _recording = start_recording(&mut state, live_view(&texts));
    state.show_page(Page::Search);
    let mut harness = Harness::builder()
        .with_size(egui::vec2(520.0, 60_000.0))
        .with_context_setup(style::install)
        // The word list has scripts egui's default fonts lack (drawn as boxes in the app).
        .allow_missing_glyphs()
        .build_ui_state(|ui, s: &mut PersykUi| s.ui(ui), state);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        harness.step();
        let rows = harness
            .query_all_by_role_and_label(Role::Button, "Open")
            .count();
        if rows >= SESSIONS {
            break;
        }
        // Asked again while the last answer is on its way: a disabled button ignores it.
        if let Some(more) = harness
            .query_all_by_role_and_label(Role::Button, "More results")
            .next()
        {
            more.click_accesskit();
        }
        assert!(
            Instant::now() < deadline,
            "the history listed only {rows} rows"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let state = harness.state_mut();
    let search = frame_times(|ui| state.ui(ui), frames);
    state.show_page(Page::Dictation);
    let dictation = frame_times(|ui| state.ui(ui), frames);
    state.show_page(Page::Settings);
    let settings = frame_times(|ui| state.ui(ui), frames);

    // Baseline 1: the first version's scenario (447 µs then): 125 messages, Dictation page.
    let old_texts = support::sentences(125, 12, 0x5eed);
    let mut old_ui = new_ui();
    let _old_recording = start_recording(&mut old_ui, live_view(&old_texts));
    let old = frame_times(|ui| old_ui.ui(ui), frames);

    // Baseline 2: the window idle.
    let mut idle_ui = new_ui();
    let idle = frame_times(|ui| idle_ui.ui(ui), frames);

    // Baseline 3: one label with the 600 messages' text.
    let all = texts.join(" ");
    let label = frame_times(
        |ui| {
            egui::ScrollArea::vertical()
                .stick_to_bottom(true)
                .show(ui, |ui| ui.label(&all));
        },
        frames,
    );
    drop(harness);
    let _ = std::fs::remove_dir_all(&dir);

    let row = |name: &str, (median, p95): (f64, f64)| {
        println!("  {name:<58} median {median:>8.1} µs  p95 {p95:>8.1} µs");
    };
    println!("app frame (layout + tessellation, 520x600 pt, {frames} frames after 30 warm-up)");
    println!(
        "  state: a 10-minute recording ({} messages, {words} words) and {SESSIONS} saved sessions",
        texts.len()
    );
    row(
        "Dictation page (live transcript, rows in view laid out)",
        dictation,
    );
    row(&format!("Search page ({SESSIONS} rows listed)"), search);
    row("Settings page", settings);
    row(
        "baseline: 125-message recording, Dictation (was 447 µs)",
        old,
    );
    row("baseline: idle window", idle);
    row("baseline: one label, the 600 messages' text", label);
    println!(
        "  ratio Dictation / one label: {:.2}x; frame budget at 60 Hz: 16,667 µs",
        dictation.0 / label.0
    );
}
