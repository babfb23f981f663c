//! End to end: audio → the realtime engine → a real websocket on 127.0.0.1 → the scripted fake
//! provider (`persyk::realtime::fake`) → a fresh session folder, checked against the contract
//! (`session-format.md`, "Realtime retention and ordered publication").
//!
//! Every scenario in `tests/scenarios/` runs through the file pipeline
//! (`pipeline::transcribe_samples`) or, for removals, through the engine directly with a live
//! capture built here; three runs go through the binaries (`persyk fake-provider` +
//! `persyk transcribe` + `persyk check`). Extra scenarios that the stock ones cannot express
//! are inline JSON (not files: `tests/fake_provider.rs` requires every scenario file to be one
//! it tests).
//!
//! Each run checks: the session validates; the projected conversation is in provider order;
//! failures and unresolved items are gaps, never text; `recording.finished.outcome`; no
//! planted secret in any byte under the session folder (or in the CLI's output); every
//! outgoing append has `audio: null` and one media reference whose bytes equal what was sent
//! (from the fake's log and from the streamed samples); provider output audio lives in
//! protocol assets; the WAV reads back with Python's `wave` and `sox`; and the fake's dump
//! validates with `scripts/validate-realtime-events.py` when `python3 -c "import openai"`
//! works (otherwise a note is printed and only that part is skipped).
//!
//! Audio is PCM16 LE mono 24 kHz noise over a tone, different in every 100 ms chunk, so a
//! media reference that points at the wrong range cannot match by accident.

mod fake_cli;
mod support;

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use fake_cli::{DumpingFake, scenario, scenario_path};
// The scenarios script server-VAD turns: `gpt-transcribe` keeps them (see `live_*` tests
// for the default, client turns).
use persyk::pipeline;
use persyk::pipeline::{FileOptions, Transcription};
use persyk::realtime::engine::{self, EngineHandle};
use persyk::realtime::fake::{self, ConnectionEnd, FakeLog, FakeServer, Scenario};
use persyk::realtime::protocol::{Mode, Settings};
use persyk::recognize::{
    AudioChunk, CaptureLink, EngineReport, EngineState, EngineView, RemovalOutcome, WavRange,
};
use persyk::session::assets::CaptureAsset;
use persyk::session::format::{EntryBody, Outcome, RecordingFinished, RecordingStarted};
use persyk::session::store::{Continuation, new_id};
use persyk::session::{LeafSelector, SessionIndex, project, scan_path};
use serde_json::Value;
use support::{fake_settings as settings, fresh_session};
use tokio::sync::watch;
use tokio::time::timeout;

/// The API key handed to the engine: it must never reach a file or the CLI's output.
const KEY: &str = "sk-test-PLANTED0123456789abcdef";
/// Every planted value in the scenarios (and the key above) contains this, in some case.
const PLANTED: &str = "planted";
const RATE: u32 = 24_000;
/// 100 ms, what the file pipeline sends per append.
const CHUNK_SAMPLES: usize = 2_400;
const CHUNK_BYTES: usize = CHUNK_SAMPLES * 2;
const WAV_HEADER: u64 = 44;
/// Deadline of one whole run.
const RUN: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------------
// Audio
// ---------------------------------------------------------------------------------------------

/// `ms` of noise over a 440 Hz tone (xorshift, deterministic per seed).
fn audio(ms: u64, seed: u32) -> Vec<i16> {
    let mut x = seed | 1;
    (0..ms as usize * (RATE as usize / 1000))
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let tone = (i as f64 * std::f64::consts::TAU * 440.0 / f64::from(RATE)).sin() * 6000.0;
            let noise = f64::from(x % 4001) - 2000.0;
            (tone + noise) as i16
        })
        .collect()
}

fn pcm(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// The bytes of each append the file pipeline makes of `samples`, in order.
fn chunks(samples: &[i16]) -> Vec<Vec<u8>> {
    samples.chunks(CHUNK_SAMPLES).map(pcm).collect()
}

// ---------------------------------------------------------------------------------------------
// Scenarios and runs
// ---------------------------------------------------------------------------------------------

fn inline(json: &str) -> Scenario {
    Scenario::from_json(json).expect("inline scenario parses")
}

/// One file-pipeline run.
struct Run {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    samples: Vec<i16>,
    transcription: Transcription,
    log: FakeLog,
}

/// Streams `ms` of audio through `transcribe_samples` against the fake; then waits for the
/// fake (shutting it down first when `more_connections`: the engine does not reconnect).
async fn pipeline(scenario: Scenario, mode: Mode, ms: u64, factor: f64) -> Run {
    let samples = audio(ms, 0x5eed_1234);
    pipeline_with(scenario, samples, factor, |server| settings(server, mode)).await
}

/// [`pipeline`] with given samples and settings.
async fn pipeline_with(
    scenario: Scenario,
    samples: Vec<i16>,
    factor: f64,
    settings: impl FnOnce(&FakeServer) -> Settings,
) -> Run {
    let more_connections = scenario.connections.len() > 1;
    let server = fake::spawn(scenario).await.expect("fake binds");
    let (tmp, dir, continuation) = fresh_session();
    let transcription = timeout(
        RUN,
        pipeline::transcribe_samples(
            continuation,
            settings(&server),
            KEY.to_owned(),
            &samples,
            FileOptions {
                realtime_factor: factor,
            },
        ),
    )
    .await
    .expect("the pipeline finishes in time")
    .expect("the pipeline runs");
    if more_connections {
        server.shutdown();
    }
    let log = server
        .finish(Duration::from_secs(5))
        .await
        .expect("the fake finishes");
    Run {
        _tmp: tmp,
        dir,
        samples,
        transcription,
        log,
    }
}

// ---------------------------------------------------------------------------------------------
// Reading a session back
// ---------------------------------------------------------------------------------------------

struct Session {
    dir: PathBuf,
    index: SessionIndex,
    /// Entry lines (the header excluded), in file order.
    entries: Vec<Value>,
    raw_lines: Vec<String>,
    by_id: HashMap<String, usize>,
}

fn ty(v: &Value) -> &str {
    v["type"].as_str().unwrap_or("")
}

fn text_of(message: &Value) -> String {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect()
}

impl Session {
    /// Scans the folder's `session.jsonl`; asserts it is valid.
    fn load(dir: &Path) -> Session {
        let file = dir.join("session.jsonl");
        let index = scan_path(&file).expect("scan session");
        assert!(
            index.is_valid(),
            "{} does not validate: {:?}",
            file.display(),
            index.diagnostics()
        );
        let text = std::fs::read_to_string(&file).expect("read session");
        let raw_lines: Vec<String> = text.lines().skip(1).map(str::to_owned).collect();
        let entries: Vec<Value> = raw_lines
            .iter()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect();
        let by_id = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e["id"].as_str().unwrap_or("").to_owned(), i))
            .collect();
        Session {
            dir: dir.to_owned(),
            index,
            entries,
            raw_lines,
            by_id,
        }
    }

    /// (role, text) of the projected conversation at the default leaf.
    fn conversation(&self) -> Vec<(String, String)> {
        let projection = project(&self.index, &LeafSelector::Default).expect("projects");
        projection
            .conversation
            .iter()
            .map(|&p| {
                let e = &self.entries[self.by_id[&*self.index.id(p)]];
                (
                    e["message"]["role"].as_str().unwrap_or("").to_owned(),
                    text_of(&e["message"]),
                )
            })
            .collect()
    }

    fn of_type<'a>(&'a self, t: &'a str) -> impl Iterator<Item = (usize, &'a Value)> + 'a {
        self.entries
            .iter()
            .enumerate()
            .filter(move |(_, e)| ty(e) == t)
    }

    /// Every `message` entry in file order, removed or not.
    fn messages(&self) -> Vec<(usize, &Value)> {
        self.of_type("message").collect()
    }

    /// `realtime_event`s whose payload type is `payload_type`, in file order.
    fn events<'a>(
        &'a self,
        direction: &'a str,
        payload_type: &'a str,
    ) -> impl Iterator<Item = (usize, &'a Value)> + 'a {
        self.of_type("realtime_event").filter(move |(_, e)| {
            e["direction"] == direction && e["payload"]["type"] == payload_type
        })
    }

    fn finished(&self) -> &Value {
        let all: Vec<_> = self.of_type("recording.finished").collect();
        assert_eq!(all.len(), 1, "one recording.finished");
        all[0].1
    }

    fn outcome(&self) -> &str {
        self.finished()["outcome"].as_str().unwrap_or("")
    }

    /// (itemId, reason) of the recording's gaps.
    fn gaps(&self) -> Vec<(String, String)> {
        self.finished()["gaps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| {
                (
                    g["itemId"].as_str().unwrap_or("").to_owned(),
                    g["reason"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    /// The capture WAV's name (`recording.started.asset` without `assets/`).
    fn wav_name(&self) -> Option<String> {
        self.of_type("recording.started").next().map(|(_, e)| {
            e["asset"]
                .as_str()
                .and_then(|a| a.strip_prefix("assets/"))
                .expect("assets/<name>")
                .to_owned()
        })
    }

    fn asset_path(&self, reference: &str) -> PathBuf {
        let name = reference
            .strip_prefix("assets/")
            .unwrap_or_else(|| panic!("asset path {reference} is not assets/<name>"));
        assert!(!name.contains('/') && !name.contains(".."), "{reference}");
        self.dir.join("assets").join(name)
    }

    /// The bytes an available asset reference points at (its byte range, or the whole file).
    fn asset_bytes(&self, asset: &Value) -> Vec<u8> {
        assert_eq!(asset["status"], "available", "{asset}");
        let bytes = std::fs::read(self.asset_path(asset["path"].as_str().unwrap_or("")))
            .expect("read referenced asset");
        match asset.get("byteRange") {
            Some(r) => {
                let start = r["start"].as_u64().expect("start") as usize;
                let end = r["end"].as_u64().expect("end") as usize;
                assert!(start < end && end <= bytes.len(), "range {r} of {asset}");
                bytes[start..end].to_vec()
            }
            None => bytes,
        }
    }

    fn protocol_assets(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.join("assets"))
            .expect("assets dir")
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|n| n.starts_with("protocol-"))
            .collect();
        names.sort();
        names
    }
}

fn strs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

fn users(texts: &[&str]) -> Vec<(String, String)> {
    texts
        .iter()
        .map(|t| ("user".to_owned(), (*t).to_owned()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

fn find_ci(haystack: &[u8], needle: &str) -> Option<usize> {
    let needle = needle.to_ascii_lowercase();
    let needle = needle.as_bytes();
    haystack
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// Where `secret` (ASCII, case-insensitive) appears in `bytes`, with context.
fn leak(bytes: &[u8], secret: &str) -> Option<String> {
    find_ci(bytes, secret).map(|at| {
        let from = at.saturating_sub(60);
        let to = (at + secret.len() + 60).min(bytes.len());
        String::from_utf8_lossy(&bytes[from..to]).into_owned()
    })
}

/// No planted value (nor the API key, nor a bearer header) in any byte under `dir`.
fn assert_no_secret_bytes(dir: &Path) {
    for path in files_under(dir) {
        let bytes = std::fs::read(&path).expect("read file");
        for secret in [PLANTED, KEY, "Bearer sk-"] {
            if let Some(context) = leak(&bytes, secret) {
                panic!("{secret:?} in {}: …{context}…", path.display());
            }
        }
    }
}

/// Checks every outgoing `input_audio_buffer.append` record against what was sent: the n-th
/// record is the n-th entry of `sent`, and (when the fake received it) the fake's bytes.
/// `wav`: the references must be capture WAV ranges; otherwise protocol assets.
/// Returns how many appends were retained.
fn check_input_media(s: &Session, sent: &[Vec<u8>], log: &FakeLog, wav: bool) -> usize {
    let received = appends_of(log.connections.iter().flat_map(|c| c.received()));
    check_input_media_against(s, sent, &received, wav)
}

/// Decoded audio of each `input_audio_buffer.append` among `events`, by client event id.
fn appends_of<'a>(events: impl Iterator<Item = &'a Value>) -> HashMap<String, Vec<u8>> {
    events
        .filter(|e| ty(e) == "input_audio_buffer.append")
        .map(|e| {
            (
                e["event_id"].as_str().unwrap_or("").to_owned(),
                B64.decode(e["audio"].as_str().unwrap_or(""))
                    .expect("base64"),
            )
        })
        .collect()
}

/// [`check_input_media`] with the provider's received appends given directly.
fn check_input_media_against(
    s: &Session,
    sent: &[Vec<u8>],
    received: &HashMap<String, Vec<u8>>,
    wav: bool,
) -> usize {
    let wav_name = s.wav_name();
    let mut attempts = 0;
    let mut retained_ids = Vec::new();
    for (_, e) in s.events("outgoing", "input_audio_buffer.append") {
        let payload = &e["payload"];
        assert!(
            payload.get("audio").is_some_and(Value::is_null),
            "append audio is not null: {e}"
        );
        let event_id = payload["event_id"].as_str().unwrap_or("").to_owned();
        if e["observation"] == "send_failed" {
            // Its bytes are referenced by the send_attempt with the same event id.
            assert!(
                retained_ids.contains(&event_id),
                "send_failed without its attempt: {e}"
            );
            continue;
        }
        assert_eq!(e["observation"], "send_attempt", "{e}");
        let media = e["media"].as_array().expect("append has media");
        assert_eq!(media.len(), 1, "exactly one media reference: {e}");
        assert_eq!(media[0]["pointer"], "/audio");
        let asset = &media[0]["asset"];
        assert_eq!(asset["encoding"], "base64", "{asset}");
        assert!(asset.get("byteRange").is_some(), "{asset}");
        let bytes = s.asset_bytes(asset);
        let path = asset["path"].as_str().unwrap_or("");
        if wav {
            let name = wav_name.as_deref().expect("a recording");
            assert_eq!(
                path,
                format!("assets/{name}"),
                "matching input uses the WAV"
            );
            assert_eq!(
                asset["byteRange"]["start"].as_u64(),
                Some(WAV_HEADER + (attempts * CHUNK_BYTES) as u64),
                "append {attempts} points at its own WAV range"
            );
        } else {
            assert!(
                path.starts_with("assets/protocol-") && path.ends_with(".bin"),
                "{path}"
            );
            let whole = std::fs::read(s.asset_path(path)).expect("read asset");
            assert_eq!(
                whole, bytes,
                "a protocol asset holds exactly the sent bytes"
            );
        }
        let expected = sent
            .get(attempts)
            .unwrap_or_else(|| panic!("append {attempts} was never streamed"));
        assert!(
            bytes == *expected,
            "append {attempts}: the referenced bytes are not the sent audio"
        );
        if let Some(got) = received.get(&event_id) {
            assert!(
                *got == bytes,
                "append {attempts}: the fake received other bytes"
            );
        }
        retained_ids.push(event_id);
        attempts += 1;
    }
    for id in received.keys() {
        assert!(
            retained_ids.contains(id),
            "the fake received append {id} that has no retained record"
        );
    }
    if wav {
        assert!(
            s.protocol_assets().len()
                <= s.events("incoming", "response.output_audio.delta").count(),
            "input audio that matches the WAV must not be duplicated into .bin files: {:?}",
            s.protocol_assets()
        );
    }
    attempts
}

/// Provider output audio: `delta` null, one protocol asset with exactly the fake's bytes.
/// Returns how many deltas were retained.
fn check_output_media(s: &Session, log: &FakeLog) -> usize {
    let sent: HashMap<String, Vec<u8>> = log
        .connections
        .iter()
        .flat_map(|c| c.sent())
        .filter(|e| ty(e) == "response.output_audio.delta")
        .map(|e| {
            (
                e["event_id"].as_str().unwrap_or("").to_owned(),
                B64.decode(e["delta"].as_str().unwrap_or(""))
                    .expect("base64"),
            )
        })
        .collect();
    let mut n = 0;
    for (_, e) in s.events("incoming", "response.output_audio.delta") {
        assert!(
            e["payload"].get("delta").is_some_and(Value::is_null),
            "output audio delta is not null: {e}"
        );
        let media = e["media"].as_array().expect("output audio has media");
        assert_eq!(media.len(), 1);
        assert_eq!(media[0]["pointer"], "/delta");
        let asset = &media[0]["asset"];
        let path = asset["path"].as_str().unwrap_or("");
        assert!(
            path.starts_with("assets/protocol-") && path.ends_with(".bin"),
            "{path}"
        );
        let id = e["payload"]["event_id"].as_str().unwrap_or("");
        assert_eq!(e["remoteEventId"], id);
        let expected = sent.get(id).expect("the fake sent this delta");
        assert!(
            s.asset_bytes(asset) == *expected,
            "output delta {id}: the asset differs from the provider's bytes"
        );
        n += 1;
    }
    assert_eq!(
        n,
        sent.len(),
        "every output delta the fake sent is retained"
    );
    n
}

/// Sequences increase per connection; outgoing pairs with send_attempt/send_failed.
fn check_events(s: &Session) {
    let mut last: HashMap<String, u64> = HashMap::new();
    for (_, e) in s.of_type("realtime_event") {
        let conn = e["connectionId"].as_str().unwrap_or("").to_owned();
        let seq = e["sequence"].as_u64().expect("sequence");
        if let Some(prev) = last.insert(conn, seq) {
            assert!(seq > prev, "sequence {seq} after {prev}");
        }
        let ok = match e["direction"].as_str() {
            Some("outgoing") => matches!(
                e["observation"].as_str(),
                Some("send_attempt" | "send_failed")
            ),
            Some("incoming") => e["observation"] == "received",
            _ => false,
        };
        assert!(ok, "direction/observation: {e}");
    }
    let connections: Vec<_> = s.of_type("api_connection").collect();
    assert_eq!(connections.len(), 1, "one api_connection");
    let endpoint = connections[0].1["endpoint"].as_str().unwrap_or("");
    assert!(endpoint.starts_with("ws://127.0.0.1:"), "{endpoint}");
}

/// The WAV reads back with Python's `wave` (and `sox`) with `frames` frames, 24 kHz mono
/// 16-bit, and its data is the streamed samples' prefix.
fn check_wav(s: &Session, samples: &[i16], frames: u64) {
    let name = s.wav_name().expect("a recording");
    let path = s.dir.join("assets").join(&name);
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, wave\nw = wave.open(sys.argv[1], 'rb')\n\
             print(w.getnframes(), w.getframerate(), w.getnchannels(), w.getsampwidth())",
        )
        .arg(&path)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "python wave: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{frames} {RATE} 1 2"),
        "python wave reads {name}"
    );
    match Command::new("sox").args(["--i", "-s"]).arg(&path).output() {
        Ok(out) if out.status.success() => assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            frames.to_string(),
            "sox --i -s"
        ),
        Ok(out) => panic!("sox --i: {}", String::from_utf8_lossy(&out.stderr)),
        Err(_) => eprintln!("note: sox is not installed; skipping sox --i"),
    }
    let bytes = std::fs::read(&path).expect("read wav");
    assert_eq!(bytes.len() as u64, WAV_HEADER + frames * 2);
    assert!(
        bytes[WAV_HEADER as usize..] == pcm(&samples[..frames as usize])[..],
        "the WAV holds the streamed samples"
    );
    assert_eq!(
        s.finished()["durationMs"].as_u64(),
        Some(frames * 1000 / u64::from(RATE)),
        "durationMs matches the WAV"
    );
}

/// The common checks of a file-pipeline run. Returns the session.
fn check_run(run: &Run, name: &str) -> Session {
    let s = Session::load(&run.dir);
    check_events(&s);
    let sent = chunks(&run.samples);
    let appends = check_input_media(&s, &sent, &run.log, true);
    check_output_media(&s, &run.log);
    // The WAV holds every chunk the pipeline wrote: all of them on a clean run, at least the
    // ones it sent on a broken one (a chunk is written before it is sent).
    let frames = run.transcription.duration_ms * u64::from(RATE) / 1000;
    assert!(frames as usize <= run.samples.len());
    assert!(
        frames as usize >= appends * CHUNK_SAMPLES,
        "{frames} < {appends} appends"
    );
    check_wav(&s, &run.samples, frames);
    check_dump(&run.log, name);
    eprintln!(
        "{name}: {appends} appends retained ({} send_failed), {} messages, gaps {:?}, \
         outcome {}, halted {:?}, fake end {:?}",
        s.events("outgoing", "input_audio_buffer.append")
            .filter(|(_, e)| e["observation"] == "send_failed")
            .count(),
        s.messages().len(),
        s.gaps(),
        s.outcome(),
        run.transcription.report.halted,
        run.log
            .connections
            .iter()
            .map(|c| c.end.as_str())
            .collect::<Vec<_>>()
    );
    // The report and the file agree.
    let report = &run.transcription.report;
    let transcript: Vec<String> = report
        .transcript()
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
    let file_users: Vec<String> = s
        .conversation()
        .into_iter()
        .filter(|(r, _)| r == "user")
        .map(|(_, t)| t)
        .collect();
    assert_eq!(transcript, file_users, "report transcript = file");
    assert_eq!(report.complete, s.outcome() == "complete");
    s
}

/// Every message names its provider item once (no duplicates) and is never a gap's item.
fn assert_no_duplicates_or_resurrections(s: &Session) {
    let mut items: Vec<String> = s
        .messages()
        .iter()
        .map(|(_, m)| {
            m["message"]["replay"]["itemId"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    let n = items.len();
    items.sort();
    items.dedup();
    assert_eq!(items.len(), n, "a provider item published twice");
    for (item, _) in s.gaps() {
        assert!(!items.contains(&item), "{item} is a gap and a message");
    }
}

// ---------------------------------------------------------------------------------------------
// The fake's dump and the validator
// ---------------------------------------------------------------------------------------------

/// Writes the fake's dump, checks the key never reached it, validates it.
fn check_dump(log: &FakeLog, name: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{name}.jsonl"));
    log.write_jsonl(&path, true).expect("write the dump");
    let text = std::fs::read(&path).expect("read the dump");
    assert!(leak(&text, KEY).is_none(), "the API key reached the dump");
    for c in &log.connections {
        assert!(c.authorization.bearer, "the engine sends a bearer token");
        assert_eq!(c.authorization.len, "Bearer ".len() + KEY.len());
        assert_eq!(c.openai_beta, None, "GA protocol");
    }
    support::events::validate_dump(&path);
}

// ---------------------------------------------------------------------------------------------
// File pipeline: one test per scenario
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn normal_dictation() {
    let run = pipeline(
        scenario("normal-dictation"),
        Mode::Transcription,
        4_500,
        0.0,
    )
    .await;
    let s = check_run(&run, "normal-dictation");
    assert_eq!(
        s.conversation(),
        users(&[
            "Hello there.",
            "This is a dictation test.",
            "Everything arrives in order.",
            "The last words."
        ])
    );
    assert_eq!(s.outcome(), "complete");
    assert!(s.gaps().is_empty());
    assert_no_secret_bytes(&s.dir);
    assert_no_duplicates_or_resurrections(&s);
    let conn = &run.log.connections[0];
    assert_eq!(conn.path, "/v1/realtime?intent=transcription");
    assert_eq!(conn.appends, 45);
    // Every message names its provider item and connection; entry ids are not item ids.
    for (_, m) in s.messages() {
        let replay = &m["message"]["replay"];
        assert!(
            replay["itemId"]
                .as_str()
                .is_some_and(|i| i.starts_with("item_"))
        );
        assert_eq!(
            replay["connectionId"],
            s.of_type("api_connection").next().expect("connection").1["connectionId"]
        );
        assert!(!m["id"].as_str().unwrap_or("").starts_with("item_"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_order_publishes_in_predecessor_order() {
    let run = pipeline(scenario("out-of-order"), Mode::Transcription, 3_000, 0.0).await;
    let s = check_run(&run, "out-of-order");
    assert_eq!(
        s.conversation(),
        users(&[
            "First, said slowly.",
            "Second, done quickly.",
            "Third in the middle."
        ])
    );
    assert_eq!(s.outcome(), "complete");
    assert!(s.gaps().is_empty());
    // Completions arrived B, C, A; B and C stayed provisional (unwritten) until A resolved.
    let completed: Vec<(usize, String)> = s
        .events(
            "incoming",
            "conversation.item.input_audio_transcription.completed",
        )
        .map(|(i, e)| (i, e["payload"]["item_id"].as_str().unwrap_or("").to_owned()))
        .collect();
    let arrival: Vec<&str> = completed.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(arrival, ["item_B", "item_C", "item_A"]);
    let a_completed = completed[2].0;
    for (at, m) in s.messages() {
        assert!(
            at > a_completed,
            "{} was written before A resolved",
            text_of(&m["message"])
        );
    }
    assert_no_secret_bytes(&s.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_gaps_not_text() {
    let run = pipeline(scenario("failures"), Mode::Transcription, 4_000, 0.0).await;
    let s = check_run(&run, "failures");
    assert_eq!(
        s.conversation(),
        users(&["Before the failures.", "After the failures."])
    );
    assert_eq!(
        s.gaps(),
        strs(&[
            ("item_B", "audio_unintelligible"),
            ("item_C", "transcription_failed")
        ])
    );
    assert_eq!(s.outcome(), "complete");
    for (_, m) in s.messages() {
        assert!(
            !text_of(&m["message"]).contains("Partial"),
            "a failed item's partial delta became text"
        );
    }
    // The partial delta is still evidence.
    assert!(
        s.events(
            "incoming",
            "conversation.item.input_audio_transcription.delta"
        )
        .any(|(_, e)| e["payload"]["delta"] == "Partial")
    );
    assert_no_duplicates_or_resurrections(&s);
    assert_no_secret_bytes(&s.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_and_late_completions() {
    let run = pipeline(
        scenario("duplicate-and-late"),
        Mode::Transcription,
        3_000,
        0.0,
    )
    .await;
    let s = check_run(&run, "duplicate-and-late");
    assert_eq!(
        s.conversation(),
        users(&["Said once.", "Held until the commit."])
    );
    assert_eq!(s.gaps().len(), 1);
    assert_eq!(s.gaps()[0].0, "item_B");
    assert_eq!(s.outcome(), "complete");
    assert!(
        !s.messages()
            .iter()
            .any(|(_, m)| text_of(&m["message"]).contains("Too late"))
    );
    assert_no_duplicates_or_resurrections(&s);
    assert_no_secret_bytes(&s.dir);
}

/// Like duplicate-and-late, but timed so the duplicate of A and the late completion of the
/// failed B reach the engine while it still drains (C completes 600 ms after the commit):
/// both are retained as evidence and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_completions_while_draining_are_evidence_only() {
    let scenario = inline(
        r#"{"name": "e2e-late-while-draining", "connections": [{
            "utterances": [
              {"end_ms": 1000, "item_id": "item_A", "transcript": "Said once.", "delay_ms": 50,
               "extra_completions": [{"delay_ms": 100, "after_client_commit": true}]},
              {"end_ms": 2000, "item_id": "item_B", "delay_ms": 50, "fail": {},
               "extra_completions": [{"delay_ms": 150, "after_client_commit": true,
                                      "transcript": "Too late to matter."}]},
              {"end_ms": 3000, "item_id": "item_C", "transcript": "Held until the commit.",
               "delay_ms": 600, "after_client_commit": true}],
            "close_after_commit_ms": 300}]}"#,
    );
    let run = pipeline(scenario, Mode::Transcription, 3_000, 0.0).await;
    let s = check_run(&run, "e2e-late-while-draining");
    assert_eq!(
        s.conversation(),
        users(&["Said once.", "Held until the commit."])
    );
    assert_eq!(s.gaps().len(), 1);
    assert_eq!(s.gaps()[0].0, "item_B");
    assert_eq!(s.outcome(), "complete");
    let completions: Vec<(String, String)> = s
        .events(
            "incoming",
            "conversation.item.input_audio_transcription.completed",
        )
        .map(|(_, e)| {
            (
                e["payload"]["item_id"].as_str().unwrap_or("").to_owned(),
                e["payload"]["transcript"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        completions.iter().filter(|(id, _)| id == "item_A").count(),
        2,
        "the duplicate is retained as evidence: {completions:?}"
    );
    assert!(
        completions.contains(&("item_B".into(), "Too late to matter.".into())),
        "the late completion is retained as evidence: {completions:?}"
    );
    assert_no_duplicates_or_resurrections(&s);
    assert_no_secret_bytes(&s.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversation_with_audio() {
    let run = pipeline(
        scenario("conversation-with-audio"),
        Mode::Conversation,
        2_000,
        0.0,
    )
    .await;
    let s = check_run(&run, "conversation-with-audio");
    assert_eq!(
        s.conversation(),
        strs(&[
            ("user", "What is the weather like?"),
            ("assistant", "It is sunny today."),
            ("user", "And tomorrow?"),
            ("assistant", "Rain is expected tomorrow."),
        ])
    );
    assert_eq!(s.outcome(), "complete");
    assert!(s.gaps().is_empty());
    assert_eq!(
        run.log.connections[0].path,
        "/v1/realtime?model=gpt-realtime"
    );
    // Output audio: 500 ms + 300 ms in 100 ms deltas, each in its own protocol asset.
    assert_eq!(check_output_media(&s, &run.log), 8);
    assert_eq!(s.protocol_assets().len(), 8);
    // Assistants are canonical only after their response.done.
    for (at, m) in s.messages() {
        if m["message"]["role"] != "assistant" {
            continue;
        }
        let response = m["message"]["responseId"].as_str().expect("responseId");
        assert_eq!(m["message"]["stopReason"], "stop");
        let done = s
            .events("incoming", "response.done")
            .find(|(_, e)| e["payload"]["response"]["id"] == response)
            .map(|(i, _)| i)
            .expect("its response.done is retained");
        assert!(at > done, "assistant message before its response.done");
        let transcript_done = s
            .events("incoming", "response.output_audio_transcript.done")
            .find(|(_, e)| e["payload"]["response_id"] == response)
            .map(|(i, _)| i)
            .expect("transcript done retained");
        assert!(transcript_done < done);
    }
    assert_no_duplicates_or_resurrections(&s);
    assert_no_secret_bytes(&s.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_midstream_is_incomplete() {
    // Real time: A's transcript (500 ms + 20 ms) arrives before the reset at the 8th append.
    let run = pipeline(
        scenario("disconnect-midstream"),
        Mode::Transcription,
        2_000,
        1.0,
    )
    .await;
    let s = check_run(&run, "disconnect-midstream");
    assert_eq!(s.conversation(), users(&["Before the drop."]));
    assert_eq!(s.outcome(), "incomplete");
    assert!(run.transcription.report.halted.is_some());
    assert!(
        s.gaps().iter().all(|(id, _)| id != "item_A"),
        "{:?}",
        s.gaps()
    );
    assert_eq!(
        run.log.connections.len(),
        1,
        "the engine does not reconnect"
    );
    assert_eq!(
        run.log.connections[0].end,
        ConnectionEnd::ScriptedDisconnect
    );
    assert_eq!(run.log.connections[0].appends, 8);
    assert_no_duplicates_or_resurrections(&s);
    assert_no_secret_bytes(&s.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expired_is_incomplete() {
    // Paced (4x): the expiry at the 12th append arrives while streaming, before the stop.
    // (Expiry during the stop: `session_expired_while_stopping_is_incomplete`.)
    let run = pipeline(scenario("session-expired"), Mode::Transcription, 3_000, 4.0).await;
    let s = check_run(&run, "session-expired");
    assert_eq!(s.conversation(), users(&["Just in time."]));
    assert_eq!(s.outcome(), "incomplete");
    assert!(s.gaps().iter().all(|(id, _)| id != "item_A"));
    assert!(
        s.events("incoming", "error")
            .any(|(_, e)| e["payload"]["error"]["code"] == "session_expired"),
        "the expiry is retained"
    );
    assert_eq!(run.log.connections[0].end, ConnectionEnd::SessionExpired);
    assert_no_duplicates_or_resurrections(&s);
    assert_no_secret_bytes(&s.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_reader_loses_nothing() {
    let run = pipeline(scenario("slow-reader"), Mode::Transcription, 5_000, 0.0).await;
    let s = check_run(&run, "slow-reader");
    assert_eq!(
        s.conversation(),
        users(&["Before the stall.", "Through the backpressure."])
    );
    assert_eq!(s.outcome(), "complete");
    assert!(s.gaps().is_empty());
    let conn = &run.log.connections[0];
    assert_eq!(conn.appends, 50);
    assert_eq!(conn.audio_bytes, 50 * CHUNK_BYTES as u64);
    assert!(conn.notes().any(|n| n.contains("pausing reading")));
    assert_no_secret_bytes(&s.dir);
}

const PLANTED_TRANSCRIPT: &str = "My key is [redacted] please redact it.";

/// The planted secrets never reach the protocol evidence: realtime events, the connection
/// record, assets. (The canonical message text is checked in
/// `planted_secrets_never_reach_any_byte`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_stay_out_of_the_evidence() {
    let run = pipeline(scenario("planted-secrets"), Mode::Transcription, 2_000, 0.0).await;
    let s = check_run(&run, "planted-secrets");
    assert_eq!(s.conversation().len(), 1);
    assert_eq!(s.gaps().len(), 1);
    assert_eq!(s.gaps()[0].0, "item_B");
    assert_eq!(s.outcome(), "complete");
    for path in files_under(&s.dir) {
        if path.file_name().is_some_and(|n| n == "session.jsonl") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read");
        assert!(leak(&bytes, PLANTED).is_none(), "{}", path.display());
    }
    for (line, e) in s.raw_lines.iter().zip(&s.entries) {
        if ty(e) == "message" {
            continue;
        }
        assert!(
            leak(line.as_bytes(), PLANTED).is_none(),
            "a planted value in a {} record: {line}",
            ty(e)
        );
        assert!(leak(line.as_bytes(), "Bearer ").is_none(), "{line}");
    }
    // The sanitizer recorded where it redacted.
    let created = s
        .events("incoming", "session.created")
        .next()
        .expect("session.created")
        .1;
    assert!(
        created["redactions"]
            .as_array()
            .is_some_and(|r| r.contains(&Value::from("/session/client_secret/value"))),
        "{created}"
    );
    assert!(s.events("incoming", "fake.future_event").next().is_some());
}

/// Spec: "Sanitize credentials … before persistence". The scenario plants a key in a spoken
/// transcript; the canonical message must not carry it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_never_reach_any_byte() {
    let run = pipeline(scenario("planted-secrets"), Mode::Transcription, 2_000, 0.0).await;
    let s = Session::load(&run.dir);
    assert_no_secret_bytes(&s.dir);
    assert_eq!(s.conversation(), users(&[PLANTED_TRANSCRIPT]));
    assert_eq!(run.transcription.report.transcript(), [PLANTED_TRANSCRIPT]);
}

/// Stop must wait for the answer to its own commit. Here the provider lags: it pauses
/// reading, so the engine's commit is on the wire before the VAD commit of A arrives. A's
/// `committed` is not the answer to the client's commit; the trailing audio's item (F) is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_waits_for_its_own_commit() {
    let scenario = inline(
        r#"{"name": "e2e-stop-race", "connections": [{
            "utterances": [{"end_ms": 1000, "item_id": "item_A", "transcript": "Before the stop.",
                            "delay_ms": 0}],
            "final_utterance": {"item_id": "item_F", "transcript": "The final words.",
                                "delay_ms": 200},
            "actions": [{"on": {"append": 1}, "do": {"pause_reading_ms": 300}}],
            "close_after_commit_ms": 300}]}"#,
    );
    let run = pipeline(scenario, Mode::Transcription, 1_500, 0.0).await;
    let s = check_run(&run, "e2e-stop-race");
    assert_eq!(
        (s.conversation(), s.gaps(), s.outcome()),
        (
            users(&["Before the stop.", "The final words."]),
            Vec::new(),
            "complete"
        )
    );
}

/// session-expired, but the expiry reaches the engine while it stops: the provider lags
/// (pauses reading), so the stop's commit is sent before A's VAD commit arrives. The session
/// still expired with B unspoken-for: the recording is incomplete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expired_while_stopping_is_incomplete() {
    let scenario = inline(
        r#"{"name": "e2e-expired-while-stopping", "connections": [{
            "utterances": [
              {"end_ms": 1000, "item_id": "item_A", "transcript": "Just in time.", "delay_ms": 0},
              {"end_ms": 3000, "item_id": "item_B", "transcript": "Never finished.", "delay_ms": 0}],
            "actions": [{"on": {"append": 1}, "do": {"pause_reading_ms": 300}},
                        {"on": {"append": 12}, "do": "session_expired"}]}]}"#,
    );
    let run = pipeline(scenario, Mode::Transcription, 3_000, 0.0).await;
    let s = check_run(&run, "e2e-expired-while-stopping");
    assert_eq!(s.conversation(), users(&["Just in time."]));
    assert_eq!(s.outcome(), "incomplete");
}

/// An item that never completes is closed as a gap at the 10-second drain deadline, and the
/// recording is incomplete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_deadline_closes_unresolved_items_as_gaps() {
    let scenario = inline(
        r#"{"name": "e2e-drain-deadline", "connections": [{
            "utterances": [
              {"end_ms": 1000, "item_id": "item_A", "transcript": "Quick.", "delay_ms": 50},
              {"end_ms": 2000, "item_id": "item_B", "transcript": "Never in time.",
               "deltas": ["Never"], "delay_ms": 60000}],
            "close_after_commit_ms": 300}]}"#,
    );
    let started = Instant::now();
    let run = pipeline(scenario, Mode::Transcription, 2_000, 0.0).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(14),
        "drain took {took:?}"
    );
    let s = check_run(&run, "e2e-drain-deadline");
    assert_eq!(s.conversation(), users(&["Quick."]));
    assert_eq!(s.gaps().len(), 1);
    assert_eq!(s.gaps()[0].0, "item_B");
    assert_eq!(s.outcome(), "incomplete");
    assert!(
        !s.messages()
            .iter()
            .any(|(_, m)| text_of(&m["message"]).contains("Never")),
        "provisional text was published"
    );
}

// ---------------------------------------------------------------------------------------------
// Removal, through the engine directly with a live capture
// ---------------------------------------------------------------------------------------------

/// A capture like the file pipeline's: `recording.started` first, then each chunk written to
/// the WAV and fsynced before it is handed to the engine with its WAV offset.
struct LiveCapture {
    recording_id: String,
    asset: String,
    wav: hound::WavWriter<BufWriter<File>>,
    capture: CaptureAsset,
    durable: watch::Sender<u64>,
    offset: u64,
}

impl LiveCapture {
    fn start(continuation: &mut Continuation) -> (LiveCapture, CaptureLink) {
        let recording_id = new_id();
        let asset = format!("{recording_id}.wav");
        continuation
            .append_one(EntryBody::RecordingStarted(RecordingStarted {
                recording_id: recording_id.clone(),
                asset: format!("assets/{asset}"),
            }))
            .expect("recording.started");
        let capture = continuation
            .handle()
            .start_capture(&asset)
            .expect("capture asset");
        let file = capture.try_clone_file().expect("clone");
        let verify = std::sync::Arc::new(capture.try_clone_file().expect("clone"));
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: RATE,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let wav = hound::WavWriter::new(BufWriter::new(file), spec).expect("wav writer");
        let (durable, rx) = watch::channel(0u64);
        let link = CaptureLink {
            asset: asset.clone(),
            file: verify,
            durable: rx,
        };
        (
            LiveCapture {
                recording_id,
                asset,
                wav,
                capture,
                durable,
                offset: WAV_HEADER,
            },
            link,
        )
    }

    fn chunk(&mut self, samples: &[i16]) -> AudioChunk {
        for &s in samples {
            self.wav.write_sample(s).expect("write sample");
        }
        self.wav.flush().expect("flush wav");
        self.capture.sync().expect("sync wav");
        let start = self.offset;
        self.offset += samples.len() as u64 * 2;
        self.durable.send_replace(self.offset);
        AudioChunk {
            pcm: pcm(samples),
            wav: Some(WavRange {
                asset: self.asset.clone(),
                offset: start,
            }),
        }
    }

    /// Finishes the WAV and records the outcome as the file pipeline does.
    fn finish(self, continuation: &mut Continuation, report: &EngineReport) {
        let data = self.offset - WAV_HEADER;
        self.wav.finalize().expect("finalize wav");
        self.capture.sync().expect("sync wav");
        drop(self.capture);
        let leaf = report
            .leaf
            .clone()
            .or_else(|| continuation.leaf().map(str::to_owned));
        continuation.set_leaf(leaf);
        continuation
            .append_one(EntryBody::RecordingFinished(RecordingFinished {
                recording_id: self.recording_id,
                duration_ms: data / 2 * 1000 / u64::from(RATE),
                outcome: if report.complete {
                    Outcome::Complete
                } else {
                    Outcome::Incomplete
                },
                gaps: (!report.gaps.is_empty()).then(|| report.gaps.clone()),
            }))
            .expect("recording.finished");
    }
}

/// An engine on a fresh session, streaming through a [`LiveCapture`] (or without one).
struct Direct {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    continuation: Continuation,
    server: FakeServer,
    engine: EngineHandle,
    capture: Option<LiveCapture>,
    samples: Vec<i16>,
    sent: Vec<Vec<u8>>,
}

impl Direct {
    async fn start(scenario: Scenario, ms: u64, with_capture: bool) -> Direct {
        Direct::start_in(scenario, Mode::Transcription, ms, with_capture).await
    }

    async fn start_in(scenario: Scenario, mode: Mode, ms: u64, with_capture: bool) -> Direct {
        let server = fake::spawn(scenario).await.expect("fake binds");
        let (tmp, dir, mut continuation) = fresh_session();
        let (capture, link) = if with_capture {
            let (c, l) = LiveCapture::start(&mut continuation);
            (Some(c), Some(l))
        } else {
            (None, None)
        };
        let engine = engine::start(
            settings(&server, mode),
            KEY.to_owned(),
            continuation.clone(),
            link,
        );
        Direct {
            _tmp: tmp,
            dir,
            continuation,
            server,
            engine,
            capture,
            samples: audio(ms, 0xdead_beef),
            sent: Vec::new(),
        }
    }

    /// Streams the next `ms` of the samples.
    async fn stream(&mut self, ms: u64) {
        let from = self.sent.len() * CHUNK_SAMPLES;
        let to = from + ms as usize * (RATE as usize / 1000);
        for part in self.samples[from..to].to_vec().chunks(CHUNK_SAMPLES) {
            let chunk = match self.capture.as_mut() {
                Some(c) => c.chunk(part),
                None => AudioChunk {
                    pcm: pcm(part),
                    wav: None,
                },
            };
            self.sent.push(chunk.pcm.clone());
            self.engine
                .send_audio_wait(chunk)
                .await
                .expect("the engine takes audio");
        }
    }

    fn view(&self) -> watch::Receiver<EngineView> {
        self.engine.view()
    }

    /// Waits until the message of provider item `item` is published; returns its entry id.
    async fn published(&self, item: &str) -> String {
        let mut view = self.view();
        let v = timeout(
            WAIT,
            view.wait_for(|v| v.messages.iter().any(|m| m.item_id == item)),
        )
        .await
        .unwrap_or_else(|_| panic!("{item} is not published in time"))
        .expect("view");
        v.messages
            .iter()
            .find(|m| m.item_id == item)
            .map(|m| m.entry_id.clone())
            .expect("published")
    }

    /// Stops the engine, finishes the recording, waits for the fake.
    async fn finish(
        mut self,
    ) -> (
        Session,
        EngineReport,
        FakeLog,
        Vec<Vec<u8>>,
        Vec<i16>,
        tempfile::TempDir,
    ) {
        let report = timeout(RUN, self.engine.stop())
            .await
            .expect("the engine stops in time");
        if let Some(c) = self.capture.take() {
            c.finish(&mut self.continuation, &report);
        }
        let log = self
            .server
            .finish(Duration::from_secs(5))
            .await
            .expect("the fake finishes");
        let s = Session::load(&self.dir);
        (s, report, log, self.sent, self.samples, self._tmp)
    }
}

fn removals(s: &Session) -> Vec<String> {
    s.of_type("message.removed")
        .map(|(_, e)| e["targetId"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ack_removes_after_acknowledgement() {
    let mut d = Direct::start(scenario("delete-ack"), 3_000, true).await;
    d.stream(2_000).await;
    d.published("item_A").await;
    let b = d.published("item_B").await;
    let outcome = timeout(WAIT + WAIT, d.engine.remove(&b))
        .await
        .expect("removal answers");
    assert_eq!(outcome, RemovalOutcome::Removed);
    // The view follows (it is updated just after the reply).
    let mut view = d.view();
    timeout(
        WAIT,
        view.wait_for(|v| v.messages.iter().any(|m| m.entry_id == b && m.removed)),
    )
    .await
    .expect("the view marks it removed")
    .expect("view");
    // The session goes on after a removal: C follows A in the provider's chain.
    d.stream(1_000).await;
    d.published("item_C").await;
    // A second removal of the same message is refused locally.
    assert_eq!(d.engine.remove(&b).await, RemovalOutcome::NotRemovable);
    let (s, report, log, sent, samples, _tmp) = d.finish().await;

    assert_eq!(removals(&s), [b.as_str()]);
    assert_eq!(
        s.conversation(),
        users(&["Keep this one.", "After the removal."])
    );
    // The removed message's text stays in the file, before its removal.
    let (at, removed) = s.messages()[1];
    assert_eq!(removed["id"], b.as_str());
    assert_eq!(text_of(&removed["message"]), "Remove this one.");
    let removal_at = s.of_type("message.removed").next().expect("removal").0;
    assert!(at < removal_at);
    // … after the provider's acknowledgement.
    let ack_at = s
        .events("incoming", "conversation.item.deleted")
        .next()
        .expect("the ack is retained")
        .0;
    assert!(
        ack_at < removal_at,
        "message.removed before the provider's ack"
    );
    assert_eq!(
        report.transcript(),
        ["Keep this one.", "After the removal."]
    );
    assert!(report.complete, "{report:?}");
    assert_eq!(s.outcome(), "complete");
    // And its audio stays: every append still resolves to the WAV.
    assert_eq!(check_input_media(&s, &sent, &log, true), 30);
    check_wav(&s, &samples, 30 * CHUNK_SAMPLES as u64);
    check_events(&s);
    check_dump(&log, "delete-ack");
    assert_no_secret_bytes(&s.dir);
}

/// A completed assistant message is removable too (conversation-with-audio acknowledges
/// deletions by default); its output audio stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ack_of_an_assistant_message() {
    let mut d = Direct::start_in(
        scenario("conversation-with-audio"),
        Mode::Conversation,
        2_000,
        true,
    )
    .await;
    d.stream(2_000).await;
    let r0 = d.published("item_c0_r0").await;
    d.published("item_c0_r1").await;
    let outcome = timeout(WAIT + WAIT, d.engine.remove(&r0))
        .await
        .expect("removal answers");
    assert_eq!(outcome, RemovalOutcome::Removed);
    let (s, report, log, sent, samples, _tmp) = d.finish().await;
    assert_eq!(removals(&s), [r0]);
    assert_eq!(
        s.conversation(),
        strs(&[
            ("user", "What is the weather like?"),
            ("user", "And tomorrow?"),
            ("assistant", "Rain is expected tomorrow."),
        ])
    );
    assert!(
        s.messages()
            .iter()
            .any(|(_, m)| text_of(&m["message"]) == "It is sunny today."),
        "the removed assistant text stays in the file"
    );
    assert!(report.complete, "{report:?}");
    assert_eq!(s.outcome(), "complete");
    assert_eq!(check_output_media(&s, &log), 8);
    assert_eq!(check_input_media(&s, &sent, &log, true), 20);
    check_wav(&s, &samples, 20 * CHUNK_SAMPLES as u64);
    check_events(&s);
    check_dump(&log, "e2e-delete-assistant");
    assert_no_secret_bytes(&s.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_reject_changes_nothing() {
    let mut d = Direct::start(scenario("delete-reject"), 1_000, true).await;
    d.stream(1_000).await;
    let a = d.published("item_A").await;
    assert_eq!(
        d.engine.remove("no-such-entry").await,
        RemovalOutcome::NotRemovable
    );
    let outcome = timeout(WAIT + WAIT, d.engine.remove(&a))
        .await
        .expect("removal answers");
    assert_eq!(
        outcome,
        RemovalOutcome::Rejected(Some("item_delete_failed".into()))
    );
    assert!(d.view().borrow().messages.iter().all(|m| !m.removed));
    assert_eq!(d.view().borrow().state, EngineState::Streaming);
    let (s, report, log, sent, samples, _tmp) = d.finish().await;
    assert!(removals(&s).is_empty());
    assert_eq!(s.conversation(), users(&["This cannot be removed."]));
    assert!(report.complete, "{report:?}");
    assert!(report.halted.is_none());
    assert_eq!(s.outcome(), "complete");
    // The rejection is retained as evidence, naming the client's delete.
    let delete_id = s
        .events("outgoing", "conversation.item.delete")
        .next()
        .expect("the delete is retained")
        .1["payload"]["event_id"]
        .clone();
    assert!(
        s.events("incoming", "error")
            .any(|(_, e)| e["payload"]["error"]["event_id"] == delete_id)
    );
    assert_eq!(check_input_media(&s, &sent, &log, true), 10);
    check_wav(&s, &samples, 10 * CHUNK_SAMPLES as u64);
    check_events(&s);
    check_dump(&log, "delete-reject");
    assert_no_secret_bytes(&s.dir);
}

/// Without a capture (`CaptureLink` None, chunks without a WAV range) the sent audio is
/// "unavailable capture" audio: the spec puts it in protocol assets, never inline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_without_a_capture_go_to_protocol_assets() {
    let mut d = Direct::start(scenario("out-of-order"), 3_000, false).await;
    d.stream(3_000).await;
    let (s, report, log, sent, _, _tmp) = d.finish().await;
    assert_eq!(
        report.transcript(),
        [
            "First, said slowly.",
            "Second, done quickly.",
            "Third in the middle."
        ]
    );
    assert_eq!(check_input_media(&s, &sent, &log, false), 30);
    assert_eq!(s.protocol_assets().len(), 30);
    check_events(&s);
}

/// Runs a removal that is never acknowledged in time: `TimedOut` within the 5 s deadline, the
/// connection closed, the engine halted, the recording incomplete, nothing removed.
async fn removal_times_out(scenario: Scenario, name: &str, wait_after: Duration) {
    let mut d = Direct::start(scenario, 1_500, true).await;
    d.stream(1_000).await;
    let a = d.published("item_A").await;
    let started = Instant::now();
    let outcome = timeout(WAIT + WAIT, d.engine.remove(&a))
        .await
        .expect("removal answers");
    let took = started.elapsed();
    assert_eq!(outcome, RemovalOutcome::TimedOut);
    assert!(
        took >= Duration::from_millis(4_500) && took <= Duration::from_millis(6_000),
        "the removal deadline is 5 s, took {took:?}"
    );
    let mut view = d.view();
    let halted = timeout(
        WAIT,
        view.wait_for(|v| matches!(v.state, EngineState::Halted(_))),
    )
    .await
    .expect("the engine halts")
    .expect("view")
    .clone();
    assert!(halted.messages.iter().all(|m| !m.removed));
    // Capture must stop: the engine takes no more audio (once its task has ended).
    let refused = Instant::now() + WAIT;
    while d
        .engine
        .send_audio(AudioChunk {
            pcm: vec![0; CHUNK_BYTES],
            wav: None,
        })
        .is_ok()
    {
        assert!(
            Instant::now() < refused,
            "the halted engine still takes audio"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A late acknowledgement (if the fake sends one) changes nothing.
    tokio::time::sleep(wait_after).await;
    let (s, report, log, sent, samples, _tmp) = d.finish().await;
    assert!(!report.complete);
    assert!(report.halted.is_some());
    assert!(removals(&s).is_empty(), "a removal without acknowledgement");
    assert_eq!(s.conversation(), users(&["Nobody answers for me."]));
    assert_eq!(s.outcome(), "incomplete");
    assert!(
        matches!(
            log.connections[0].end,
            ConnectionEnd::ClientClosed | ConnectionEnd::ClientGone(_)
        ),
        "the client closed the connection: {:?}",
        log.connections[0].end
    );
    assert!(
        s.events("incoming", "conversation.item.deleted")
            .next()
            .is_none()
    );
    assert_eq!(check_input_media(&s, &sent, &log, true), 10);
    check_wav(&s, &samples, 10 * CHUNK_SAMPLES as u64);
    check_events(&s);
    check_dump(&log, name);
    assert_no_secret_bytes(&s.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_timeout_closes_and_halts() {
    removal_times_out(scenario("delete-timeout"), "delete-timeout", Duration::ZERO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_delete_ack_after_close_changes_nothing() {
    let scenario = inline(
        r#"{"name": "e2e-delete-late-ack", "connections": [{
            "utterances": [{"end_ms": 1000, "item_id": "item_A",
                            "transcript": "Nobody answers for me.", "delay_ms": 50}],
            "delete": {"mode": "ack", "delay_ms": 5600}}]}"#,
    );
    removal_times_out(scenario, "e2e-delete-late-ack", Duration::from_millis(900)).await;
}

// ---------------------------------------------------------------------------------------------
// The binaries: persyk fake-provider + persyk transcribe + persyk check
// ---------------------------------------------------------------------------------------------

struct CliRun {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    samples: Vec<i16>,
    stdout: String,
    stderr: String,
    status: std::process::ExitStatus,
    fake_lines: Vec<String>,
    dump: PathBuf,
}

/// Starts `persyk fake-provider`, runs `persyk transcribe` against it, waits for the fake.
fn cli(name: &str, mode: &str, ms: u64) -> CliRun {
    let bin = env!("CARGO_BIN_EXE_persyk");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dump = tmp.path().join(format!("{name}.jsonl"));
    let input = tmp.path().join("input.wav");
    let samples = audio(ms, 0x0c11_0c11);
    support::write_wav_24k(&input, &samples);
    let fake = DumpingFake::start(&scenario_path(name), &dump, &["--full-audio"], WAIT);
    let addr = fake.addr;

    let root = tmp.path().join("sessions");
    // The settings file's provider section applies to the CLI too (the flags win).
    let config = tmp.path().join("settings.json");
    std::fs::write(
        &config,
        r#"{"provider":{"language":"de","transcriptionModel":"gpt-4o-mini-transcribe","baseUrl":"wss://not-used.example/v1"}}"#,
    )
    .expect("write settings");
    let out = Command::new(bin)
        .arg("transcribe")
        .arg(&input)
        .args(["--provider-url", &format!("ws://{addr}/v1"), "--mode", mode])
        .args(["--realtime-factor", "0", "--root"])
        .arg(&root)
        .env("OPENAI_API_KEY", KEY)
        .env("PERSYK_CONFIG", &config)
        .stdin(Stdio::null())
        .output()
        .expect("run persyk transcribe");
    let (fake_status, fake_lines) = fake.finish(Duration::from_secs(10));
    assert!(fake_status.success(), "{fake_lines:?}");
    assert!(
        fake_lines.iter().all(|l| leak(l.as_bytes(), KEY).is_none()),
        "the key in the fake's output"
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let dir = stderr
        .lines()
        .find_map(|l| l.strip_prefix("persyk: session "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no session folder in stderr: {stderr}"));
    assert!(dir.starts_with(&root), "{}", dir.display());
    CliRun {
        _tmp: tmp,
        dir,
        samples,
        stdout,
        stderr,
        status: out.status,
        fake_lines,
        dump,
    }
}

/// `persyk check DIR` exits 0 and prints nothing.
fn cli_check(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_persyk"))
        .arg("check")
        .arg(dir)
        .output()
        .expect("run persyk check");
    assert_eq!(
        out.status.code(),
        Some(0),
        "persyk check: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn assert_no_secret_output(run: &CliRun) {
    for (what, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        for secret in [PLANTED, KEY, "Bearer "] {
            assert!(
                leak(text.as_bytes(), secret).is_none(),
                "{secret:?} in persyk transcribe's {what}: {text}"
            );
        }
    }
}

/// The WAV-range media of a CLI run, checked against the input file's samples and the
/// audio the fake received (its `--full-audio` dump).
fn check_cli_media(run: &CliRun, s: &Session) {
    let dump = std::fs::read_to_string(&run.dump).expect("the dump is written");
    assert!(leak(dump.as_bytes(), KEY).is_none());
    support::events::validate_dump(&run.dump);
    let lines: Vec<Value> = dump
        .lines()
        .map(|l| serde_json::from_str(l).expect("dump line"))
        .collect();
    let received = appends_of(
        lines
            .iter()
            .filter(|l| l["from"] == "client")
            .map(|l| &l["event"]),
    );
    assert_eq!(received.len(), run.samples.len() / CHUNK_SAMPLES);
    let appends = check_input_media_against(s, &chunks(&run.samples), &received, true);
    assert_eq!(appends, run.samples.len() / CHUNK_SAMPLES);
    check_wav(s, &run.samples, run.samples.len() as u64);
}

#[test]
fn cli_normal_dictation() {
    let run = cli("normal-dictation", "transcription", 4_500);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(
        run.stdout.lines().collect::<Vec<_>>(),
        [
            "Hello there.",
            "This is a dictation test.",
            "Everything arrives in order.",
            "The last words."
        ]
    );
    cli_check(&run.dir);
    let s = Session::load(&run.dir);
    check_events(&s);
    assert_eq!(
        s.conversation(),
        users(&[
            "Hello there.",
            "This is a dictation test.",
            "Everything arrives in order.",
            "The last words."
        ])
    );
    assert_eq!(s.outcome(), "complete");
    assert!(s.gaps().is_empty());
    check_cli_media(&run, &s);
    assert_no_secret_bytes(&s.dir);
    assert_no_secret_output(&run);
    // The configured model and language reached the provider.
    let dump = std::fs::read_to_string(&run.dump).expect("read the fake's dump");
    let update = dump
        .lines()
        .find(|l| l.contains("session.update"))
        .expect("a session.update in the dump");
    assert!(update.contains(r#""language":"de""#), "{update}");
    assert!(update.contains("gpt-4o-mini-transcribe"), "{update}");
    // A legacy model keeps working until its shutdown, and the CLI says so.
    assert!(
        run.stderr.contains(
            "persyk: warning: provider.legacy-model: gpt-4o-mini-transcribe stops working on 2027-02-26"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.fake_lines
            .iter()
            .any(|l| l.contains("connection 0: fake_closed")
                || l.contains("connection 0: client_closed")),
        "{:?}",
        run.fake_lines
    );
}

#[test]
fn cli_conversation_with_audio() {
    let run = cli("conversation-with-audio", "conversation", 2_000);
    assert!(run.status.success(), "{}", run.stderr);
    // The transcript printed is the user's side.
    assert_eq!(
        run.stdout.lines().collect::<Vec<_>>(),
        ["What is the weather like?", "And tomorrow?"]
    );
    cli_check(&run.dir);
    let s = Session::load(&run.dir);
    check_events(&s);
    assert_eq!(
        s.conversation(),
        strs(&[
            ("user", "What is the weather like?"),
            ("assistant", "It is sunny today."),
            ("user", "And tomorrow?"),
            ("assistant", "Rain is expected tomorrow."),
        ])
    );
    assert_eq!(s.outcome(), "complete");
    check_cli_media(&run, &s);
    // Output audio is externalized (the dump truncates it, so only the shape is checked here;
    // `conversation_with_audio` compares the bytes).
    let deltas: Vec<_> = s
        .events("incoming", "response.output_audio.delta")
        .collect();
    assert_eq!(deltas.len(), 8);
    for (_, e) in deltas {
        assert!(e["payload"]["delta"].is_null());
        let path = e["media"][0]["asset"]["path"].as_str().unwrap_or("");
        assert!(path.starts_with("assets/protocol-"), "{path}");
        assert!(!s.asset_bytes(&e["media"][0]["asset"]).is_empty());
    }
    assert_no_secret_bytes(&s.dir);
    assert_no_secret_output(&run);
}

#[test]
fn cli_planted_secrets() {
    let run = cli("planted-secrets", "transcription", 2_000);
    assert!(run.status.success(), "{}", run.stderr);
    cli_check(&run.dir);
    let s = Session::load(&run.dir);
    assert_no_secret_output(&run);
    assert_no_secret_bytes(&s.dir);
    assert_eq!(run.stdout.lines().collect::<Vec<_>>(), [PLANTED_TRANSCRIPT]);
    assert_eq!(s.gaps().len(), 1);
    assert_eq!(s.outcome(), "complete");
    check_cli_media(&run, &s);
}

// ---------------------------------------------------------------------------------------------
// Client turns (gpt-live-transcribe, gpt-realtime-whisper): the engine commits each phrase
// ---------------------------------------------------------------------------------------------

/// Phrases and pauses: `(voiced, ms)` spans, a 440 Hz tone with noise for speech and quiet
/// noise (±40) for the pauses, deterministic per seed.
fn phrases(plan: &[(bool, u64)], seed: u32) -> Vec<i16> {
    let mut x = seed | 1;
    let mut out = Vec::new();
    for &(voiced, ms) in plan {
        for i in 0..ms as usize * (RATE as usize / 1000) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let v = if voiced {
                (i as f64 * std::f64::consts::TAU * 440.0 / f64::from(RATE)).sin() * 6000.0
                    + f64::from(x % 4001)
                    - 2000.0
            } else {
                f64::from(x % 81) - 40.0
            };
            out.push(v as i16);
        }
    }
    out
}

/// Three phrases; the last is still open when the audio ends (stop commits it).
const THREE_PHRASES: &[(bool, u64)] = &[
    (false, 500),
    (true, 900),
    (false, 1_200),
    (true, 700),
    (false, 1_200),
    (true, 800),
    (false, 300),
];

/// A fresh install's provider settings (no settings file), pointed at the fake.
fn fresh_install(server: &FakeServer) -> Settings {
    let mut s = persyk::settings::Settings::default()
        .provider()
        .expect("default settings are valid");
    s.base_url = format!("ws://{}/v1", server.addr);
    s
}

/// The client's commits with the audio bytes appended before each (since the previous one).
fn commits_with_audio(log: &FakeLog) -> Vec<u64> {
    let mut out = Vec::new();
    let mut pending = 0u64;
    for e in log.connections[0].received() {
        match e["type"].as_str() {
            Some("input_audio_buffer.append") => {
                pending += B64
                    .decode(e["audio"].as_str().unwrap_or(""))
                    .expect("base64")
                    .len() as u64;
            }
            Some("input_audio_buffer.commit") => out.push(std::mem::take(&mut pending)),
            _ => {}
        }
    }
    out
}

/// Each message's `replay.audio` WAV byte range, in file order.
fn message_ranges(s: &Session) -> Vec<(u64, u64)> {
    s.messages()
        .iter()
        .map(|(_, m)| {
            let a = &m["message"]["replay"]["audio"];
            assert_eq!(
                a["path"].as_str().and_then(|p| p.strip_prefix("assets/")),
                s.wav_name().as_deref(),
                "the range is in the capture WAV"
            );
            (
                a["byteRange"]["start"].as_u64().expect("start"),
                a["byteRange"]["end"].as_u64().expect("end"),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_fresh_install_dictates_with_client_turns() {
    let samples = phrases(THREE_PHRASES, 7);
    let run = pipeline_with(scenario("live-dictation"), samples, 0.0, fresh_install).await;
    let s = check_run(&run, "live-dictation");
    let conn = &run.log.connections[0];
    // The wire: the new default model, turn detection explicitly null, near-field noise
    // reduction; no speech events from the service; only the client's commits.
    let update = conn
        .received()
        .find(|e| e["type"] == "session.update")
        .expect("session.update");
    let input = &update["session"]["audio"]["input"];
    assert_eq!(input["transcription"]["model"], "gpt-live-transcribe");
    assert_eq!(input.get("turn_detection"), Some(&Value::Null));
    assert_eq!(input["noise_reduction"]["type"], "near_field");
    assert!(conn.sent().all(|e| e["type"] != "error"), "nothing refused");
    assert!(conn.sent().all(|e| {
        !e["type"]
            .as_str()
            .unwrap_or("")
            .starts_with("input_audio_buffer.speech_")
    }));
    // One commit per phrase, each with at least 100 ms.
    let commits = commits_with_audio(&run.log);
    assert_eq!(commits.len(), 3, "one commit per phrase: {commits:?}");
    assert!(commits.iter().all(|&b| b >= 100 * 48), "{commits:?}");
    assert_eq!(
        s.conversation(),
        users(&[
            "Persyk listens live.",
            "The second phrase follows a pause.",
            "And the last one ends at stop."
        ])
    );
    assert_eq!(s.outcome(), "complete");
    // Each item keeps the WAV bytes its commit covered: the ranges tile the recording.
    let ranges = message_ranges(&s);
    let mut at = WAV_HEADER;
    for (&(start, end), &bytes) in ranges.iter().zip(&commits) {
        assert_eq!(
            (start, end - start),
            (at, bytes),
            "ranges follow the commits"
        );
        at = end;
    }
    assert_eq!(at, WAV_HEADER + 2 * run.samples.len() as u64);
    // Deltas streamed while the phrase was spoken: before its commit.
    let events: Vec<&Value> = conn.sent().collect();
    let first_commit = events
        .iter()
        .position(|e| e["type"] == "input_audio_buffer.committed")
        .expect("committed");
    assert!(
        events[..first_commit]
            .iter()
            .any(|e| e["type"] == "conversation.item.input_audio_transcription.delta"),
        "deltas during speech"
    );
    assert!(
        conn.sent()
            .filter(|e| e["type"] == "conversation.item.input_audio_transcription.completed")
            .all(|e| e["usage"]["type"] == "duration")
    );
    // The figure: commit → completed, as the fake saw it.
    let entries = &conn.entries;
    let mut commit_at = Vec::new();
    let mut completed_at = Vec::new();
    for e in entries {
        if let fake::Body::Event(v) = &e.body {
            match v["type"].as_str() {
                Some("input_audio_buffer.commit") => commit_at.push(e.at_ms),
                Some("conversation.item.input_audio_transcription.completed") => {
                    completed_at.push(e.at_ms);
                }
                _ => {}
            }
        }
    }
    eprintln!(
        "live-dictation: {} commits for 3 phrases, bytes {commits:?}, commit→completed ms {:?}",
        commits.len(),
        commit_at
            .iter()
            .zip(&completed_at)
            .map(|(c, d)| d - c)
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_silence_after_the_last_phrase_is_not_committed() {
    let plan = [(false, 400), (true, 600), (false, 1_500)];
    let run = pipeline_with(
        scenario("live-dictation"),
        phrases(&plan, 3),
        0.0,
        fresh_install,
    )
    .await;
    let s = check_run(&run, "live-dictation-tail");
    assert_eq!(commits_with_audio(&run.log).len(), 1);
    assert_eq!(s.conversation(), users(&["Persyk listens live."]));
    assert_eq!(s.outcome(), "complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_hostile_scenarios_with_client_commits() {
    // Out of order, duplicated and late: published once each, in chain order.
    let run = pipeline_with(
        scenario("live-out-of-order"),
        phrases(THREE_PHRASES, 11),
        0.0,
        fresh_install,
    )
    .await;
    let s = check_run(&run, "live-out-of-order");
    assert_eq!(
        s.conversation(),
        users(&[
            "First, said slowly.",
            "Second, done quickly.",
            "Third in the middle."
        ])
    );
    assert_no_duplicates_or_resurrections(&s);
    assert_eq!(message_ranges(&s).len(), 3);

    // A failed transcription is a gap, not text.
    let run = pipeline_with(
        scenario("live-failures"),
        phrases(THREE_PHRASES, 13),
        0.0,
        fresh_install,
    )
    .await;
    let s = check_run(&run, "live-failures");
    assert_eq!(
        s.conversation(),
        users(&["This one is fine.", "So is this one."])
    );
    assert_eq!(
        s.gaps()
            .iter()
            .map(|(id, reason)| (id.as_str(), reason.as_str()))
            .collect::<Vec<_>>(),
        [("item_F2", "audio_unintelligible")]
    );

    // A reset after the first commit: halted, incomplete, the audio kept in the WAV.
    let run = pipeline_with(
        scenario("live-disconnect"),
        phrases(THREE_PHRASES, 17),
        1.0,
        fresh_install,
    )
    .await;
    let s = check_run(&run, "live-disconnect");
    assert_eq!(s.outcome(), "incomplete");
    assert!(run.transcription.report.halted.is_some());
    assert!(s.conversation().is_empty());

    // gpt-realtime-whisper with its delay: client turns too.
    let plan = [
        (false, 300),
        (true, 700),
        (false, 1_000),
        (true, 500),
        (false, 900),
    ];
    let run = pipeline_with(
        scenario("realtime-whisper"),
        phrases(&plan, 19),
        0.0,
        |server| Settings {
            transcription_model: "gpt-realtime-whisper".into(),
            delay: Some("low".into()),
            keywords: vec!["Persyk".into()],
            ..fresh_install(server)
        },
    )
    .await;
    let s = check_run(&run, "realtime-whisper");
    let update = run.log.connections[0]
        .received()
        .find(|e| e["type"] == "session.update")
        .expect("session.update")
        .clone();
    let t = &update["session"]["audio"]["input"]["transcription"];
    assert_eq!(t["delay"], "low");
    assert!(
        t.get("keywords").is_none() && t.get("prompt").is_none(),
        "{t}"
    );
    let commits = commits_with_audio(&run.log);
    assert_eq!(commits.len(), 2, "{commits:?}");
    assert_eq!(
        s.conversation(),
        users(&["Whisper, but live.", "With a low delay."])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_keywords_reach_the_wire_and_bad_ones_never_leave() {
    let plan = [(false, 400), (true, 600), (false, 1_000)];
    let run = pipeline_with(
        scenario("live-dictation"),
        phrases(&plan, 5),
        0.0,
        |server| Settings {
            keywords: vec!["Persyk".into(), "rubato".into()],
            languages: vec!["en".into(), "uk".into()],
            ..fresh_install(server)
        },
    )
    .await;
    check_run(&run, "live-keywords");
    let update = run.log.connections[0]
        .received()
        .find(|e| e["type"] == "session.update")
        .expect("session.update")
        .clone();
    let t = &update["session"]["audio"]["input"]["transcription"];
    assert_eq!(t["keywords"], serde_json::json!(["Persyk", "rubato"]));
    assert_eq!(t["languages"], serde_json::json!(["en", "uk"]));
    assert!(t.get("language").is_none());

    // A bad keyword is refused before connecting: the fake never sees a connection.
    let server = fake::spawn(scenario("live-dictation"))
        .await
        .expect("fake binds");
    let (_tmp, dir, continuation) = fresh_session();
    let settings = Settings {
        keywords: vec!["fine".into(), "<tag>".into()],
        ..fresh_install(&server)
    };
    let engine = engine::start(settings, KEY.into(), continuation, None);
    let report = timeout(RUN, engine.stop()).await.expect("stop returns");
    assert_eq!(report.halted.as_deref(), Some("provider.bad-keyword"));
    server.shutdown();
    let log = server.finish(WAIT).await.expect("fake finishes");
    assert!(log.connections.is_empty(), "nothing was sent");
    let text = std::fs::read_to_string(dir.join("session.jsonl")).expect("read");
    assert!(!text.contains("<tag>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_default_conversation_transcribes_with_a_vad_model() {
    // A conversation's turns are server VAD: with the default (client-turn) model configured,
    // its input transcription is gpt-transcribe, which the fake (like the service) accepts.
    let run = pipeline_with(
        scenario("conversation-with-audio"),
        audio(2_000, 0x5eed_1234),
        0.0,
        |server| Settings {
            mode: Mode::Conversation,
            ..fresh_install(server)
        },
    )
    .await;
    let s = check_run(&run, "live-conversation");
    assert_eq!(s.conversation().len(), 4, "{:?}", s.conversation());
    let update = run.log.connections[0]
        .received()
        .find(|e| e["type"] == "session.update")
        .expect("session.update")
        .clone();
    let input = &update["session"]["audio"]["input"];
    assert_eq!(input["transcription"]["model"], "gpt-transcribe");
    assert_eq!(input["turn_detection"]["type"], "server_vad");
}
