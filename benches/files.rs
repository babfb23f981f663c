//! Transcribing a file (issue #38): accuracy by format, decoding speed, and what a long file
//! costs, each figure beside its baseline from the same run.
//!
//! With the test model (tiny.en, `scripts/fetch-test-model`), the speech corpus
//! (`scripts/fetch-corpus`) and Debian's ffmpeg (installed by `scripts/setup`; used here to
//! *encode* the bench's inputs only — Persyk decodes with symphonia):
//!
//! 1. **WER by format**: every corpus clip written as WAV, then encoded as MP3 (64 kbit/s) and
//!    M4A/AAC (64 kbit/s), each through the path of the app's file transcription
//!    (`capture::open_file`, the pipeline to a session, on the device). Mean WER against the
//!    transcripts per format. **Baseline:** the WAV's. Target: MP3 and M4A within 0.01 of it.
//! 2. **Decoding alone**: a long file made of the corpus (default 10 minutes,
//!    `PERSYK_BENCH_FILE_MINUTES`) as MP3 and M4A decoded by `capture::open_file` as fast as
//!    it goes, on one thread: × real time and CPU seconds per audio hour. **Baseline:** the
//!    same audio read from its WAV (hound). Target ≥ 100× real time.
//! 3. **A long file, whole**: the MP3 of (2) through the pipeline, and one of
//!    `PERSYK_BENCH_LONG_MINUTES` (default 20; the figure is 60): WER, CPU, wall time
//!    and the peak resident memory over the idle process with the model loaded (`VmHWM`
//!    reset through `/proc/self/clear_refs` before each). **Baseline:** one whole-file
//!    whisper.cpp call on the same samples (the peers' method): its WER, CPU and memory.
//!    Targets: WER within +0.02 of it, CPU ≤ 1.2× its, memory ≤ 200 MB over idle and the same
//!    at both lengths.
//!
//! `PERSYK_BENCH_PART=wer|decode|long` runs one part; with `PERSYK_BENCH_DUMP=DIR` part 3
//! writes the reference, Persyk's and the whole-file call's text into DIR (to see which
//! words differ), and `PERSYK_BENCH_ONLY_OURS` skips the whole-file call (its text does not
//! change between runs); `PERSYK_BENCH_MODEL=ggml-base.bin` measures another model (a name
//! in the test models' folder, or a path) on both sides. Run: `cargo bench --bench files`
//! (several minutes; not part of CI). Nothing is asserted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use persyk::capture::open_file;
use persyk::capture::source::SourceEvent;
use persyk::local::whisper::{self, LocalModel};
use persyk::local::{LocalOptions, options_for};
use persyk::pipeline::{self, Recognition, RecordOptions, SourceKind};
use persyk::session::{LeafSelector, Store, store::Roots};

#[path = "../tests/support/mod.rs"]
mod support;

use support::corpus::{self, Set};
use support::{test_model_dir, wer};

const RATE: usize = 24_000;

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

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// Resets the peak RSS to the current RSS (Linux: `5` to `clear_refs`); returns the RSS (MB).
/// Memory freed by earlier steps is given back first (glibc keeps it otherwise, and a run
/// that reuses it would look smaller than one that does not).
fn reset_peak() -> f64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap memory; no pointer is involved.
    unsafe {
        libc::malloc_trim(0);
    }
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib("VmRSS:") as f64 / 1024.0
}

fn peak_mb() -> f64 {
    status_kib("VmHWM:") as f64 / 1024.0
}

fn options() -> LocalOptions {
    options_for(None, true)
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

/// `wav` encoded by ffmpeg as `ext` (mp3 or m4a) at 64 kbit/s.
fn encode(wav: &Path, ext: &str) -> PathBuf {
    let out = wav.with_extension(ext);
    let codec = if ext == "mp3" { "libmp3lame" } else { "aac" };
    let status = Command::new("ffmpeg")
        .args(["-nostdin", "-loglevel", "error", "-y", "-i"])
        .arg(wav)
        .args(["-c:a", codec, "-b:a", "64k"])
        .arg(&out)
        .status()
        .expect("ffmpeg (scripts/setup installs it)");
    assert!(status.success(), "ffmpeg failed on {}", wav.display());
    out
}

/// The app's file path: `open_file`, the pipeline to a session, on the device. Wall time,
/// CPU and transcript.
fn transcribe(model: &LocalModel, file: &Path) -> (Duration, Duration, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new(Roots::new(dir.path().to_path_buf(), Vec::new()).expect("roots"));
    let continuation = store
        .create_session()
        .and_then(|h| h.continuation(&LeafSelector::Default))
        .expect("session");
    let trace = std::env::var_os("PERSYK_BENCH_RSS_TRACE").is_some();
    let (trace_stop, trace_rx) = std::sync::mpsc::channel::<()>();
    let tracer = std::thread::spawn(move || {
        let mut series = Vec::new();
        while trace
            && trace_rx.recv_timeout(Duration::from_secs(5))
                == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        {
            series.push(status_kib("VmRSS:") / 1024);
        }
        series
    });
    let cpu0 = cpu_time();
    let started = Instant::now();
    let source = open_file(file, 0.0).expect("a file Persyk reads");
    let setup = whisper::setup(model, options(), Duration::from_secs(600)).expect("setup");
    let runtime = support::runtime();
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let t = runtime
        .block_on(pipeline::record_to(
            continuation,
            Recognition::Local(setup),
            source,
            SourceKind::Replay,
            stop_rx,
            RecordOptions {
                stop_cancels: true,
                ..RecordOptions::default()
            },
        ))
        .expect("recording");
    drop(trace_stop);
    if let Ok(series) = tracer.join()
        && !series.is_empty()
    {
        println!("     RSS every 5 s (MB): {series:?}");
    }
    (
        started.elapsed(),
        cpu_time().saturating_sub(cpu0),
        t.report.transcript().join(" "),
    )
}

/// Decodes `file` as fast as it goes (the source's own thread; this one only counts):
/// seconds of audio, wall time and CPU.
fn decode(file: &Path) -> (f64, Duration, Duration) {
    let cpu0 = cpu_time();
    let started = Instant::now();
    let mut source = open_file(file, 0.0).expect("a file Persyk reads");
    let format = source.format();
    let (tx, rx) = sync_channel(64);
    source.start(tx).expect("start");
    let mut samples = 0usize;
    loop {
        match rx.recv_timeout(Duration::from_secs(60)).expect("an event") {
            SourceEvent::Frames(f) => samples += f.len(),
            SourceEvent::Ended => break,
            SourceEvent::Error(e) => panic!("{}: {e}", file.display()),
        }
    }
    source.stop();
    let seconds = samples as f64 / f64::from(format.channels) / f64::from(format.rate_hz);
    (seconds, started.elapsed(), cpu_time().saturating_sub(cpu0))
}

/// The corpus clips joined (with a second of silence between) until `minutes` long.
fn long_audio(clips: &[corpus::Clip], minutes: u64) -> Vec<i16> {
    let want = RATE * 60 * minutes as usize;
    let mut out = Vec::with_capacity(want);
    'fill: loop {
        for c in clips {
            out.extend_from_slice(&c.samples);
            out.extend(std::iter::repeat_n(0i16, RATE));
            if out.len() >= want {
                break 'fill;
            }
        }
    }
    out.truncate(want);
    out
}

/// The references of `clips` joined in the order [`long_audio`] lays them out.
fn long_reference(clips: &[corpus::Clip], seconds: f64) -> String {
    let mut text = Vec::new();
    let mut at = 0.0;
    'fill: loop {
        for c in clips {
            if at + c.seconds() > seconds {
                break 'fill;
            }
            text.push(c.reference().unwrap_or_default().to_owned());
            at += c.seconds() + 1.0;
        }
    }
    text.join(" ")
}

fn main() {
    let part = std::env::var("PERSYK_BENCH_PART").unwrap_or_default();
    let minutes: u64 = std::env::var("PERSYK_BENCH_FILE_MINUTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let long_minutes: u64 = std::env::var("PERSYK_BENCH_LONG_MINUTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    // Another model for both sides (e.g. `ggml-base.bin`, which scripts/fetch-test-model
    // also fetches): a name in the test models' folder or a path.
    let model_path = std::env::var_os("PERSYK_BENCH_MODEL")
        .map_or_else(|| PathBuf::from("ggml-tiny.en.bin"), PathBuf::from);
    let model_path = test_model_dir().join(model_path);
    let model = LocalModel::load(&model_path).expect("the test model (scripts/fetch-test-model)");
    eprintln!("model: {}", model_path.display());
    let clips: Vec<corpus::Clip> = corpus::clips(Set::All)
        .into_iter()
        .filter(|c| c.reference().is_some_and(|r| r != "none"))
        .collect();
    assert!(!clips.is_empty(), "the corpus (scripts/fetch-corpus)");
    let dir = tempfile::tempdir().expect("tempdir");

    if part.is_empty() || part == "wer" {
        println!(
            "1. WER by format, {} corpus clips, tiny.en on the device",
            clips.len()
        );
        println!("{:<18} {:>7} {:>7} {:>7}", "clip", "WAV", "MP3", "M4A");
        let mut sums = [0.0f64; 3];
        for c in &clips {
            let wav = dir.path().join(format!("{}.wav", c.name()));
            write_wav(&wav, &c.samples);
            let files = [wav.clone(), encode(&wav, "mp3"), encode(&wav, "m4a")];
            let reference = c.reference().unwrap_or_default();
            let wers: Vec<f64> = files
                .iter()
                .map(|f| wer(reference, &transcribe(&model, f).2))
                .collect();
            for (s, w) in sums.iter_mut().zip(&wers) {
                *s += w;
            }
            println!(
                "{:<18} {:>7.3} {:>7.3} {:>7.3}",
                c.name(),
                wers[0],
                wers[1],
                wers[2]
            );
        }
        let n = clips.len() as f64;
        let [w, m, a] = sums.map(|s| s / n);
        println!(
            "mean               {w:>7.3} {m:>7.3} {a:>7.3}   (MP3 − WAV {:+.3}, M4A − WAV {:+.3}; target |Δ| ≤ 0.010)",
            m - w,
            a - w
        );
    }

    let long_wav = dir.path().join("long.wav");
    let audio = long_audio(&clips, minutes);
    write_wav(&long_wav, &audio);
    let long_mp3 = encode(&long_wav, "mp3");
    if part.is_empty() || part == "decode" {
        let long_m4a = encode(&long_wav, "m4a");
        println!("\n2. Decoding alone, {minutes} minutes of the corpus, one decoder thread");
        let (ws, wt, wc) = decode(&long_wav);
        for (name, file) in [("MP3 64k", &long_mp3), ("M4A/AAC 64k", &long_m4a)] {
            let (s, t, c) = decode(file);
            println!(
                "{name:<12} {:>7.0}× real time, {:>5.1} CPU s per audio hour   (WAV read, baseline: {:>6.0}× , {:.1} CPU s/h; target ≥ 100×)",
                s / t.as_secs_f64(),
                c.as_secs_f64() * 3600.0 / s,
                ws / wt.as_secs_f64(),
                wc.as_secs_f64() * 3600.0 / ws,
            );
        }
    }

    if part.is_empty() || part == "long" {
        println!("\n3. A long file through the pipeline (MP3 64k), beside one whole-file call");
        let ctx = corpus::whole_file_context(&model_path);
        let threads = options().threads;
        let lengths = if long_minutes == minutes {
            vec![minutes]
        } else {
            vec![minutes, long_minutes]
        };
        for m in lengths {
            let (file, samples) = if m == minutes {
                (long_mp3.clone(), audio.clone())
            } else {
                let a = long_audio(&clips, m);
                let w = dir.path().join(format!("long{m}.wav"));
                write_wav(&w, &a);
                (encode(&w, "mp3"), a)
            };
            let seconds = samples.len() as f64 / RATE as f64;
            let reference = long_reference(&clips, seconds);
            drop(samples);
            let idle = reset_peak();
            let (wall, cpu, text) = transcribe(&model, &file);
            let ours_peak = peak_mb() - idle;
            let ours_wer = wer(&reference, &text);
            if let Some(dump) = std::env::var_os("PERSYK_BENCH_DUMP") {
                let dump = Path::new(&dump);
                let _ = std::fs::write(dump.join(format!("reference-{m}.txt")), &reference);
                let _ = std::fs::write(dump.join(format!("persyk-{m}.txt")), &text);
            }
            if std::env::var_os("PERSYK_BENCH_ONLY_OURS").is_some() {
                println!(
                    "{m:>3} min  Persyk: WER {ours_wer:.3}, {:.0} s, CPU {:.0} s",
                    wall.as_secs_f64(),
                    cpu.as_secs_f64()
                );
                continue;
            }
            // The baseline decodes the WAV into memory whole, as a one-call tool does.
            let samples = long_audio(&clips, m);
            let idle = reset_peak();
            let cpu0 = cpu_time();
            let started = Instant::now();
            let whole = corpus::whole_file_text(&ctx, &samples, threads, Some("en"));
            let whole_wall = started.elapsed();
            let whole_cpu = cpu_time().saturating_sub(cpu0);
            let whole_peak = peak_mb() - idle;
            if let Some(dump) = std::env::var_os("PERSYK_BENCH_DUMP") {
                let _ = std::fs::write(Path::new(&dump).join(format!("whole-{m}.txt")), &whole);
            }
            println!(
                "{m:>3} min  Persyk: WER {ours_wer:.3}, {:.0} s, CPU {:.0} s, memory over idle {ours_peak:.0} MB   \
                 whole-file call: WER {:.3}, {:.0} s, CPU {:.0} s, memory {whole_peak:.0} MB   \
                 (ΔWER {:+.3}, CPU ×{:.2})",
                wall.as_secs_f64(),
                cpu.as_secs_f64(),
                wer(&reference, &whole),
                whole_wall.as_secs_f64(),
                whole_cpu.as_secs_f64(),
                ours_wer - wer(&reference, &whole),
                cpu.as_secs_f64() / whole_cpu.as_secs_f64().max(0.001),
            );
        }
    }
}
