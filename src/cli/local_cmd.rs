//! `--provider local` for `persyk transcribe` and `persyk dictate`: which recognizer a command
//! uses, the on-device model it loads, and what its exit code says.
//!
//! The settings' `recognition.engine` decides when `--provider` is absent. `--model` takes a
//! catalog name (resolved in the models folder by [`persyk::local::model_path`]) or a path to a ggml file; the
//! settings' `recognition.localModel` when absent. Exit codes of a local run: 0 when every
//! utterance was recognized, 1 when a gap (or a halt) was recorded, 2 when it could not run.

use std::path::PathBuf;

use persyk::capture::Transcription;
use persyk::capture::pipeline::Recognition;
use persyk::settings::{self, LocalModelChoice, RecognitionEngine, Settings as UserSettings};

use super::{EXIT_CANNOT_RUN, EXIT_VIOLATION};

/// `--provider openai|local`; the settings' engine when absent.
pub fn engine(flag: Option<&str>) -> Result<RecognitionEngine, u8> {
    match flag {
        Some("openai") => Ok(RecognitionEngine::Openai),
        Some("local") => Ok(RecognitionEngine::Local),
        Some(_) => Err(super::transcribe::refuse("--provider", "openai or local")),
        None => Ok(configured().recognition.engine),
    }
}

fn configured() -> UserSettings {
    settings::settings_path()
        .and_then(|p| UserSettings::load(&p).ok())
        .unwrap_or_default()
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
    let threads = configured()
        .recognition
        .local_threads()
        .map_err(|e| fail(e.to_string()))?;
    let model = LocalModel::load(&path).map_err(|e| fail(e.to_string()))?;
    let options = persyk::local::options_for(threads, !model.is_multilingual());
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
pub fn report(result: Result<Transcription, persyk::capture::CaptureError>) -> u8 {
    match result {
        Ok(t) => {
            for line in t.report.transcript() {
                println!("{line}");
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
