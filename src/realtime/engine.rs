//! The realtime engine: one task owns the provider websocket; one thread owns the session
//! writer. Between them a bounded observation queue carries every protocol event (sanitized)
//! and every published message to disk, in order.
//!
//! ```text
//!  audio chunks ─┐                        ┌─► writer thread ─► Continuation::append (fsync)
//!  commands ─────┼─► connection task ─────┤     (realtime_event, message, api_connection)
//!  shutdown ─────┘    (websocket, ordering)└─► view (watch): state, provisional, messages
//! ```
//!
//! Invariants:
//! - Every event sent or received becomes a `realtime_event` (send_attempt before the write,
//!   send_failed if the write fails, received on arrival), sanitized before it is queued.
//! - The observation queue is bounded (512 jobs, 8 MiB counting payload and media bytes). A
//!   full queue makes the connection task wait for the writer (reading no more from the
//!   socket) for at most [`WRITER_ROOM_WAIT`]; past that, or if persistence fails, the engine
//!   halts visibly ([`EngineState::Halted`]) — it never drops an observation silently.
//! - The writer submits at most 256 records and 4 MiB per append (the store's batch limit),
//!   splitting by the exact bytes of each line.
//! - Ordering limits ([`super::ordering`]) enter finishing: the view shows
//!   `Halted("ordering.limit")` (capture stops), audio is no longer sent, the input buffer is
//!   committed, every later item becomes a gap or a message, and the outcome is incomplete.
//! - Turns: models with server VAD commit on their own; for the others
//!   ([`protocol::Turns::Client`]) the engine commits when [`super::turns::ClientTurns`]
//!   (the capture segmenter over the appended audio) ends a turn — never under 100 ms of
//!   audio — and stop commits a tail that is not provably silent (padded to 100 ms when
//!   shorter). Each commit's WAV byte range goes with the item its
//!   `input_audio_buffer.committed` names into the message's `replay.audio`. Commits are
//!   answered in order (committed, or an error naming them). A client turn's audio that a
//!   refused or unanswered commit covered, or that the connection ended before committing,
//!   is a gap over its range ([`COMMIT_REFUSED`], [`COMMIT_UNANSWERED`], [`NOT_COMMITTED`]):
//!   every sample sent is committed, in a gap, or a provably silent tail.
//! - Audio that arrives before `session.created` waits (at most [`MAX_EARLY_CHUNKS`]) and goes
//!   out right after the `session.update`. A stop before the session exists waits for it
//!   within the drain deadline, sends the early audio and then commits; audio still unsent
//!   at the end is a gap [`NO_SESSION`] over its time range (outcome incomplete).
//! - A failed connection halts with a stable code first in its reason ([`UNAUTHORIZED`] for
//!   HTTP 401, [`UNREACHABLE`], [`CONNECT_FAILED`], [`DISCONNECTED`]; [`failure_sentence`]
//!   says it to a person). Audio that arrives when nothing can be sent (no connection, past
//!   an ordering limit), and, at a halt, server-VAD audio sent after the provider's last
//!   commit, is a [`NOT_COMMITTED`] gap over its range: the pipeline recognizes it elsewhere
//!   or records it lost, never silently.
//! - Settings the provider would refuse ([`Settings::check`]) halt before connecting; an
//!   `error` naming our `session.update` halts the engine (nothing would be transcribed).
//! - In conversation mode, stop awaits requested responses (one per server-VAD turn until its
//!   `response.created`) and streaming ones (until `response.done`) within the drain
//!   deadline; past it each is a gap and the outcome is incomplete.
//! - Provider URLs pass [`crate::endpoint::check_provider_url`] before anything is recorded
//!   or connected: no API key goes unencrypted to a remote host.
//! - An outgoing audio append references the capture WAV range only after that range is
//!   durable and byte-for-byte equal to what was sent; otherwise its bytes go to an exclusive
//!   `assets/protocol-<uuid>.bin`, written and fsynced before the record.
//! - Messages are published in provider order ([`super::ordering`]); their entry ids are local
//!   UUIDv7s, the provider item id and connection id go into `message.replay`.
//! - Every wait has a deadline: connect [`CONNECT_TIMEOUT`] (10 s); each websocket write,
//!   ping included, [`SEND_TIMEOUT`] (10 s); the close handshake [`CLOSE_TIMEOUT`] (2 s);
//!   the stop drain [`DRAIN_DEADLINE`] (10 s); a removal's acknowledgement
//!   [`REMOVAL_TIMEOUT`] (5 s); room in the observation queue [`WRITER_ROOM_WAIT`] (5 s);
//!   each answer from the writer (a published message's id, a barrier) and, at the end, the
//!   writer's last batch and thread exit together [`WRITER_SETTLE`] (15 s). A writer that does
//!   not settle in time is left behind (its thread ends when its store call returns) and the
//!   engine reports `Halted`; [`EngineHandle::stop`] returns either way.

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use super::ordering::{Ordering, Published, ResponseStatus};
use super::protocol::{self, Mode, ServerEvent, Settings, Turns};
use super::sanitize;
use super::turns::{ClientTurns, Turn, TurnAudio};
use crate::recognize::{
    AudioChunk, AudioSink, CAPTURE_DURABLE_WAIT, CaptureLink, EngineFuture, EngineReport,
    EngineState, EngineView, PublishedMessage, Recognizer, RemovalOutcome, SendError, Speaker,
    WavRange,
};
use crate::session::format::{
    ApiConnection, AssetRef, Block, ByteRange, Direction, Entry, EntryBody, Gap, MediaRef, Message,
    MessageRemoved, Observation as ObservationKind, RealtimeEvent, Role, StopReason,
};
use crate::session::store::{Continuation, MAX_BATCH_BYTES, MAX_BATCH_RECORDS, new_id, now_iso};

/// Most queued observation jobs.
pub const MAX_QUEUE_JOBS: usize = 512;
/// Most bytes held by queued observation jobs.
pub const MAX_QUEUE_BYTES: usize = 8 << 20;
/// Stop's drain deadline for realtime work and pending deletions.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(10);
/// How long a removal waits for the provider's acknowledgement.
pub const REMOVAL_TIMEOUT: Duration = Duration::from_secs(5);
/// Connection deadline.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// WebSocket keep-alive pings.
pub const PING_INTERVAL: Duration = Duration::from_secs(15);
/// Deadline of one websocket write (events and pings).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline of the websocket close handshake.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the connection task waits for room in a full observation queue before halting.
pub const WRITER_ROOM_WAIT: Duration = Duration::from_secs(5);
/// How long the connection task waits for the writer: one answer, or the final settle (last
/// batch written and thread exited).
pub const WRITER_SETTLE: Duration = Duration::from_secs(15);
/// Most chunks (100 ms each) held while the provider has not created the session yet.
pub const MAX_EARLY_CHUNKS: usize = 300;
/// The halt reason when the ordering bounds were reached.
pub const ORDERING_LIMIT: &str = super::ordering::LIMIT_REASON;
/// The gap reason of audio never sent because the provider created no session before the
/// stop's drain deadline (or the connection broke first).
pub const NO_SESSION: &str = "provider.no-session";
/// Halt codes of the connection (the halt reason starts with one, then `: ` and a detail
/// without secrets): the provider refused the API key (HTTP 401); the provider could not be
/// reached (network, DNS, TLS, timeout); it refused the connection otherwise (another HTTP
/// status, a protocol error); an open connection was lost.
pub const UNAUTHORIZED: &str = "provider.unauthorized";
pub const UNREACHABLE: &str = "provider.unreachable";
pub const CONNECT_FAILED: &str = "provider.connect-failed";
pub const DISCONNECTED: &str = "provider.disconnected";
/// Gap reasons of client-turn audio the provider never recognized: a commit it refused, a
/// commit it never answered before the drain deadline, audio the connection ended before
/// committing.
pub const COMMIT_REFUSED: &str = "provider.commit-refused";
pub const COMMIT_UNANSWERED: &str = "provider.commit-unanswered";
pub const NOT_COMMITTED: &str = "provider.not-committed";
/// PCM16 bytes per millisecond at 24 kHz.
const BYTES_PER_MS: u64 = crate::audio::PCM_RATE_HZ as u64 * 2 / 1000;
/// Gap reasons of conversation responses that did not finish before the drain deadline.
pub const RESPONSE_UNFINISHED: &str = "response not finished before the stop deadline";
pub const RESPONSE_NOT_CREATED: &str = "requested response not created before the stop deadline";

enum Command {
    Audio(AudioChunk),
    Remove {
        entry_id: String,
        reply: oneshot::Sender<RemovalOutcome>,
    },
    Stop {
        reply: oneshot::Sender<EngineReport>,
    },
}

/// The caller's side of a running engine.
#[derive(Debug)]
pub struct EngineHandle {
    commands: mpsc::Sender<Command>,
    view: watch::Receiver<EngineView>,
    task: tokio::task::JoinHandle<EngineReport>,
}

/// A cloneable sender of audio to a running engine (for a capture thread).
#[derive(Debug, Clone)]
pub struct AudioSender {
    commands: mpsc::Sender<Command>,
}

impl AudioSender {
    /// Hands a chunk over without waiting; a full queue is backpressure.
    pub fn try_send(&self, chunk: AudioChunk) -> Result<(), SendError> {
        self.commands
            .try_send(Command::Audio(chunk))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => SendError::Backpressure,
                mpsc::error::TrySendError::Closed(_) => SendError::Stopped,
            })
    }

    /// Hands a chunk over, waiting for room (blocking: not for async contexts).
    pub fn blocking_send(&self, chunk: AudioChunk) -> Result<(), SendError> {
        self.commands
            .blocking_send(Command::Audio(chunk))
            .map_err(|_| SendError::Stopped)
    }
}

impl EngineHandle {
    /// Hands a chunk to the connection task without waiting. A full command queue is
    /// backpressure: the caller halts capture.
    pub fn send_audio(&self, chunk: AudioChunk) -> Result<(), SendError> {
        self.audio_sender().try_send(chunk)
    }

    /// Hands a chunk over, waiting for room (file sources pace themselves this way).
    pub async fn send_audio_wait(&self, chunk: AudioChunk) -> Result<(), SendError> {
        self.commands
            .send(Command::Audio(chunk))
            .await
            .map_err(|_| SendError::Stopped)
    }

    /// A sender for a capture thread.
    pub fn audio_sender(&self) -> AudioSender {
        AudioSender {
            commands: self.commands.clone(),
        }
    }

    /// The live view model.
    pub fn view(&self) -> watch::Receiver<EngineView> {
        self.view.clone()
    }

    /// Removes a completed canonical message (by its entry id) after the provider confirms.
    pub async fn remove(&self, entry_id: &str) -> RemovalOutcome {
        let (reply, rx) = oneshot::channel();
        let cmd = Command::Remove {
            entry_id: entry_id.to_owned(),
            reply,
        };
        if self.commands.send(cmd).await.is_err() {
            return RemovalOutcome::TimedOut;
        }
        rx.await.unwrap_or(RemovalOutcome::TimedOut)
    }

    /// Commits the input buffer, drains (≤ 10 s), publishes, and returns the report.
    pub async fn stop(self) -> EngineReport {
        let (reply, rx) = oneshot::channel();
        if self.commands.send(Command::Stop { reply }).await.is_ok()
            && let Ok(report) = rx.await
        {
            let _ = self.task.await;
            return report;
        }
        match self.task.await {
            Ok(report) => report,
            Err(_) => EngineReport {
                complete: false,
                gaps: Vec::new(),
                messages: Vec::new(),
                halted: Some("engine task failed".into()),
                connection_id: String::new(),
                leaf: None,
            },
        }
    }
}

impl AudioSink for AudioSender {
    fn try_send(&self, chunk: AudioChunk) -> Result<(), SendError> {
        AudioSender::try_send(self, chunk)
    }

    fn blocking_send(&self, chunk: AudioChunk) -> Result<(), SendError> {
        AudioSender::blocking_send(self, chunk)
    }
}

impl Recognizer for EngineHandle {
    fn view(&self) -> watch::Receiver<EngineView> {
        EngineHandle::view(self)
    }

    fn sink(&self) -> Option<Box<dyn AudioSink>> {
        Some(Box::new(self.audio_sender()))
    }

    fn remove<'a>(&'a self, entry_id: &'a str) -> EngineFuture<'a, RemovalOutcome> {
        Box::pin(EngineHandle::remove(self, entry_id))
    }

    fn stop(self: Box<Self>) -> EngineFuture<'static, EngineReport> {
        Box::pin(EngineHandle::stop(*self))
    }
}

/// Starts the engine on the current tokio runtime. `continuation` is where every record goes;
/// `capture` links the capture WAV for media references (None: protocol assets only).
pub fn start(
    settings: Settings,
    api_key: String,
    continuation: Continuation,
    capture: Option<CaptureLink>,
) -> EngineHandle {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (commands, rx) = mpsc::channel(256);
    let (view_tx, view) = watch::channel(EngineView::default());
    let task = tokio::spawn(run(settings, api_key, continuation, capture, rx, view_tx));
    EngineHandle {
        commands,
        view,
        task,
    }
}

// ---------------------------------------------------------------------------------------
// The writer thread.

enum Job {
    Event {
        event: Box<RealtimeEvent>,
        media: Option<PendingMedia>,
    },
    Message {
        published: Published,
        connection_id: String,
        audio: Option<TurnAudio>,
        reply: oneshot::Sender<Option<String>>,
    },
    Entry(Box<EntryBody>),
    /// Ends the writer's current batch; answered once everything before it is durable.
    Barrier(oneshot::Sender<Result<(), String>>),
}

enum PendingMedia {
    /// Sent capture audio that should match a WAV range.
    Wav { range: WavRange, bytes: Vec<u8> },
    /// Bytes that go to their own protocol asset.
    Bytes { pointer: String, bytes: Vec<u8> },
}

/// State the async side and the writer thread share (the writer holds no sender, so the
/// channel closes when the async side drops its handle).
#[derive(Default)]
struct QueueState {
    bytes: AtomicUsize,
    halted: Mutex<Option<String>>,
}

impl QueueState {
    fn halt(&self, reason: &str) {
        let mut h = self.halted.lock().unwrap_or_else(|p| p.into_inner());
        if h.is_none() {
            *h = Some(reason.to_owned());
        }
    }

    fn halted(&self) -> Option<String> {
        self.halted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The async side's handle on the writer: bounded, with a byte budget. Each job travels
/// with the bytes it holds against the budget; the writer frees them once it is written.
#[derive(Clone)]
struct Jobs {
    tx: mpsc::Sender<(Job, usize)>,
    state: Arc<QueueState>,
}

impl Jobs {
    fn halt(&self, reason: &str) {
        self.state.halt(reason);
    }

    fn halted(&self) -> Option<String> {
        self.state.halted()
    }

    /// Queues a job, waiting (≤ [`WRITER_ROOM_WAIT`]) for room in a full queue; halts the
    /// engine when none comes. A job larger than the whole budget goes into an empty queue.
    async fn push_wait(&self, job: Job, bytes: usize) -> bool {
        let deadline = Instant::now() + WRITER_ROOM_WAIT;
        loop {
            if self.halted().is_some() {
                return false;
            }
            let queued = self.state.bytes.load(AtomicOrdering::SeqCst);
            let fits = queued == 0 || queued + bytes <= MAX_QUEUE_BYTES;
            if fits && self.tx.capacity() > 0 {
                return self.push(job, bytes);
            }
            if Instant::now() >= deadline {
                self.halt(if fits {
                    "observation queue full (512 jobs)"
                } else {
                    "observation queue over 8 MiB"
                });
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Queues a job without waiting; a full queue or budget halts the engine (a job larger
    /// than the whole budget is accepted into an empty queue).
    fn push(&self, job: Job, bytes: usize) -> bool {
        if self.halted().is_some() {
            return false;
        }
        let before = self.state.bytes.fetch_add(bytes, AtomicOrdering::SeqCst);
        if before != 0 && before + bytes > MAX_QUEUE_BYTES {
            self.state.bytes.fetch_sub(bytes, AtomicOrdering::SeqCst);
            self.halt("observation queue over 8 MiB");
            return false;
        }
        match self.tx.try_send((job, bytes)) {
            Ok(()) => true,
            Err(_) => {
                self.state.bytes.fetch_sub(bytes, AtomicOrdering::SeqCst);
                self.halt("observation queue full (512 jobs)");
                false
            }
        }
    }

    /// Queues a barrier and waits (≤ [`WRITER_SETTLE`]) until everything before it is
    /// durable. `Err` carries the halt reason.
    async fn settle(&self) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        if !self.push_wait(Job::Barrier(tx), 0).await {
            return Err(self.halted().unwrap_or_else(|| "halted".into()));
        }
        match tokio::time::timeout(WRITER_SETTLE, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err("the session writer stopped".into()),
            Err(_) => {
                self.halt("the session writer did not settle");
                Err("the session writer did not settle".into())
            }
        }
    }
}

fn spawn_writer(
    mut continuation: Continuation,
    capture: Option<CaptureLink>,
) -> (Jobs, std::thread::JoinHandle<Continuation>) {
    let (tx, mut rx) = mpsc::channel::<(Job, usize)>(MAX_QUEUE_JOBS);
    let jobs = Jobs {
        tx,
        state: Arc::new(QueueState::default()),
    };
    let shared = jobs.state.clone();
    let thread = std::thread::spawn(move || {
        while let Some(first) = rx.blocking_recv() {
            let mut barrier = matches!(first.0, Job::Barrier(_));
            let mut batch = vec![first];
            // A barrier ends a batch, so what follows it never shares its fate.
            while !barrier && batch.len() < MAX_BATCH_RECORDS {
                match rx.try_recv() {
                    Ok(j) => {
                        barrier = matches!(j.0, Job::Barrier(_));
                        batch.push(j);
                    }
                    Err(_) => break,
                }
            }
            write_batch(&mut continuation, capture.as_ref(), batch, &shared);
        }
        continuation
    });
    (jobs, thread)
}

fn write_batch(
    continuation: &mut Continuation,
    capture: Option<&CaptureLink>,
    batch: Vec<(Job, usize)>,
    jobs: &QueueState,
) {
    let mut bodies = Vec::with_capacity(batch.len());
    let mut replies: Vec<(usize, oneshot::Sender<Option<String>>)> = Vec::new();
    let mut barriers = Vec::new();
    let mut freed = 0;
    for (job, bytes) in batch {
        freed += bytes;
        match job {
            Job::Event { mut event, media } => {
                if let Some(m) = media {
                    match resolve_media(continuation, capture, m) {
                        Ok(r) => event.media = Some(vec![r]),
                        Err(reason) => {
                            jobs.halt(&reason);
                            continue;
                        }
                    }
                }
                bodies.push(EntryBody::RealtimeEvent(*event));
            }
            Job::Message {
                published,
                connection_id,
                audio,
                reply,
            } => {
                if let Some(body) = message_body(&published, &connection_id, audio.as_ref()) {
                    replies.push((bodies.len(), reply));
                    bodies.push(body);
                } else {
                    let _ = reply.send(None);
                }
            }
            Job::Entry(body) => bodies.push(*body),
            Job::Barrier(tx) => barriers.push(tx),
        }
    }
    let mut ids: Vec<Option<String>> = vec![None; bodies.len()];
    if jobs.halted().is_none() && !bodies.is_empty() {
        let (acked, error) = append_split(continuation, bodies);
        for (i, id) in acked.into_iter().enumerate() {
            ids[i] = Some(id);
        }
        if let Some(code) = error {
            jobs.halt(code);
        }
    }
    jobs.bytes.fetch_sub(freed, AtomicOrdering::SeqCst);
    for (i, reply) in replies {
        let _ = reply.send(ids.get(i).cloned().flatten());
    }
    let result = match jobs.halted() {
        None => Ok(()),
        Some(r) => Err(r),
    };
    for b in barriers {
        let _ = b.send(result.clone());
    }
}

/// Appends `bodies` as a chain below the continuation's leaf in as many store appends as the
/// batch limit needs (≤ [`MAX_BATCH_RECORDS`] records and ≤ [`MAX_BATCH_BYTES`] per append,
/// measured on the serialized lines). Returns the acknowledged ids, in order, and the
/// store's error code if it stopped short.
fn append_split(
    continuation: &mut Continuation,
    bodies: Vec<EntryBody>,
) -> (Vec<String>, Option<&'static str>) {
    let mut parent = continuation.leaf().map(str::to_owned);
    let lines: Vec<String> = bodies
        .into_iter()
        .map(|body| {
            let id = new_id();
            Entry {
                id: id.clone(),
                parent_id: parent.replace(id),
                timestamp: now_iso(),
                body,
            }
            .to_line()
        })
        .collect();
    let mut acked = Vec::with_capacity(lines.len());
    let mut start = 0;
    while start < lines.len() {
        let mut end = start;
        let mut size = 0;
        while end < lines.len() && end - start < MAX_BATCH_RECORDS {
            let next = lines[end].len() + 1;
            if end > start && size + next > MAX_BATCH_BYTES {
                break;
            }
            size += next;
            end += 1;
        }
        let report = continuation.handle().append(&lines[start..end]);
        for ack in &report.acks {
            acked.push(ack.id.clone());
        }
        if let Some(last) = acked.last() {
            continuation.set_leaf(Some(last.clone()));
        }
        if let Some(e) = report.error {
            return (acked, Some(e.code()));
        }
        start = end;
    }
    (acked, None)
}

fn message_body(
    p: &Published,
    connection_id: &str,
    audio: Option<&TurnAudio>,
) -> Option<EntryBody> {
    let Published::Message {
        item_id,
        speaker,
        text,
        response,
    } = p
    else {
        return None;
    };
    let role = match speaker {
        Speaker::User => Role::User,
        Speaker::Assistant => Role::Assistant,
    };
    let now_ms = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
    let mut m = Message::new(role, vec![Block::text(text.clone())], now_ms.max(0) as u64);
    let mut replay = Map::new();
    replay.insert("itemId".into(), json!(item_id));
    replay.insert("connectionId".into(), json!(connection_id));
    if let Some(a) = audio {
        // The capture WAV bytes this item's commit covered (client turns).
        replay.insert(
            "audio".into(),
            json!({"path": format!("assets/{}", a.asset),
                   "byteRange": {"start": a.start, "end": a.end}}),
        );
    }
    if let Some((response_id, status)) = response {
        replay.insert("responseId".into(), json!(response_id));
        replay.insert("status".into(), json!(status.as_str()));
        m.response_id = Some(response_id.clone());
        m.stop_reason = Some(match status {
            ResponseStatus::Completed => StopReason::Stop,
            ResponseStatus::Incomplete(Some(r)) if r == "max_output_tokens" => StopReason::Length,
            ResponseStatus::Failed(_) => StopReason::Error,
            _ => StopReason::Aborted,
        });
    }
    m.provider = Some("openai".into());
    m.api = Some("openai-realtime".into());
    m.replay = Some(replay);
    Some(EntryBody::Message(m))
}

fn resolve_media(
    continuation: &Continuation,
    capture: Option<&CaptureLink>,
    media: PendingMedia,
) -> Result<MediaRef, String> {
    let (pointer, bytes) = match media {
        PendingMedia::Wav { range, bytes } => {
            if let Some(link) = capture.filter(|c| c.asset == range.asset)
                && wav_matches(link, &range, &bytes)
            {
                return Ok(MediaRef {
                    pointer: "/audio".into(),
                    asset: AssetRef::Available {
                        path: format!("assets/{}", range.asset),
                        mime_type: "audio/wav".into(),
                        byte_range: Some(ByteRange {
                            start: range.offset,
                            end: range.offset + bytes.len() as u64,
                        }),
                        encoding: Some("base64".into()),
                        sha256: None,
                    },
                });
            }
            ("/audio".to_owned(), bytes)
        }
        PendingMedia::Bytes { pointer, bytes } => (pointer, bytes),
    };
    let name = format!("protocol-{}.bin", new_id());
    let asset = continuation
        .handle()
        .write_asset(&name, &bytes, "application/octet-stream", Some("base64"))
        .map_err(|e| e.code().to_owned())?;
    Ok(MediaRef { pointer, asset })
}

/// Waits (bounded) until the capture made the range durable, then compares the bytes.
fn wav_matches(link: &CaptureLink, range: &WavRange, bytes: &[u8]) -> bool {
    let end = range.offset + bytes.len() as u64;
    let deadline = std::time::Instant::now() + CAPTURE_DURABLE_WAIT;
    while *link.durable.borrow() < end {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut on_disk = vec![0u8; bytes.len()];
    link.file.read_exact_at(&mut on_disk, range.offset).is_ok() && on_disk == bytes
}

// ---------------------------------------------------------------------------------------
// The connection task.

struct Conn {
    connection_id: String,
    sequence: u64,
    jobs: Jobs,
}

impl Conn {
    /// Retains one protocol event (sanitized). `payload_bytes` is its size on the wire; it
    /// counts against the queue's byte budget with the media bytes.
    async fn observe(
        &mut self,
        direction: Direction,
        kind: ObservationKind,
        mut payload: Map<String, Value>,
        media: Option<PendingMedia>,
        payload_bytes: usize,
    ) -> bool {
        self.sequence += 1;
        let redactions = sanitize::sanitize_object(&mut payload);
        let remote_event_id = match direction {
            Direction::Incoming => payload
                .get("event_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            Direction::Outgoing => None,
        };
        let bytes = media.as_ref().map_or(0, |m| match m {
            PendingMedia::Wav { bytes, .. } | PendingMedia::Bytes { bytes, .. } => bytes.len(),
        }) + payload_bytes
            + 256;
        let event = RealtimeEvent {
            connection_id: self.connection_id.clone(),
            direction,
            observation: kind,
            observed_at: now_iso(),
            sequence: self.sequence,
            payload,
            remote_event_id,
            redactions: (!redactions.is_empty()).then_some(redactions),
            media: None,
        };
        self.jobs
            .push_wait(
                Job::Event {
                    event: Box::new(event),
                    media,
                },
                bytes,
            )
            .await
    }
}

struct PendingRemoval {
    entry_id: String,
    item_id: String,
    event_id: String,
    deadline: Instant,
    reply: oneshot::Sender<RemovalOutcome>,
}

/// Responses the provider was asked for (conversation mode) and has not finished.
#[derive(Default)]
struct Responses {
    /// Server-VAD turns whose automatic response has not been created yet.
    requested: usize,
    /// Created and not done: response id and its output item ids.
    streaming: Vec<(String, Vec<String>)>,
}

impl Responses {
    fn is_settled(&self) -> bool {
        self.requested == 0 && self.streaming.is_empty()
    }

    fn created(&mut self, response_id: String) {
        self.requested = self.requested.saturating_sub(1);
        if !self.streaming.iter().any(|(id, _)| *id == response_id) {
            self.streaming.push((response_id, Vec::new()));
        }
    }

    fn item_added(&mut self, response_id: &str, item_id: String) {
        if let Some((_, items)) = self.streaming.iter_mut().find(|(id, _)| id == response_id) {
            items.push(item_id);
        }
    }

    fn done(&mut self, response_id: &str) {
        match self.streaming.iter().position(|(id, _)| id == response_id) {
            Some(pos) => {
                self.streaming.remove(pos);
            }
            // Done without a created we saw: it answers a request all the same.
            None => self.requested = self.requested.saturating_sub(1),
        }
    }
}

#[allow(clippy::too_many_lines)]
async fn run(
    settings: Settings,
    api_key: String,
    continuation: Continuation,
    capture: Option<CaptureLink>,
    mut commands: mpsc::Receiver<Command>,
    view_tx: watch::Sender<EngineView>,
) -> EngineReport {
    let connection_id = new_id();
    let (jobs, writer) = spawn_writer(continuation.clone(), capture);
    let mut conn = Conn {
        connection_id: connection_id.clone(),
        sequence: 0,
        jobs: jobs.clone(),
    };
    // No key goes unencrypted to a remote host: refuse before recording or connecting.
    // Nor settings the provider would refuse (checked before anything is sent).
    let refused = crate::endpoint::check_provider_url(&settings.url())
        .err()
        .map(|e| e.code().to_owned())
        .or_else(|| settings.check().err().map(|e| e.code().to_owned()));
    if refused.is_none() {
        let (endpoint, _) = sanitize::sanitize_url(&settings.url());
        jobs.push(
            Job::Entry(Box::new(EntryBody::ApiConnection(ApiConnection {
                connection_id: connection_id.clone(),
                provider: "openai".into(),
                endpoint,
                requested_model: settings.requested_model().to_owned(),
                api: "openai-realtime".into(),
                origin_id: new_id(),
            }))),
            256,
        );
    }

    let conversation = settings.mode == Mode::Conversation;
    let mut ordering = Ordering::new();
    let mut responses = Responses::default();
    let mut messages: Vec<PublishedMessage> = Vec::new();
    let mut gaps: Vec<Gap> = Vec::new();
    let mut gap_at: Vec<usize> = Vec::new();
    let mut complete = true;
    let mut halted: Option<String> = None;
    let mut limit_entered = false;
    let mut halt_shown = false;
    let mut stop_reply: Option<oneshot::Sender<EngineReport>> = None;
    let mut removals: Vec<PendingRemoval> = Vec::new();
    // Our commits awaiting their answer, in order: event id and the WAV bytes they cover.
    let mut commits = Commits::default();
    let client_turns = settings.turns() == Turns::Client;
    let mut turns = ClientTurns::new();
    let mut item_audio: std::collections::HashMap<String, TurnAudio> =
        std::collections::HashMap::new();
    let mut session_update_id: Option<String> = None;
    // Audio that arrived before the session was configured.
    let mut early_audio: std::collections::VecDeque<AudioChunk> = std::collections::VecDeque::new();
    let mut vad_stopped: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut drain_deadline: Option<Instant> = None;

    let set_state = |s: EngineState| view_tx.send_modify(|v| v.state = s);
    // A drain deadline only ever moves earlier.
    let drain_by = |current: Option<Instant>, by: Instant| Some(current.map_or(by, |d| d.min(by)));

    // Connect.
    let ws = match refused {
        Some(code) => Err(code),
        None => {
            async {
                let mut req = settings
                    .url()
                    .into_client_request()
                    .map_err(|_| "bad provider URL".to_owned())?;
                let auth = HeaderValue::from_str(&format!("Bearer {api_key}"))
                    .map_err(|_| "API key is not a valid header value".to_owned())?;
                req.headers_mut().insert("Authorization", auth);
                match tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(req))
                    .await
                {
                    Ok(Ok((ws, _))) => Ok(ws),
                    Ok(Err(e)) => Err(format!("{}: {}", connect_code(&e), describe_ws_error(&e))),
                    Err(_) => Err(format!("{UNREACHABLE}: connection timed out")),
                }
            }
            .await
        }
    };
    let mut ws = match ws {
        Ok(ws) => Some(ws),
        Err(reason) => {
            // Audio sent meanwhile is still on disk in the WAV; nothing else to drain.
            halted = Some(reason);
            complete = false;
            None
        }
    };
    if ws.is_some() {
        set_state(EngineState::Streaming);
    }
    let mut ping = tokio::time::interval(PING_INTERVAL);
    ping.tick().await;
    let mut session_configured = false;
    // Stop came before `session.created`: its commit waits for the session.
    let mut stop_commit_owed = false;
    // Server turns: the WAV bytes sent since the provider's last commit.
    let mut vad_pending: Option<(u64, u64)> = None;
    // The WAV bytes of audio that arrived when nothing could be sent (no connection, past an
    // ordering limit): never sent.
    let mut dropped: Option<(u64, u64)> = None;

    loop {
        if let Some(reason) = jobs.halted() {
            halted.get_or_insert(reason);
        }
        if let Some(reason) = &halted
            && !halt_shown
        {
            // Halt: show it at once (capture stops), stop streaming, publish what is final.
            halt_shown = true;
            set_state(EngineState::Halted(reason.clone()));
            complete = false;
            drain_deadline = Some(Instant::now());
        }
        // Stopped before the session exists: the early audio still waits to be sent.
        let drained = !stop_commit_owed
            && commits.awaiting.is_empty()
            && ordering.is_settled()
            && removals.is_empty()
            && responses.is_settled();
        if let Some(deadline) = drain_deadline
            && (drained || Instant::now() >= deadline || ws.is_none())
        {
            break;
        }
        let next_removal = removals.iter().map(|r| r.deadline).min();
        let wake = [drain_deadline, next_removal]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            cmd = commands.recv(), if stop_reply.is_none() => {
                match cmd {
                    Some(Command::Audio(chunk)) => {
                        // Past an ordering limit the audio stays in the WAV only.
                        // Audio never sent is a gap (the pipeline may recognize it elsewhere).
                        if ws.is_none() || limit_entered {
                            track_uncommitted(&mut dropped, &chunk);
                        } else if !session_configured {
                            // Audio waits for the session update, so the provider applies
                            // its turn rule (and model) to every byte.
                            if early_audio.len() >= MAX_EARLY_CHUNKS {
                                track_uncommitted(&mut dropped, &chunk);
                                halted.get_or_insert(format!("{NO_SESSION}: the provider created no session in time"));
                            } else {
                                early_audio.push_back(chunk);
                            }
                        } else {
                            if !client_turns {
                                track_uncommitted(&mut vad_pending, &chunk);
                            }
                            if !send_audio(&mut ws, &mut conn, chunk, client_turns.then_some(&mut turns), &mut commits).await {
                                halted.get_or_insert(format!("{DISCONNECTED}: connection lost while sending audio"));
                            }
                        }
                    }
                    Some(Command::Remove { entry_id, reply }) => {
                        let item = messages.iter().find(|m| m.entry_id == entry_id && !m.removed).map(|m| m.item_id.clone());
                        match (item, ws.as_mut()) {
                            (Some(item_id), Some(w)) => {
                                // The intent (naming the delete's event id) is durable before
                                // the provider hears of it.
                                let payload = protocol::item_delete(&item_id);
                                let event_id = payload.get("event_id").and_then(Value::as_str).unwrap_or_default().to_owned();
                                let intent = super::removal::intent_body(&entry_id, &item_id, &connection_id, &event_id);
                                let queued = conn.jobs.push_wait(Job::Entry(Box::new(intent)), 256).await;
                                if !(queued && conn.jobs.settle().await.is_ok()) {
                                    let _ = reply.send(RemovalOutcome::TimedOut);
                                    continue;
                                }
                                if send(w, &mut conn, payload, None).await {
                                    removals.push(PendingRemoval { entry_id, item_id, event_id, deadline: Instant::now() + REMOVAL_TIMEOUT, reply });
                                } else {
                                    let _ = reply.send(RemovalOutcome::TimedOut);
                                    halted.get_or_insert(format!("{DISCONNECTED}: connection lost during removal"));
                                    ws = None;
                                }
                            }
                            (Some(_), None) => { let _ = reply.send(RemovalOutcome::TimedOut); }
                            (None, _) => { let _ = reply.send(RemovalOutcome::NotRemovable); }
                        }
                    }
                    Some(Command::Stop { reply }) => {
                        stop_reply = Some(reply);
                        if !limit_entered {
                            set_state(EngineState::Finishing);
                        }
                        drain_deadline = drain_by(drain_deadline, Instant::now() + DRAIN_DEADLINE);
                        // Past an ordering limit the commit was sent already. Before the
                        // session exists the commit waits for it (and for the early audio to
                        // go out), within the drain deadline.
                        if !limit_entered {
                            if session_configured {
                                stop_commit(client_turns, &mut turns, &ordering, &mut ws, &mut conn, &mut commits).await;
                            } else if ws.is_some() {
                                stop_commit_owed = true;
                            }
                        }
                    }
                    None => {
                        // Every handle is gone: finish as if stopped.
                        drain_deadline = drain_by(drain_deadline, Instant::now() + DRAIN_DEADLINE);
                    }
                }
            }
            msg = async { match ws.as_mut() { Some(w) => w.next().await, None => std::future::pending().await } } => {
                match msg {
                    Some(Ok(WsMessage::Text(text))) => {
                        let wire_bytes = text.len();
                        let Ok(Value::Object(payload)) = serde_json::from_str::<Value>(text.as_str()) else {
                            conn.observe(Direction::Incoming, ObservationKind::Received, unparsable(), None, 0).await;
                            continue;
                        };
                        drop(text);
                        let value = Value::Object(payload.clone());
                        let event = protocol::classify(&value);
                        if value.get("type").and_then(Value::as_str) == Some("input_audio_buffer.speech_stopped")
                            && let Some(id) = value.get("item_id").and_then(Value::as_str)
                        {
                            vad_stopped.insert(id.to_owned());
                        }
                        drop(value);
                        let audio = output_audio(&payload);
                        let mut retained = payload;
                        let media = audio.map(|bytes| {
                            retained.insert("delta".into(), Value::Null);
                            PendingMedia::Bytes { pointer: "/delta".into(), bytes }
                        });
                        conn.observe(Direction::Incoming, ObservationKind::Received, retained, media, wire_bytes).await;
                        let mut published = Vec::new();
                        match event {
                            ServerEvent::SessionCreated if !session_configured => {
                                session_configured = true;
                                let update = settings.session_update();
                                session_update_id = update.get("event_id").and_then(Value::as_str).map(str::to_owned);
                                if let Some(w) = ws.as_mut()
                                    && !send(w, &mut conn, update, None).await
                                {
                                    ws = None;
                                }
                                while let Some(chunk) = early_audio.front().cloned() {
                                    if !client_turns {
                                        track_uncommitted(&mut vad_pending, &chunk);
                                    }
                                    if !send_audio(&mut ws, &mut conn, chunk, client_turns.then_some(&mut turns), &mut commits).await {
                                        halted.get_or_insert(format!("{DISCONNECTED}: connection lost while sending audio"));
                                        break;
                                    }
                                    early_audio.pop_front();
                                }
                                if stop_commit_owed && early_audio.is_empty() {
                                    // Stopped while the session did not exist yet: the early
                                    // audio is out, commit it now.
                                    stop_commit_owed = false;
                                    stop_commit(client_turns, &mut turns, &ordering, &mut ws, &mut conn, &mut commits).await;
                                }
                            }
                            ServerEvent::Committed { item_id, previous } => {
                                vad_pending = None;
                                // A VAD commit (speech_stopped first) is not the answer to ours;
                                // in conversation mode it requests a response automatically.
                                if vad_stopped.remove(&item_id) {
                                    if conversation {
                                        responses.requested += 1;
                                    }
                                } else if let Some((_, turn)) = commits.awaiting.pop_front()
                                    && let Some(a) = turn.and_then(|t| t.audio)
                                {
                                    item_audio.insert(item_id.clone(), a);
                                }
                                let _ = ordering.item_added(&item_id, previous.as_deref(), Speaker::User);
                                published = ordering.take_ready();
                            }
                            ServerEvent::ItemAdded { item_id, previous, role } => {
                                let speaker = if role.as_deref() == Some("assistant") { Speaker::Assistant } else { Speaker::User };
                                if role.as_deref().is_none_or(|r| r == "user" || r == "assistant") {
                                    let _ = ordering.item_added(&item_id, previous.as_deref(), speaker);
                                    published = ordering.take_ready();
                                }
                            }
                            ServerEvent::TranscriptionDelta { item_id, delta } | ServerEvent::ResponseDelta { item_id, delta } => {
                                let _ = ordering.delta(&item_id, &delta);
                            }
                            ServerEvent::TranscriptionCompleted { item_id, transcript } => {
                                published = ordering.transcription_completed(&item_id, &transcript);
                            }
                            ServerEvent::TranscriptionFailed { item_id, reason } => {
                                published = ordering.transcription_failed(&item_id, &reason);
                            }
                            ServerEvent::ResponseCreated { response_id } => responses.created(response_id),
                            ServerEvent::ResponseItemAdded { response_id, item_id } => {
                                responses.item_added(&response_id, item_id);
                            }
                            ServerEvent::ResponseDone(done) => {
                                responses.done(&done.response_id);
                                let status = match done.status.as_str() {
                                    "completed" => ResponseStatus::Completed,
                                    "cancelled" => ResponseStatus::Cancelled,
                                    "incomplete" => ResponseStatus::Incomplete(done.status_reason.clone()),
                                    _ => ResponseStatus::Failed(done.status_reason.clone()),
                                };
                                for (item_id, text) in &done.items {
                                    published.extend(ordering.response_done(item_id, &done.response_id, text, status.clone()));
                                }
                            }
                            ServerEvent::ItemDeleted { item_id } => {
                                if let Some(pos) = removals.iter().position(|r| r.item_id == item_id) {
                                    let r = removals.remove(pos);
                                    // The proof of deletion is durable on its own first: if the
                                    // `message.removed` append fails, the intent stays retryable.
                                    let proof = conn.jobs.settle().await.is_ok();
                                    let queued = proof && conn.jobs.push_wait(Job::Entry(Box::new(EntryBody::MessageRemoved(MessageRemoved { target_id: r.entry_id.clone() }))), 256).await;
                                    let durable = queued && conn.jobs.settle().await.is_ok();
                                    if durable {
                                        for m in messages.iter_mut().filter(|m| m.entry_id == r.entry_id) {
                                            m.removed = true;
                                        }
                                        view_tx.send_modify(|v| v.messages = messages.clone());
                                    }
                                    let _ = r.reply.send(if durable { RemovalOutcome::Removed } else { RemovalOutcome::PendingLocal });
                                }
                            }
                            ServerEvent::Error { code, event_id } => {
                                let refused = match commits.awaiting.iter().position(|(id, _)| Some(id) == event_id.as_ref()) {
                                    Some(pos) => Some(commits.awaiting.remove(pos)),
                                    None if code.as_deref() == Some("input_audio_buffer_commit_empty") => {
                                        vad_pending = None;
                                        Some(commits.awaiting.pop_front())
                                    }
                                    None => None,
                                };
                                if let Some(commit) = refused {
                                    // Our commit was refused (e.g. too little audio): no item.
                                    // A client turn's audio is then a gap, never dropped.
                                    if let Some((_, Some(turn))) = commit {
                                        complete = false;
                                        gap_at.push(messages.len());
                                        gaps.push(turn_gap(&turn, COMMIT_REFUSED));
                                    }
                                } else if event_id.is_some() && event_id == session_update_id {
                                    // The provider refused our session settings: nothing would
                                    // be transcribed, so stop visibly.
                                    halted.get_or_insert(format!(
                                        "provider.session-refused: {}",
                                        code.as_deref().unwrap_or("unknown")
                                    ));
                                } else if let Some(pos) = removals.iter().position(|r| Some(&r.event_id) == event_id.as_ref()) {
                                    let r = removals.remove(pos);
                                    let _ = r.reply.send(RemovalOutcome::Rejected(code));
                                } else if code.as_deref() == Some("session_expired") {
                                    // A clean end: stop streaming, publish what is final.
                                    complete = false;
                                    drain_deadline = drain_by(drain_deadline, Instant::now());
                                    ws = None;
                                }
                            }
                            _ => {}
                        }
                        if ordering.limited() && !limit_entered {
                            // Enter finishing: capture stops (visibly), no more audio is sent,
                            // the input buffer is committed, and every later item becomes a
                            // gap or a message.
                            limit_entered = true;
                            complete = false;
                            set_state(EngineState::Halted(ORDERING_LIMIT.into()));
                            drain_deadline = drain_by(drain_deadline, Instant::now() + DRAIN_DEADLINE);
                            if stop_reply.is_none() {
                                let turn = if client_turns { turns.finish() } else { None };
                                if turn.is_some() || !client_turns {
                                    commit_turn(&mut ws, &mut conn, &mut commits, turn).await;
                                }
                            }
                        }
                        publish(&mut conn, &connection_id, published, &mut messages, (&mut gaps, &mut gap_at), &mut item_audio).await;
                        view_tx.send_modify(|v| {
                            v.provisional = ordering.provisional().into_iter().map(|(id, _, t)| (id, t)).collect();
                            v.messages = messages.clone();
                            v.gaps = gaps.len();
                            v.gap_at.clone_from(&gap_at);
                        });
                    }
                    Some(Ok(WsMessage::Close(_))) | None => {
                        if stop_reply.is_none() && !limit_entered {
                            halted.get_or_insert(format!("{DISCONNECTED}: the provider closed the connection"));
                        }
                        complete &= stop_reply.is_some()
                            && commits.awaiting.is_empty()
                            && ordering.is_settled()
                            && responses.is_settled();
                        ws = None;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        halted.get_or_insert(format!("{DISCONNECTED}: {}", describe_ws_error(&e)));
                        ws = None;
                    }
                }
            }
            _ = ping.tick(), if ws.is_some() => {
                if let Some(w) = ws.as_mut() {
                    let sent = tokio::time::timeout(SEND_TIMEOUT, w.send(WsMessage::Ping(Vec::new().into())))
                        .await
                        .is_ok_and(|r| r.is_ok());
                    if !sent {
                        halted.get_or_insert(format!("{DISCONNECTED}: ping failed"));
                        ws = None;
                    }
                }
            }
            _ = sleep_until(wake) => {
                let now = Instant::now();
                if removals.iter().any(|r| r.deadline <= now) {
                    // Transport doubt: close the connection, stop capture; local history stays.
                    for r in removals.drain(..) {
                        let _ = r.reply.send(RemovalOutcome::TimedOut);
                    }
                    halted.get_or_insert("removal was not acknowledged in time".into());
                    if let Some(mut w) = ws.take() {
                        let _ = tokio::time::timeout(CLOSE_TIMEOUT, w.close(None)).await;
                    }
                }
            }
        }
    }

    // Drain over: close what is unresolved as gaps and publish the final messages.
    if !ordering.is_settled() || !commits.awaiting.is_empty() || !responses.is_settled() {
        complete = false;
    }
    // Client turns (the invariant of `super::turns`): audio committed without an answer,
    // never committed, or left uncommitted and not provably silent, is a gap over its range.
    let unanswered = commits
        .awaiting
        .drain(..)
        .filter_map(|(_, t)| t)
        .map(|t| (t, COMMIT_UNANSWERED));
    let unsent = commits
        .unsent
        .drain(..)
        .chain(client_turns.then(|| turns.unsent()).flatten())
        .map(|t| (t, NOT_COMMITTED));
    // Server turns: audio sent after the last commit when the connection ended.
    let vad_tail = vad_pending
        .filter(|_| halted.is_some())
        .map(|(start, end)| Turn {
            bytes: end - start,
            pad_bytes: 0,
            audio: Some(TurnAudio {
                asset: String::new(),
                start,
                end,
            }),
        });
    let dropped = dropped.map(|(start, end)| Turn {
        bytes: end - start,
        pad_bytes: 0,
        audio: Some(TurnAudio {
            asset: String::new(),
            start,
            end,
        }),
    });
    let unsent = unsent.chain(
        [vad_tail, dropped]
            .into_iter()
            .flatten()
            .map(|t| (t, NOT_COMMITTED)),
    );
    for (turn, reason) in unanswered.chain(unsent).collect::<Vec<_>>() {
        complete = false;
        gap_at.push(messages.len());
        gaps.push(turn_gap(&turn, reason));
    }
    // Audio that waited for a session that never came (or a connection that broke first) was
    // never sent: a gap over its time range.
    if let Some(gap) = unsent_gap(&early_audio, NO_SESSION) {
        complete = false;
        gap_at.push(messages.len());
        gaps.push(gap);
    }
    let rest = ordering.close_unresolved("not transcribed before the stop deadline");
    publish(
        &mut conn,
        &connection_id,
        rest,
        &mut messages,
        (&mut gaps, &mut gap_at),
        &mut item_audio,
    )
    .await;
    // Requested or streaming responses that did not finish: gaps, never silence. An output
    // item the ordering knows was closed above.
    let mut response_gap = |reason: &str, item_id: Option<String>| {
        gap_at.push(messages.len());
        gaps.push(Gap {
            reason: reason.to_owned(),
            item_id,
            start_ms: None,
            end_ms: None,
        });
    };
    for (_, items) in responses.streaming.drain(..) {
        if items.is_empty() {
            response_gap(RESPONSE_UNFINISHED, None);
        }
        for item in items.into_iter().filter(|i| !ordering.contains(i)) {
            response_gap(RESPONSE_UNFINISHED, Some(item));
        }
    }
    for _ in 0..responses.requested {
        response_gap(RESPONSE_NOT_CREATED, None);
    }
    for r in removals.drain(..) {
        let _ = r.reply.send(RemovalOutcome::TimedOut);
    }
    if let Some(mut w) = ws.take() {
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, w.close(None)).await;
    }
    // The writer settles within one deadline: its last batch, then its thread.
    let settle_by = Instant::now() + WRITER_SETTLE;
    if let Err(reason) = jobs.settle().await {
        halted.get_or_insert(reason);
    }
    if limit_entered {
        halted.get_or_insert(ORDERING_LIMIT.into());
    }
    if let Some(reason) = jobs.halted() {
        halted.get_or_insert(reason);
    }
    drop(conn);
    drop(jobs);
    let join = tokio::task::spawn_blocking(move || writer.join());
    let leaf = match tokio::time::timeout_at(settle_by, join).await {
        Ok(Ok(Ok(c))) => c.leaf().map(str::to_owned),
        Ok(_) => None,
        Err(_) => {
            // Left behind: the thread ends when its store call returns.
            halted.get_or_insert("the session writer did not settle".into());
            None
        }
    };
    if halted.is_some() {
        complete = false;
    }
    let report = EngineReport {
        complete,
        gaps,
        messages,
        halted: halted.clone(),
        connection_id,
        leaf,
    };
    view_tx.send_modify(|v| {
        v.state = match &halted {
            Some(r) => EngineState::Halted(r.clone()),
            None => EngineState::Finished,
        };
        v.provisional.clear();
        v.messages.clone_from(&report.messages);
        v.gaps = report.gaps.len();
        v.gap_at.clone_from(&gap_at);
    });
    if let Some(reply) = stop_reply {
        let _ = reply.send(report.clone());
    }
    report
}

/// The stop's commit: client turns commit a tail that holds voice (or one the provider is
/// already transcribing: more items streaming than commits awaiting their answer); server VAD
/// commits whatever is left.
async fn stop_commit(
    client_turns: bool,
    turns: &mut ClientTurns,
    ordering: &Ordering,
    ws: &mut Option<Ws>,
    conn: &mut Conn,
    commits: &mut Commits,
) {
    if client_turns {
        let turn = turns.finish().or_else(|| {
            (ordering.unlinked() > commits.awaiting.len())
                .then(|| turns.flush())
                .flatten()
        });
        if let Some(turn) = turn {
            commit_turn(ws, conn, commits, Some(turn)).await;
        }
    } else {
        commit_turn(ws, conn, commits, None).await;
    }
}

/// The gap over chunks that were never sent (their WAV time range, when they name one).
fn unsent_gap(chunks: &std::collections::VecDeque<AudioChunk>, reason: &str) -> Option<Gap> {
    let first = chunks.front()?;
    let last = chunks.back()?;
    let ms = |offset: u64| offset.saturating_sub(crate::audio::WAV_HEADER_BYTES) / BYTES_PER_MS;
    let range = first.wav.as_ref().zip(last.wav.as_ref()).map(|(a, b)| {
        (
            ms(a.offset),
            ms(b.offset + last.pcm.len() as u64).max(ms(a.offset)),
        )
    });
    Some(Gap {
        reason: reason.to_owned(),
        item_id: None,
        start_ms: range.map(|r| r.0),
        end_ms: range.map(|r| r.1),
    })
}

fn unparsable() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!("persyk.unparsable_event"));
    m
}

/// Decoded `response.output_audio.delta` bytes (provider output audio), if this is one.
fn output_audio(payload: &Map<String, Value>) -> Option<Vec<u8>> {
    let ty = payload.get("type").and_then(Value::as_str)?;
    if ty != "response.output_audio.delta" && ty != "response.audio.delta" {
        return None;
    }
    B64.decode(payload.get("delta")?.as_str()?).ok()
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Retains a send attempt, writes the event (≤ [`SEND_TIMEOUT`]), retains a failure.
/// Returns whether it was written.
async fn send(
    ws: &mut Ws,
    conn: &mut Conn,
    payload: Map<String, Value>,
    media: Option<PendingMedia>,
) -> bool {
    let text = Value::Object(payload.clone()).to_string();
    let mut retained = payload;
    // With media, the retained payload is small (the audio is referenced, not inlined).
    let retained_bytes = if media.is_some() { 0 } else { text.len() };
    if media.is_some() {
        retained.insert("audio".into(), Value::Null);
    }
    conn.observe(
        Direction::Outgoing,
        ObservationKind::SendAttempt,
        retained.clone(),
        media,
        retained_bytes,
    )
    .await;
    let written = tokio::time::timeout(SEND_TIMEOUT, ws.send(WsMessage::Text(text.into())))
        .await
        .is_ok_and(|r| r.is_ok());
    if !written {
        conn.observe(
            Direction::Outgoing,
            ObservationKind::SendFailed,
            retained,
            None,
            retained_bytes,
        )
        .await;
    }
    written
}

/// Sends one chunk (`input_audio_buffer.append`, its bytes referenced in the capture WAV or a
/// protocol asset) and, for client turns, the commit a finished turn asks for. `false`: the
/// connection is lost (and dropped).
async fn send_audio(
    ws: &mut Option<Ws>,
    conn: &mut Conn,
    chunk: AudioChunk,
    turns: Option<&mut ClientTurns>,
    commits: &mut Commits,
) -> bool {
    let Some(w) = ws.as_mut() else {
        return false;
    };
    let payload = protocol::append(B64.encode(&chunk.pcm));
    let wav = chunk.wav.as_ref().map(|r| (r.asset.clone(), r.offset));
    let media = match chunk.wav {
        Some(range) => PendingMedia::Wav {
            range,
            bytes: chunk.pcm.clone(),
        },
        None => PendingMedia::Bytes {
            pointer: "/audio".into(),
            bytes: chunk.pcm.clone(),
        },
    };
    if !send(w, conn, payload, Some(media)).await {
        *ws = None;
        return false;
    }
    if let Some(turns) = turns
        && let Some(turn) = turns.appended(&chunk.pcm, wav.as_ref().map(|(a, o)| (a.as_str(), *o)))
    {
        commit_turn(ws, conn, commits, Some(turn)).await;
    }
    ws.is_some()
}

/// Sends `input_audio_buffer.commit` (covering `turn`, for client turns); a sent commit's
/// answer is awaited in `commits`. A failed write drops the connection.
async fn commit_turn(
    ws: &mut Option<Ws>,
    conn: &mut Conn,
    commits: &mut Commits,
    turn: Option<Turn>,
) {
    let Some(w) = ws.as_mut() else {
        commits.unsent.extend(turn);
        return;
    };
    let payload = protocol::commit();
    let event_id = payload
        .get("event_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    // A short tail is padded with zeros to the provider's minimum (not part of the WAV).
    let pad = turn.as_ref().map_or(0, |t| t.pad_bytes);
    if pad > 0 {
        let zeros = vec![0u8; usize::try_from(pad).unwrap_or(0)];
        let append = protocol::append(B64.encode(&zeros));
        let media = PendingMedia::Bytes {
            pointer: "/audio".into(),
            bytes: zeros,
        };
        if !send(w, conn, append, Some(media)).await {
            *ws = None;
            commits.unsent.extend(turn);
            return;
        }
    }
    if send(w, conn, payload, None).await {
        commits.awaiting.push_back((event_id, turn));
    } else {
        *ws = None;
        commits.unsent.extend(turn);
    }
}

/// Our commits: those awaiting their answer, in order (event id, and for client turns the
/// audio they cover), and client turns that could not be sent.
#[derive(Default)]
struct Commits {
    awaiting: std::collections::VecDeque<(String, Option<Turn>)>,
    unsent: Vec<Turn>,
}

/// Extends the WAV range sent since the provider's last commit with `chunk`'s.
fn track_uncommitted(pending: &mut Option<(u64, u64)>, chunk: &AudioChunk) {
    if let Some(r) = &chunk.wav {
        let end = r.offset + chunk.pcm.len() as u64;
        *pending = Some(pending.map_or((r.offset, end), |(start, _)| (start, end)));
    }
}

/// A gap over a client turn's audio (its WAV time range, when it names one).
fn turn_gap(turn: &Turn, reason: &str) -> Gap {
    let ms = |offset: u64| offset.saturating_sub(crate::audio::WAV_HEADER_BYTES) / BYTES_PER_MS;
    let range = turn.audio.as_ref().map(|a| (ms(a.start), ms(a.end)));
    Gap {
        reason: reason.to_owned(),
        item_id: None,
        start_ms: range.map(|r| r.0),
        end_ms: range.map(|r| r.1),
    }
}

async fn publish(
    conn: &mut Conn,
    connection_id: &str,
    published: Vec<Published>,
    messages: &mut Vec<PublishedMessage>,
    (gaps, gap_at): (&mut Vec<Gap>, &mut Vec<usize>),
    item_audio: &mut std::collections::HashMap<String, TurnAudio>,
) {
    for mut p in published {
        // Speech stays as spoken; only high-confidence credential shapes are redacted.
        if let Published::Message { text, .. } = &mut p
            && let Some(clean) = sanitize::sanitize_speech(text)
        {
            *text = clean;
        }
        match &p {
            Published::Gap { item_id, reason } => {
                item_audio.remove(item_id);
                gap_at.push(messages.len());
                gaps.push(Gap {
                    reason: reason.clone(),
                    item_id: (!item_id.is_empty()).then(|| item_id.clone()),
                    start_ms: None,
                    end_ms: None,
                });
            }
            Published::Message {
                item_id,
                speaker,
                text,
                ..
            } => {
                let (reply, rx) = oneshot::channel();
                let entry = (item_id.clone(), *speaker, text.clone());
                let audio = item_audio.remove(item_id);
                let queued = conn
                    .jobs
                    .push_wait(
                        Job::Message {
                            published: p,
                            connection_id: connection_id.to_owned(),
                            audio,
                            reply,
                        },
                        entry.2.len() + 256,
                    )
                    .await;
                if !queued {
                    continue;
                }
                match tokio::time::timeout(WRITER_SETTLE, rx).await {
                    Ok(Ok(Some(entry_id))) => messages.push(PublishedMessage {
                        entry_id,
                        item_id: entry.0,
                        speaker: entry.1,
                        text: entry.2,
                        removed: false,
                    }),
                    Ok(_) => {}
                    Err(_) => conn.jobs.halt("the session writer did not settle"),
                }
            }
        }
    }
}

/// What a halt code means, as one sentence for a person (no detail, no secret).
pub fn failure_sentence(code: &str) -> &'static str {
    match code {
        UNAUTHORIZED => "OpenAI refused the API key — check it in Settings",
        UNREACHABLE => "OpenAI could not be reached — check the network connection",
        CONNECT_FAILED => "OpenAI refused the connection",
        DISCONNECTED => "The connection to OpenAI was lost",
        NO_SESSION => "OpenAI did not start the session in time",
        _ => "The transcription service stopped",
    }
}

/// Checks `api_key` with the provider without transcribing anything: the same websocket
/// upgrade a recording opens (same URL and `Authorization`), closed at once. `Err` is the
/// stable code a recording would halt with: [`UNAUTHORIZED`] when the provider refused the
/// key, [`UNREACHABLE`] when it could not be reached (or did not answer within
/// [`CONNECT_TIMEOUT`]), [`CONNECT_FAILED`] for any other refusal. Nothing is written.
pub async fn check_key(settings: &Settings, api_key: &str) -> Result<(), &'static str> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut req = settings
        .url()
        .into_client_request()
        .map_err(|_| CONNECT_FAILED)?;
    let auth = HeaderValue::from_str(&format!("Bearer {api_key}")).map_err(|_| UNAUTHORIZED)?;
    req.headers_mut().insert("Authorization", auth);
    match tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(req)).await {
        Ok(Ok((mut ws, _))) => {
            // The answer is in; the close is a courtesy with its own deadline.
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, ws.close(None)).await;
            Ok(())
        }
        Ok(Err(e)) => Err(connect_code(&e)),
        Err(_) => Err(UNREACHABLE),
    }
}

/// The stable code of a failed connection attempt: the key refused (HTTP 401), the service
/// not reachable (network, DNS, TLS, timeout), or any other refusal of the upgrade.
fn connect_code(e: &tokio_tungstenite::tungstenite::Error) -> &'static str {
    use tokio_tungstenite::tungstenite::Error as E;
    match e {
        E::Http(resp) if resp.status().as_u16() == 401 => UNAUTHORIZED,
        E::Io(_) | E::Tls(_) | E::ConnectionClosed | E::AlreadyClosed => UNREACHABLE,
        _ => CONNECT_FAILED,
    }
}

fn describe_ws_error(e: &tokio_tungstenite::tungstenite::Error) -> String {
    use tokio_tungstenite::tungstenite::Error as E;
    match e {
        E::Http(resp) => format!("HTTP {}", resp.status().as_u16()),
        E::Io(io) => format!("I/O {:?}", io.kind()),
        E::Tls(_) => "TLS failure".into(),
        E::Url(_) => "bad URL".into(),
        E::ConnectionClosed | E::AlreadyClosed => "closed".into(),
        E::Protocol(_) => "websocket protocol error".into(),
        _ => "websocket error".into(),
    }
}
