//! The window's content: dictation, search and settings, rendered from a view model.
//!
//! [`PersykUi`] owns the UI state only. It sends [`Command`]s to the backend and applies the
//! [`Update`]s it gets back in [`PersykUi::process`] (called every frame and, while the
//! window is hidden, from the shell's `logic`). Rendering collects [`Action`]s and applies
//! them after the frame's layout, so no widget code mutates domain state.
//!
//! Invariants:
//! - Provisional text is drawn marked "not yet saved" and has no copy or remove control.
//! - The clipboard only ever receives canonical text: a finished recording's surviving user
//!   text, a published message, or an opened session's saved message.
//! - No timer runs while idle: repaints are requested only while a recording runs (meter and
//!   elapsed time) or a search is debouncing.
//! - Model downloads run in the backend; the Settings page only shows their `ModelProgress`
//!   updates (the backend's waker repaints) and sends Download / Cancel / Delete. First run
//!   (no key, online recognition) offers both a key and an offline download of the default
//!   model.
//! - An opened session's messages are a virtualized list ([`virtual_rows`]): only the rows in
//!   view are laid out and exposed to accessibility, others keep a measured or estimated
//!   height. Messages come from the backend a page (≤ `MAX_PAGE`) at a time as rows come
//!   into view; pages more than [`PAGES_KEPT`] away are dropped; "Copy all" asks the backend,
//!   which reads page by page.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use eframe::egui::{self, Color32, RichText, text::LayoutJob};

use super::backend::{BackendHandle, ShutdownStatus};
use super::effects::{Effects, first_words};
use super::hotkey;
use super::model::{
    AudioOrigin, Command, Finished, Live, OpenedMessage, OpenedSession, ResultRow, SearchResults,
    Update, Waker,
};
use super::tray::TrayState;
use crate::local::models::{ModelInfo, ModelState, ModelStore, Phase, Progress};
use crate::realtime::engine::{EngineState, EngineView, RemovalOutcome};
use crate::realtime::protocol::{
    DEFAULT_TRANSCRIPTION_MODEL, DELAYS, TRANSCRIPTION_MODELS, model_caps, retires_on,
};
use crate::session::history::MAX_PAGE;
use crate::settings::{DEFAULT_LOCAL_MODEL, HotkeyMode, RecognitionEngine, Settings};

/// Quiet time after typing before a search runs.
pub const SEARCH_DEBOUNCE: Duration = Duration::from_millis(250);
/// Repaint cadence while a recording runs (level meter, elapsed time).
const LIVE_REPAINT: Duration = Duration::from_millis(100);

/// The window's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    Dictation,
    Search,
    Settings,
}

/// A removal's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemovalStatus {
    Waiting,
    Answered(RemovalOutcome),
    /// The recording ended before the provider answered.
    NoAnswer,
}

impl RemovalStatus {
    fn describe(&self) -> String {
        match self {
            RemovalStatus::Waiting => "Removing… waiting for the provider".into(),
            RemovalStatus::Answered(RemovalOutcome::Removed) => "Removed".into(),
            RemovalStatus::Answered(RemovalOutcome::Rejected(code)) => format!(
                "The provider refused the removal ({}); the message stays",
                code.as_deref().unwrap_or("no code")
            ),
            RemovalStatus::Answered(RemovalOutcome::TimedOut) => {
                "No answer in time: the connection was closed and the recording stopped; the message stays".into()
            }
            RemovalStatus::Answered(RemovalOutcome::PendingLocal) => {
                "Removed at the provider; saving the removal failed and will be retried by Recover".into()
            }
            RemovalStatus::Answered(RemovalOutcome::NotRemovable) => {
                "This message cannot be removed".into()
            }
            RemovalStatus::NoAnswer => {
                "The recording ended before the provider answered; the message stays".into()
            }
        }
    }
}

struct LiveRec {
    session: PathBuf,
    origin: AudioOrigin,
    live: Live,
    started: Instant,
    stopping: bool,
}

struct DoneRec {
    finished: Finished,
    /// The engine's final view (messages with removals, gaps), when the engine ran.
    view: Option<EngineView>,
    clipboard: Option<Result<(), String>>,
    discarded: bool,
}

enum Dictation {
    Idle,
    Starting,
    Live(LiveRec),
    Done(Box<DoneRec>),
    Failed(String),
}

#[derive(Default)]
struct SearchState {
    query: String,
    generation: u64,
    edited_at: Option<Instant>,
    waiting: bool,
    results: Option<SearchResults>,
    opened: Option<OpenedSession>,
    /// Measured row heights of the opened session's virtualized list.
    opened_rows: RowHeights,
    /// Loaded pages of the opened session, by first message; only those near the view.
    opened_pages: BTreeMap<usize, Vec<OpenedMessage>>,
    /// Pages asked of the backend and not answered yet.
    pages_asked: HashSet<usize>,
    /// Counts opens: pages of an earlier open are dropped.
    open_generation: u64,
    opening: bool,
    message: Option<(String, bool)>,
}

/// The Settings page's editable copy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsForm {
    pub api_key: String,
    pub key_stored: bool,
    pub base_url: String,
    pub conversation: bool,
    pub model: String,
    pub language: String,
    /// "Words Persyk should know", one per line.
    pub keywords: String,
    /// `near_field` (empty: the default), `far_field` or `off`.
    pub noise_reduction: String,
    /// `gpt-realtime-whisper`'s delay (empty: the provider's default).
    pub delay: String,
    pub device: String,
    pub directory: String,
    pub additional: String,
    pub pre_roll_ms: u32,
    pub hotkey: String,
    pub push_to_talk: bool,
    /// Recognition on this device (Whisper) instead of OpenAI.
    pub local: bool,
    /// The catalog model (when `use_model_file` is off).
    pub local_model: String,
    /// Use the model file at `model_path` instead of a catalog model.
    pub use_model_file: bool,
    pub model_path: String,
    /// Inference threads; 0 = automatic.
    pub local_threads: u32,
    /// Start and stop sounds.
    pub sounds: bool,
}

impl SettingsForm {
    fn from_settings(s: &Settings, key_stored: bool) -> SettingsForm {
        SettingsForm {
            api_key: String::new(),
            key_stored,
            base_url: s.provider.base_url.clone().unwrap_or_default(),
            conversation: s.provider.mode.as_deref() == Some("conversation"),
            model: s.provider.transcription_model.clone().unwrap_or_default(),
            language: s.provider.language.clone().unwrap_or_default(),
            keywords: s.provider.keywords.join("\n"),
            noise_reduction: s.provider.noise_reduction.clone().unwrap_or_default(),
            delay: s.provider.delay.clone().unwrap_or_default(),
            device: s.capture.device.clone().unwrap_or_default(),
            directory: s
                .sessions
                .directory
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            additional: s
                .sessions
                .additional_directories
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join("\n"),
            pre_roll_ms: s.capture.pre_roll_ms,
            hotkey: s
                .hotkey
                .keys
                .clone()
                .unwrap_or_else(|| crate::settings::DEFAULT_HOTKEY.to_owned()),
            push_to_talk: s.hotkey.mode == HotkeyMode::PushToTalk,
            local: s.recognition.engine == RecognitionEngine::Local,
            local_model: match &s.recognition.local_model {
                Some(m) if !m.contains('/') => m.trim().to_owned(),
                _ => DEFAULT_LOCAL_MODEL.to_owned(),
            },
            use_model_file: s
                .recognition
                .local_model
                .as_ref()
                .is_some_and(|m| m.contains('/')),
            model_path: s
                .recognition
                .local_model
                .clone()
                .filter(|m| m.contains('/'))
                .unwrap_or_default(),
            local_threads: s.recognition.local_threads.unwrap_or(0),
            sounds: s.feedback.sounds_enabled(),
        }
    }

    /// The settings this form describes, keeping whatever `base` has that the form does not
    /// show (unknown keys included).
    fn to_settings(&self, base: &Settings) -> Settings {
        let opt = |s: &str| {
            let t = s.trim();
            (!t.is_empty()).then(|| t.to_owned())
        };
        let mut s = base.clone();
        s.provider.base_url = opt(&self.base_url);
        // "dictation" is the default: written only if the file already named a mode.
        s.provider.mode = if self.conversation {
            Some("conversation".to_owned())
        } else {
            base.provider.mode.as_ref().map(|_| "dictation".to_owned())
        };
        s.provider.transcription_model = opt(&self.model);
        s.provider.language = opt(&self.language);
        s.provider.keywords = self.keywords.lines().filter_map(opt).collect();
        s.provider.noise_reduction = opt(&self.noise_reduction);
        s.provider.delay = opt(&self.delay);
        s.capture.device = opt(&self.device);
        s.capture.pre_roll_ms = self.pre_roll_ms;
        s.sessions.directory = opt(&self.directory).map(PathBuf::from);
        s.sessions.additional_directories = self
            .additional
            .lines()
            .filter_map(opt)
            .map(PathBuf::from)
            .collect();
        s.hotkey.keys = Some(self.hotkey.trim().to_owned());
        s.hotkey.mode = if self.push_to_talk {
            HotkeyMode::PushToTalk
        } else {
            HotkeyMode::Toggle
        };
        s.recognition.engine = if self.local {
            RecognitionEngine::Local
        } else {
            RecognitionEngine::Openai
        };
        // The default model is written only if the file already named one.
        s.recognition.local_model = if self.use_model_file {
            opt(&self.model_path)
        } else if self.local_model == DEFAULT_LOCAL_MODEL && base.recognition.local_model.is_none()
        {
            None
        } else {
            opt(&self.local_model)
        };
        s.recognition.local_threads = (self.local_threads > 0).then_some(self.local_threads);
        // On is the default: written only when turned off or the file already said.
        s.feedback.sounds = if self.sounds && base.feedback.sounds.is_none() {
            None
        } else {
            Some(self.sounds)
        };
        s
    }
}

/// What a click asks for; applied after the frame's layout.
enum Action {
    Page(Page),
    Start,
    Stop,
    Copy(String),
    Remove(String),
    OpenMicrophoneSettings,
    AskDiscard,
    ConfirmDiscard,
    CancelDiscard,
    TranscribeAgain(PathBuf),
    Open(ResultRow),
    CloseOpened,
    /// Stream every user message of the opened session to the clipboard.
    CopyAll,
    /// The first and last page (by first message) of the opened session in view.
    ShowPages(usize, usize),
    MoreResults,
    Recover(PathBuf),
    SaveSettings,
    DownloadModel(String),
    CancelDownload(String),
    DeleteModel(String),
    /// First run: choose on-device recognition with the default model and download it.
    OfflineFirstRun,
}

/// The Settings page's view of the models folder.
#[derive(Default)]
struct ModelsView {
    /// The folder and its catalog (`None`: no data folder to keep models in).
    store: Option<ModelStore>,
    rows: Option<Vec<ModelInfo>>,
    asked: bool,
    /// Running downloads and where they stand.
    progress: HashMap<String, Progress>,
    /// The last outcome per model (text, is_error).
    notes: HashMap<String, (String, bool)>,
}

/// The whole window's state.
pub struct PersykUi {
    backend: BackendHandle,
    effects: Box<dyn Effects>,
    waker: Waker,
    page: Page,
    dictation: Dictation,
    removals: HashMap<String, RemovalStatus>,
    last_transcript: Option<String>,
    /// A one-line status (text, is_error) under the page tabs.
    notice: Option<(String, bool)>,
    confirm_discard: bool,
    search: SearchState,
    settings: Settings,
    form: SettingsForm,
    form_error: Option<String>,
    form_saved: bool,
    settings_generation: u64,
    /// Shown on the dictation page when the microphone cannot be used (macOS permission).
    microphone_note: Option<String>,
    /// Shown at the top when the tray icon is unavailable.
    tray_note: Option<String>,
    /// Shown in Settings when the hotkey could not be registered.
    pub hotkey_note: Option<String>,
    pending: Vec<Action>,
    /// Stop as soon as the starting recording arrives.
    stop_on_start: bool,
    /// Input devices for the Settings page (asked for once, when the page first shows).
    devices: Option<Vec<String>>,
    devices_asked: bool,
    /// Quitting: the window shows "Finishing…" until the backend has stopped.
    quitting: bool,
    /// The starting recording waits for the user's answer to the microphone prompt.
    waiting_permission: bool,
    /// Where the API key is kept (said on the Settings page).
    key_storage: Option<crate::credentials::KeyStorage>,
    models: ModelsView,
}

impl PersykUi {
    /// `key_stored`: an API key exists (else the window opens on Settings, first-run style).
    pub fn new(
        backend: BackendHandle,
        effects: Box<dyn Effects>,
        waker: Waker,
        settings: Settings,
        key_stored: bool,
    ) -> PersykUi {
        let form = SettingsForm::from_settings(&settings, key_stored);
        PersykUi {
            backend,
            effects,
            waker,
            // Without a key the first page is Settings, unless recognition is on the device
            // (which needs none).
            page: if key_stored
                || settings.recognition.engine == crate::settings::RecognitionEngine::Local
            {
                Page::Dictation
            } else {
                Page::Settings
            },
            dictation: Dictation::Idle,
            removals: HashMap::new(),
            last_transcript: None,
            notice: None,
            confirm_discard: false,
            search: SearchState::default(),
            settings,
            form,
            form_error: None,
            form_saved: false,
            settings_generation: 0,
            microphone_note: None,
            tray_note: None,
            hotkey_note: None,
            pending: Vec::new(),
            stop_on_start: false,
            devices: None,
            devices_asked: false,
            quitting: false,
            waiting_permission: false,
            key_storage: None,
            models: ModelsView {
                store: ModelStore::from_env().ok(),
                ..ModelsView::default()
            },
        }
    }

    // -----------------------------------------------------------------------------------
    // Control from the shell (tray, hotkey) and tests.

    pub fn page(&self) -> Page {
        self.page
    }

    pub fn show_page(&mut self, page: Page) {
        if page == Page::Search && self.page != Page::Search {
            self.search.edited_at = None;
            self.run_search();
        }
        self.page = page;
    }

    pub fn is_recording(&self) -> bool {
        matches!(self.dictation, Dictation::Starting | Dictation::Live(_))
    }

    pub fn start(&mut self) {
        if !self.is_recording() {
            self.send(Command::Start);
            self.stop_on_start = false;
            self.removals.clear();
            self.confirm_discard = false;
            self.dictation = Dictation::Starting;
            self.notice = None;
        }
    }

    pub fn stop(&mut self) {
        match &mut self.dictation {
            Dictation::Live(l) if !l.stopping => {
                l.stopping = true;
                self.send(Command::Stop);
            }
            // Released before the recording showed itself (push-to-talk): stop on arrival.
            Dictation::Starting => self.stop_on_start = true,
            _ => {}
        }
    }

    pub fn toggle(&mut self) {
        if self.is_recording() {
            self.stop();
        } else {
            self.start();
        }
    }

    /// The last surviving transcription (what "Copy last transcription" copies).
    pub fn last_transcript(&self) -> Option<&str> {
        self.last_transcript.as_deref()
    }

    pub fn copy_last(&mut self) {
        if let Some(t) = self.last_transcript.clone() {
            self.copy(&t);
        }
    }

    pub fn tray_state(&self) -> TrayState {
        match &self.dictation {
            Dictation::Starting => TrayState::Connecting,
            Dictation::Live(l) => match l.live.view.borrow().state {
                EngineState::Connecting => TrayState::Connecting,
                EngineState::Streaming if !l.stopping => TrayState::Recording,
                EngineState::Halted(_) => TrayState::Error,
                _ => TrayState::Finishing,
            },
            Dictation::Done(d) if d.finished.error.is_some() || d.finished.halted.is_some() => {
                TrayState::Error
            }
            Dictation::Failed(_) => TrayState::Error,
            _ => TrayState::Idle,
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Bumped each time settings are saved (the shell re-registers the hotkey).
    pub fn settings_generation(&self) -> u64 {
        self.settings_generation
    }

    pub fn set_microphone_note(&mut self, note: Option<String>) {
        self.microphone_note = note;
    }

    /// A problem with the settings file, shown on the Settings page.
    pub fn set_settings_note(&mut self, note: String) {
        self.form_error = Some(note);
    }

    /// Where the API key is kept; the Settings page says it (and warns when the key does
    /// not survive a reboot).
    pub fn set_key_storage(&mut self, storage: crate::credentials::KeyStorage) {
        self.key_storage = Some(storage);
    }

    /// The models folder the Settings page shows and downloads into (tests point it at a
    /// temporary folder and a loopback server).
    pub fn set_model_store(&mut self, store: ModelStore) {
        self.models = ModelsView {
            store: Some(store),
            ..ModelsView::default()
        };
    }

    pub fn set_tray_note(&mut self, note: Option<String>) {
        self.tray_note = note;
    }

    /// Starts quitting without waiting: the backend finishes a running recording (by
    /// `deadline`) and the window shows "Finishing…" meanwhile.
    pub fn begin_quit(&mut self, deadline: Duration) {
        self.quitting = true;
        self.backend.request_shutdown(deadline);
    }

    /// Whether quitting has begun.
    pub fn is_quitting(&self) -> bool {
        self.quitting
    }

    /// Where the backend's shutdown stands (never blocks).
    pub fn shutdown_status(&mut self) -> ShutdownStatus {
        self.backend.shutdown_status()
    }

    /// Stops the backend (a running recording is finished and saved first), waiting until
    /// it has stopped or the deadline passed — the deadline of [`PersykUi::begin_quit`] if
    /// quitting already began. Returns whether it stopped in time.
    pub fn shutdown(&mut self, deadline: Duration) -> bool {
        self.backend.shutdown(deadline)
    }

    fn send(&mut self, command: Command) {
        if let Err(e) = self.backend.send(command) {
            self.notice = Some((e.to_string(), true));
        }
    }

    fn copy(&mut self, text: &str) {
        self.notice = Some(match self.effects.copy(text) {
            Ok(()) => ("Copied to the clipboard".into(), false),
            Err(reason) => (format!("Copying failed: {reason}"), true),
        });
    }

    // -----------------------------------------------------------------------------------
    // Updates from the backend.

    /// Applies every waiting update; runs effects of finished recordings. Cheap when idle.
    pub fn process(&mut self, ctx: &egui::Context) {
        self.waker.attach(ctx);
        while let Some(update) = self.backend.try_recv() {
            self.apply(update);
        }
        if let Some(reason) = self.effects.failures() {
            self.notice = Some((
                format!(
                    "The notification could not be shown ({reason}); the text is on the clipboard"
                ),
                true,
            ));
        }
    }

    /// Applies one backend update (tests and benches inject their own).
    pub fn apply(&mut self, update: Update) {
        match update {
            Update::WaitingForPermission => {
                self.waiting_permission = matches!(self.dictation, Dictation::Starting);
            }
            Update::Started {
                session,
                origin,
                live,
            } => {
                self.waiting_permission = false;
                self.dictation = Dictation::Live(LiveRec {
                    session,
                    origin,
                    live,
                    started: Instant::now(),
                    stopping: false,
                });
                if std::mem::take(&mut self.stop_on_start) {
                    self.stop();
                }
            }
            Update::StartFailed { code } => {
                self.waiting_permission = false;
                self.stop_on_start = false;
                self.dictation = Dictation::Failed(code);
            }
            Update::Ended(finished) => {
                self.waiting_permission = false;
                self.finish(*finished);
            }
            Update::Removal { entry_id, outcome } => {
                self.removals.insert(
                    entry_id,
                    match outcome {
                        Some(o) => RemovalStatus::Answered(o),
                        None => RemovalStatus::NoAnswer,
                    },
                );
            }
            Update::Discarded { .. } => {
                if let Dictation::Done(d) = &mut self.dictation {
                    d.discarded = true;
                }
                self.last_transcript = None;
                self.notice = Some(("The session was deleted".into(), false));
            }
            Update::DiscardFailed { code } => {
                self.notice = Some((format!("The session was not deleted ({code})"), true));
            }
            Update::Results(results) => {
                if results.generation == self.search.generation {
                    match (&mut self.search.results, results.continued) {
                        (Some(shown), true) => {
                            shown.rows.extend(results.rows);
                            shown.skipped.extend(results.skipped);
                            shown.next = results.next;
                        }
                        _ => self.search.results = Some(*results),
                    }
                    self.search.waiting = false;
                }
            }
            Update::Opened(opened) => {
                self.search.opening = false;
                self.search.open_generation += 1;
                self.search.opened_rows = RowHeights::default();
                self.search.pages_asked.clear();
                self.search.opened_pages.clear();
                let mut opened = *opened;
                self.search
                    .opened_pages
                    .insert(0, std::mem::take(&mut opened.messages));
                self.search.opened = Some(opened);
            }
            Update::Page {
                generation,
                start,
                messages,
            } => {
                if generation == self.search.open_generation {
                    self.search.pages_asked.remove(&start);
                    match messages {
                        Ok(m) => {
                            self.search.opened_pages.insert(start, m);
                        }
                        Err(code) => {
                            self.search.message =
                                Some((format!("Could not read the session ({code})"), true));
                        }
                    }
                }
            }
            Update::CopyText(text) => match text {
                Ok(t) => self.copy(&t),
                Err(code) => {
                    self.search.message =
                        Some((format!("Could not read the session ({code})"), true));
                }
            },
            Update::OpenFailed { code, .. } => {
                self.search.opening = false;
                self.search.message = Some((format!("Could not open the session ({code})"), true));
            }
            Update::Recovered { summary, .. } => {
                self.search.message = Some((format!("Recovered: {summary}"), false));
                self.run_search();
            }
            Update::RecoverFailed { code, .. } => {
                self.search.message = Some((format!("Recovery failed ({code})"), true));
            }
            Update::Devices(list) => self.devices = Some(list),
            Update::SettingsSaved => {
                self.settings = self.form.to_settings(&self.settings);
                if !self.form.api_key.trim().is_empty() {
                    self.form.key_stored = true;
                }
                self.form.api_key.clear();
                self.form_saved = true;
                self.form_error = None;
                self.settings_generation += 1;
            }
            Update::SettingsFailed { code } => {
                self.form_error = Some(format!("Not saved: {code}"));
            }
            Update::Models(rows) => self.models.rows = Some(rows),
            Update::ModelProgress { name, progress } => {
                self.models.notes.remove(&name);
                self.models.progress.insert(name, progress);
            }
            Update::ModelDownloaded { name } => {
                self.models.progress.remove(&name);
                self.models
                    .notes
                    .insert(name, ("Downloaded and verified".into(), false));
            }
            Update::ModelFailed { name, code } => {
                self.models.progress.remove(&name);
                let note = match code.as_str() {
                    "models.cancelled" => ("Stopped; Download resumes it".to_owned(), false),
                    c => (describe_model_failure(c), true),
                };
                self.models.notes.insert(name, note);
            }
            Update::ModelDeleted { name } => {
                self.models.notes.insert(name, ("Deleted".into(), false));
            }
        }
    }

    fn finish(&mut self, finished: Finished) {
        let view = match &self.dictation {
            Dictation::Live(l) => Some(l.live.view.borrow().clone()),
            _ => None,
        };
        let mut done = DoneRec {
            finished,
            view,
            clipboard: None,
            discarded: false,
        };
        // Effects: the session is already saved whatever happens here.
        let text = done.finished.transcript.clone();
        if done.finished.error.is_none() && !text.trim().is_empty() {
            let result = self.effects.copy(&text);
            if result.is_ok() {
                self.effects
                    .notify("Transcription copied", &first_words(&text, 12));
            } else if let Err(reason) = &result {
                eprintln!("persyk: clipboard failed: {reason}");
            }
            done.clipboard = Some(result);
            self.last_transcript = Some(text);
        }
        // Removal requests the recording never answered.
        for status in self.removals.values_mut() {
            if *status == RemovalStatus::Waiting {
                *status = RemovalStatus::NoAnswer;
            }
        }
        self.dictation = Dictation::Done(Box::new(done));
    }

    fn run_search(&mut self) {
        self.search.generation += 1;
        self.search.waiting = true;
        let command = Command::Search {
            query: self.search.query.clone(),
            generation: self.search.generation,
            after: None,
        };
        self.send(command);
    }

    fn more_results(&mut self) {
        let Some(after) = self.search.results.as_ref().and_then(|r| r.next.clone()) else {
            return;
        };
        self.search.waiting = true;
        let command = Command::Search {
            query: self.search.query.clone(),
            generation: self.search.generation,
            after: Some(after),
        };
        self.send(command);
    }

    // -----------------------------------------------------------------------------------
    // Rendering.

    /// Renders the window; applies what the user clicked.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        self.process(ui.ctx());
        if self.quitting {
            egui::Frame::central_panel(ui.style()).show(ui, |ui| {
                ui.set_min_size(ui.available_size());
                ui.heading("Finishing…");
                ui.label(
                    "Persyk quits once the recording is finished and saved (at most 30 seconds).",
                );
            });
            return;
        }
        egui::Frame::central_panel(ui.style()).show(ui, |ui| {
            ui.set_min_size(ui.available_size());
            self.header(ui);
            ui.separator();
            match self.page {
                Page::Dictation => self.dictation_page(ui),
                Page::Search => self.search_page(ui),
                Page::Settings => self.settings_page(ui),
            }
        });
        if self.confirm_discard {
            self.discard_dialog(ui.ctx());
        }
        if self.is_recording() {
            ui.ctx().request_repaint_after(LIVE_REPAINT);
        }
        if let Some(at) = self.search.edited_at {
            let quiet = at.elapsed();
            if quiet >= SEARCH_DEBOUNCE {
                self.search.edited_at = None;
                self.run_search();
            } else {
                ui.ctx().request_repaint_after(SEARCH_DEBOUNCE - quiet);
            }
        }
        for action in std::mem::take(&mut self.pending) {
            self.act(action);
        }
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Page(p) => self.show_page(p),
            Action::Start => self.start(),
            Action::Stop => self.stop(),
            Action::Copy(text) => self.copy(&text),
            Action::OpenMicrophoneSettings => {
                if let Err(reason) = self
                    .effects
                    .open_url(super::permission::PRIVACY_MICROPHONE_URL)
                {
                    self.notice = Some((
                        format!("System Settings could not be opened ({reason})"),
                        true,
                    ));
                }
            }
            Action::Remove(entry_id) => {
                self.removals
                    .insert(entry_id.clone(), RemovalStatus::Waiting);
                self.send(Command::Remove { entry_id });
            }
            Action::AskDiscard => self.confirm_discard = true,
            Action::CancelDiscard => self.confirm_discard = false,
            Action::ConfirmDiscard => {
                self.confirm_discard = false;
                if let Dictation::Done(d) = &self.dictation {
                    let session = d.finished.session.clone();
                    self.send(Command::Discard { session });
                }
            }
            Action::TranscribeAgain(wav) => {
                if !self.is_recording() {
                    self.send(Command::TranscribeAgain { wav });
                    self.removals.clear();
                    self.dictation = Dictation::Starting;
                    self.page = Page::Dictation;
                }
            }
            Action::Open(row) => {
                self.search.opening = true;
                self.send(Command::Open {
                    location: row.location,
                    leaf: row.leaf,
                });
            }
            Action::CloseOpened => {
                self.search.opened = None;
                self.search.opened_pages.clear();
                self.search.pages_asked.clear();
            }
            Action::CopyAll => {
                if let Some(pages) = self.search.opened.as_ref().and_then(|o| o.pages.clone()) {
                    self.send(Command::CopyAll { pages });
                }
            }
            Action::ShowPages(first, last) => self.show_pages(first, last),
            Action::MoreResults => self.more_results(),
            Action::Recover(location) => {
                self.search.message = Some(("Recovering…".into(), false));
                self.send(Command::Recover { location });
            }
            Action::SaveSettings => self.save_settings(),
            Action::DownloadModel(name) => self.download_model(name),
            Action::CancelDownload(name) => self.send(Command::CancelDownload { name }),
            Action::DeleteModel(name) => {
                if let Some(store) = self.models.store.clone() {
                    self.send(Command::DeleteModel { store, name });
                }
            }
            Action::OfflineFirstRun => {
                self.form.local = true;
                self.form.use_model_file = false;
                self.form.local_model = DEFAULT_LOCAL_MODEL.to_owned();
                self.save_settings();
                self.download_model(DEFAULT_LOCAL_MODEL.to_owned());
            }
        }
    }

    fn header(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            for (page, label) in [
                (Page::Dictation, "Dictation"),
                (Page::Search, "Search"),
                (Page::Settings, "Settings"),
            ] {
                if ui.selectable_label(self.page == page, label).clicked() {
                    self.pending.push(Action::Page(page));
                }
            }
        });
        if let Some(note) = &self.tray_note {
            ui.colored_label(ui.visuals().warn_fg_color, note);
        }
        if let Some((text, error)) = &self.notice {
            let color = if *error {
                ui.visuals().error_fg_color
            } else {
                ui.visuals().weak_text_color()
            };
            ui.colored_label(color, text);
        }
    }

    fn dictation_page(&mut self, ui: &mut egui::Ui) {
        if !self.form.key_stored && self.settings.recognition.engine == RecognitionEngine::Openai {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                "Add your OpenAI API key in Settings to start dictating.",
            );
        }
        if let Some(note) = &self.microphone_note {
            ui.colored_label(ui.visuals().warn_fg_color, note);
        }
        if let Some(model) = &self.settings.provider.transcription_model
            && let Some(day) = retires_on(model.trim())
        {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                format!(
                    "{} stops working on {day}: switch to {DEFAULT_TRANSCRIPTION_MODEL} in Settings.",
                    model.trim()
                ),
            );
        }
        let mut actions = Vec::new();
        match &self.dictation {
            Dictation::Idle | Dictation::Failed(_) | Dictation::Done(_) => {
                if ui.button("Start dictation").clicked() {
                    actions.push(Action::Start);
                }
            }
            Dictation::Starting => {
                ui.add_enabled(false, egui::Button::new("Starting…"));
            }
            Dictation::Live(l) => {
                let label = if l.stopping {
                    "Finishing…"
                } else {
                    "Stop dictation"
                };
                if ui
                    .add_enabled(!l.stopping, egui::Button::new(label))
                    .clicked()
                {
                    actions.push(Action::Stop);
                }
            }
        }
        match &self.dictation {
            Dictation::Idle => {
                ui.label("Click Start dictation, the menu-bar icon or the hotkey, and talk.");
            }
            Dictation::Starting if self.waiting_permission => {
                ui.label("Waiting for microphone permission…");
                ui.label(
                    RichText::new("Answer the system's question to let Persyk use the microphone.")
                        .small()
                        .weak(),
                );
            }
            Dictation::Starting => {
                ui.label("Connecting…");
            }
            Dictation::Failed(code) => {
                ui.colored_label(
                    ui.visuals().error_fg_color,
                    format!("Could not start: {}", describe_start_failure(code)),
                );
                if code == "capture.permission-denied" {
                    ui.label(
                        "Persyk may not use the microphone. Turn Persyk on in System Settings > \
                         Privacy & Security > Microphone, then start again. Nothing was recorded.",
                    );
                    if ui.button("Open Microphone Privacy Settings").clicked() {
                        actions.push(Action::OpenMicrophoneSettings);
                    }
                }
            }
            Dictation::Live(l) => {
                let view = l.live.view.borrow().clone();
                live_status(ui, l, &view);
                ui.separator();
                transcript(ui, &view, true, &self.removals, &mut actions);
            }
            Dictation::Done(d) => {
                done_status(ui, d);
                ui.horizontal(|ui| {
                    if !d.discarded {
                        if !d.finished.transcript.is_empty()
                            && ui.button("Copy transcription").clicked()
                        {
                            actions.push(Action::Copy(d.finished.transcript.clone()));
                        }
                        if ui.button("Discard").clicked() {
                            actions.push(Action::AskDiscard);
                        }
                        if !d.finished.complete
                            && d.finished.wav.is_file()
                            && ui.button("Transcribe again").clicked()
                        {
                            actions.push(Action::TranscribeAgain(d.finished.wav.clone()));
                        }
                    }
                });
                ui.separator();
                if let Some(view) = &d.view {
                    transcript(ui, view, false, &self.removals, &mut actions);
                }
            }
        }
        self.pending.extend(actions);
    }

    fn discard_dialog(&mut self, ctx: &egui::Context) {
        let mut actions = Vec::new();
        let modal = egui::Modal::new(egui::Id::unique("persyk-discard")).show(ctx, |ui| {
            ui.heading("Discard this session?");
            ui.label(
                "The session, its recording and its transcript are deleted from disk. \
                 This cannot be undone.",
            );
            ui.horizontal(|ui| {
                if ui.button("Delete session").clicked() {
                    actions.push(Action::ConfirmDiscard);
                }
                if ui.button("Keep").clicked() {
                    actions.push(Action::CancelDiscard);
                }
            });
        });
        if modal.should_close() && actions.is_empty() {
            actions.push(Action::CancelDiscard);
        }
        self.pending.extend(actions);
    }

    /// Asks for the pages in view that are neither loaded nor asked for, and drops loaded
    /// pages more than [`PAGES_KEPT`] pages away from the view.
    fn show_pages(&mut self, first: usize, last: usize) {
        let Some(pages) = self.search.opened.as_ref().and_then(|o| o.pages.clone()) else {
            return;
        };
        let margin = PAGES_KEPT * MAX_PAGE;
        self.search
            .opened_pages
            .retain(|&s, _| s + margin >= first && s <= last + margin);
        let mut start = first;
        while start <= last {
            if !self.search.opened_pages.contains_key(&start)
                && !self.search.pages_asked.contains(&start)
            {
                let asked = self.backend.send(Command::ReadPage {
                    pages: pages.clone(),
                    generation: self.search.open_generation,
                    start,
                });
                // A busy backend: asked again next frame.
                if asked.is_ok() {
                    self.search.pages_asked.insert(start);
                }
            }
            start += MAX_PAGE;
        }
    }

    fn search_page(&mut self, ui: &mut egui::Ui) {
        let mut actions = Vec::new();
        let recording = self.is_recording();
        if let Some(opened) = &self.search.opened {
            let rows = &mut self.search.opened_rows;
            let pages = &self.search.opened_pages;
            opened_session(ui, opened, pages, rows, recording, &mut actions);
            self.pending.extend(actions);
            return;
        }
        let response = ui
            .horizontal(|ui| {
                let l = ui.label("Search history");
                ui.add(
                    egui::TextEdit::singleline(&mut self.search.query)
                        .hint_text("words from any saved session")
                        .desired_width(f32::INFINITY),
                )
                .labelled_by(l.id)
            })
            .inner;
        if response.changed() {
            self.search.edited_at = Some(Instant::now());
        }
        if let Some((text, error)) = &self.search.message {
            let color = if *error {
                ui.visuals().error_fg_color
            } else {
                ui.visuals().weak_text_color()
            };
            ui.colored_label(color, text);
        }
        if self.search.waiting || self.search.edited_at.is_some() {
            ui.label(RichText::new("Searching…").weak());
        }
        if self.search.opening {
            ui.label(RichText::new("Opening…").weak());
        }
        let Some(results) = &self.search.results else {
            self.pending.extend(actions);
            return;
        };
        for d in &results.root_diagnostics {
            ui.colored_label(ui.visuals().warn_fg_color, format!("Root problem: {d}"));
        }
        if let Some(code) = results.error {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!("Invalid query ({code})"),
            );
        }
        if !results.skipped.is_empty() {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                format!("{} session(s) could not be searched", results.skipped.len()),
            );
        }
        if results.rows.is_empty() && results.error.is_none() {
            ui.label(if self.search.query.trim().is_empty() {
                "No sessions yet."
            } else {
                "No matches."
            });
        }
        let query = self.search.query.trim().to_owned();
        egui::ScrollArea::vertical().show(ui, |ui| {
            for (i, row) in results.rows.iter().enumerate() {
                ui.push_id(i, |ui| result_row(ui, row, &query, &mut actions));
                ui.separator();
            }
            if results.next.is_some()
                && ui
                    .add_enabled(!self.search.waiting, egui::Button::new("More results"))
                    .clicked()
            {
                actions.push(Action::MoreResults);
            }
        });
        self.pending.extend(actions);
    }

    fn settings_page(&mut self, ui: &mut egui::Ui) {
        egui::ScrollArea::vertical()
            .auto_shrink([false, false])
            .show(ui, |ui| self.settings_page_ui(ui));
    }

    fn settings_page_ui(&mut self, ui: &mut egui::Ui) {
        if !self.form.key_stored && self.settings.recognition.engine == RecognitionEngine::Openai {
            self.first_run_ui(ui);
        }
        self.recognition_ui(ui);
        ui.separator();
        match self.key_storage {
            Some(s) if !s.survives_reboot() => {
                ui.colored_label(ui.visuals().warn_fg_color, s.describe());
            }
            Some(s) => {
                ui.label(RichText::new(s.describe()).small().weak());
            }
            None => {}
        }
        let default_root = crate::settings::default_root(crate::settings::is_dev())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if self.devices.is_none() && !self.devices_asked {
            self.devices_asked = true;
            self.send(Command::ListDevices);
        }
        let devices = self.devices.as_ref();
        let f = &mut self.form;
        let before = f.clone();
        let mut switch_model = false;
        egui::Grid::new("settings").num_columns(2).show(ui, |ui| {
            let stored = f.key_stored;
            field(ui, "API key", |ui| {
                ui.add(
                    egui::TextEdit::singleline(&mut f.api_key)
                        .password(true)
                        .hint_text(if stored {
                            "stored (type to replace)"
                        } else {
                            "sk-…"
                        }),
                )
            });
            field(ui, "Provider base URL", |ui| {
                ui.add(
                    egui::TextEdit::singleline(&mut f.base_url)
                        .hint_text("wss://api.openai.com/v1"),
                )
            });
            ui.label("Mode");
            ui.horizontal(|ui| {
                ui.radio_value(&mut f.conversation, false, "Dictation");
                ui.radio_value(&mut f.conversation, true, "Conversation");
            });
            ui.end_row();
            field(ui, "Transcription model", |ui| {
                let r = ui.add(
                    egui::TextEdit::singleline(&mut f.model).hint_text(DEFAULT_TRANSCRIPTION_MODEL),
                );
                egui::ComboBox::from_label("Current models")
                    .selected_text("choose")
                    .show_ui(ui, |ui| {
                        for m in TRANSCRIPTION_MODELS
                            .iter()
                            .filter(|m| m.retires_on.is_none())
                        {
                            ui.selectable_value(&mut f.model, m.name.to_owned(), m.name);
                        }
                    });
                r
            });
            if let Some(day) = retires_on(f.model.trim()) {
                ui.label("");
                ui.horizontal(|ui| {
                    ui.colored_label(
                        ui.visuals().warn_fg_color,
                        format!("{} stops working on {day}.", f.model.trim()),
                    );
                    if ui
                        .button(format!("Switch to {DEFAULT_TRANSCRIPTION_MODEL}"))
                        .clicked()
                    {
                        f.model = DEFAULT_TRANSCRIPTION_MODEL.to_owned();
                        switch_model = true;
                    }
                });
                ui.end_row();
            }
            if model_caps(f.model.trim()).delay {
                field(ui, "Delay", |ui| {
                    egui::ComboBox::from_id_salt("delay")
                        .selected_text(if f.delay.is_empty() {
                            "default"
                        } else {
                            &f.delay
                        })
                        .show_ui(ui, |ui| {
                            ui.selectable_value(&mut f.delay, String::new(), "default");
                            for d in DELAYS {
                                ui.selectable_value(&mut f.delay, (*d).to_owned(), *d);
                            }
                        })
                        .response
                });
            }
            field(ui, "Language", |ui| {
                ui.add(
                    egui::TextEdit::singleline(&mut f.language)
                        .hint_text("auto (or en; several: en, uk)"),
                )
            });
            field(ui, "Words Persyk should know (one per line)", |ui| {
                ui.add(egui::TextEdit::multiline(&mut f.keywords).desired_rows(2))
            });
            field(ui, "Noise reduction", |ui| {
                let label = |v: &str| match v {
                    "far_field" => "far field (room microphone)",
                    "off" => "off",
                    _ => "near field (headset, laptop)",
                };
                egui::ComboBox::from_id_salt("noise-reduction")
                    .selected_text(label(&f.noise_reduction))
                    .show_ui(ui, |ui| {
                        for v in ["", "far_field", "off"] {
                            ui.selectable_value(&mut f.noise_reduction, v.to_owned(), label(v));
                        }
                    })
                    .response
            });
            field(ui, "Microphone", |ui| {
                let selected = if f.device.is_empty() {
                    "System default".to_owned()
                } else if devices.is_some_and(|d| !d.contains(&f.device)) {
                    format!("{} (not connected)", f.device)
                } else {
                    f.device.clone()
                };
                egui::ComboBox::from_id_salt("microphone")
                    .selected_text(selected)
                    .width(280.0)
                    .show_ui(ui, |ui| {
                        ui.selectable_value(&mut f.device, String::new(), "System default");
                        match devices {
                            Some(list) => {
                                for d in list {
                                    ui.selectable_value(&mut f.device, d.clone(), d);
                                }
                            }
                            None => {
                                ui.label("Looking for microphones…");
                            }
                        }
                    })
                    .response
            });
            field(ui, "Sessions folder", |ui| {
                ui.add(egui::TextEdit::singleline(&mut f.directory).hint_text(&default_root))
            });
            field(ui, "Also search (one per line)", |ui| {
                ui.add(egui::TextEdit::multiline(&mut f.additional).desired_rows(2))
            });
            field(ui, "Pre-roll (ms)", |ui| {
                ui.add(egui::DragValue::new(&mut f.pre_roll_ms).range(0..=500))
            });
            field(ui, "Global hotkey", |ui| {
                ui.add(egui::TextEdit::singleline(&mut f.hotkey).hint_text("empty: no hotkey"))
            });
            ui.label("Hotkey mode");
            ui.horizontal(|ui| {
                ui.radio_value(&mut f.push_to_talk, false, "Toggle");
                ui.radio_value(&mut f.push_to_talk, true, "Push to talk");
            });
            ui.end_row();
            ui.label("Sounds");
            ui.checkbox(&mut f.sounds, "Play start and stop sounds");
            ui.end_row();
        });
        if *f != before {
            self.form_saved = false;
        }
        if ui.button("Save settings").clicked() || switch_model {
            self.pending.push(Action::SaveSettings);
        }
        if let Some(e) = &self.form_error {
            ui.colored_label(ui.visuals().error_fg_color, e);
        } else if self.form_saved {
            ui.label("Settings saved");
        }
        if let Some(note) = &self.hotkey_note {
            ui.colored_label(ui.visuals().warn_fg_color, note);
        }
    }

    /// No key yet and online recognition: both ways to start.
    fn first_run_ui(&mut self, ui: &mut egui::Ui) {
        let size = self
            .models
            .store
            .as_ref()
            .and_then(|s| s.find(DEFAULT_LOCAL_MODEL))
            .map(|m| format!(" ({})", fmt_mib(m.bytes)))
            .unwrap_or_default();
        let mut clicked = false;
        ui.group(|ui| {
            ui.strong("Welcome. Choose how Persyk turns speech into text:");
            ui.colored_label(
                ui.visuals().warn_fg_color,
                "Online: Persyk needs an OpenAI API key to transcribe. Paste it below: it is \
                 never written to a file or a session.",
            );
            ui.label(format!(
                "Offline: download the Whisper model {DEFAULT_LOCAL_MODEL}{size} once and \
                 dictate on this device, without a key or a network."
            ));
            clicked = ui
                .add_enabled(
                    self.models.store.is_some(),
                    egui::Button::new(format!(
                        "Download {DEFAULT_LOCAL_MODEL} and dictate offline"
                    )),
                )
                .clicked();
        });
        if clicked {
            self.pending.push(Action::OfflineFirstRun);
        }
    }

    /// "Recognition": online or on this device, the model picker and threads.
    fn recognition_ui(&mut self, ui: &mut egui::Ui) {
        let mut actions = Vec::new();
        let before = self.form.clone();
        ui.strong("Recognition");
        ui.horizontal(|ui| {
            ui.radio_value(&mut self.form.local, false, "OpenAI (online)");
            ui.radio_value(&mut self.form.local, true, "On this device (Whisper)");
        });
        if self.form.local {
            if self.models.store.is_some() && !self.models.asked {
                self.models.asked = true;
                if let Some(store) = self.models.store.clone() {
                    self.send(Command::ListModels { store });
                }
            }
            let f = &mut self.form;
            let m = &self.models;
            match &m.store {
                None => {
                    ui.colored_label(
                        ui.visuals().warn_fg_color,
                        "There is no data folder to keep models in; use a model file.",
                    );
                }
                Some(store) => {
                    ui.label(
                        RichText::new(format!("Models folder: {}", store.dir().display()))
                            .small()
                            .weak(),
                    );
                    for model in store.catalog() {
                        let state = m.rows.as_ref().and_then(|rows| {
                            rows.iter()
                                .find(|r| r.model.name == model.name)
                                .map(|r| r.state)
                        });
                        ui.push_id(model.name, |ui| {
                            ui.horizontal(|ui| {
                                let chosen = !f.use_model_file && f.local_model == model.name;
                                if ui
                                    .radio(
                                        chosen,
                                        format!("{} ({})", model.name, fmt_mib(model.bytes)),
                                    )
                                    .clicked()
                                {
                                    f.use_model_file = false;
                                    f.local_model = model.name.to_owned();
                                }
                                if let Some(p) = m.progress.get(model.name) {
                                    ui.add(
                                        egui::ProgressBar::new(p.fraction())
                                            .desired_width(120.0)
                                            .show_percentage(),
                                    );
                                    ui.label(match p.phase {
                                        Phase::Checking => {
                                            "Checking the partial download…".to_owned()
                                        }
                                        Phase::Downloading => format!(
                                            "Downloading {} of {}",
                                            fmt_mib(p.done_bytes),
                                            fmt_mib(p.total_bytes)
                                        ),
                                    });
                                    if ui.button("Cancel").clicked() {
                                        actions.push(Action::CancelDownload(model.name.to_owned()));
                                    }
                                    return;
                                }
                                match state {
                                    Some(ModelState::Installed) => {
                                        ui.label("Downloaded");
                                        if ui.button("Delete").clicked() {
                                            actions
                                                .push(Action::DeleteModel(model.name.to_owned()));
                                        }
                                    }
                                    Some(other) => {
                                        ui.label(match other {
                                            ModelState::Partial { bytes } => {
                                                format!("Partly downloaded ({})", fmt_mib(bytes))
                                            }
                                            ModelState::Damaged { .. } => {
                                                "Damaged: download it again".to_owned()
                                            }
                                            _ => "Not downloaded".to_owned(),
                                        });
                                        if ui.button("Download").clicked() {
                                            actions
                                                .push(Action::DownloadModel(model.name.to_owned()));
                                        }
                                        if matches!(
                                            other,
                                            ModelState::Partial { .. } | ModelState::Damaged { .. }
                                        ) && ui.button("Delete").clicked()
                                        {
                                            actions
                                                .push(Action::DeleteModel(model.name.to_owned()));
                                        }
                                    }
                                    None => {
                                        ui.label(RichText::new("…").weak());
                                    }
                                }
                            });
                            ui.label(RichText::new(model.description).small().weak());
                            if let Some((text, error)) = m.notes.get(model.name) {
                                let color = if *error {
                                    ui.visuals().error_fg_color
                                } else {
                                    ui.visuals().text_color()
                                };
                                ui.colored_label(color, text);
                            }
                        });
                    }
                }
            }
            if ui.radio(f.use_model_file, "Use a model file…").clicked() {
                f.use_model_file = true;
            }
            egui::Grid::new("local-model")
                .num_columns(2)
                .show(ui, |ui| {
                    field(ui, "Model file", |ui| {
                        ui.add_enabled(
                            f.use_model_file,
                            egui::TextEdit::singleline(&mut f.model_path)
                                .hint_text("/path/to/ggml-model.bin"),
                        )
                    });
                    field(ui, "Threads (0 = automatic)", |ui| {
                        ui.add(egui::DragValue::new(&mut f.local_threads).range(0..=64))
                    });
                });
        }
        if self.form != before {
            self.form_saved = false;
        }
        self.pending.extend(actions);
    }

    fn download_model(&mut self, name: String) {
        if let Some(store) = self.models.store.clone() {
            self.models.notes.remove(&name);
            let total = store.find(&name).map_or(0, |m| m.bytes);
            // Shown at once; the backend's reports replace it.
            self.models.progress.insert(
                name.clone(),
                Progress {
                    phase: Phase::Downloading,
                    done_bytes: 0,
                    total_bytes: total,
                },
            );
            self.send(Command::DownloadModel { store, name });
        }
    }

    fn save_settings(&mut self) {
        let settings = self.form.to_settings(&self.settings);
        if let Err(e) = settings.validate() {
            self.form_error = Some(e.to_string());
            return;
        }
        if let Err(e) = hotkey::parse(&settings.hotkey) {
            self.form_error = Some(e.to_string());
            return;
        }
        self.form_error = None;
        let key = self.form.api_key.trim();
        let api_key = (!key.is_empty()).then(|| key.to_owned());
        self.send(Command::SaveSettings {
            settings: Box::new(settings),
            api_key,
        });
    }
}

/// A grid row: a label and the widget it names (for screen readers and tests alike).
fn field(ui: &mut egui::Ui, label: &str, add: impl FnOnce(&mut egui::Ui) -> egui::Response) {
    let l = ui.label(label);
    add(ui).labelled_by(l.id);
    ui.end_row();
}

fn fmt_mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn describe_model_failure(code: &str) -> String {
    let hint = match code {
        "models.network" | "models.truncated" => "the connection dropped; Download resumes it",
        "models.disk-full" => "the disk is full; free some space, then Download resumes it",
        "models.hash-mismatch" => {
            "the file did not match its pinned checksum; nothing was installed"
        }
        "models.size-mismatch" => "the server sent a file of the wrong size; nothing was installed",
        "models.busy" => "it is being downloaded already",
        "models.http-status" => "the server refused",
        _ => "",
    };
    if hint.is_empty() {
        format!("Failed ({code})")
    } else {
        format!("Failed: {hint} ({code})")
    }
}

fn describe_start_failure(code: &str) -> String {
    let hint = match code {
        "credentials.no-key" => "no API key; add one in Settings",
        "credentials.store-unavailable" => "the secret store could not be read",
        "app.already-recording" => "a recording is already running",
        "capture.permission-denied" => "microphone access is off for Persyk",
        c if c.starts_with("capture.") => "the microphone could not be opened",
        c if c.starts_with("settings.") => "the settings are not valid",
        _ => "",
    };
    if hint.is_empty() {
        code.to_owned()
    } else {
        format!("{hint} ({code})")
    }
}

fn fmt_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

fn live_status(ui: &mut egui::Ui, l: &LiveRec, view: &EngineView) {
    ui.horizontal(|ui| {
        let state = match (&view.state, l.stopping) {
            (EngineState::Connecting, _) => "Connecting…".to_owned(),
            (EngineState::Streaming, false) => match &l.origin {
                AudioOrigin::Microphone => "Recording".to_owned(),
                AudioOrigin::File(_) => "Transcribing the saved recording".to_owned(),
            },
            (EngineState::Streaming, true) | (EngineState::Finishing, _) => "Finishing…".to_owned(),
            (EngineState::Halted(reason), _) => format!("Stopped: {reason}"),
            (EngineState::Finished, _) => "Finished".to_owned(),
        };
        if matches!(view.state, EngineState::Halted(_)) {
            ui.colored_label(ui.visuals().error_fg_color, state);
        } else {
            ui.label(state);
        }
        ui.label(fmt_elapsed(l.started.elapsed()));
        // The meter: RMS in dB, -60 dB … 0 dB.
        let level = l.live.level();
        let db = 20.0 * level.max(1e-6).log10();
        let fill = ((db + 60.0) / 60.0).clamp(0.0, 1.0);
        ui.add(
            egui::ProgressBar::new(fill)
                .desired_width(120.0)
                .text(RichText::new("level").small()),
        );
    });
    ui.label(
        RichText::new(format!("Saving to {}", l.session.display()))
            .small()
            .weak(),
    );
}

fn done_status(ui: &mut egui::Ui, d: &DoneRec) {
    let f = &d.finished;
    if d.discarded {
        ui.label("This session was deleted.");
        return;
    }
    if let Some(code) = &f.error {
        ui.colored_label(
            ui.visuals().error_fg_color,
            format!("The recording could not be finished ({code})"),
        );
    } else if f.complete {
        ui.label(format!(
            "Saved: {:.1} s, complete",
            f.duration_ms as f64 / 1000.0
        ));
    } else {
        ui.colored_label(
            ui.visuals().warn_fg_color,
            format!(
                "Saved: {:.1} s, incomplete{}",
                f.duration_ms as f64 / 1000.0,
                f.halted
                    .as_deref()
                    .map(|r| format!(" — {r}"))
                    .unwrap_or_default()
            ),
        );
    }
    match &d.clipboard {
        Some(Ok(())) => {
            ui.label("Copied to the clipboard");
        }
        Some(Err(reason)) => {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!("Copying failed ({reason}); the session is saved"),
            );
        }
        None if f.error.is_none() => {
            ui.label("Nothing to copy: no words were transcribed");
        }
        None => {}
    }
    ui.label(
        RichText::new(format!("Session: {}", f.session.display()))
            .small()
            .weak(),
    );
}

/// The canonical messages with gap markers, then provisional text.
fn transcript(
    ui: &mut egui::Ui,
    view: &EngineView,
    live: bool,
    removals: &HashMap<String, RemovalStatus>,
    actions: &mut Vec<Action>,
) {
    egui::ScrollArea::vertical()
        .stick_to_bottom(true)
        .auto_shrink([false, true])
        .show(ui, |ui| {
            let gap_marker = |ui: &mut egui::Ui, at: usize| {
                for _ in view.gap_at.iter().filter(|&&g| g == at) {
                    ui.label(RichText::new("[not transcribed]").italics().weak());
                }
            };
            for (i, m) in view.messages.iter().enumerate() {
                gap_marker(ui, i);
                ui.push_id(&m.entry_id, |ui| {
                    ui.horizontal_wrapped(|ui| {
                        let who = match m.speaker {
                            crate::realtime::ordering::Speaker::User => "",
                            _ => "Assistant: ",
                        };
                        if m.removed {
                            ui.label(RichText::new(format!("{who}{}", m.text)).strikethrough().weak());
                            ui.label(RichText::new("(removed)").small().weak());
                        } else {
                            ui.label(format!("{who}{}", m.text));
                            if ui.small_button("Copy").clicked() {
                                actions.push(Action::Copy(m.text.clone()));
                            }
                            let waiting = removals.get(&m.entry_id) == Some(&RemovalStatus::Waiting);
                            if live
                                && ui
                                    .add_enabled(!waiting, egui::Button::new("Remove").small())
                                    .clicked()
                            {
                                actions.push(Action::Remove(m.entry_id.clone()));
                            }
                        }
                    });
                    if let Some(status) = removals.get(&m.entry_id) {
                        ui.label(RichText::new(status.describe()).small());
                    }
                });
            }
            gap_marker(ui, view.messages.len());
            for (_, text) in &view.provisional {
                ui.horizontal_wrapped(|ui| {
                    ui.label(RichText::new(text).italics().color(Color32::GRAY));
                    ui.label(RichText::new("not yet saved").small().weak());
                });
            }
            if !live && !view.messages.is_empty() {
                ui.label(
                    RichText::new("Removal needs the live provider connection; it closed when the recording ended.")
                        .small()
                        .weak(),
                );
            }
        });
}

fn result_row(ui: &mut egui::Ui, row: &ResultRow, query: &str, actions: &mut Vec<Action>) {
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(&row.label).strong());
        if let Some(created) = &row.created {
            ui.label(RichText::new(short_date(created)).weak());
        }
        if row.duplicate_of.is_some() {
            ui.label(RichText::new("duplicate id").color(ui.visuals().warn_fg_color))
                .on_hover_text("Another folder holds a session with the same id");
        }
        if row.needs_recovery {
            ui.label(RichText::new("needs recovery").color(ui.visuals().warn_fg_color));
        } else if let Some(code) = row.diagnostic {
            ui.label(RichText::new(code).color(ui.visuals().warn_fg_color));
        }
    });
    if let Some(excerpt) = &row.excerpt {
        ui.label(highlighted(excerpt, query, ui.visuals()));
    }
    ui.horizontal(|ui| {
        if ui.button("Open").clicked() {
            actions.push(Action::Open(row.clone()));
        }
        if row.needs_recovery && ui.button("Recover").clicked() {
            actions.push(Action::Recover(row.location.clone()));
        }
    });
}

/// Loaded pages kept on either side of the ones in view.
const PAGES_KEPT: usize = 2;

/// Row heights of a virtualized list: measured once a row was laid out, estimated before.
/// Reset when the width changes (wrapping changes every height).
#[derive(Debug, Default)]
struct RowHeights {
    width: f32,
    heights: Vec<f32>,
}

/// A vertical list of `count` rows of varying height where only the rows in the visible
/// viewport are laid out (and so exposed to accessibility); the others take their measured
/// or estimated height.
fn virtual_rows(
    ui: &mut egui::Ui,
    count: usize,
    rows: &mut RowHeights,
    mut row: impl FnMut(&mut egui::Ui, usize),
) {
    egui::ScrollArea::vertical()
        .auto_shrink([false, false])
        .show_viewport(ui, |ui, viewport| {
            let width = ui.available_width();
            let estimate = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
            if rows.heights.len() != count || (rows.width - width).abs() > 0.5 {
                rows.heights = vec![estimate; count];
                rows.width = width;
            }
            let mut first = 0;
            let mut y = 0.0;
            while first < count && y + rows.heights[first] <= viewport.min.y {
                y += rows.heights[first];
                first += 1;
            }
            let top = ui.max_rect().top();
            let visible = egui::Rect::from_min_size(
                egui::pos2(ui.max_rect().left(), top + y),
                egui::vec2(width, (viewport.max.y - y).max(0.0) + 1.0),
            );
            ui.scope_builder(egui::UiBuilder::new().max_rect(visible), |ui| {
                let mut i = first;
                while i < count && y < viewport.max.y {
                    let before = ui.cursor().top();
                    ui.push_id(i, |ui| row(ui, i));
                    let h = (ui.cursor().top() - before).max(1.0);
                    rows.heights[i] = h;
                    y += h;
                    i += 1;
                }
            });
            let total: f32 = rows.heights.iter().sum();
            ui.set_min_height(total);
        });
}

fn opened_session(
    ui: &mut egui::Ui,
    opened: &OpenedSession,
    pages: &BTreeMap<usize, Vec<OpenedMessage>>,
    rows: &mut RowHeights,
    recording: bool,
    actions: &mut Vec<Action>,
) {
    let total = opened.pages.as_ref().map_or(0, |p| p.total);
    ui.horizontal(|ui| {
        if ui.button("Back to results").clicked() {
            actions.push(Action::CloseOpened);
        }
        // The backend reads the text page by page, only when asked.
        if total > 0 && ui.button("Copy all").clicked() {
            actions.push(Action::CopyAll);
        }
        for wav in &opened.retranscribable {
            if ui
                .add_enabled(!recording, egui::Button::new("Transcribe again"))
                .clicked()
            {
                actions.push(Action::TranscribeAgain(wav.clone()));
            }
        }
    });
    ui.label(
        RichText::new(format!(
            "{} (read-only, at leaf {})",
            opened.location.display(),
            opened.leaf.as_deref().unwrap_or("none")
        ))
        .small()
        .weak(),
    );
    if total == 0 {
        ui.label("No messages.");
    }
    let mut shown: Option<(usize, usize)> = None;
    virtual_rows(ui, total, rows, |ui, i| {
        let start = i - i % MAX_PAGE;
        shown = Some(shown.map_or((start, start), |(a, b)| (a.min(start), b.max(start))));
        let Some(m) = pages.get(&start).and_then(|p| p.get(i - start)) else {
            ui.label(RichText::new("…").weak());
            return;
        };
        ui.horizontal_wrapped(|ui| {
            if m.role != "user" {
                ui.label(RichText::new(format!("{}:", m.role)).weak());
            }
            ui.label(&m.text);
            if ui.small_button("Copy").clicked() {
                actions.push(Action::Copy(m.text.clone()));
            }
        });
    });
    if let Some((first, last)) = shown {
        actions.push(Action::ShowPages(first, last));
    }
}

/// `2026-11-30T22:30:20.123Z` → `2026-11-30 22:30`.
fn short_date(created: &str) -> String {
    match (created.get(..10), created.get(11..16)) {
        (Some(d), Some(t)) => format!("{d} {t}"),
        _ => created.to_owned(),
    }
}

/// `text` with every case-insensitive occurrence of `query` highlighted.
pub fn highlighted(text: &str, query: &str, visuals: &egui::Visuals) -> LayoutJob {
    let mut job = LayoutJob::default();
    let plain = egui::TextFormat {
        color: visuals.text_color(),
        ..Default::default()
    };
    let marked = egui::TextFormat {
        color: visuals.strong_text_color(),
        background: visuals.selection.bg_fill,
        ..Default::default()
    };
    for (range, hit) in match_ranges(text, query) {
        job.append(
            &text[range],
            0.0,
            if hit { marked.clone() } else { plain.clone() },
        );
    }
    job
}

/// Splits `text` into (byte range, is_match) runs for a case-insensitive literal `query`.
pub fn match_ranges(text: &str, query: &str) -> Vec<(std::ops::Range<usize>, bool)> {
    let q: Vec<char> = query.chars().flat_map(char::to_lowercase).collect();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut plain_start = 0;
    let mut i = 0;
    while !q.is_empty() && i < chars.len() {
        // Compare lowercased chars starting at i.
        let mut folded = Vec::with_capacity(q.len());
        let mut j = i;
        while j < chars.len() && folded.len() < q.len() {
            folded.extend(chars[j].1.to_lowercase());
            j += 1;
        }
        if folded == q {
            let start = chars[i].0;
            let end = chars.get(j).map_or(text.len(), |c| c.0);
            if plain_start < start {
                out.push((plain_start..start, false));
            }
            out.push((start..end, true));
            plain_start = end;
            i = j;
        } else {
            i += 1;
        }
    }
    if plain_start < text.len() {
        out.push((plain_start..text.len(), false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The opened session's list lays out (and exposes to accessibility) only the rows in
    /// view, whatever the number of messages; scrolling brings later rows in.
    #[test]
    fn issue15_virtual_rows_lay_out_only_what_is_visible() {
        use egui_kittest::Harness;
        use egui_kittest::kittest::Queryable;
        let rows = std::cell::RefCell::new(RowHeights::default());
        let laid_out = std::cell::Cell::new(0usize);
        let mut harness = Harness::builder()
            .with_size(egui::vec2(400.0, 300.0))
            .build_ui(|ui| {
                laid_out.set(0);
                virtual_rows(ui, 2_000, &mut rows.borrow_mut(), |ui, i| {
                    laid_out.set(laid_out.get() + 1);
                    ui.label(format!("message number {i} with some text to wrap around"));
                });
            });
        harness.run();
        let exposed = harness
            .query_all_by_label_contains("message number")
            .count();
        assert!(exposed > 0 && exposed < 60, "{exposed} rows exposed");
        assert!(laid_out.get() < 60, "{} rows laid out", laid_out.get());
        assert!(
            harness
                .query_by_label_contains("message number 0 ")
                .is_some()
        );
        assert!(
            harness
                .query_by_label_contains("message number 1999 ")
                .is_none()
        );
        // Rows not laid out keep an estimated height: the list is as tall as all its rows.
        let rows = rows.borrow();
        let heights = &rows.heights;
        assert_eq!(heights.len(), 2_000);
        assert!(heights.iter().all(|&h| h > 1.0));
    }

    #[test]
    fn match_ranges_are_case_insensitive_and_cover_the_text() {
        let r = match_ranges("Hello hello HELLO!", "hello");
        assert_eq!(
            r,
            vec![
                (0..5, true),
                (5..6, false),
                (6..11, true),
                (11..12, false),
                (12..17, true),
                (17..18, false)
            ]
        );
        assert_eq!(match_ranges("Straße", "STRASSE"), vec![(0..7, false)]);
        assert_eq!(
            match_ranges("ÄBC äbc", "äb"),
            vec![(0..3, true), (3..5, false), (5..8, true), (8..9, false)]
        );
        assert_eq!(match_ranges("abc", ""), vec![(0..3, false)]);
    }

    #[test]
    fn settings_form_round_trips_and_keeps_unknown_keys() {
        let mut s = Settings::default();
        s.other.insert("future".into(), serde_json::json!({"x": 1}));
        let form = SettingsForm::from_settings(&s, false);
        let back = form.to_settings(&s);
        assert_eq!(back.other, s.other);
        assert_eq!(back.provider, s.provider);
        assert_eq!(back.sessions, s.sessions);
        assert_eq!(back.hotkey.keys.as_deref(), Some("Alt+Space"));
    }

    #[test]
    fn the_recognition_choice_round_trips() {
        let s = Settings::default();
        let mut form = SettingsForm::from_settings(&s, false);
        assert!(!form.local);
        assert_eq!(form.local_model, DEFAULT_LOCAL_MODEL);
        // The default model is not written out; another one, a file and threads are.
        form.local = true;
        let back = form.to_settings(&s);
        assert_eq!(back.recognition.engine, RecognitionEngine::Local);
        assert_eq!(back.recognition.local_model, None);
        form.local_model = "small.en".into();
        form.local_threads = 4;
        let back = form.to_settings(&s);
        assert_eq!(back.recognition.local_model.as_deref(), Some("small.en"));
        assert_eq!(back.recognition.local_threads, Some(4));
        form.use_model_file = true;
        form.model_path = " /m/ggml-x.bin ".into();
        let back = form.to_settings(&s);
        assert_eq!(
            back.recognition.local_model.as_deref(),
            Some("/m/ggml-x.bin")
        );
        let again = SettingsForm::from_settings(&back, false);
        assert!(again.use_model_file && again.local);
        assert_eq!(again.model_path, "/m/ggml-x.bin");
        assert_eq!(again.local_threads, 4);
    }

    #[test]
    fn the_sounds_choice_round_trips() {
        let s = Settings::default();
        let mut form = SettingsForm::from_settings(&s, false);
        assert!(form.sounds);
        // On is the default and is not written out; off is.
        assert_eq!(form.to_settings(&s).feedback.sounds, None);
        form.sounds = false;
        let back = form.to_settings(&s);
        assert_eq!(back.feedback.sounds, Some(false));
        assert!(!back.feedback.sounds_enabled());
        let mut again = SettingsForm::from_settings(&back, false);
        assert!(!again.sounds);
        again.sounds = true;
        assert_eq!(again.to_settings(&back).feedback.sounds, Some(true));
    }
}
