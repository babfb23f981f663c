//! A loopback fake of the OpenAI Realtime API (GA protocol) to test the realtime client
//! against: scripted transcripts, out-of-order/duplicate/late completions, conversation
//! responses with audio, deletion outcomes, disconnects, session expiry and backpressure.
//!
//! # Design
//!
//! One [`Scenario`] (JSON, see `tests/scenarios/`) scripts one or more sequential websocket
//! connections. [`serve`] accepts them one at a time on a caller's listener; each connection
//! is one task-owned loop (mini-redis style) that `select!`s on the shutdown signal, the next
//! client frame and the next timer. Every wait has a deadline: accept, handshake, each write,
//! the close handshake, client idleness and the connection's total duration. There are no
//! channels: scheduled server events sit in a timer map owned by the connection loop.
//! [`spawn`] binds `127.0.0.1:0` and runs [`serve`] on a task.
//!
//! `session.created` goes out at once, or `session_created_delay_ms` after the upgrade (a slow
//! service; client frames sent meanwhile are read after it).
//!
//! Utterances are driven by received audio, not wall time: utterance *n* ends once the
//! client has appended `end_ms` of PCM16 LE mono 24 kHz audio in total (48 bytes per ms).
//! At its first audio the fake sends `input_audio_buffer.speech_started`; at its end
//! `speech_stopped`, `input_audio_buffer.committed {item_id, previous_item_id}`,
//! `conversation.item.added` and `conversation.item.done` (a user message with one
//! `input_audio` part, transcript `null`); then, `delay_ms` later, the transcription deltas
//! (spread over the delay) and `…input_audio_transcription.completed` (or `.failed`).
//! Per-utterance delays make completions arrive out of order; `extra_completions` repeat them
//! (duplicates) or deliver them late; `after_client_commit` holds them until the client's
//! `input_audio_buffer.commit`.
//!
//! # Models without turn detection (client turns)
//!
//! The fake knows the rules of the current transcription models on its own (not from the
//! client's capability table): `gpt-live-transcribe` and `gpt-realtime-whisper` refuse any
//! `turn_detection` but `null` — an omitted field keeps the session's `server_vad`, which is
//! refused too — with `invalid_request_error` / `invalid_value` /
//! `session.audio.input.turn_detection`; `keywords` are refused except for `gpt-transcribe`
//! and `gpt-live-transcribe`, and a keyword with `<`, `>`, CR or LF refuses the whole update;
//! `prompt` is refused with `gpt-realtime-whisper`; `language` with `languages` is refused.
//! A refused update changes nothing and names the client's event id. The same rules hold for
//! a `realtime` session's input transcription (its server VAD needs a model that takes it).
//!
//! With `turn_detection: null` the fake has no VAD: no `speech_started`/`speech_stopped`, and
//! `end_ms` is ignored. While voiced audio arrives (appends louder than [`VOICED_RMS`]) the
//! utterance in progress streams its deltas (one per [`LIVE_DELTA_MS`] of voiced audio, on
//! its pre-allocated item id); each client commit with at
//! least 100 ms ends it (`committed`, `item.added`/`done`, the deltas not yet sent, then
//! `completed` `delay_ms` later). A commit past the scripted utterances is an item with an
//! empty transcript. The streaming models report `usage` as `{type: "duration", seconds}`.
//!
//! The client's commit turns pending audio (at least 100 ms) into the utterance in progress,
//! or into `final_utterance` when every scripted utterance has ended. With less than 100 ms
//! pending, or trailing audio and no `final_utterance` (the fake treats it as silence its VAD
//! dropped), the answer is an `error` with code `input_audio_buffer_commit_empty`, naming the
//! client's event id.
//!
//! In a `realtime` session (`?model=…`), an utterance with a `response` is followed by an
//! assistant response: `response.created`, `rate_limits.updated`,
//! `response.output_item.added`, `conversation.item.added` (previous item: the user item),
//! `response.content_part.added`, interleaved `response.output_audio_transcript.delta` and
//! `response.output_audio.delta` (deterministic PCM16), `response.output_audio.done`,
//! `response.output_audio_transcript.done`, `response.content_part.done`,
//! `conversation.item.done`, `response.output_item.done` and `response.done`.
//!
//! `conversation.item.delete` is acknowledged (`conversation.item.deleted`; an unknown item
//! gets an `error`), rejected (an `error` naming the client's event id) or never answered,
//! per [`DeleteMode`]. [`Action`]s fire on a [`Trigger`] (connected, session updated, the
//! N-th append, commit, delete): send any event (rate limits, an unknown `fake.*` type,
//! planted secrets), pause reading the socket (backpressure), disconnect abruptly (TCP reset,
//! no close frame), expire the session (`error` `session_expired`, then a close frame) or
//! close normally.
//!
//! # Evidence
//!
//! [`FakeLog`] records every frame received and every event sent, in order, per connection,
//! and dumps it as JSONL ([`FakeLog::to_jsonl`]) for `scripts/validate-realtime-events.py`.
//! Invariant: the `Authorization` header value is never stored — only whether it was present,
//! whether it was a bearer token and its length. The request path is stored sanitized.
//!
//! # Simplifications
//!
//! No barge-in (speech during a response does not cancel it), no server-side audio analysis
//! beyond the loudness gate of streamed deltas,
//! no `conversation.item.create`/`retrieve`/`truncate`/`response.create` handling (they are
//! logged with a note), and error codes other than `input_audio_buffer_commit_empty` and
//! `session_expired` are plausible rather than verified against the live service.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use futures_util::{SinkExt as _, StreamExt as _};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::realtime::sanitize::sanitize_url;

/// PCM16 LE mono at 24 kHz: bytes per millisecond of audio.
pub const PCM_BYTES_PER_MS: u64 = 48;
/// Least pending audio a commit accepts (as the service does).
pub const MIN_COMMIT_MS: u64 = 100;
/// Without turn detection: audio per streamed transcription delta during speech.
pub const LIVE_DELTA_MS: u64 = 200;
/// An append whose PCM16 RMS is above this counts as voiced for streamed deltas (the fake's
/// only audio analysis: quiet pauses stream nothing).
pub const VOICED_RMS: f64 = 300.0;

fn rms(pcm: &[u8]) -> f64 {
    let n = pcm.len() / 2;
    if n == 0 {
        return 0.0;
    }
    let sum: f64 = pcm
        .chunks_exact(2)
        .map(|b| f64::from(i16::from_le_bytes([b[0], b[1]])).powi(2))
        .sum();
    (sum / n as f64).sqrt()
}

/// The models that support no turn detection (and report usage as a duration).
pub const STREAMING_MODELS: &[&str] = &["gpt-live-transcribe", "gpt-realtime-whisper"];
/// The models that take `keywords`.
pub const KEYWORD_MODELS: &[&str] = &["gpt-transcribe", "gpt-live-transcribe"];
/// Most log entries kept per connection; later ones are counted in `dropped_entries`.
pub const MAX_LOG_ENTRIES: usize = 200_000;
/// Base64 characters of audio kept per event in a truncated dump.
pub const DUMP_AUDIO_CHARS: usize = 64;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Output audio per `response.output_audio.delta` (100 ms).
const OUTPUT_CHUNK_BYTES: usize = 4_800;

// ---------------------------------------------------------------------------------------------
// Scenario
// ---------------------------------------------------------------------------------------------

/// A scripted run of the fake: one or more sequential connections.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in dumps and test output.
    pub name: String,
    /// What the scenario exercises and what a client should conclude.
    #[serde(default)]
    pub description: String,
    /// Reject a websocket upgrade without an `Authorization` header with HTTP 401.
    #[serde(default)]
    pub require_authorization: bool,
    /// Reject every websocket upgrade with HTTP 401, as the service answers a key it does not
    /// accept (the key itself is never looked at).
    #[serde(default)]
    pub reject_every_key: bool,
    /// How long to wait for each connection.
    #[serde(default = "default_accept_timeout_ms")]
    pub accept_timeout_ms: u64,
    /// `SO_RCVBUF` of the listening socket (inherited by accepted sockets), applied by
    /// [`bind`]: small values make a reading pause reach the client's writes quickly.
    #[serde(default)]
    pub recv_buffer_bytes: Option<u32>,
    /// One script per connection, in order.
    pub connections: Vec<ConnectionScript>,
}

/// What the fake does on one connection.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionScript {
    /// Merged into the `session` object of `session.created` only (e.g. a planted
    /// `client_secret`).
    #[serde(default)]
    pub session: Map<String, Value>,
    /// How long after the upgrade the fake sends `session.created` (a slow service: the
    /// client must hold its audio until the session exists).
    #[serde(default)]
    pub session_created_delay_ms: u64,
    /// Utterances in speech order; `end_ms` strictly increasing.
    #[serde(default)]
    pub utterances: Vec<Utterance>,
    /// What the client's commit turns trailing audio into, once every utterance has ended.
    #[serde(default)]
    pub final_utterance: Option<Utterance>,
    /// How `conversation.item.delete` is answered.
    #[serde(default)]
    pub delete: DeleteBehaviour,
    /// Scripted actions.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// After the client's commit, once nothing is scheduled and nothing has been sent or
    /// received for this long, close the connection normally. `None`: wait for the client.
    #[serde(default)]
    pub close_after_commit_ms: Option<u64>,
    /// End the connection when the client sends nothing (pings included) for this long.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// Deadline of each write; a client that stops reading loses the connection.
    #[serde(default = "default_write_timeout_ms")]
    pub write_timeout_ms: u64,
    /// Longest the connection may last.
    #[serde(default = "default_max_duration_ms")]
    pub max_duration_ms: u64,
}

/// One user utterance and its transcription (and, in a realtime session, its response).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Utterance {
    /// Total client audio (ms since the connection's first append) at which it ends.
    /// Ignored (must be absent) for `final_utterance`.
    #[serde(default)]
    pub end_ms: u64,
    /// Item id; default `item_c<connection>_u<index>`.
    #[serde(default)]
    pub item_id: Option<String>,
    /// Final transcript.
    #[serde(default)]
    pub transcript: String,
    /// Transcription deltas; default: the transcript split before spaces (none on failure).
    #[serde(default)]
    pub deltas: Option<Vec<String>>,
    /// From the item's commit to `.completed`/`.failed`.
    #[serde(default)]
    pub delay_ms: u64,
    /// Hold the transcription until the client's commit (then `delay_ms` later).
    #[serde(default)]
    pub after_client_commit: bool,
    /// Send `.failed` with this error instead of `.completed`.
    #[serde(default)]
    pub fail: Option<ErrorSpec>,
    /// More `.completed` events for the same item: duplicates and late completions.
    #[serde(default)]
    pub extra_completions: Vec<ExtraCompletion>,
    /// The assistant's response to this utterance (realtime sessions only).
    #[serde(default)]
    pub response: Option<ResponseSpec>,
}

/// A repeated or late `.completed` for an utterance's item.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraCompletion {
    /// From the item's commit (or the client's commit).
    #[serde(default)]
    pub delay_ms: u64,
    #[serde(default)]
    pub after_client_commit: bool,
    /// Default: the utterance's transcript.
    #[serde(default)]
    pub transcript: Option<String>,
}

/// An error object (`error` events, `.failed`, delete rejections). Unset fields take the
/// defaults of where it is used.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorSpec {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub param: Option<String>,
}

/// An assistant response with audio.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseSpec {
    /// From the user item's commit to `response.created`.
    #[serde(default)]
    pub delay_ms: u64,
    /// From `response.created` to `response.done`; deltas are spread over it.
    #[serde(default = "default_stream_ms")]
    pub stream_ms: u64,
    /// The audio transcript.
    pub transcript: String,
    /// Transcript deltas; default: the transcript split before spaces.
    #[serde(default)]
    pub deltas: Option<Vec<String>>,
    /// Output audio duration (PCM16 24 kHz, deterministic samples).
    #[serde(default)]
    pub audio_ms: u64,
    /// `response.done` status.
    #[serde(default)]
    pub status: ResponseStatusSpec,
}

/// `response.done` status of a scripted response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatusSpec {
    #[default]
    Completed,
    Incomplete,
    Cancelled,
    Failed,
}

impl ResponseStatusSpec {
    fn as_str(self) -> &'static str {
        match self {
            ResponseStatusSpec::Completed => "completed",
            ResponseStatusSpec::Incomplete => "incomplete",
            ResponseStatusSpec::Cancelled => "cancelled",
            ResponseStatusSpec::Failed => "failed",
        }
    }
}

/// How `conversation.item.delete` is answered.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteBehaviour {
    #[serde(default)]
    pub mode: DeleteMode,
    /// Delay of the answer.
    #[serde(default)]
    pub delay_ms: u64,
    /// The rejection's error (mode `reject`).
    #[serde(default)]
    pub error: Option<ErrorSpec>,
}

/// Acknowledge, reject or ignore deletions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeleteMode {
    #[default]
    Ack,
    Reject,
    Timeout,
}

/// A scripted action: `{"on": <trigger>, "delay_ms": 0, "do": <act>}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    pub on: Trigger,
    #[serde(default)]
    pub delay_ms: u64,
    #[serde(rename = "do")]
    pub act: Act,
}

/// When an action fires: `"connected"` (after `session.created`), `"session_updated"`,
/// `{"append": N}` (after the N-th append, counted from 1), `"commit"`, `"delete"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Connected,
    SessionUpdated,
    Append(u64),
    Commit,
    Delete,
}

/// What an action does: `{"send": {event}}` (an `event_id` is added when missing),
/// `{"pause_reading_ms": N}`, `"disconnect"` (TCP reset, no close frame), `"session_expired"`
/// (`error` then a close frame), `"close"` (a normal close frame).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Act {
    Send(Value),
    PauseReadingMs(u64),
    Disconnect,
    SessionExpired,
    Close,
}

fn default_accept_timeout_ms() -> u64 {
    10_000
}
fn default_idle_timeout_ms() -> u64 {
    30_000
}
fn default_write_timeout_ms() -> u64 {
    5_000
}
fn default_max_duration_ms() -> u64 {
    300_000
}
fn default_stream_ms() -> u64 {
    200
}

impl Scenario {
    /// Parses and checks a scenario.
    pub fn from_json(text: &str) -> Result<Scenario, FakeError> {
        let scenario: Scenario = serde_json::from_str(text).map_err(|e| FakeError::Scenario {
            message: e.to_string(),
        })?;
        scenario.check()?;
        Ok(scenario)
    }

    /// Reads, parses and checks a scenario file.
    pub fn from_file(path: &Path) -> Result<Scenario, FakeError> {
        let text = std::fs::read_to_string(path).map_err(|source| FakeError::WithPath {
            path: path.to_owned(),
            source,
        })?;
        Scenario::from_json(&text).map_err(|e| match e {
            FakeError::Scenario { message } => FakeError::Scenario {
                message: format!("{}: {message}", path.display()),
            },
            other => other,
        })
    }

    fn check(&self) -> Result<(), FakeError> {
        let bad = |message: String| Err(FakeError::Scenario { message });
        if self.connections.is_empty() {
            return bad("no connections".into());
        }
        for (c, conn) in self.connections.iter().enumerate() {
            let mut last = 0;
            for (i, u) in conn.utterances.iter().enumerate() {
                if u.end_ms <= last {
                    return bad(format!(
                        "connection {c} utterance {i}: end_ms must increase (and be above 0)"
                    ));
                }
                last = u.end_ms;
            }
            if conn.final_utterance.as_ref().is_some_and(|u| u.end_ms != 0) {
                return bad(format!(
                    "connection {c}: final_utterance ends at the client's commit, not end_ms"
                ));
            }
            for a in &conn.actions {
                if let Act::Send(event) = &a.act
                    && event.get("type").and_then(Value::as_str).is_none()
                {
                    return bad(format!("connection {c}: a sent event needs a string type"));
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Errors and log
// ---------------------------------------------------------------------------------------------

/// What can stop the fake itself (a misbehaving client is recorded in the log instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FakeError {
    #[error("fake.scenario: {message}")]
    Scenario { message: String },
    #[error("fake.io: {op}: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("fake.io: {}: {source}", path.display())]
    WithPath {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("fake.task: {0}")]
    Task(String),
    #[error("fake.timeout: the fake did not finish within {0:?}")]
    Timeout(Duration),
}

/// Who an entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Received from the client.
    Client,
    /// Sent by the fake as the provider.
    Server,
    /// The fake's own observation.
    Fake,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Client => "client",
            Origin::Server => "server",
            Origin::Fake => "fake",
        }
    }
}

/// What an entry holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A JSON event (text frame).
    Event(Value),
    /// A control or binary frame.
    Frame { kind: &'static str, len: usize },
    /// A text frame that is not a JSON object (first 200 characters).
    Invalid { text: String, error: String },
    /// An observation: a pause, a scripted action, unsent scheduled events.
    Note(String),
}

/// One log entry.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    pub seq: u64,
    /// Milliseconds since the connection was accepted.
    pub at_ms: u64,
    pub origin: Origin,
    pub body: Body,
}

/// What the fake saw of the `Authorization` header. The value itself is never stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuthorizationSeen {
    pub present: bool,
    /// `Bearer <token>` with a non-empty token.
    pub bearer: bool,
    /// Length of the header value in bytes.
    pub len: usize,
}

/// The session kind a connection ran as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    /// `?intent=transcription` or `session.type` `"transcription"`.
    Transcription,
    /// `?model=…` or `session.type` `"realtime"`.
    Realtime,
}

impl SessionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Transcription => "transcription",
            SessionKind::Realtime => "realtime",
        }
    }
}

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionEnd {
    /// The client sent a close frame.
    ClientClosed,
    /// The client went away without a close frame (EOF or a transport error).
    ClientGone(String),
    /// The fake closed normally (`close_after_commit_ms` or a `close` action).
    FakeClosed,
    /// A `disconnect` action reset the TCP connection.
    ScriptedDisconnect,
    /// A `session_expired` action.
    SessionExpired,
    /// Rejected with HTTP 401 (no `Authorization`).
    Unauthorized,
    HandshakeFailed(String),
    IdleTimeout,
    MaxDuration,
    /// A write failed or missed its deadline.
    WriteFailed(String),
    /// The shutdown signal.
    Shutdown,
}

impl ConnectionEnd {
    pub fn as_str(&self) -> &'static str {
        match self {
            ConnectionEnd::ClientClosed => "client_closed",
            ConnectionEnd::ClientGone(_) => "client_gone",
            ConnectionEnd::FakeClosed => "fake_closed",
            ConnectionEnd::ScriptedDisconnect => "scripted_disconnect",
            ConnectionEnd::SessionExpired => "session_expired",
            ConnectionEnd::Unauthorized => "unauthorized",
            ConnectionEnd::HandshakeFailed(_) => "handshake_failed",
            ConnectionEnd::IdleTimeout => "idle_timeout",
            ConnectionEnd::MaxDuration => "max_duration",
            ConnectionEnd::WriteFailed(_) => "write_failed",
            ConnectionEnd::Shutdown => "shutdown",
        }
    }

    fn detail(&self) -> Option<&str> {
        match self {
            ConnectionEnd::ClientGone(d)
            | ConnectionEnd::HandshakeFailed(d)
            | ConnectionEnd::WriteFailed(d) => Some(d),
            _ => None,
        }
    }
}

/// Everything one connection saw.
#[derive(Debug, Clone)]
pub struct ConnectionLog {
    pub index: usize,
    /// Request path and query, sanitized.
    pub path: String,
    /// Whether sanitizing changed the path (credentials in the URL).
    pub path_redacted: bool,
    pub authorization: AuthorizationSeen,
    /// The `OpenAI-Beta` header, if any (a GA client sends none).
    pub openai_beta: Option<String>,
    pub kind: SessionKind,
    pub end: ConnectionEnd,
    pub entries: Vec<LogEntry>,
    pub dropped_entries: usize,
    pub appends: u64,
    /// Decoded PCM bytes appended.
    pub audio_bytes: u64,
}

impl ConnectionLog {
    fn new(index: usize) -> ConnectionLog {
        ConnectionLog {
            index,
            path: String::new(),
            path_redacted: false,
            authorization: AuthorizationSeen::default(),
            openai_beta: None,
            kind: SessionKind::Realtime,
            end: ConnectionEnd::ClientClosed,
            entries: Vec::new(),
            dropped_entries: 0,
            appends: 0,
            audio_bytes: 0,
        }
    }

    /// Events the fake sent, in order.
    pub fn sent(&self) -> impl Iterator<Item = &Value> {
        self.events(Origin::Server)
    }

    /// Events received from the client, in order.
    pub fn received(&self) -> impl Iterator<Item = &Value> {
        self.events(Origin::Client)
    }

    fn events(&self, origin: Origin) -> impl Iterator<Item = &Value> {
        self.entries.iter().filter_map(move |e| match &e.body {
            Body::Event(v) if e.origin == origin => Some(v),
            _ => None,
        })
    }

    /// The fake's notes.
    pub fn notes(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().filter_map(|e| match &e.body {
            Body::Note(n) => Some(n.as_str()),
            _ => None,
        })
    }
}

/// Everything a [`serve`] run saw.
#[derive(Debug, Clone, Default)]
pub struct FakeLog {
    pub scenario: String,
    pub connections: Vec<ConnectionLog>,
    /// Run-level notes (e.g. an accept deadline passed).
    pub notes: Vec<String>,
}

impl FakeLog {
    /// JSONL: a scenario line, then per connection a summary line and its entries.
    /// Event lines are `{"conn","seq","at_ms","from":"client"|"server","event"}`; with
    /// `truncate_audio`, base64 audio (`append.audio`, `output_audio.delta`) keeps its first
    /// [`DUMP_AUDIO_CHARS`] characters and the line gets `"truncated":{"field","chars"}`.
    pub fn to_jsonl(&self, truncate_audio: bool) -> String {
        let mut out = String::new();
        let mut line = |v: Value| {
            out.push_str(&v.to_string());
            out.push('\n');
        };
        line(json!({
            "from": "fake", "fake": "scenario", "scenario": self.scenario,
            "connections": self.connections.len(), "notes": self.notes,
        }));
        for c in &self.connections {
            line(json!({
                "from": "fake", "fake": "connection", "conn": c.index, "path": c.path,
                "path_redacted": c.path_redacted,
                "authorization": {"present": c.authorization.present,
                                  "bearer": c.authorization.bearer, "len": c.authorization.len},
                "openai_beta": c.openai_beta, "session_type": c.kind.as_str(),
                "end": c.end.as_str(), "end_detail": c.end.detail(), "appends": c.appends,
                "audio_bytes": c.audio_bytes, "dropped_entries": c.dropped_entries,
            }));
            for e in &c.entries {
                let mut v = json!({"conn": c.index, "seq": e.seq, "at_ms": e.at_ms,
                                   "from": e.origin.as_str()});
                let Some(obj) = v.as_object_mut() else {
                    continue;
                };
                match &e.body {
                    Body::Event(event) => {
                        let mut event = event.clone();
                        if truncate_audio
                            && let Some((field, chars)) = truncate_audio_in(&mut event)
                        {
                            obj.insert("truncated".into(), json!({"field": field, "chars": chars}));
                        }
                        obj.insert("event".into(), event);
                    }
                    Body::Frame { kind, len } => {
                        obj.insert("frame".into(), json!(kind));
                        obj.insert("len".into(), json!(len));
                    }
                    Body::Invalid { text, error } => {
                        obj.insert("invalid".into(), json!(text));
                        obj.insert("error".into(), json!(error));
                    }
                    Body::Note(n) => {
                        obj.insert("note".into(), json!(n));
                    }
                }
                line(v);
            }
        }
        out
    }

    /// Writes [`FakeLog::to_jsonl`] to `path`.
    pub fn write_jsonl(&self, path: &Path, truncate_audio: bool) -> Result<(), FakeError> {
        std::fs::write(path, self.to_jsonl(truncate_audio)).map_err(|source| FakeError::WithPath {
            path: path.to_owned(),
            source,
        })
    }
}

/// Shortens base64 audio in place; returns the field and its original length.
fn truncate_audio_in(event: &mut Value) -> Option<(&'static str, usize)> {
    let field = match event.get("type").and_then(Value::as_str)? {
        "input_audio_buffer.append" => "audio",
        "response.output_audio.delta" => "delta",
        _ => return None,
    };
    let Some(Value::String(s)) = event.get_mut(field) else {
        return None;
    };
    let chars = s.len();
    if chars <= DUMP_AUDIO_CHARS {
        return None;
    }
    // A multiple of 4 keeps the prefix valid base64.
    s.truncate(DUMP_AUDIO_CHARS - DUMP_AUDIO_CHARS % 4);
    Some((field, chars))
}

// ---------------------------------------------------------------------------------------------
// Serving
// ---------------------------------------------------------------------------------------------

/// Binds `127.0.0.1:port`, applying the scenario's `recv_buffer_bytes`.
pub fn bind(scenario: &Scenario, port: u16) -> Result<TcpListener, FakeError> {
    let io = |op| move |source| FakeError::Io { op, source };
    let socket = TcpSocket::new_v4().map_err(io("socket"))?;
    socket.set_reuseaddr(true).map_err(io("SO_REUSEADDR"))?;
    if let Some(bytes) = scenario.recv_buffer_bytes {
        socket
            .set_recv_buffer_size(bytes)
            .map_err(io("SO_RCVBUF"))?;
    }
    socket
        .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .map_err(io("bind"))?;
    socket.listen(16).map_err(io("listen"))
}

/// A fake running on its own task.
#[derive(Debug)]
pub struct FakeServer {
    pub addr: SocketAddr,
    handle: JoinHandle<Result<FakeLog, FakeError>>,
    shutdown: watch::Sender<bool>,
}

impl FakeServer {
    /// `ws://127.0.0.1:PORT/v1/realtime?{query}`.
    pub fn url(&self, query: &str) -> String {
        format!("ws://{}/v1/realtime?{query}", self.addr)
    }

    /// Asks the fake to stop (it closes the connection in progress with "going away").
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Waits for the fake to finish its scripted connections; on `deadline`, shuts it down
    /// and waits once more as long.
    pub async fn finish(mut self, deadline: Duration) -> Result<FakeLog, FakeError> {
        let joined = match timeout(deadline, &mut self.handle).await {
            Ok(joined) => joined,
            Err(_) => {
                self.shutdown();
                timeout(deadline, &mut self.handle)
                    .await
                    .map_err(|_| FakeError::Timeout(deadline * 2))?
            }
        };
        joined.map_err(|e| FakeError::Task(e.to_string()))?
    }
}

/// Binds `127.0.0.1:0` and serves `scenario` on a new task.
pub async fn spawn(scenario: Scenario) -> Result<FakeServer, FakeError> {
    let listener = bind(&scenario, 0)?;
    let addr = listener.local_addr().map_err(|source| FakeError::Io {
        op: "local_addr",
        source,
    })?;
    let (shutdown, rx) = watch::channel(false);
    let handle = tokio::spawn(serve(listener, scenario, rx));
    Ok(FakeServer {
        addr,
        handle,
        shutdown,
    })
}

/// Serves the scenario's connections one after another on `listener`, then returns the log.
///
/// A missed accept deadline ends the run early with a note (the log shows fewer connections
/// than scripted). `shutdown` set to `true` ends it at once; a dropped sender only means
/// nobody will ask.
pub async fn serve(
    listener: TcpListener,
    scenario: Scenario,
    mut shutdown: watch::Receiver<bool>,
) -> Result<FakeLog, FakeError> {
    let mut log = FakeLog {
        scenario: scenario.name.clone(),
        ..FakeLog::default()
    };
    let mut next_event = 0u64;
    for (index, script) in scenario.connections.iter().enumerate() {
        let accept_deadline = Duration::from_millis(scenario.accept_timeout_ms);
        let stream = tokio::select! {
            () = shutdown_signal(&mut shutdown) => {
                log.notes.push(format!("shutdown before connection {index}"));
                break;
            }
            accepted = timeout(accept_deadline, listener.accept()) => match accepted {
                Ok(Ok((stream, _))) => stream,
                Ok(Err(source)) => return Err(FakeError::Io { op: "accept", source }),
                Err(_) => {
                    log.notes.push(format!(
                        "no connection {index} within {} ms", scenario.accept_timeout_ms
                    ));
                    break;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let conn = run_connection(
            stream,
            script,
            index,
            scenario.require_authorization,
            scenario.reject_every_key,
            &mut shutdown,
            &mut next_event,
        )
        .await;
        let stop = conn.end == ConnectionEnd::Shutdown;
        log.connections.push(conn);
        if stop {
            break;
        }
    }
    Ok(log)
}

/// Resolves when shutdown is requested; never when the sender is gone.
async fn shutdown_signal(rx: &mut watch::Receiver<bool>) {
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// What the handshake callback saw.
#[derive(Default)]
struct Seen {
    path: String,
    authorization: AuthorizationSeen,
    openai_beta: Option<String>,
    rejected: bool,
}

fn unauthorized() -> ErrorResponse {
    let body = json!({"error": {
        "message": "You didn't provide an API key. You need to provide your API key in an \
                    Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        "type": "invalid_request_error", "code": null, "param": null}});
    let mut response = ErrorResponse::new(Some(body.to_string()));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
}

async fn run_connection(
    stream: TcpStream,
    script: &ConnectionScript,
    index: usize,
    require_authorization: bool,
    reject_every_key: bool,
    shutdown: &mut watch::Receiver<bool>,
    next_event: &mut u64,
) -> ConnectionLog {
    let started = Instant::now();
    let mut log = ConnectionLog::new(index);
    let mut seen = Seen::default();
    // The callback's signature (and its large `ErrorResponse`) is tungstenite's.
    #[allow(clippy::result_large_err)]
    let callback = |request: &Request, response: Response| {
        seen.path = request
            .uri()
            .path_and_query()
            .map_or_else(String::new, |p| p.as_str().to_owned());
        if let Some(value) = request.headers().get("authorization") {
            let bytes = value.as_bytes();
            let token = bytes
                .strip_prefix(b"Bearer ")
                .or_else(|| bytes.strip_prefix(b"bearer "));
            seen.authorization = AuthorizationSeen {
                present: true,
                bearer: token.is_some_and(|t| !t.trim_ascii().is_empty()),
                len: bytes.len(),
            };
        }
        seen.openai_beta = request
            .headers()
            .get("openai-beta")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        if (require_authorization && !seen.authorization.present) || reject_every_key {
            seen.rejected = true;
            return Err(unauthorized());
        }
        Ok(response)
    };
    let handshake = timeout(
        HANDSHAKE_TIMEOUT,
        tokio_tungstenite::accept_hdr_async(stream, callback),
    )
    .await;
    let (path, path_redacted) = sanitize_url(&seen.path);
    log.path = path;
    log.path_redacted = path_redacted;
    log.authorization = seen.authorization;
    log.openai_beta = seen.openai_beta;
    log.kind = kind_from_path(&seen.path);
    let ws = match handshake {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => {
            log.end = if seen.rejected {
                ConnectionEnd::Unauthorized
            } else {
                ConnectionEnd::HandshakeFailed(e.to_string())
            };
            return log;
        }
        Err(_) => {
            log.end = ConnectionEnd::HandshakeFailed("handshake deadline".into());
            return log;
        }
    };
    let mut conn = Conn {
        ws,
        script,
        index,
        started,
        kind: log.kind,
        log,
        next_event,
        audio_bytes: 0,
        boundary_bytes: 0,
        next_utterance: 0,
        speaking: false,
        items: Vec::new(),
        timers: BTreeMap::new(),
        timer_seq: 0,
        held: Vec::new(),
        committed: false,
        manual: false,
        model: String::new(),
        deltas_sent: 0,
        voiced_bytes: 0,
        last_client: started,
        last_io: started,
        paused_until: None,
    };
    let end = conn.run(shutdown).await;
    conn.finish(end).await
}

fn kind_from_path(path: &str) -> SessionKind {
    let query = path.split_once('?').map_or("", |(_, q)| q);
    if query.split('&').any(|p| p == "intent=transcription") {
        SessionKind::Transcription
    } else {
        SessionKind::Realtime
    }
}

/// Something scheduled on a connection.
#[derive(Debug)]
enum Due {
    Send(Value),
    Act(Act),
    /// Put an assistant item into the conversation after its user item.
    Insert {
        item_id: String,
        after: String,
    },
}

type Flow = Result<(), ConnectionEnd>;

struct Conn<'a> {
    ws: WebSocketStream<TcpStream>,
    script: &'a ConnectionScript,
    index: usize,
    started: Instant,
    kind: SessionKind,
    log: ConnectionLog,
    next_event: &'a mut u64,
    /// Decoded PCM bytes received.
    audio_bytes: u64,
    /// Audio already assigned to items (utterance ends, commits, clears).
    boundary_bytes: u64,
    next_utterance: usize,
    speaking: bool,
    /// Conversation items in order (for `previous_item_id`).
    items: Vec<String>,
    timers: BTreeMap<(Instant, u64), Due>,
    timer_seq: u64,
    /// Released at the client's commit: (offset, what).
    held: Vec<(u64, Due)>,
    committed: bool,
    /// `turn_detection: null`: the client commits every turn.
    manual: bool,
    /// The transcription model of the session.
    model: String,
    /// Deltas of the utterance in progress already streamed (manual turns).
    deltas_sent: usize,
    /// Voiced audio (an append louder than [`VOICED_RMS`]) since the last item (manual turns).
    voiced_bytes: u64,
    last_client: Instant,
    last_io: Instant,
    paused_until: Option<Instant>,
}

impl Conn<'_> {
    async fn run(&mut self, shutdown: &mut watch::Receiver<bool>) -> ConnectionEnd {
        let delay = Duration::from_millis(self.script.session_created_delay_ms);
        if !delay.is_zero() {
            // Client frames sent meanwhile wait in the socket, read after `session.created`.
            tokio::select! {
                () = shutdown_signal(shutdown) => return ConnectionEnd::Shutdown,
                () = tokio::time::sleep(delay) => {}
            }
        }
        if let Err(end) = self.start().await {
            return end;
        }
        loop {
            let wake = self.next_wake();
            let reading = self.paused_until.is_none();
            // Due timers go out before the next client frame is read (a timer with a past
            // deadline only fires on the timer driver's next turn), so what a scenario
            // schedules "now" precedes the effects of later appends.
            let flow = if wake <= Instant::now() {
                self.on_wake().await
            } else {
                tokio::select! {
                    () = shutdown_signal(shutdown) => Err(ConnectionEnd::Shutdown),
                    () = sleep_until(wake) => self.on_wake().await,
                    msg = self.ws.next(), if reading => self.on_message(msg).await,
                }
            };
            if let Err(end) = flow {
                return end;
            }
        }
    }

    async fn start(&mut self) -> Flow {
        let mut session = default_session(self.kind, self.index);
        if let Some(obj) = session.as_object_mut() {
            for (k, v) in &self.script.session {
                obj.insert(k.clone(), v.clone());
            }
        }
        self.send(json!({"type": "session.created", "session": session}))
            .await?;
        self.fire(Trigger::Connected).await
    }

    async fn finish(mut self, end: ConnectionEnd) -> ConnectionLog {
        let unsent = self.timers.len() + self.held.len();
        if unsent > 0 {
            self.note(format!("{unsent} scheduled server events/actions not sent"));
        }
        match &end {
            ConnectionEnd::ScriptedDisconnect => {
                // An RST rather than a FIN: the client sees a reset, not an orderly end.
                let _ = self.ws.get_ref().set_zero_linger();
            }
            ConnectionEnd::Shutdown => self.close(CloseCode::Away, "fake shutting down").await,
            ConnectionEnd::IdleTimeout | ConnectionEnd::MaxDuration => {
                self.close(CloseCode::Normal, "fake deadline").await;
            }
            _ => {}
        }
        self.log.end = end;
        self.log.kind = self.kind;
        self.log
    }

    fn next_wake(&self) -> Instant {
        let mut wake = (self.started + ms(self.script.max_duration_ms))
            .min(self.last_client + ms(self.script.idle_timeout_ms));
        if let Some(((t, _), _)) = self.timers.first_key_value() {
            wake = wake.min(*t);
        }
        if let Some(t) = self.paused_until {
            wake = wake.min(t);
        }
        if let Some(t) = self.linger_deadline() {
            wake = wake.min(t);
        }
        wake
    }

    fn linger_deadline(&self) -> Option<Instant> {
        let linger = self.script.close_after_commit_ms?;
        (self.committed && self.timers.is_empty() && self.held.is_empty())
            .then(|| self.last_io + ms(linger))
    }

    async fn on_wake(&mut self) -> Flow {
        let now = Instant::now();
        if self.paused_until.is_some_and(|t| t <= now) {
            self.paused_until = None;
            self.note("resumed reading".into());
        }
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let due = entry.remove();
            self.run_due(due).await?;
        }
        if self.linger_deadline().is_some_and(|t| t <= now) {
            self.close(CloseCode::Normal, "done").await;
            return Err(ConnectionEnd::FakeClosed);
        }
        if now >= self.started + ms(self.script.max_duration_ms) {
            return Err(ConnectionEnd::MaxDuration);
        }
        if now >= self.last_client + ms(self.script.idle_timeout_ms) {
            return Err(ConnectionEnd::IdleTimeout);
        }
        Ok(())
    }

    async fn run_due(&mut self, due: Due) -> Flow {
        match due {
            Due::Send(v) => self.send(v).await,
            Due::Act(act) => self.act(act).await,
            Due::Insert { item_id, after } => {
                let at = self
                    .items
                    .iter()
                    .position(|x| *x == after)
                    .map_or(self.items.len(), |i| i + 1);
                self.items.insert(at, item_id);
                Ok(())
            }
        }
    }

    // --- logging and sending ------------------------------------------------------------------

    fn record(&mut self, origin: Origin, body: Body) {
        if self.log.entries.len() >= MAX_LOG_ENTRIES {
            self.log.dropped_entries += 1;
            return;
        }
        let seq = self.log.entries.len() as u64 + self.log.dropped_entries as u64;
        let at_ms = self.started.elapsed().as_millis() as u64;
        self.log.entries.push(LogEntry {
            seq,
            at_ms,
            origin,
            body,
        });
    }

    fn note(&mut self, note: String) {
        self.record(Origin::Fake, Body::Note(note));
    }

    /// Sends a server event, adding an `event_id` first when it has none.
    async fn send(&mut self, mut event: Value) -> Flow {
        if let Some(obj) = event.as_object_mut()
            && !obj.contains_key("event_id")
        {
            *self.next_event += 1;
            let id = format!("event_fake{}_{:04}", self.index, self.next_event);
            // `event_id` goes first, as the service sends it.
            let mut with_id = Map::with_capacity(obj.len() + 1);
            with_id.insert("event_id".into(), Value::String(id));
            with_id.append(obj);
            *obj = with_id;
        }
        let text = event.to_string();
        self.record(Origin::Server, Body::Event(event));
        self.last_io = Instant::now();
        let deadline = ms(self.script.write_timeout_ms);
        match timeout(deadline, self.ws.send(Message::text(text))).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ConnectionEnd::WriteFailed(e.to_string())),
            Err(_) => Err(ConnectionEnd::WriteFailed(format!(
                "write deadline of {} ms",
                self.script.write_timeout_ms
            ))),
        }
    }

    async fn send_error(&mut self, error: Value) -> Flow {
        self.send(json!({"type": "error", "error": error})).await
    }

    /// Schedules `due` `offset_ms` from now, or from the client's commit when `held`.
    fn schedule(&mut self, offset_ms: u64, held: bool, due: Due) {
        if held && !self.committed {
            self.held.push((offset_ms, due));
            return;
        }
        self.timer_seq += 1;
        self.timers
            .insert((Instant::now() + ms(offset_ms), self.timer_seq), due);
    }

    /// Sends `event` now when `delay_ms` is 0, else schedules it.
    async fn emit(&mut self, delay_ms: u64, event: Value) -> Flow {
        if delay_ms == 0 {
            self.send(event).await
        } else {
            self.schedule(delay_ms, false, Due::Send(event));
            Ok(())
        }
    }

    async fn close(&mut self, code: CloseCode, reason: &str) {
        self.note(format!("closing: {code} {reason}"));
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        if timeout(CLOSE_TIMEOUT, self.ws.close(Some(frame)))
            .await
            .is_err()
        {
            return;
        }
        self.drain().await;
    }

    /// Reads until the close handshake completes, the client goes away or the deadline.
    async fn drain(&mut self) {
        let deadline = Instant::now() + CLOSE_TIMEOUT;
        while let Ok(Some(Ok(msg))) = timeout_at(deadline, self.ws.next()).await {
            self.record_message(&msg);
        }
    }

    /// Records a received frame; returns the parsed event of a JSON text frame.
    fn record_message(&mut self, msg: &Message) -> Option<Value> {
        let frame = |kind, len| Body::Frame { kind, len };
        match msg {
            Message::Text(text) => match serde_json::from_str::<Value>(text.as_str()) {
                Ok(v) if v.is_object() => {
                    self.record(Origin::Client, Body::Event(v.clone()));
                    return Some(v);
                }
                Ok(_) => self.record_invalid(text.as_str(), "not a JSON object".into()),
                Err(e) => self.record_invalid(text.as_str(), e.to_string()),
            },
            Message::Binary(b) => self.record(Origin::Client, frame("binary", b.len())),
            Message::Ping(b) => self.record(Origin::Client, frame("ping", b.len())),
            Message::Pong(b) => self.record(Origin::Client, frame("pong", b.len())),
            Message::Close(f) => {
                let len = f.as_ref().map_or(0, |f| f.reason.len());
                self.record(Origin::Client, frame("close", len));
            }
            Message::Frame(_) => {}
        }
        None
    }

    fn record_invalid(&mut self, text: &str, error: String) {
        let text = text.chars().take(200).collect();
        self.record(Origin::Client, Body::Invalid { text, error });
    }

    // --- client frames -----------------------------------------------------------------------

    async fn on_message(&mut self, msg: Option<Result<Message, WsError>>) -> Flow {
        let msg = match msg {
            None => {
                return Err(ConnectionEnd::ClientGone(
                    "EOF without a close frame".into(),
                ));
            }
            Some(Err(e)) => return Err(ConnectionEnd::ClientGone(e.to_string())),
            Some(Ok(msg)) => msg,
        };
        self.last_client = Instant::now();
        self.last_io = self.last_client;
        let event = self.record_message(&msg);
        match msg {
            Message::Close(_) => {
                self.drain().await;
                Err(ConnectionEnd::ClientClosed)
            }
            Message::Binary(_) => {
                self.send_error(error_json(
                    "invalid_request_error",
                    Some("invalid_value"),
                    "Binary frames are not supported; send JSON text events.",
                    None,
                    Value::Null,
                ))
                .await
            }
            Message::Text(_) => match event {
                Some(event) => self.on_event(event).await,
                None => {
                    self.send_error(error_json(
                        "invalid_request_error",
                        None,
                        "We could not parse the JSON body of your request.",
                        None,
                        Value::Null,
                    ))
                    .await
                }
            },
            _ => Ok(()),
        }
    }

    async fn on_event(&mut self, event: Value) -> Flow {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let event_id = event.get("event_id").cloned().unwrap_or(Value::Null);
        match kind {
            "session.update" => self.on_session_update(&event, event_id).await,
            "input_audio_buffer.append" => self.on_append(&event, event_id).await,
            "input_audio_buffer.commit" => self.on_commit(event_id).await,
            "input_audio_buffer.clear" => {
                self.boundary_bytes = self.audio_bytes;
                self.speaking = false;
                self.send(json!({"type": "input_audio_buffer.cleared"}))
                    .await
            }
            "conversation.item.delete" => self.on_delete(&event, event_id).await,
            "conversation.item.create"
            | "conversation.item.retrieve"
            | "conversation.item.truncate"
            | "response.create"
            | "response.cancel"
            | "output_audio_buffer.clear" => {
                self.note(format!("{kind}: not modelled by the fake, ignored"));
                Ok(())
            }
            _ => {
                let message = format!("Invalid value: '{kind}'. Unsupported client event type.");
                self.send_error(error_json(
                    "invalid_request_error",
                    Some("invalid_value"),
                    &message,
                    Some("type"),
                    event_id,
                ))
                .await
            }
        }
    }

    async fn on_session_update(&mut self, event: &Value, event_id: Value) -> Flow {
        let Some(update) = event.get("session").and_then(Value::as_object) else {
            return self
                .send_error(error_json(
                    "invalid_request_error",
                    Some("missing_required_parameter"),
                    "Missing required parameter: 'session'.",
                    Some("session"),
                    event_id,
                ))
                .await;
        };
        self.kind = match update.get("type").and_then(Value::as_str) {
            Some("transcription") => SessionKind::Transcription,
            Some("realtime") => SessionKind::Realtime,
            _ => {
                return self
                    .send_error(error_json(
                        "invalid_request_error",
                        Some("missing_required_parameter"),
                        "Missing required parameter: 'session.type'.",
                        Some("session.type"),
                        event_id,
                    ))
                    .await;
            }
        };
        let mut session = default_session(self.kind, self.index);
        merge(&mut session, &Value::Object(update.clone()));
        let input = session
            .pointer("/audio/input")
            .cloned()
            .unwrap_or(Value::Null);
        let model = input
            .pointer("/transcription/model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let given = update
            .get("audio")
            .and_then(|a| a.pointer("/input/transcription"))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some((param, message)) = refusal(&model, &input, &given) {
            return self
                .send_error(error_json(
                    "invalid_request_error",
                    Some("invalid_value"),
                    &message,
                    Some(param),
                    event_id,
                ))
                .await;
        }
        self.model = model;
        self.manual = self.kind == SessionKind::Transcription
            && input.get("turn_detection").is_some_and(Value::is_null);
        self.send(json!({"type": "session.updated", "session": session}))
            .await?;
        self.fire(Trigger::SessionUpdated).await
    }

    async fn on_append(&mut self, event: &Value, event_id: Value) -> Flow {
        self.log.appends += 1;
        let decoded = event
            .get("audio")
            .and_then(Value::as_str)
            .and_then(|a| B64.decode(a).ok());
        match decoded {
            Some(bytes) => {
                self.audio_bytes += bytes.len() as u64;
                if rms(&bytes) > VOICED_RMS {
                    self.voiced_bytes += bytes.len() as u64;
                }
                self.log.audio_bytes = self.audio_bytes;
                self.advance().await?;
            }
            None => {
                self.send_error(error_json(
                    "invalid_request_error",
                    Some("invalid_value"),
                    "Invalid 'audio'. Expected base64-encoded audio bytes.",
                    Some("audio"),
                    event_id,
                ))
                .await?;
            }
        }
        self.fire(Trigger::Append(self.log.appends)).await
    }

    fn utterance(&self, index: usize) -> Option<&Utterance> {
        let u = &self.script.utterances;
        if index < u.len() {
            u.get(index)
        } else if index == u.len() {
            self.script.final_utterance.as_ref()
        } else {
            None
        }
    }

    fn item_id(&self, index: usize) -> String {
        self.utterance(index)
            .and_then(|u| u.item_id.clone())
            .unwrap_or_else(|| format!("item_c{}_u{index}", self.index))
    }

    /// Starts and ends utterances as audio arrives.
    async fn advance(&mut self) -> Flow {
        if self.manual {
            return self.stream_live_deltas().await;
        }
        loop {
            let index = self.next_utterance;
            if self.utterance(index).is_none() {
                return Ok(());
            }
            if !self.speaking && self.audio_bytes > self.boundary_bytes {
                self.speaking = true;
                let item_id = self.item_id(index);
                self.send(json!({"type": "input_audio_buffer.speech_started",
                    "audio_start_ms": self.boundary_bytes / PCM_BYTES_PER_MS,
                    "item_id": item_id}))
                    .await?;
            }
            let end = match self.script.utterances.get(index) {
                Some(u) => u.end_ms * PCM_BYTES_PER_MS,
                None => return Ok(()), // The final utterance ends at the client's commit.
            };
            if self.audio_bytes < end {
                return Ok(());
            }
            self.end_utterance(index, end, true).await?;
        }
    }

    /// Without turn detection: the utterance in progress streams a delta per
    /// [`LIVE_DELTA_MS`] of pending audio.
    async fn stream_live_deltas(&mut self) -> Flow {
        let index = self.next_utterance;
        let Some(u) = self.utterance(index).filter(|u| u.fail.is_none()) else {
            return Ok(());
        };
        let deltas = u
            .deltas
            .clone()
            .unwrap_or_else(|| split_words(&u.transcript));
        let voiced_ms = self.voiced_bytes / PCM_BYTES_PER_MS;
        let due = ((voiced_ms / LIVE_DELTA_MS) as usize).min(deltas.len());
        let item_id = self.item_id(index);
        while self.deltas_sent < due {
            let delta = &deltas[self.deltas_sent];
            self.deltas_sent += 1;
            self.send(
                json!({"type": "conversation.item.input_audio_transcription.delta",
                "item_id": item_id, "content_index": 0, "delta": delta}),
            )
            .await?;
        }
        Ok(())
    }

    async fn end_utterance(&mut self, index: usize, end_bytes: u64, vad: bool) -> Flow {
        let u = match self.utterance(index) {
            Some(u) => u.clone(),
            // Without turn detection every long-enough commit is an item (here: silence).
            None if self.manual => Utterance {
                end_ms: 0,
                item_id: None,
                transcript: String::new(),
                deltas: Some(Vec::new()),
                delay_ms: 0,
                after_client_commit: false,
                fail: None,
                extra_completions: Vec::new(),
                response: None,
            },
            None => return Ok(()),
        };
        let item_id = self.item_id(index);
        if vad {
            self.send(json!({"type": "input_audio_buffer.speech_stopped",
                "audio_end_ms": end_bytes / PCM_BYTES_PER_MS, "item_id": item_id}))
                .await?;
        }
        let audio_ms = (end_bytes - self.boundary_bytes) / PCM_BYTES_PER_MS;
        self.speaking = false;
        self.boundary_bytes = end_bytes;
        self.next_utterance = index + 1;
        let previous = self.items.last().cloned();
        self.items.push(item_id.clone());
        self.send(json!({"type": "input_audio_buffer.committed",
            "previous_item_id": previous, "item_id": item_id}))
            .await?;
        let item = json!({"id": item_id, "object": "realtime.item", "type": "message",
            "status": "completed", "role": "user",
            "content": [{"type": "input_audio", "transcript": null}]});
        for kind in ["conversation.item.added", "conversation.item.done"] {
            self.send(json!({"type": kind, "previous_item_id": previous, "item": item}))
                .await?;
        }
        let streamed = std::mem::take(&mut self.deltas_sent);
        self.voiced_bytes = 0;
        self.schedule_transcription(&u, &item_id, audio_ms, streamed);
        if let Some(r) = &u.response {
            if self.kind == SessionKind::Realtime {
                self.schedule_response(r, &item_id, index);
            } else {
                self.note(format!(
                    "{item_id}: response skipped in a transcription session"
                ));
            }
        }
        Ok(())
    }

    /// Schedules an item's transcription; the first `streamed` deltas went out already.
    fn schedule_transcription(
        &mut self,
        u: &Utterance,
        item_id: &str,
        audio_ms: u64,
        streamed: usize,
    ) {
        let mut deltas = match (&u.deltas, &u.fail) {
            (Some(d), _) => d.clone(),
            (None, None) => split_words(&u.transcript),
            (None, Some(_)) => Vec::new(),
        };
        deltas.drain(..streamed.min(deltas.len()));
        let duration = STREAMING_MODELS.contains(&self.model.as_str());
        let held = u.after_client_commit;
        let n = deltas.len() as u64;
        for (i, delta) in deltas.into_iter().enumerate() {
            let at = u.delay_ms * (i as u64 + 1) / (n + 1);
            let event = json!({"type": "conversation.item.input_audio_transcription.delta",
                "item_id": item_id, "content_index": 0, "delta": delta});
            self.schedule(at, held, Due::Send(event));
        }
        let last = match &u.fail {
            Some(spec) => json!({"type": "conversation.item.input_audio_transcription.failed",
                "item_id": item_id, "content_index": 0, "error": {
                    "type": spec.kind.as_deref().unwrap_or("transcription_error"),
                    "code": spec.code.as_deref().unwrap_or("audio_unintelligible"),
                    "message": spec.message.as_deref()
                        .unwrap_or("The audio could not be transcribed."),
                    "param": spec.param}}),
            None => completed(item_id, &u.transcript, audio_ms, duration),
        };
        self.schedule(u.delay_ms, held, Due::Send(last));
        for extra in &u.extra_completions {
            let text = extra.transcript.as_deref().unwrap_or(&u.transcript);
            let event = completed(item_id, text, audio_ms, duration);
            self.schedule(extra.delay_ms, extra.after_client_commit, Due::Send(event));
        }
    }

    fn schedule_response(&mut self, r: &ResponseSpec, user_item: &str, index: usize) {
        let response_id = format!("resp_c{}_u{index}", self.index);
        let item_id = format!("item_c{}_r{index}", self.index);
        let status = r.status.as_str();
        let item_status = match r.status {
            ResponseStatusSpec::Completed => "completed",
            _ => "incomplete",
        };
        let envelope = |status: &str, output: Value| {
            json!({"object": "realtime.response", "id": response_id, "status": status,
                "status_details": null, "output": output, "conversation_id": "conv_fake",
                "output_modalities": ["audio"], "max_output_tokens": "inf",
                "audio": {"output": {"format": {"type": "audio/pcm", "rate": 24000},
                                      "voice": "marin"}},
                "usage": null, "metadata": null})
        };
        let item_in_progress = json!({"id": item_id, "object": "realtime.item",
            "type": "message", "status": "in_progress", "role": "assistant", "content": []});
        let item_done = json!({"id": item_id, "object": "realtime.item", "type": "message",
            "status": item_status, "role": "assistant",
            "content": [{"type": "output_audio", "transcript": r.transcript}]});
        let ids = json!({"response_id": response_id, "item_id": item_id,
                         "output_index": 0, "content_index": 0});
        let with = |kind: &str, fields: Value| {
            let mut v = json!({"type": kind});
            merge(&mut v, &ids);
            merge(&mut v, &fields);
            v
        };

        let t0 = r.delay_ms;
        let t1 = t0 + r.stream_ms;
        self.schedule(
            t0,
            false,
            Due::Insert {
                item_id: item_id.clone(),
                after: user_item.to_owned(),
            },
        );
        let start = [
            json!({"type": "response.created", "response": envelope("in_progress", json!([]))}),
            json!({"type": "rate_limits.updated", "rate_limits": [
                {"name": "requests", "limit": 1000, "remaining": 999, "reset_seconds": 0.06},
                {"name": "tokens", "limit": 100000, "remaining": 99000, "reset_seconds": 0.6}]}),
            json!({"type": "response.output_item.added", "response_id": response_id,
                   "output_index": 0, "item": item_in_progress}),
            json!({"type": "conversation.item.added", "previous_item_id": user_item,
                   "item": item_in_progress}),
            with(
                "response.content_part.added",
                json!({"part": {"type": "audio", "transcript": ""}}),
            ),
        ];
        for event in start {
            self.schedule(t0, false, Due::Send(event));
        }
        // Interleaved transcript and audio deltas, spread over the stream.
        let deltas = r
            .deltas
            .clone()
            .unwrap_or_else(|| split_words(&r.transcript));
        let audio = output_audio((r.audio_ms * PCM_BYTES_PER_MS) as usize);
        let chunks: Vec<&[u8]> = audio.chunks(OUTPUT_CHUNK_BYTES).collect();
        let steps = deltas.len().max(chunks.len()) as u64;
        for i in 0..steps as usize {
            let at = t0 + r.stream_ms * (i as u64 + 1) / (steps + 1);
            if let Some(d) = deltas.get(i) {
                let event = with(
                    "response.output_audio_transcript.delta",
                    json!({"delta": d}),
                );
                self.schedule(at, false, Due::Send(event));
            }
            if let Some(c) = chunks.get(i) {
                let event = with(
                    "response.output_audio.delta",
                    json!({"delta": B64.encode(c)}),
                );
                self.schedule(at, false, Due::Send(event));
            }
        }
        let mut done = envelope(status, json!([item_done]));
        done["status_details"] = match r.status {
            ResponseStatusSpec::Completed => Value::Null,
            ResponseStatusSpec::Incomplete => {
                json!({"type": "incomplete", "reason": "max_output_tokens"})
            }
            ResponseStatusSpec::Cancelled => {
                json!({"type": "cancelled", "reason": "client_cancelled"})
            }
            ResponseStatusSpec::Failed => json!({"type": "failed", "error": {
                "type": "server_error", "code": "server_error",
                "message": "The server had an error while processing your request."}}),
        };
        let words = r.transcript.split_whitespace().count() as u64;
        done["usage"] = json!({"total_tokens": 20 + words + r.audio_ms / 50,
            "input_tokens": 20, "output_tokens": words + r.audio_ms / 50,
            "input_token_details": {"text_tokens": 10, "audio_tokens": 10, "cached_tokens": 0},
            "output_token_details": {"text_tokens": words, "audio_tokens": r.audio_ms / 50}});
        let end = [
            with("response.output_audio.done", json!({})),
            with(
                "response.output_audio_transcript.done",
                json!({"transcript": r.transcript}),
            ),
            with(
                "response.content_part.done",
                json!({"part": {"type": "audio", "transcript": r.transcript}}),
            ),
            json!({"type": "conversation.item.done", "previous_item_id": user_item,
                   "item": item_done}),
            json!({"type": "response.output_item.done", "response_id": response_id,
                   "output_index": 0, "item": item_done}),
            json!({"type": "response.done", "response": done}),
        ];
        for event in end {
            self.schedule(t1, false, Due::Send(event));
        }
    }

    async fn on_commit(&mut self, event_id: Value) -> Flow {
        let pending = self.audio_bytes - self.boundary_bytes;
        let index = self.next_utterance;
        let committable = (self.manual || self.utterance(index).is_some())
            && pending >= MIN_COMMIT_MS * PCM_BYTES_PER_MS;
        if committable {
            self.end_utterance(index, self.audio_bytes, false).await?;
        } else {
            let message = format!(
                "Error committing input audio buffer: buffer too small. Expected at least \
                 {MIN_COMMIT_MS}ms of audio, but buffer only has {:.2}ms of audio.",
                pending as f64 / PCM_BYTES_PER_MS as f64
            );
            if pending > 0 {
                self.note(format!(
                    "commit: {} ms pending dropped (under {MIN_COMMIT_MS} ms, or silence after \
                     the last scripted utterance)",
                    pending / PCM_BYTES_PER_MS
                ));
            }
            self.boundary_bytes = self.audio_bytes;
            self.speaking = false;
            self.send_error(error_json(
                "invalid_request_error",
                Some("input_audio_buffer_commit_empty"),
                &message,
                None,
                event_id,
            ))
            .await?;
        }
        if !self.committed {
            self.committed = true;
            for (offset, due) in std::mem::take(&mut self.held) {
                self.schedule(offset, false, due);
            }
        }
        self.fire(Trigger::Commit).await
    }

    async fn on_delete(&mut self, event: &Value, event_id: Value) -> Flow {
        let item_id = event.get("item_id").and_then(Value::as_str).unwrap_or("");
        let behaviour = &self.script.delete;
        let delay = behaviour.delay_ms;
        match behaviour.mode {
            DeleteMode::Timeout => {
                self.note(format!("delete {item_id}: left unanswered (scenario)"));
            }
            DeleteMode::Reject => {
                let spec = behaviour.error.clone().unwrap_or_default();
                let message = format!("Error deleting item '{item_id}'.");
                let error = error_json(
                    spec.kind.as_deref().unwrap_or("invalid_request_error"),
                    Some(spec.code.as_deref().unwrap_or("item_delete_failed")),
                    spec.message.as_deref().unwrap_or(&message),
                    Some(spec.param.as_deref().unwrap_or("item_id")),
                    event_id,
                );
                self.emit(delay, json!({"type": "error", "error": error}))
                    .await?;
            }
            DeleteMode::Ack => match self.items.iter().position(|x| x == item_id) {
                Some(at) => {
                    self.items.remove(at);
                    self.emit(
                        delay,
                        json!({"type": "conversation.item.deleted", "item_id": item_id}),
                    )
                    .await?;
                }
                None => {
                    let message = format!("Item with item_id '{item_id}' not found.");
                    let error = error_json(
                        "invalid_request_error",
                        Some("item_not_found"),
                        &message,
                        Some("item_id"),
                        event_id,
                    );
                    self.emit(delay, json!({"type": "error", "error": error}))
                        .await?;
                }
            },
        }
        self.fire(Trigger::Delete).await
    }

    // --- actions -------------------------------------------------------------------------------

    async fn fire(&mut self, trigger: Trigger) -> Flow {
        let script = self.script;
        for action in script.actions.iter().filter(|a| a.on == trigger) {
            if action.delay_ms == 0 {
                self.act(action.act.clone()).await?;
            } else {
                self.schedule(action.delay_ms, false, Due::Act(action.act.clone()));
            }
        }
        Ok(())
    }

    async fn act(&mut self, act: Act) -> Flow {
        match act {
            Act::Send(event) => self.send(event).await,
            Act::PauseReadingMs(pause) => {
                self.note(format!("pausing reading for {pause} ms"));
                self.paused_until = Some(Instant::now() + ms(pause));
                Ok(())
            }
            Act::Disconnect => {
                self.note("disconnecting abruptly (TCP reset)".into());
                Err(ConnectionEnd::ScriptedDisconnect)
            }
            Act::SessionExpired => {
                self.send_error(error_json(
                    "invalid_request_error",
                    Some("session_expired"),
                    "Your session hit the maximum duration of 60 minutes.",
                    None,
                    Value::Null,
                ))
                .await?;
                self.close(CloseCode::Normal, "session expired").await;
                Err(ConnectionEnd::SessionExpired)
            }
            Act::Close => {
                self.close(CloseCode::Normal, "scripted close").await;
                Err(ConnectionEnd::FakeClosed)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Event helpers
// ---------------------------------------------------------------------------------------------

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn error_json(
    kind: &str,
    code: Option<&str>,
    message: &str,
    param: Option<&str>,
    event_id: Value,
) -> Value {
    json!({"type": kind, "code": code, "message": message, "param": param, "event_id": event_id})
}

/// Why a transcription session update is refused: `(param, message)`. `input` is the
/// session's `audio.input` after the update; `given` the update's own `transcription`.
fn refusal(model: &str, input: &Value, given: &Value) -> Option<(&'static str, String)> {
    let streaming = STREAMING_MODELS.contains(&model);
    if streaming && !input.get("turn_detection").is_some_and(Value::is_null) {
        return Some((
            "session.audio.input.turn_detection",
            "Turn detection is not supported for this transcription model".into(),
        ));
    }
    if let Some(words) = given.get("keywords") {
        if !KEYWORD_MODELS.contains(&model) {
            return Some((
                "session.audio.input.transcription.keywords",
                format!("Keywords are not supported for model '{model}'."),
            ));
        }
        let ok = words.as_array().is_some_and(|a| {
            a.iter().all(|w| {
                w.as_str()
                    .is_some_and(|w| !w.is_empty() && !w.contains(['<', '>', '\r', '\n']))
            })
        });
        if !ok {
            return Some((
                "session.audio.input.transcription.keywords",
                "Invalid keyword: each keyword must be a single line without '<' or '>'.".into(),
            ));
        }
    }
    if model == "gpt-realtime-whisper" && given.get("prompt").is_some_and(|p| !p.is_null()) {
        return Some((
            "session.audio.input.transcription.prompt",
            "Prompt is not supported for this transcription model".into(),
        ));
    }
    if given.get("language").is_some_and(|l| !l.is_null())
        && given.get("languages").is_some_and(|l| !l.is_null())
    {
        return Some((
            "session.audio.input.transcription.languages",
            "Only one of 'language' and 'languages' may be set.".into(),
        ));
    }
    None
}

fn completed(item_id: &str, transcript: &str, audio_ms: u64, duration: bool) -> Value {
    if duration {
        return json!({"type": "conversation.item.input_audio_transcription.completed",
            "item_id": item_id, "content_index": 0, "transcript": transcript,
            "usage": {"type": "duration", "seconds": audio_ms as f64 / 1000.0}});
    }
    let audio_tokens = (audio_ms / 100).max(1);
    let output_tokens = transcript.split_whitespace().count() as u64;
    json!({"type": "conversation.item.input_audio_transcription.completed",
        "item_id": item_id, "content_index": 0, "transcript": transcript,
        "usage": {"type": "tokens", "total_tokens": audio_tokens + output_tokens,
                  "input_tokens": audio_tokens,
                  "input_token_details": {"text_tokens": 0, "audio_tokens": audio_tokens},
                  "output_tokens": output_tokens}})
}

/// "a b  c" → ["a", " b", "  c"]: chunks that start at each word, keeping the spacing.
fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for c in text.chars() {
        let space = c.is_whitespace();
        if space && in_word {
            out.push(std::mem::take(&mut current));
        }
        in_word = !space;
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Deterministic PCM16 LE samples (a sawtooth), `bytes` long (rounded down to a sample).
pub fn output_audio(bytes: usize) -> Vec<u8> {
    (0..bytes / 2)
        .flat_map(|i| ((((i * 613) % 4000) as i32 - 2000) as i16).to_le_bytes())
        .collect()
}

/// Deep merge: objects merge key by key, anything else replaces.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

fn default_session(kind: SessionKind, index: usize) -> Value {
    let expires_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + 3_600;
    let pcm = json!({"type": "audio/pcm", "rate": 24000});
    match kind {
        SessionKind::Transcription => json!({
            "type": "transcription", "object": "realtime.transcription_session",
            "id": format!("sess_fake_c{index}"), "expires_at": expires_at,
            "audio": {"input": {
                "format": pcm, "noise_reduction": null,
                "transcription": {"model": "gpt-4o-transcribe", "language": null, "prompt": ""},
                "turn_detection": {"type": "server_vad", "threshold": 0.5,
                                   "prefix_padding_ms": 300, "silence_duration_ms": 500}}},
            "include": null,
        }),
        SessionKind::Realtime => json!({
            "type": "realtime", "object": "realtime.session",
            "id": format!("sess_fake_c{index}"), "expires_at": expires_at,
            "model": "gpt-realtime", "output_modalities": ["audio"], "instructions": "",
            "max_output_tokens": "inf",
            "audio": {
                "input": {"format": pcm, "transcription": null, "noise_reduction": null,
                          "turn_detection": {"type": "server_vad", "threshold": 0.5,
                              "prefix_padding_ms": 300, "silence_duration_ms": 500,
                              "create_response": true, "interrupt_response": true}},
                "output": {"format": pcm, "voice": "marin", "speed": 1.0}},
            "include": null,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_their_spacing() {
        assert_eq!(
            split_words("Hello there  friend."),
            ["Hello", " there", "  friend."]
        );
        assert!(split_words("").is_empty());
    }

    #[test]
    fn scenario_checks() {
        let ok = r#"{"name":"x","connections":[{"utterances":[{"end_ms":10},{"end_ms":20}],
                    "actions":[{"on":{"append":3},"do":"disconnect"},
                               {"on":"session_updated","do":{"send":{"type":"fake.x"}}}]}]}"#;
        let s = Scenario::from_json(ok).unwrap();
        assert_eq!(s.connections[0].actions[0].on, Trigger::Append(3));
        let bad = r#"{"name":"x","connections":[{"utterances":[{"end_ms":20},{"end_ms":20}]}]}"#;
        assert!(Scenario::from_json(bad).is_err());
        let typo = r#"{"name":"x","connections":[{"utterance":[]}]}"#;
        assert!(Scenario::from_json(typo).is_err());
    }

    #[test]
    fn dump_truncates_audio_to_valid_base64() {
        let mut v = json!({"type": "input_audio_buffer.append", "audio": B64.encode([0u8; 300])});
        let (field, chars) = truncate_audio_in(&mut v).unwrap();
        assert_eq!((field, chars), ("audio", 400));
        assert!(B64.decode(v["audio"].as_str().unwrap()).is_ok());
    }
}
