//! The app benches' stand-ins: no microphone, a key store that always has a key, effects
//! that do nothing. Everything else in those benches is the real app. `examples/screenshots`
//! uses them too (`#[path]`), so they depend on nothing else in `benches/support`.

use std::sync::Arc;

use persyk::app::backend::{BackendConfig, BackendHandle, KeyStore, Microphone};
use persyk::app::effects::Effects;
use persyk::app::model::Waker;
use persyk::app::ui::PersykUi;
use persyk::capture::source::AudioSource;
use persyk::pipeline::SourceKind;
use persyk::settings::Settings;

/// A microphone that cannot be opened (benches that never record).
pub struct NoMic;

impl Microphone for NoMic {
    fn open(&self, _: Option<&str>, _: u32) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        Err("bench.no-microphone".into())
    }
}

/// A key store holding a fixed key.
pub struct BenchKeys;

impl KeyStore for BenchKeys {
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

/// No clipboard, no notifications.
pub struct NoEffects;

impl Effects for NoEffects {
    fn copy(&mut self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn notify(&mut self, _: &str, _: &str) {}
}

/// A window over the real backend with `settings` and these stand-ins (no settings file, no
/// faster-than-real-time replay), one waker shared by both.
#[allow(dead_code)]
pub fn ui_with(settings: Settings) -> PersykUi {
    ui_with_key(settings, true)
}

/// [`ui_with`], saying whether a key is stored (`false`: the first run's welcome).
#[allow(dead_code)]
pub fn ui_with_key(settings: Settings, key_stored: bool) -> PersykUi {
    let waker = Waker::new();
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
        waker.clone(),
    )
    .expect("backend");
    PersykUi::new(backend, Box::new(NoEffects), waker, settings, key_stored)
}
