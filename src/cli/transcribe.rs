//! `persyk transcribe FILE.wav [--provider openai|local] [--model NAME|PATH] [--provider-url URL]
//! [--root DIR] [--mode M] [--realtime-factor X]`.
//!
//! With `--provider local` the file goes through the same capture pipeline (WAV asset,
//! utterances) to on-device recognition, unpaced by default; see [`super::local_cmd`].

use std::path::{Path, PathBuf};

use persyk::capture::pipeline::{self, SourceKind};
use persyk::capture::source::{AudioSource, FileSource};
use persyk::realtime::endpoint::check_provider_url;
use persyk::realtime::protocol::{Mode, Settings};
use persyk::session::store::{Continuation, Roots};
use persyk::session::{LeafSelector, Store};
use persyk::settings::{self, RecognitionEngine, Settings as UserSettings};

use super::{EXIT_CANNOT_RUN, EXIT_VIOLATION};

pub struct Args<'a> {
    pub file: &'a Path,
    pub provider_url: Option<&'a str>,
    pub root: Option<&'a Path>,
    pub mode: Mode,
    /// `None`: 1 (real time) with openai, 0 (as fast as recognition goes) with local.
    pub realtime_factor: Option<f64>,
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
}

/// `--realtime-factor` besides 0 (as fast as possible): from a hundredth of real time to a
/// thousand times faster.
pub const REALTIME_FACTOR_RANGE: std::ops::RangeInclusive<f64> = 0.01..=1000.0;

/// The stable code of a refused argument value.
pub const INVALID_ARGUMENT: &str = "cli.invalid-argument";

/// Prints a refused argument (`persyk: cli.invalid-argument: FLAG must be …`) and returns the
/// exit code for it. The message names the flag and the accepted range, never the value.
pub fn refuse(flag: &str, accepted: &str) -> u8 {
    eprintln!("persyk: {INVALID_ARGUMENT}: {flag} must be {accepted}");
    EXIT_CANNOT_RUN
}

/// Refuses numeric arguments outside their ranges before anything runs.
fn validate(args: &Args<'_>) -> Result<(), u8> {
    let f = args.realtime_factor.unwrap_or(0.0);
    if f != 0.0 && !REALTIME_FACTOR_RANGE.contains(&f) {
        return Err(refuse(
            "--realtime-factor",
            "0 (as fast as possible) or between 0.01 and 1000",
        ));
    }
    Ok(())
}

pub fn run(args: Args<'_>) -> u8 {
    if let Err(code) = validate(&args) {
        return code;
    }
    match super::local_cmd::engine(args.provider) {
        Ok(RecognitionEngine::Local) => return run_local(&args),
        Ok(RecognitionEngine::Openai) => {}
        Err(code) => return code,
    }
    let api_key = match persyk::credentials::api_key() {
        Ok((key, _)) => key,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    // Before anything is created: an unusable or insecure provider URL stops here.
    let provider = match provider_settings(args.mode, args.provider_url) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let source = match FileSource::open(args.file, args.realtime_factor.unwrap_or(1.0)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("persyk: {}: {e}", args.file.display());
            return EXIT_CANNOT_RUN;
        }
    };
    let source: Box<dyn AudioSource> = Box::new(source);
    let roots = match roots(args.root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let store = Store::new(roots);
    let handle = match store.create_session() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    eprintln!("persyk: session {}", handle.dir().display());
    let continuation = match handle.continuation(&LeafSelector::Default) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let result = runtime.block_on(pipeline::record(
        continuation,
        provider,
        api_key,
        source,
        SourceKind::Replay,
        stop_rx,
    ));
    match result {
        Ok(t) => {
            for line in t.report.transcript() {
                println!("{line}");
            }
            if t.input_overloads > 0 {
                eprintln!(
                    "persyk: capture.input-overload: the input reported {} overload(s); no audio was lost",
                    t.input_overloads
                );
            }
            if let Some(reason) = t.report.halted.as_ref() {
                eprintln!("persyk: the provider failed: {reason} (the session is saved)");
                return EXIT_VIOLATION;
            }
            if let Some(reason) = t.halted.as_ref() {
                eprintln!(
                    "persyk: recording stopped: {reason} (the session is saved as incomplete)"
                );
                return EXIT_VIOLATION;
            }
            if !t.report.gaps.is_empty() {
                eprintln!(
                    "persyk: {} part(s) were not transcribed",
                    t.report.gaps.len()
                );
            }
            0
        }
        Err(e) => {
            eprintln!("persyk: {e}");
            EXIT_VIOLATION
        }
    }
}

/// How long a local transcription waits for the last utterances after the file ended: the
/// file was not paced, so recognition may be well behind it.
const LOCAL_FILE_DRAIN: std::time::Duration = std::time::Duration::from_secs(600);

/// `--provider local`: the file through the pipeline to on-device recognition.
fn run_local(args: &Args<'_>) -> u8 {
    let source = match FileSource::open(args.file, args.realtime_factor.unwrap_or(0.0)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("persyk: {}: {e}", args.file.display());
            return EXIT_CANNOT_RUN;
        }
    };
    let recognition = match super::local_cmd::setup(args.model, LOCAL_FILE_DRAIN) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let continuation = match new_continuation(args.root) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let result = runtime.block_on(pipeline::record_to(
        continuation,
        recognition,
        Box::new(source),
        SourceKind::Replay,
        stop_rx,
        pipeline::RecordOptions::default(),
    ));
    super::local_cmd::report(result)
}

/// A new session under `--root` (or the configured write root), continued from its start.
pub fn new_continuation(root: Option<&Path>) -> Result<Continuation, u8> {
    let fail = |e: String| {
        eprintln!("persyk: {e}");
        EXIT_CANNOT_RUN
    };
    let store = Store::new(roots(root).map_err(fail)?);
    let handle = store.create_session().map_err(|e| fail(e.to_string()))?;
    eprintln!("persyk: session {}", handle.dir().display());
    handle
        .continuation(&LeafSelector::Default)
        .map_err(|e| fail(e.to_string()))
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
pub(super) fn runtime() -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|_| {
            eprintln!("persyk: could not start the async runtime");
            EXIT_CANNOT_RUN
        })
}
