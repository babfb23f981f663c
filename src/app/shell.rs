//! The eframe application: window rules, the tray, the hotkey and quitting.
//!
//! The window's style ([`super::ui::style::install`]: spacing, type, light and dark themes
//! following the system) is installed once, when the shell is built.
//!
//! Invariants:
//! - Tray, menu and hotkey callbacks run on other threads; they only queue a [`ShellEvent`]
//!   (bounded) and request a repaint. [`Shell::logic`] applies them on the UI thread, also
//!   while the window is hidden.
//! - Starting or stopping a dictation from the hotkey or the tray icon never shows or
//!   focuses the window (only the menu's Open, Search and Settings entries do): keyboard
//!   focus stays in the app the user is typing in, where "After dictation → paste" puts
//!   the text.
//! - Closing the window hides it when a tray icon exists; without one, closing quits (the
//!   app would otherwise be unreachable).
//! - Quitting (menu, ⌘Q/Ctrl+Q, or closing without a tray) stops a running recording and
//!   lets it finish, bounded by one deadline, before the process exits. The UI thread never
//!   waits for it: the window keeps painting "Finishing…" and closes when the backend
//!   reports it stopped or the deadline passed. Close requests meanwhile are cancelled.
//! - The recording indicator ([`super::ui::indicator`]) is a deferred viewport of its own,
//!   asked for in [`Shell::draw`] only while a recording runs and `feedback.indicator` is
//!   on, also while the main window is hidden (where eframe then runs no ui, `tick` asks for
//!   one pass; from then on eframe runs it because a child viewport is visible). Its Stop is
//!   the menu's stop. Nothing is asked for while idle, so eframe closes its window and
//!   nothing repaints.
//! - Started `--hidden` with a tray icon, the window stays hidden until the user opens it
//!   (eframe would show it after its first painted frame).
//! - What the dictation hotkey's presses and releases mean is decided here, by
//!   [`hotkey::Gestures`] over the instants the OS reported (tap, hold, repeat; Tap or hold,
//!   Toggle, Push to talk), from whether a recording runs however it was started. The
//!   paste-last shortcut and the menu's "Paste last transcription" are one action. While
//!   Settings records a shortcut, both global grabs are let go and registered again after,
//!   and the keyboard is observed meanwhile for a modifier tapped alone
//!   (`ShellEvent::ModifierTapped`). A modifier-only dictation key (observed, not grabbed:
//!   [`super::modkeys`]) sends the same presses and releases; a key joining it after the
//!   press (`ShellEvent::HotkeyChord`) cancels the recording that press started.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use eframe::egui;

use super::backend::{SHUTDOWN_DEADLINE, ShutdownStatus};
use super::event::{MenuAction, Post, ShellEvent, TrayState};
use super::hotkey;
use super::sounds::{self, Cue, Sounds};
use super::tray::{Tray, TrayError, recent_labels};
use super::ui::indicator::{self, IndicatorAction, IndicatorModel};
use super::ui::{Page, PersykUi};

/// What the shell needs from a tray icon: the real one, or a test double.
pub trait TrayPort {
    /// Shows `state`, the toggle's label and whether there is something to copy.
    fn sync(&mut self, state: TrayState, recording: bool, can_copy: bool);
    /// Shows the "Recent" labels (newest first); called when they change.
    fn set_recent(&mut self, _labels: &[String]) {}
    /// Enables "Paste last transcription" when there is a transcript to paste.
    fn set_can_paste_last(&mut self, _can_paste: bool) {}
    /// Checks the clean-up mode in use in the "Clean-up" submenu.
    fn set_cleanup_mode(&mut self, _mode: crate::cleanup::settings::CleanupMode) {}
    /// Opens the icon's menu (where the platform can).
    fn show_menu(&self) {}
}

impl TrayPort for Tray {
    fn sync(&mut self, state: TrayState, recording: bool, can_copy: bool) {
        Tray::sync(self, state, recording, can_copy);
    }
    fn set_recent(&mut self, labels: &[String]) {
        Tray::set_recent(self, labels);
    }
    fn set_can_paste_last(&mut self, can_paste: bool) {
        Tray::set_can_paste_last(self, can_paste);
    }
    fn set_cleanup_mode(&mut self, mode: crate::cleanup::settings::CleanupMode) {
        Tray::set_cleanup_mode(self, mode);
    }
    fn show_menu(&self) {
        Tray::show_menu(self);
    }
}

/// How the app starts.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShellOptions {
    /// Start in the menu bar only (ignored without a tray icon).
    pub hidden: bool,
    /// Register the global hotkey (tests turn it off: it needs a display server).
    pub no_hotkey: bool,
    /// Play the start and stop cues on the default output (when the settings allow);
    /// off for tests, which have no sound device.
    pub play_sounds: bool,
}

/// Passes that hide a `--hidden` window again after eframe may have shown it.
const HIDE_PASSES: u8 = 2;

/// What the shell and the indicator's viewport callback share.
#[derive(Default)]
struct IndicatorShared {
    model: Option<IndicatorModel>,
    /// What was clicked on it, for the next pass of the shell.
    action: Option<IndicatorAction>,
    /// The indicator's window was made one that never takes focus (a non-activating panel
    /// on macOS, a "No Input" window on X11); done from its own callback, which runs once
    /// the window exists (the main window may be hidden and get no passes).
    unfocusable: bool,
}

/// The running app.
pub struct Shell {
    ui: PersykUi,
    events: Receiver<ShellEvent>,
    post: Post,
    tray: Option<Box<dyn TrayPort>>,
    options: ShellOptions,
    hotkeys: hotkey::Hotkeys,
    hotkey_generation: Option<u64>,
    /// What the dictation key's presses and releases mean (tap, hold, repeat).
    gestures: hotkey::Gestures,
    /// The "Dictate + clean" shortcut's own tap/hold state.
    clean_gestures: hotkey::Gestures,
    /// The grabs are let go while Settings records a shortcut.
    grabs_paused: bool,
    /// While Settings records a shortcut: the keyboard observed for a modifier tapped alone
    /// (`None` where it cannot be observed: the recorder then takes combinations only).
    tap_watch: Option<super::modkeys::Observer>,
    /// Esc is grabbed (only while the recording indicator shows).
    escape_grabbed: bool,
    /// The start/stop cue player, and the tray state the last cue was chosen from.
    sounds: Option<Sounds>,
    cue_state: TrayState,
    /// Held while a recording runs or finishes (App Nap on macOS).
    busy: super::platform::Busy,
    /// The "Recent" labels the tray shows (`None`: not shown yet).
    recent_shown: Option<Vec<String>>,
    quitting: bool,
    /// The close command was sent (after the backend stopped or the deadline passed).
    closing: bool,
    /// How long quitting waits for a running recording (tests shorten it).
    quit_deadline: Duration,
    /// Input time of the close request already acted on.
    handled_close: Option<f64>,
    /// The indicator's viewport was asked for in the last frame.
    indicator_open: bool,
    /// Where the indicator shows (macOS: the screen with the pointer), chosen once as it
    /// opens, so it does not follow the pointer while it is open.
    indicator_at: Option<egui::Pos2>,
    /// What the indicator's window renders (its callback runs on its own repaints) and
    /// whether its Stop was clicked.
    indicator: Arc<Mutex<IndicatorShared>>,
    /// Started `--hidden` with a tray icon and not shown since: eframe shows a window after
    /// the first frame it paints (it paints a hidden one where the platform does not report
    /// it hidden, as on X11, or when asked to), so the next passes say hidden again. Counts
    /// the passes left; `None` once the user opened the window.
    stay_hidden: Option<u8>,
    /// Files the system asked Persyk to open, waiting for the UI thread ([`Opener`]).
    opened: Arc<Mutex<Vec<std::path::PathBuf>>>,
}

/// Hands the files the system asks Persyk to open (Finder's Open With) to the window; safe
/// from any thread. The files wait in the shell's list and a [`ShellEvent::OpenFiles`] wakes
/// the UI thread, which transcribes them in the order they came.
#[derive(Clone)]
pub struct Opener {
    files: Arc<Mutex<Vec<std::path::PathBuf>>>,
    post: Post,
}

impl Opener {
    /// Queues `files` for transcription (nothing for an empty list).
    pub fn open(&self, files: Vec<std::path::PathBuf>) {
        if files.is_empty() {
            return;
        }
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(files);
        (self.post)(ShellEvent::OpenFiles);
    }
}

impl Shell {
    /// Builds the shell inside eframe's creation closure (main thread, loop running).
    pub fn new(ctx: &egui::Context, ui: PersykUi, options: ShellOptions) -> Shell {
        // X11 reports no theme: "the system's" is the desktop portal's preference.
        #[cfg(target_os = "linux")]
        super::platform::portal::follow(ctx);
        Shell::with_tray(ctx, ui, options, |post| {
            Tray::create(post).map(|t| Box::new(t) as Box<dyn TrayPort>)
        })
    }

    /// [`Shell::new`] with the tray made by `make_tray` (given the event poster).
    pub fn with_tray(
        ctx: &egui::Context,
        mut ui: PersykUi,
        options: ShellOptions,
        make_tray: impl FnOnce(Post) -> Result<Box<dyn TrayPort>, TrayError>,
    ) -> Shell {
        // The one visual language, light and dark following the system's appearance.
        super::ui::style::install(ctx);
        let (tx, events): (SyncSender<ShellEvent>, _) = sync_channel(64);
        let post: Post = {
            let ctx = ctx.clone();
            Arc::new(move |e| {
                let _ = tx.try_send(e);
                ctx.request_repaint();
            })
        };
        let tray = match make_tray(post.clone()) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("persyk: {e}");
                ui.set_tray_note(Some(match e {
                    TrayError::NoHost => "No menu-bar/tray icon on this desktop: Persyk stays in \
                                          this window, and closing it quits."
                        .into(),
                    TrayError::Failed => "The tray icon could not be created: Persyk stays in \
                                          this window, and closing it quits."
                        .into(),
                }));
                None
            }
        };
        // `--hidden` built the window invisible; without a tray it must be reachable.
        let stay_hidden = (options.hidden && tray.is_some()).then_some(HIDE_PASSES);
        if options.hidden && tray.is_none() {
            ctx.send_viewport_cmd(egui::ViewportCommand::Visible(true));
        }
        let mut shell = Shell {
            ui,
            events,
            post,
            tray,
            options,
            hotkeys: hotkey::Hotkeys::new(),
            hotkey_generation: None,
            gestures: hotkey::Gestures::new(),
            clean_gestures: hotkey::Gestures::new(),
            grabs_paused: false,
            tap_watch: None,
            escape_grabbed: false,
            sounds: if options.play_sounds {
                Sounds::spawn(sounds::play_on_default_output)
            } else {
                None
            },
            cue_state: TrayState::Idle,
            busy: super::platform::Busy::default(),
            recent_shown: None,
            quitting: false,
            closing: false,
            quit_deadline: SHUTDOWN_DEADLINE,
            handled_close: None,
            indicator_open: false,
            indicator_at: None,
            indicator: Arc::default(),
            stay_hidden,
            opened: Arc::default(),
        };
        shell.sync_hotkey();
        shell
    }

    /// Registers the saved hotkeys once per settings generation (at start and after each
    /// Save): an unchanged combination stays registered, a changed one replaces the old,
    /// and a failure is said on the Settings page, beside the shortcut it concerns.
    fn sync_hotkey(&mut self) {
        // While Settings records a shortcut the grabs are let go (a grabbed combination
        // never reaches the window), and registered again once it is done.
        let recording = self.ui.is_recording_shortcut();
        if recording != self.grabs_paused {
            self.grabs_paused = recording;
            self.hotkeys.release();
            self.hotkeys.release_slot(hotkey::Slot::PasteLast);
            self.hotkeys.release_slot(hotkey::Slot::DictateClean);
            self.hotkeys.release_slot(hotkey::Slot::Cancel);
            self.escape_grabbed = false;
            self.hotkey_generation = None;
            self.tap_watch = None;
            if recording && !self.options.no_hotkey {
                let post = self.post.clone();
                let watch = super::modkeys::Watch::Taps(Arc::new(move |key| {
                    post(ShellEvent::ModifierTapped(key))
                }));
                self.tap_watch = super::modkeys::Observer::start(watch).ok();
            }
        }
        if self.grabs_paused {
            return;
        }
        let generation = self.ui.settings_generation();
        if self.hotkey_generation == Some(generation) {
            return;
        }
        self.hotkey_generation = Some(generation);
        // A release that the old registration never forwarded must not leave the key
        // "held" (every later press would read as a repeat).
        self.gestures = hotkey::Gestures::new();
        self.clean_gestures = hotkey::Gestures::new();
        self.ui.hotkey_note = None;
        self.ui.hotkey_needs_input_monitoring = false;
        self.ui.paste_hotkey_note = None;
        self.ui.clean_hotkey_note = None;
        if self.options.no_hotkey {
            return;
        }
        let post = self.post.clone();
        let on_event: hotkey::OnHotkey =
            Arc::new(move |pressed, at| post(ShellEvent::Hotkey { pressed, at }));
        let post = self.post.clone();
        self.hotkeys
            .set_on_cancel(Arc::new(move || post(ShellEvent::HotkeyChord)));
        let result = hotkey::parse(&self.ui.settings().hotkey)
            .and_then(|keys| self.hotkeys.set(keys, on_event));
        if let Err(e) = result {
            eprintln!("persyk: {e}");
            self.hotkeys.release();
            self.ui.hotkey_needs_input_monitoring = e == hotkey::HotkeyError::InputMonitoring;
            self.ui.hotkey_note = Some(format!(
                "The global hotkey is not active: {e}. The menu-bar icon and the Start button \
                 still work."
            ));
        }
        let post = self.post.clone();
        let on_paste: hotkey::OnHotkey = Arc::new(move |pressed, _| {
            if pressed {
                post(ShellEvent::PasteLastHotkey);
            }
        });
        let result = hotkey::parse_paste_last(&self.ui.settings().hotkey).and_then(|keys| {
            self.hotkeys
                .set_slot(hotkey::Slot::PasteLast, keys, on_paste)
        });
        if let Err(e) = result {
            eprintln!("persyk: the paste-last shortcut: {e}");
            self.hotkeys.release_slot(hotkey::Slot::PasteLast);
            self.ui.paste_hotkey_note = Some(format!(
                "The paste-last shortcut is not active: {e}. The menu-bar menu's \
                 \"Paste last transcription\" still works."
            ));
        }
        let post = self.post.clone();
        let on_clean: hotkey::OnHotkey =
            Arc::new(move |pressed, at| post(ShellEvent::CleanHotkey { pressed, at }));
        let result = hotkey::parse_dictate_clean(&self.ui.settings().hotkey).and_then(|keys| {
            self.hotkeys
                .set_slot(hotkey::Slot::DictateClean, keys, on_clean)
        });
        if let Err(e) = result {
            eprintln!("persyk: the dictate + clean shortcut: {e}");
            self.hotkeys.release_slot(hotkey::Slot::DictateClean);
            self.ui.clean_hotkey_note =
                Some(format!("The Dictate + clean shortcut is not active: {e}."));
        }
    }

    /// Replaces the cue player (tests record cues instead of playing them).
    pub fn set_sounds(&mut self, sounds: Option<Sounds>) {
        self.sounds = sounds;
    }

    /// Plays the start cue when a dictation begins (leaves idle) and the stop cue when it
    /// stops recording, if the settings allow. Never waits: the player has its own thread.
    /// Also holds the App Nap activity while a recording runs or finishes.
    fn cue(&mut self) {
        let state = self.ui.tray_state();
        self.busy.set(matches!(
            state,
            TrayState::Connecting | TrayState::Recording | TrayState::Finishing
        ));
        let previous = std::mem::replace(&mut self.cue_state, state);
        let cue = match (previous, state) {
            (TrayState::Idle | TrayState::Error, TrayState::Connecting | TrayState::Recording) => {
                Cue::Start
            }
            (
                TrayState::Connecting | TrayState::Recording,
                TrayState::Finishing | TrayState::Idle,
            ) => Cue::Stop,
            _ => return,
        };
        if let Some(sounds) = &self.sounds
            && self.ui.settings().feedback.sounds_enabled()
        {
            sounds.play(cue);
        }
    }

    /// The event poster tray, menu and hotkey callbacks use (tests inject events with it).
    pub fn poster(&self) -> Post {
        self.post.clone()
    }

    /// What the system's "open these files" requests go through (Finder's Open With).
    pub fn opener(&self) -> Opener {
        Opener {
            files: self.opened.clone(),
            post: self.post.clone(),
        }
    }

    /// The window's state.
    pub fn view(&self) -> &PersykUi {
        &self.ui
    }

    /// Whether a quit path has run.
    pub fn is_quitting(&self) -> bool {
        self.quitting
    }

    fn show(&mut self, ctx: &egui::Context, page: Option<Page>) {
        if let Some(p) = page {
            self.ui.show_page(p);
        }
        self.stay_hidden = None;
        // Access may have been turned on (or off) in System Settings since the last look.
        #[cfg(target_os = "macos")]
        self.ui
            .set_microphone_note(super::permission::macos::microphone_note());
        ctx.send_viewport_cmd(egui::ViewportCommand::Visible(true));
        ctx.send_viewport_cmd(egui::ViewportCommand::Focus);
        // An Accessory app stays behind the frontmost app unless it activates itself.
        #[cfg(target_os = "macos")]
        super::platform::macos::activate();
    }

    /// Shortens how long quitting waits for a running recording (tests).
    pub fn set_quit_deadline(&mut self, deadline: Duration) {
        self.quit_deadline = deadline;
    }

    /// Whether the window was told to close (quitting has finished its wait).
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// The one quit path: asks the backend to finish, then [`Shell::poll_quit`] closes the
    /// window once it has (or the deadline passed). Never blocks.
    fn quit(&mut self, ctx: &egui::Context) {
        if !self.quitting {
            self.quitting = true;
            self.ui.begin_quit(self.quit_deadline);
        }
        self.poll_quit(ctx);
    }

    fn poll_quit(&mut self, ctx: &egui::Context) {
        if self.closing {
            return;
        }
        match self.ui.shutdown_status() {
            ShutdownStatus::Finished => {}
            ShutdownStatus::TimedOut => {
                eprintln!("persyk: the background worker did not stop in time");
            }
            ShutdownStatus::Waiting | ShutdownStatus::Running => {
                // Keep painting "Finishing…" and look again (the backend's end also wakes us).
                ctx.request_repaint_after(Duration::from_millis(100));
                return;
            }
        }
        self.closing = true;
        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
    }

    fn handle(&mut self, ctx: &egui::Context, event: ShellEvent) {
        if self.quitting
            && !matches!(
                event,
                ShellEvent::Menu(MenuAction::Open) | ShellEvent::Reopen
            )
        {
            // Nothing new starts while Persyk finishes and quits.
            return;
        }
        match event {
            ShellEvent::TrayClick | ShellEvent::Menu(MenuAction::Toggle) => self.ui.toggle(),
            ShellEvent::TrayMenu => {
                if let Some(tray) = &self.tray {
                    tray.show_menu();
                }
            }
            ShellEvent::Menu(MenuAction::CopyLast) => self.ui.copy_last(),
            ShellEvent::EscapeHotkey => self.ui.escape(),
            ShellEvent::Menu(MenuAction::PasteLast) | ShellEvent::PasteLastHotkey => {
                self.ui.paste_last()
            }
            ShellEvent::Menu(MenuAction::Recent(i)) => self.ui.copy_recent(i),
            ShellEvent::Menu(MenuAction::Open) | ShellEvent::Reopen => self.show(ctx, None),
            ShellEvent::Menu(MenuAction::Search) => self.show(ctx, Some(Page::Search)),
            ShellEvent::Menu(MenuAction::TranscribeFile) => {
                self.show(ctx, Some(Page::Dictation));
                self.ui.choose_files();
            }
            ShellEvent::OpenFiles => {
                let files = std::mem::take(
                    &mut *self.opened.lock().unwrap_or_else(PoisonError::into_inner),
                );
                if !files.is_empty() {
                    self.show(ctx, Some(Page::Dictation));
                    self.ui.transcribe_files(files);
                }
            }
            ShellEvent::Menu(MenuAction::Settings) => self.show(ctx, Some(Page::Settings)),
            ShellEvent::Menu(MenuAction::CheckUpdates) => {
                self.show(ctx, Some(Page::Settings));
                self.ui.check_updates();
            }
            ShellEvent::Menu(MenuAction::Cleanup(mode)) => {
                // A mode that still needs its server opens Settings › Clean-up.
                if !self.ui.set_cleanup_mode(mode) {
                    self.show(ctx, Some(Page::Settings));
                }
            }
            ShellEvent::Menu(MenuAction::Quit) => self.quit(ctx),
            ShellEvent::Hotkey { pressed, at } => {
                let mode = self.ui.settings().hotkey.mode;
                let recording = self.ui.is_recording();
                let intent = if pressed {
                    self.gestures.press(mode, recording, at)
                } else {
                    self.gestures.release(mode, recording, at)
                };
                match intent {
                    hotkey::Intent::Start => self.ui.start(),
                    hotkey::Intent::Stop => self.ui.stop(),
                    hotkey::Intent::Cancel => self.ui.cancel(),
                    hotkey::Intent::Nothing => {}
                }
            }
            ShellEvent::CleanHotkey { pressed, at } => {
                let mode = self.ui.settings().hotkey.mode;
                let recording = self.ui.is_recording();
                let intent = if pressed {
                    self.clean_gestures.press(mode, recording, at)
                } else {
                    self.clean_gestures.release(mode, recording, at)
                };
                match intent {
                    hotkey::Intent::Start => {
                        let clean = self.ui.settings().cleanup.shortcut_mode();
                        self.ui.start_with(Some(clean));
                    }
                    hotkey::Intent::Stop => self.ui.stop(),
                    hotkey::Intent::Cancel => self.ui.cancel(),
                    hotkey::Intent::Nothing => {}
                }
            }
            ShellEvent::HotkeyChord => {
                let recording = self.ui.is_recording();
                if self.gestures.cancel(recording) == hotkey::Intent::Cancel {
                    self.ui.cancel();
                }
            }
            ShellEvent::ModifierTapped(key) => self.ui.record_modifier(key),
        }
    }
}

impl Shell {
    /// What runs before every frame and, while the window is hidden, on every wake-up:
    /// backend updates, queued OS events, close/quit rules, hotkey and tray state.
    pub fn tick(&mut self, ctx: &egui::Context) {
        self.ui.process(ctx);
        self.indicator_stop();
        while let Ok(e) = self.events.try_recv() {
            self.handle(ctx, e);
        }
        if self.quitting {
            if !self.closing && ctx.input(|i| i.viewport().close_requested()) {
                ctx.send_viewport_cmd(egui::ViewportCommand::CancelClose);
            }
            self.poll_quit(ctx);
            if let Some(tray) = &mut self.tray {
                tray.sync(TrayState::Finishing, false, false);
            }
            return;
        }
        if ctx.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::Q)) {
            self.quit(ctx);
            return;
        }
        // The window keys an app menu would give (Persyk has none: winit's default menu is
        // off so that ⌘Q reaches the quit path above).
        for &(key, action) in window_keys(cfg!(target_os = "macos")) {
            if !ctx.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, key)) {
                continue;
            }
            match action {
                WindowKey::Close if self.tray.is_some() => close_to_tray(ctx),
                WindowKey::Close => {
                    self.quit(ctx);
                    return;
                }
                WindowKey::Hide => hide_app(ctx),
                WindowKey::Minimize => {
                    ctx.send_viewport_cmd(egui::ViewportCommand::Minimized(true));
                }
            }
        }
        // While hidden, `logic` sees the last shown frame's input again: act on a close
        // request once (by its frame time), or showing the window would hide it again.
        let close = ctx.input(|i| i.viewport().close_requested().then_some(i.time));
        if let Some(at) = close
            && self.handled_close != Some(at)
        {
            self.handled_close = Some(at);
            // Without a tray, closing quits: through the same path, so the window stays
            // (showing "Finishing…") until a running recording is saved.
            ctx.send_viewport_cmd(egui::ViewportCommand::CancelClose);
            if self.tray.is_some() {
                close_to_tray(ctx);
            } else {
                self.quit(ctx);
                return;
            }
        }
        self.sync_hotkey();
        self.cue();
        if let Some(tray) = &mut self.tray {
            tray.sync(
                self.ui.tray_state(),
                self.ui.is_recording(),
                self.ui.last_transcript().is_some(),
            );
            tray.set_can_paste_last(self.ui.paste_last_text().is_some());
            tray.set_cleanup_mode(self.ui.settings().cleanup.mode);
            let labels = recent_labels(
                self.ui
                    .recent()
                    .iter()
                    .map(|r| (r.text.as_str(), r.other_mac.as_deref())),
            );
            if self.recent_shown.as_ref() != Some(&labels) {
                tray.set_recent(&labels);
                self.recent_shown = Some(labels);
            }
        }
        if self.ui.is_recording() {
            // The tray icon follows the engine's state even while the window is hidden.
            ctx.request_repaint_after(Duration::from_millis(250));
        }
        let shown = self.indicator_model().is_some();
        self.sync_escape(shown);
        // Hidden, eframe runs no ui (so no viewport could open) unless asked once; once the
        // indicator's window shows, eframe keeps running the ui for it.
        if !self.indicator_open
            && self.indicator_model().is_some()
            && ctx.input(|i| i.viewport().visible()) == Some(false)
        {
            ctx.send_viewport_cmd(egui::ViewportCommand::RequestPaintWhileHidden);
            // That pass may be the first one eframe paints, after which it shows the window.
            if self.stay_hidden.is_some() {
                self.stay_hidden = Some(HIDE_PASSES);
            }
        }
    }

    /// What the indicator shows, or `None` when it is not to be shown.
    fn indicator_model(&self) -> Option<IndicatorModel> {
        if self.closing || !self.ui.settings().feedback.indicator_enabled() {
            return None;
        }
        self.ui.indicator()
    }

    /// Whether the recording indicator is shown (asked for in the last frame).
    pub fn indicator_shown(&self) -> bool {
        self.indicator_open
    }

    /// Draws the window's content, and the recording indicator while a recording runs.
    pub fn draw(&mut self, ui: &mut egui::Ui) {
        if let Some(left @ 1..) = self.stay_hidden {
            // Applied after eframe's first-frame "show" (a no-op while already hidden). Not
            // on every pass: each command asks for another pass.
            self.stay_hidden = Some(left - 1);
            ui.ctx()
                .send_viewport_cmd(egui::ViewportCommand::Visible(false));
        }
        self.ui.ui(ui);
        self.indicator_ui(ui.ctx());
    }

    /// Grabs Esc globally while the indicator shows a recording (Esc then cancels it from
    /// any app, as the indicator's ✕ does) and lets it go as soon as it does not: Esc is
    /// every other app's key the rest of the time.
    fn sync_escape(&mut self, shown: bool) {
        let want = shown
            && !self.options.no_hotkey
            && !self.grabs_paused
            && self.ui.escape_means_something();
        if want == self.escape_grabbed {
            return;
        }
        self.escape_grabbed = want;
        if want {
            let post = self.post.clone();
            let on_escape: hotkey::OnHotkey = Arc::new(move |pressed, _| {
                if pressed {
                    post(ShellEvent::EscapeHotkey);
                }
            });
            if let Err(e) =
                self.hotkeys
                    .set_slot(hotkey::Slot::Cancel, Some(hotkey::cancel_key()), on_escape)
            {
                // Another app holds Esc: the indicator's ✕ and the window's Esc still work.
                eprintln!("persyk: Esc to cancel: {e}");
            }
        } else {
            self.hotkeys.release_slot(hotkey::Slot::Cancel);
        }
    }

    /// Asks for the indicator's viewport while there is something to show. Deferred, not
    /// immediate: eframe creates its window with the event loop in hand, also after a pass
    /// of a hidden main window (an immediate viewport cannot open there), and repaints it
    /// without a pass of the main window.
    fn indicator_ui(&mut self, ctx: &egui::Context) {
        let model = self.indicator_model();
        let shown = model.is_some();
        if shown && !self.indicator_open {
            super::platform::before_indicator_opens();
            let size = (f64::from(indicator::SIZE.x), f64::from(indicator::SIZE.y));
            self.indicator_at =
                super::platform::indicator_place(size, f64::from(indicator::BOTTOM_MARGIN))
                    .map(|(x, y)| egui::pos2(x, y));
        }
        self.indicator_open = shown;
        {
            let mut shared = self
                .indicator
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            shared.model = model;
            if !shown {
                // The next indicator is a new window.
                shared.unfocusable = false;
            }
        }
        if !shown {
            return;
        }
        let builder = indicator::viewport_builder(
            ctx.input(|i| i.viewport().monitor_size),
            self.indicator_at,
        );
        let shared = self.indicator.clone();
        ctx.show_viewport_deferred(indicator::viewport_id(), builder, move |ui, _class| {
            let lock = || shared.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(view) = lock().model.as_ref().map(IndicatorModel::view) else {
                return;
            };
            if let Some(action) = indicator::indicator_ui(ui, &view) {
                lock().action = Some(action);
                ui.ctx().request_repaint_of(egui::ViewportId::ROOT);
            }
            // The clock and the meter move; this repaints the indicator's window only.
            ui.ctx().request_repaint_after(indicator::REPAINT);
            // A window of its own (not embedded): never a focus target (issue #25 item 1).
            if !ui.ctx().embed_viewports() && !lock().unfocusable {
                let done = super::platform::make_indicator_unfocusable(indicator::TITLE);
                lock().unfocusable = done;
            }
        });
        // Headless (embedded), the callback ran just now.
        self.indicator_stop();
    }

    /// Applies a click on the indicator: Stop, ✕ (cancel) or Undo.
    fn indicator_stop(&mut self) {
        let action = self
            .indicator
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .action
            .take();
        match action {
            Some(IndicatorAction::Stop) => self.ui.stop(),
            Some(IndicatorAction::Cancel) => self.ui.cancel(),
            Some(IndicatorAction::Undo) => self.ui.undo_cancel(),
            None => {}
        }
    }
}

impl eframe::App for Shell {
    fn logic(&mut self, ctx: &egui::Context, _frame: &mut eframe::Frame) {
        self.tick(ctx);
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.draw(ui);
    }

    fn on_exit(&mut self) {
        // The window closed some other way (the OS): finish within the same one deadline.
        if !self.ui.shutdown(self.quit_deadline) && !self.closing {
            eprintln!("persyk: the background worker did not stop in time");
        }
    }
}

/// What a window key does (the keys of an app menu's Window and app items).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKey {
    /// As the close button: to the menu bar while a tray icon exists, else quit.
    Close,
    /// Hide the window and give the keyboard back (never `NSApp hide:`); the menu's Open, or
    /// launching it again, brings it back.
    Hide,
    /// Minimize the window (to the Dock on macOS, the taskbar elsewhere).
    Minimize,
}

/// The window keys, each with ⌘ (Ctrl outside macOS): ⌘W closes and ⌘M minimizes
/// everywhere; ⌘H hides on a Mac only (Ctrl+H is no window key on Linux desktops).
pub fn window_keys(mac: bool) -> &'static [(egui::Key, WindowKey)] {
    const MAC: [(egui::Key, WindowKey); 3] = [
        (egui::Key::W, WindowKey::Close),
        (egui::Key::H, WindowKey::Hide),
        (egui::Key::M, WindowKey::Minimize),
    ];
    const OTHER: [(egui::Key, WindowKey); 2] = [
        (egui::Key::W, WindowKey::Close),
        (egui::Key::M, WindowKey::Minimize),
    ];
    if mac { &MAC } else { &OTHER }
}

/// ⌘H: the window goes and the app that was in front before gets the keyboard back, as a
/// Mac app's Hide would — but Persyk itself is never hidden (`NSApp hide:`), or the next
/// recording's indicator would stay off screen or unhide the app and take focus (issue #36
/// item 3). Elsewhere (never bound there) the window hides.
fn hide_app(ctx: &egui::Context) {
    close_to_tray(ctx);
}

/// Hides the window to the menu bar / tray, as the user closed it. On macOS the app the user
/// was in before gets the keyboard back (`NSApp deactivate`), so a later paste does not land
/// in Persyk (issue #25 item 8); Persyk stays unhidden, so the recording indicator can show.
fn close_to_tray(ctx: &egui::Context) {
    ctx.send_viewport_cmd(egui::ViewportCommand::Visible(false));
    #[cfg(target_os = "macos")]
    super::platform::macos::yield_focus();
}
