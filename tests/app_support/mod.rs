//! Shared by the app's headless tests: the test doubles (audio source, key store, effects)
//! and a fixture with a temp root, the fake provider on loopback and the real backend.
#![allow(dead_code)]

pub mod real_app;
pub mod shell;
pub mod ui;
pub mod x11;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use persyk::app::backend::{BackendConfig, BackendHandle, KeyStore, Microphone};
use persyk::app::effects::Effects;
use persyk::app::model::Waker;
use persyk::app::ui::PersykUi;
use persyk::capture::source::AudioSource;
use persyk::pipeline::{SamplesSource, SourceKind};
use persyk::realtime::fake::{self, FakeServer, Scenario};
use persyk::settings::Settings;

// ---------------------------------------------------------------------------------------------
// Test doubles: the only substitutes are the audio source, the key store and the effects.

/// 24 kHz samples of a 440 Hz tone, delivered in real time.
pub struct ToneMic {
    pub seconds: f64,
}

impl Microphone for ToneMic {
    fn open(
        &self,
        _device: Option<&str>,
        _pre_roll_ms: u32,
    ) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        let n = (self.seconds * 24_000.0) as usize;
        let samples = (0..n)
            .map(|i| ((i as f64 * 440.0 * std::f64::consts::TAU / 24_000.0).sin() * 8000.0) as i16)
            .collect();
        Ok((
            Box::new(SamplesSource::new(samples, 1.0)),
            SourceKind::Replay,
        ))
    }

    fn devices(&self) -> Vec<String> {
        vec!["Tone A".into(), "USB Mic".into()]
    }
}

/// The OpenAI key, and the clean-up keys by server origin.
#[derive(Default)]
pub struct MemKeys(
    pub Mutex<Option<String>>,
    pub Mutex<std::collections::HashMap<String, String>>,
);

impl MemKeys {
    pub fn with(key: Option<&str>) -> MemKeys {
        MemKeys(Mutex::new(key.map(str::to_owned)), Mutex::default())
    }

    /// The clean-up keys kept, by origin.
    pub fn cleanup_keys(&self) -> std::collections::HashMap<String, String> {
        self.1.lock().unwrap().clone()
    }
}

impl KeyStore for MemKeys {
    fn get(&self) -> Result<String, String> {
        self.0
            .lock()
            .unwrap()
            .clone()
            .ok_or_else(|| "credentials.no-key".to_owned())
    }
    fn set(&self, key: &str) -> Result<(), String> {
        *self.0.lock().unwrap() = Some(key.to_owned());
        Ok(())
    }
    fn delete(&self) -> Result<(), String> {
        *self.0.lock().unwrap() = None;
        Ok(())
    }
    fn cleanup_key(&self, origin: &str) -> Option<String> {
        self.1.lock().unwrap().get(origin).cloned()
    }
    fn set_cleanup_key(&self, origin: &str, key: &str) -> Result<(), String> {
        let mut keys = self.1.lock().unwrap();
        if key.is_empty() {
            keys.remove(origin);
        } else {
            keys.insert(origin.to_owned(), key.to_owned());
        }
        Ok(())
    }
}

#[derive(Default, Clone)]
pub struct Recorded {
    pub copies: Arc<Mutex<Vec<String>>>,
    pub notes: Arc<Mutex<Vec<(String, String)>>>,
    /// Make the clipboard fail (a locked or missing clipboard).
    pub broken: Arc<std::sync::atomic::AtomicBool>,
    /// Notification failures to report (what a system without notifications answers).
    pub notify_failures: Arc<Mutex<Vec<String>>>,
    /// URLs the window asked the system to open.
    pub opened: Arc<Mutex<Vec<String>>>,
}

impl Effects for Recorded {
    fn copy(&mut self, text: &str) -> Result<(), String> {
        if self.broken.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("clipboard unavailable".into());
        }
        self.copies.lock().unwrap().push(text.to_owned());
        Ok(())
    }
    fn notify(&mut self, title: &str, body: &str) {
        self.notes
            .lock()
            .unwrap()
            .push((title.to_owned(), body.to_owned()));
    }
    fn failures(&mut self) -> Option<String> {
        self.notify_failures.lock().unwrap().pop()
    }
    fn open_url(&mut self, url: &str) -> Result<(), String> {
        self.opened.lock().unwrap().push(url.to_owned());
        Ok(())
    }
}

pub fn scenario(json: &str) -> Scenario {
    Scenario::from_json(json).expect("scenario")
}

/// One connection that transcribes one utterance (ending 400 ms into the audio) as `text`.
pub fn one_utterance(name: &str, text: &str) -> Scenario {
    scenario(&format!(
        r#"{{"name": "{name}", "connections": [{{
            "utterances": [{{"end_ms": 400, "transcript": "{text}", "delay_ms": 50}}],
            "close_after_commit_ms": 200}}]}}"#
    ))
}

/// Everything a test needs around one `PersykUi`.
pub struct Fixture {
    pub ui: PersykUi,
    pub effects: Recorded,
    pub keys: Arc<MemKeys>,
    pub root: PathBuf,
    pub config: PathBuf,
    pub dir: tempfile::TempDir,
    pub fake: Option<(tokio::runtime::Runtime, FakeServer)>,
}

/// A UI over the real backend: sessions in a temp root, the provider `fake_scenario` (if any)
/// on loopback, `key` in the key store, a tone of `mic_seconds` as the microphone; `edit`
/// adjusts the settings before start.
pub fn fixture(
    fake_scenario: Option<Scenario>,
    key: Option<&str>,
    mic_seconds: f64,
    edit: impl FnOnce(&mut Settings),
) -> Fixture {
    let microphone = Arc::new(ToneMic {
        seconds: mic_seconds,
    });
    fixture_with(fake_scenario, key, microphone, None, edit)
}

/// [`fixture`] with `microphone`, and with `effects` (the clipboard, notifications, paste)
/// in place of the recorder if given (the returned `Fixture::effects` then records nothing).
pub fn fixture_with(
    fake_scenario: Option<Scenario>,
    key: Option<&str>,
    microphone: Arc<dyn Microphone>,
    effects: Option<Box<dyn Effects>>,
    edit: impl FnOnce(&mut Settings),
) -> Fixture {
    fixture_full(
        fake_scenario,
        key,
        microphone,
        effects,
        persyk::app::backend::UpdateConfig::off(),
        edit,
    )
}

/// [`fixture_with`] with the update check set up as `updates` (tests/app_update.rs).
pub fn fixture_full(
    fake_scenario: Option<Scenario>,
    key: Option<&str>,
    microphone: Arc<dyn Microphone>,
    effects: Option<Box<dyn Effects>>,
    updates: persyk::app::backend::UpdateConfig,
    edit: impl FnOnce(&mut Settings),
) -> Fixture {
    fixture_in_front(
        persyk::app::frontmost::unknown(),
        fake_scenario,
        key,
        microphone,
        effects,
        updates,
        edit,
    )
}

/// [`fixture_full`] with `frontmost` telling which app is in front when a dictation starts.
pub fn fixture_in_front(
    frontmost: persyk::app::frontmost::Frontmost,
    fake_scenario: Option<Scenario>,
    key: Option<&str>,
    microphone: Arc<dyn Microphone>,
    effects: Option<Box<dyn Effects>>,
    updates: persyk::app::backend::UpdateConfig,
    edit: impl FnOnce(&mut Settings),
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    let config = dir.path().join("settings.json");
    let mut settings = Settings::default();
    settings.sessions.directory = Some(root.clone());
    // The scenarios script server-VAD turns, which `gpt-transcribe` keeps (the default
    // `gpt-live-transcribe` takes client turns).
    settings.provider.transcription_model = Some("gpt-transcribe".into());
    let fake = fake_scenario.map(|s| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(fake::spawn(s)).unwrap();
        (rt, server)
    });
    if let Some((_, server)) = &fake {
        settings.provider.base_url = Some(format!("ws://{}/v1", server.addr));
    }
    edit(&mut settings);
    let keys = Arc::new(MemKeys::with(key));
    let waker = Waker::new();
    let backend = BackendHandle::spawn(
        BackendConfig {
            settings_path: Some(config.clone()),
            dev: true,
            microphone,
            keys: keys.clone(),
            replay_factor: 4.0,
            frontmost,
            updates,
        },
        settings.clone(),
        waker.clone(),
    )
    .unwrap();
    let recorded = Recorded::default();
    let effects = effects.unwrap_or_else(|| Box::new(recorded.clone()));
    let ui = PersykUi::new(backend, effects, waker, settings, key.is_some());
    Fixture {
        ui,
        effects: recorded,
        keys,
        root,
        config,
        dir,
        fake,
    }
}
