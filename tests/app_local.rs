//! The app with on-device recognition, headless (egui_kittest) over the real backend: with
//! `recognition.engine` local, a model file and no API key, dictation works — provisional
//! "transcribing…" while an utterance is recognized, then canonical text, copied on stop.
#![cfg(all(feature = "app", feature = "local"))]

mod app_support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use app_support::{MemKeys, Recorded};
use eframe::egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use persyk::app::backend::{BackendConfig, BackendHandle, Microphone};
use persyk::app::model::Waker;
use persyk::app::ui::PersykUi;
use persyk::capture::pipeline::{SamplesSource, SourceKind};
use persyk::capture::source::AudioSource;
use persyk::settings::{RecognitionEngine, Settings};

fn test_model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-model")
}

/// jfk.wav (converted to 24 kHz) after a second of silence and before a minute of it, at twice
/// real time.
struct SpeechMic;

impl Microphone for SpeechMic {
    fn open(
        &self,
        _device: Option<&str>,
        _pre_roll_ms: u32,
    ) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        let mut reader = hound::WavReader::open(test_model_dir().join("jfk.wav")).unwrap();
        let spec = reader.spec();
        let frames: Vec<f32> = reader
            .samples::<i16>()
            .map(|s| f32::from(s.unwrap()) / 32768.0)
            .collect();
        let mut conv =
            persyk::capture::convert::Converter::new(spec.sample_rate, spec.channels).unwrap();
        let mut samples = vec![0i16; 24_000];
        conv.push(&frames, &mut samples);
        conv.flush(&mut samples);
        samples.extend(std::iter::repeat_n(0i16, 24_000 * 60));
        Ok((
            Box::new(SamplesSource::new(samples, 2.0)),
            SourceKind::Replay,
        ))
    }
}

const WAIT: Duration = Duration::from_secs(60);

fn wait_until(
    harness: &mut Harness<'static, PersykUi>,
    what: &str,
    done: impl Fn(&Harness<'static, PersykUi>) -> bool,
) {
    let start = Instant::now();
    loop {
        harness.step();
        if done(harness) {
            return;
        }
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(15));
    }
}

fn click(harness: &mut Harness<'static, PersykUi>, label: &str) {
    harness.get_by_role_and_label(Role::Button, label).click();
    harness.step();
    harness.step();
}

#[test]
fn local_dictation_without_a_key_shows_provisional_then_canonical_and_copies_on_stop() {
    let model = test_model_dir().join("ggml-tiny.en.bin");
    assert!(model.exists(), "run scripts/fetch-test-model");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    let mut settings = Settings::default();
    settings.sessions.directory = Some(root.clone());
    settings.recognition.engine = RecognitionEngine::Local;
    settings.recognition.local_model = Some(model.to_string_lossy().into_owned());
    let waker = Waker::new();
    let backend = BackendHandle::spawn(
        BackendConfig {
            settings_path: Some(dir.path().join("settings.json")),
            dev: true,
            microphone: Arc::new(SpeechMic),
            keys: Arc::new(MemKeys::default()),
            replay_factor: 4.0,
        },
        settings.clone(),
        waker.clone(),
    )
    .unwrap();
    let effects = Recorded::default();
    let ui = PersykUi::new(backend, Box::new(effects.clone()), waker, settings, false);
    let mut harness = Harness::builder()
        .with_size(eframe::egui::vec2(640.0, 900.0))
        .build_ui_state(|ui, state: &mut PersykUi| state.ui(ui), ui);

    click(&mut harness, "Start dictation");
    wait_until(&mut harness, "the utterance being recognized", |h| {
        h.query_all_by_label_contains("transcribing…")
            .next()
            .is_some()
    });
    assert!(
        harness
            .query_all_by_label_contains("not yet saved")
            .next()
            .is_some()
    );
    // Provisional text has no copy or remove control.
    assert_eq!(
        harness
            .query_all_by_role_and_label(Role::Button, "Copy")
            .count(),
        0
    );
    wait_until(&mut harness, "canonical text", |h| {
        h.query_all_by_role_and_label(Role::Button, "Copy")
            .next()
            .is_some()
    });
    assert!(
        harness
            .query_all_by_label_contains("ask what you can do for your country")
            .next()
            .is_some()
    );
    assert!(harness.state().is_recording());
    click(&mut harness, "Stop dictation");
    wait_until(&mut harness, "the saved recording", |h| {
        h.query_all_by_label_contains("Saved:").next().is_some()
    });
    let copies = effects.copies.lock().unwrap().clone();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert!(
        copies[0].contains("ask not what your country can do for you"),
        "{copies:?}"
    );
    let sessions: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("session.jsonl").is_file())
        .collect();
    assert_eq!(sessions.len(), 1);
    let text = std::fs::read_to_string(sessions[0].join("session.jsonl")).unwrap();
    assert!(text.contains("\"model_change\""));
    assert!(text.contains("\"recording.finished\""));
    assert!(
        !text.contains("transcribing…"),
        "provisional text is never saved"
    );
    assert!(harness.state_mut().shutdown(Duration::from_secs(30)));
}
