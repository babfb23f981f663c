//! The eframe application: window rules, the tray, the hotkey and quitting.
//!
//! The window's style ([`super::ui::style::install`]: spacing, type, light and dark themes
//! following the system) is installed once, when the shell is built.
//!
//! Invariants:
//! - Tray, menu and hotkey callbacks run on other threads; they only queue a [`ShellEvent`]
//!   (bounded) and request a repaint. [`Shell::logic`] applies them on the UI thread, also
//!   while the window is hidden.
//! - Closing the window hides it when a tray icon exists; without one, closing quits (the
//!   app would otherwise be unreachable).
//! - Quitting (menu, ⌘Q/Ctrl+Q, or closing without a tray) stops a running recording and
//!   lets it finish, bounded by one deadline, before the process exits. The UI thread never
//!   waits for it: the window keeps painting "Finishing…" and closes when the backend
//!   reports it stopped or the deadline passed. Close requests meanwhile are cancelled.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

use eframe::egui;

use super::backend::{SHUTDOWN_DEADLINE, ShutdownStatus};
use super::hotkey;
use super::sounds::{self, Cue, Sounds};
use super::tray::{Tray, TrayError, TrayState};
use super::ui::{Page, PersykUi};
use crate::settings::HotkeyMode;

/// A tray menu entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MenuAction {
    Toggle,
    CopyLast,
    Open,
    Search,
    Settings,
    Quit,
}

/// Something the OS told us, queued for the UI thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellEvent {
    Menu(MenuAction),
    /// A plain left click on the icon (toggles dictation).
    TrayClick,
    /// A ctrl-click on the icon: open its menu, as a right click does (macOS).
    TrayMenu,
    /// The global hotkey was pressed (`true`) or released.
    Hotkey(bool),
}

/// A function that queues a [`ShellEvent`] and wakes the window (safe from any thread).
pub type Post = Arc<dyn Fn(ShellEvent) + Send + Sync>;

/// What the shell needs from a tray icon: the real one, or a test double.
pub trait TrayPort {
    /// Shows `state`, the toggle's label and whether there is something to copy.
    fn sync(&mut self, state: TrayState, recording: bool, can_copy: bool);
    /// Opens the icon's menu (where the platform can).
    fn show_menu(&self) {}
}

impl TrayPort for Tray {
    fn sync(&mut self, state: TrayState, recording: bool, can_copy: bool) {
        Tray::sync(self, state, recording, can_copy);
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

/// The running app.
pub struct Shell {
    ui: PersykUi,
    events: Receiver<ShellEvent>,
    post: Post,
    tray: Option<Box<dyn TrayPort>>,
    options: ShellOptions,
    hotkeys: hotkey::Hotkeys,
    hotkey_generation: Option<u64>,
    /// The start/stop cue player, and the tray state the last cue was chosen from.
    sounds: Option<Sounds>,
    cue_state: TrayState,
    quitting: bool,
    /// The close command was sent (after the backend stopped or the deadline passed).
    closing: bool,
    /// How long quitting waits for a running recording (tests shorten it).
    quit_deadline: Duration,
    /// Input time of the close request already acted on.
    handled_close: Option<f64>,
}

impl Shell {
    /// Builds the shell inside eframe's creation closure (main thread, loop running).
    pub fn new(ctx: &egui::Context, ui: PersykUi, options: ShellOptions) -> Shell {
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
            sounds: if options.play_sounds {
                Sounds::spawn(sounds::play_on_default_output)
            } else {
                None
            },
            cue_state: TrayState::Idle,
            quitting: false,
            closing: false,
            quit_deadline: SHUTDOWN_DEADLINE,
            handled_close: None,
        };
        shell.sync_hotkey();
        shell
    }

    /// Registers the saved hotkey once per settings generation (at start and after each
    /// Save): an unchanged combination stays registered, a changed one replaces the old,
    /// and a failure is said on the Settings page.
    fn sync_hotkey(&mut self) {
        let generation = self.ui.settings_generation();
        if self.hotkey_generation == Some(generation) {
            return;
        }
        self.hotkey_generation = Some(generation);
        self.ui.hotkey_note = None;
        if self.options.no_hotkey {
            return;
        }
        let post = self.post.clone();
        let on_event: hotkey::OnHotkey = Arc::new(move |pressed| post(ShellEvent::Hotkey(pressed)));
        let result = hotkey::parse(&self.ui.settings().hotkey)
            .and_then(|keys| self.hotkeys.set(keys, on_event));
        if let Err(e) = result {
            eprintln!("persyk: {e}");
            self.hotkeys.release();
            self.ui.hotkey_note = Some(format!(
                "The global hotkey is not active: {e}. The menu-bar icon and the Start button \
                 still work."
            ));
        }
    }

    /// Replaces the cue player (tests record cues instead of playing them).
    pub fn set_sounds(&mut self, sounds: Option<Sounds>) {
        self.sounds = sounds;
    }

    /// Plays the start cue when a dictation begins (leaves idle) and the stop cue when it
    /// stops recording, if the settings allow. Never waits: the player has its own thread.
    fn cue(&mut self) {
        let state = self.ui.tray_state();
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
        ctx.send_viewport_cmd(egui::ViewportCommand::Visible(true));
        ctx.send_viewport_cmd(egui::ViewportCommand::Focus);
        // An Accessory app stays behind the frontmost app unless it activates itself.
        #[cfg(target_os = "macos")]
        super::macos::activate();
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
        if self.quitting && event != ShellEvent::Menu(MenuAction::Open) {
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
            ShellEvent::Menu(MenuAction::Open) => self.show(ctx, None),
            ShellEvent::Menu(MenuAction::Search) => self.show(ctx, Some(Page::Search)),
            ShellEvent::Menu(MenuAction::Settings) => self.show(ctx, Some(Page::Settings)),
            ShellEvent::Menu(MenuAction::Quit) => self.quit(ctx),
            ShellEvent::Hotkey(pressed) => match self.ui.settings().hotkey.mode {
                HotkeyMode::Toggle if pressed => self.ui.toggle(),
                HotkeyMode::Toggle => {}
                HotkeyMode::PushToTalk if pressed => self.ui.start(),
                HotkeyMode::PushToTalk => self.ui.stop(),
            },
        }
    }
}

impl Shell {
    /// What runs before every frame and, while the window is hidden, on every wake-up:
    /// backend updates, queued OS events, close/quit rules, hotkey and tray state.
    pub fn tick(&mut self, ctx: &egui::Context) {
        self.ui.process(ctx);
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
                ctx.send_viewport_cmd(egui::ViewportCommand::Visible(false));
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
        }
        if self.ui.is_recording() {
            // The tray icon follows the engine's state even while the window is hidden.
            ctx.request_repaint_after(Duration::from_millis(250));
        }
    }

    /// Draws the window's content.
    pub fn draw(&mut self, ui: &mut egui::Ui) {
        self.ui.ui(ui);
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
