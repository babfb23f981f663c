//! The recognizer seam: what the dictation pipeline needs from an engine, and the types both
//! engines share.
//!
//! Two engines implement [`Recognizer`]: the Realtime provider's (`realtime::engine`) and the
//! on-device one (`local::dictation`). The pipeline above them hands audio to an
//! [`AudioSink`], renders the [`EngineView`] the engine publishes, asks for removals and
//! stops the engine for its [`EngineReport`]; it never knows which engine runs.
//!
//! Invariants:
//! - This room imports only `session` and `audio`; the engines import it, never each other,
//!   and never `capture` or the pipeline.
//! - Audio reaches an engine as [`AudioChunk`]s of the recording's PCM16 (the bytes of the
//!   WAV data chunk), each with the WAV range it came from once the pipeline knows it.
//! - An engine's [`EngineView`] is for rendering only: nothing reads it back into
//!   persistence. Only the [`EngineReport`]'s surviving canonical text reaches an effect.
//! - [`Recognizer::stop`] always returns a report (within the engine's own deadline); a
//!   failure to recognize is a gap in it, never invented text.

use std::fs::File;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::session::format::Gap;

/// How long a writer waits for the capture to make a referenced WAV range durable.
pub const CAPTURE_DURABLE_WAIT: Duration = Duration::from_secs(3);

/// Who speaks in a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    User,
    Assistant,
}

/// Where a chunk of sent audio lives in the capture WAV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WavRange {
    /// File name under `assets/`.
    pub asset: String,
    /// Byte offset of the chunk in the WAV file.
    pub offset: u64,
}

/// One chunk of PCM16 LE mono 24 kHz audio for the provider.
#[derive(Debug, Clone)]
pub struct AudioChunk {
    pub pcm: Vec<u8>,
    pub wav: Option<WavRange>,
}

/// The capture WAV as the writer sees it: its open file (for verification) and how many of
/// its bytes are durable.
#[derive(Debug, Clone)]
pub struct CaptureLink {
    pub asset: String,
    pub file: Arc<File>,
    pub durable: watch::Receiver<u64>,
}

/// What the engine is doing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EngineState {
    #[default]
    Connecting,
    Streaming,
    Finishing,
    /// Capture must stop: persistence failed, the queue overflowed, or the connection broke.
    Halted(String),
    Finished,
}

/// A canonical message as published (for the UI and the transcript).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedMessage {
    pub entry_id: String,
    pub item_id: String,
    pub speaker: Speaker,
    pub text: String,
    pub removed: bool,
}

/// What the UI renders: never read back into persistence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineView {
    pub state: EngineState,
    /// Unresolved items' provisional text, in provider order ("not yet saved").
    pub provisional: Vec<(String, String)>,
    pub messages: Vec<PublishedMessage>,
    pub gaps: usize,
    /// For each gap, in order: how many messages were published before it (where a
    /// "[not transcribed]" marker belongs).
    pub gap_at: Vec<usize>,
    /// How far into the audio recognition has got (ms from the recording's start): the
    /// on-device engine's last window done. 0 where the engine does not say (Realtime).
    pub heard_ms: u64,
}

/// How a removal ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemovalOutcome {
    Removed,
    /// The provider refused (its error code); nothing changed.
    Rejected(Option<String>),
    /// No acknowledgement in time, or the transport failed: the connection was closed.
    TimedOut,
    /// The provider deleted the item but the local `message.removed` could not be written;
    /// the retained intent is applied by `realtime::removal::reconcile` later.
    PendingLocal,
    /// The message is not a completed canonical message of this engine.
    NotRemovable,
}

/// The end of an engine run.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineReport {
    pub complete: bool,
    pub gaps: Vec<Gap>,
    pub messages: Vec<PublishedMessage>,
    pub halted: Option<String>,
    pub connection_id: String,
    /// The last entry the engine appended: continue the session from here.
    pub leaf: Option<String>,
}

impl EngineReport {
    /// The surviving canonical user text, in order.
    pub fn transcript(&self) -> Vec<&str> {
        self.messages
            .iter()
            .filter(|m| m.speaker == Speaker::User && !m.removed)
            .map(|m| m.text.as_str())
            .collect()
    }
}

/// Why audio could not be handed to the engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("engine.backpressure: the engine is not keeping up; capture halts")]
    Backpressure,
    #[error("engine.stopped: the engine has stopped")]
    Stopped,
}

/// A future an engine returns through the seam.
pub type EngineFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where the capture thread hands its chunks: a cloneable, thread-safe sender into one
/// running engine.
pub trait AudioSink: Send + Sync {
    /// Hands a chunk over without waiting; a full queue is backpressure.
    fn try_send(&self, chunk: AudioChunk) -> Result<(), SendError>;
    /// Hands a chunk over, waiting for room (blocking: not for async contexts).
    fn blocking_send(&self, chunk: AudioChunk) -> Result<(), SendError>;
}

/// A running engine, as the dictation pipeline sees it.
pub trait Recognizer: Send {
    /// The live view (state, provisional and published text, gaps).
    fn view(&self) -> watch::Receiver<EngineView>;
    /// The sender the capture thread feeds; `None` once the engine can take no more audio.
    fn sink(&self) -> Option<Box<dyn AudioSink>>;
    /// Removes a published message of this recording (the provider's acknowledgement first,
    /// where there is a provider).
    fn remove<'a>(&'a self, entry_id: &'a str) -> EngineFuture<'a, RemovalOutcome>;
    /// Something that abandons what the engine has not recognized yet, even while its stop
    /// drains (a file's Cancel); `None` for an engine that cannot (its stop's deadline
    /// bounds the wait).
    fn canceller(&self) -> Option<Canceller> {
        None
    }
    /// Stops the engine: recognizes or records as gaps what is left, within its deadline.
    fn stop(self: Box<Self>) -> EngineFuture<'static, EngineReport>;
}

/// Abandons an engine's recognition from outside its stop ([`Recognizer::canceller`]).
pub type Canceller = Box<dyn Fn() + Send + Sync>;
