//! `persyk transcribe FILE.wav [--provider openai|local] [--model NAME|PATH] [--provider-url URL]
//! [--root DIR] [--mode M] [--realtime-factor X]`.
//!
//! With `--provider local` the file goes through the same capture pipeline (WAV asset,
//! utterances) to on-device recognition, unpaced by default; see [`super::recording`].

use std::path::Path;

use persyk::pipeline::{self, SourceKind};
use persyk::realtime::protocol::Mode;
use persyk::session::{LeafSelector, Store};
use persyk::settings::RecognitionEngine;

use super::recording::{new_continuation, provider_settings, refuse, roots, runtime};
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
    match super::recording::engine(args.provider) {
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
    let source = match persyk::capture::open_file(args.file, args.realtime_factor.unwrap_or(1.0)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("persyk: {}: {e}", args.file.display());
            return EXIT_CANNOT_RUN;
        }
    };
    let roots = match roots(args.root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let mut store = Store::new(roots);
    persyk::sync::identify(&mut store);
    let handle = match store.create_session() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    eprintln!("persyk: session {}", handle.dir().display());
    let mut continuation = match handle.continuation(&LeafSelector::Default) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    if let Err(code) = super::recording::mark_device(&mut continuation) {
        return code;
    }
    if let Err(e) = continuation.append_one(pipeline::source_file_entry(args.file)) {
        eprintln!("persyk: {e}");
        return EXIT_CANNOT_RUN;
    }
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // The provider's failure: the device recognizes the file instead, when a model resolves.
    let options = pipeline::RecordOptions {
        fallback: super::recording::fallback(args.model, LOCAL_FILE_DRAIN),
        ..pipeline::RecordOptions::default()
    };
    let result = runtime.block_on(pipeline::record_with(
        continuation,
        provider,
        api_key,
        source,
        SourceKind::Replay,
        stop_rx,
        options,
    ));
    match result {
        Ok(t) => {
            for line in t.report.transcript() {
                println!("{line}");
            }
            if super::recording::report_engine_failure(&t) {
                return EXIT_VIOLATION;
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

/// How long a local transcription waits for the next window after the file ended (it
/// waits while windows keep finishing): the file was not paced, so recognition may be well
/// behind it. The app's file path uses the same.
const LOCAL_FILE_DRAIN: std::time::Duration = persyk::local::dictation::FILE_DRAIN_DEADLINE;

/// `--provider local`: the file through the pipeline to on-device recognition.
fn run_local(args: &Args<'_>) -> u8 {
    let source = match persyk::capture::open_file(args.file, args.realtime_factor.unwrap_or(0.0)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("persyk: {}: {e}", args.file.display());
            return EXIT_CANNOT_RUN;
        }
    };
    let recognition = match super::recording::setup(args.model, LOCAL_FILE_DRAIN) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut continuation = match new_continuation(args.root) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(e) = continuation.append_one(pipeline::source_file_entry(args.file)) {
        eprintln!("persyk: {e}");
        return EXIT_CANNOT_RUN;
    }
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let result = runtime.block_on(pipeline::record_to(
        continuation,
        recognition,
        source,
        SourceKind::Replay,
        stop_rx,
        pipeline::RecordOptions::default(),
    ));
    super::recording::report(result)
}
