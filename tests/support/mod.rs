//! Helpers shared by test files (declared with `mod support;`). Each file uses a part of
//! them, so unused items are expected per test binary.
#![allow(dead_code)]

pub mod chat;
pub mod corpus;
pub mod events;
pub mod llm;
pub mod pulse;
pub mod update;

use std::path::{Path, PathBuf};

use persyk::audio::convert::Converter;
use persyk::realtime::fake::FakeServer;
use persyk::realtime::protocol::{Mode, Settings};
use persyk::session::store::{Continuation, Roots};
use persyk::session::{LeafSelector, Store};

/// Where `scripts/fetch-test-model` keeps the tiny.en model and jfk.wav.
pub fn test_model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-model")
}

/// The tiny.en test model (fails with how to get it when missing).
pub fn test_model() -> PathBuf {
    let path = test_model_dir().join("ggml-tiny.en.bin");
    assert!(
        path.exists(),
        "the test model is missing: run scripts/fetch-test-model (scripts/setup does)"
    );
    path
}

/// A file `scripts/make-test-media` made (fails with how to get it when missing).
pub fn test_media(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/test-media")
        .join(name);
    assert!(
        path.exists(),
        "the test media are missing: run scripts/make-test-media (scripts/setup does)"
    );
    path
}

/// The tokio runtime the tests and benches drive the pipeline on: two workers, as many as
/// the CI machine has cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// One whisper.cpp inference at a time in a test binary, for the tests that hold it: ggml's
/// threads spin while they wait, so decodes side by side on the CI machine's 2 cores take
/// far longer than one after the other (tests/local_whisper.rs: 229 s in parallel, 80 s
/// one at a time).
pub fn whisper_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The multilingual Whisper base model `scripts/fetch-test-model` builds (fails with how to
/// get it when missing).
pub fn multilingual_model() -> PathBuf {
    let path = test_model_dir().join("ggml-base.bin");
    assert!(
        path.exists(),
        "the multilingual test model is missing: run scripts/fetch-test-model (scripts/setup does)"
    );
    path
}

/// `text` spoken by espeak-ng's `voice` into `dir/name.wav`, as Persyk records it.
pub fn espeak_voice_as_recorded(dir: &Path, voice: &str, name: &str, text: &str) -> Vec<i16> {
    let path = dir.join(format!("{name}.wav"));
    let status = std::process::Command::new("espeak-ng")
        .args(["-v", voice, "-s", "150", "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng missing: run scripts/setup (apt-get install -y espeak-ng)");
    assert!(status.success(), "espeak-ng failed");
    wav_as_recorded(&path)
}

/// What jfk.wav says.
pub const JFK: &str = "And so my fellow Americans, ask not what your country can do for you, \
                       ask what you can do for your country.";

/// jfk.wav as Persyk records it.
pub fn jfk_as_recorded() -> Vec<i16> {
    wav_as_recorded(&test_model_dir().join("jfk.wav"))
}

/// Lowercased words without punctuation (apostrophes kept), for [`wer`].
pub use persyk::local::check::words;

/// Word error rate: word-level edit distance over the reference length.
pub fn wer(reference: &str, hypothesis: &str) -> f64 {
    let (r, h) = (words(reference), words(hypothesis));
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for i in 1..=r.len() {
        let mut cur = vec![i; h.len() + 1];
        for j in 1..=h.len() {
            let sub = prev[j - 1] + usize::from(r[i - 1] != h[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[h.len()] as f64 / r.len().max(1) as f64
}

/// A WAV file as Persyk records it: through the capture converter to 24 kHz mono PCM16.
pub fn wav_as_recorded(path: &Path) -> Vec<i16> {
    let mut reader =
        hound::WavReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let spec = reader.spec();
    let frames: Vec<f32> = reader
        .samples::<i16>()
        .map(|s| f32::from(s.expect("sample")) / 32768.0)
        .collect();
    let mut conv = Converter::new(spec.sample_rate, spec.channels).expect("converter");
    let mut out = Vec::new();
    conv.push(&frames, &mut out);
    conv.flush(&mut out);
    out
}

/// `text` spoken by espeak-ng into `dir/name.wav`, as Persyk records it.
pub fn espeak_as_recorded(dir: &Path, name: &str, text: &str) -> Vec<i16> {
    let path = dir.join(format!("{name}.wav"));
    let status = std::process::Command::new("espeak-ng")
        .arg("-w")
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng missing: run scripts/setup (apt-get install -y espeak-ng)");
    assert!(status.success(), "espeak-ng failed");
    wav_as_recorded(&path)
}

/// Writes `samples` to `path` as Persyk records: a 24 kHz mono PCM16 WAV.
pub fn write_wav_24k(path: &Path, samples: &[i16]) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 24_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec)
        .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    for &s in samples {
        w.write_sample(s).expect("write a sample");
    }
    w.finalize().expect("finalize the WAV");
}

/// Every entry line of the `session.jsonl` in folder `session` after the header, parsed.
pub fn entries(session: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(session.join("session.jsonl"))
        .expect("read session.jsonl")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("entry is JSON"))
        .collect()
}

/// Commits `text` as a spoken user message (as the recognizer does) and returns it as a
/// clean-up source.
pub fn say(c: &mut Continuation, text: &str) -> persyk::cleanup::Source {
    use persyk::session::format::{Block, EntryBody, Message, Role};
    let id = c
        .append_one(EntryBody::Message(Message::new(
            Role::User,
            vec![Block::text(text)],
            1,
        )))
        .expect("commit the spoken words");
    persyk::cleanup::Source {
        id,
        text: text.to_owned(),
    }
}

/// `persyk check` accepts the session folder `dir`.
pub fn check_session(dir: &Path) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_persyk"))
        .arg("check")
        .arg(dir)
        .output()
        .expect("run persyk check");
    assert!(out.status.success(), "{}", show(&out));
}

/// Deterministic xorshift64* PRNG.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A new session under `root` (created if missing): its folder and a continuation on its
/// default leaf.
pub fn new_session(root: &Path) -> (PathBuf, Continuation) {
    let store = Store::new(Roots::new(root.to_path_buf(), Vec::new()).expect("roots"));
    let handle = store.create_session().expect("session");
    let continuation = handle
        .continuation(&LeafSelector::Default)
        .expect("continuation");
    (handle.dir().to_path_buf(), continuation)
}

/// A fresh store in a temp dir (its `sessions` folder), a new session in it, the session's
/// folder and a continuation at its default leaf. Keep the temp dir until the end.
pub fn fresh_session() -> (tempfile::TempDir, PathBuf, Continuation) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (dir, continuation) = new_session(&tmp.path().join("sessions"));
    (tmp, dir, continuation)
}

/// Realtime settings for the fake provider at `server` in `mode`. The scenarios script
/// server-VAD turns, which `gpt-transcribe` keeps (the default `gpt-live-transcribe` takes
/// client turns).
pub fn fake_settings(server: &FakeServer, mode: Mode) -> Settings {
    Settings {
        base_url: format!("ws://{}/v1", server.addr),
        mode,
        transcription_model: "gpt-transcribe".into(),
        ..Settings::default()
    }
}

/// A path in the repository.
pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A finished process's status, stdout and stderr, for assertion messages.
pub fn show(out: &std::process::Output) -> String {
    format!(
        "status: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
