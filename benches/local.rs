//! On-device dictation: latency, accuracy, throughput, CPU and memory, each figure beside its
//! baseline from the same run.
//!
//! With the test model (tiny.en, `scripts/fetch-test-model`) and jfk.wav repeated with one
//! second pauses (a 12 s and a 60 s dictation), every run repeated `PERSYK_BENCH_RUNS` times
//! (default 3; the figures are median / p95):
//!
//! 1. **stop → text available**, live path: the recording is fed in real time through the
//!    real pipeline (paced in-memory source, `SourceKind::Live`, WAV asset, segmenter,
//!    recognizer thread) and the figure is the time from the stop until the pipeline returns
//!    (last canonical message and `recording.finished` written). Two stops: one second after
//!    the last clip (`pause`), and at the end of the last clip (`at end`: the segmenter still
//!    hears voice in jfk.wav's last frames, so the last utterance is open when the stop
//!    comes and all of it is recognized after the stop).
//!    **Baseline:** the peers' method, recognizing the whole recording after stop: one
//!    whisper.cpp call on the full clip with whisper.cpp's defaults (30 s windows), the same
//!    model, threads and language.
//! 2. **WER** of the live path's transcript (all messages joined) against the reference
//!    text, beside the WER of the whole-file call.
//! 3. **CPU while dictating**: process CPU seconds (`/proc/self/stat`) per second of audio
//!    over a real-time-fed dictation (start to the pipeline's return). **Baseline:** the CPU
//!    seconds per second of audio of the whole-file call.
//! 4. **File transcription throughput**: the 60 s dictation as a WAV file through the path of
//!    `persyk transcribe FILE --provider local` (`FileSource` unpaced, `SourceKind::Replay`,
//!    the pipeline to a session), as seconds of audio per second. **Baseline:** the
//!    whole-file call on the same clip.
//! 5. **Peak RSS** (`VmHWM`) of the process after a local dictation (model loaded, one
//!    recording), before the baseline's own copy of the model is loaded. **Baseline:** the
//!    model file's size.
//!
//! 6. **The speech corpus** (`scripts/fetch-corpus`, issue #22): per clip and overall, the
//!    path of `persyk transcribe FILE --provider local` on the clip's WAV file beside one
//!    whole-file whisper.cpp call on the same samples: WER against the transcript and against
//!    the whole-file call's text (the only reference `chan3` has), loops (extra copies of
//!    repeated word runs, `corpus::loops`), the real-time factor (wall time / audio; CPU
//!    seconds per second of audio beside it), and the seconds of speech (the clip's clean
//!    speech spans) that lie outside every utterance the energy segmenter opens, which the
//!    recognizer never hears. The CI subset also goes through the live path at real time
//!    (one run each). `PERSYK_BENCH_CORPUS=ci` limits the corpus to the CI subset, `off`
//!    skips it, `segments` prints only the segmenter's figures (no recognition);
//!    `PERSYK_BENCH_CLIPS=a,b` keeps the named clips; `PERSYK_BENCH_PART=corpus` runs only
//!    this part, `jfk` only parts 1-5.
//!
//! 7. **Stop → text by tail length** (`PERSYK_BENCH_PART=tails`): the first 1, 3, 6, 10 and
//!    20 s of continuous reading (`sonnet-tight`) through the live path at real time,
//!    stopped mid-speech: p50 / p95 of stop → text, CPU after the stop, CPU per second of
//!    audio, and WER against one whole-file call on the same samples. **Baseline:** that
//!    call's own time.
//!
//! 8. **Reduced encoder windows** (`PERSYK_BENCH_PART=short`): tails of 1, 2, 3, 5, 8 and
//!    12 s cut at three places from every corpus clip, each decoded the way the live engine
//!    decodes what the user waits for (a reduced window checked by `local::check::doubt`,
//!    the full window again when in doubt) and with the full window alone: p50 / p95 time per
//!    decode, how many reduced windows stood, the doubts by kind, and the words that differ
//!    from the full window's text. **Baseline:** the full window's time.
//! 9. **The vocabulary's search** (`PERSYK_BENCH_PART=vocabulary`, no model): what looking for
//!    stretches that sound like a listed word costs per window of text (`local::vocabulary`,
//!    the step every window takes when a list is set) — 40- and 100-word windows of the corpus
//!    transcripts against lists of 4 and 100 entries (the settings' most), and the worst the
//!    limits allow (100 entries of four 24-letter words sharing a first sound, against 100-
//!    and 200-word windows whose every word begins with it); µs per window (p50 / p95) and
//!    how many searches stopped at `vocabulary::MAX_WORK_PER_TEXT`. **Baseline:** the same
//!    windows split into lower-case words.
//!
//! `PERSYK_BENCH_MODEL=ggml-base.bin` runs another model of `target/test-model` (default
//! tiny.en). `PERSYK_BENCH_THREADS=N` sets the whisper.cpp threads (default: Persyk's, the cores up
//! to 8); the process CPU spent between the stop and the text is printed beside the wall
//! time, a figure a busy machine distorts less.
//!
//! Run: `cargo bench --bench local` (several minutes; not part of CI), or `cargo bench
//! --profile dev --bench local` to reuse the test build (whisper.cpp is optimized there too,
//! Persyk's own code is not). The load average is printed at the start and the end: on a
//! shared machine the wall times follow it. Nothing is asserted.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use persyk::capture::source::FileSource;
use persyk::local::whisper::{self, LocalModel};
use persyk::local::{LocalOptions, dictation, options_for};
use persyk::pipeline::{self, LiveTap, Recognition, RecordOptions, SamplesSource, SourceKind};
use persyk::session::{LeafSelector, Store, store::Roots};
use whisper_rs::WhisperContext;

#[path = "../tests/support/mod.rs"]
mod support;

use support::corpus::{self, Clip, Set};
use support::{JFK, test_model_dir, wer, words};

const RATE: usize = 24_000;

/// Quiet room noise (about -66 dBFS), so a live source is never digitally silent.
fn room(n: usize, seed: &mut u64) -> impl Iterator<Item = i16> + '_ {
    (0..n).map(move |_| {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((*seed >> 33) % 33) as i16 - 16
    })
}

/// Process CPU time (user + system) so far, from `/proc/self/stat` (clock ticks of 10 ms).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_millis(ticks * 10)
}

/// Peak resident set size of this process, bytes (`VmHWM`).
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Persyk's options, with `PERSYK_BENCH_THREADS` instead of the default thread count when
/// set (on a machine shared with other work, two whisper.cpp threads that wait for each other
/// spin; one thread measures the work without that), and `PERSYK_BENCH_VOCABULARY` (comma
/// separated) as "Words Persyk should know" (issue #26 item 8: what a vocabulary does to
/// clips that do not contain its words).
fn options() -> LocalOptions {
    let mut options = options_for(None, true);
    if let Some(n) = std::env::var("PERSYK_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        options.threads = n.max(1);
    }
    if let Ok(words) = std::env::var("PERSYK_BENCH_VOCABULARY") {
        options.vocabulary = words.split(',').map(|w| w.trim().to_owned()).collect();
    }
    options
}

struct Live {
    stop_to_text: Duration,
    transcript: String,
    /// Process CPU from the start to the pipeline's return.
    cpu: Duration,
    /// Process CPU from the stop to the pipeline's return.
    cpu_after_stop: Duration,
}

/// `audio` through the real pipeline at real time; stop once its first `stop_at` samples
/// have been delivered (room noise keeps the source going past the stop).
fn live(model: &LocalModel, audio: &[i16], stop_at: usize) -> Live {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new(Roots::new(dir.path().to_path_buf(), Vec::new()).expect("roots"));
    let handle = store.create_session().expect("session");
    let continuation = handle.continuation(&LeafSelector::Default).expect("cont");
    let setup = whisper::setup(model, options(), dictation::DRAIN_DEADLINE).expect("setup");
    let mut seed = 11;
    let mut samples = audio[..stop_at].to_vec();
    samples.extend(room(RATE * 30, &mut seed));
    let stop_secs = stop_at as f64 / RATE as f64;
    let (view_tx, _view_rx) = tokio::sync::oneshot::channel();
    let (_removals_tx, removals) = tokio::sync::mpsc::channel(1);
    let tap = LiveTap {
        view: view_tx,
        level: Arc::new(AtomicU32::new(0)),
        removals,
    };
    support::runtime().block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let cpu0 = cpu_time();
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
            tokio::time::Instant::from_std(started) + Duration::from_secs_f64(stop_secs),
        )
        .await;
        let stopped = Instant::now();
        let cpu_at_stop = cpu_time();
        let _ = stop_tx.send(true);
        let t = recording.await.expect("task").expect("recording");
        let stop_to_text = stopped.elapsed();
        let cpu_after_stop = cpu_time().saturating_sub(cpu_at_stop);
        assert!(t.halted.is_none(), "halted: {:?}", t.halted);
        Live {
            stop_to_text,
            transcript: t.report.transcript().join(" "),
            cpu: cpu_time().saturating_sub(cpu0),
            cpu_after_stop,
        }
    })
}

/// The peers' method: one whisper.cpp call on the whole clip, whisper.cpp's defaults
/// (30 s windows), the same threads and language as the live path. Time, text, CPU.
fn whole(ctx: &WhisperContext, audio: &[i16]) -> (Duration, String, Duration) {
    let options = options();
    let cpu0 = cpu_time();
    let started = Instant::now();
    let text = corpus::whole_file_text(ctx, audio, options.threads, options.language.as_deref());
    (started.elapsed(), text, cpu_time().saturating_sub(cpu0))
}

/// The path of `persyk transcribe FILE --provider local`: the WAV file unpaced through the
/// pipeline into a session. Time and transcript.
fn transcribe_file(model: &LocalModel, wav: &Path) -> (Duration, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new(Roots::new(dir.path().to_path_buf(), Vec::new()).expect("roots"));
    let continuation = store
        .create_session()
        .and_then(|h| h.continuation(&LeafSelector::Default))
        .expect("session");
    let started = Instant::now();
    let source = FileSource::open(wav, 0.0).expect("wav");
    let setup = whisper::setup(model, options(), Duration::from_secs(600)).expect("setup");
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let t = support::runtime()
        .block_on(pipeline::record_to(
            continuation,
            Recognition::Local(setup),
            Box::new(source),
            SourceKind::Replay,
            stop_rx,
            RecordOptions::default(),
        ))
        .expect("recording");
    (started.elapsed(), t.report.transcript().join(" "))
}

fn write_wav(path: &Path, samples: &[i16]) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: RATE as u32,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).expect("wav");
    for &s in samples {
        w.write_sample(s).expect("sample");
    }
    w.finalize().expect("wav");
}

/// Median and p95 (nearest rank) in milliseconds.
fn stats(times: &[Duration]) -> String {
    match p50_p95(times) {
        Some((median, p95)) => format!("{} / {}", median.as_millis(), p95.as_millis()),
        None => "-".into(),
    }
}

/// The median and the 95th percentile (nearest rank) of `times`.
fn p50_p95(times: &[Duration]) -> Option<(Duration, Duration)> {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let median = *sorted.get((sorted.len().checked_sub(1)?) / 2)?;
    let p95 = sorted[((sorted.len() as f64 * 0.95).ceil() as usize).clamp(1, sorted.len()) - 1];
    Some((median, p95))
}

fn mean_wer(reference: &str, texts: &[String]) -> f64 {
    texts.iter().map(|t| wer(reference, t)).sum::<f64>() / texts.len().max(1) as f64
}

fn main() {
    let runs: usize = std::env::var("PERSYK_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    if std::env::var("PERSYK_BENCH_PART").as_deref() == Ok("vocabulary") {
        vocabulary_search();
        return;
    }
    // `PERSYK_BENCH_MODEL`: another model file of target/test-model (`ggml-base.bin`, the
    // multilingual base scripts/fetch-test-model builds), told the corpus is English.
    let file = std::env::var("PERSYK_BENCH_MODEL").unwrap_or_else(|_| "ggml-tiny.en.bin".into());
    let path = test_model_dir().join(file);
    let model = LocalModel::load(&path).expect("run scripts/fetch-test-model");
    let model_bytes = std::fs::metadata(&path).expect("model").len();
    let jfk = support::jfk_as_recorded();
    let threads = options().threads;
    println!(
        "model {} (whisper.cpp {}), {threads} threads, {runs} runs; load average at start: {}",
        dictation::model_id(&path),
        whisper::whisper_cpp_version(),
        load_average()
    );
    let part = std::env::var("PERSYK_BENCH_PART").unwrap_or_default();
    if part == "tails" {
        tails(&model, &path, runs);
        println!("load average at the end: {}", load_average());
        return;
    }
    if part == "short" {
        short_windows(&model);
        println!("load average at the end: {}", load_average());
        return;
    }
    if part == "corpus" {
        corpus_figures(&model, &path);
        println!("load average at the end: {}", load_average());
        return;
    }
    {
        // How long jfk.wav goes on after its last voiced frame (the `at end` stop's pause).
        use persyk::audio::segment::{Segmenter, SegmenterConfig};
        let mut segmenter = Segmenter::new(SegmenterConfig::for_rate(RATE as u32));
        let mut events = Vec::new();
        segmenter.push(&jfk, &mut events);
        if let Some(open) = segmenter.open_utterance() {
            println!(
                "jfk.wav: {} ms after its last voiced frame (the utterance is open at its end)",
                (jfk.len() as u64 - open.last_voiced_end) * 1000 / RATE as u64
            );
        }
    }
    let mut baseline_ctx: Option<WhisperContext> = None;
    let mut rss = None;
    let mut seed = 5;
    let mut long_clip = Vec::new();
    println!(
        "{:<9} {:>20} {:>20} {:>22} {:>8} {:>8} {:>9} {:>10} {:>10}",
        "dictation",
        "stop→text pause ms",
        "stop→text at end ms",
        "baseline whole-file ms",
        "WER live",
        "at end",
        "WER whole",
        "CPU s/s",
        "whole s/s",
    );
    for repeats in [1usize, 5] {
        let mut audio: Vec<i16> = room(RATE / 2, &mut seed).collect();
        for _ in 0..repeats {
            audio.extend_from_slice(&jfk);
            audio.extend(room(RATE, &mut seed));
        }
        let clip_end = audio.len() - RATE;
        let reference = vec![JFK; repeats].join(" ");
        let secs = audio.len() as f64 / RATE as f64;
        let (mut pause, mut at_end, mut base) = (Vec::new(), Vec::new(), Vec::new());
        let (mut pause_text, mut end_text, mut base_text) = (Vec::new(), Vec::new(), Vec::new());
        let (mut cpu_live, mut cpu_whole) = (Duration::ZERO, Duration::ZERO);
        let (mut cpu_pause, mut cpu_end) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let l = live(&model, &audio, audio.len());
            pause.push(l.stop_to_text);
            cpu_pause.push(l.cpu_after_stop);
            pause_text.push(l.transcript);
            cpu_live += l.cpu;
            if rss.is_none() {
                rss = Some(peak_rss_bytes());
            }
            let e = live(&model, &audio, clip_end);
            at_end.push(e.stop_to_text);
            cpu_end.push(e.cpu_after_stop);
            end_text.push(e.transcript);
            let ctx = baseline_ctx.get_or_insert_with(|| corpus::whole_file_context(&path));
            let (t, text, cpu) = whole(ctx, &audio);
            base.push(t);
            base_text.push(text);
            cpu_whole += cpu;
        }
        let per_audio = |cpu: Duration| cpu.as_secs_f64() / (secs * runs as f64);
        println!(
            "{:<9} {:>20} {:>20} {:>22} {:>8.3} {:>8.3} {:>9.3} {:>10.3} {:>10.3}",
            format!("{secs:.0} s"),
            stats(&pause),
            stats(&at_end),
            stats(&base),
            mean_wer(&reference, &pause_text),
            mean_wer(&reference, &end_text),
            mean_wer(&reference, &base_text),
            per_audio(cpu_live),
            per_audio(cpu_whole),
        );
        println!(
            "{:<9} CPU after the stop (ms, median / p95): pause {}, at end {}",
            "",
            stats(&cpu_pause),
            stats(&cpu_end)
        );
        long_clip = audio;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("dictation.wav");
    write_wav(&wav, &long_clip);
    let secs = long_clip.len() as f64 / RATE as f64;
    let reference = [JFK; 5].join(" ");
    let ctx = baseline_ctx.as_ref().expect("baseline model");
    let (mut file, mut base) = (Vec::new(), Vec::new());
    let (mut file_text, mut base_text) = (String::new(), String::new());
    for _ in 0..runs {
        let (t, text) = transcribe_file(&model, &wav);
        file.push(t);
        file_text = text;
        let (t, text, _) = whole(ctx, &long_clip);
        base.push(t);
        base_text = text;
    }
    let speed = |times: &[Duration]| {
        let mut v: Vec<f64> = times.iter().map(|t| secs / t.as_secs_f64()).collect();
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) / 2]
    };
    println!(
        "file {secs:.0} s: transcribe --provider local {} ms ({:.1}× real time, WER {:.3}); \
         whole-file call {} ms ({:.1}× real time, WER {:.3})",
        stats(&file),
        speed(&file),
        wer(&reference, &file_text),
        stats(&base),
        speed(&base),
        wer(&reference, &base_text),
    );
    let rss = rss.unwrap_or(0);
    println!(
        "peak RSS after a local dictation: {:.1} MiB; model file {:.1} MiB ({:.2}×)",
        rss as f64 / 1_048_576.0,
        model_bytes as f64 / 1_048_576.0,
        rss as f64 / model_bytes as f64
    );
    if part != "jfk" {
        corpus_figures(&model, &path);
    }
    println!("load average at the end: {}", load_average());
}

/// Sample ranges (24 kHz) of the utterances the energy segmenter opens on `samples`, as
/// the local dictation engine runs it: everything else never reaches the recognizer.
fn utterances(samples: &[i16]) -> Vec<(u64, u64)> {
    use persyk::audio::segment::{SegmentEvent, Segmenter, SegmenterConfig};
    let mut segmenter = Segmenter::new(SegmenterConfig::for_rate(RATE as u32));
    let mut events = Vec::new();
    segmenter.push(samples, &mut events);
    segmenter.finish(&mut events);
    events
        .iter()
        .filter_map(|e| match e {
            SegmentEvent::Ended(u) => Some((u.start_sample, u.end_sample)),
            SegmentEvent::Started { .. } => None,
        })
        .collect()
}

/// Word errors and reference words, for a corpus-wide WER.
#[derive(Default, Clone, Copy)]
struct Errors {
    errors: f64,
    words: usize,
}

impl Errors {
    fn add(&mut self, reference: &str, hypothesis: &str) {
        let n = words(reference).len();
        self.errors += wer(reference, hypothesis) * n as f64;
        self.words += n;
    }

    fn rate(self) -> f64 {
        self.errors / self.words.max(1) as f64
    }
}

/// Part 6: the speech corpus, per clip and overall (see the module doc).
fn corpus_figures(model: &LocalModel, path: &Path) {
    let set = match std::env::var("PERSYK_BENCH_CORPUS").as_deref() {
        Ok("off") => return,
        Ok("ci") => Set::Ci,
        _ => Set::All,
    };
    let only = std::env::var("PERSYK_BENCH_CLIPS").unwrap_or_default();
    let mut clips = corpus::clips(set);
    if !only.is_empty() {
        clips.retain(|c| only.split(',').any(|n| n == c.name()));
    }
    if clips.is_empty() {
        return;
    }
    if std::env::var("PERSYK_BENCH_CORPUS").as_deref() == Ok("segments") {
        // The segmenter alone: which speech never reaches the recognizer (no recognition).
        for clip in &clips {
            let utts = utterances(&clip.samples);
            println!(
                "{:<16} {:>6.1} s, speech {:>5.1} s, never sent {:>5.1} s, {} utterances",
                clip.name(),
                clip.seconds(),
                clip.entry.speech_seconds,
                clip.speech_outside(&utts),
                utts.len()
            );
        }
        return;
    }
    let ctx = corpus::whole_file_context(path);
    println!(
        "speech corpus ({} clips, {:.0} s): `transcribe --provider local` path (file) beside one \
         whole-file whisper.cpp call (whole); WER vs transcript, WER vs whole, loops, \
         real-time factor (wall / audio) and CPU s per audio s",
        clips.len(),
        clips.iter().map(Clip::seconds).sum::<f64>()
    );
    println!(
        "{:<16} {:>6} {:>7} {:>8} {:>5} {:>9} {:>10} {:>11} {:>6} {:>7} {:>8} {:>9} {:>8} {:>9}",
        "clip",
        "audio s",
        "speech",
        "unsent s",
        "utts",
        "WER file",
        "WER whole",
        "file~whole",
        "loops",
        "whole",
        "RTF file",
        "RTF whole",
        "CPU file",
        "CPU whole",
    );
    let (mut file_err, mut whole_err, mut vs_whole) =
        (Errors::default(), Errors::default(), Errors::default());
    let (mut audio, mut unsent, mut speech) = (0.0, 0.0, 0.0);
    let (mut file_wall, mut whole_wall) = (Duration::ZERO, Duration::ZERO);
    let (mut file_cpu, mut whole_cpu) = (Duration::ZERO, Duration::ZERO);
    let (mut file_loops, mut whole_loops) = (0, 0);
    let mut texts = Vec::new();
    for clip in &clips {
        let secs = clip.seconds();
        let utts = utterances(&clip.samples);
        let missed = clip.speech_outside(&utts);
        let cpu0 = cpu_time();
        let (f_wall, f_text) = transcribe_file(model, &clip.entry.wav);
        let f_cpu = cpu_time().saturating_sub(cpu0);
        let (w_wall, w_text, w_cpu) = whole(&ctx, &clip.samples);
        let (lf, lw) = (corpus::loops(&f_text), corpus::loops(&w_text));
        let wer_or_dash = |text: &str| {
            clip.reference()
                .map_or_else(|| "-".to_owned(), |r| format!("{:.3}", wer(r, text)))
        };
        println!(
            "{:<16} {:>6.1} {:>7.1} {:>8.1} {:>5} {:>9} {:>10} {:>11.3} {:>6} {:>7} {:>8.2} {:>9.2} {:>8.2} {:>9.2}",
            clip.name(),
            secs,
            clip.entry.speech_seconds,
            missed,
            utts.len(),
            wer_or_dash(&f_text),
            wer_or_dash(&w_text),
            wer(&w_text, &f_text),
            lf,
            lw,
            f_wall.as_secs_f64() / secs,
            w_wall.as_secs_f64() / secs,
            f_cpu.as_secs_f64() / secs,
            w_cpu.as_secs_f64() / secs,
        );
        if let Some(r) = clip.reference() {
            file_err.add(r, &f_text);
            whole_err.add(r, &w_text);
        }
        vs_whole.add(&w_text, &f_text);
        audio += secs;
        speech += clip.entry.speech_seconds;
        unsent += missed;
        file_wall += f_wall;
        whole_wall += w_wall;
        file_cpu += f_cpu;
        whole_cpu += w_cpu;
        file_loops += lf;
        whole_loops += lw;
        texts.push((clip.name().to_owned(), f_text, w_text));
    }
    println!(
        "{:<16} {:>6.1} {:>7.1} {:>8.1} {:>5} {:>9.3} {:>10.3} {:>11.3} {:>6} {:>7} {:>8.2} {:>9.2} {:>8.2} {:>9.2}",
        "overall",
        audio,
        speech,
        unsent,
        "",
        file_err.rate(),
        whole_err.rate(),
        vs_whole.rate(),
        file_loops,
        whole_loops,
        file_wall.as_secs_f64() / audio,
        whole_wall.as_secs_f64() / audio,
        file_cpu.as_secs_f64() / audio,
        whole_cpu.as_secs_f64() / audio,
    );
    if std::env::var_os("PERSYK_BENCH_TEXTS").is_some() {
        for (name, f, w) in &texts {
            println!("{name} file:  {}", f.trim());
            println!("{name} whole: {}", w.trim());
        }
    }
    // The live path at real time on the short subset (one run each: it costs the audio's
    // duration).
    let mut live_err = Errors::default();
    for clip in clips.iter().filter(|c| c.entry.ci) {
        let l = live(model, &clip.samples, clip.samples.len());
        let secs = clip.seconds();
        let whole_text = texts
            .iter()
            .find(|(n, _, _)| n == clip.name())
            .map_or("", |(_, _, w)| w.as_str());
        if let Some(r) = clip.reference() {
            live_err.add(r, &l.transcript);
        }
        println!(
            "live {:<11} WER {} (vs whole {:.3}), loops {}, CPU {:.2} s/s, stop→text {} ms",
            clip.name(),
            clip.reference().map_or_else(
                || "-".to_owned(),
                |r| format!("{:.3}", wer(r, &l.transcript))
            ),
            wer(whole_text, &l.transcript),
            corpus::loops(&l.transcript),
            l.cpu.as_secs_f64() / secs,
            l.stop_to_text.as_millis(),
        );
    }
    if live_err.words > 0 {
        println!("live, CI subset: WER {:.3}", live_err.rate());
    }
}

/// Part 7, stop → text by the length of the speech before the stop (issue #22): the first
/// 1, 3, 6, 10 and 20 s of `sonnet-tight` (continuous reading, no pause over 150 ms) fed in
/// real time through the live path and stopped mid-speech, `runs` times each: p50 / p95 of
/// stop → text, the process CPU after the stop, and the CPU per second of audio over the
/// whole dictation (the recognizer keeps up when it stays under 1). **Baseline:** one
/// whole-file whisper.cpp call on the same samples (the peers' method after a stop), in the
/// same run.
fn tails(model: &LocalModel, path: &Path, runs: usize) {
    let Some(clip) = corpus::clips(Set::All)
        .into_iter()
        .find(|c| c.name() == "sonnet-tight")
    else {
        println!("tails: no corpus (scripts/fetch-corpus)");
        return;
    };
    let ctx = corpus::whole_file_context(path);
    println!(
        "{:<7} {:>22} {:>16} {:>12} {:>22} {:>9} {:>10}",
        "tail s",
        "stop→text p50/p95 ms",
        "CPU after stop",
        "CPU s/s",
        "whole-file call ms",
        "WER live",
        "WER whole"
    );
    let lead = clip
        .speech
        .first()
        .map_or(0, |&(from, _)| (from * RATE as f64) as usize);
    for tail in [1usize, 3, 6, 10, 20] {
        let end = (lead + tail * RATE).min(clip.samples.len());
        let audio = &clip.samples[..end];
        let (mut times, mut cpu_after, mut cpu, mut texts) =
            (Vec::new(), Vec::new(), 0.0, Vec::new());
        for _ in 0..runs {
            let l = live(model, audio, audio.len());
            times.push(l.stop_to_text);
            cpu_after.push(l.cpu_after_stop);
            cpu += l.cpu.as_secs_f64() / (audio.len() as f64 / RATE as f64);
            texts.push(l.transcript);
        }
        let (w_wall, w_text, _) = whole(&ctx, audio);
        let live_vs_whole = texts.iter().map(|t| wer(&w_text, t)).sum::<f64>() / texts.len() as f64;
        println!(
            "{:<7} {:>22} {:>16} {:>12.2} {:>22} {:>9.3} {:>10}",
            tail,
            stats(&times),
            stats(&cpu_after),
            cpu / runs as f64,
            w_wall.as_millis(),
            live_vs_whole,
            "(ref)",
        );
    }
}

/// Where the segmenter, run over `samples` as the live engine runs it, last heard a voice.
fn voiced_end(samples: &[i16]) -> Option<u64> {
    use persyk::audio::segment::{EndReason, SegmentEvent, Segmenter, SegmenterConfig};
    let config = SegmenterConfig::for_rate(RATE as u32);
    let hangover = RATE as u64 * u64::from(config.hangover_ms) / 1000;
    let mut segmenter = Segmenter::new(config);
    let mut events = Vec::new();
    segmenter.push(samples, &mut events);
    let open = segmenter
        .open_utterance()
        .map(|o| o.last_voiced_end.min(samples.len() as u64));
    let closed = events.iter().rev().find_map(|e| match e {
        SegmentEvent::Ended(u) => Some(match u.reason {
            EndReason::Pause => u.end_sample.saturating_sub(hangover),
            _ => u.end_sample,
        }),
        SegmentEvent::Started { .. } => None,
    });
    open.or(closed).filter(|&v| v > 0)
}

/// Part 8 (`PERSYK_BENCH_PART=short`): what the user waits for after a stop, decoded with a
/// reduced encoder window checked by `local::check::doubt` (the full window again when in
/// doubt) beside the full window alone, on tails of 1–12 s cut from every corpus clip at
/// three places: time per decode (p50 / p95), how many reduced windows stood, and the words
/// that differ from the full window's text.
fn short_windows(model: &LocalModel) {
    use persyk::local::dictation::{Decode, ShortWindow};
    let set = match std::env::var("PERSYK_BENCH_CORPUS").as_deref() {
        Ok("ci") => Set::Ci,
        _ => Set::All,
    };
    let clips = corpus::clips(set);
    if clips.is_empty() {
        println!("short: no corpus (scripts/fetch-corpus)");
        return;
    }
    let mut recognizer = model.recognizer(options()).expect("recognizer");
    println!(
        "{:<7} {:>6} {:>22} {:>22} {:>14} {:>18}",
        "tail s",
        "tails",
        "full window p50/p95 ms",
        "checked short p50/p95",
        "stood/doubted",
        "words ≠ full"
    );
    let mut doubts: std::collections::BTreeMap<&str, usize> = Default::default();
    let (mut all_full, mut all_short, mut all_diff, mut all_words) =
        (Vec::new(), Vec::new(), 0.0, 0usize);
    for seconds in [1.0f64, 2.0, 3.0, 5.0, 8.0, 12.0] {
        let (mut full_t, mut short_t, mut diff, mut n_words, mut tails) =
            (Vec::new(), Vec::new(), 0.0, 0usize, 0);
        let before = recognizer.short_windows();
        for clip in &clips {
            let len = (seconds * RATE as f64) as usize;
            for at in [0.0, 0.37, 0.71] {
                let Some(room) = clip.samples.len().checked_sub(len) else {
                    continue;
                };
                let start = (room as f64 * at) as usize;
                let tail = &clip.samples[start..start + len];
                let t = Instant::now();
                let full = recognizer
                    .decode(tail, &Decode::default())
                    .expect("full window");
                full_t.push(t.elapsed());
                let doubted_before = recognizer.short_windows().doubted;
                let t = Instant::now();
                let short = recognizer
                    .decode(
                        tail,
                        &Decode {
                            abort: None,
                            short_window: Some(ShortWindow {
                                voiced_end: voiced_end(tail),
                            }),
                        },
                    )
                    .expect("short window");
                short_t.push(t.elapsed());
                if recognizer.short_windows().doubted > doubted_before
                    && let Some(d) = recognizer.short_windows().last_doubt
                {
                    *doubts.entry(d.code()).or_default() += 1;
                }
                let text = |s: &[dictation::Segment]| {
                    s.iter()
                        .map(|s| s.text.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                let (f, h) = (text(&full), text(&short));
                let n = words(&f).len();
                diff += wer(&f, &h) * n as f64;
                n_words += n;
                tails += 1;
            }
        }
        let after = recognizer.short_windows();
        println!(
            "{:<7} {:>6} {:>22} {:>22} {:>14} {:>18}",
            seconds,
            tails,
            stats(&full_t),
            stats(&short_t),
            format!(
                "{}/{}",
                after.accepted - before.accepted,
                after.doubted - before.doubted
            ),
            format!(
                "{:.0} of {} ({:.3})",
                diff,
                n_words,
                diff / n_words.max(1) as f64
            ),
        );
        all_full.extend(full_t);
        all_short.extend(short_t);
        all_diff += diff;
        all_words += n_words;
    }
    let total = recognizer.short_windows();
    println!(
        "{:<7} {:>6} {:>22} {:>22} {:>14} {:>18}",
        "all",
        all_full.len(),
        stats(&all_full),
        stats(&all_short),
        format!("{}/{}", total.accepted, total.doubted),
        format!(
            "{:.0} of {} ({:.3})",
            all_diff,
            all_words,
            all_diff / all_words.max(1) as f64
        ),
    );
    println!("doubts: {doubts:?}");
}

/// Part 9 (`PERSYK_BENCH_PART=vocabulary`): the suspects search per window of text beside
/// splitting the same text into lower-case words.
fn vocabulary_search() {
    use persyk::local::vocabulary::Vocabulary;
    let texts: Vec<String> = corpus::manifest()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| e.reference)
        .collect();
    let words: Vec<&str> = texts.iter().flat_map(|t| t.split_whitespace()).collect();
    if words.len() < 100 {
        println!("vocabulary: no corpus (scripts/fetch-corpus)");
        return;
    }
    let four: Vec<String> = ["Siobhan Kowalczyk", "Persyk", "Kubernetes", "Zoë Kravitz"]
        .map(str::to_owned)
        .to_vec();
    // 100 entries (the most the settings keep): the four, and invented product and person
    // names of one to three words.
    let mut many = four.clone();
    let parts = [
        "Nor", "vex", "Quil", "ton", "Brax", "ley", "Ost", "rin", "Dal", "mar",
    ];
    for i in 0..96 {
        let a = format!("{}{}", parts[i % 10], parts[(i / 10) % 10]);
        many.push(match i % 3 {
            0 => a,
            1 => format!("{a} {}{}", parts[(i + 3) % 10], parts[(i + 7) % 10]),
            _ => format!("{a} {} Labs", parts[(i + 5) % 10]),
        });
    }
    // The worst the limits allow: 100 entries of four 24-letter words (99 characters), every
    // word beginning with the same sound, so every stretch of a window is compared with
    // every entry at the longest keys.
    let long_word = |i: usize, j: usize| {
        let letters: String = (0..23)
            .map(|k| (b'a' + ((i * 7 + j * 3 + k * 5) % 26) as u8) as char)
            .collect();
        format!("s{letters}")
    };
    let worst: Vec<String> = (0..100)
        .map(|i| {
            (0..4)
                .map(|j| long_word(i, j))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    println!(
        "{:<18} {:>8} {:>26} {:>26}",
        "window", "entries", "suspects µs p50/p95", "split+lower µs p50/p95"
    );
    let corpus_windows = |size: usize| -> Vec<String> {
        words
            .chunks(size)
            .filter(|c| c.len() == size)
            .map(|c| c.join(" "))
            .collect()
    };
    let worst_windows = |size: usize| -> Vec<String> {
        (0..20)
            .map(|w| {
                (0..size)
                    .map(|i| long_word(1000 + w * size + i, 1))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    let cases: Vec<(String, Vec<String>, &Vec<String>, &str)> = vec![
        ("40 words".into(), corpus_windows(40), &four, "4"),
        ("40 words".into(), corpus_windows(40), &many, "100"),
        ("100 words".into(), corpus_windows(100), &four, "4"),
        ("100 words".into(), corpus_windows(100), &many, "100"),
        (
            "100 long words".into(),
            worst_windows(100),
            &worst,
            "100 worst",
        ),
        (
            "200 long words".into(),
            worst_windows(200),
            &worst,
            "100 worst",
        ),
    ];
    for (label, windows, list, entries) in cases {
        let vocabulary = Vocabulary::new(list);
        let (mut searched, mut split) = (Vec::new(), Vec::new());
        let (mut found, mut cut) = (0usize, 0usize);
        for _ in 0..5 {
            for w in &windows {
                let t = Instant::now();
                let search = std::hint::black_box(vocabulary.search(w));
                searched.push(t.elapsed());
                found += search.suspects.len();
                cut += usize::from(!search.complete);
                let t = Instant::now();
                let lower: Vec<String> = w.split_whitespace().map(str::to_lowercase).collect();
                std::hint::black_box(lower);
                split.push(t.elapsed());
            }
        }
        println!(
            "{:<18} {:>8} {:>26} {:>26}   ({} windows, {} suspects, {} stopped at the work limit)",
            label,
            entries,
            micros(&searched),
            micros(&split),
            windows.len(),
            found / 5,
            cut / 5
        );
    }
}

/// p50 / p95 of `times` in µs.
fn micros(times: &[Duration]) -> String {
    match p50_p95(times) {
        Some((median, p95)) => format!(
            "{:.1} / {:.1}",
            median.as_secs_f64() * 1e6,
            p95.as_secs_f64() * 1e6
        ),
        None => "-".into(),
    }
}
