//! Regressions in the capture side of Persyk.

#[path = "../fake_cli/mod.rs"]
pub(crate) mod fake_cli;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use persyk::capture::preroll::WarmInput;
use persyk::capture::source::{AudioSource, FileSource, SourceError, SourceEvent, SourceFormat};
use persyk::pipeline::Transcription;
use persyk::pipeline::{self, RecordOptions, SamplesSource, SourceKind};
use persyk::realtime::fake::{self, FakeServer, Scenario};
use persyk::realtime::protocol::Settings;
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store, scan_path};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Shared rig: a temp root, the in-process fake provider on loopback, one session.

/// A fake that transcribes nothing and closes shortly after the client's commit.
const QUIET: &str =
    r#"{"name": "quiet", "connections": [{"utterances": [], "close_after_commit_ms": 200}]}"#;

struct Rig {
    _tmp: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    server: FakeServer,
    store: Store,
}

impl Rig {
    fn new() -> Rig {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().canonicalize().expect("root");
        let rt = crate::realtime::runtime();
        let scenario = Scenario::from_json(QUIET).expect("scenario");
        let server = rt.block_on(fake::spawn(scenario)).expect("fake");
        let store = Store::new(Roots::new(root, Vec::new()).expect("roots"));
        Rig {
            _tmp: tmp,
            rt,
            server,
            store,
        }
    }

    fn settings(&self) -> Settings {
        Settings {
            base_url: format!("ws://{}/v1", self.server.addr),
            ..Settings::default()
        }
    }

    /// Records `source` until it ends (nobody presses Stop); returns the transcription and
    /// the session folder.
    fn record(&self, source: Box<dyn AudioSource>, kind: SourceKind) -> (Transcription, PathBuf) {
        self.record_with(source, kind, None, RecordOptions::default())
    }

    /// Records `source` with `options`, pressing Stop after `stop_after` if given.
    fn record_with(
        &self,
        source: Box<dyn AudioSource>,
        kind: SourceKind,
        stop_after: Option<Duration>,
        options: RecordOptions,
    ) -> (Transcription, PathBuf) {
        let handle = self.store.create_session().expect("session");
        let continuation = handle
            .continuation(&LeafSelector::Default)
            .expect("continuation");
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        if let Some(after) = stop_after {
            let stop_tx = stop_tx.clone();
            self.rt.spawn(async move {
                tokio::time::sleep(after).await;
                let _ = stop_tx.send(true);
            });
        }
        let t = self
            .rt
            .block_on(pipeline::record_with(
                continuation,
                self.settings(),
                "sk-test-regression".into(),
                source,
                kind,
                stop_rx,
                options,
            ))
            .expect("the recording ends");
        drop(stop_tx);
        (t, handle.dir().to_path_buf())
    }
}

/// The one `recording.finished` of a session folder, after checking the file is valid.
fn finished(session: &Path) -> Value {
    let file = session.join("session.jsonl");
    let index = scan_path(&file).expect("scan");
    assert!(index.is_valid(), "{:?}", index.diagnostics());
    let text = std::fs::read_to_string(&file).expect("read");
    let all: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .filter(|v| v["type"] == "recording.finished")
        .collect();
    assert_eq!(all.len(), 1, "one recording.finished: {text}");
    all[0].clone()
}

fn gap_reasons(finished: &Value) -> Vec<String> {
    finished["gaps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| g["reason"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn tone(samples: usize) -> Vec<i16> {
    (0..samples)
        .map(|i| ((i as f64 * 440.0 * std::f64::consts::TAU / 24_000.0).sin() * 8000.0) as i16)
        .collect()
}

fn write_wav(path: &Path, samples: &[i16]) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 24_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).expect("wav");
    for &s in samples {
        w.write_sample(s).expect("sample");
    }
    w.finalize().expect("finalize");
}

fn persyk() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_persyk"));
    c.stdin(Stdio::null());
    c
}

// ---------------------------------------------------------------------------------------------
// Issue #16, item 5: a failed source is saved as complete.

/// A source whose thread delivers 500 ms of tone and then panics, as `FileSource` did in
/// `Duration::from_secs_f64` with `--realtime-factor 1e-300`.
struct PanickingSource {
    worker: Option<std::thread::JoinHandle<()>>,
}

impl AudioSource for PanickingSource {
    fn format(&self) -> SourceFormat {
        SourceFormat {
            rate_hz: 24_000,
            channels: 1,
        }
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        self.worker = Some(std::thread::spawn(move || {
            for chunk in tone(12_000).chunks(2_400) {
                let frames = chunk.iter().map(|&s| f32::from(s) / 32768.0).collect();
                events.send(SourceEvent::Frames(frames)).expect("send");
            }
            panic!("the source thread dies without a word");
        }));
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

#[test]
fn issue16_05_a_source_that_dies_is_saved_as_incomplete_with_its_reason() {
    let rig = Rig::new();
    let (t, session) = rig.record(
        Box::new(PanickingSource { worker: None }),
        SourceKind::Replay,
    );
    assert_eq!(t.halted.as_deref(), Some("capture.source-disconnected"));
    let fin = finished(&session);
    assert_eq!(fin["outcome"], "incomplete", "{fin}");
    assert!(
        gap_reasons(&fin).contains(&"capture.source-disconnected".to_owned()),
        "the reason is recorded: {fin}"
    );
    assert_eq!(fin["durationMs"], 500, "{fin}");
}

#[test]
fn issue16_05_paced_sources_survive_extreme_factors() {
    let tmp = tempfile::tempdir().expect("tmp");
    let path = tmp.path().join("one-second.wav");
    write_wav(&path, &tone(24_000));
    for factor in [1e-300, f64::MIN_POSITIVE, 5e-324] {
        let file: Box<dyn AudioSource> =
            Box::new(FileSource::open(&path, factor).expect("file source"));
        let samples: Box<dyn AudioSource> = Box::new(SamplesSource::new(tone(24_000), factor));
        for mut source in [file, samples] {
            let (tx, rx) = sync_channel(16);
            source.start(tx).expect("start");
            assert!(
                matches!(
                    rx.recv_timeout(Duration::from_secs(10)),
                    Ok(SourceEvent::Frames(_))
                ),
                "the first block goes out at once"
            );
            // The next block is due in practically forever: the source waits (it does not
            // die and close its channel) until it is stopped.
            assert_eq!(
                rx.recv_timeout(Duration::from_millis(300)),
                Err(RecvTimeoutError::Timeout),
                "factor {factor:e}: the source waits for the next block"
            );
            source.stop();
            assert!(matches!(
                rx.recv_timeout(Duration::from_secs(10)),
                Err(RecvTimeoutError::Disconnected)
            ));
        }
    }
}

/// Stderr of `persyk ARGS` run with a key, a temp root and no stdin, and its exit code.
fn run_refused(args: &[&str], root: &Path) -> (Option<i32>, String) {
    let out = persyk()
        .args(args)
        .arg("--root")
        .arg(root)
        .env("OPENAI_API_KEY", "sk-test-arguments-0123456789")
        .output()
        .expect("persyk");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sessions_in(root: &Path) -> usize {
    std::fs::read_dir(root).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.path().join("session.jsonl").exists())
            .count()
    })
}

#[test]
fn issue16_05_transcribe_refuses_insane_realtime_factors() {
    let tmp = tempfile::tempdir().expect("tmp");
    let input = tmp.path().join("one-second.wav");
    write_wav(&input, &tone(24_000));
    let root = tmp.path().join("root");
    let fake = fake_cli::FakeProvider::start("normal-dictation");
    let input_arg = input.to_str().expect("utf-8 path");
    for factor in ["1e-300", "-1", "NaN", "inf", "1e9", "0.000001"] {
        let (code, stderr) = run_refused(
            &[
                "transcribe",
                input_arg,
                "--provider-url",
                &fake.url,
                &format!("--realtime-factor={factor}"),
            ],
            &root,
        );
        assert_eq!(code, Some(2), "--realtime-factor {factor}: {stderr}");
        assert!(
            stderr.contains("cli.invalid-argument") && stderr.contains("--realtime-factor"),
            "--realtime-factor {factor}: {stderr}"
        );
    }
    assert_eq!(sessions_in(&root), 0, "nothing was recorded");
}

#[cfg(feature = "app")]
#[test]
fn issue16_05_dictate_refuses_insane_seconds_and_pre_roll() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("root");
    let cases: [(&[&str], &str); 7] = [
        (&["--seconds", "inf"], "--seconds"),
        (&["--seconds", "NaN"], "--seconds"),
        (&["--seconds", "0"], "--seconds"),
        (&["--seconds=-3"], "--seconds"),
        (&["--seconds", "1e300"], "--seconds"),
        (&["--seconds", "5", "--pre-roll-ms", "501"], "--pre-roll-ms"),
        (
            &["--seconds", "5", "--pre-roll-ms", "4294967295"],
            "--pre-roll-ms",
        ),
    ];
    for (args, flag) in cases {
        let mut all = vec!["dictate", "--provider-url", "ws://127.0.0.1:9/v1"];
        all.extend_from_slice(args);
        let (code, stderr) = run_refused(&all, &root);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cli.invalid-argument") && stderr.contains(flag),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(sessions_in(&root), 0, "nothing was recorded");
}

// ---------------------------------------------------------------------------------------------
// Issue #16: WAV data beyond 4 GiB cannot be written.

#[test]
fn issue16_wav_length_cap_ends_the_recording_cleanly() {
    let rig = Rig::new();
    // 3 s of input against a cap of 1 s + 500 samples (the real cap is ~24.8 h).
    let cap_bytes = 24_000 * 2 + 1_000;
    let input = tone(72_000);
    let (t, session) = rig.record_with(
        Box::new(SamplesSource::new(input.clone(), 0.0)),
        SourceKind::Replay,
        None,
        RecordOptions {
            max_data_bytes: cap_bytes,
            ..RecordOptions::default()
        },
    );
    assert_eq!(t.halted.as_deref(), Some("capture.max-length"));
    assert_eq!(t.duration_ms, 24_500 * 1000 / 24_000);
    let fin = finished(&session);
    assert_eq!(fin["outcome"], "incomplete", "{fin}");
    assert_eq!(gap_reasons(&fin), ["capture.max-length"], "{fin}");
    assert_eq!(fin["durationMs"], t.duration_ms, "{fin}");
    let wav = session
        .join("assets")
        .join(format!("{}.wav", t.recording_id));
    let bytes = std::fs::read(&wav).expect("wav");
    assert_eq!(bytes.len() as u64, 44 + cap_bytes, "nothing past the cap");
    let riff = u32::from_le_bytes(bytes[4..8].try_into().expect("riff size"));
    let data = u32::from_le_bytes(bytes[40..44].try_into().expect("data size"));
    assert_eq!(u64::from(riff), bytes.len() as u64 - 8, "RIFF size");
    assert_eq!(u64::from(data), cap_bytes, "data size");
    let got: Vec<i16> = hound::WavReader::open(&wav)
        .expect("the WAV reads back")
        .samples::<i16>()
        .map(|s| s.expect("sample"))
        .collect();
    assert_eq!(got, input[..24_500], "the first 1.02 s, exactly");
}

// ---------------------------------------------------------------------------------------------
// Issue #16, item 13: pre-roll keeps a dead microphone.

/// A microphone double: 48 kHz mono tone in real time, 20 ms per block. With `die_after`
/// set it reports a fatal device error after that long and delivers nothing more (its
/// stream object stays, as cpal's does). `reopenable` decides what [`AudioSource::reopen`]
/// offers: a healthy microphone, counted in `opened`.
struct FakeMic {
    die_after: Option<Duration>,
    reopenable: bool,
    opened: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl FakeMic {
    fn new(die_after: Option<Duration>, reopenable: bool, opened: Arc<AtomicUsize>) -> FakeMic {
        opened.fetch_add(1, Ordering::SeqCst);
        FakeMic {
            die_after,
            reopenable,
            opened,
            stop: Arc::new(AtomicBool::new(false)),
            worker: None,
        }
    }
}

impl AudioSource for FakeMic {
    fn format(&self) -> SourceFormat {
        SourceFormat {
            rate_hz: 48_000,
            channels: 1,
        }
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        let (stop, die_after) = (self.stop.clone(), self.die_after);
        self.worker = Some(std::thread::spawn(move || {
            let started = Instant::now();
            let mut block = 0u64;
            let mut dead = false;
            while !stop.load(Ordering::SeqCst) {
                if !dead && die_after.is_some_and(|d| started.elapsed() >= d) {
                    dead = true;
                    let _ = events.try_send(SourceEvent::Error(SourceError::StreamFailed {
                        detail: "device-not-available",
                    }));
                }
                if !dead {
                    let frames = (0..960)
                        .map(|i| {
                            let n = (block * 960 + i) as f32;
                            (n * 440.0 * std::f32::consts::TAU / 48_000.0).sin() * 0.25
                        })
                        .collect();
                    let _ = events.try_send(SourceEvent::Frames(frames));
                    block += 1;
                }
                let due = Duration::from_millis(20 * block.max(1));
                std::thread::sleep(
                    due.saturating_sub(started.elapsed())
                        .max(Duration::from_millis(1)),
                );
            }
        }));
        Ok(())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }

    fn reopen(&self) -> Option<Result<Box<dyn AudioSource>, SourceError>> {
        self.reopenable.then(|| {
            Ok(Box::new(FakeMic::new(None, true, self.opened.clone())) as Box<dyn AudioSource>)
        })
    }
}

impl Drop for FakeMic {
    fn drop(&mut self) {
        AudioSource::stop(self);
    }
}

/// Waits (up to 10 s) until the warm input has noticed its device died.
fn wait_until_lost(warm: &WarmInput) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while warm.lost().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        warm.lost().map(|e| e.code()),
        Some("capture.stream-failed"),
        "the fatal error while idle is noticed, not dropped"
    );
}

#[test]
fn issue16_13_a_warm_microphone_lost_while_idle_is_reopened() {
    let rig = Rig::new();
    let opened = Arc::new(AtomicUsize::new(0));
    let mic = FakeMic::new(Some(Duration::from_millis(200)), true, opened.clone());
    let warm = WarmInput::start(Box::new(mic), Duration::from_millis(300)).expect("warm");
    // The device dies while nobody records; the warm input notices.
    wait_until_lost(&warm);
    let (t, session) = rig.record_with(
        Box::new(warm.recording_source()),
        SourceKind::Live,
        Some(Duration::from_millis(2_500)),
        RecordOptions::default(),
    );
    assert_eq!(t.halted, None, "the reopened microphone records");
    assert_eq!(opened.load(Ordering::SeqCst), 2, "opened again once");
    assert_eq!(warm.lost(), None, "the fresh input is healthy");
    let fin = finished(&session);
    assert_eq!(fin["outcome"], "complete", "{fin}");
    assert!(t.duration_ms >= 1_000, "{} ms", t.duration_ms);
    warm.stop();
}

#[test]
fn issue16_13_a_lost_warm_microphone_is_named_not_blamed_on_permission() {
    let rig = Rig::new();
    let opened = Arc::new(AtomicUsize::new(0));
    let mic = FakeMic::new(Some(Duration::from_millis(200)), false, opened.clone());
    let warm = WarmInput::start(Box::new(mic), Duration::from_millis(300)).expect("warm");
    wait_until_lost(&warm);
    let (t, session) = rig.record_with(
        Box::new(warm.recording_source()),
        SourceKind::Live,
        Some(Duration::from_secs(10)),
        RecordOptions::default(),
    );
    assert_eq!(t.halted.as_deref(), Some("capture.device-lost"));
    let fin = finished(&session);
    assert_eq!(fin["outcome"], "incomplete", "{fin}");
    assert_eq!(gap_reasons(&fin), ["capture.device-lost"], "{fin}");
    warm.stop();
}

// ---------------------------------------------------------------------------------------------
// Issue #11, item 4: one CoreAudio overload ends the recording.

/// A device double driving the real input callbacks ([`InputLink`]) the way cpal does:
/// 48 kHz stereo `i16` in 20 ms buffers, in real time, with a processor-overload (`Xrun`)
/// error after the given buffers. No frame is lost on Persyk's side.
#[cfg(feature = "app")]
struct OverloadingDevice {
    overload_after_blocks: Vec<u64>,
    stop: Arc<AtomicBool>,
    link: Option<persyk::capture::source::InputLink>,
    worker: Option<std::thread::JoinHandle<()>>,
}

#[cfg(feature = "app")]
impl AudioSource for OverloadingDevice {
    fn format(&self) -> SourceFormat {
        SourceFormat {
            rate_hz: 48_000,
            channels: 2,
        }
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        let (link, mut callback) =
            persyk::capture::source::InputLink::start(self.format(), events)?;
        let errors = callback.errors();
        self.link = Some(link);
        let stop = self.stop.clone();
        let overloads = self.overload_after_blocks.clone();
        self.worker = Some(std::thread::spawn(move || {
            let started = Instant::now();
            let mut buffer = vec![0i16; 960 * 2];
            let mut block = 0u64;
            while !stop.load(Ordering::SeqCst) {
                for (i, frame) in buffer.chunks_exact_mut(2).enumerate() {
                    let n = (block * 960 + i as u64) as f32;
                    let s = ((n * 440.0 * std::f32::consts::TAU / 48_000.0).sin() * 8000.0) as i16;
                    frame.copy_from_slice(&[s, s / 2]);
                }
                callback.on_data(&buffer);
                if overloads.contains(&block) {
                    errors.on_error(&cpal::Error::new(cpal::ErrorKind::Xrun));
                }
                block += 1;
                let due = Duration::from_millis(20 * block);
                std::thread::sleep(due.saturating_sub(started.elapsed()));
            }
        }));
        Ok(())
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
        if let Some(mut link) = self.link.take() {
            link.stop();
        }
    }
}

#[cfg(feature = "app")]
#[test]
fn issue11_04_an_input_overload_without_loss_does_not_end_the_recording() {
    let rig = Rig::new();
    let device = OverloadingDevice {
        overload_after_blocks: vec![10, 11, 40],
        stop: Arc::new(AtomicBool::new(false)),
        link: None,
        worker: None,
    };
    let (t, session) = rig.record_with(
        Box::new(device),
        SourceKind::Live,
        Some(Duration::from_millis(2_000)),
        RecordOptions::default(),
    );
    assert_eq!(t.halted, None, "an overload alone is no halt");
    assert_eq!(t.input_overloads, 3, "every overload is counted");
    let fin = finished(&session);
    assert_eq!(fin["outcome"], "complete", "{fin}");
    assert!(t.duration_ms >= 1_000, "{} ms", t.duration_ms);
}
