//! The Realtime API fake (`persyk::realtime::fake`) driven by a minimal websocket client
//! written here: each scenario in `tests/scenarios/` keeps the promise in its description.
//!
//! Every test writes the fake's dump to a temp dir and, when `python3 -c "import openai"`
//! works, validates it with `scripts/validate-realtime-events.py` (install with
//! `scripts/setup-python`); otherwise it prints a note and skips only that part.

mod fake_cli;
mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use fake_cli::{DumpingFake, scenario, scenario_path};
use futures_util::{SinkExt as _, StreamExt as _};
use persyk::realtime::fake::{
    self, ConnectionEnd, FakeLog, FakeServer, PCM_BYTES_PER_MS, Scenario,
};
use serde_json::{Value, json};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{Instant, timeout, timeout_at};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// The test's "API key": sent in the header, never allowed into a dump.
const KEY: &str = "sk-test-FAKEPROVIDERKEY0000000000000000";
/// 100 ms of PCM16 LE mono 24 kHz.
const CHUNK_BYTES: usize = 4_800;
const WAIT: Duration = Duration::from_secs(5);
const FINISH: Duration = Duration::from_secs(10);

/// Every scenario file and the test that keeps its promise.
const TESTED: &[&str] = &[
    "normal-dictation",
    "out-of-order",
    "failures",
    "duplicate-and-late",
    "conversation-with-audio",
    "delete-ack",
    "delete-reject",
    "delete-timeout",
    "disconnect-midstream",
    "session-expired",
    "slow-reader",
    "planted-secrets",
    "live-dictation",
    "live-out-of-order",
    "live-failures",
    "live-disconnect",
    "realtime-whisper",
    // Driven through the real app by tests/app_journey.rs.
    "journey",
    "journey-cleanup",
];

async fn start(name: &str) -> FakeServer {
    fake::spawn(scenario(name)).await.expect("fake binds")
}

// ---------------------------------------------------------------------------------------------
// A minimal client
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
enum Closed {
    Frame(Option<CloseCode>),
    Error(String),
    Eof,
}

struct Client {
    ws: WebSocketStream<TcpStream>,
    events: Vec<Value>,
    pongs: usize,
    closed: Option<Closed>,
    sent: u64,
}

async fn connect(
    addr: SocketAddr,
    query: &str,
    authorization: bool,
    send_buffer: Option<u32>,
) -> Result<Client, WsError> {
    let socket = TcpSocket::new_v4()?;
    if let Some(bytes) = send_buffer {
        socket.set_send_buffer_size(bytes)?;
    }
    let stream = timeout(WAIT, socket.connect(addr))
        .await
        .expect("connect deadline")?;
    let mut request = format!("ws://{addr}/v1/realtime?{query}").into_client_request()?;
    if authorization {
        let value = HeaderValue::from_str(&format!("Bearer {KEY}")).expect("header value");
        request.headers_mut().insert("Authorization", value);
    }
    let (ws, _) = timeout(WAIT, tokio_tungstenite::client_async(request, stream))
        .await
        .expect("handshake deadline")?;
    Ok(Client {
        ws,
        events: Vec::new(),
        pongs: 0,
        closed: None,
        sent: 0,
    })
}

fn kind(v: &Value) -> &str {
    v["type"].as_str().unwrap_or("")
}

impl Client {
    async fn open(server: &FakeServer, query: &str) -> Client {
        connect(server.addr, query, true, None)
            .await
            .expect("connects")
    }

    /// Sends a client event with a fresh `event_id`; returns the id.
    async fn send(&mut self, mut event: Value) -> String {
        self.sent += 1;
        let id = format!("evt_client_{}", self.sent);
        event["event_id"] = json!(id);
        timeout(WAIT, self.ws.send(Message::text(event.to_string())))
            .await
            .expect("send deadline")
            .expect("send");
        id
    }

    async fn transcription_session(&mut self) {
        self.send(json!({"type": "session.update", "session": {
            "type": "transcription",
            "audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
                "turn_detection": {"type": "server_vad"}}}}}))
            .await;
        self.wait_type("session.updated").await;
    }

    /// A transcription session for a model without turn detection (`turn_detection: null`).
    async fn live_session(&mut self, transcription: Value) {
        self.send(json!({"type": "session.update", "session": {
            "type": "transcription",
            "audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": transcription,
                "turn_detection": null}}}}))
            .await;
        self.wait_type("session.updated").await;
    }

    async fn realtime_session(&mut self) {
        self.send(json!({"type": "session.update", "session": {
            "type": "realtime", "model": "gpt-realtime", "output_modalities": ["audio"],
            "audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": "gpt-4o-transcribe"},
                "turn_detection": {"type": "server_vad"}}}}}))
            .await;
        self.wait_type("session.updated").await;
    }

    /// Appends `chunks` × 100 ms of audio, as fast as the socket takes it.
    async fn append(&mut self, chunks: usize) {
        let audio = B64.encode(fake::output_audio(CHUNK_BYTES));
        for _ in 0..chunks {
            self.send(json!({"type": "input_audio_buffer.append", "audio": audio}))
                .await;
        }
    }

    async fn commit(&mut self) -> String {
        self.send(json!({"type": "input_audio_buffer.commit"}))
            .await
    }

    async fn delete(&mut self, item_id: &str) -> String {
        self.send(json!({"type": "conversation.item.delete", "item_id": item_id}))
            .await
    }

    /// Reads one frame before `deadline`; `false` once closed or at the deadline.
    async fn read_one(&mut self, deadline: Instant) -> bool {
        if self.closed.is_some() {
            return false;
        }
        match timeout_at(deadline, self.ws.next()).await {
            Err(_) => false,
            Ok(None) => {
                self.closed = Some(Closed::Eof);
                false
            }
            Ok(Some(Err(e))) => {
                self.closed = Some(Closed::Error(e.to_string()));
                false
            }
            Ok(Some(Ok(Message::Text(t)))) => {
                self.events
                    .push(serde_json::from_str(t.as_str()).expect("server events are JSON"));
                true
            }
            Ok(Some(Ok(Message::Pong(_)))) => {
                self.pongs += 1;
                true
            }
            Ok(Some(Ok(Message::Close(frame)))) => {
                self.closed = Some(Closed::Frame(frame.map(|f| f.code)));
                // Let tungstenite finish the close handshake.
                let _ = timeout(WAIT, self.ws.next()).await;
                false
            }
            Ok(Some(Ok(_))) => true,
        }
    }

    /// Reads until an event satisfies `pred`; returns it.
    async fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        let mut seen = 0;
        loop {
            if let Some(v) = self.events[seen..].iter().find(|v| pred(v)) {
                return v.clone();
            }
            seen = self.events.len();
            assert!(
                self.read_one(deadline).await || self.events.len() > seen,
                "no {what} (closed: {:?}); got {:?}",
                self.closed,
                self.events.iter().map(kind).collect::<Vec<_>>()
            );
        }
    }

    async fn wait_type(&mut self, ty: &str) -> Value {
        self.wait_for(ty, |v| kind(v) == ty).await
    }

    /// Waits for the `n`-th event (counted over the whole connection) of type `ty`.
    async fn wait_count(&mut self, ty: &str, n: usize) {
        let deadline = Instant::now() + WAIT;
        while self.of_type(ty).len() < n {
            assert!(
                self.read_one(deadline).await,
                "only {} of {n} {ty}",
                self.of_type(ty).len()
            );
        }
    }

    /// Everything that arrives within `window`.
    async fn quiet_for(&mut self, window: Duration) -> Vec<Value> {
        let before = self.events.len();
        let deadline = Instant::now() + window;
        while self.read_one(deadline).await {}
        self.events[before..].to_vec()
    }

    async fn until_closed(&mut self) -> &Closed {
        let deadline = Instant::now() + FINISH;
        while self.read_one(deadline).await {}
        self.closed
            .as_ref()
            .expect("the fake closed the connection")
    }

    async fn close(&mut self) {
        let _ = timeout(WAIT, self.ws.close(None)).await;
        self.until_closed().await;
    }

    fn of_type(&self, ty: &str) -> Vec<&Value> {
        self.events.iter().filter(|v| kind(v) == ty).collect()
    }

    fn index_of(&self, pred: impl Fn(&Value) -> bool) -> usize {
        self.events.iter().position(pred).expect("event present")
    }

    /// (item_id, transcript) of each `.completed`, in arrival order.
    fn completions(&self) -> Vec<(String, String)> {
        self.of_type("conversation.item.input_audio_transcription.completed")
            .into_iter()
            .map(|v| {
                (
                    v["item_id"].as_str().unwrap_or("").to_owned(),
                    v["transcript"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    /// (item_id, previous_item_id) of each `input_audio_buffer.committed`.
    fn committed(&self) -> Vec<(String, Option<String>)> {
        self.of_type("input_audio_buffer.committed")
            .into_iter()
            .map(|v| {
                (
                    v["item_id"].as_str().unwrap_or("").to_owned(),
                    v["previous_item_id"].as_str().map(str::to_owned),
                )
            })
            .collect()
    }
}

fn ids(pairs: &[(String, String)]) -> Vec<&str> {
    pairs.iter().map(|(id, _)| id.as_str()).collect()
}

fn chain(pairs: &[(String, Option<String>)]) -> Vec<(&str, Option<&str>)> {
    pairs
        .iter()
        .map(|(id, prev)| (id.as_str(), prev.as_deref()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Dumps and the validator
// ---------------------------------------------------------------------------------------------

/// Writes the dump (audio truncated), checks the key never reached it, validates it.
fn check_dump(log: &FakeLog, name: &str) -> Option<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{name}.jsonl"));
    log.write_jsonl(&path, true).expect("write the dump");
    let text = std::fs::read_to_string(&path).expect("read the dump");
    assert!(
        !text.contains(KEY),
        "the Authorization value leaked into the dump"
    );
    assert!(
        !text.contains("Bearer sk-"),
        "a bearer header leaked into the dump"
    );
    support::events::validate_dump(&path)
}

fn finished_as(log: &FakeLog, conn: usize, end: ConnectionEnd) {
    assert_eq!(log.connections[conn].end, end, "connection {conn}");
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

#[test]
fn every_scenario_parses_and_is_tested() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("scenario dir") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let s = Scenario::from_file(&path).expect("scenario parses");
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            assert_eq!(s.name, stem, "scenario name matches its file");
            assert!(!s.description.is_empty(), "{stem} has a description");
            found.push(s.name);
        }
    }
    found.sort();
    let mut tested: Vec<String> = TESTED.iter().map(|s| (*s).to_owned()).collect();
    tested.sort();
    assert_eq!(found, tested);
}

#[tokio::test]
async fn normal_dictation() {
    let server = start("normal-dictation").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    let created = c.wait_type("session.created").await;
    assert_eq!(
        kind(&c.events[0]),
        "session.created",
        "session.created comes first"
    );
    assert_eq!(created["session"]["type"], "transcription");
    c.transcription_session().await;
    let updated = c.of_type("session.updated")[0].clone();
    assert_eq!(
        updated["session"]["audio"]["input"]["transcription"]["language"],
        "en"
    );

    c.append(45).await; // 4.5 s: three utterances end by VAD, 500 ms left pending.
    timeout(WAIT, c.ws.send(Message::Ping(b"p".to_vec().into())))
        .await
        .expect("ping deadline")
        .expect("ping");
    let first = c.commit().await;
    let second = c.commit().await;
    assert!(matches!(
        c.until_closed().await,
        Closed::Frame(Some(CloseCode::Normal))
    ));

    assert_eq!(
        c.completions()
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>(),
        [
            "Hello there.",
            "This is a dictation test.",
            "Everything arrives in order.",
            "The last words."
        ]
    );
    assert_eq!(
        chain(&c.committed()),
        [
            ("item_c0_u0", None),
            ("item_c0_u1", Some("item_c0_u0")),
            ("item_c0_u2", Some("item_c0_u1")),
            ("item_c0_u3", Some("item_c0_u2")),
        ]
    );
    // VAD ends three utterances; the commit ends the fourth (no speech_stopped for it).
    assert_eq!(c.of_type("input_audio_buffer.speech_started").len(), 4);
    let stopped = c.of_type("input_audio_buffer.speech_stopped");
    let ends: Vec<_> = stopped.iter().map(|v| v["audio_end_ms"].clone()).collect();
    assert_eq!(ends, [json!(1000), json!(2500), json!(4000)]);
    // Deltas add up to each transcript.
    let deltas: String = c
        .of_type("conversation.item.input_audio_transcription.delta")
        .iter()
        .filter(|v| v["item_id"] == "item_c0_u1")
        .filter_map(|v| v["delta"].as_str())
        .collect();
    assert_eq!(deltas, "This is a dictation test.");
    // Only the second commit found nothing pending.
    let errors = c.of_type("error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0]["error"]["code"],
        "input_audio_buffer_commit_empty"
    );
    assert_eq!(errors[0]["error"]["event_id"], json!(second));
    assert_ne!(errors[0]["error"]["event_id"], json!(first));
    assert_eq!(c.pongs, 1, "the fake answers pings");

    let log = server.finish(FINISH).await.expect("fake finishes");
    finished_as(&log, 0, ConnectionEnd::FakeClosed);
    let conn = &log.connections[0];
    assert!(conn.authorization.present && conn.authorization.bearer);
    assert_eq!(conn.authorization.len, "Bearer ".len() + KEY.len());
    assert_eq!(conn.openai_beta, None);
    assert_eq!(conn.path, "/v1/realtime?intent=transcription");
    assert_eq!(conn.appends, 45);
    assert_eq!(conn.audio_bytes, 45 * CHUNK_BYTES as u64);
    assert_eq!(conn.received().count(), 1 + 45 + 2);
    check_dump(&log, "normal-dictation");
}

#[tokio::test]
async fn missing_authorization_is_rejected_with_401() {
    let server = start("normal-dictation").await;
    match connect(server.addr, "intent=transcription", false, None).await {
        Err(WsError::Http(response)) => assert_eq!(response.status().as_u16(), 401),
        Err(e) => panic!("expected HTTP 401, got {e}"),
        Ok(_) => panic!("expected HTTP 401, got a websocket"),
    }
    let log = server.finish(FINISH).await.expect("fake finishes");
    assert_eq!(log.connections.len(), 1);
    finished_as(&log, 0, ConnectionEnd::Unauthorized);
    assert!(!log.connections[0].authorization.present);
}

#[tokio::test]
async fn out_of_order() {
    let server = start("out-of-order").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.transcription_session().await;
    c.append(30).await;
    c.commit().await;
    c.until_closed().await;

    assert_eq!(
        chain(&c.committed()),
        [
            ("item_A", None),
            ("item_B", Some("item_A")),
            ("item_C", Some("item_B"))
        ]
    );
    assert_eq!(ids(&c.completions()), ["item_B", "item_C", "item_A"]);
    let errors = c.of_type("error");
    assert_eq!(
        errors[0]["error"]["code"],
        "input_audio_buffer_commit_empty"
    );

    let log = server.finish(FINISH).await.expect("fake finishes");
    finished_as(&log, 0, ConnectionEnd::FakeClosed);
    check_dump(&log, "out-of-order");
}

#[tokio::test]
async fn failures() {
    let server = start("failures").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.transcription_session().await;
    c.append(40).await;
    c.commit().await;
    c.until_closed().await;

    assert_eq!(ids(&c.completions()), ["item_A", "item_D"]);
    let failed = c.of_type("conversation.item.input_audio_transcription.failed");
    assert_eq!(failed.len(), 2);
    assert_eq!(failed[0]["item_id"], "item_B");
    assert_eq!(failed[0]["content_index"], 0);
    assert_eq!(failed[0]["error"]["type"], "transcription_error");
    assert_eq!(failed[0]["error"]["code"], "audio_unintelligible");
    assert_eq!(failed[1]["item_id"], "item_C");
    assert_eq!(failed[1]["error"]["code"], "transcription_failed");
    // B streamed a partial delta before failing; C streamed nothing.
    let deltas = c.of_type("conversation.item.input_audio_transcription.delta");
    let partial: Vec<_> = deltas.iter().filter(|v| v["item_id"] == "item_B").collect();
    assert_eq!(partial.len(), 1);
    assert_eq!(partial[0]["delta"], "Partial");
    assert!(deltas.iter().all(|v| v["item_id"] != "item_C"));

    let log = server.finish(FINISH).await.expect("fake finishes");
    check_dump(&log, "failures");
}

#[tokio::test]
async fn duplicate_and_late() {
    let server = start("duplicate-and-late").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.transcription_session().await;
    c.append(30).await;
    c.wait_count("conversation.item.input_audio_transcription.completed", 2)
        .await;
    // C is held until the commit: nothing for it arrives before.
    c.quiet_for(Duration::from_millis(400)).await;
    assert!(c.completions().iter().all(|(id, _)| id != "item_C"));
    let commit = c.commit().await;
    c.until_closed().await;

    let completions = c.completions();
    let a: Vec<_> = completions
        .iter()
        .filter(|(id, _)| id == "item_A")
        .collect();
    assert_eq!(a.len(), 2, "A completes twice");
    assert_eq!(a[0].1, a[1].1);
    let failed_b = c.index_of(|v| {
        kind(v) == "conversation.item.input_audio_transcription.failed" && v["item_id"] == "item_B"
    });
    let commit_answer =
        c.index_of(|v| kind(v) == "error" && v["error"]["event_id"] == json!(commit));
    let late_b = c.index_of(|v| {
        kind(v) == "conversation.item.input_audio_transcription.completed"
            && v["item_id"] == "item_B"
    });
    let c_done = c.index_of(|v| {
        kind(v) == "conversation.item.input_audio_transcription.completed"
            && v["item_id"] == "item_C"
    });
    assert!(
        failed_b < commit_answer && commit_answer < late_b,
        "B fails, then completes late"
    );
    assert_eq!(c.events[late_b]["transcript"], "Too late to matter.");
    assert!(commit_answer < c_done, "C completes only after the commit");

    let log = server.finish(FINISH).await.expect("fake finishes");
    check_dump(&log, "duplicate-and-late");
}

#[tokio::test]
async fn conversation_with_audio() {
    let server = start("conversation-with-audio").await;
    let mut c = Client::open(&server, "model=gpt-realtime").await;
    let created = c.wait_type("session.created").await;
    assert_eq!(created["session"]["type"], "realtime");
    c.realtime_session().await;
    c.append(10).await;
    c.wait_count("response.done", 1).await;
    c.append(10).await;
    c.wait_count("response.done", 2).await;
    c.commit().await;
    c.until_closed().await;

    // The first response, event by event.
    let first: Vec<&Value> = c
        .events
        .iter()
        .filter(|v| {
            v["response_id"] == "resp_c0_u0"
                || v["response"]["id"] == "resp_c0_u0"
                || v["item"]["id"] == "item_c0_r0"
                || kind(v) == "rate_limits.updated"
        })
        .collect();
    let mut order: Vec<&str> = first.iter().map(|v| kind(v)).collect();
    order.dedup();
    assert_eq!(
        order,
        [
            "response.created",
            "rate_limits.updated",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
            "response.output_audio_transcript.delta",
            "response.output_audio.delta",
            "response.output_audio_transcript.delta",
            "response.output_audio.delta",
            "response.output_audio_transcript.delta",
            "response.output_audio.delta",
            "response.output_audio_transcript.delta",
            "response.output_audio.delta",
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "conversation.item.done",
            "response.output_item.done",
            "response.done",
            "rate_limits.updated",
        ]
    );
    let audio: Vec<u8> = first
        .iter()
        .filter(|v| kind(v) == "response.output_audio.delta")
        .flat_map(|v| {
            B64.decode(v["delta"].as_str().unwrap_or(""))
                .expect("base64")
        })
        .collect();
    assert_eq!(audio.len() as u64, 500 * PCM_BYTES_PER_MS);
    assert_eq!(audio, fake::output_audio(audio.len()));
    let text: String = first
        .iter()
        .filter(|v| kind(v) == "response.output_audio_transcript.delta")
        .filter_map(|v| v["delta"].as_str())
        .collect();
    assert_eq!(text, "It is sunny today.");
    let added = first
        .iter()
        .find(|v| kind(v) == "conversation.item.added")
        .expect("assistant item added");
    assert_eq!(added["previous_item_id"], "item_U0");
    assert_eq!(added["item"]["role"], "assistant");
    let done = c.of_type("response.done")[0].clone();
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        "It is sunny today."
    );
    // The user transcript of U0 completes after its response started.
    let created_at = c.index_of(|v| kind(v) == "response.created");
    let u0_done = c.index_of(|v| {
        kind(v) == "conversation.item.input_audio_transcription.completed"
            && v["item_id"] == "item_U0"
    });
    assert!(created_at < u0_done);
    // The next user item follows the assistant item.
    assert_eq!(
        chain(&c.committed()),
        [("item_U0", None), ("item_U1", Some("item_c0_r0"))]
    );
    assert_eq!(c.of_type("rate_limits.updated").len(), 2);

    let log = server.finish(FINISH).await.expect("fake finishes");
    finished_as(&log, 0, ConnectionEnd::FakeClosed);
    check_dump(&log, "conversation-with-audio");
}

#[tokio::test]
async fn delete_ack() {
    let server = start("delete-ack").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.transcription_session().await;
    c.append(20).await;
    c.wait_count("conversation.item.input_audio_transcription.completed", 2)
        .await;
    c.delete("item_B").await;
    let deleted = c.wait_type("conversation.item.deleted").await;
    assert_eq!(deleted["item_id"], "item_B");
    let unknown = c.delete("item_nope").await;
    let error = c.wait_type("error").await;
    assert_eq!(error["error"]["code"], "item_not_found");
    assert_eq!(error["error"]["event_id"], json!(unknown));
    // The deleted item leaves the chain.
    c.append(10).await;
    c.wait_count("input_audio_buffer.committed", 3).await;
    c.commit().await;
    c.until_closed().await;
    assert_eq!(
        chain(&c.committed()),
        [
            ("item_A", None),
            ("item_B", Some("item_A")),
            ("item_C", Some("item_A"))
        ]
    );
    assert_eq!(c.of_type("conversation.item.deleted").len(), 1);

    let log = server.finish(FINISH).await.expect("fake finishes");
    check_dump(&log, "delete-ack");
}

#[tokio::test]
async fn delete_reject() {
    let server = start("delete-reject").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.transcription_session().await;
    c.append(10).await;
    c.wait_type("conversation.item.input_audio_transcription.completed")
        .await;
    let delete = c.delete("item_A").await;
    let error = c.wait_type("error").await;
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(error["error"]["code"], "item_delete_failed");
    assert_eq!(error["error"]["param"], "item_id");
    assert_eq!(error["error"]["event_id"], json!(delete));
    c.commit().await;
    c.until_closed().await;
    assert!(c.of_type("conversation.item.deleted").is_empty());

    let log = server.finish(FINISH).await.expect("fake finishes");
    check_dump(&log, "delete-reject");
}

#[tokio::test]
async fn delete_timeout() {
    let server = start("delete-timeout").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.transcription_session().await;
    c.append(10).await;
    c.wait_type("conversation.item.input_audio_transcription.completed")
        .await;
    c.delete("item_A").await;
    let answer = c.quiet_for(Duration::from_millis(1_000)).await;
    assert!(answer.is_empty(), "no answer to the delete: {answer:?}");
    // The connection is healthy all the same.
    timeout(
        WAIT,
        c.ws.send(Message::Ping(b"still there?".to_vec().into())),
    )
    .await
    .expect("ping deadline")
    .expect("ping");
    c.quiet_for(Duration::from_millis(300)).await;
    assert_eq!(c.pongs, 1);
    c.close().await;

    let log = server.finish(FINISH).await.expect("fake finishes");
    finished_as(&log, 0, ConnectionEnd::ClientClosed);
    assert!(
        log.connections[0]
            .notes()
            .any(|n| n.contains("left unanswered"))
    );
    check_dump(&log, "delete-timeout");
}

#[tokio::test]
async fn disconnect_midstream() {
    let server = start("disconnect-midstream").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.transcription_session().await;
    // Keep sending until the reset reaches us; writes into a reset socket may fail.
    let audio = B64.encode(fake::output_audio(CHUNK_BYTES));
    for _ in 0..20 {
        let event = json!({"type": "input_audio_buffer.append", "audio": audio});
        match timeout(WAIT, c.ws.send(Message::text(event.to_string()))).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => break,
            Err(_) => panic!("send deadline"),
        }
    }
    match c.until_closed().await {
        Closed::Error(e) => eprintln!("disconnect-midstream: the client saw {e}"),
        Closed::Eof => eprintln!("disconnect-midstream: the client saw EOF"),
        Closed::Frame(code) => panic!("an abrupt end, not a close frame ({code:?})"),
    }

    // The reconnect is served normally.
    let mut c2 = Client::open(&server, "intent=transcription").await;
    c2.transcription_session().await;
    c2.append(10).await;
    let done = c2
        .wait_type("conversation.item.input_audio_transcription.completed")
        .await;
    assert_eq!(done["transcript"], "After reconnecting.");
    c2.commit().await;
    c2.until_closed().await;

    let log = server.finish(FINISH).await.expect("fake finishes");
    assert_eq!(log.connections.len(), 2);
    finished_as(&log, 0, ConnectionEnd::ScriptedDisconnect);
    assert_eq!(log.connections[0].appends, 8);
    finished_as(&log, 1, ConnectionEnd::FakeClosed);
    check_dump(&log, "disconnect-midstream");
}

#[tokio::test]
async fn session_expired() {
    let server = start("session-expired").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.transcription_session().await;
    c.append(20).await;
    let closed = c.until_closed().await;
    assert!(
        matches!(closed, Closed::Frame(Some(CloseCode::Normal))),
        "{closed:?}"
    );
    let error = c.of_type("error");
    assert_eq!(error.len(), 1);
    assert_eq!(error[0]["error"]["code"], "session_expired");
    assert_eq!(ids(&c.completions()), ["item_A"]);

    let log = server.finish(FINISH).await.expect("fake finishes");
    finished_as(&log, 0, ConnectionEnd::SessionExpired);
    assert_eq!(log.connections[0].appends, 12);
    check_dump(&log, "session-expired");
}

#[tokio::test]
async fn slow_reader() {
    let server = start("slow-reader").await;
    let mut c = connect(server.addr, "intent=transcription", true, Some(4_096))
        .await
        .expect("connects");
    c.transcription_session().await;
    let started = Instant::now();
    c.append(60).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1_000),
        "writes stalled only {took:?}"
    );
    c.commit().await;
    c.until_closed().await;
    assert_eq!(ids(&c.completions()), ["item_A", "item_B"]);

    let log = server.finish(FINISH).await.expect("fake finishes");
    let conn = &log.connections[0];
    finished_as(&log, 0, ConnectionEnd::FakeClosed);
    assert_eq!(conn.appends, 60, "nothing lost");
    let appends_at: Vec<u64> = conn
        .entries
        .iter()
        .filter(
            |e| matches!(&e.body, fake::Body::Event(v) if kind(v) == "input_audio_buffer.append"),
        )
        .map(|e| e.at_ms)
        .collect();
    assert!(
        appends_at[3] >= appends_at[2] + 1_490,
        "the 4th append was read {} ms after the 3rd",
        appends_at[3] - appends_at[2]
    );
    assert!(conn.notes().any(|n| n.starts_with("pausing reading")));
    assert!(conn.notes().any(|n| n == "resumed reading"));
    check_dump(&log, "slow-reader");
}

#[tokio::test]
async fn planted_secrets() {
    let server = start("planted-secrets").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    let created = c.wait_type("session.created").await;
    assert!(
        created["session"]["client_secret"]["value"]
            .as_str()
            .is_some_and(|v| v.starts_with("ek_") && v.contains("planted"))
    );
    c.transcription_session().await;
    let future = c.wait_type("fake.future_event").await;
    assert!(
        future["text"]
            .as_str()
            .is_some_and(|t| t.contains("sk-proj-planted"))
    );
    assert!(
        c.index_of(|v| kind(v) == "rate_limits.updated")
            < c.index_of(|v| kind(v) == "fake.future_event")
    );
    c.append(20).await;
    c.commit().await;
    c.until_closed().await;
    assert!(c.completions()[0].1.contains("sk-proj-planted"));
    let failed = c.of_type("conversation.item.input_audio_transcription.failed");
    assert!(
        failed[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("api_key=planted"))
    );

    let log = server.finish(FINISH).await.expect("fake finishes");
    if let Some(report) = check_dump(&log, "planted-secrets") {
        assert!(report.contains(" 1 fake.* skipped"), "{report}");
        assert!(report.contains(" 1 planted extras"), "{report}");
    }
}

/// `persyk fake-provider` serves a scenario and writes the dump.
#[tokio::test]
async fn cli_fake_provider() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = dir.path().join("cli-normal-dictation.jsonl");
    let fake = DumpingFake::start(&scenario_path("normal-dictation"), &dump, &[], WAIT);
    let addr = fake.addr;

    let mut c = connect(addr, "intent=transcription", true, None)
        .await
        .expect("connects");
    c.transcription_session().await;
    c.append(10).await;
    c.wait_type("conversation.item.input_audio_transcription.completed")
        .await;
    c.commit().await;
    c.until_closed().await;

    let (status, rest) = fake.finish(FINISH);
    assert!(status.success(), "{rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("connection 0: fake_closed")),
        "{rest:?}"
    );
    let text = std::fs::read_to_string(&dump).expect("the dump is written");
    assert!(!text.contains(KEY));
    assert!(
        text.contains("\"truncated\""),
        "audio is truncated in CLI dumps"
    );
    support::events::validate_dump(&dump);
}

// ---------------------------------------------------------------------------------------------
// Models without turn detection: client commits
// ---------------------------------------------------------------------------------------------

/// The validator's verdict on a dump (`None` without openai), without asserting it.
fn verdict(log: &FakeLog, name: &str) -> Option<(bool, String)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{name}.jsonl"));
    log.write_jsonl(&path, true).expect("write the dump");
    support::events::verdict(&path)
}

/// Appends `ms` of audio in 100 ms events (the last one shorter).
async fn append_ms(c: &mut Client, ms: usize) {
    let mut left = ms * PCM_BYTES_PER_MS as usize;
    while left > 0 {
        let n = left.min(CHUNK_BYTES);
        let audio = B64.encode(fake::output_audio(n));
        c.send(json!({"type": "input_audio_buffer.append", "audio": audio}))
            .await;
        left -= n;
    }
}

#[tokio::test]
async fn live_dictation() {
    let server = start("live-dictation").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.wait_type("session.created").await;
    c.live_session(json!({"model": "gpt-live-transcribe", "keywords": ["Persyk"]}))
        .await;
    // Deltas stream while the user speaks, before any commit.
    append_ms(&mut c, 600).await;
    let first = c
        .wait_type("conversation.item.input_audio_transcription.delta")
        .await;
    assert_eq!(first["item_id"], "item_L1");
    assert!(c.of_type("input_audio_buffer.committed").is_empty());
    let commit = c.commit().await;
    let done = c
        .wait_type("conversation.item.input_audio_transcription.completed")
        .await;
    assert_eq!(done["transcript"], "Persyk listens live.");
    assert_eq!(done["usage"]["type"], "duration");
    assert_eq!(done["usage"]["seconds"], 0.6);
    assert_eq!(chain(&c.committed()), [("item_L1", None)]);
    // A commit under 100 ms is refused, naming it.
    append_ms(&mut c, 50).await;
    let short = c.commit().await;
    let err = c.wait_type("error").await;
    assert_eq!(err["error"]["code"], "input_audio_buffer_commit_empty");
    assert_eq!(err["error"]["event_id"], short);
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("buffer too small"))
    );
    assert_ne!(short, commit);
    append_ms(&mut c, 400).await;
    c.commit().await;
    append_ms(&mut c, 300).await;
    c.commit().await;
    c.wait_count("conversation.item.input_audio_transcription.completed", 3)
        .await;
    assert_eq!(
        chain(&c.committed()),
        [
            ("item_L1", None),
            ("item_L2", Some("item_L1")),
            ("item_L3", Some("item_L2"))
        ]
    );
    // No VAD: no speech events ever.
    assert!(
        c.events
            .iter()
            .all(|v| !kind(v).starts_with("input_audio_buffer.speech_"))
    );
    c.close().await;
    let log = server.finish(FINISH).await.expect("fake finishes");
    check_dump(&log, "live-dictation");
}

#[tokio::test]
async fn live_models_refuse_what_the_service_refuses() {
    let server = start("live-dictation").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.wait_type("session.created").await;
    let refused =
        |param: &'static str| move |v: &Value| kind(v) == "error" && v["error"]["param"] == param;
    // Server VAD, and an omitted turn_detection (which keeps the session's server VAD).
    for turn_detection in [Some(json!({"type": "server_vad"})), None] {
        let mut input = json!({"format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "gpt-live-transcribe"}});
        if let Some(td) = turn_detection {
            input["turn_detection"] = td;
        }
        let id = c
            .send(json!({"type": "session.update",
                "session": {"type": "transcription", "audio": {"input": input}}}))
            .await;
        let before = c.of_type("error").len();
        let err = c
            .wait_for("turn detection refusal", |v| {
                kind(v) == "error" && v["error"]["event_id"] == id.as_str()
            })
            .await;
        assert_eq!(c.of_type("error").len(), before + 1);
        assert_eq!(
            err["error"],
            json!({"type": "invalid_request_error", "code": "invalid_value",
                "message": "Turn detection is not supported for this transcription model",
                "param": "session.audio.input.turn_detection", "event_id": id})
        );
    }
    let update = |t: Value| {
        json!({"type": "session.update", "session": {"type": "transcription",
            "audio": {"input": {"transcription": t, "turn_detection": null}}}})
    };
    c.send(update(
        json!({"model": "gpt-live-transcribe", "keywords": ["ok", "<b>"]}),
    ))
    .await;
    c.wait_for(
        "bad keyword",
        refused("session.audio.input.transcription.keywords"),
    )
    .await;
    c.send(update(
        json!({"model": "gpt-realtime-whisper", "keywords": ["ok"]}),
    ))
    .await;
    c.send(update(
        json!({"model": "gpt-realtime-whisper", "prompt": "Vocabulary"}),
    ))
    .await;
    c.wait_for(
        "prompt",
        refused("session.audio.input.transcription.prompt"),
    )
    .await;
    c.send(update(
        json!({"model": "gpt-live-transcribe", "language": "en", "languages": ["en", "uk"]}),
    ))
    .await;
    c.wait_for(
        "both languages",
        refused("session.audio.input.transcription.languages"),
    )
    .await;
    let keyword_refusals = c
        .of_type("error")
        .into_iter()
        .filter(|v| v["error"]["param"] == "session.audio.input.transcription.keywords")
        .count();
    assert_eq!(
        keyword_refusals, 2,
        "a bad keyword; keywords for a model without them"
    );
    // Nothing was applied: no session.updated at all.
    assert!(c.of_type("session.updated").is_empty());
    c.close().await;
    let log = server.finish(FINISH).await.expect("fake finishes");
    // The validator flags every refused update by its own rules (the SDK accepts them).
    if let Some((ok, report)) = verdict(&log, "live-refusals") {
        assert!(
            !ok,
            "the validator must flag the refused updates:\n{report}"
        );
        for rule in [
            "supports no turn detection",
            "must be sent as null",
            "without '<' or '>'",
            "gpt-realtime-whisper: takes no keywords",
            "gpt-realtime-whisper: takes no prompt",
            "language and languages",
        ] {
            assert!(report.contains(rule), "{rule}:\n{report}");
        }
    }
}

/// Client turns over a scenario: `phrases` × (`ms` appended, commit); returns the client.
async fn live_turns(name: &str, model: &str, phrases: &[usize]) -> (Client, FakeServer) {
    let server = start(name).await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.wait_type("session.created").await;
    c.live_session(json!({"model": model})).await;
    for &ms in phrases {
        append_ms(&mut c, ms).await;
        c.commit().await;
    }
    (c, server)
}

#[tokio::test]
async fn live_out_of_order() {
    let (mut c, server) =
        live_turns("live-out-of-order", "gpt-live-transcribe", &[500, 500, 500]).await;
    c.wait_count("conversation.item.input_audio_transcription.completed", 5)
        .await;
    let completions = c.completions();
    assert_eq!(
        ids(&completions),
        ["item_O2", "item_O2", "item_O3", "item_O2", "item_O1"]
    );
    assert_eq!(
        chain(&c.committed()),
        [
            ("item_O1", None),
            ("item_O2", Some("item_O1")),
            ("item_O3", Some("item_O2"))
        ]
    );
    c.close().await;
    let log = server.finish(FINISH).await.expect("fake finishes");
    check_dump(&log, "live-out-of-order");
}

#[tokio::test]
async fn live_failures() {
    let (mut c, server) =
        live_turns("live-failures", "gpt-live-transcribe", &[300, 300, 300]).await;
    c.wait_count("conversation.item.input_audio_transcription.completed", 2)
        .await;
    c.wait_type("conversation.item.input_audio_transcription.failed")
        .await;
    assert_eq!(ids(&c.completions()), ["item_F1", "item_F3"]);
    let deltas = c.of_type("conversation.item.input_audio_transcription.delta");
    assert!(deltas.iter().all(|v| v["item_id"] != "item_F2"));
    c.close().await;
    let log = server.finish(FINISH).await.expect("fake finishes");
    check_dump(&log, "live-failures");
}

#[tokio::test]
async fn live_disconnect() {
    let (mut c, server) = live_turns("live-disconnect", "gpt-live-transcribe", &[400]).await;
    match c.until_closed().await {
        Closed::Frame(code) => panic!("an abrupt end, not a close frame ({code:?})"),
        other => eprintln!("live-disconnect: the client saw {other:?}"),
    }
    assert!(c.completions().is_empty());
    let log = server.finish(FINISH).await.expect("fake finishes");
    finished_as(&log, 0, ConnectionEnd::ScriptedDisconnect);
    check_dump(&log, "live-disconnect");
}

#[tokio::test]
async fn realtime_whisper() {
    let server = start("realtime-whisper").await;
    let mut c = Client::open(&server, "intent=transcription").await;
    c.wait_type("session.created").await;
    c.live_session(json!({"model": "gpt-realtime-whisper", "delay": "low", "language": "en"}))
        .await;
    append_ms(&mut c, 450).await;
    c.commit().await;
    append_ms(&mut c, 250).await;
    c.commit().await;
    c.wait_count("conversation.item.input_audio_transcription.completed", 2)
        .await;
    assert_eq!(ids(&c.completions()), ["item_W1", "item_W2"]);
    let done = c.of_type("conversation.item.input_audio_transcription.completed");
    assert_eq!(
        done[0]["usage"],
        json!({"type": "duration", "seconds": 0.45})
    );
    assert!(
        c.events
            .iter()
            .all(|v| !kind(v).starts_with("input_audio_buffer.speech_"))
    );
    c.close().await;
    let log = server.finish(FINISH).await.expect("fake finishes");
    check_dump(&log, "realtime-whisper");
}
