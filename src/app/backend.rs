//! The backend: a tokio runtime on its own thread that does everything slow for the window —
//! recording, removals, discard, search, opening, recovery and saving settings.
//!
//! ```text
//!  UI ──Command (bounded, try_send)──► backend loop ──spawn──► recording task (pipeline)
//!  UI ◄──Update (bounded) + Waker ─────┘     │                 blocking search / open
//!                                           └─ shutdown signal: stop the recording, drain, exit
//! ```
//!
//! Invariants:
//! - At most one recording runs at a time; a second Start is answered `app.already-recording`.
//! - A microphone recording asks [`Microphone::permission`] before the input opens and
//!   before its session exists: a refusal (`capture.permission-denied`) leaves nothing on
//!   disk, and while the user answers the system prompt the UI is told
//!   (`Update::WaitingForPermission`).
//! - Quitting never abandons a recording: shutdown stops it and waits (bounded) for the
//!   session to be finished, exactly like a user's Stop.
//! - Shutdown has one deadline, fixed when it is first requested
//!   ([`BackendHandle::request_shutdown`]). Every later wait — the backend's own wait for the
//!   recording, [`BackendHandle::shutdown`], `Drop` — ends by that same instant; once it has
//!   passed nothing waits again. The UI polls [`BackendHandle::shutdown_status`] and keeps
//!   painting meanwhile.
//! - With `recognition.engine` local a recording needs no API key: the settings' model is
//!   loaded off the async workers by the first local recording and kept while the settings
//!   name the same file; inference runs on the local engine's own thread.
//! - Discard deletes any session of the configured roots the user confirmed, through the
//!   store's whole-session deletion, never the one recording. A recording that could not be
//!   finished and holds no audio leaves no session: it is deleted as it ends.
//! - A search result is dropped when a newer query has been asked meanwhile.
//! - Model downloads run on blocking threads beside everything else, one per model; quitting
//!   cancels them (their parts stay for the next download to resume).
//! - Search and listing reuse per-file summaries ([`SearchCache`]) between keystrokes; a
//!   changed file is scanned again.

mod files;

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};

use super::autostart::AutostartError;
use super::model::{
    AudioOrigin, CleanupMeta, CleanupOutcome, Command, Finished, Live, MessagePages, OpenedMessage,
    OpenedSession, RecentItem, ResultRow, SearchResults, Update, Waker,
};
use super::permission::{self, MicrophonePermission};
use crate::audio::clip::{ClipRequest, read_clip};
use crate::capture::preroll::WarmInput;
use crate::capture::source::{AudioSource, FileSource};
use crate::pipeline::{self, LiveTap, Recognition, RecordOptions, RemovalRequest, SourceKind};
use crate::session::discover::{RootSpec, discover};
use crate::session::format::{Entry, EntryBody, Role, spoken_text};
use crate::session::history::MAX_PAGE;
use crate::session::search::{self, PageRequest, Query};
use crate::session::search_cache::{self, FileIdentity, SearchCache};
use crate::session::store::Roots;
use crate::session::{self, LeafSelector, SessionHandle, Store, recover};
use crate::settings::{RecognitionEngine, Settings};

/// Rows the search panel asks for.
pub const SEARCH_LIMIT: usize = 50;
/// How long quitting waits for a running recording to finish and be saved.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(30);
/// How long a new recording may take to show its engine.
const START_DEADLINE: Duration = Duration::from_secs(10);
/// The longest stretch "Play" reads into memory (30 minutes are about 86 MB of samples); a
/// longer recording plays its first 30 minutes, and the window says so.
pub const MAX_PLAYBACK_MS: u64 = 30 * 60 * 1000;

/// Opens the audio input for a recording.
pub trait Microphone: Send + Sync {
    /// The permission to ask before [`Microphone::open`]; `None`: none is needed.
    fn permission(&self) -> Option<Arc<dyn MicrophonePermission>> {
        None
    }

    /// The source and how the pipeline treats it. `Err` is a stable code.
    fn open(
        &self,
        device: Option<&str>,
        pre_roll_ms: u32,
    ) -> Result<(Box<dyn AudioSource>, SourceKind), String>;

    /// The input devices the user can choose from, by the names `open` accepts.
    fn devices(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Where the API key lives.
pub trait KeyStore: Send + Sync {
    /// The key, or a stable code (`credentials.no-key`, …).
    fn get(&self) -> Result<String, String>;
    fn set(&self, key: &str) -> Result<(), String>;
    fn delete(&self) -> Result<(), String>;
    /// The key of the clean-up model server at `origin` (`scheme://host[:port]`,
    /// [`crate::endpoint::origin`]), if one is stored for that server (a loopback server
    /// needs none). A key saved for one server is never returned for another.
    fn cleanup_key(&self, _origin: &str) -> Option<String> {
        None
    }
    /// Stores (or, when empty, deletes) the key of the clean-up server at `origin`.
    fn set_cleanup_key(&self, _origin: &str, _key: &str) -> Result<(), String> {
        Err("credentials.store-unavailable".into())
    }
}

/// The OS secret store (Keychain / kernel keyring), then `OPENAI_API_KEY`.
pub struct SystemKeys;

impl KeyStore for SystemKeys {
    fn get(&self) -> Result<String, String> {
        crate::credentials::api_key()
            .map(|(k, _)| k)
            .map_err(|e| e.code().to_owned())
    }
    fn set(&self, key: &str) -> Result<(), String> {
        crate::credentials::store_key(key).map_err(|e| e.code().to_owned())
    }
    fn delete(&self) -> Result<(), String> {
        crate::credentials::delete_key().map_err(|e| e.code().to_owned())
    }
    fn cleanup_key(&self, origin: &str) -> Option<String> {
        crate::credentials::KeyEntry::cleanup_for(origin)
            .stored_key()
            .ok()
            .flatten()
    }
    fn set_cleanup_key(&self, origin: &str, key: &str) -> Result<(), String> {
        let entry = crate::credentials::KeyEntry::cleanup_for(origin);
        if key.is_empty() {
            entry.delete_key()
        } else {
            entry.store_key(key)
        }
        .map_err(|e| e.code().to_owned())?;
        // The one key earlier versions kept for whatever server was typed: nobody's now.
        let _ = crate::credentials::KeyEntry::cleanup_unbound().delete_key();
        Ok(())
    }
}

/// The system's microphone through cpal; with pre-roll the input stays warm between
/// recordings (the first recording after launch or a device change has none).
#[derive(Default)]
pub struct SystemMicrophone {
    warm: Mutex<Option<(Option<String>, u32, WarmInput)>>,
}

impl Microphone for SystemMicrophone {
    fn permission(&self) -> Option<Arc<dyn MicrophonePermission>> {
        Some(super::permission::system())
    }

    fn open(
        &self,
        device: Option<&str>,
        pre_roll_ms: u32,
    ) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        use crate::capture::source::CpalSource;
        let mut warm = self.warm.lock().unwrap_or_else(|p| p.into_inner());
        if pre_roll_ms == 0 {
            if let Some((_, _, w)) = warm.take() {
                w.stop();
            }
            let source = CpalSource::open(device).map_err(|e| e.code().to_owned())?;
            return Ok((Box::new(source), SourceKind::Live));
        }
        let wanted = (device.map(str::to_owned), pre_roll_ms);
        if warm
            .as_ref()
            .is_none_or(|(d, ms, _)| (d.clone(), *ms) != wanted)
        {
            if let Some((_, _, w)) = warm.take() {
                w.stop();
            }
            let source = CpalSource::open(device).map_err(|e| e.code().to_owned())?;
            let input = WarmInput::start(
                Box::new(source),
                Duration::from_millis(u64::from(pre_roll_ms)),
            )
            .map_err(|e| e.code().to_owned())?;
            *warm = Some((wanted.0, wanted.1, input));
        }
        match warm.as_ref() {
            Some((_, _, w)) => Ok((Box::new(w.recording_source()), SourceKind::Live)),
            None => Err("capture.no-device".into()),
        }
    }

    fn devices(&self) -> Vec<String> {
        crate::capture::source::input_devices()
    }
}

/// What the backend needs from the outside world.
pub struct BackendConfig {
    /// The settings file (`None`: defaults, never saved).
    pub settings_path: Option<PathBuf>,
    /// Development run: the default root is `Documents/persyk-dev/sessions`.
    pub dev: bool,
    pub microphone: Arc<dyn Microphone>,
    pub keys: Arc<dyn KeyStore>,
    /// Pace of "Transcribe again" (1.0 = real time; 0 = as fast as the engine takes it).
    pub replay_factor: f64,
    /// The app in front when a dictation starts (for the clean-up modes by app).
    pub frontmost: crate::app::frontmost::Frontmost,
    /// Where "Check for Updates…" and the daily check look.
    pub updates: UpdateConfig,
}

/// The update check's set-up (`crate::update`).
#[derive(Debug, Clone)]
pub struct UpdateConfig {
    /// The feed and its key, or why there is none (`update.no-feed`, `update.off`, …): a
    /// check then answers that code at once, without touching the network.
    pub source: Result<crate::update::Source, crate::update::UpdateError>,
    /// Whether this process may check by itself once a day (and `first_daily_check` after
    /// start) while `updates.daily` is on. Off in tests and development runs unless asked.
    pub daily: bool,
    /// When the first daily check runs after start ([`FIRST_DAILY_CHECK`]; tests shorten it).
    pub first_daily_check: Duration,
}

impl UpdateConfig {
    /// No checks (tests, benches): a manual check says `update.off`.
    pub fn off() -> UpdateConfig {
        UpdateConfig {
            source: Err(crate::update::UpdateError::Off),
            daily: false,
            first_daily_check: FIRST_DAILY_CHECK,
        }
    }
}

/// The daily check's first run after start: late enough not to compete with the start-up
/// and a first dictation.
pub const FIRST_DAILY_CHECK: Duration = Duration::from_secs(60);
/// Between two daily checks.
pub const DAILY_CHECK_EVERY: Duration = Duration::from_secs(24 * 60 * 60);

/// Where a requested shutdown stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownStatus {
    /// No shutdown was requested.
    Running,
    /// Requested; the backend is still finishing (a recording being saved).
    Waiting,
    /// The backend has stopped (a running recording was finished first).
    Finished,
    /// The deadline passed before the backend stopped; nothing waits for it any more.
    TimedOut,
}

/// The UI's side of the backend.
pub struct BackendHandle {
    commands: mpsc::Sender<Command>,
    updates: mpsc::Receiver<Update>,
    shutdown: watch::Sender<Option<Instant>>,
    done: std::sync::mpsc::Receiver<()>,
    /// The shutdown deadline, once requested.
    stop_by: Option<Instant>,
    /// The backend reported that it stopped.
    finished: bool,
    /// Set once the backend stopped: whether the on-device model it had loaded was released
    /// by then (`None`: it loaded none).
    model_released: Arc<Mutex<Option<bool>>>,
}

impl std::fmt::Debug for BackendHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendHandle").finish_non_exhaustive()
    }
}

/// Why a command was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("app.backend-busy: too many requests are waiting; try again")]
    Busy,
    #[error("app.backend-stopped: the background worker has stopped")]
    Stopped,
}

impl BackendHandle {
    /// Starts the backend thread with `settings` as the current settings.
    pub fn spawn(
        config: BackendConfig,
        settings: Settings,
        waker: Waker,
    ) -> std::io::Result<BackendHandle> {
        let (commands, cmd_rx) = mpsc::channel(64);
        let (upd_tx, updates) = mpsc::channel(256);
        let (shutdown, shutdown_rx) = watch::channel(None);
        let (done_tx, done) = std::sync::mpsc::sync_channel(1);
        let model_released = Arc::new(Mutex::new(None));
        let released_slot = model_released.clone();
        let thread = std::thread::Builder::new()
            .name("persyk-backend".into())
            .spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("persyk-worker")
                    .enable_all()
                    .build()
                {
                    let backend = Backend {
                        shutdown: shutdown_rx.clone(),
                        config,
                        settings,
                        store: None,
                        updates: upd_tx,
                        waker,
                        active: None,
                        latest_search: Arc::new(AtomicU64::new(0)),
                        downloads: Arc::new(Mutex::new(HashMap::new())),
                        #[cfg(feature = "local")]
                        local_model: None,
                        model_watches: Arc::default(),
                        search_cache: Arc::new(SearchCache::new()),
                        cleanup_client: None,
                        files: files::Files::default(),
                        shared: crate::sync::shared::SharedState::default(),
                    };
                    let (by, watches) = rt.block_on(backend.run(cmd_rx, shutdown_rx));
                    let watches = || lock(&watches).list.clone();
                    // The on-device models are freed before the backend says it is done, so
                    // whisper.cpp's Metal backend never finds its buffers alive at exit
                    // (issue #36 item 7): the backend dropped its copies and stopped their
                    // recognitions; a recognizer's thread may still be letting go of its
                    // own, within the same deadline.
                    if !watches().is_empty() {
                        let released = || watches().iter().all(ModelWatch::is_released);
                        while !released() && Instant::now() < by {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        *lock(&released_slot) = Some(released());
                    }
                    // Done means saved: blocking tasks still running (a search) are not
                    // waited for.
                    let _ = done_tx.send(());
                    rt.shutdown_background();
                } else {
                    let _ = done_tx.send(());
                }
            })?;
        // Detached: the thread ends on its own once shut down; nothing joins it, so no wait
        // can outlast the shutdown deadline.
        drop(thread);
        Ok(BackendHandle {
            commands,
            updates,
            shutdown,
            done,
            stop_by: None,
            finished: false,
            model_released,
        })
    }

    /// Queues a command without waiting.
    pub fn send(&self, command: Command) -> Result<(), SendError> {
        self.commands.try_send(command).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => SendError::Busy,
            mpsc::error::TrySendError::Closed(_) => SendError::Stopped,
        })
    }

    /// The next update, if one is waiting.
    pub fn try_recv(&mut self) -> Option<Update> {
        self.updates.try_recv().ok()
    }

    /// Asks the backend to stop without waiting: a running recording is stopped and saved
    /// first, until `deadline` from now. A second request keeps the first deadline.
    pub fn request_shutdown(&mut self, deadline: Duration) {
        if self.stop_by.is_none() {
            let by = Instant::now() + deadline;
            self.stop_by = Some(by);
            let _ = self.shutdown.send(Some(by));
        }
    }

    /// Where the shutdown stands (never blocks).
    pub fn shutdown_status(&mut self) -> ShutdownStatus {
        if self.finished || self.done.try_recv().is_ok() {
            self.finished = true;
            return ShutdownStatus::Finished;
        }
        match self.stop_by {
            None => ShutdownStatus::Running,
            Some(by) if Instant::now() >= by => ShutdownStatus::TimedOut,
            Some(_) => ShutdownStatus::Waiting,
        }
    }

    /// After the backend stopped: whether the on-device model it loaded was freed first
    /// (`None`: none was loaded, or it has not stopped yet).
    pub fn model_released(&self) -> Option<bool> {
        *lock(&self.model_released)
    }

    /// Stops the backend (see [`BackendHandle::request_shutdown`]) and waits until it has
    /// stopped or the deadline — the first request's, if there was one — has passed.
    /// Returns whether it stopped in time.
    pub fn shutdown(&mut self, deadline: Duration) -> bool {
        self.request_shutdown(deadline);
        if !self.finished
            && let Some(by) = self.stop_by
        {
            let left = by.saturating_duration_since(Instant::now());
            self.finished = self.done.recv_timeout(left).is_ok();
        }
        self.finished
    }
}

impl Drop for BackendHandle {
    fn drop(&mut self) {
        // Within the deadline of an earlier request, if any: after a timed-out shutdown this
        // does not wait again.
        self.shutdown(SHUTDOWN_DEADLINE);
    }
}

struct Active {
    session: PathBuf,
    stop: watch::Sender<bool>,
    removals: mpsc::Sender<RemovalRequest>,
    task: tokio::task::JoinHandle<Finished>,
    /// Set while the recording's words are being cleaned up (Esc delivers them as spoken).
    cleanup_cancel: Arc<Mutex<Option<crate::cleanup::Canceller>>>,
    /// The user cancelled the recording: no clean-up runs for it.
    cancelled: Arc<AtomicBool>,
}

struct Backend {
    /// Seen by waits inside a command (the microphone permission) so quitting ends them.
    shutdown: watch::Receiver<Option<Instant>>,
    config: BackendConfig,
    settings: Settings,
    store: Option<Arc<Store>>,
    updates: mpsc::Sender<Update>,
    waker: Waker,
    active: Option<Active>,
    latest_search: Arc<AtomicU64>,
    /// The cancel flag of each running model download, by model name.
    downloads: Downloads,
    /// The on-device model, loaded by the first local recording and kept.
    #[cfg(feature = "local")]
    local_model: Option<crate::local::whisper::LocalModel>,
    /// Every on-device model loaded for a recording (the kept one, a provider fallback's
    /// own), watched without being held: quitting stops their recognitions and waits until
    /// each is freed.
    model_watches: Arc<Mutex<Watches>>,
    /// What each session's last validation found, reused between keystrokes.
    search_cache: Arc<SearchCache>,
    /// The clean-up model server's client, kept while the settings name the same server (it
    /// remembers what the server refused).
    cleanup_client: Option<Arc<crate::cleanup::client::Client>>,
    /// Files being transcribed (issue #38): the queue and the one in hand.
    files: files::Files,
    /// The settings shared between Macs as last read (issue #37 item 6).
    shared: crate::sync::shared::SharedState,
}

type Downloads = Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>;

/// A watch on an on-device model (none is ever made without the `local` feature).
#[cfg(feature = "local")]
type ModelWatch = crate::local::whisper::ModelWatch;
#[cfg(not(feature = "local"))]
#[derive(Debug, Clone)]
struct ModelWatch;
#[cfg(not(feature = "local"))]
impl ModelWatch {
    fn is_released(&self) -> bool {
        true
    }
    fn stop_recognition(&self) {}
}

/// The watches of the on-device models loaded, and whether their recognitions were stopped
/// (a model loaded after that, by a provider fallback while the recording finishes, is
/// stopped at once).
#[derive(Debug, Default)]
struct Watches {
    list: Vec<ModelWatch>,
    stopped: bool,
}

impl Watches {
    #[cfg(feature = "local")]
    fn add(&mut self, watch: ModelWatch) {
        if self.stopped {
            watch.stop_recognition();
        }
        self.list.push(watch);
    }

    fn stop_recognition(&mut self) {
        self.stopped = true;
        for watch in &self.list {
            watch.stop_recognition();
        }
    }
}

/// How long before the quit deadline on-device recognition still running is stopped
/// ([`crate::local::whisper::LocalModel::stop_recognition`]; what it had not recognized is
/// a `local.quit` gap): the time left to abandon the inference, save the recording and free
/// the model before the process exits (issue #36 item 7).
pub const QUIT_RECOGNITION_MARGIN: Duration = Duration::from_secs(5);

/// When quitting stops on-device recognition: [`QUIT_RECOGNITION_MARGIN`] before the
/// deadline `by`, or at once when less than that is left.
pub fn stop_recognition_at(now: Instant, by: Instant) -> Instant {
    by.checked_sub(QUIT_RECOGNITION_MARGIN)
        .filter(|at| *at > now)
        .unwrap_or(now)
}

async fn recording_done(active: &mut Option<Active>) -> Finished {
    match active {
        Some(a) => match (&mut a.task).await {
            Ok(f) => f,
            Err(_) => Finished {
                session: a.session.clone(),
                wav: PathBuf::new(),
                transcript: String::new(),
                duration_ms: 0,
                complete: false,
                halted: None,
                error: Some("app.recording-task-failed".into()),
                removed: false,
                cleanup: None,
            },
        },
        None => std::future::pending().await,
    }
}

/// Sends an update and wakes the window.
#[derive(Clone)]
struct Notifier {
    updates: mpsc::Sender<Update>,
    waker: Waker,
}

impl Notifier {
    async fn send(&self, update: Update) {
        // The UI drains every frame; a full queue only waits for the next frame.
        let _ = self.updates.send(update).await;
        self.waker.wake();
    }
}

impl Backend {
    fn notifier(&self) -> Notifier {
        Notifier {
            updates: self.updates.clone(),
            waker: self.waker.clone(),
        }
    }

    /// Runs until shut down; returns the shutdown deadline and a watch on each on-device
    /// model loaded (the backend's own copy is dropped and their recognitions stopped).
    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut shutdown: watch::Receiver<Option<Instant>>,
    ) -> (Instant, Arc<Mutex<Watches>>) {
        // The settings other Macs share, before anything uses the settings.
        self.refresh_shared().await;
        let daily = tokio::time::sleep(self.config.updates.first_daily_check);
        tokio::pin!(daily);
        loop {
            tokio::select! {
                () = &mut daily, if self.config.updates.daily => {
                    daily.as_mut().reset(tokio::time::Instant::now() + DAILY_CHECK_EVERY);
                    if self.settings.updates.daily_enabled() {
                        self.check_updates(false);
                    }
                }
                command = commands.recv() => match command {
                    Some(c) => self.handle(c).await,
                    None => break,
                },
                finished = recording_done(&mut self.active) => {
                    self.active = None;
                    // The file waiting for this dictation goes on.
                    self.hold_file(false);
                    let finished = self.drop_if_empty(finished).await;
                    self.notifier().send(Update::Ended(Box::new(finished))).await;
                }
                (finished, cancelled, progress) = files::file_done(&mut self.files.job) => {
                    self.file_ended(finished, cancelled, progress).await;
                }
                _ = shutdown.changed() => break,
            }
        }
        // Quitting: downloads stop where they are (their parts stay) ...
        for flag in lock_downloads(&self.downloads).values() {
            flag.store(true, Ordering::SeqCst);
        }
        // ... and a running recording is stopped and finished like a user's Stop, by the
        // deadline the UI set (the window closes then whatever happens here).
        let by = (*shutdown.borrow()).unwrap_or_else(|| Instant::now() + SHUTDOWN_DEADLINE);
        // A file in hand stops where it is (its words kept, the rest a gap), beside the
        // dictation: both are told first, then waited for within the same deadline.
        let file = self.stop_files();
        // On-device recognition still running near the deadline stops, so its threads let go
        // of the model in time (issue #36 item 7).
        if let Some(mut active) = self.active.take() {
            let _ = active.stop.send(true);
            let at = |t: Instant| tokio::time::Instant::from_std(t);
            let soft = stop_recognition_at(Instant::now(), by);
            let mut finished = tokio::time::timeout_at(at(soft), &mut active.task).await;
            if finished.is_err() {
                self.stop_recognition();
                finished = tokio::time::timeout_at(at(by), &mut active.task).await;
            }
            if let Ok(Ok(finished)) = finished {
                let _ = self.updates.try_send(Update::Ended(Box::new(finished)));
            }
        }
        if let Some(mut file) = file {
            let at = |t: Instant| tokio::time::Instant::from_std(t);
            let soft = stop_recognition_at(Instant::now(), by);
            if tokio::time::timeout_at(at(soft), &mut file.task)
                .await
                .is_err()
            {
                self.stop_recognition();
                let _ = tokio::time::timeout_at(at(by), &mut file.task).await;
            }
        }
        self.stop_recognition();
        #[cfg(feature = "local")]
        drop(self.local_model.take());
        (by, self.model_watches.clone())
    }

    /// Stops every on-device recognition for good (quitting).
    fn stop_recognition(&self) {
        lock(&self.model_watches).stop_recognition();
    }

    /// Checks the release feed off the runtime's workers; the answer is an
    /// `Update::UpdateChecked`. A failure is logged by its code only.
    fn check_updates(&self, manual: bool) {
        let notify = self.notifier();
        let source = self.config.updates.source.clone();
        tokio::spawn(async move {
            let result = match source {
                Ok(source) => tokio::task::spawn_blocking(move || {
                    source.check(crate::update::CURRENT_VERSION)
                })
                .await
                .unwrap_or(Err(crate::update::UpdateError::Unreachable)),
                Err(e) => Err(e),
            };
            // The outcome in the log: a code, or the version of a verified release.
            match &result {
                Ok(crate::update::Checked::Available(r)) => {
                    eprintln!("persyk: update check: Persyk {} is available", r.version);
                }
                Ok(crate::update::Checked::UpToDate { .. }) => {
                    eprintln!("persyk: update check: up to date");
                }
                Err(e) => eprintln!("persyk: update check: {}", e.code()),
            }
            notify.send(Update::UpdateChecked { manual, result }).await;
        });
    }

    fn store(&mut self) -> Result<Arc<Store>, String> {
        if let Some(s) = &self.store {
            return Ok(s.clone());
        }
        let roots = self
            .settings
            .roots(self.config.dev)
            .map_err(|e| e.code().to_owned())?;
        let mut store = Store::new(roots);
        crate::sync::identify(&mut store);
        let store = Arc::new(store);
        self.store = Some(store.clone());
        Ok(store)
    }

    async fn handle(&mut self, command: Command) {
        let notify = self.notifier();
        match command {
            Command::Start { cleanup } => {
                // A word another Mac added is known to this dictation.
                self.refresh_shared().await;
                // A file being transcribed waits while the dictation has the recognizer.
                self.hold_file(true);
                if let Err(code) = self.start(AudioOrigin::Microphone, cleanup).await {
                    if self.active.is_none() {
                        self.hold_file(false);
                    }
                    // The code only: the window says what it means.
                    eprintln!("persyk: the recording could not start: {code}");
                    notify.send(Update::StartFailed { code }).await;
                }
            }
            Command::TranscribeAgain { wav } => {
                if let Err(code) = self.start(AudioOrigin::File(wav), None).await {
                    eprintln!("persyk: the recording could not start: {code}");
                    notify.send(Update::StartFailed { code }).await;
                }
            }
            Command::TranscribeFiles { files } => self.queue_files(files).await,
            Command::CancelFile => self.cancel_file(),
            Command::Stop => {
                if let Some(a) = &self.active {
                    let _ = a.stop.send(true);
                }
            }
            Command::CleanUpAgain { location } => {
                let recording = self.active.as_ref().map(|a| a.session.clone());
                let store = self.store();
                let plan = self.cleanup_plan(self.settings.cleanup.clone()).await;
                tokio::spawn(async move {
                    let l = location.clone();
                    let done = tokio::task::spawn_blocking(move || {
                        clean_up_again(store?, plan, recording.as_deref(), &l)
                    })
                    .await
                    .unwrap_or_else(|_| Err("app.task-failed".into()));
                    let (result, text) = match done {
                        Ok((outcome, text)) => (Ok(outcome), text),
                        Err(code) => (Err(code), String::new()),
                    };
                    notify
                        .send(Update::CleanedAgain {
                            location,
                            result,
                            text,
                        })
                        .await;
                });
            }
            Command::UseMyWords { location, entry_id } => {
                let recording = self.active.as_ref().map(|a| a.session.clone());
                let store = self.store();
                tokio::spawn(async move {
                    let l = location.clone();
                    let result = tokio::task::spawn_blocking(move || {
                        use_my_words(store?, recording.as_deref(), &l, entry_id)
                    })
                    .await
                    .unwrap_or_else(|_| Err("app.task-failed".into()));
                    notify
                        .send(Update::CleanupRemoved { location, result })
                        .await;
                });
            }
            Command::CancelRecording => {
                if let Some(a) = &self.active {
                    a.cancelled.store(true, Ordering::SeqCst);
                    let _ = a.stop.send(true);
                }
            }
            Command::CancelCleanup => {
                if let Some(a) = &self.active
                    && let Some(c) = lock(&a.cleanup_cancel).as_ref()
                {
                    c.cancel();
                }
            }
            Command::Remove { entry_id } => {
                let Some(a) = &self.active else {
                    notify
                        .send(Update::Removal {
                            entry_id,
                            outcome: None,
                        })
                        .await;
                    return;
                };
                let removals = a.removals.clone();
                tokio::spawn(async move {
                    let (reply, rx) = oneshot::channel();
                    let req = RemovalRequest {
                        entry_id: entry_id.clone(),
                        reply,
                    };
                    let outcome = match removals.send(req).await {
                        Ok(()) => rx.await.ok(),
                        Err(_) => None,
                    };
                    notify.send(Update::Removal { entry_id, outcome }).await;
                });
            }
            Command::Discard { session } => {
                let update = self.discard(&session).await;
                notify.send(update).await;
            }
            Command::DeleteEmpty => {
                let update = match self.store() {
                    Ok(store) => {
                        let settings = self.settings.clone();
                        let dev = self.config.dev;
                        let live = self.active.as_ref().map(|a| a.session.clone());
                        let cache = self.search_cache.clone();
                        tokio::task::spawn_blocking(move || {
                            delete_empty(&settings, dev, &store, live.as_deref(), &cache)
                        })
                        .await
                        .unwrap_or(Update::EmptyDeleted {
                            deleted: 0,
                            failed: 1,
                        })
                    }
                    Err(code) => {
                        eprintln!("persyk: empty sessions: {code}");
                        Update::EmptyDeleted {
                            deleted: 0,
                            failed: 1,
                        }
                    }
                };
                notify.send(update).await;
            }
            Command::Search {
                query,
                generation,
                after,
            } => {
                self.latest_search.store(generation, Ordering::SeqCst);
                let latest = self.latest_search.clone();
                let cache = self.search_cache.clone();
                let settings = self.settings.clone();
                let dev = self.config.dev;
                let store = self.store().ok();
                let live = self.active.as_ref().map(|a| a.session.clone());
                tokio::spawn(async move {
                    let found = tokio::task::spawn_blocking(move || {
                        run_search(
                            &settings,
                            dev,
                            store.as_deref(),
                            live.as_deref(),
                            &query,
                            (generation, after),
                            (&latest, &cache),
                        )
                    })
                    .await;
                    if let Ok(Some(results)) = found {
                        notify.send(Update::Results(Box::new(results))).await;
                    }
                });
            }
            Command::Open { location, leaf } => {
                let cache = self.search_cache.clone();
                tokio::spawn(async move {
                    let l = location.clone();
                    let opened =
                        tokio::task::spawn_blocking(move || open_session_with(&l, leaf, &cache))
                            .await
                            .unwrap_or_else(|_| Err("app.task-failed".into()));
                    notify
                        .send(match opened {
                            Ok(o) => Update::Opened(Box::new(o)),
                            Err(code) => Update::OpenFailed { location, code },
                        })
                        .await;
                });
            }
            Command::ReadPage {
                pages,
                generation,
                start,
            } => {
                tokio::spawn(async move {
                    let messages = tokio::task::spawn_blocking(move || pages.read(start))
                        .await
                        .unwrap_or_else(|_| Err("app.task-failed".into()));
                    notify
                        .send(Update::Page {
                            generation,
                            start,
                            messages,
                        })
                        .await;
                });
            }
            Command::CopyAll { pages, as_spoken } => {
                tokio::spawn(async move {
                    let text = tokio::task::spawn_blocking(move || copy_pages(&pages, as_spoken))
                        .await
                        .unwrap_or_else(|_| Err("app.task-failed".into()));
                    notify.send(Update::CopyText(text)).await;
                });
            }
            Command::CopyRow { location, leaf } => {
                tokio::spawn(async move {
                    let text = tokio::task::spawn_blocking(move || copy_row(&location, leaf))
                        .await
                        .unwrap_or_else(|_| Err("app.task-failed".into()));
                    notify.send(Update::CopyText(text)).await;
                });
            }
            Command::Recent { limit } => {
                let cache = self.search_cache.clone();
                let settings = self.settings.clone();
                let dev = self.config.dev;
                let live = self.active.as_ref().map(|a| a.session.clone());
                tokio::spawn(async move {
                    let found = tokio::task::spawn_blocking(move || {
                        recent(&settings, dev, live.as_deref(), limit, &cache)
                    })
                    .await;
                    if let Ok(items) = found {
                        notify.send(Update::Recent(items)).await;
                    }
                });
            }
            Command::ResolveShared { copy, keep_both } => {
                let update = self.resolve_shared(copy, keep_both).await;
                notify.send(update).await;
            }
            Command::Recover { location } => {
                let live = self.active.as_ref().map(|a| a.session.clone());
                tokio::spawn(async move {
                    let l = location.clone();
                    let result = if live.as_deref() == Some(location.as_path()) {
                        Err("app.session-recording".into())
                    } else {
                        tokio::task::spawn_blocking(move || recover_session(&l))
                            .await
                            .unwrap_or_else(|_| Err("app.task-failed".into()))
                    };
                    notify
                        .send(match result {
                            Ok(summary) => Update::Recovered { location, summary },
                            Err(code) => Update::RecoverFailed { location, code },
                        })
                        .await;
                });
            }
            Command::ListDevices => {
                let mic = self.config.microphone.clone();
                tokio::spawn(async move {
                    let devices = tokio::task::spawn_blocking(move || mic.devices())
                        .await
                        .unwrap_or_default();
                    notify.send(Update::Devices(devices)).await;
                });
            }
            Command::CheckKey { key } => {
                let provider = self.settings.provider().map_err(|e| e.code());
                let keys = self.config.keys.clone();
                tokio::spawn(async move {
                    let update = check_and_keep_key(provider, keys, key).await;
                    notify.send(update).await;
                });
            }
            Command::CheckUpdates => self.check_updates(true),
            Command::ReadClip {
                location,
                clip,
                generation,
            } => {
                tokio::spawn(async move {
                    let result = tokio::task::spawn_blocking(move || {
                        read_clip(&location, &clip, MAX_PLAYBACK_MS).map_err(|e| {
                            // The code only: the window says what it means.
                            eprintln!("persyk: playback: {}", e.code());
                            e.code().to_owned()
                        })
                    })
                    .await
                    .unwrap_or_else(|_| Err("app.task-failed".into()));
                    notify.send(Update::Clip { generation, result }).await;
                });
            }
            Command::Autostart { item, on } => {
                tokio::spawn(async move {
                    let result = tokio::task::spawn_blocking(move || match on {
                        Some(on) => item.set(on),
                        None => item.state(),
                    })
                    .await
                    .unwrap_or(Err(AutostartError::Unsupported));
                    if let Err(e) = &result {
                        eprintln!("persyk: start at login: {e}");
                    }
                    notify.send(Update::Autostart(result)).await;
                });
            }
            Command::SaveSettings {
                settings,
                api_key,
                cleanup_key,
                seen_shared,
            } => {
                let update = self
                    .save_settings(*settings, api_key, cleanup_key, *seen_shared)
                    .await;
                let saved = matches!(update, Update::SettingsSaved);
                notify.send(update).await;
                if saved && self.settings.sync.share_settings {
                    // What the shared file says after the merge, for the window.
                    notify.send(self.shared_update()).await;
                }
            }
            Command::ListModels { store } => {
                tokio::spawn(async move {
                    if let Ok(list) = tokio::task::spawn_blocking(move || store.list()).await {
                        notify.send(Update::Models(list)).await;
                    }
                });
            }
            Command::DownloadModel { store, name } => {
                download_model(store, name, self.downloads.clone(), notify);
            }
            Command::CancelDownload { name } => {
                if let Some(flag) = lock_downloads(&self.downloads).get(&name) {
                    flag.store(true, Ordering::SeqCst);
                }
            }
            Command::DeleteModel { store, name } => {
                let busy = lock_downloads(&self.downloads).contains_key(&name);
                tokio::spawn(async move {
                    let result = if busy {
                        Err("models.busy".to_owned())
                    } else {
                        let s = store.clone();
                        let n = name.clone();
                        tokio::task::spawn_blocking(move || {
                            s.delete(&n).map_err(|e| e.code().to_owned())
                        })
                        .await
                        .unwrap_or_else(|_| Err("app.task-failed".into()))
                    };
                    notify
                        .send(match result {
                            Ok(_) => Update::ModelDeleted { name },
                            Err(code) => Update::ModelFailed { name, code },
                        })
                        .await;
                    if let Ok(list) = tokio::task::spawn_blocking(move || store.list()).await {
                        notify.send(Update::Models(list)).await;
                    }
                });
            }
        }
    }

    /// Starts a recording; `mode`: the clean-up mode asked for (the "Dictate + clean"
    /// shortcut), else the app in front's or the default.
    async fn start(
        &mut self,
        origin: AudioOrigin,
        mode: Option<crate::cleanup::settings::CleanupMode>,
    ) -> Result<(), String> {
        if self.active.is_some() {
            return Err("app.already-recording".into());
        }
        // The app the words are for, read first (before a permission prompt or Persyk's own
        // window can come to the front): its clean-up mode, if it has one. "Transcribe
        // again" is asked for in Persyk's window: the default mode.
        let front = match origin {
            AudioOrigin::Microphone => {
                let frontmost = self.config.frontmost.clone();
                tokio::task::spawn_blocking(move || frontmost())
                    .await
                    .unwrap_or_default()
            }
            AudioOrigin::File(_) => Vec::new(),
        };
        // On the device no key is needed; the model is loaded once and kept.
        let recognition = match self.settings.recognition.engine {
            RecognitionEngine::Local => {
                self.local_recognition(crate::local::dictation::DRAIN_DEADLINE)
                    .await?
            }
            RecognitionEngine::Openai => Recognition::Realtime {
                api_key: self.config.keys.get()?,
                settings: self.settings.provider().map_err(|e| e.code().to_owned())?,
            },
        };
        // The provider's failure never loses the recording: the device recognizes what the
        // provider could not, when a model is installed (loaded only then).
        let fallback = match self.settings.recognition.engine {
            RecognitionEngine::Openai => self.local_fallback(),
            RecognitionEngine::Local => None,
        };
        let store = self.store()?;
        let (source, kind): (Box<dyn AudioSource>, SourceKind) = match &origin {
            AudioOrigin::Microphone => {
                // Before the input opens (and before any session exists): a capture started
                // without permission records zeros and shows no prompt.
                if let Some(p) = self.config.microphone.permission() {
                    let notify = self.notifier();
                    let waiting = || {
                        let _ = notify.updates.try_send(Update::WaitingForPermission);
                        notify.waker.wake();
                    };
                    let mut quitting = self.shutdown.clone();
                    tokio::select! {
                        access = permission::ensure_access(&*p, waiting) => {
                            access.map_err(|e| e.code().to_owned())?;
                        }
                        _ = quitting.wait_for(Option::is_some) => {
                            return Err("app.shutting-down".into());
                        }
                    }
                }
                let mic = self.config.microphone.clone();
                let device = self.settings.capture.device.clone();
                let pre_roll = self.settings.capture.pre_roll_ms.min(500);
                tokio::task::spawn_blocking(move || mic.open(device.as_deref(), pre_roll))
                    .await
                    .map_err(|_| "app.task-failed".to_owned())??
            }
            AudioOrigin::File(wav) => {
                let source = FileSource::open(wav, self.config.replay_factor)
                    .map_err(|e| e.code().to_owned())?;
                (Box::new(source), SourceKind::Replay)
            }
        };
        let store2 = store.clone();
        // Which Mac records it, said in the session before the recording starts.
        let device = crate::sync::Device::this(&self.settings)
            .inspect_err(|e| eprintln!("persyk: {}: the session will not name this Mac", e.code()))
            .ok();
        let (handle, continuation) = tokio::task::spawn_blocking(move || {
            let handle = store2.create_session()?;
            let mut continuation = handle.continuation(&LeafSelector::Default)?;
            if let Some(device) = device {
                // The marker that keeps other Macs from writing to it while it records.
                crate::sync::claim_recording(&mut continuation, &device)?;
                continuation.append_one(device.entry())?;
            }
            Ok::<_, crate::session::StoreError>((handle, continuation))
        })
        .await
        .map_err(|_| "app.task-failed".to_owned())?
        .map_err(|e| e.code().to_owned())?;
        let session = handle.dir().to_path_buf();
        let cleanup_settings = match mode {
            Some(mode) => self.settings.cleanup.with_mode(mode),
            None => self.settings.cleanup.for_app(&front).0,
        };
        let cleanup_mode = cleanup_settings.mode;
        let cleanup = self.cleanup_plan(cleanup_settings).await;
        let cleanup_cancel = Arc::new(Mutex::new(None));
        let cancelled = Arc::new(AtomicBool::new(false));
        let cancelled_in_task = cancelled.clone();
        let (stop, stop_rx) = watch::channel(false);
        let (view_tx, view_rx) = oneshot::channel();
        let (removals, removals_rx) = mpsc::channel(16);
        let level = Arc::new(AtomicU32::new(0));
        let tap = LiveTap {
            view: view_tx,
            level: level.clone(),
            removals: removals_rx,
        };
        let dir = session.clone();
        let notify = self.notifier();
        let cancel_slot = cleanup_cancel.clone();
        let task = tokio::spawn(async move {
            let options = RecordOptions {
                tap: Some(tap),
                fallback,
                ..RecordOptions::default()
            };
            let result =
                pipeline::record_to(continuation, recognition, source, kind, stop_rx, options)
                    .await;
            let sources = spoken_sources(&result);
            let mut finished = finished_from(dir, result);
            if finished.error.is_none()
                && !sources.is_empty()
                && !cancelled_in_task.load(Ordering::SeqCst)
            {
                finished.cleanup =
                    clean_up(cleanup, handle, sources, cancel_slot, notify, &mut finished).await;
            }
            finished
        });
        self.active = Some(Active {
            session: session.clone(),
            stop,
            removals,
            task,
            cleanup_cancel,
            cancelled,
        });
        // The engine shows itself right after `recording.started` is durable; if the pipeline
        // failed before that, its end (with the code) arrives as `Ended`.
        if let Ok(Ok(view)) = tokio::time::timeout(START_DEADLINE, view_rx).await {
            self.notifier()
                .send(Update::Started {
                    session,
                    origin,
                    live: Live { view, level },
                    cleanup: cleanup_mode.uses_model().then(|| cleanup_mode.label()),
                    app: front.last().cloned(),
                })
                .await;
        }
        Ok(())
    }

    /// The on-device recognizer of the settings' model: the model is loaded (off the async
    /// workers) the first time and kept while the settings name the same file. `drain` is
    /// its stop's drain deadline (a dictation's, or a file's).
    #[cfg(feature = "local")]
    async fn local_recognition(
        &mut self,
        drain: std::time::Duration,
    ) -> Result<Recognition, String> {
        use crate::local::whisper::{self, LocalModel};
        let choice = self
            .settings
            .recognition
            .local_model()
            .map_err(|e| e.code().to_owned())?;
        let path = crate::local::model_path(&choice).map_err(|e| e.code().to_owned())?;
        let kept = self.local_model.clone().filter(|m| m.path() == path);
        let model = match kept {
            Some(m) => m,
            None => {
                let m = tokio::task::spawn_blocking(move || LocalModel::load(&path))
                    .await
                    .map_err(|_| "app.task-failed".to_owned())?
                    .map_err(|e| e.code().to_owned())?;
                lock(&self.model_watches).add(m.watch());
                self.local_model = Some(m.clone());
                m
            }
        };
        // Threads, language, translation, and the "Words Persyk should know" when asked.
        let options = self
            .settings
            .recognition
            .local_options(&self.settings.provider.keywords, model.is_multilingual())
            .map_err(|e| e.code().to_owned())?;
        let setup = tokio::task::spawn_blocking(move || whisper::setup(&model, options, drain))
            .await
            .map_err(|_| "app.task-failed".to_owned())?
            .map_err(|e| e.code().to_owned())?;
        Ok(Recognition::Local(setup))
    }

    /// The on-device fallback of a Realtime recording: the settings' model, when it resolves
    /// to a file now; loaded (or the kept one reused) only if the provider fails.
    #[cfg(feature = "local")]
    fn local_fallback(&self) -> Option<crate::pipeline::Fallback> {
        use crate::local::whisper::{self, LocalModel};
        let choice = self.settings.recognition.local_model().ok()?;
        let path = crate::local::model_path(&choice).ok()?;
        let kept = self.local_model.clone().filter(|m| m.path() == path);
        let recognition = self.settings.recognition.clone();
        let keywords = self.settings.provider.keywords.clone();
        let watches = self.model_watches.clone();
        Some(Box::new(move || {
            let model = match kept {
                Some(m) => m,
                None => {
                    let m = LocalModel::load(&path).ok()?;
                    lock(&watches).add(m.watch());
                    m
                }
            };
            let options = recognition
                .local_options(&keywords, model.is_multilingual())
                .ok()?;
            whisper::setup(&model, options, crate::local::dictation::DRAIN_DEADLINE).ok()
        }))
    }

    #[cfg(not(feature = "local"))]
    fn local_fallback(&self) -> Option<crate::pipeline::Fallback> {
        None
    }

    #[cfg(not(feature = "local"))]
    async fn local_recognition(
        &mut self,
        _drain: std::time::Duration,
    ) -> Result<Recognition, String> {
        Err(crate::local::LocalError::Unavailable.code().to_owned())
    }

    /// The clean-up of a recording, from `settings` (the clean-up settings, with the mode of
    /// the app in front applied; the key saved for the settings' server — its origin — read
    /// from the secret store off the async workers).
    async fn cleanup_plan(
        &mut self,
        settings: crate::cleanup::settings::CleanupSettings,
    ) -> CleanupPlan {
        if !settings.is_active() {
            return CleanupPlan::Off;
        }
        let mode = settings.mode.label();
        let keys = self.config.keys.clone();
        let origin = crate::endpoint::origin(&settings.base_url);
        let key = match origin {
            Some(origin) if settings.mode.uses_model() => {
                tokio::task::spawn_blocking(move || keys.cleanup_key(&origin))
                    .await
                    .ok()
                    .flatten()
            }
            _ => None,
        };
        match settings.cleaner(self.cleanup_client.clone(), key) {
            Ok(None) => CleanupPlan::Off,
            Ok(Some(cleaner)) => {
                self.cleanup_client = cleaner.model.as_ref().map(|m| m.client.clone());
                CleanupPlan::On { mode, cleaner }
            }
            Err(e) => CleanupPlan::Broken {
                mode,
                code: e.code(),
            },
        }
    }

    /// A recording that failed (could not be finished, or halted) without recording any
    /// audio leaves no session behind (a failed start is not history): it is deleted, and
    /// `removed` says so. A recording the user stopped at once is kept.
    async fn drop_if_empty(&mut self, mut finished: Finished) -> Finished {
        let failed = finished.error.is_some() || finished.halted.is_some();
        if !failed || finished.duration_ms > 0 || !finished.transcript.is_empty() {
            return finished;
        }
        match self.discard(&finished.session).await {
            Update::DiscardFailed { code } => {
                eprintln!("persyk: an empty recording's session was kept: {code}");
            }
            _ => finished.removed = true,
        }
        finished
    }

    async fn discard(&mut self, session: &Path) -> Update {
        let failed = |code: &str| Update::DiscardFailed { code: code.into() };
        if self.active.as_ref().is_some_and(|a| a.session == session) {
            return failed("app.session-recording");
        }
        let store = match self.store() {
            Ok(s) => s,
            Err(code) => return failed(&code),
        };
        let path = session.to_path_buf();
        let result = tokio::task::spawn_blocking(move || {
            let handle = store.open_path(&path)?;
            store.delete(&handle)
        })
        .await;
        match result {
            Ok(Ok(())) => Update::Discarded {
                session: session.to_path_buf(),
            },
            Ok(Err(e)) => failed(e.code()),
            Err(_) => failed("app.task-failed"),
        }
    }

    async fn save_settings(
        &mut self,
        settings: Settings,
        api_key: Option<String>,
        cleanup_key: Option<String>,
        seen_shared: crate::sync::shared::SharedSettings,
    ) -> Update {
        let failed = |code: &str| Update::SettingsFailed { code: code.into() };
        if let Err(e) = settings.validate() {
            return failed(e.code());
        }
        // A model file the user pointed to must be one whisper.cpp can load.
        if let Ok(crate::local::models::LocalModelChoice::File(path)) =
            settings.recognition.local_model()
        {
            match tokio::task::spawn_blocking(move || crate::local::check_model_file(&path)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return failed(e.code()),
                Err(_) => return failed("app.task-failed"),
            }
        }
        if let Some(key) = api_key {
            let keys = self.config.keys.clone();
            let key = key.trim().to_owned();
            let stored = tokio::task::spawn_blocking(move || {
                if key.is_empty() {
                    keys.delete()
                } else {
                    keys.set(&key)
                }
            })
            .await;
            match stored {
                Ok(Ok(())) => {}
                Ok(Err(code)) => return failed(&code),
                Err(_) => return failed("app.task-failed"),
            }
        }
        if let Some(key) = cleanup_key {
            // The key belongs to the server these settings name, and to no other.
            let Some(origin) = crate::endpoint::origin(&settings.cleanup.base_url) else {
                return failed("cleanup.no-server");
            };
            let keys = self.config.keys.clone();
            let key = key.trim().to_owned();
            match tokio::task::spawn_blocking(move || keys.set_cleanup_key(&origin, &key)).await {
                Ok(Ok(())) => {}
                Ok(Err(code)) => return failed(&code),
                Err(_) => return failed("app.task-failed"),
            }
            // A new key: the next clean-up makes a client with it.
            self.cleanup_client = None;
        }
        if let Some(path) = self.config.settings_path.clone() {
            let s = settings.clone();
            match tokio::task::spawn_blocking(move || s.save(&path)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return failed(e.code()),
                Err(_) => return failed("app.task-failed"),
            }
        }
        if settings.sessions != self.settings.sessions {
            // New roots: the next recording and search use a store for them.
            self.store = None;
        }
        let mut settings = settings;
        if settings.sync.share_settings {
            // Only the shared fields the user changed are written; the others stay as
            // another Mac may have left them (sync::shared::merge3). Sharing just turned
            // on: no base, the two Macs' lists are joined.
            let base = self.settings.sync.share_settings.then_some(seen_shared);
            let dev = self.config.dev;
            let mut s = settings.clone();
            let saved = tokio::task::spawn_blocking(move || {
                let result = crate::sync::shared::save_from(&mut s, base.as_ref(), dev)?;
                let conflicts = crate::sync::shared::location(&s, dev)
                    .map(|dir| crate::sync::shared::conflicts(&dir))
                    .unwrap_or_default();
                Ok::<_, crate::sync::SyncError>((s, result, conflicts))
            })
            .await;
            match saved {
                Ok(Ok((s, result, conflicts))) => {
                    settings = s;
                    if result.is_some() {
                        self.shared.base = result;
                    }
                    self.shared.conflicts = conflicts;
                    self.shared.problem = None;
                }
                Ok(Err(e)) => {
                    self.settings = settings;
                    return failed(e.code());
                }
                Err(_) => return failed("app.task-failed"),
            }
        } else {
            self.shared = crate::sync::shared::SharedState::default();
        }
        self.settings = settings;
        Update::SettingsSaved
    }
}

impl Backend {
    /// Reads the settings other Macs share (when sharing is on) into this Mac's, and tells
    /// the window when anything about them changed. Never waits for a sync engine's
    /// download (`sync::shared::read`).
    async fn refresh_shared(&mut self) {
        if !self.settings.sync.share_settings {
            return;
        }
        let mut settings = self.settings.clone();
        let dev = self.config.dev;
        let Ok((settings, state)) = tokio::task::spawn_blocking(move || {
            let state = crate::sync::shared::load_into(&mut settings, dev);
            (settings, state)
        })
        .await
        else {
            return;
        };
        use crate::sync::shared::SharedSettings;
        let changed = SharedSettings::of(&settings) != SharedSettings::of(&self.settings)
            || state.conflicts != self.shared.conflicts
            || state.problem != self.shared.problem;
        self.settings = settings;
        let base = state.base.clone().or_else(|| self.shared.base.take());
        self.shared = crate::sync::shared::SharedState { base, ..state };
        if changed {
            self.notifier().send(self.shared_update()).await;
        }
    }

    fn shared_update(&self) -> Update {
        Update::Shared {
            settings: Box::new(self.settings.clone()),
            conflicts: self
                .shared
                .conflicts
                .iter()
                .map(|(name, _)| name.clone())
                .collect(),
            problem: self.shared.problem,
        }
    }

    /// Settles a conflict copy of the shared settings as the user chose.
    async fn resolve_shared(&mut self, copy: String, keep_both: bool) -> Update {
        use crate::sync::shared::{self, Resolve};
        let Some(dir) = shared::location(&self.settings, self.config.dev) else {
            return Update::SettingsFailed {
                code: "sync.not-sharing".into(),
            };
        };
        let how = if keep_both {
            Resolve::KeepBoth
        } else {
            Resolve::UseTheirs
        };
        let result = tokio::task::spawn_blocking(move || {
            shared::resolve(&dir, &copy, how).map(|r| (r, shared::conflicts(&dir)))
        })
        .await;
        match result {
            Ok(Ok((settled, conflicts))) => {
                settled.apply(&mut self.settings);
                self.shared.base = Some(settled);
                self.shared.conflicts = conflicts;
                self.shared.problem = None;
                self.shared_update()
            }
            Ok(Err(e)) => Update::SettingsFailed {
                code: e.code().into(),
            },
            Err(_) => Update::SettingsFailed {
                code: "app.task-failed".into(),
            },
        }
    }
}

/// Checks `key` with the provider, then keeps it in the key store unless the provider
/// refused it: a key that could not be checked (no network) is kept, so the user is not
/// asked again once the network is back. Neither the key nor the provider's answer text is
/// logged or shown; only the stable code.
async fn check_and_keep_key(
    provider: Result<crate::realtime::protocol::Settings, &'static str>,
    keys: Arc<dyn KeyStore>,
    key: String,
) -> Update {
    let key = key.trim().to_owned();
    if key.is_empty() {
        return Update::KeyChecked {
            code: Some("credentials.empty-key".into()),
            stored: false,
        };
    }
    let checked = match &provider {
        Ok(p) => crate::realtime::engine::check_key(p, &key).await,
        Err(code) => Err(*code),
    };
    let keep = match checked {
        Ok(()) => true,
        Err(code) => code == crate::realtime::engine::UNREACHABLE,
    };
    let mut code = checked.err().map(str::to_owned);
    let mut stored = false;
    if keep {
        match tokio::task::spawn_blocking(move || keys.set(&key)).await {
            Ok(Ok(())) => stored = true,
            Ok(Err(c)) => code = Some(c),
            Err(_) => code = Some("app.task-failed".into()),
        }
    }
    Update::KeyChecked { code, stored }
}

fn lock_downloads(
    d: &Mutex<HashMap<String, Arc<AtomicBool>>>,
) -> std::sync::MutexGuard<'_, HashMap<String, Arc<AtomicBool>>> {
    d.lock().unwrap_or_else(|p| p.into_inner())
}

/// How often a download reports progress to the window.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Starts downloading `name` on a blocking thread unless it is downloading already.
fn download_model(
    store: crate::local::models::ModelStore,
    name: String,
    downloads: Downloads,
    notify: Notifier,
) {
    let Some(model) = store.find(&name) else {
        tokio::spawn(async move {
            notify
                .send(Update::ModelFailed {
                    name,
                    code: "models.unknown".into(),
                })
                .await;
        });
        return;
    };
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let mut running = lock_downloads(&downloads);
        if running.contains_key(&name) {
            return;
        }
        running.insert(name.clone(), cancel.clone());
    }
    tokio::task::spawn_blocking(move || {
        let mut last: Option<Instant> = None;
        let result = store.download(model, &cancel, &mut |progress| {
            let done = progress.done_bytes >= progress.total_bytes;
            if done || last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
                last = Some(Instant::now());
                // A full queue drops a progress report; the next one says more.
                let _ = notify.updates.try_send(Update::ModelProgress {
                    name: name.clone(),
                    progress,
                });
                notify.waker.wake();
            }
        });
        lock_downloads(&downloads).remove(&name);
        let update = match result {
            Ok(_) => Update::ModelDownloaded { name },
            Err(e) => Update::ModelFailed {
                name,
                code: e.code().to_owned(),
            },
        };
        let _ = notify.updates.blocking_send(update);
        let _ = notify.updates.blocking_send(Update::Models(store.list()));
        notify.waker.wake();
    });
}

/// The surviving user messages a recording committed, in order: what a clean-up starts from.
fn spoken_sources(
    result: &Result<crate::pipeline::Transcription, crate::pipeline::CaptureError>,
) -> Vec<crate::cleanup::Source> {
    let Ok(t) = result else {
        return Vec::new();
    };
    t.report
        .messages
        .iter()
        .filter(|m| m.speaker == crate::recognize::Speaker::User && !m.removed)
        .filter(|m| !m.text.trim().is_empty())
        .map(|m| crate::cleanup::Source {
            id: m.entry_id.clone(),
            text: m.text.clone(),
        })
        .collect()
}

/// What the clean-up settings make of the next recording's words.
enum CleanupPlan {
    /// Nothing is set up.
    Off,
    /// The settings cannot be used (a stable code): the words are delivered as spoken and
    /// the window says why.
    Broken {
        mode: &'static str,
        code: &'static str,
    },
    On {
        mode: &'static str,
        cleaner: crate::cleanup::Cleaner,
    },
}

/// Runs the clean-up of a finished recording's words (off the async workers): replacements
/// at once, a model within its deadline; sets the delivered text in `finished`.
async fn clean_up(
    plan: CleanupPlan,
    handle: SessionHandle,
    sources: Vec<crate::cleanup::Source>,
    cancel_slot: Arc<Mutex<Option<crate::cleanup::Canceller>>>,
    notify: Notifier,
    finished: &mut Finished,
) -> Option<CleanupOutcome> {
    let spoken = finished.transcript.clone();
    let (mode, cleaner) = match plan {
        CleanupPlan::Off => return None,
        CleanupPlan::Broken { mode, code } => {
            return Some(CleanupOutcome {
                chosen: crate::cleanup::Chosen::Spoken,
                mode,
                reason: Some(code),
                spoken,
            });
        }
        CleanupPlan::On { mode, cleaner } => (mode, cleaner),
    };
    let late_notify = notify.clone();
    let job = tokio::task::spawn_blocking(move || {
        cleaner.start(
            &handle,
            &sources,
            Some(Box::new(move |_late| {
                // A late clean-up is in the session now: history shows it when asked.
                late_notify.waker.wake();
            })),
        )
    })
    .await
    .ok()?;
    if job.asks_a_model() {
        *lock(&cancel_slot) = Some(job.canceller());
        notify.send(Update::CleaningUp).await;
    }
    let cleaned = tokio::task::spawn_blocking(move || job.wait()).await.ok();
    *lock(&cancel_slot) = None;
    let cleaned = cleaned?;
    if let Some(code) = cleaned.store_error {
        eprintln!("persyk: the clean-up was not saved: {code}");
    }
    if let Some(code) = cleaned.reason {
        eprintln!("persyk: delivered as spoken: {code}");
    }
    finished.transcript = cleaned.text;
    Some(CleanupOutcome {
        chosen: cleaned.chosen,
        mode,
        reason: cleaned.reason,
        spoken,
    })
}

/// "Clean up again": the session's surviving spoken words (at its default leaf) through the
/// clean-up set up now; the result is stored at the tip like a dictation's.
fn clean_up_again(
    store: Arc<Store>,
    plan: CleanupPlan,
    recording: Option<&Path>,
    location: &Path,
) -> Result<(CleanupOutcome, String), String> {
    if recording == Some(location) {
        return Err("app.session-recording".into());
    }
    let (mode, cleaner) = match plan {
        CleanupPlan::Off => return Err("cleanup.off".into()),
        CleanupPlan::Broken { code, .. } => return Err(code.into()),
        CleanupPlan::On { mode, cleaner } => (mode, cleaner),
    };
    let handle = store.open_path(location).map_err(|e| e.code().to_owned())?;
    let mut sources = Vec::new();
    if let Some(pages) = open_session(location, None)?.pages {
        let mut start = 0;
        while start < pages.total {
            let page = pages.read(start)?;
            if page.is_empty() {
                break;
            }
            start += page.len();
            sources.extend(
                page.into_iter()
                    .filter(|m| m.role == "user" && !m.text.trim().is_empty())
                    .map(|m| crate::cleanup::Source {
                        id: m.id,
                        text: m.text,
                    }),
            );
        }
    }
    if sources.is_empty() {
        return Err("cleanup.no-words".into());
    }
    let spoken = sources
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let cleaned = cleaner.start(&handle, &sources, None).wait();
    if let Some(code) = cleaned.store_error {
        return Err(code.into());
    }
    Ok((
        CleanupOutcome {
            chosen: cleaned.chosen,
            mode,
            reason: cleaned.reason,
            spoken,
        },
        cleaned.text,
    ))
}

/// Removes a stored clean-up from the conversation: a `message.removed` for it at the
/// session's tip, through the store (locked, durable). Never the session being recorded.
fn use_my_words(
    store: Arc<Store>,
    recording: Option<&Path>,
    location: &Path,
    entry_id: String,
) -> Result<(), String> {
    if recording == Some(location) {
        return Err("app.session-recording".into());
    }
    let handle = store.open_path(location).map_err(|e| e.code().to_owned())?;
    let is_cleanup = handle.with_index(|i| {
        i.position(&entry_id)
            .is_some_and(|p| i.entry(p).kind() == session::EntryKind::CustomMessage)
    });
    if !is_cleanup {
        return Err("app.not-a-cleanup".into());
    }
    crate::cleanup::record::append_at_tip(
        &handle,
        EntryBody::MessageRemoved(crate::session::format::MessageRemoved {
            target_id: entry_id,
        }),
    )
    .map(drop)
    .map_err(|e| e.code().to_owned())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn finished_from(
    session: PathBuf,
    result: Result<crate::pipeline::Transcription, crate::pipeline::CaptureError>,
) -> Finished {
    match result {
        Ok(t) => Finished {
            wav: session
                .join(session::ASSETS_DIR)
                .join(format!("{}.wav", t.recording_id)),
            session,
            transcript: t.report.transcript().join(" "),
            duration_ms: t.duration_ms,
            complete: t.report.complete && t.halted.is_none(),
            halted: t.halted.or(t.report.halted),
            error: None,
            removed: false,
            cleanup: None,
        },
        Err(e) => Finished {
            session,
            wav: PathBuf::new(),
            transcript: String::new(),
            duration_ms: 0,
            complete: false,
            halted: None,
            error: Some(e.code().to_owned()),
            removed: false,
            cleanup: None,
        },
    }
}

/// One search (or listing) over the configured roots; `None` when a newer query superseded
/// it before it finished.
fn run_search(
    settings: &Settings,
    dev: bool,
    store: Option<&Store>,
    live: Option<&Path>,
    query: &str,
    (generation, after): (u64, Option<search::Cursor>),
    (latest, cache): (&AtomicU64, &SearchCache),
) -> Option<SearchResults> {
    let stale = || latest.load(Ordering::SeqCst) != generation;
    let mut results = SearchResults {
        generation,
        continued: after.is_some(),
        ..SearchResults::default()
    };
    let roots = match settings.roots(dev) {
        Ok(r) => r,
        Err(e) => {
            results.root_diagnostics.push(e.code().to_owned());
            return Some(results);
        }
    };
    let specs = RootSpec::from_roots(&roots, settings.sessions.directory.is_none());
    if stale() {
        return None;
    }
    let discovery = discover(&specs);
    results.root_diagnostics = discovery
        .root_diagnostics
        .iter()
        .map(|d| d.to_string())
        .collect();
    if stale() {
        return None;
    }
    let request = PageRequest {
        limit: SEARCH_LIMIT,
        cursor: after,
    };
    let query = query.trim();
    let page = if query.is_empty() {
        search_cache::list(&discovery, &request, cache)
    } else {
        match Query::new(query) {
            Ok(q) => search_cache::search(&discovery, &q, &request, cache),
            Err(e) => {
                results.error = Some(e.code());
                return Some(results);
            }
        }
    };
    if stale() {
        return None;
    }
    results.next = page.next.clone();
    results.skipped = page
        .skipped
        .iter()
        .map(|s| (s.location.clone(), s.code))
        .collect();
    // Rows say which Mac recorded a session only when it is not this one.
    let this_mac = crate::sync::device_name(settings);
    results.rows = page
        .rows
        .into_iter()
        .map(|r| {
            // Another Mac recording it now: its growing tail is not damage.
            let recording_on = crate::session::presence::recording_elsewhere(
                &r.location,
                store.and_then(Store::device),
                time::OffsetDateTime::now_utc(),
            );
            let needs_recovery = recording_on.is_none()
                && (r.diagnostic == Some("file.incomplete-tail")
                    || (live != Some(r.location.as_path())
                        && store.is_some_and(|s| has_unfinished_recording(s, &r.location))));
            ResultRow {
                location: r.location,
                session_id: r.session_id,
                leaf: r.leaf_id,
                label: r.label,
                created: r.created,
                duration_ms: r.duration_ms,
                excerpt: r.excerpt,
                duplicate_of: r.duplicate_of,
                diagnostic: r.diagnostic,
                needs_recovery,
                from_file: r.from_file,
                other_mac: r.recorded_on.filter(|name| *name != this_mac),
                copies: r.copies,
                syncing: r.syncing,
                recording_on,
            }
        })
        .collect();
    Some(results)
}

fn has_unfinished_recording(store: &Store, location: &Path) -> bool {
    store
        .open_path(location)
        .ok()
        .and_then(|h: SessionHandle| recover::unfinished_recordings(&h).ok())
        .is_some_and(|u| !u.is_empty())
}

/// The user text of every page, joined by spaces: one page in memory at a time besides the
/// text itself.
fn copy_all(pages: &MessagePages) -> Result<String, String> {
    copy_pages(pages, false)
}

/// The text of an opened session, read page by page: what was delivered — each delivered
/// clean-up in place of the spoken messages it was made from — or, `as_spoken`, the user's
/// words alone.
fn copy_pages(pages: &MessagePages, as_spoken: bool) -> Result<String, String> {
    let mut parts: Vec<OpenedMessage> = Vec::new();
    let mut replaced = std::collections::HashSet::new();
    let mut start = 0;
    while start < pages.total {
        let page = pages.read(start)?;
        if page.is_empty() {
            break;
        }
        start += page.len();
        for m in page {
            match (&m.cleanup, m.role) {
                (_, "user") => parts.push(m),
                (Some(c), _) if c.delivered && !as_spoken => {
                    // A later clean-up of the same words ("Clean up again") takes the place
                    // of the earlier one.
                    parts.retain(|p| {
                        p.cleanup
                            .as_ref()
                            .is_none_or(|e| !e.sources.iter().any(|s| c.sources.contains(s)))
                    });
                    replaced.extend(c.sources.iter().cloned());
                    parts.push(m);
                }
                _ => {}
            }
        }
    }
    let texts: Vec<&str> = parts
        .iter()
        .filter(|m| m.role != "user" || !replaced.contains(&m.id))
        .map(|m| m.text.as_str())
        .collect();
    Ok(texts.join(" "))
}

/// A result row's surviving user text at its leaf, read like "Copy all" reads an opened
/// session (page by page), without keeping the session open.
fn copy_row(location: &Path, leaf: Option<String>) -> Result<String, String> {
    match open_session(location, leaf)?.pages {
        Some(pages) => copy_all(&pages),
        None => Ok(String::new()),
    }
}

/// Deletes every listed session that holds no message and no recorded audio (never the one
/// recording, never a duplicate or a damaged one), through the store's whole-session
/// deletion.
fn delete_empty(
    settings: &Settings,
    dev: bool,
    store: &Store,
    live: Option<&Path>,
    cache: &SearchCache,
) -> Update {
    let (mut deleted, mut failed) = (0, 0);
    let Ok(roots) = settings.roots(dev) else {
        return Update::EmptyDeleted { deleted, failed: 1 };
    };
    let specs = RootSpec::from_roots(&roots, settings.sessions.directory.is_none());
    let discovery = discover(&specs);
    let mut cursor = None;
    let mut empty = Vec::new();
    loop {
        let request = PageRequest {
            limit: 500,
            cursor: cursor.take(),
        };
        let page = search_cache::list(&discovery, &request, cache);
        empty.extend(
            page.rows
                .into_iter()
                .filter(|r| {
                    live != Some(r.location.as_path())
                        && r.duplicate_of.is_none()
                        && r.diagnostic.is_none()
                        && r.duration_ms.unwrap_or(0) == 0
                })
                .map(|r| r.location),
        );
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    for location in empty {
        // No message at all at the default leaf (read, not guessed from the listing).
        let Ok(opened) = open_session(&location, None) else {
            continue;
        };
        if opened.pages.is_some() {
            continue;
        }
        match store.open_path(&location).and_then(|h| store.delete(&h)) {
            Ok(()) => deleted += 1,
            Err(e) => {
                eprintln!("persyk: an empty session was not deleted: {}", e.code());
                failed += 1;
            }
        }
    }
    Update::EmptyDeleted { deleted, failed }
}

/// Sessions looked at for "Recent": the newest that have any text, up to `limit`.
const RECENT_SCAN: usize = 20;

/// The surviving text of the newest sessions (newest first) that have any: at most `limit`
/// of them, looking at no more than [`RECENT_SCAN`] listed sessions. The running recording's
/// session and unreadable sessions are left out.
fn recent(
    settings: &Settings,
    dev: bool,
    live: Option<&Path>,
    limit: usize,
    cache: &SearchCache,
) -> Vec<RecentItem> {
    let Ok(roots) = settings.roots(dev) else {
        return Vec::new();
    };
    let specs = RootSpec::from_roots(&roots, settings.sessions.directory.is_none());
    let discovery = discover(&specs);
    let request = PageRequest {
        limit: RECENT_SCAN,
        cursor: None,
    };
    let page = search_cache::list(&discovery, &request, cache);
    let this_mac = crate::sync::device_name(settings);
    page.rows
        .into_iter()
        .filter(|r| live != Some(r.location.as_path()) && r.duplicate_of.is_none())
        .filter_map(|r| {
            let text = copy_row(&r.location, r.leaf_id).ok()?;
            (!text.trim().is_empty()).then_some(RecentItem {
                session: r.location,
                text,
                other_mac: r.recorded_on.filter(|name| *name != this_mac),
            })
        })
        .take(limit)
        .collect()
}

/// A message as history shows and copies it: its spoken words alone (`spoken_text`), never
/// the `[audio]` or `[image]` that `display_text` writes for other blocks.
fn opened_message(entry: &Entry) -> OpenedMessage {
    let mut cleanup = None;
    let (role, text) = match &entry.body {
        EntryBody::Message(m) => (
            match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::ToolResult => "tool",
            },
            spoken_text(&m.content),
        ),
        EntryBody::CustomMessage(cm) if cm.custom_type == crate::cleanup::record::CLEANUP_TYPE => {
            cleanup = Some(CleanupMeta::of(cm.details.as_ref()));
            ("cleanup", spoken_text(&cm.content.to_blocks()))
        }
        EntryBody::CustomMessage(cm) => ("note", spoken_text(&cm.content.to_blocks())),
        // The conversation holds messages and custom messages only.
        _ => ("note", String::new()),
    };
    let audio = match &entry.body {
        EntryBody::Message(m) => ClipRequest::of_message(&m.content, m.replay.as_ref()),
        _ => None,
    };
    OpenedMessage {
        id: entry.id.clone(),
        role,
        text,
        timestamp: entry.timestamp.clone(),
        cleanup,
        audio,
    }
}

/// Reads `location` at `leaf` (read-only): the index, the first page of messages and a
/// reader for the others.
pub fn open_session(location: &Path, leaf: Option<String>) -> Result<OpenedSession, String> {
    open_session_with(location, leaf, &SearchCache::new())
}

/// [`open_session`], without a scan when `cache` holds the session's summary for the file as
/// it is now (the search panel that offered the session built it): the conversation is read
/// by the summary's spans, and each page first checks that the file's identity is still the
/// one the summary was built from. When it is not (an append, a rewrite), the page comes from
/// a scan at the pinned leaf, as without a cache, and so do the pages after it.
pub fn open_session_with(
    location: &Path,
    leaf: Option<String>,
    cache: &SearchCache,
) -> Result<OpenedSession, String> {
    let unreadable = |_| "app.session-unreadable".to_owned();
    let path = session::session_file(location);
    let file = File::open(&path).map_err(unreadable)?;
    let identity = FileIdentity::of(&file.metadata().map_err(unreadable)?);
    let Some(cached) = cache.conversation(location, identity, leaf.as_deref()) else {
        return open_scanned(location, leaf, file);
    };
    let read_spans = |file: &File, spans: &[(u64, u32)]| -> Result<Vec<Entry>, String> {
        let mut line = Vec::new();
        spans
            .iter()
            .map(|&(offset, len)| {
                line.resize(len as usize, 0);
                file.read_exact_at(&mut line, offset)
                    .map_err(|_| "history.io".to_owned())?;
                std::str::from_utf8(&line)
                    .ok()
                    .and_then(|t| Entry::from_line(t).ok())
                    .ok_or_else(|| "history.changed".to_owned())
            })
            .collect()
    };
    let spans = cached.spans();
    let total = spans.len();
    let messages = read_spans(&file, &spans[..total.min(MAX_PAGE)])?
        .iter()
        .map(opened_message)
        .collect();
    let lifecycle = read_spans(&file, cached.recordings())?;
    let retranscribable = retranscribable(location, lifecycle.iter().map(|e| &e.body));
    let recordings = recordings(location, lifecycle.iter().map(|e| &e.body));
    let leaf = cached.leaf_id().map(str::to_owned);
    let pinned = leaf.clone();
    let pages = (total > 0).then(|| {
        // Set once the file stopped being the one the summary describes.
        let scanned: Mutex<Option<Scanned>> = Mutex::new(None);
        let location = location.to_path_buf();
        MessagePages::new(total, move |start| {
            let file = File::open(&path).map_err(unreadable)?;
            let now = FileIdentity::of(&file.metadata().map_err(unreadable)?);
            let mut fallback = scanned.lock().unwrap_or_else(|p| p.into_inner());
            if fallback.is_none() && now == cached.identity() {
                let spans = cached.spans();
                let start = start.min(total);
                let end = start.saturating_add(MAX_PAGE).min(total);
                return Ok(read_spans(&file, &spans[start..end])?
                    .iter()
                    .map(opened_message)
                    .collect());
            }
            if fallback.is_none() {
                let s = Scanned::new(&location, pinned.clone())?;
                // The pinned conversation is the one the summary listed, or the file was
                // rewritten.
                if s.positions.len() != total {
                    return Err("history.changed".to_owned());
                }
                *fallback = Some(s);
            }
            match fallback.as_ref() {
                Some(s) => s.page(&file, start),
                None => Err("history.changed".to_owned()),
            }
        })
    });
    Ok(OpenedSession {
        location: location.to_path_buf(),
        leaf,
        messages,
        pages,
        retranscribable,
        recordings,
    })
}

/// A session scanned at a pinned leaf: its index and conversation.
struct Scanned {
    index: session::SessionIndex,
    positions: Vec<u32>,
}

impl Scanned {
    fn new(location: &Path, leaf: Option<String>) -> Result<Scanned, String> {
        let mut file = File::open(session::session_file(location))
            .map_err(|_| "app.session-unreadable".to_owned())?;
        Scanned::of(&mut file, leaf).map(|(s, _)| s)
    }

    /// Scans `file` and projects it at `leaf` (`None`: the default leaf); also returns the
    /// leaf's position.
    fn of(file: &mut File, leaf: Option<String>) -> Result<(Scanned, Option<u32>), String> {
        let index =
            session::scan_reader(&mut *file).map_err(|_| "app.session-unreadable".to_owned())?;
        let selector = match leaf {
            Some(id) => LeafSelector::Id(id),
            None => LeafSelector::Default,
        };
        let projection = session::project(&index, &selector).map_err(|e| e.code().to_owned())?;
        let leaf = projection.leaf;
        Ok((
            Scanned {
                index,
                positions: projection.conversation,
            },
            leaf,
        ))
    }

    /// The page of the conversation that starts at `start`, read by offset and checked
    /// against the index.
    fn page(&self, file: &File, start: usize) -> Result<Vec<OpenedMessage>, String> {
        let mut file = file;
        let page = session::history::read_page(&mut file, &self.index, &self.positions, start)
            .map_err(|e| e.code().to_owned())?;
        Ok(page.iter().map(|h| opened_message(&h.entry)).collect())
    }
}

/// The saved WAVs of recordings that failed or are incomplete, from their lifecycle entries.
fn retranscribable<'a>(
    location: &Path,
    lifecycle: impl Iterator<Item = &'a EntryBody>,
) -> Vec<PathBuf> {
    recover::recording_states(lifecycle)
        .into_iter()
        .filter(|r| r.end != Some(recover::RecordingEnd::Complete))
        .map(|r| location.join(session::ASSETS_DIR).join(r.asset))
        .filter(|p| p.is_file())
        .collect()
}

/// The WAV assets of every recording whose file is there, from the lifecycle entries.
fn recordings<'a>(location: &Path, lifecycle: impl Iterator<Item = &'a EntryBody>) -> Vec<String> {
    recover::recording_states(lifecycle)
        .into_iter()
        .map(|r| r.asset)
        .filter(|a| location.join(session::ASSETS_DIR).join(a).is_file())
        .collect()
}

/// [`open_session`] by a scan of `file`.
fn open_scanned(
    location: &Path,
    leaf: Option<String>,
    mut file: File,
) -> Result<OpenedSession, String> {
    let (scanned, leaf_pos) = Scanned::of(&mut file, leaf)?;
    let messages = scanned.page(&file, 0)?;
    // Recordings that failed or are incomplete, from the same open file and index.
    let lifecycle = session::history::read_entries(
        &mut file,
        &scanned.index,
        &recover::recording_positions(&scanned.index),
    )
    .map_err(|e| e.code().to_owned())?;
    let retranscribable = retranscribable(location, lifecycle.iter().map(|h| &h.entry.body));
    let recordings = recordings(location, lifecycle.iter().map(|h| &h.entry.body));
    let leaf = leaf_pos.map(|p| scanned.index.id(p).into_owned());
    let total = scanned.positions.len();
    let path = session::session_file(location);
    let pages = (total > 0).then(|| {
        MessagePages::new(total, move |start| {
            let file = File::open(&path).map_err(|_| "app.session-unreadable".to_owned())?;
            scanned.page(&file, start)
        })
    });
    Ok(OpenedSession {
        location: location.to_path_buf(),
        leaf,
        messages,
        pages,
        retranscribable,
        recordings,
    })
}

/// Explicit recovery of one session folder, then reconciliation of confirmed removals.
fn recover_session(location: &Path) -> Result<String, String> {
    use recover::{RecordingOutcome, TailOutcome};
    let name = location
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| "store.invalid-name".to_owned())?
        .to_owned();
    let parent = location.parent().unwrap_or(Path::new("/")).to_path_buf();
    let roots = Roots::new(parent, Vec::new()).map_err(|e| e.code().to_owned())?;
    let mut store = Store::new(roots);
    crate::sync::identify(&mut store);
    let report = store.recover(0, &name).map_err(|e| e.code().to_owned())?;
    let mut parts = Vec::new();
    match report.tail {
        TailOutcome::Clean => {}
        TailOutcome::AddedNewline => parts.push("added the final newline".to_owned()),
        TailOutcome::PreservedFragment { bytes, .. } => {
            parts.push(format!("kept a {bytes}-byte incomplete record aside"))
        }
    }
    for m in &report.merges {
        parts.push(match m {
            recover::MergeOutcome::Merged(r) => format!(
                "merged the copy from another Mac ({} entries kept, {} shown on the default path)",
                r.appended, r.carried
            ),
            recover::MergeOutcome::Refused { code, .. } => {
                format!("left a copy from another Mac unmerged ({code})")
            }
        });
    }
    for r in &report.recordings {
        parts.push(match r {
            RecordingOutcome::Recovered { duration_ms, .. } => {
                format!(
                    "recovered a recording of {:.1} s",
                    *duration_ms as f64 / 1000.0
                )
            }
            RecordingOutcome::Live { .. } => "a recording is still live; left alone".into(),
            RecordingOutcome::NoAudio { .. } => "marked a recording without audio".into(),
        });
    }
    if let Ok(handle) = store.open_session(0, &name)
        && let Ok(done) = crate::realtime::removal::reconcile(&handle)
    {
        let applied = done
            .iter()
            .filter(|d| matches!(d, crate::realtime::removal::Reconciled::Applied { .. }))
            .count();
        if applied > 0 {
            parts.push(format!("applied {applied} confirmed removal(s)"));
        }
    }
    Ok(if parts.is_empty() {
        "nothing needed recovery".into()
    } else {
        parts.join("; ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #36 item 7: on-device recognition stops the margin before the quit deadline, or
    /// at once when less than the margin is left.
    #[test]
    fn issue36_07_recognition_stops_the_margin_before_the_quit_deadline() {
        let now = Instant::now();
        let by = now + SHUTDOWN_DEADLINE;
        assert_eq!(stop_recognition_at(now, by), by - QUIT_RECOGNITION_MARGIN);
        assert!(QUIT_RECOGNITION_MARGIN < SHUTDOWN_DEADLINE / 2);
        let soon = now + QUIT_RECOGNITION_MARGIN / 2;
        assert_eq!(stop_recognition_at(now, soon), now);
        assert_eq!(stop_recognition_at(now, now), now);
    }
}
