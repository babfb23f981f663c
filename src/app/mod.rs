//! The desktop app: a menu-bar icon and a small egui window over the library.
//!
//! ```text
//!  main thread (eframe/winit)            backend thread (tokio)
//!  ┌───────────────────────────┐  Command  ┌──────────────────────────────┐
//!  │ Shell: tray, hotkey, quit │─────────► │ Backend: recording pipeline, │
//!  │ PersykUi: view model + UI │ ◄──────── │ search, open, recover, save  │
//!  └───────────────────────────┘  Update   └──────────────────────────────┘
//!        ▲ ShellEvent (tray/menu/hotkey threads) + request_repaint
//! ```
//!
//! Module map: [`model`] (messages and view data), [`backend`] (the worker), [`ui`] (egui
//! rendering of the view model; tested headless with egui_kittest), [`effects`] (clipboard,
//! notifications), [`paste`] (the paste keystroke after a dictation), [`sounds`]
//! (start/stop cues), [`tray`], [`hotkey`], [`permission`] (microphone access), [`shell`] (the
//! eframe `App`), `macos` (AppKit pieces, macOS only).
//!
//! Invariants:
//! - The core modules (`session`, `realtime`, `capture`) never import this module.
//! - The UI thread never blocks on a file, socket or device. Quitting lets a running
//!   recording finish and be saved within one 30 s deadline while the window keeps
//!   painting "Finishing…"; only eframe's `on_exit`, when the OS closed the window some
//!   other way, waits for what is left of that deadline.
//! - Nothing repaints on a timer while idle.

pub mod autostart;
pub mod backend;
pub mod effects;
pub mod event;
pub mod hotkey;
pub mod model;
pub mod paste;
pub mod permission;
mod platform;
#[cfg(target_os = "linux")]
pub use platform::portal;
pub mod shell;
pub mod sounds;
pub mod tray;
pub mod ui;

use std::sync::Arc;

use eframe::egui;

use backend::{BackendConfig, BackendHandle, SystemKeys, SystemMicrophone};
use model::Waker;
use shell::{Shell, ShellOptions};
use ui::PersykUi;

use crate::settings::{self, Settings};

/// Why the app could not run.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("app.backend-failed: the background worker could not start")]
    Backend,
    #[error("app.window-failed: the window could not be opened ({0})")]
    Window(String),
}

/// The window's options; `visible: false` builds it invisible (`--hidden`), so it never
/// flashes on screen.
fn native_options(visible: bool) -> eframe::NativeOptions {
    let viewport = egui::ViewportBuilder::default()
        .with_title("Persyk")
        .with_app_id("persyk")
        .with_inner_size([520.0, 600.0])
        .with_min_inner_size([360.0, 320.0])
        .with_visible(visible);
    // macOS: an empty icon tells eframe to leave the application icon alone (it would set
    // the egui logo otherwise, over Persyk.app's own Persyk.icns; eframe 0.37 app_icon.rs).
    #[cfg(target_os = "macos")]
    let viewport = viewport.with_icon(std::sync::Arc::new(egui::IconData::default()));
    eframe::NativeOptions {
        viewport,
        event_loop_builder: event_loop_hook(visible),
        ..Default::default()
    }
}

/// macOS: a menu-bar app from the first moment (the Accessory policy is set before the
/// event loop launches, so no Dock icon flashes), and no default app menu, whose Quit item
/// would call `terminate:` and block the main thread there instead of letting ⌘Q reach
/// Persyk's own quit path ("Finishing…", then close). Started `--hidden` (`visible` false,
/// e.g. at login) it does not take activation from the app the user is in: winit activates
/// "ignoring other apps" at launch unless told not to.
#[cfg(target_os = "macos")]
fn event_loop_hook(visible: bool) -> Option<eframe::EventLoopBuilderHook> {
    use winit::platform::macos::{ActivationPolicy, EventLoopBuilderExtMacOS};
    Some(Box::new(move |builder| {
        builder
            .with_activation_policy(ActivationPolicy::Accessory)
            .with_default_menu(false)
            .with_activate_ignoring_other_apps(visible);
    }))
}

#[cfg(not(target_os = "macos"))]
fn event_loop_hook(_visible: bool) -> Option<eframe::EventLoopBuilderHook> {
    None
}

/// Runs the app until the user quits.
pub fn run(options: ShellOptions) -> Result<(), AppError> {
    let path = settings::settings_path();
    let (loaded, settings_problem) = match path.as_deref().map(Settings::load) {
        Some(Ok(s)) => (s, None),
        Some(Err(e)) => (Settings::default(), Some(e)),
        None => (Settings::default(), None),
    };
    let keys = Arc::new(SystemKeys);
    let key_stored = backend::KeyStore::get(&*keys).is_ok();
    let waker = Waker::new();
    let backend = BackendHandle::spawn(
        BackendConfig {
            settings_path: path,
            dev: settings::is_dev(),
            microphone: Arc::new(SystemMicrophone::default()),
            keys,
            replay_factor: 4.0,
            updates: backend::UpdateConfig {
                source: crate::update::Source::from_env(),
                // A development run (and so every test run) checks by itself only when
                // PERSYK_UPDATE_FEED names a feed.
                daily: !settings::is_dev() || crate::update::Source::feed_url_in_env(),
                first_daily_check: backend::FIRST_DAILY_CHECK,
            },
        },
        loaded.clone(),
        waker.clone(),
    )
    .map_err(|_| AppError::Backend)?;
    let mut ui = PersykUi::new(
        backend,
        Box::new(effects::SystemEffects::new()),
        waker,
        loaded,
        key_stored,
    );
    ui.set_key_storage(crate::credentials::storage());
    if let Some(e) = settings_problem {
        eprintln!("persyk: {e}");
        ui.set_settings_note(format!(
            "{e}. Persyk uses the defaults; saving settings replaces the file."
        ));
    }
    // `--hidden` only where a menu-bar/tray icon will exist (else the app is unreachable);
    // the shell shows the window again should the icon fail after all.
    let visible = !(options.hidden && tray::host_available());
    eframe::run_native(
        "Persyk",
        native_options(visible),
        Box::new(move |cc| {
            #[cfg(target_os = "macos")]
            {
                platform::macos::set_accessory_policy();
                effects::macos::install_notification_delegate();
                ui.set_microphone_note(permission::macos::microphone_note());
            }
            Ok(Box::new(Shell::new(&cc.egui_ctx, ui, options)))
        }),
    )
    .map_err(|e| AppError::Window(e.to_string()))
}

/// An empty eframe window with the same options: the baseline the app's figures (launch
/// time, idle CPU, memory) are measured against.
pub fn run_bare() -> Result<(), AppError> {
    struct Bare;
    impl eframe::App for Bare {
        fn logic(&mut self, ctx: &egui::Context, _frame: &mut eframe::Frame) {
            if ctx.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::Q)) {
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
        }
        fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
            egui::Frame::central_panel(ui.style()).show(ui, |ui| {
                ui.label("Persyk baseline window");
            });
        }
    }
    eframe::run_native(
        "Persyk",
        native_options(true),
        Box::new(|_cc| Ok(Box::new(Bare))),
    )
    .map_err(|e| AppError::Window(e.to_string()))
}
