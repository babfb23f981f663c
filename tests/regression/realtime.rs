//! Regressions in the realtime side of Persyk.
//!
//! The engine runs against the real fake provider (`persyk::realtime::fake`) over loopback
//! websockets and writes a real session folder; the CLI tests run the real binary.

#[path = "../support/mod.rs"]
pub(crate) mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use persyk::realtime::engine::{self, EngineHandle};
use persyk::realtime::fake::{self, FakeLog, Scenario};
use persyk::realtime::protocol::{Mode, Settings};
use persyk::recognize::Speaker;
use persyk::recognize::{AudioChunk, EngineReport, EngineState};
use persyk::session::fsio::Storage;
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store, scan_path};
use serde_json::{Value, json};
use support::{fake_settings as settings, fresh_session};

pub(crate) const KEY: &str = "sk-test-REGRESSION0123456789abcdef";

pub(crate) use support::runtime;

/// `ms` of a 440 Hz tone as PCM16 LE mono 24 kHz (`seed` shifts the phase).
fn tone(ms: u64, seed: usize) -> Vec<u8> {
    (0..ms as usize * 24)
        .flat_map(|i| {
            let t = (seed * 1_000_003 + i) as f64 / 24_000.0;
            (((t * 440.0 * std::f64::consts::TAU).sin() * 8_000.0) as i16).to_le_bytes()
        })
        .collect()
}

/// Sends `n` chunks of `ms` each, `pause` apart.
async fn stream(engine: &EngineHandle, n: usize, ms: u64, pause: Duration) {
    for i in 0..n {
        engine
            .send_audio_wait(AudioChunk {
                pcm: tone(ms, i),
                wav: None,
            })
            .await
            .expect("the engine takes audio");
        tokio::time::sleep(pause).await;
    }
}

/// Waits (≤ 20 s) until `pred` holds for the engine's view.
async fn wait_view(
    engine: &EngineHandle,
    what: &str,
    pred: impl Fn(&persyk::recognize::EngineView) -> bool,
) {
    let mut view = engine.view();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !pred(&view.borrow_and_update()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        let _ = tokio::time::timeout(Duration::from_millis(100), view.changed()).await;
    }
}

/// The entry lines of the session file (header excluded), after checking it validates.
fn entries(dir: &Path) -> Vec<Value> {
    let file = dir.join("session.jsonl");
    let index = scan_path(&file).expect("scan");
    assert!(index.is_authoritative(), "{:?}", index.diagnostics());
    std::fs::read_to_string(&file)
        .expect("read session")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn events_of_type<'a>(entries: &'a [Value], ty: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "realtime_event" && e["payload"]["type"] == ty)
        .collect()
}

/// Runs the engine against `scenario`: `n` chunks of `ms`, then (once `ready` holds or the
/// audio is sent) stop. Returns the report, the fake's log and the session's entries.
fn run_engine(
    scenario: Scenario,
    mode: Mode,
    chunks: (usize, u64, Duration),
    ready: impl Fn(&persyk::recognize::EngineView) -> bool,
) -> (EngineReport, FakeLog, Vec<Value>) {
    let rt = runtime();
    let (_tmp, dir, continuation) = fresh_session();
    let (report, log) = rt.block_on(async {
        let server = fake::spawn(scenario).await.expect("fake");
        let engine = engine::start(settings(&server, mode), KEY.into(), continuation, None);
        wait_view(&engine, "the connection", |v| {
            v.state != EngineState::Connecting
        })
        .await;
        stream(&engine, chunks.0, chunks.1, chunks.2).await;
        wait_view(&engine, "the scenario's point", ready).await;
        let report = tokio::time::timeout(Duration::from_secs(40), engine.stop())
            .await
            .expect("stop returns");
        server.shutdown();
        let log = server
            .finish(Duration::from_secs(5))
            .await
            .expect("fake finishes");
        (report, log)
    });
    let entries = entries(&dir);
    (report, log, entries)
}

/// Item 1: the sanitizer redacted ordinary dictation ("bearer of", a URL's `code=42`) in the
/// canonical text, the clipboard text and the retained transcripts. Only high-confidence
/// credential shapes may be redacted from speech.
#[test]
fn issue16_01_sanitizer_keeps_dictated_words() {
    let said = [
        "I am the bearer of bad news.",
        "see https://example.com/docs?code=42",
        "The token is in https://user:pw@example.com/x?key=abc for now.",
    ];
    let secret = "My key is sk-proj-REGRESSION000000000000000 okay.";
    let scenario = Scenario::from_json(
        &json!({"name": "dictation-words", "connections": [{"utterances": [
            {"end_ms": 500, "transcript": said[0], "delay_ms": 20},
            {"end_ms": 1000, "transcript": said[1], "delay_ms": 20},
            {"end_ms": 1500, "transcript": said[2], "delay_ms": 20},
            {"end_ms": 2000, "transcript": secret, "delay_ms": 20}]}]})
        .to_string(),
    )
    .expect("scenario");
    let (report, _log, entries) = run_engine(
        scenario,
        Mode::Transcription,
        (21, 100, Duration::from_millis(10)),
        |v| v.messages.len() == 4,
    );
    // Canonical text (what the clipboard gets) keeps the speech; the key is still redacted.
    let transcript = report.transcript();
    assert_eq!(transcript[..3], said, "the user's words were rewritten");
    assert_eq!(transcript[3], "My key is [redacted] okay.");
    let messages: Vec<&str> = entries
        .iter()
        .filter(|e| e["type"] == "message")
        .filter_map(|e| e["message"]["content"][0]["text"].as_str())
        .collect();
    assert_eq!(messages[..3], said, "the stored messages were rewritten");
    // The retained transcription events keep the speech too.
    let completed = events_of_type(
        &entries,
        "conversation.item.input_audio_transcription.completed",
    );
    let retained: Vec<&str> = completed
        .iter()
        .filter_map(|e| e["payload"]["transcript"].as_str())
        .collect();
    for s in said {
        assert!(retained.contains(&s), "{s:?} not retained in {retained:?}");
    }
    let text = entries
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !text.contains("sk-proj-REGRESSION"),
        "a key reached the file"
    );
    assert!(!text.contains(KEY), "the API key reached the file");
}

/// Item 2: with 256 items pending (the first one completes late), later completions were
/// neither message nor gap and audio kept streaming. The limit must enter finishing: stop
/// sending audio, commit, account for every later item, end incomplete.
#[test]
fn issue16_02_ordering_limit_finishes_without_dropping_items() {
    const ITEMS: usize = 300;
    let utterances: Vec<Value> = (0..ITEMS)
        .map(|i| {
            json!({"end_ms": 100 * (i as u64 + 1), "transcript": format!("word {i}"),
                   "deltas": [], "delay_ms": if i == 0 { 3_000 } else { 0 }})
        })
        .collect();
    let scenario = Scenario::from_json(
        &json!({"name": "ordering-limit", "connections": [{"utterances": utterances}]}).to_string(),
    )
    .expect("scenario");
    // 40 s of audio in 1 s chunks; the limit is reached after ~26 s.
    let chunks = 40;
    let (report, log, _entries) = run_engine(
        scenario,
        Mode::Transcription,
        (chunks, 1_000, Duration::from_millis(60)),
        |_| true,
    );
    assert!(!report.complete, "the limit ends the recording incomplete");
    let messages: Vec<&str> = report.messages.iter().map(|m| m.item_id.as_str()).collect();
    let gaps: Vec<&str> = report
        .gaps
        .iter()
        .filter_map(|g| g.item_id.as_deref())
        .collect();
    // Every item the provider committed is accounted for.
    let conn = &log.connections[0];
    let committed: Vec<&str> = conn
        .sent()
        .filter(|e| e["type"] == "input_audio_buffer.committed")
        .filter_map(|e| e["item_id"].as_str())
        .collect();
    assert!(committed.len() > 256, "the limit was not reached");
    for id in &committed {
        assert!(
            messages.contains(id) || gaps.contains(id),
            "{id} became neither a message nor a gap ({} messages, {} gaps)",
            messages.len(),
            gaps.len()
        );
    }
    // Audio stopped at the limit: a commit, and no append after it.
    let received: Vec<&Value> = conn.received().collect();
    let first_commit = received
        .iter()
        .position(|e| e["type"] == "input_audio_buffer.commit")
        .expect("a commit");
    assert!(
        !received[first_commit..]
            .iter()
            .any(|e| e["type"] == "input_audio_buffer.append"),
        "audio was sent after the commit"
    );
    let appends = received
        .iter()
        .filter(|e| e["type"] == "input_audio_buffer.append")
        .count();
    assert!(
        appends < chunks,
        "all {appends} chunks were streamed past the limit"
    );
}

/// Item 3: in conversation mode a server-VAD turn requests a response; stop did not wait
/// for it, so the answer was lost and the outcome said complete.
#[test]
fn issue16_03_stop_awaits_requested_responses() {
    let scenario = Scenario::from_json(
        &json!({"name": "late-response", "connections": [{"utterances": [
            {"end_ms": 1000, "item_id": "item_Q", "transcript": "What time is it?", "delay_ms": 20,
             "response": {"delay_ms": 1500, "stream_ms": 300, "transcript": "It is noon.",
                          "audio_ms": 200}}]}]})
        .to_string(),
    )
    .expect("scenario");
    let (report, _log, entries) = run_engine(
        scenario,
        Mode::Conversation,
        (12, 100, Duration::from_millis(10)),
        |v| !v.messages.is_empty(),
    );
    let said: Vec<(Speaker, &str)> = report
        .messages
        .iter()
        .map(|m| (m.speaker, m.text.as_str()))
        .collect();
    assert_eq!(
        said,
        [
            (Speaker::User, "What time is it?"),
            (Speaker::Assistant, "It is noon.")
        ],
        "the requested answer was lost"
    );
    assert!(report.complete, "{report:?}");
    assert!(
        entries
            .iter()
            .any(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
    );
}

/// Item 3, past the deadline: a requested response that never finishes is a gap and the
/// outcome is incomplete (not a silent `complete`).
#[test]
fn issue16_03_unfinished_response_is_a_gap_past_the_deadline() {
    let scenario = Scenario::from_json(
        &json!({"name": "no-response", "connections": [{"utterances": [
            {"end_ms": 1000, "item_id": "item_Q", "transcript": "Are you there?", "delay_ms": 20,
             "response": {"delay_ms": 60000, "transcript": "Too late.", "audio_ms": 0}}]}]})
        .to_string(),
    )
    .expect("scenario");
    let (report, _log, _entries) = run_engine(
        scenario,
        Mode::Conversation,
        (12, 100, Duration::from_millis(10)),
        |v| !v.messages.is_empty(),
    );
    assert_eq!(report.transcript(), ["Are you there?"]);
    assert!(
        !report.complete,
        "a lost response left the outcome complete"
    );
    assert!(!report.gaps.is_empty(), "no gap for the lost response");
}

/// Item 4: 40 provider events of ~900 KB (each under the 1 MiB record limit) made the writer
/// submit more than 4 MiB in one append: `store.batch-too-large`, events lost, engine halted.
#[test]
fn issue16_04_writer_splits_batches_by_bytes() {
    let blob = "x".repeat(900_000);
    let actions: Vec<Value> = (0..40)
        .map(|i| json!({"on": "connected", "do": {"send": {"type": "fake.bulk", "n": i, "blob": blob}}}))
        .collect();
    let scenario = Scenario::from_json(
        &json!({"name": "bulk", "connections": [{"actions": actions}]}).to_string(),
    )
    .expect("scenario");
    let (report, _log, entries) = run_engine(
        scenario,
        Mode::Transcription,
        (0, 100, Duration::ZERO),
        |_| true,
    );
    let _ = &report;
    let bulk = events_of_type(&entries, "fake.bulk");
    assert_eq!(
        bulk.len(),
        40,
        "bulk events lost (halted: {:?})",
        report.halted
    );
    assert_eq!(report.halted, None);
    let mut seen: Vec<i64> = bulk
        .iter()
        .filter_map(|e| e["payload"]["n"].as_i64())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..40).collect::<Vec<_>>());
}

/// Item 7: `ws://` to a remote host sent `Authorization: Bearer sk-…` in clear text, and an
/// `http://` base URL in the settings was rewritten to `ws://`.
#[test]
fn issue16_07_insecure_provider_urls_are_refused() {
    use persyk::endpoint::{check_provider_url, is_loopback_host};
    for ok in [
        "wss://api.openai.com/v1/realtime?intent=transcription",
        "ws://127.0.0.1:9/v1/realtime",
        "ws://127.12.0.3/v1",
        "ws://[::1]:8080/v1",
        "ws://localhost:8080/v1",
        "ws://LocalHost/v1",
    ] {
        assert!(check_provider_url(ok).is_ok(), "{ok} refused");
    }
    for bad in [
        "ws://example.com/v1",
        "ws://192.0.2.1:9/v1",
        "ws://10.0.0.1/v1",
        "ws://localhost.example.com/v1",
        "ws://127.0.0.1.example.com/v1",
        "ws://[::ffff:c000:201]/v1",
        "ws://user@example.com/v1",
        "http://example.com/v1",
        "ftp://127.0.0.1/v1",
    ] {
        let err = check_provider_url(bad).expect_err(bad);
        assert!(
            matches!(err.code(), "provider.insecure-url" | "provider.bad-url"),
            "{bad}: {}",
            err.code()
        );
    }
    assert!(is_loopback_host("127.0.0.1") && !is_loopback_host("0.0.0.0"));

    // The settings never downgrade http:// to ws:// for a remote host.
    let mut s = persyk::settings::Settings::default();
    s.provider.base_url = Some("http://proxy.example/v1".into());
    assert_eq!(
        s.validate().expect_err("remote http").code(),
        "settings.insecure-provider-url"
    );
    s.provider.base_url = Some("http://localhost:8080/v1".into());
    assert_eq!(
        s.provider().expect("loopback http").base_url,
        "ws://localhost:8080/v1"
    );

    // The engine refuses before connecting (192.0.2.1 is TEST-NET: nothing listens there).
    let rt = runtime();
    let (_tmp, dir, continuation) = fresh_session();
    let report = rt.block_on(async {
        let settings = Settings {
            base_url: "ws://192.0.2.1:9/v1".into(),
            ..Settings::default()
        };
        let engine = engine::start(settings, KEY.into(), continuation, None);
        tokio::time::timeout(Duration::from_secs(30), engine.stop())
            .await
            .expect("stop returns")
    });
    assert_eq!(report.halted.as_deref(), Some("provider.insecure-url"));
    let text = std::fs::read_to_string(dir.join("session.jsonl")).expect("read");
    assert!(
        !text.contains("api_connection"),
        "a connection was recorded"
    );

    // The CLI exits 2 before creating a session.
    let tmp = tempfile::tempdir().expect("tmp");
    let input = tmp.path().join("in.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 24_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(&input, spec).expect("wav");
    for i in 0..2_400 {
        w.write_sample((i % 100) as i16).expect("sample");
    }
    w.finalize().expect("finalize");
    let root = tmp.path().join("sessions");
    for url in ["ws://192.0.2.1:9/v1", "http://192.0.2.1:9/v1"] {
        let out = Command::new(env!("CARGO_BIN_EXE_persyk"))
            .arg("transcribe")
            .arg(&input)
            .args(["--provider-url", url, "--realtime-factor", "0", "--root"])
            .arg(&root)
            .env("OPENAI_API_KEY", KEY)
            .env("PERSYK_CONFIG", tmp.path().join("no-settings.json"))
            .stdin(Stdio::null())
            .output()
            .expect("run persyk");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        assert!(stderr.contains("provider.insecure-url"), "{url}: {stderr}");
        assert!(!stderr.contains(KEY));
        let sessions = std::fs::read_dir(&root).map(|d| d.count()).unwrap_or(0);
        assert_eq!(sessions, 0, "{url}: a session was created");
    }
}

/// The real file system until armed; then every fsync of the session file blocks until
/// released.
#[derive(Debug, Default)]
struct HangWhenArmed {
    armed: AtomicBool,
    released: AtomicBool,
}

impl Storage for HangWhenArmed {
    fn sync_data(&self, file: &std::fs::File) -> std::io::Result<()> {
        while self.armed.load(AtomicOrdering::SeqCst) && !self.released.load(AtomicOrdering::SeqCst)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        file.sync_data()
    }
}

/// Item 12 (engine part): stop waited without a deadline for the session writer
/// (`writer.join()`), so a hung disk kept stop from ever returning.
#[test]
fn issue16_12_stop_returns_when_the_writer_hangs() {
    let rt = runtime();
    let tmp = tempfile::tempdir().expect("tmp");
    let storage = Arc::new(HangWhenArmed::default());
    let store = Store::with_storage(
        Roots::new(tmp.path().canonicalize().expect("root"), Vec::new()).expect("roots"),
        storage.clone(),
    );
    let handle = store.create_session().expect("session");
    let continuation = handle
        .continuation(&LeafSelector::Default)
        .expect("continuation");
    let scenario = Scenario::from_json(
        r#"{"name": "hang", "connections": [{"utterances": [
            {"end_ms": 300, "transcript": "Before the disk hung.", "delay_ms": 20}]}]}"#,
    )
    .expect("scenario");
    let stopped = rt.block_on(async {
        let server = fake::spawn(scenario).await.expect("fake");
        let engine = engine::start(
            settings(&server, Mode::Transcription),
            KEY.into(),
            continuation,
            None,
        );
        stream(&engine, 5, 100, Duration::from_millis(10)).await;
        wait_view(&engine, "the first message", |v| !v.messages.is_empty()).await;
        storage.armed.store(true, AtomicOrdering::SeqCst);
        // The next observation's fsync hangs.
        stream(&engine, 2, 100, Duration::from_millis(10)).await;
        let stopped = tokio::time::timeout(Duration::from_secs(45), engine.stop()).await;
        storage.released.store(true, AtomicOrdering::SeqCst);
        server.shutdown();
        stopped
    });
    let report = stopped.expect("stop never returned while the writer hung");
    assert!(!report.complete);
    assert!(report.halted.is_some(), "{report:?}");
}

/// #16 (live view): a completed item B that waits for its predecessor A vanished from the
/// live view until A resolved; it must stay visible as provisional text.
#[test]
fn issue16_waiting_completion_stays_visible_as_provisional() {
    let scenario = Scenario::from_json(
        r#"{"name": "b-waits", "connections": [{"utterances": [
            {"end_ms": 500, "item_id": "item_A", "transcript": "First.", "deltas": [], "delay_ms": 3000},
            {"end_ms": 1000, "item_id": "item_B", "transcript": "Second.", "deltas": [], "delay_ms": 20}]}]}"#,
    )
    .expect("scenario");
    let (report, _log, _entries) = run_engine(
        scenario,
        Mode::Transcription,
        (11, 100, Duration::from_millis(10)),
        |v| {
            v.messages.is_empty()
                && v.provisional
                    .iter()
                    .any(|(id, text)| id == "item_B" && text == "Second.")
        },
    );
    assert_eq!(report.transcript(), ["First.", "Second."]);
}

/// #16 (removal): a delete the provider explicitly rejected left an intent that restart
/// reported as "never confirmed", as if the remote outcome were unknown.
#[test]
fn issue16_rejected_removal_is_not_an_unconfirmed_intent() {
    use persyk::realtime::removal::pending_intents;
    use persyk::recognize::RemovalOutcome;
    let rt = runtime();
    let (_tmp, _dir, continuation) = fresh_session();
    let handle = continuation.handle().clone();
    let scenario = Scenario::from_file(&support::repo("tests/scenarios/delete-reject.json"))
        .expect("scenario");
    let (outcome, report) = rt.block_on(async {
        let server = fake::spawn(scenario).await.expect("fake");
        let engine = engine::start(
            settings(&server, Mode::Transcription),
            KEY.into(),
            continuation,
            None,
        );
        stream(&engine, 11, 100, Duration::from_millis(10)).await;
        wait_view(&engine, "the message", |v| !v.messages.is_empty()).await;
        let entry = engine.view().borrow().messages[0].entry_id.clone();
        let outcome = engine.remove(&entry).await;
        let report = engine.stop().await;
        server.shutdown();
        (outcome, report)
    });
    assert!(
        matches!(outcome, RemovalOutcome::Rejected(_)),
        "{outcome:?}"
    );
    assert_eq!(report.transcript(), ["This cannot be removed."]);
    let pending = pending_intents(&handle).expect("intents");
    assert!(
        pending.is_empty(),
        "a rejected delete is reported as pending: {pending:?}"
    );
}

/// #16 (restart): `persyk status` only looked for unresolved provider items while a
/// recording was unfinished, and never for requested responses.
#[test]
fn issue16_status_reports_pending_items_and_responses() {
    use persyk::session::format::{
        Direction, EntryBody, Observation, Outcome, RealtimeEvent, RecordingFinished,
        RecordingStarted,
    };
    let event = |seq: u64, payload: Value| {
        let Value::Object(payload) = payload else {
            unreachable!()
        };
        EntryBody::RealtimeEvent(RealtimeEvent {
            connection_id: "conn1".into(),
            direction: Direction::Incoming,
            observation: Observation::Received,
            observed_at: "2026-01-01T00:00:00.000Z".into(),
            sequence: seq,
            payload,
            remote_event_id: None,
            redactions: None,
            media: None,
        })
    };
    let status = |dir: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_persyk"))
            .arg("status")
            .arg(dir)
            .output()
            .expect("run persyk status");
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // A finished recording whose committed item has neither message nor gap.
    let (_tmp, dir, mut c) = fresh_session();
    c.append_one(EntryBody::RecordingStarted(RecordingStarted {
        recording_id: "rec1".into(),
        asset: "assets/rec1.wav".into(),
    }))
    .expect("started");
    c.append_one(event(
        1,
        json!({"type": "input_audio_buffer.committed", "item_id": "item_lost",
               "previous_item_id": null}),
    ))
    .expect("committed");
    c.append_one(EntryBody::RecordingFinished(RecordingFinished {
        recording_id: "rec1".into(),
        duration_ms: 1000,
        outcome: Outcome::Complete,
        gaps: None,
    }))
    .expect("finished");
    let out = status(&dir);
    assert!(
        out.contains("provider item never transcribed: item_lost"),
        "{out}"
    );
    // An unfinished recording with a response created and never done.
    let (_tmp2, dir2, mut c2) = fresh_session();
    c2.append_one(EntryBody::RecordingStarted(RecordingStarted {
        recording_id: "rec2".into(),
        asset: "assets/rec2.wav".into(),
    }))
    .expect("started");
    c2.append_one(event(
        1,
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
    ))
    .expect("created");
    let out = status(&dir2);
    assert!(out.contains("unfinished recording: rec2"), "{out}");
    assert!(
        out.contains("requested response never finished: resp_1"),
        "{out}"
    );
}

/// The real file system, except that an append carrying a `message.removed` fails.
#[derive(Debug, Default)]
struct FailRemoved;

impl Storage for FailRemoved {
    fn append(&self, file: &mut std::fs::File, buf: &[u8]) -> std::io::Result<()> {
        if buf
            .windows(b"\"message.removed\"".len())
            .any(|w| w == b"\"message.removed\"")
        {
            return Err(std::io::Error::other("injected write failure"));
        }
        std::io::Write::write_all(file, buf)
    }
}

/// #16 (removal): the provider's `conversation.item.deleted` (the proof of the remote
/// deletion) could share one append with `message.removed`; when that append failed the
/// proof went with it and the removal could never be applied locally.
#[test]
fn issue16_removal_proof_survives_a_failed_message_removed() {
    use persyk::realtime::removal::{Reconciled, pending_intents, reconcile};
    use persyk::recognize::RemovalOutcome;
    let rt = runtime();
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().canonicalize().expect("root");
    let store = Store::with_storage(
        Roots::new(root.clone(), Vec::new()).expect("roots"),
        Arc::new(FailRemoved),
    );
    let handle = store.create_session().expect("session");
    let name = handle
        .dir()
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let continuation = handle
        .continuation(&LeafSelector::Default)
        .expect("continuation");
    let scenario =
        Scenario::from_file(&support::repo("tests/scenarios/delete-ack.json")).expect("scenario");
    let (target, outcome) = rt.block_on(async {
        let server = fake::spawn(scenario).await.expect("fake");
        let engine = engine::start(
            settings(&server, Mode::Transcription),
            KEY.into(),
            continuation,
            None,
        );
        stream(&engine, 11, 100, Duration::from_millis(10)).await;
        wait_view(&engine, "the first message", |v| !v.messages.is_empty()).await;
        let target = engine.view().borrow().messages[0].entry_id.clone();
        let outcome = engine.remove(&target).await;
        let _ = engine.stop().await;
        server.shutdown();
        (target, outcome)
    });
    assert_eq!(outcome, RemovalOutcome::PendingLocal);
    drop(handle);
    drop(store);
    // A later run (a fresh store on the real file system) finds the proof and applies it.
    let store = Store::new(Roots::new(root, Vec::new()).expect("roots"));
    let handle = store.open_session(0, &name).expect("reopen");
    let pending = pending_intents(&handle).expect("intents");
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(
        pending[0].remote_deleted,
        "the proof of the remote deletion was lost with message.removed"
    );
    assert_eq!(
        reconcile(&handle).expect("reconcile"),
        [Reconciled::Applied { target_id: target }]
    );
}
