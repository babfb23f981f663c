//! What the recording commands (`persyk transcribe`, `persyk dictate`) share: refused
//! arguments, the roots and the new session, the provider settings, the runtime, and which
//! recognizer a command uses — the on-device model it loads and what its exit code says.
//!
//! The settings' `recognition.engine` decides when `--provider` is absent. `--model` takes a
//! catalog name (resolved in the models folder by [`persyk::local::model_path`]) or a path to a ggml file; the
//! settings' `recognition.localModel` when absent. Exit codes of a local run: 0 when every
//! utterance was recognized, 1 when a gap (or a halt) was recorded, 2 when it could not run.

use std::path::{Path, PathBuf};

use persyk::endpoint::check_provider_url;
use persyk::local::models::LocalModelChoice;
use persyk::pipeline::{self, Recognition, Transcription};
use persyk::realtime::protocol::{Mode, Settings};
use persyk::session::store::{Continuation, Roots};
use persyk::session::{LeafSelector, Store};
use persyk::settings::{self, RecognitionEngine, Settings as UserSettings};

use super::{EXIT_CANNOT_RUN, EXIT_VIOLATION};

/// `--provider openai|local`; the settings' engine when absent.
pub fn engine(flag: Option<&str>) -> Result<RecognitionEngine, u8> {
    match flag {
        Some("openai") => Ok(RecognitionEngine::Openai),
        Some("local") => Ok(RecognitionEngine::Local),
        Some(_) => Err(refuse("--provider", "openai or local")),
        None => Ok(configured().recognition.engine),
    }
}

/// The settings file's settings, with the ones shared between Macs when sharing is on.
fn configured() -> UserSettings {
    let own = settings::settings_path()
        .and_then(|p| UserSettings::load(&p).ok())
        .unwrap_or_default();
    persyk::sync::shared::with_shared(own, settings::is_dev())
}

/// The model file: `--model NAME|PATH`, else the settings' choice.
fn model_file(flag: Option<&str>) -> Result<PathBuf, String> {
    let choice = match flag {
        Some(m) if m.contains('/') || m.contains('\\') || m.ends_with(".bin") => {
            LocalModelChoice::File(PathBuf::from(m))
        }
        Some(name) => LocalModelChoice::Catalog(name.to_owned()),
        None => configured()
            .recognition
            .local_model()
            .map_err(|e| e.to_string())?,
    };
    persyk::local::model_path(&choice).map_err(|e| match &choice {
        LocalModelChoice::Catalog(name) => {
            format!("{e} (get it with `persyk models download {name}`, or pass --model PATH)")
        }
        LocalModelChoice::File(_) => e.to_string(),
    })
}

/// Loads the model and makes the setup of one recording (threads from the settings).
#[cfg(feature = "local")]
pub fn setup(
    model_flag: Option<&str>,
    drain_deadline: std::time::Duration,
) -> Result<Recognition, u8> {
    use persyk::local::whisper::{self, LocalModel};
    let fail = |e: String| {
        eprintln!("persyk: {e}");
        EXIT_CANNOT_RUN
    };
    let path = model_file(model_flag).map_err(fail)?;
    let settings = configured();
    let model = LocalModel::load(&path).map_err(|e| fail(e.to_string()))?;
    // Threads, language, translation, and "Words Persyk should know" when asked.
    let options = settings
        .recognition
        .local_options(&settings.provider.keywords, model.is_multilingual())
        .map_err(|e| fail(e.to_string()))?;
    let mut setup =
        whisper::setup(&model, options, drain_deadline).map_err(|e| fail(e.to_string()))?;
    // The test seam of debug builds: every utterance fails (a gap, exit 1).
    if cfg!(debug_assertions)
        && std::env::var_os("PERSYK_TEST_LOCAL_FAIL").is_some_and(|v| v == "1")
    {
        setup.recognizer = Box::new(persyk::local::dictation::FailingRecognizer);
    }
    Ok(Recognition::Local(setup))
}

/// The on-device fallback of a Realtime recording: the model of `--model` or the settings,
/// loaded only if the provider fails. `None` when no model file resolves now.
#[cfg(feature = "local")]
pub fn fallback(
    model_flag: Option<&str>,
    drain_deadline: std::time::Duration,
) -> Option<pipeline::Fallback> {
    let path = model_file(model_flag).ok()?;
    let settings = configured();
    Some(Box::new(move || {
        use persyk::local::whisper::{self, LocalModel};
        let model = LocalModel::load(&path).ok()?;
        let options = settings
            .recognition
            .local_options(&settings.provider.keywords, model.is_multilingual())
            .ok()?;
        whisper::setup(&model, options, drain_deadline).ok()
    }))
}

/// Without the `local` feature there is no on-device fallback.
#[cfg(not(feature = "local"))]
pub fn fallback(
    _model_flag: Option<&str>,
    _drain_deadline: std::time::Duration,
) -> Option<pipeline::Fallback> {
    None
}

/// Prints what the provider's failure meant for a Realtime recording; `true` when the audio
/// it did not recognize is lost to this run (saved whole as incomplete).
pub fn report_engine_failure(t: &Transcription) -> bool {
    let Some(code) = t.engine_failure.as_deref() else {
        return false;
    };
    let sentence = persyk::realtime::engine::failure_sentence(code);
    if t.recovered_locally {
        eprintln!("persyk: {code}: {sentence}; recognized on this device instead");
        false
    } else {
        eprintln!(
            "persyk: {code}: {sentence}; the recording is saved whole as incomplete \
             (transcribe its WAV again later)"
        );
        true
    }
}

/// Without the `local` feature there is no on-device recognition.
#[cfg(not(feature = "local"))]
pub fn setup(
    _model_flag: Option<&str>,
    _drain_deadline: std::time::Duration,
) -> Result<Recognition, u8> {
    let _ = model_file;
    eprintln!("persyk: {}", persyk::local::LocalError::Unavailable);
    Err(EXIT_CANNOT_RUN)
}

/// Prints the transcript and what went wrong; the exit code of a local run.
pub fn report(result: Result<Transcription, persyk::pipeline::CaptureError>) -> u8 {
    match result {
        Ok(t) => {
            for line in t.report.transcript() {
                println!("{}", super::shown::text(line));
            }
            if let Some(reason) = t.halted.as_ref().or(t.report.halted.as_ref()) {
                eprintln!(
                    "persyk: recording stopped: {reason} (the session is saved as incomplete)"
                );
                return EXIT_VIOLATION;
            }
            if !t.report.gaps.is_empty() {
                for gap in &t.report.gaps {
                    eprintln!("persyk: not transcribed: {}", gap.reason);
                }
                return EXIT_VIOLATION;
            }
            0
        }
        Err(e) => {
            eprintln!("persyk: {e}");
            EXIT_VIOLATION
        }
    }
}

/// The stable code of a refused argument value.
pub const INVALID_ARGUMENT: &str = "cli.invalid-argument";

/// Prints a refused argument (`persyk: cli.invalid-argument: FLAG must be …`) and returns the
/// exit code for it. The message names the flag and the accepted range, never the value.
pub fn refuse(flag: &str, accepted: &str) -> u8 {
    eprintln!("persyk: {INVALID_ARGUMENT}: {flag} must be {accepted}");
    EXIT_CANNOT_RUN
}

/// A new session under `--root` (or the configured write root), continued from its start,
/// with the entry that names this device ([`mark_device`]).
pub fn new_continuation(root: Option<&Path>) -> Result<Continuation, u8> {
    let fail = |e: String| {
        eprintln!("persyk: {e}");
        EXIT_CANNOT_RUN
    };
    let mut store = Store::new(roots(root).map_err(fail)?);
    persyk::sync::identify(&mut store);
    let handle = store.create_session().map_err(|e| fail(e.to_string()))?;
    eprintln!("persyk: session {}", handle.dir().display());
    let mut continuation = handle
        .continuation(&LeafSelector::Default)
        .map_err(|e| fail(e.to_string()))?;
    mark_device(&mut continuation)?;
    Ok(continuation)
}

/// Appends the `persyk.device` entry (which Mac records this) to a new session. Without a
/// config folder to keep the device id in, the session is recorded without it (said on
/// stderr); a failed append fails like any other.
pub fn mark_device(continuation: &mut Continuation) -> Result<(), u8> {
    match persyk::sync::Device::this(&configured()) {
        Ok(device) => persyk::sync::claim_recording(continuation, &device)
            .and_then(|()| continuation.append_one(device.entry()))
            .map(drop)
            .map_err(|e| {
                eprintln!("persyk: {e}");
                EXIT_CANNOT_RUN
            }),
        Err(e) => {
            eprintln!(
                "persyk: {}: the session does not say which device recorded it",
                e.code()
            );
            Ok(())
        }
    }
}

/// The roots for a new session: `--root DIR` or the configured ones.
pub fn roots(root: Option<&Path>) -> Result<Roots, String> {
    match root {
        Some(r) => {
            let abs = if r.is_absolute() {
                r.to_path_buf()
            } else {
                std::env::current_dir()
                    .map(|d| d.join(r))
                    .unwrap_or_else(|_| PathBuf::from(r))
            };
            Roots::new(abs, Vec::new()).map_err(|e| e.to_string())
        }
        None => settings::settings_path()
            .map(|p| UserSettings::load(&p))
            .unwrap_or_else(|| Ok(UserSettings::default()))
            .and_then(|s| s.roots(settings::is_dev()))
            .map_err(|e| e.to_string()),
    }
}

/// The provider settings of the settings file (model, language, base URL), with `mode` and
/// `--provider-url` from the command line on top; refused (`provider.insecure-url`) when it
/// would send the key unencrypted to a remote host.
pub fn provider_settings(mode: Mode, url: Option<&str>) -> Result<Settings, String> {
    let configured = match settings::settings_path() {
        Some(p) => UserSettings::load(&p).map_err(|e| e.to_string())?,
        None => UserSettings::default(),
    };
    let configured = persyk::sync::shared::with_shared(configured, settings::is_dev());
    let mut provider = configured.provider().map_err(|e| e.to_string())?;
    provider.mode = mode;
    if let Some(url) = url {
        provider.base_url = url.to_owned();
    }
    // The key travels in the upgrade request: never unencrypted to a remote host.
    check_provider_url(&provider.url()).map_err(|e| e.to_string())?;
    if mode == Mode::Transcription
        && let Some(day) = persyk::realtime::protocol::retires_on(&provider.transcription_model)
    {
        eprintln!(
            "persyk: warning: provider.legacy-model: {} stops working on {day}; switch with \
             \"transcriptionModel\": \"{}\" in the provider section of the settings file",
            provider.transcription_model,
            persyk::realtime::protocol::DEFAULT_TRANSCRIPTION_MODEL
        );
    }
    Ok(provider)
}

/// The runtime a recording runs on (two workers), or the exit code when it cannot start.
pub fn runtime() -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|_| {
            eprintln!("persyk: could not start the async runtime");
            EXIT_CANNOT_RUN
        })
}
