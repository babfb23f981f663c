//! On-device dictation latency and accuracy, each figure beside its baseline from the same run.
//!
//! With the test model (tiny.en, `scripts/fetch-test-model`) and jfk.wav repeated with one
//! second pauses (a 12 s and a 60 s dictation):
//!
//! 1. **stop → text available**, live path: the recording is fed in real time through the
//!    real pipeline (paced in-memory source, `SourceKind::Live`, WAV asset, segmenter,
//!    recognizer thread); the stop comes when the dictation's audio has been delivered, and
//!    the figure is the time until the pipeline returns (last canonical message and
//!    `recording.finished` written).
//!    **Baseline:** recognize the whole recording after stop (whisper.cpp on the full clip,
//!    the same model and threads).
//! 2. **WER** of the live path's transcript (all messages joined) against the reference
//!    text, beside the WER of whisper.cpp on the whole clip.
//!
//! Run: `cargo bench --bench local` (about 2 minutes; not part of CI), or `cargo bench
//! --profile dev --bench local` to reuse the test build (whisper.cpp is optimized there too).
//! Nothing is asserted.

use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use persyk::capture::pipeline::{
    self, LiveTap, Recognition, RecordOptions, SamplesSource, SourceKind,
};
use persyk::local::whisper::{self, LocalModel};
use persyk::local::{Verdict, dictation, options_for};
use persyk::session::{LeafSelector, Store, store::Roots};

#[path = "../tests/support/mod.rs"]
mod support;

use support::{JFK, test_model_dir, wer};

const RATE: usize = 24_000;

fn jfk_24k() -> Vec<i16> {
    support::jfk_as_recorded()
}

/// Quiet room noise (about -66 dBFS), so a live source is never digitally silent.
fn room(n: usize, seed: &mut u64) -> impl Iterator<Item = i16> + '_ {
    (0..n).map(move |_| {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((*seed >> 33) % 33) as i16 - 16
    })
}

struct Live {
    stop_to_text: Duration,
    transcript: String,
    messages: usize,
}

/// `audio` through the real pipeline at real time; stop once it has all been delivered
/// (a trailing stretch of room noise keeps the source going past the stop).
fn live(model: &LocalModel, audio: &[i16]) -> Live {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new(Roots::new(dir.path().to_path_buf(), Vec::new()).expect("roots"));
    let handle = store.create_session().expect("session");
    let continuation = handle.continuation(&LeafSelector::Default).expect("cont");
    let setup =
        whisper::setup(model, options_for(None, true), dictation::DRAIN_DEADLINE).expect("setup");
    let mut seed = 11;
    let mut samples = audio.to_vec();
    samples.extend(room(RATE * 30, &mut seed));
    let audio_secs = audio.len() as f64 / RATE as f64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (view_tx, _view_rx) = tokio::sync::oneshot::channel();
    let (_removals_tx, removals) = tokio::sync::mpsc::channel(1);
    let tap = LiveTap {
        view: view_tx,
        level: Arc::new(AtomicU32::new(0)),
        removals,
    };
    rt.block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let started = Instant::now();
        let recording = tokio::spawn(pipeline::record_to(
            continuation,
            Recognition::Local(setup),
            Box::new(SamplesSource::new(samples, 1.0)),
            SourceKind::Live,
            stop_rx,
            RecordOptions {
                tap: Some(tap),
                ..RecordOptions::default()
            },
        ));
        tokio::time::sleep_until(
            tokio::time::Instant::from_std(started) + Duration::from_secs_f64(audio_secs),
        )
        .await;
        let stopped = Instant::now();
        let _ = stop_tx.send(true);
        let t = recording.await.expect("task").expect("recording");
        let stop_to_text = stopped.elapsed();
        assert!(t.halted.is_none(), "halted: {:?}", t.halted);
        Live {
            stop_to_text,
            transcript: t.report.transcript().join(" "),
            messages: t.report.transcript().len(),
        }
    })
}

/// The baseline: whisper.cpp on the whole clip after stop.
fn whole(model: &LocalModel, audio: &[i16]) -> (Duration, String) {
    let mut recognizer = model.recognizer(options_for(None, true)).expect("state");
    let started = Instant::now();
    let text = match recognizer.transcribe(audio).expect("recognize") {
        Verdict::Text(t) => t,
        Verdict::NoSpeech => String::new(),
    };
    (started.elapsed(), text)
}

fn main() {
    let path = test_model_dir().join("ggml-tiny.en.bin");
    let model = LocalModel::load(&path).expect("run scripts/fetch-test-model");
    let jfk = jfk_24k();
    let threads = options_for(None, true).threads;
    println!(
        "model {} (whisper.cpp {}), {threads} threads",
        dictation::model_id(&path),
        whisper::whisper_cpp_version()
    );
    println!(
        "{:<10} {:>22} {:>26} {:>9} {:>10} {:>11}",
        "dictation",
        "stop→text live (ms)",
        "baseline whole-file (ms)",
        "messages",
        "WER live",
        "WER whole"
    );
    let mut seed = 5;
    for repeats in [1usize, 5] {
        let mut audio: Vec<i16> = room(RATE / 2, &mut seed).collect();
        for _ in 0..repeats {
            audio.extend_from_slice(&jfk);
            audio.extend(room(RATE, &mut seed));
        }
        let reference = vec![JFK; repeats].join(" ");
        let secs = audio.len() as f64 / RATE as f64;
        let l = live(&model, &audio);
        let (whole_time, whole_text) = whole(&model, &audio);
        println!(
            "{:<10} {:>22} {:>26} {:>9} {:>10.3} {:>11.3}",
            format!("{secs:.0} s"),
            l.stop_to_text.as_millis(),
            whole_time.as_millis(),
            l.messages,
            wer(&reference, &l.transcript),
            wer(&reference, &whole_text),
        );
    }
}
