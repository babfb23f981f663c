//! The app benches' stand-ins: no microphone, a key store that always has a key, effects
//! that do nothing. Everything else in those benches is the real app.

use persyk::app::backend::{KeyStore, Microphone};
use persyk::app::effects::Effects;
use persyk::capture::pipeline::SourceKind;
use persyk::capture::source::AudioSource;

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
