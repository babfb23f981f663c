//! The window's content: dictation, search and settings, rendered from a view model.
//!
//! [`PersykUi`] owns the UI state only. It sends [`Command`]s to the backend and applies the
//! [`Update`]s it gets back in [`PersykUi::process`] (called every frame and, while the
//! window is hidden, from the shell's `logic`). Rendering collects [`Action`]s and applies
//! them after the frame's layout, so no widget code mutates domain state.
//!
//! Code map: this file holds the state ([`PersykUi`], the recording and search state, the
//! [`Action`]s), the control surface the shell and tests drive, backend updates and the page
//! header. One module per page renders it: [`dictation`] (start/stop, live transcript,
//! finished recording), [`history`] (search and the opened session), [`settings`] (the form,
//! recognition and models) with [`after_dictation`] (copy or paste, and the
//! paste outcome under a finished recording), [`onboarding`] (the welcome card, what keeps
//! Start from working and its fix, model download progress and failures, problem sentences).
//! Shared pieces: [`widgets`] (labelled fields,
//! match highlighting, form rows and sections), [`style`] (the visual language: spacing,
//! type, light/dark colours, painted icons; installed once by the shell) and
//! [`virtual_list`] (rows laid out only when in view). Pages are `impl PersykUi` blocks in
//! their module, so the state stays in one place. [`indicator`] is the recording
//! indicator's content (a window of its own, shown by the shell).
//!
//! Invariants:
//! - Provisional text is drawn marked "not yet saved" and has no copy or remove control.
//! - The clipboard only ever receives canonical text: a finished recording's surviving user
//!   text, a published message, an opened session's saved message, or a result row's or a
//!   "Recent" entry's surviving user text (read from the saved session). Only a finished
//!   recording's text is ever pasted (`Effects::deliver_transcript`), and not while
//!   Persyk's own window has keyboard focus.
//! - No timer runs while idle: repaints are requested only while a recording runs (meter and
//!   elapsed time), a search is debouncing or a recording plays back (its position).
//! - One playback at a time, never during a recording: the opened session's Play asks the
//!   backend for the samples (`Command::ReadClip`), an answer for an older request is dropped,
//!   and the [`Player`] gets them; closing or leaving the session, or starting a dictation,
//!   stops it.
//! - Model downloads run in the backend; the Settings page only shows their `ModelProgress`
//!   updates (the backend's waker repaints) and sends Download / Cancel / Delete. Until one
//!   dictation has worked a welcome card offers both a key (checked at once) and an offline
//!   download of the default model; recognition moves to the device only once that model is
//!   installed and verified.
//! - An opened session's messages are a virtualized list ([`virtual_list::virtual_rows_budgeted`]): only the rows in
//!   view are laid out and exposed to accessibility, others keep a measured or estimated
//!   height. Messages come from the backend a page (≤ `MAX_PAGE`) at a time as rows come
//!   into view; pages more than [`history::PAGES_KEPT`] away are dropped; "Copy all" asks the backend,
//!   which reads page by page. A frame lays out at most [`history::NEW_TEXT_PER_FRAME`]
//!   characters of messages it did not lay out the frame before (at least one message).
//! - The Search page's result rows are a virtualized list as well (with "More results" as
//!   its last row); ↑/↓ scroll the selected row into view from the measured heights.
//! - The Dictation page's transcript (live or finished) is the same kind of list: a long
//!   recording lays out only the rows in view, and the list follows its end while the end
//!   is in view.

mod after_dictation;
mod cleanup;
mod dictation;
mod files;
mod history;
pub mod indicator;
mod onboarding;
mod settings;
pub mod style;
pub mod updates;
mod virtual_list;
mod widgets;

pub use settings::{
    FN_EMOJI_HELP, LOCAL_VOCABULARY, MODIFIER_ALONE_HELP, OPEN_INPUT_MONITORING, PRE_ROLL_CAPTION,
    SettingsForm, hotkey_in_use,
};
pub use widgets::{highlighted, match_ranges};

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use eframe::egui::{self, Color32, RichText};

use self::virtual_list::{ListOptions, RowHeights, virtual_rows_budgeted, virtual_rows_with};
use self::widgets::field;
use super::backend::{BackendHandle, ShutdownStatus};
use super::effects::{Delivered, Effects, first_words};
use super::event::TrayState;
use super::hotkey;
use super::model::{
    AudioOrigin, Command, Finished, Fix, Live, OpenedMessage, OpenedSession, Problem, RECENT_LEN,
    RecentItem, ResultRow, SearchResults, Update, Waker, problem,
};
use super::paste::{Delivery, PasteAvailability, PasteError};
use super::playback::{OutputPlayer, Player, PlayerState};
use crate::audio::clip::ClipRequest;
use crate::local::models::DEFAULT_LOCAL_MODEL;
use crate::local::models::{ModelInfo, ModelState, ModelStore, Phase, Progress};
use crate::realtime::protocol::{
    DEFAULT_TRANSCRIPTION_MODEL, DELAYS, TRANSCRIPTION_MODELS, model_caps, retires_on,
};
use crate::recognize::{EngineState, EngineView, RemovalOutcome};
use crate::session::history::MAX_PAGE;
use crate::settings::{HotkeyMode, RecognitionEngine, Settings, ThemeChoice};

/// Quiet time after typing before a search runs.
pub const SEARCH_DEBOUNCE: Duration = Duration::from_millis(250);
/// Repaint cadence while a recording runs (level meter, elapsed time).
const LIVE_REPAINT: Duration = Duration::from_millis(100);
/// Repaint cadence while a recording plays back (its position, and its end).
const PLAYBACK_REPAINT: Duration = Duration::from_millis(250);

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
    origin: AudioOrigin,
    live: Live,
    started: Instant,
    stopping: bool,
    /// Recognized by the online provider (removal needs its connection).
    online: bool,
    /// Saved, and a model is cleaning up the words (Esc delivers them as spoken).
    cleaning: bool,
    /// Stopped as a cancel: nothing is delivered; Undo keeps it for a while.
    cancelled: bool,
    /// The clean-up mode of this recording, when it asks a model.
    cleanup: Option<&'static str>,
}

/// A cancelled recording, saved and kept until `until` for an Undo, then deleted.
struct CancelledRec {
    finished: Finished,
    view: Option<EngineView>,
    online: bool,
    until: Instant,
}

/// How long a cancelled recording waits for an Undo before it is deleted.
pub const UNDO_FOR: Duration = Duration::from_secs(5);

struct DoneRec {
    finished: Finished,
    /// The engine's final view (messages with removals, gaps), when the engine ran.
    view: Option<EngineView>,
    clipboard: Option<Result<(), String>>,
    /// The paste into the active app, when "After dictation" asked for one.
    paste: Option<Result<(), PasteError>>,
    /// The delivery (copy and paste) still running off the UI thread, by its id.
    delivering: Option<u64>,
    discarded: bool,
    /// Recognized by the online provider: after the recording, removal is no longer offered
    /// (the transcript says why).
    online: bool,
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
    /// The result row it was opened from (its date and recorded length head the page).
    opened_from: Option<ResultRow>,
    /// Measured row heights of the opened session's virtualized list.
    opened_rows: RowHeights,
    /// Measured row heights of the results list (virtualized too).
    result_rows: RowHeights,
    /// Loaded pages of the opened session, by first message; only those near the view.
    opened_pages: BTreeMap<usize, Vec<OpenedMessage>>,
    /// Pages asked of the backend and not answered yet.
    pages_asked: HashSet<usize>,
    /// Pages of opened sessions received since the window opened (benches count them).
    pages_received: u64,
    /// Counts opens: pages of an earlier open are dropped.
    open_generation: u64,
    opening: bool,
    message: Option<(String, bool)>,
    /// The stable code behind an error `message`: its details line (also logged).
    details: Option<String>,
    /// The row ↑/↓ selected (Enter opens it, ⌘C copies it).
    selected: Option<usize>,
    /// Scroll the selected row into view next frame.
    scroll_to_selected: bool,
    /// Give the search field the keyboard focus next frame.
    focus_query: bool,
    /// Each row's local day, time and duration (beside `results.rows`).
    times: Vec<history::RowTime>,
}

impl SearchState {
    /// An error said as a sentence; its code goes to the details line and the log.
    fn failed(&mut self, sentence: &str, code: String) {
        // Not a fault of the session: say what to wait for.
        let sentence = if code == "sync.recording-elsewhere" {
            "Another Mac is recording this session right now; try again when it stops."
        } else {
            sentence
        };
        eprintln!("persyk: {sentence} ({code})");
        self.message = Some((sentence.to_owned(), true));
        self.details = Some(code);
    }
}

/// What plays back in the opened session: a whole recording (its WAV asset) or a message
/// (its entry id).
#[derive(Debug, Clone, PartialEq, Eq)]
enum PlayKey {
    Recording(String),
    Message(String),
}

/// The playback the window asked for: its samples are being read (`loading`), then the
/// player plays them.
#[derive(Debug)]
struct PlaybackView {
    key: PlayKey,
    /// Answers of earlier requests are dropped.
    generation: u64,
    loading: bool,
}

/// What a click asks for; applied after the frame's layout.
enum Action {
    Page(Page),
    Start,
    Stop,
    /// Deliver the words as spoken now, without waiting for the clean-up.
    CancelCleanup,
    /// Keep the recording just cancelled and deliver it.
    UndoCancel,
    Copy(String),
    Remove(String),
    OpenMicrophoneSettings,
    /// "After dictation": paste was chosen (ask for access), or open the Accessibility pane.
    AfterDictation(after_dictation::AfterDictationRequest),
    AskDiscard,
    /// A history row's or the opened session's "Delete…": ask first.
    AskDelete(PathBuf),
    ConfirmDiscard,
    CancelDiscard,
    /// Search: delete every session without messages or audio (older versions left one
    /// per failed start).
    DeleteEmpty,
    TranscribeAgain(PathBuf),
    Open(ResultRow),
    CloseOpened,
    /// Stream every user message of the opened session to the clipboard.
    CopyAll,
    /// "Copy all as spoken": the user's words without clean-ups.
    CopyAllAsSpoken,
    /// "Clean up again" the opened session.
    CleanUpAgain,
    /// "Use my words" on a stored clean-up of the opened session (its entry id).
    UseMyWords(String),
    /// Copy a result row's surviving text without opening it.
    CopyRow(ResultRow),
    /// The first and last page (by first message) of the opened session in view.
    ShowPages(usize, usize),
    /// Play a recording or a message's stretch of it (stopping any other playback).
    Play(PlayKey, ClipRequest),
    StopPlayback,
    MoreResults,
    Recover(PathBuf),
    SaveSettings,
    DownloadModel(String),
    CancelDownload(String),
    DeleteModel(String),
    /// Download the default model and switch recognition to it once it is installed and
    /// verified (the welcome card's and the Dictation page's "Download base.en").
    GetDefaultModel,
    /// The button beside a problem's sentence.
    Fix(Fix),
    /// The welcome card's "Use this key": check the typed key with the provider.
    CheckKey,
    /// Leave Settings for the Dictation page (the welcome card, once ready).
    GoToDictation,
    /// "Check now" (Settings › Updates).
    CheckUpdates,
    /// A verified release's "What's new" or "Download": opened in the browser.
    OpenLink(String),
    /// "Transcribe a File…" (the system's panel).
    ChooseFiles,
    /// Transcribe these files, one after another.
    TranscribeFiles(Vec<PathBuf>),
    /// Stop the file being transcribed (its words so far are kept).
    CancelFile,
}

/// Why no recognizer can run now: the Dictation page says it in one sentence with the
/// button that fixes it, and Start is disabled with that sentence as its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blocker {
    /// Online recognition and no API key.
    NoKey,
    /// On-device recognition and the chosen catalog model is not installed.
    ModelMissing,
    /// On-device recognition and the chosen model is downloading.
    ModelDownloading,
}

/// The welcome card's key check.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KeyCheck {
    Checking,
    /// The provider's answer (`None`: accepted) and whether the key was kept.
    Done {
        code: Option<String>,
        stored: bool,
    },
}

/// A Settings section a fix scrolls to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SettingsSection {
    Recognition,
    Microphone,
    Updates,
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
    /// The last failure per model (a stable code): its sentence and what to do next.
    failures: HashMap<String, String>,
    /// When each running download's first report in the downloading phase arrived, and its
    /// bytes then: the speed and the time left are measured from there.
    since: HashMap<String, (Instant, u64)>,
    /// The model whose install switches recognition to the device (the welcome card's and
    /// the Dictation page's download): the engine changes only once it is verified.
    switch_when_installed: Option<String>,
}

/// Settings › Startup: the login item and what the system last said about it.
struct AutostartView {
    /// Persyk's login item (`None`: there is none here; `unavailable` says why).
    item: Option<super::autostart::LoginItem>,
    unavailable: String,
    /// The system's answer (`None`: not read yet).
    state: Option<Result<super::autostart::AutostartState, super::autostart::AutostartError>>,
    /// Read back since the Settings page was last shown.
    asked: bool,
    /// A read or change is running (the checkbox waits for it).
    busy: bool,
}

impl AutostartView {
    fn new(item: Result<super::autostart::LoginItem, super::autostart::AutostartError>) -> Self {
        let (item, unavailable) = match item {
            Ok(item) => (Some(item), String::new()),
            Err(e) => {
                eprintln!("persyk: start at login: {e}");
                (None, e.sentence().to_owned())
            }
        };
        AutostartView {
            item,
            unavailable,
            state: None,
            asked: false,
            busy: false,
        }
    }
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
    /// The app in front when the last dictation started (Settings › Clean-up offers to give
    /// it a mode of its own).
    last_app: Option<String>,
    /// The clean-up mode the dictation being started asked for (the "Dictate + clean"
    /// shortcut), shown on the indicator until the backend says which mode it runs.
    starting_cleanup: Option<crate::cleanup::settings::CleanupMode>,
    /// The newest transcriptions (newest first, at most [`RECENT_LEN`]) for the menu-bar
    /// menu: read from the history at start, then each finished recording goes first.
    recent: Vec<RecentItem>,
    /// A one-line status (text, is_error) under the page tabs.
    notice: Option<(String, bool)>,
    /// The session a confirmation dialog asks about deleting (the one just recorded, or a
    /// history row).
    confirm_discard: Option<PathBuf>,
    search: SearchState,
    /// Measured row heights of the transcript on the Dictation page (live or finished).
    transcript_rows: RowHeights,
    settings: Settings,
    form: SettingsForm,
    form_error: Option<String>,
    /// A problem with the settings file found at start ("code: message"), until a save.
    settings_note: Option<String>,
    form_saved: bool,
    settings_generation: u64,
    /// Shown on the dictation page when the microphone cannot be used (macOS permission).
    microphone_note: Option<String>,
    /// Shown at the top when the tray icon is unavailable.
    tray_note: Option<String>,
    /// Shown in Settings when the hotkey could not be registered.
    pub hotkey_note: Option<String>,
    /// The dictation key is a modifier alone and macOS refused to let Persyk observe the
    /// keyboard: Settings offers the Input Monitoring pane.
    pub hotkey_needs_input_monitoring: bool,
    /// "Open Input Monitoring settings" was clicked (acted on after the page's pass).
    open_input_monitoring: bool,
    /// Shown in Settings when the paste-last shortcut could not be registered.
    pub paste_hotkey_note: Option<String>,
    /// Shown in Settings when the Dictate + clean shortcut could not be registered.
    pub clean_hotkey_note: Option<String>,
    /// The "Paste last transcription" delivery running off the UI thread, by its id.
    paste_last_delivering: Option<u64>,
    /// Settings › Startup (start at login).
    autostart: AutostartView,
    /// Settings › Updates: the last update check.
    updates: updates::UpdateView,
    /// Settings › Shortcut: the key recorder.
    recorder: settings::Recorder,
    pending: Vec<Action>,
    /// Stop as soon as the starting recording arrives.
    stop_on_start: bool,
    /// ... and as a cancel.
    cancel_on_start: bool,
    /// The recording just cancelled, while its Undo lasts.
    cancelled: Option<CancelledRec>,
    /// Input devices for the Settings page (asked for once, when the page first shows).
    devices: Option<Vec<String>>,
    devices_asked: bool,
    /// Quitting: the window shows "Finishing…" until the backend has stopped.
    quitting: bool,
    /// The starting recording waits for the user's answer to the microphone prompt.
    waiting_permission: bool,
    /// The history already holds a dictation with words in it, or one finished in this run
    /// (the welcome card is shown until then).
    dictation_worked: bool,
    /// The history's answer about that has arrived (nothing is shown before it).
    history_known: bool,
    /// The welcome card's API key field (checked with the provider, never saved unchecked).
    welcome_key: String,
    key_check: Option<KeyCheck>,
    /// Give the welcome card's key field the keyboard focus next frame.
    focus_key: bool,
    /// Scroll Settings to this section next frame.
    scroll_to: Option<SettingsSection>,
    /// A notification could not be shown (a content-free reason): Settings says so once.
    notifications_off: Option<String>,
    /// Conflict copies of the settings shared between Macs, waiting for the user, and why
    /// the shared file could not be used, if it could not (issue #37 item 6).
    shared_conflicts: Vec<String>,
    shared_problem: Option<&'static str>,
    /// The theme choice last applied to the context (`None`: none yet).
    applied_theme: Option<ThemeChoice>,
    /// The settings the form last asked to save (or as loaded) and the key typed then: a
    /// change from these is saved (Settings apply when made).
    sent: Settings,
    sent_key: String,
    /// The clean-up server key typed when the form was last saved.
    sent_cleanup_key: String,
    /// The Settings key last sent to be checked (each typed key is checked once).
    checked_key: String,
    /// Saves asked and not answered yet, oldest first, with whether a key went along.
    saving: VecDeque<(Settings, bool)>,
    /// Where the API key is kept (said on the Settings page).
    key_storage: Option<crate::credentials::KeyStorage>,
    models: ModelsView,
    /// Whether pasting can work here (Settings → After dictation).
    paste_availability: PasteAvailability,
    /// The user said Accessibility access is on ("I turned it on") and macOS still says no:
    /// the section says to remove Persyk from the list and add it again (issue #25 item 7).
    access_claimed: bool,
    /// Persyk's own window has keyboard focus (as of the last frame): a finished recording
    /// is then copied, not pasted — there is no other app to paste into.
    window_focused: bool,
    /// Plays recordings back (the default output device; tests substitute a recorder).
    player: Box<dyn Player>,
    /// The playback asked for, while it is read or plays (one at a time).
    playback: Option<PlaybackView>,
    playback_generation: u64,
    /// Why the last playback could not play (a sentence, and its code for the details line),
    /// shown in the opened session until the next Play or until it closes.
    playback_note: Option<(&'static str, String)>,
    /// Files transcribed from the window (issue #38).
    files: files::FilesView,
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
        let paste_availability = effects.paste_availability();
        let wake = waker.clone();
        let player = Box::new(OutputPlayer::new(move || wake.wake()));
        let mut ui = PersykUi {
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
            confirm_discard: None,
            search: SearchState::default(),
            transcript_rows: RowHeights::default(),
            settings,
            form,
            form_error: None,
            settings_note: None,
            form_saved: false,
            settings_generation: 0,
            microphone_note: None,
            tray_note: None,
            hotkey_note: None,
            hotkey_needs_input_monitoring: false,
            open_input_monitoring: false,
            paste_hotkey_note: None,
            clean_hotkey_note: None,
            paste_last_delivering: None,
            autostart: AutostartView::new(super::autostart::LoginItem::system()),
            updates: updates::UpdateView::default(),
            recorder: settings::Recorder::default(),
            pending: Vec::new(),
            stop_on_start: false,
            cancel_on_start: false,
            cancelled: None,
            devices: None,
            devices_asked: false,
            quitting: false,
            waiting_permission: false,
            key_storage: None,
            models: ModelsView {
                store: ModelStore::from_env().ok(),
                ..ModelsView::default()
            },
            paste_availability,
            access_claimed: false,
            window_focused: false,
            recent: Vec::new(),
            dictation_worked: false,
            history_known: false,
            last_app: None,
            starting_cleanup: None,
            welcome_key: String::new(),
            key_check: None,
            focus_key: false,
            scroll_to: None,
            notifications_off: None,
            shared_conflicts: Vec::new(),
            shared_problem: None,
            applied_theme: None,
            sent: Settings::default(),
            sent_key: String::new(),
            sent_cleanup_key: String::new(),
            checked_key: String::new(),
            saving: VecDeque::new(),
            player,
            playback: None,
            playback_generation: 0,
            playback_note: None,
            files: files::FilesView::default(),
        };
        ui.sent = ui.form.to_settings(&ui.settings);
        ui.send(Command::Recent { limit: RECENT_LEN });
        ui.list_models();
        ui
    }

    /// Asks what the models folder holds (the Dictation page needs it to know whether the
    /// chosen model is there).
    fn list_models(&mut self) {
        if let Some(store) = self.models.store.clone() {
            self.models.asked = true;
            self.send(Command::ListModels { store });
        }
    }

    // -----------------------------------------------------------------------------------
    // Control from the shell (tray, hotkey) and tests.

    pub fn page(&self) -> Page {
        self.page
    }

    /// Pages of opened sessions received from the backend so far: a bench tells the frames
    /// where a page arrived from the others.
    #[doc(hidden)]
    pub fn pages_received(&self) -> u64 {
        self.search.pages_received
    }

    pub fn show_page(&mut self, page: Page) {
        if page == Page::Settings && self.page != Page::Settings {
            // The login item is the system's: read it back each time Settings shows.
            self.autostart.asked = false;
        }
        if page == Page::Search && self.page != Page::Search {
            self.search.edited_at = None;
            self.search.focus_query = true;
            self.run_search();
        }
        self.page = page;
    }

    /// Whether the history's answer about earlier dictations has arrived: until then the
    /// welcome card is not shown (tests wait for it before they click by position).
    pub fn history_known(&self) -> bool {
        self.history_known
    }

    pub fn is_recording(&self) -> bool {
        matches!(self.dictation, Dictation::Starting | Dictation::Live(_))
    }

    pub fn start(&mut self) {
        self.start_with(None);
    }

    /// Starts a dictation whose words go through `cleanup` (the "Dictate + clean"
    /// shortcut), or through the usual mode (`None`).
    pub fn start_with(&mut self, cleanup: Option<crate::cleanup::settings::CleanupMode>) {
        if !self.is_recording() {
            self.stop_playback();
            self.send(Command::Start { cleanup });
            self.starting_cleanup = cleanup;
            self.stop_on_start = false;
            self.removals.clear();
            self.confirm_discard = None;
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

    /// Plays recordings with `player` from now on (tests substitute a recorder).
    pub fn set_player(&mut self, player: Box<dyn Player>) {
        self.stop_playback();
        self.player = player;
    }

    /// Whether a recording is being played back (or read to be played).
    pub fn is_playing(&self) -> bool {
        self.playback.is_some()
    }

    /// Stops any playback at once.
    pub fn stop_playback(&mut self) {
        self.playback_note = None;
        if self.playback.take().is_some() {
            self.player.stop();
        }
    }

    /// A playback could not play: said in the opened session; the code goes to its details
    /// line and the log.
    fn playback_failed(&mut self, sentence: &'static str, code: String) {
        eprintln!("persyk: {sentence} ({code})");
        self.playback = None;
        self.playback_note = Some((sentence, code));
    }

    /// Asks the backend for the samples of `clip` in the opened session; they play when they
    /// arrive (`Update::Clip`). Never while recording.
    fn play(&mut self, key: PlayKey, clip: ClipRequest) {
        let Some(location) = self.search.opened.as_ref().map(|o| o.location.clone()) else {
            return;
        };
        if self.is_recording() {
            return;
        }
        self.stop_playback();
        self.playback_generation += 1;
        let generation = self.playback_generation;
        match self.backend.send(Command::ReadClip {
            location,
            clip,
            generation,
        }) {
            Ok(()) => {
                self.playback = Some(PlaybackView {
                    key,
                    generation,
                    loading: true,
                });
            }
            Err(e) => self.notice = Some((e.to_string(), true)),
        }
    }

    /// Follows the player: a playback that ended or failed is over (a failure is said as a
    /// sentence); one that plays repaints for its position.
    fn follow_playback(&mut self, ctx: &egui::Context) {
        if self.playback.as_ref().is_none_or(|p| p.loading) {
            return;
        }
        match self.player.state() {
            PlayerState::Playing { .. } => ctx.request_repaint_after(PLAYBACK_REPAINT),
            PlayerState::Idle => self.playback = None,
            PlayerState::Failed(e) => self.playback_failed(e.sentence(), e.code().to_owned()),
        }
    }

    /// `0:03 / 0:10` while something plays.
    fn playback_position(&self) -> Option<String> {
        match (self.playback.as_ref(), self.player.state()) {
            (
                Some(p),
                PlayerState::Playing {
                    position_ms,
                    length_ms,
                },
            ) if !p.loading => Some(format!(
                "{} / {}",
                history::format_duration(position_ms),
                history::format_duration(length_ms)
            )),
            _ => None,
        }
    }

    /// Cancels the running recording (Esc, the indicator's ✕): it is saved as a stop saves
    /// it, nothing is copied or pasted, and it is deleted after [`UNDO_FOR`] unless Undo.
    pub fn cancel(&mut self) {
        match &mut self.dictation {
            Dictation::Live(l) if !l.stopping => {
                l.stopping = true;
                l.cancelled = true;
                self.send(Command::CancelRecording);
            }
            Dictation::Starting => {
                self.stop_on_start = true;
                self.cancel_on_start = true;
            }
            _ => {}
        }
    }

    /// The clean-up mode for the next dictations (the menu's "Clean-up" submenu): saved at
    /// once when it has what it needs. A model mode without a server is set in the form and
    /// Settings › Clean-up asks for the server; returns false then.
    pub fn set_cleanup_mode(&mut self, mode: crate::cleanup::settings::CleanupMode) -> bool {
        self.form.cleanup.mode = mode;
        if self.form.cleanup.is_complete() {
            self.save_settings();
            true
        } else {
            self.notice = Some((
                format!(
                    "{} needs a model server: add one in Settings › Clean-up.",
                    mode.label()
                ),
                true,
            ));
            false
        }
    }

    /// Opens `location` again at its default leaf when it is the session shown (a write to
    /// it — a clean-up or its removal — moved its tip).
    fn reopen_if_shown(&mut self, location: PathBuf) {
        if self
            .search
            .opened
            .as_ref()
            .is_some_and(|o| o.location == location)
        {
            self.search.opening = true;
            self.send(Command::Open {
                location,
                leaf: None,
            });
        }
    }

    /// Whether Esc does something now: cancel a recording, or skip a running clean-up.
    pub fn escape_means_something(&self) -> bool {
        matches!(&self.dictation, Dictation::Live(l) if !l.stopping || l.cleaning)
    }

    /// Esc (in the window, or grabbed globally while the indicator shows): cancels the
    /// recording, or during a clean-up delivers the words as spoken.
    pub fn escape(&mut self) {
        match &self.dictation {
            Dictation::Live(l) if l.cleaning => self.send(Command::CancelCleanup),
            Dictation::Live(l) if !l.stopping => self.cancel(),
            _ => {}
        }
    }

    /// Undo of a cancel: the recording is kept and delivered as a stop would have.
    pub fn undo_cancel(&mut self) {
        if let Some(c) = self.cancelled.take() {
            self.deliver(c.finished, c.view, c.online);
        }
    }

    /// Whether a cancelled recording is waiting for an Undo.
    pub fn undo_pending(&self) -> bool {
        self.cancelled.is_some()
    }

    /// Deletes a cancelled recording once its Undo time is over (through the store's
    /// whole-session deletion, as Discard does); until then, wakes the window to count down.
    fn expire_cancelled(&mut self, ctx: &egui::Context) {
        let Some(c) = &self.cancelled else { return };
        let left = c.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            if let Some(c) = self.cancelled.take() {
                self.send(Command::Discard {
                    session: c.finished.session,
                });
            }
        } else {
            ctx.request_repaint_after(left.min(Duration::from_millis(250)));
        }
    }

    pub fn toggle(&mut self) {
        if self.is_recording() {
            self.stop();
        } else {
            self.start();
        }
    }

    /// Whether the Settings API key field is empty (a kept key leaves it).
    pub fn settings_form_key_is_empty(&self) -> bool {
        self.form.api_key.is_empty()
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

    /// Whether Settings is recording a shortcut: the shell lets go of its global grabs
    /// meanwhile, so the combination in use can be pressed into the recorder. A window that
    /// loses the keyboard stops the recorder (see `process`).
    pub fn is_recording_shortcut(&self) -> bool {
        self.recorder.target.is_some() && self.page == Page::Settings
    }

    /// The keyboard observer saw `key` pressed and released alone while the recorder waits:
    /// it becomes the dictation key (saved at once, as a recorded combination is); the
    /// paste-last recorder refuses it.
    pub fn record_modifier(&mut self, key: crate::app::modkeys::ModKey) {
        if !self.is_recording_shortcut() {
            return;
        }
        self.record_modifier_for(key);
    }

    /// What "Paste last transcription" pastes: the newest transcription (of this run, else
    /// the newest in the history), its surviving words only — never an `[audio]` marker.
    pub fn paste_last_text(&self) -> Option<&str> {
        self.recent
            .first()
            .map(|r| r.text.as_str())
            .filter(|t| !t.trim().is_empty())
    }

    /// Pastes the newest transcription into the focused app through the after-dictation
    /// path (copy, paste keystroke, the previous clipboard put back when "After dictation"
    /// says so); Persyk's own focused window gets a copy only. The outcome is the notice.
    pub fn paste_last(&mut self) {
        let Some(text) = self.paste_last_text().map(str::to_owned) else {
            self.notice = Some(("There is no transcription to paste yet.".into(), false));
            return;
        };
        let after = crate::settings::AfterDictationSettings {
            action: if self.window_focused {
                crate::settings::AfterAction::Copy
            } else {
                crate::settings::AfterAction::Paste
            },
            restore_clipboard: self.settings.after_dictation.restore_clipboard,
            ..self.settings.after_dictation
        };
        match self.effects.deliver_transcript(&text, &after, &self.waker) {
            Delivered::Now(delivery) => self.paste_last_done(delivery),
            Delivered::Later(id) => self.paste_last_delivering = Some(id),
        }
    }

    fn paste_last_done(&mut self, delivery: Delivery) {
        self.notice = Some(match (&delivery.copied, &delivery.pasted) {
            (Err(reason), _) => (format!("Copying failed: {reason}"), true),
            (Ok(()), None) => ("Copied the last transcription".into(), false),
            (Ok(()), Some(Ok(()))) => ("Pasted the last transcription".into(), false),
            (Ok(()), Some(Err(e))) => (after_dictation::not_pasted_sentence(e), true),
        });
    }

    /// The newest transcriptions, newest first (the menu-bar menu's "Recent").
    pub fn recent(&self) -> &[RecentItem] {
        &self.recent
    }

    /// Copies the `index`-th recent transcription (nothing when there is none).
    pub fn copy_recent(&mut self, index: usize) {
        if let Some(item) = self.recent.get(index) {
            let text = item.text.clone();
            self.copy(&text);
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
        self.settings_note = Some(note);
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
        self.list_models();
    }

    /// The login item Settings › Startup reads and changes (tests point it at a temporary
    /// autostart folder).
    pub fn set_login_item(&mut self, item: super::autostart::LoginItem) {
        self.autostart = AutostartView::new(Ok(item));
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

    /// After shutdown: whether the on-device model was freed first (`None`: none loaded).
    pub fn model_released(&self) -> Option<bool> {
        self.backend.model_released()
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
        let focused = ctx.input(|i| i.viewport().focused);
        self.window_focused = focused == Some(true);
        if focused == Some(false) {
            // The window lost the keyboard (or was hidden): a waiting key recorder would
            // keep the global grabs released with nobody to press the keys.
            self.recorder.target = None;
        }
        while let Some(update) = self.backend.try_recv() {
            self.apply(update);
        }
        self.expire_cancelled(ctx);
        self.follow_playback(ctx);
        while let Some((id, delivery)) = self.effects.delivered() {
            if self.paste_last_delivering == Some(id) {
                self.paste_last_delivering = None;
                self.paste_last_done(delivery);
                continue;
            }
            if let Dictation::Done(done) = &mut self.dictation
                && done.delivering == Some(id)
            {
                done.delivering = None;
                if let Some(kept) = record_delivery(&mut *self.effects, done, delivery) {
                    self.notice = Some((kept.sentence().to_owned(), false));
                }
            }
        }
        // Said once, in Settings (not as an error on every page): the text was copied.
        while let Some(reason) = self.effects.failures() {
            if self.notifications_off.is_none() {
                eprintln!("persyk: notifications are off: {reason}");
            }
            self.notifications_off = Some(reason);
        }
        self.apply_theme(ctx);
    }

    /// Applies Settings › Appearance when it changes. Following the system leaves the
    /// context's own preference alone (the shell installs that), so only a choice the user
    /// made is ever forced.
    fn apply_theme(&mut self, ctx: &egui::Context) {
        let choice = self.form.theme;
        if self.applied_theme == Some(choice) {
            return;
        }
        if self.applied_theme.is_some() || choice != ThemeChoice::System {
            ctx.set_theme(match choice {
                ThemeChoice::System => egui::ThemePreference::System,
                ThemeChoice::Light => egui::ThemePreference::Light,
                ThemeChoice::Dark => egui::ThemePreference::Dark,
            });
        }
        self.applied_theme = Some(choice);
    }

    /// Applies one backend update (tests and benches inject their own).
    pub fn apply(&mut self, update: Update) {
        match update {
            Update::UpdateChecked { manual, result } => self.apply_update_checked(manual, result),
            Update::WaitingForPermission => {
                self.waiting_permission = matches!(self.dictation, Dictation::Starting);
            }
            Update::Started {
                session: _,
                origin,
                live,
                cleanup,
                app,
            } => {
                if app.is_some() {
                    self.last_app = app;
                }
                self.waiting_permission = false;
                // The microphone opened, so access is granted now: the startup note that
                // it was off is out of date (issue #25 item 9).
                if origin == AudioOrigin::Microphone {
                    self.microphone_note = None;
                }
                self.transcript_rows = RowHeights::default();
                self.dictation = Dictation::Live(LiveRec {
                    origin,
                    live,
                    started: Instant::now(),
                    stopping: false,
                    cleaning: false,
                    cancelled: false,
                    online: self.settings.recognition.engine == RecognitionEngine::Openai,
                    cleanup,
                });
                if std::mem::take(&mut self.cancel_on_start) {
                    self.stop_on_start = false;
                    self.cancel();
                } else if std::mem::take(&mut self.stop_on_start) {
                    self.stop();
                }
            }
            Update::StartFailed { code } => {
                self.waiting_permission = false;
                self.stop_on_start = false;
                self.cancel_on_start = false;
                self.dictation = Dictation::Failed(code);
            }
            Update::CleanedAgain {
                location,
                result,
                text,
            } => {
                match result {
                    Ok(outcome) if outcome.reason.is_none() => {
                        self.copy(&text);
                        self.notice = Some((
                            format!("Cleaned up again ({}) and copied.", outcome.mode),
                            false,
                        ));
                    }
                    Ok(outcome) => {
                        let why = outcome.reason.map_or("", cleanup::reason_sentence);
                        self.notice = Some((format!("Not cleaned up: {why}"), true));
                    }
                    Err(code) => {
                        eprintln!("persyk: clean up again: {code}");
                        self.notice = Some((
                            format!("Not cleaned up: {}", cleanup::reason_sentence(&code)),
                            true,
                        ));
                    }
                }
                self.reopen_if_shown(location);
            }
            Update::CleanupRemoved { location, result } => match result {
                Ok(()) => {
                    self.notice =
                        Some(("The clean-up was removed; your words stay.".into(), false));
                    // Shown again at the new tip, where the removal is.
                    self.reopen_if_shown(location);
                }
                Err(code) => {
                    eprintln!("persyk: the clean-up was not removed: {code}");
                    self.notice = Some(("The clean-up could not be removed.".into(), true));
                }
            },
            Update::CleaningUp => {
                if let Dictation::Live(l) = &mut self.dictation {
                    l.cleaning = true;
                }
            }
            Update::Ended(finished) => {
                self.waiting_permission = false;
                self.finish(*finished);
            }
            Update::FileStarted { progress } => self.files.progress = Some(progress),
            Update::FilesWaiting { names } => self.files.waiting = names,
            Update::FileEnded(done) => self.apply_file_ended(*done),
            Update::Removal { entry_id, outcome } => {
                self.removals.insert(
                    entry_id,
                    match outcome {
                        Some(o) => RemovalStatus::Answered(o),
                        None => RemovalStatus::NoAnswer,
                    },
                );
            }
            Update::Discarded { session } => {
                if let Dictation::Done(d) = &mut self.dictation
                    && d.finished.session == session
                {
                    d.discarded = true;
                    self.last_transcript = None;
                }
                self.recent.retain(|r| r.session != session);
                self.notice = Some(("The session was deleted".into(), false));
                self.forget_session(&session);
                if self.page == Page::Search {
                    self.run_search();
                }
            }
            Update::DiscardFailed { code } => {
                eprintln!("persyk: the session was not deleted: {code}");
                self.notice = Some(("The session could not be deleted.".into(), true));
            }
            Update::EmptyDeleted { deleted, failed } => {
                eprintln!("persyk: removed {deleted} empty session(s), {failed} failed");
                self.search.message = Some(match (deleted, failed) {
                    (0, 0) => ("There were no empty sessions.".to_owned(), false),
                    (n, 0) => (format!("Removed {n} empty session(s)."), false),
                    (n, f) => (
                        format!("Removed {n} empty session(s); {f} could not be removed."),
                        true,
                    ),
                });
                self.search.details = None;
                self.run_search();
            }
            Update::Results(results) => {
                if results.generation == self.search.generation {
                    let continued = results.continued;
                    match (&mut self.search.results, results.continued) {
                        (Some(shown), true) => {
                            shown.rows.extend(results.rows);
                            shown.skipped.extend(results.skipped);
                            shown.next = results.next;
                        }
                        _ => self.search.results = Some(*results),
                    }
                    self.time_rows(continued);
                    self.search.waiting = false;
                }
            }
            Update::Clip { generation, result } => match &mut self.playback {
                Some(p) if p.generation == generation && p.loading => match result {
                    Ok(clip) => {
                        p.loading = false;
                        if clip.truncated {
                            self.notice = Some((
                                "This recording is long: its first 30 minutes play.".into(),
                                false,
                            ));
                        }
                        self.player.play(clip.samples, clip.sample_rate);
                    }
                    Err(code) => self.playback_failed(clip_sentence(&code), code),
                },
                // Stopped, or another playback was asked for since.
                _ => {}
            },
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
                self.search.pages_received += 1;
                if generation == self.search.open_generation {
                    self.search.pages_asked.remove(&start);
                    match messages {
                        Ok(m) => {
                            self.search.opened_pages.insert(start, m);
                        }
                        Err(code) => {
                            self.search.failed("This session could not be read.", code);
                        }
                    }
                }
            }
            Update::CopyText(text) => match text {
                Ok(t) if t.trim().is_empty() => {
                    self.notice = Some(("This session has no text to copy".into(), false));
                }
                Ok(t) => self.copy(&t),
                Err(code) => {
                    self.search.failed("This session could not be read.", code);
                }
            },
            Update::OpenFailed { code, .. } => {
                self.search.opening = false;
                self.search
                    .failed("This session could not be opened.", code);
            }
            Update::Recovered { summary, .. } => {
                self.search.message = Some((format!("Recovered: {summary}"), false));
                self.run_search();
            }
            Update::RecoverFailed { code, .. } => {
                self.search
                    .failed("This session could not be recovered.", code);
            }
            Update::Recent(items) => {
                self.history_known = true;
                self.dictation_worked |= !items.is_empty();
                // A recording that finished meanwhile stays first.
                for item in items {
                    if self.recent.len() < RECENT_LEN
                        && !self.recent.iter().any(|r| r.session == item.session)
                    {
                        self.recent.push(item);
                    }
                }
            }
            Update::Devices(list) => self.devices = Some(list),
            Update::Shared {
                settings,
                conflicts,
                problem,
            } => self.take_shared(&settings, conflicts, problem),
            Update::SettingsSaved => {
                // The backend answers saves in the order they were asked.
                let (settings, with_key) = self
                    .saving
                    .pop_front()
                    .unwrap_or_else(|| (self.form.to_settings(&self.settings), false));
                self.settings = settings;
                if with_key {
                    self.form.key_stored = true;
                    if self.form.api_key == self.sent_key {
                        self.form.api_key.clear();
                        self.sent_key.clear();
                    }
                }
                // The clean-up key went to the secret store: the field does not keep it.
                if !self.sent_cleanup_key.is_empty()
                    && self.form.cleanup.api_key == self.sent_cleanup_key
                {
                    self.form.cleanup.api_key.clear();
                    self.sent_cleanup_key.clear();
                }
                self.form_saved = true;
                self.form_error = None;
                self.settings_note = None;
                self.settings_generation += 1;
            }
            Update::SettingsFailed { code } => {
                self.saving.pop_front();
                // Said as "Not saved: <sentence>", the code in the details line.
                self.form_error = Some(format!("{code}: {}", problem(&code).sentence));
            }
            Update::Models(rows) => {
                // Rows listed for another store (one replaced since it was asked) are not
                // this folder's: its catalog is a different table.
                let current = self.models.store.as_ref().is_some_and(|store| {
                    rows.len() == store.catalog().len()
                        && rows
                            .iter()
                            .zip(store.catalog())
                            .all(|(r, m)| std::ptr::eq(r.model, m))
                });
                if current {
                    self.models.rows = Some(rows);
                }
            }
            Update::ModelProgress { name, progress } => {
                self.models.notes.remove(&name);
                self.models.failures.remove(&name);
                if progress.phase == Phase::Downloading {
                    self.models
                        .since
                        .entry(name.clone())
                        .or_insert((Instant::now(), progress.done_bytes));
                }
                self.models.progress.insert(name, progress);
            }
            Update::ModelDownloaded { name } => {
                self.models.progress.remove(&name);
                self.models.since.remove(&name);
                self.models.failures.remove(&name);
                self.models
                    .notes
                    .insert(name.clone(), ("Downloaded and verified".into(), false));
                if self.models.switch_when_installed.as_deref() == Some(name.as_str()) {
                    // Verified and installed: now recognition moves to the device.
                    self.models.switch_when_installed = None;
                    self.form.local = true;
                    self.form.use_model_file = false;
                    self.form.local_model = name;
                    self.save_settings();
                }
            }
            Update::ModelFailed { name, code } => {
                self.models.progress.remove(&name);
                self.models.since.remove(&name);
                eprintln!("persyk: model {name}: {code}");
                match code.as_str() {
                    "models.cancelled" => {
                        self.models.switch_when_installed = None;
                        self.models
                            .notes
                            .insert(name, ("Stopped; Download resumes it".to_owned(), false));
                    }
                    _ => {
                        self.models.notes.remove(&name);
                        self.models.failures.insert(name, code);
                    }
                }
            }
            Update::KeyChecked { code, stored } => {
                if let Some(c) = &code {
                    eprintln!("persyk: the API key check: {c}");
                }
                if stored {
                    self.form.key_stored = true;
                    self.welcome_key.clear();
                    // Kept in the key store: the Settings field does not hold it any longer.
                    if !self.sent_key.is_empty() && self.form.api_key == self.sent_key {
                        self.form.api_key.clear();
                        self.sent_key.clear();
                    }
                    // A key that works and nothing else usable: recognition goes online.
                    if code.is_none() && self.blocker().is_some() && self.form.local {
                        self.form.local = false;
                        self.save_settings();
                    }
                }
                self.key_check = Some(KeyCheck::Done { code, stored });
            }
            Update::Autostart(result) => {
                self.autostart.busy = false;
                self.autostart.state = Some(result);
            }
            Update::ModelDeleted { name } => {
                self.models.notes.insert(name, ("Deleted".into(), false));
            }
        }
    }

    fn finish(&mut self, finished: Finished) {
        let (view, online, cancelled) = match &self.dictation {
            Dictation::Live(l) => (Some(l.live.view.borrow().clone()), l.online, l.cancelled),
            _ => (None, false, false),
        };
        if cancelled && finished.error.is_none() && !finished.removed {
            // Kept for an Undo, then deleted (`expire_cancelled`); nothing is delivered.
            self.cancelled = Some(CancelledRec {
                finished,
                view,
                online,
                until: Instant::now() + UNDO_FOR,
            });
            self.dictation = Dictation::Idle;
            self.notice = Some(("Recording cancelled.".into(), false));
            return;
        }
        self.deliver(finished, view, online);
    }

    /// Delivers a finished recording: copied (and pasted), remembered as the last one.
    fn deliver(&mut self, finished: Finished, view: Option<EngineView>, online: bool) {
        let mut done = DoneRec {
            finished,
            view,
            clipboard: None,
            paste: None,
            delivering: None,
            discarded: false,
            online,
        };
        // Effects: the session is already saved whatever happens here.
        let text = done.finished.transcript.clone();
        if done.finished.error.is_none() && !text.trim().is_empty() {
            // Copied, then pasted into the focused app when "After dictation" says so (not
            // into Persyk's own window: stopped with its button, there is no other app).
            let mut after = self.settings.after_dictation;
            if self.window_focused {
                after.action = crate::settings::AfterAction::Copy;
            }
            match self.effects.deliver_transcript(&text, &after, &self.waker) {
                Delivered::Now(delivery) => {
                    if let Some(kept) = record_delivery(&mut *self.effects, &mut done, delivery) {
                        self.notice = Some((kept.sentence().to_owned(), false));
                    }
                }
                Delivered::Later(id) => done.delivering = Some(id),
            }
            self.dictation_worked = true;
            let session = done.finished.session.clone();
            self.recent.retain(|r| r.session != session);
            self.recent.insert(
                0,
                RecentItem {
                    session,
                    text: text.clone(),
                    other_mac: None,
                },
            );
            self.recent.truncate(RECENT_LEN);
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

    // -----------------------------------------------------------------------------------
    // Rendering.

    /// Renders the window; applies what the user clicked.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        self.process(ui.ctx());
        if self.quitting {
            style::page(ui.style()).show(ui, |ui| {
                ui.set_min_size(ui.available_size());
                ui.label(style::title("Finishing…"));
                ui.label(
                    "Persyk quits once the recording is finished and saved (at most 30 seconds).",
                );
            });
            return;
        }
        self.history_keys(ui.ctx());
        self.take_dropped(ui.ctx());
        // Esc while recording cancels it (kept for an Undo); while a model cleans up, the
        // words go out as spoken. Not while the user types in a field (it has its own Esc).
        if self.escape_means_something()
            && !ui.ctx().egui_wants_keyboard_input()
            && ui
                .ctx()
                .input_mut(|i| i.consume_key(egui::Modifiers::NONE, egui::Key::Escape))
        {
            self.escape();
        }
        style::page(ui.style()).show(ui, |ui| {
            ui.set_min_size(ui.available_size());
            self.header(ui);
            match self.page {
                Page::Dictation => self.dictation_page(ui),
                Page::Search => self.search_page(ui),
                Page::Settings => self.settings_page(ui),
            }
        });
        if self.confirm_discard.is_some() {
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
            Action::CancelCleanup => self.send(Command::CancelCleanup),
            Action::UndoCancel => self.undo_cancel(),
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
            Action::AfterDictation(request) => self.after_dictation_request(request),
            Action::Remove(entry_id) => {
                self.removals
                    .insert(entry_id.clone(), RemovalStatus::Waiting);
                self.send(Command::Remove { entry_id });
            }
            Action::AskDiscard => {
                if let Dictation::Done(d) = &self.dictation {
                    self.confirm_discard = Some(d.finished.session.clone());
                }
            }
            Action::AskDelete(session) => self.confirm_discard = Some(session),
            Action::CancelDiscard => self.confirm_discard = None,
            Action::ConfirmDiscard => {
                if let Some(session) = self.confirm_discard.take() {
                    self.send(Command::Discard { session });
                }
            }
            Action::DeleteEmpty => {
                self.search.message = Some(("Removing empty sessions…".into(), false));
                self.send(Command::DeleteEmpty);
            }
            Action::TranscribeAgain(wav) => {
                if !self.is_recording() {
                    self.stop_playback();
                    self.send(Command::TranscribeAgain { wav });
                    self.removals.clear();
                    self.dictation = Dictation::Starting;
                    self.page = Page::Dictation;
                }
            }
            Action::Open(row) => {
                self.stop_playback();
                self.search.opening = true;
                self.search.opened_from = Some(row.clone());
                self.send(Command::Open {
                    location: row.location,
                    leaf: row.leaf,
                });
            }
            Action::CopyRow(row) => self.send(Command::CopyRow {
                location: row.location,
                leaf: row.leaf,
            }),
            Action::CloseOpened => {
                self.stop_playback();
                self.search.opened = None;
                self.search.opened_pages.clear();
                self.search.pages_asked.clear();
            }
            Action::CleanUpAgain => {
                if let Some(o) = &self.search.opened {
                    self.notice = Some(("Cleaning up…".into(), false));
                    self.send(Command::CleanUpAgain {
                        location: o.location.clone(),
                    });
                }
            }
            Action::UseMyWords(entry_id) => {
                if let Some(o) = &self.search.opened {
                    self.send(Command::UseMyWords {
                        location: o.location.clone(),
                        entry_id,
                    });
                }
            }
            Action::CopyAll | Action::CopyAllAsSpoken => {
                let as_spoken = matches!(action, Action::CopyAllAsSpoken);
                if let Some(pages) = self.search.opened.as_ref().and_then(|o| o.pages.clone()) {
                    self.send(Command::CopyAll { pages, as_spoken });
                }
            }
            Action::ShowPages(first, last) => self.show_pages(first, last),
            Action::Play(key, clip) => self.play(key, clip),
            Action::StopPlayback => self.stop_playback(),
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
            Action::GetDefaultModel => {
                // The engine switches once the model is installed and verified
                // (`Update::ModelDownloaded`), never before: a failed download leaves the
                // settings as they were.
                self.models.switch_when_installed = Some(DEFAULT_LOCAL_MODEL.to_owned());
                self.download_model(DEFAULT_LOCAL_MODEL.to_owned());
            }
            Action::Fix(fix) => self.fix(fix),
            Action::CheckKey => {
                let key = self.welcome_key.trim().to_owned();
                if !key.is_empty() {
                    self.key_check = Some(KeyCheck::Checking);
                    self.send(Command::CheckKey { key });
                }
            }
            Action::GoToDictation => self.show_page(Page::Dictation),
            Action::CheckUpdates => self.check_updates(),
            Action::OpenLink(url) => {
                if let Err(reason) = self.effects.open_url(&url) {
                    self.notice = Some((format!("The link could not be opened ({reason})"), true));
                }
            }
            Action::ChooseFiles => self.choose_files(),
            Action::TranscribeFiles(files) => self.transcribe_files(files),
            Action::CancelFile => self.cancel_file(),
        }
    }

    /// The page switcher (a segmented control, centred) and the one-line notices under it.
    fn header(&mut self, ui: &mut egui::Ui) {
        let palette = style::Palette::current(ui);
        let pages = [
            (Page::Dictation, style::Icon::Microphone, "Dictation"),
            (Page::Search, style::Icon::Search, "Search"),
            (Page::Settings, style::Icon::Gear, "Settings"),
        ];
        let gap = 2.0;
        let pad = 3.0;
        let segment = ((ui.available_width() - 2.0 * pad - 2.0 * gap) / 3.0).min(118.0);
        let total = 3.0 * segment + 2.0 * gap + 2.0 * pad;
        ui.horizontal(|ui| {
            ui.add_space(((ui.available_width() - total) / 2.0).max(0.0));
            egui::Frame::new()
                .fill(palette.track)
                .corner_radius(egui::CornerRadius::same(8))
                .inner_margin(egui::Margin::same(pad as i8))
                .show(ui, |ui| {
                    ui.spacing_mut().item_spacing.x = gap;
                    // The selected segment is told apart by its fill; its text stays the
                    // text colour (the accent on the segment's fill reads badly in dark).
                    ui.visuals_mut().selection.stroke.color = palette.text;
                    for (page, icon, label) in pages {
                        let selected = self.page == page;
                        let mut button = style::icon_button(icon, label)
                            .selected(selected)
                            .min_size(egui::vec2(segment, 26.0))
                            .corner_radius(egui::CornerRadius::same(6));
                        button = if selected {
                            button
                                .fill(palette.segment)
                                .stroke(egui::Stroke::new(1.0, palette.card_stroke))
                        } else {
                            button.frame_when_inactive(false)
                        };
                        if ui.add(button).clicked() {
                            self.pending.push(Action::Page(page));
                        }
                    }
                });
        });
        ui.add_space(style::space::XS);
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
}

/// Shows what became of a transcript's delivery; notifies once the copy succeeded. Returns
/// why the previous clipboard will not be put back, for the window's notice.
fn record_delivery(
    effects: &mut dyn Effects,
    done: &mut DoneRec,
    delivery: Delivery,
) -> Option<super::paste::Kept> {
    match &delivery.copied {
        Ok(()) => effects.notify(
            "Transcription copied",
            &first_words(&done.finished.transcript, 12),
        ),
        Err(reason) => eprintln!("persyk: clipboard failed: {reason}"),
    }
    done.clipboard = Some(delivery.copied);
    done.paste = delivery.pasted;
    delivery.kept
}

/// Why a recording cannot be played, as the window says it (a `clip.*` code from the backend).
fn clip_sentence(code: &str) -> &'static str {
    match code {
        "clip.missing" => "The recording cannot be played: its audio file is no longer there.",
        "clip.out-of-range" => {
            "This part of the recording cannot be played: its audio file ends before it (the \
             recording may have been cut short)."
        }
        _ => "The recording cannot be played: its audio file could not be read.",
    }
}
