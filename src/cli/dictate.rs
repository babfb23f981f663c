//! `persyk dictate [--seconds N] [--device NAME] [--root DIR] [--provider-url URL] [--mode M]
//! [--provider openai|local] [--model NAME|PATH]`:
//! dictate from the microphone into a new session until Enter (or N seconds), then print the
//! transcript. The same pipeline the menu-bar app drives.

use std::path::Path;
use std::time::Duration;

use persyk::app::permission;
use persyk::capture::preroll::{MAX_PRE_ROLL, WarmInput};
use persyk::capture::source::{AudioSource, CpalSource, input_devices};
use persyk::local::dictation;
use persyk::pipeline::{self, Recognition, SourceKind};
use persyk::realtime::protocol::Mode;
use persyk::session::{LeafSelector, Store};
use persyk::settings::{self, RecognitionEngine, Settings as UserSettings};

use super::{EXIT_CANNOT_RUN, EXIT_VIOLATION};

pub struct Args<'a> {
    pub pre_roll_ms: Option<u32>,
    pub seconds: Option<f64>,
    pub device: Option<&'a str>,
    pub list_devices: bool,
    pub root: Option<&'a Path>,
    pub provider_url: Option<&'a str>,
    pub mode: Mode,
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
}

/// `--seconds`: from a tenth of a second to a day.
pub const SECONDS_RANGE: std::ops::RangeInclusive<f64> = 0.1..=86_400.0;

/// Refuses numeric arguments outside their ranges before anything runs.
fn validate(args: &Args<'_>) -> Result<(), u8> {
    if let Some(s) = args.seconds
        && !SECONDS_RANGE.contains(&s)
    {
        return Err(super::recording::refuse(
            "--seconds",
            "between 0.1 and 86400",
        ));
    }
    if args
        .pre_roll_ms
        .is_some_and(|ms| Duration::from_millis(u64::from(ms)) > MAX_PRE_ROLL)
    {
        return Err(super::recording::refuse(
            "--pre-roll-ms",
            "between 0 (off) and 500",
        ));
    }
    Ok(())
}

pub fn run(args: Args<'_>) -> u8 {
    if let Err(code) = validate(&args) {
        return code;
    }
    if args.list_devices {
        for d in input_devices() {
            println!("{d}");
        }
        return 0;
    }
    let engine = match super::recording::engine(args.provider) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let recognition = if engine == RecognitionEngine::Local {
        // On the device: no key, no network; the model loads before the microphone opens.
        match super::recording::setup(args.model, dictation::DRAIN_DEADLINE) {
            Ok(r) => r,
            Err(code) => return code,
        }
    } else {
        // Before the microphone opens or a session exists: an insecure provider URL stops here.
        let settings = match super::recording::provider_settings(args.mode, args.provider_url) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("persyk: {e}");
                return EXIT_CANNOT_RUN;
            }
        };
        let api_key = match persyk::credentials::api_key() {
            Ok((key, _)) => key,
            Err(e) => {
                eprintln!("persyk: {e}");
                return EXIT_CANNOT_RUN;
            }
        };
        Recognition::Realtime { settings, api_key }
    };
    let configured = settings::settings_path()
        .and_then(|p| UserSettings::load(&p).ok())
        .unwrap_or_default()
        .capture;
    let pre_roll_ms = args.pre_roll_ms.unwrap_or(configured.pre_roll_ms).min(500);
    let device = args.device.or(configured.device.as_deref());
    // Before the input opens: without permission macOS records zeros and shows no prompt.
    if let Err(e) = permission::ensure_access_blocking(&permission::SystemPermission, || {
        eprintln!("persyk: waiting for microphone permission…")
    }) {
        eprintln!("persyk: {e}");
        return EXIT_CANNOT_RUN;
    }
    let source = match CpalSource::open(device) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let roots = match super::recording::roots(args.root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let mut store = Store::new(roots);
    persyk::sync::identify(&mut store);
    let mut continuation = match store
        .create_session()
        .and_then(|h| h.continuation(&LeafSelector::Default))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    eprintln!("persyk: session {}", continuation.handle().dir().display());
    if let Err(code) = super::recording::mark_device(&mut continuation) {
        return code;
    }
    let runtime = match super::recording::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    // With pre-roll the microphone is already running; the recording starts with the last
    // `pre_roll_ms` before Enter (or before the timed start).
    let mut warm = None;
    let source: Box<dyn AudioSource> = if pre_roll_ms > 0 {
        match WarmInput::start(
            Box::new(source),
            Duration::from_millis(u64::from(pre_roll_ms)),
        ) {
            Ok(w) => {
                let s = Box::new(w.recording_source());
                warm = Some(w);
                s
            }
            Err(e) => {
                eprintln!("persyk: {e}");
                return EXIT_CANNOT_RUN;
            }
        }
    } else {
        Box::new(source)
    };
    if pre_roll_ms > 0 && args.seconds.is_none() {
        eprintln!(
            "persyk: microphone ready; press Enter to start ({pre_roll_ms} ms before it are kept)"
        );
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    match args.seconds {
        Some(s) => {
            let stop_tx = stop_tx.clone();
            runtime.spawn(async move {
                tokio::time::sleep(Duration::from_secs_f64(s)).await;
                let _ = stop_tx.send(true);
            });
        }
        None => {
            eprintln!("persyk: recording; press Enter to stop");
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
                let _ = stop_tx.send(true);
            });
        }
    }
    // The provider's failure never stops the microphone; the device recognizes what the
    // provider could not, when a model resolves.
    let options = pipeline::RecordOptions {
        fallback: if engine == RecognitionEngine::Openai {
            super::recording::fallback(args.model, dictation::DRAIN_DEADLINE)
        } else {
            None
        },
        ..pipeline::RecordOptions::default()
    };
    let result = runtime.block_on(pipeline::record_to(
        continuation,
        recognition,
        source,
        SourceKind::Live,
        stop_rx,
        options,
    ));
    let code = match result {
        result if engine == RecognitionEngine::Local => super::recording::report(result),
        Ok(t) => {
            for line in t.report.transcript() {
                println!("{}", super::shown::text(line));
            }
            if t.input_overloads > 0 {
                eprintln!(
                    "persyk: capture.input-overload: the input reported {} overload(s); no audio was lost",
                    t.input_overloads
                );
            }
            let lost = super::recording::report_engine_failure(&t);
            match t.halted.as_ref() {
                Some(reason) => {
                    eprintln!("persyk: capture stopped: {reason} (the session is saved)");
                    EXIT_VIOLATION
                }
                None if lost || t.report.halted.is_some() => EXIT_VIOLATION,
                None => 0,
            }
        }
        Err(e) => {
            eprintln!("persyk: {e}");
            EXIT_VIOLATION
        }
    };
    if let Some(w) = warm {
        w.stop();
    }
    code
}
