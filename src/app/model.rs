//! The messages between the UI and the backend, and the plain data the UI renders.
//!
//! Nothing here touches a file, a socket or a window: the UI sends [`Command`]s, the backend
//! answers with [`Update`]s, and a [`Waker`] asks the window for a repaint after each one.
//!
//! Invariants:
//! - Provisional text only ever reaches the UI through the engine's view (`EngineView::
//!   provisional`); [`Finished::transcript`] is built from surviving canonical user messages.
//! - Updates carry stable codes, never message text, in their error fields.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use eframe::egui;
use tokio::sync::watch;

use super::autostart::{AutostartError, AutostartState, LoginItem};
use crate::audio::clip::{Clip, ClipRequest};
use crate::local::models::{ModelInfo, ModelStore, Progress};
use crate::recognize::{EngineView, RemovalOutcome};
use crate::session::search::Cursor;
use crate::settings::Settings;

/// What the UI asks the backend to do.
#[derive(Debug)]
pub enum Command {
    /// Start dictating from the microphone into a new session; `cleanup`: the clean-up mode
    /// asked for by the "Dictate + clean" shortcut, in place of the usual one.
    Start {
        cleanup: Option<crate::cleanup::settings::CleanupMode>,
    },
    /// Stream a saved recording through the file source into a new session.
    TranscribeAgain { wav: PathBuf },
    /// Transcribe these audio or video files on the device, one after another, each into a
    /// session of its own (issue #38): the menu's "Transcribe a File…", a drop, Open With.
    TranscribeFiles { files: Vec<PathBuf> },
    /// Stop the file being transcribed: what was recognized is kept, the rest is a gap.
    CancelFile,
    /// Stop the running recording (it finishes and is saved).
    Stop,
    /// Remove a published canonical message of the running recording.
    Remove { entry_id: String },
    /// Delete a session (the user confirmed): the one just recorded or any history row; never
    /// the one recording. Through the store's whole-session deletion.
    Discard { session: PathBuf },
    /// Delete every session of the configured roots that holds no message and no audio
    /// (what a failed start left behind in older versions); answered with `EmptyDeleted`.
    DeleteEmpty,
    /// Search the configured roots (an empty query lists recent sessions); `after` asks
    /// for the page that follows an earlier answer of the same generation.
    Search {
        query: String,
        generation: u64,
        after: Option<Cursor>,
    },
    /// Read a session's conversation at a pinned leaf (`None`: the default leaf).
    Open {
        location: PathBuf,
        leaf: Option<String>,
    },
    /// Read the page of an opened session that starts at message `start`.
    ReadPage {
        pages: MessagePages,
        generation: u64,
        start: usize,
    },
    /// Copy the text of an opened session, read page by page: as delivered (each delivered
    /// clean-up in place of its spoken messages), or `as_spoken`, the user's words alone.
    CopyAll {
        pages: MessagePages,
        as_spoken: bool,
    },
    /// Copy a result row's surviving user text (at the row's leaf) without opening it:
    /// read like [`Command::CopyAll`], answered with `CopyText`.
    CopyRow {
        location: PathBuf,
        leaf: Option<String>,
    },
    /// The surviving text of the `limit` newest sessions that have any (answered with
    /// `Recent`): the menu-bar menu's "Recent" at start.
    Recent { limit: usize },
    /// Explicit recovery of a damaged session.
    Recover { location: PathBuf },
    /// Settle a conflict copy of the shared settings (issue #37 item 6): `keep_both` keeps
    /// this Mac's and adds what only the other Mac's lists have; else the other Mac's.
    /// Answered with `Shared`.
    ResolveShared { copy: String, keep_both: bool },
    /// List the input devices (for Settings).
    ListDevices,
    /// Persist settings; `api_key` replaces the stored key when `Some` (empty: delete it);
    /// `cleanup_key` the same for the clean-up model server's key.
    SaveSettings {
        settings: Box<Settings>,
        api_key: Option<String>,
        cleanup_key: Option<String>,
        /// The shared settings as the window knew them when the user changed the form: a
        /// shared field equal to these was not changed by the user, and is saved as the
        /// shared file says now (issue #37 item 6; `sync::shared::merge3`).
        seen_shared: Box<crate::sync::shared::SharedSettings>,
    },
    /// Stop the recording as a cancel (Esc, the indicator's ✕): it is saved like a stop, but
    /// no clean-up runs for it; the window keeps it for an Undo before deleting it.
    CancelRecording,
    /// Stop waiting for the clean-up of the recording just stopped: its words are delivered
    /// as spoken (Esc or "Use my words" during "Cleaning up…").
    CancelCleanup,
    /// "Clean up again": the opened session's surviving spoken words through the clean-up
    /// set up now (answered with `CleanedAgain`).
    CleanUpAgain { location: PathBuf },
    /// "Use my words" on a stored clean-up: a `message.removed` for it is appended at the
    /// session's tip (answered with `CleanupRemoved`); the spoken words were never touched.
    UseMyWords { location: PathBuf, entry_id: String },
    /// What the models folder holds for each catalog model (answered with `Models`).
    ListModels { store: ModelStore },
    /// Download a catalog model (progress, then `ModelDownloaded` or `ModelFailed`).
    DownloadModel { store: ModelStore, name: String },
    /// Stop a running download; its part stays for the next download to resume.
    CancelDownload { name: String },
    /// Delete a downloaded model (and any part of it).
    DeleteModel { store: ModelStore, name: String },
    /// Check an API key with the provider at once (a connection is opened and closed), then
    /// keep it in the key store unless the provider refused it (answered with `KeyChecked`).
    CheckKey { key: String },
    /// Read the login item back (`on: None`) or turn start at login on or off, then read it
    /// back (answered with `Autostart`).
    Autostart { item: LoginItem, on: Option<bool> },
    /// Check the release feed now (answered with `UpdateChecked`, `manual: true`).
    CheckUpdates,
    /// Read the samples of `clip` from the session at `location` for playback (answered with
    /// `Clip`, the same `generation`).
    ReadClip {
        location: PathBuf,
        clip: ClipRequest,
        generation: u64,
    },
}

/// Where a recording's audio comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AudioOrigin {
    Microphone,
    /// "Transcribe again" of this saved WAV.
    File(PathBuf),
}

/// The live side of a running recording.
#[derive(Debug, Clone)]
pub struct Live {
    pub view: watch::Receiver<EngineView>,
    pub level: Arc<AtomicU32>,
}

impl Live {
    /// RMS of the latest 100 ms of input, 0.0–1.0.
    pub fn level(&self) -> f32 {
        f32::from_bits(self.level.load(Ordering::Relaxed))
    }
}

/// How a recording ended.
#[derive(Debug, Clone)]
pub struct Finished {
    pub session: PathBuf,
    /// The recording's WAV asset (what "Transcribe again" streams).
    pub wav: PathBuf,
    /// The surviving canonical user text, joined by spaces: what goes to the clipboard.
    pub transcript: String,
    pub duration_ms: u64,
    /// Every message was transcribed and the capture ran to the user's stop.
    pub complete: bool,
    /// Why capture or the connection stopped early (a code or the engine's reason).
    pub halted: Option<String>,
    /// The recording could not be finished at all (a stable code).
    pub error: Option<String>,
    /// It recorded no audio, so its session was deleted (a failed start is not history).
    pub removed: bool,
    /// What the clean-up did (`None`: none is set up, or there were no words).
    pub cleanup: Option<CleanupOutcome>,
}

/// How far a file's transcription is, shared by the backend (which counts) and the window
/// (which shows it each frame). Frames are the file's own (its rate), counted as they go to
/// the recognizer.
#[derive(Debug)]
pub struct FileProgress {
    /// The file's name (never its folder).
    pub name: String,
    pub rate_hz: AtomicU32,
    /// Frames handed on to the recording so far (decoded; at most about a minute and a half
    /// ahead of the recognizer, which holds a file back).
    pub done: std::sync::atomic::AtomicU64,
    /// How far recognition has got (ms of the file): what the bar shows.
    pub heard_ms: std::sync::atomic::AtomicU64,
    /// Frames in the file, when its container says (0: unknown).
    pub total: std::sync::atomic::AtomicU64,
    /// A dictation has the recognizer: the file waits (its decoder and its recognizer both
    /// read this: the engine's hold).
    pub paused: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// When it started.
    pub started: std::time::Instant,
    /// Time spent waiting for a dictation (not part of the estimate's rate).
    pub paused_ms: std::sync::atomic::AtomicU64,
}

impl FileProgress {
    pub fn new(name: String) -> FileProgress {
        FileProgress {
            name,
            rate_hz: AtomicU32::new(0),
            done: Default::default(),
            heard_ms: Default::default(),
            total: Default::default(),
            paused: Default::default(),
            started: std::time::Instant::now(),
            paused_ms: Default::default(),
        }
    }

    fn ms(&self, frames: u64) -> u64 {
        let rate = u64::from(self.rate_hz.load(Ordering::Relaxed).max(1));
        frames.saturating_mul(1000) / rate
    }

    /// Where in the file the transcription is (ms): the audio recognized, never more than
    /// was decoded or the file's length.
    pub fn position_ms(&self) -> u64 {
        let heard = self.heard_ms.load(Ordering::Relaxed);
        let decoded = self.ms(self.done.load(Ordering::Relaxed));
        let position = heard.min(decoded);
        self.total_ms().map_or(position, |t| position.min(t))
    }

    /// The file's length (ms), when known.
    pub fn total_ms(&self) -> Option<u64> {
        match self.total.load(Ordering::Relaxed) {
            0 => None,
            n => Some(self.ms(n)),
        }
    }

    /// An honest estimate of the time left: the rate so far (waiting for a dictation left
    /// out) applied to what is left; `None` until a second of the file is done or without a
    /// known length.
    pub fn left(&self, now: std::time::Instant) -> Option<std::time::Duration> {
        estimate_left(
            self.position_ms(),
            self.total_ms()?,
            now.duration_since(self.started)
                .saturating_sub(std::time::Duration::from_millis(
                    self.paused_ms.load(Ordering::Relaxed),
                )),
        )
    }
}

/// Time left when `done_ms` of `total_ms` of audio took `working` so far; `None` before a
/// second of audio is done (no rate yet).
pub fn estimate_left(
    done_ms: u64,
    total_ms: u64,
    working: std::time::Duration,
) -> Option<std::time::Duration> {
    if done_ms < 1000 {
        return None;
    }
    let left_ms = total_ms.saturating_sub(done_ms) as f64;
    Some(std::time::Duration::from_secs_f64(
        working.as_secs_f64() * left_ms / done_ms as f64,
    ))
}

/// A file's transcription that ended, as the window tells it.
#[derive(Debug, Clone)]
pub struct FileDone {
    pub name: String,
    pub finished: Finished,
    /// It was stopped with Cancel (what was recognized is kept).
    pub cancelled: bool,
    /// Why it could not start (a stable code): no session was made.
    pub refused: Option<String>,
}

/// The clean-up of a finished recording, as the window tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanupOutcome {
    /// Which text [`Finished::transcript`] is.
    pub chosen: crate::cleanup::Chosen,
    /// The mode's name as shown ("Tidy").
    pub mode: &'static str,
    /// Why the words were delivered as spoken (a stable code), when a model was set up.
    pub reason: Option<&'static str>,
    /// The words as recognized (for "Copy as spoken").
    pub spoken: String,
}

/// One search or listing row.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRow {
    pub location: PathBuf,
    pub session_id: Option<String>,
    /// The leaf the row was computed at: opening the row shows exactly this.
    pub leaf: Option<String>,
    pub label: String,
    pub created: Option<String>,
    /// Audio recorded in the session (its `recording.finished` entries), when known.
    pub duration_ms: Option<u64>,
    pub excerpt: Option<String>,
    pub duplicate_of: Option<PathBuf>,
    /// The file's first diagnostic code.
    pub diagnostic: Option<&'static str>,
    /// An incomplete tail or an unfinished recording: "Recover" applies.
    pub needs_recovery: bool,
    /// Transcribed from this file (its name), not dictated.
    pub from_file: Option<String>,
    /// Recorded on another Mac: its name (issue #37; `None` for this Mac's sessions).
    pub other_mac: Option<String>,
    /// Conflict copies from a sync engine beside the session, waiting for "Merge".
    pub copies: usize,
    /// A sync engine is still bringing its files: shown as syncing, never as damage.
    pub syncing: bool,
    /// Another Mac is recording it right now (its fresh marker; issue #37 item 5): that
    /// Mac's name. Shown instead of "needs recovery"; nothing that writes is offered.
    pub recording_on: Option<String>,
}

/// Transcriptions the menu-bar menu's "Recent" holds.
pub const RECENT_LEN: usize = 5;

/// A recent transcription (the menu-bar menu's "Recent").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentItem {
    pub session: PathBuf,
    /// The surviving canonical user text, joined by spaces: what a click copies.
    pub text: String,
    /// Recorded on another Mac: its name (the menu says so beside the words; issue #37).
    pub other_mac: Option<String>,
}

/// One answered search.
#[derive(Debug, Clone, Default)]
pub struct SearchResults {
    pub generation: u64,
    pub rows: Vec<ResultRow>,
    /// Problems with configured roots (missing, unreadable): shown, never hidden.
    pub root_diagnostics: Vec<String>,
    /// Sessions the search could not look into.
    pub skipped: Vec<(PathBuf, &'static str)>,
    /// The query was not valid (a stable code).
    pub error: Option<&'static str>,
    /// More rows follow: ask again with this cursor.
    pub next: Option<Cursor>,
    /// This answer continues the rows already shown (it was asked with a cursor).
    pub continued: bool,
}

/// A message of an opened session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedMessage {
    /// The entry's id.
    pub id: String,
    /// "user", "assistant", "tool", "cleanup" (a `persyk.cleanup`) or "note".
    pub role: &'static str,
    pub text: String,
    /// The entry's `timestamp` (ISO), as written.
    pub timestamp: String,
    /// For a clean-up: where it came from and whether it was delivered.
    pub cleanup: Option<CleanupMeta>,
    /// The stretch of a recording the message was recognized from (its Play button): its
    /// audio block, or the capture bytes its `replay.audio` names.
    pub audio: Option<ClipRequest>,
}

/// What history shows about a stored clean-up (read from its `details`; a field it cannot
/// read is left empty, never an error: the entry is the user's file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupMeta {
    /// The spoken messages' ids.
    pub sources: Vec<String>,
    /// Delivered in place of the spoken words (not late).
    pub delivered: bool,
    /// "replacements", "tidy", "translate:German", …
    pub mode: String,
    /// Allowed to change the wording (Polish, Email, Translate, custom).
    pub rewritten: bool,
    /// The guard could check only numbers, names and questions (a translation).
    pub partial: bool,
}

impl CleanupMeta {
    pub fn of(details: Option<&serde_json::Value>) -> CleanupMeta {
        let Some(d) = details else {
            return CleanupMeta::default();
        };
        CleanupMeta {
            sources: d["sources"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s["id"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            delivered: d["delivery"] == "delivered",
            mode: d["mode"].as_str().unwrap_or_default().to_owned(),
            rewritten: d["rewritten"] == true,
            partial: d["fidelity"]["checked"] == "partial",
        }
    }

    /// "Cleaned up (tidy)", "Replacements", "Cleaned up (polish), rewritten, arrived late",
    /// "Cleaned up (translate:German), rewritten, not checked for meaning".
    pub fn caption(&self) -> String {
        let mut s = if self.mode == "replacements" {
            "Replacements".to_owned()
        } else {
            format!("Cleaned up ({})", self.mode)
        };
        if self.rewritten {
            s.push_str(", rewritten");
        }
        if self.partial {
            s.push_str(", not checked for meaning");
        }
        if !self.delivered {
            s.push_str(", arrived late");
        }
        s
    }
}

/// Reads an opened session's messages a page (at most `history::MAX_PAGE`) at a time, by
/// offset. Built by the backend, which also runs it: the UI only passes it back.
#[derive(Clone)]
pub struct MessagePages {
    read: Arc<PageReader>,
    /// Messages in the conversation.
    pub total: usize,
}

type PageReader = dyn Fn(usize) -> Result<Vec<OpenedMessage>, String> + Send + Sync;

impl MessagePages {
    pub fn new(
        total: usize,
        read: impl Fn(usize) -> Result<Vec<OpenedMessage>, String> + Send + Sync + 'static,
    ) -> MessagePages {
        MessagePages {
            read: Arc::new(read),
            total,
        }
    }

    /// The page that starts at message `start` (a stable code on failure). Blocking I/O:
    /// the backend calls it, never the UI thread.
    pub fn read(&self, start: usize) -> Result<Vec<OpenedMessage>, String> {
        (self.read)(start)
    }
}

impl std::fmt::Debug for MessagePages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessagePages")
            .field("total", &self.total)
            .finish()
    }
}

/// A session read at a pinned leaf (read-only). Only the first page of messages comes with
/// it; the rest are read as the user scrolls.
#[derive(Debug, Clone, Default)]
pub struct OpenedSession {
    pub location: PathBuf,
    pub leaf: Option<String>,
    /// The first page of messages.
    pub messages: Vec<OpenedMessage>,
    /// All messages, by page; `None`: there are none.
    pub pages: Option<MessagePages>,
    /// WAVs of recordings that failed or are incomplete ("Transcribe again").
    pub retranscribable: Vec<PathBuf>,
    /// The WAV assets (names inside `assets/`) of the session's recordings that are there,
    /// in the order they were recorded ("Play recording").
    pub recordings: Vec<String>,
}

/// What the backend tells the UI.
#[derive(Debug)]
pub enum Update {
    Started {
        session: PathBuf,
        origin: AudioOrigin,
        live: Live,
        /// The clean-up mode this recording's words go through, when it asks a model (the
        /// app in front may have its own): the indicator and "Cleaning up (…)" say it.
        cleanup: Option<&'static str>,
        /// The identifier of the app in front when it started (its bundle identifier, or
        /// its X11 class), for "Add a mode for this app" in Settings; `None`: unknown.
        app: Option<String>,
    },
    /// The system is asking the user for microphone access; the recording starts once it
    /// is granted (else `StartFailed` with `capture.permission-denied`).
    WaitingForPermission,
    /// A recording could not start (a stable code); nothing was recorded.
    StartFailed {
        code: String,
    },
    Ended(Box<Finished>),
    /// A file's transcription started; the window shows its progress.
    FileStarted {
        progress: Arc<FileProgress>,
    },
    /// The files waiting their turn, by name, in order.
    FilesWaiting {
        names: Vec<String>,
    },
    /// A file's transcription ended (or could not start).
    FileEnded(Box<FileDone>),
    /// The answer to `Command::CleanUpAgain`: what the clean-up gave (or a stable code).
    CleanedAgain {
        location: PathBuf,
        result: Result<CleanupOutcome, String>,
        /// The delivered text (to copy).
        text: String,
    },
    /// The answer to `Command::UseMyWords` (a stable code when it failed).
    CleanupRemoved {
        location: PathBuf,
        result: Result<(), String>,
    },
    /// The recording is saved and a model is cleaning up its words (at most the deadline;
    /// `Command::CancelCleanup` delivers them as spoken at once).
    CleaningUp,
    /// The outcome of a removal; `None`: the recording ended before the provider answered.
    Removal {
        entry_id: String,
        outcome: Option<RemovalOutcome>,
    },
    Discarded {
        session: PathBuf,
    },
    DiscardFailed {
        code: String,
    },
    /// The answer to `Command::DeleteEmpty`: how many empty sessions were deleted, and how
    /// many could not be.
    EmptyDeleted {
        deleted: usize,
        failed: usize,
    },
    Results(Box<SearchResults>),
    Opened(Box<OpenedSession>),
    /// A page of an opened session (`generation` as asked), or a stable code.
    Page {
        generation: u64,
        start: usize,
        messages: Result<Vec<OpenedMessage>, String>,
    },
    /// The joined user text of an opened session or a result row, for the clipboard (or a
    /// stable code).
    CopyText(Result<String, String>),
    /// The newest sessions' surviving text, newest first (answer to `Command::Recent`).
    Recent(Vec<RecentItem>),
    OpenFailed {
        location: PathBuf,
        code: String,
    },
    Recovered {
        location: PathBuf,
        summary: String,
    },
    RecoverFailed {
        location: PathBuf,
        code: String,
    },
    /// The input devices, by name.
    Devices(Vec<String>),
    SettingsSaved,
    SettingsFailed {
        code: String,
    },
    /// The settings shared between Macs as the sessions folder holds them now (read at
    /// start, before each dictation, after a save or a settled conflict): the window takes
    /// their shared fields (`sync::shared`), the conflict copies waiting for the user and
    /// why the file could not be used, if it could not.
    Shared {
        settings: Box<Settings>,
        conflicts: Vec<String>,
        problem: Option<&'static str>,
    },
    /// Every catalog model and what the folder holds for it.
    Models(Vec<ModelInfo>),
    /// A running download's progress (at most about ten a second per download).
    ModelProgress {
        name: String,
        progress: Progress,
    },
    ModelDownloaded {
        name: String,
    },
    /// A download or deletion failed (a stable code; `models.cancelled` after Cancel).
    ModelFailed {
        name: String,
        code: String,
    },
    ModelDeleted {
        name: String,
    },
    /// The answer to `Command::CheckKey`: `code` is `None` when the provider accepted the
    /// key, else why not (`provider.unauthorized`, `provider.unreachable`, …); `stored` says
    /// whether the key is now in the key store (a key that could not be checked is kept).
    KeyChecked {
        code: Option<String>,
        stored: bool,
    },
    /// The login item as the system has it now, or why it could not be read or changed.
    Autostart(Result<AutostartState, AutostartError>),
    /// What an update check found: asked for (`manual`, "Check for Updates…") or the daily
    /// one. Only a verified feed's newer release is ever `Available`.
    UpdateChecked {
        manual: bool,
        result: Result<crate::update::Checked, crate::update::UpdateError>,
    },
    /// The answer to `Command::ReadClip`: the samples to play, or a stable code.
    Clip {
        generation: u64,
        result: Result<Clip, String>,
    },
}

/// Wakes the window after an update. The context is known only once the first frame runs;
/// until then nothing needs waking (the first frame drains everything).
#[derive(Clone, Default)]
pub struct Waker {
    ctx: Arc<OnceLock<egui::Context>>,
}

impl Waker {
    pub fn new() -> Waker {
        Waker::default()
    }

    /// Remembers the window's context (idempotent).
    pub fn attach(&self, ctx: &egui::Context) {
        let _ = self.ctx.set(ctx.clone());
    }

    pub fn wake(&self) {
        if let Some(ctx) = self.ctx.get() {
            ctx.request_repaint();
        }
    }
}

impl std::fmt::Debug for Waker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waker")
            .field("attached", &self.ctx.get().is_some())
            .finish()
    }
}

/// An engine's halt reason as one sentence for the window (`provider.unauthorized: HTTP 401`
/// → "OpenAI refused the API key — check it in Settings"; `capture.silent-input` → "The
/// microphone sent only silence …"), without a final full stop: callers continue it.
/// A reason without a code reads "The transcription stopped"; its text goes to the details
/// line ([`halt_details`]), never into the sentence.
pub fn halt_sentence(reason: &str) -> String {
    let code = crate::pipeline::halt_code(reason);
    if code.starts_with("provider.") {
        crate::realtime::engine::failure_sentence(code).to_owned()
    } else if code == "engine.halted" {
        "The transcription stopped".to_owned()
    } else {
        problem(code).sentence.trim_end_matches('.').to_owned()
    }
}

/// What the details line under a halt says: the reason's stable code, or the engine's own
/// reason when it has none (fixed text, never content).
pub fn halt_details(reason: &str) -> &str {
    match crate::pipeline::halt_code(reason) {
        "engine.halted" => reason,
        code => code,
    }
}

/// The one action that fixes a [`Problem`]: the button shown beside its sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fix {
    /// "Add an OpenAI key": the welcome card's key field on the Settings page.
    AddKey,
    /// "Check API key": the key field on the Settings page.
    CheckKey,
    /// "Download base.en (141 MiB)": the default on-device model.
    DownloadModel,
    /// "Choose a model": Settings › Recognition.
    ChooseModel,
    /// "Choose microphone": Settings › Microphone.
    ChooseMicrophone,
    /// "Open Microphone Privacy Settings": System Settings › Privacy & Security › Microphone.
    MicrophonePrivacy,
    /// "Open Settings".
    OpenSettings,
}

/// A rejection as the window says it: a sentence a Mac user understands (fixed text per
/// code, never content or a secret) and the action that fixes it. The code itself goes to
/// the details line and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    pub sentence: &'static str,
    pub fix: Option<Fix>,
}

/// The [`Problem`] a stable code stands for (a start refused, a recording halted).
pub fn problem(code: &str) -> Problem {
    let (sentence, fix) = match code {
        "credentials.no-key" | "credentials.empty-key" => (
            "Persyk needs an OpenAI API key to dictate online, or a downloaded model to \
             dictate on this Mac.",
            Some(Fix::AddKey),
        ),
        "credentials.store-unavailable" => (
            "Persyk could not read the API key from the system's key store.",
            Some(Fix::CheckKey),
        ),
        "provider.unauthorized" => ("OpenAI refused the API key.", Some(Fix::CheckKey)),
        "provider.unreachable" => (
            "OpenAI could not be reached. Check the network connection.",
            None,
        ),
        c if c.starts_with("provider.") => ("The transcription service stopped.", None),
        "models.not-downloaded" | "local.model-missing" => (
            "The on-device model is not downloaded yet.",
            Some(Fix::DownloadModel),
        ),
        "models.unsafe-folder" => (
            "The models folder belongs to another user or others may write in it, so its \
             models are not used. Make the folder yours and private (chmod 700).",
            None,
        ),
        "models.damaged"
        | "models.invalid-file"
        | "local.model-invalid"
        | "local.model-unreadable" => (
            "The on-device model file is damaged or is not a Whisper model.",
            Some(Fix::ChooseModel),
        ),
        "local.unavailable" => (
            "This copy of Persyk cannot recognize speech on the device.",
            Some(Fix::AddKey),
        ),
        c if c.starts_with("local.") => ("Recognition on this Mac failed.", None),
        "capture.permission-denied" => (
            "Persyk may not use the microphone. Turn Persyk on in System Settings › Privacy & \
             Security › Microphone, then start again. Nothing was recorded.",
            Some(Fix::MicrophonePrivacy),
        ),
        "capture.silent-input" => (
            "The microphone sent only silence. Check that the right microphone is chosen and \
             that it is not muted.",
            Some(Fix::ChooseMicrophone),
        ),
        "capture.device-not-found" => (
            "The chosen microphone is not connected.",
            Some(Fix::ChooseMicrophone),
        ),
        "capture.no-device" | "capture.no-microphone" => (
            "No microphone was found. Connect one, or choose another.",
            Some(Fix::ChooseMicrophone),
        ),
        "capture.device-lost" | "capture.source-disconnected" => (
            "The microphone stopped working during the recording.",
            Some(Fix::ChooseMicrophone),
        ),
        "capture.max-length" => ("The recording reached its longest possible length.", None),
        c if c.starts_with("capture.") => (
            "The microphone could not be used.",
            Some(Fix::ChooseMicrophone),
        ),
        "app.already-recording" => ("A recording is already running.", None),
        "app.shutting-down" => ("Persyk is quitting.", None),
        c if c.starts_with("settings.") => ("The settings are not valid.", Some(Fix::OpenSettings)),
        c if c.starts_with("store.") => (
            "Persyk could not write to the sessions folder.",
            Some(Fix::OpenSettings),
        ),
        "capture.wav-write" | "capture.backpressure" => (
            "Persyk could not keep up writing the recording to disk.",
            None,
        ),
        _ => ("Something went wrong.", None),
    };
    Problem { sentence, fix }
}
