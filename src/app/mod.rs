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
//! (start/stop cues), [`playback`] (a saved recording played back in history), [`tray`], [`hotkey`], [`permission`] (microphone access), `instance`
//! (one Persyk per user: a second launch shows the running one's window), [`shell`] (the
//! eframe `App`), `platform` (window-level OS glue; AppKit pieces on macOS).
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
pub mod frontmost;
pub mod hotkey;
#[cfg(unix)]
pub mod instance;
pub mod model;
pub mod modkeys;
pub mod paste;
pub mod permission;
mod platform;
pub mod playback;
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
    /// Another Persyk runs but did not answer (issue #25 item 4).
    #[cfg(unix)]
    #[error("{0}")]
    Instance(instance::InstanceError),
}

/// How a launch goes on once it looked for a running Persyk.
#[cfg(unix)]
enum Launch {
    /// This process is the one Persyk (`None`: the instance could not be set up, said on
    /// stderr; the app runs all the same rather than not at all).
    Run(Option<instance::Listener>),
    /// Another Persyk runs and was asked to show its window (or, `--hidden`, only greeted).
    AlreadyRunning,
}

/// One Persyk per settings file (per user): claims the instance, or asks the running one to
/// show its window. A `--hidden` launch (at login) only checks.
#[cfg(unix)]
fn claim_instance(settings: Option<&std::path::Path>, hidden: bool) -> Result<Launch, AppError> {
    let Some(place) = instance::place(settings) else {
        return Ok(Launch::Run(None));
    };
    let request = if hidden {
        instance::Request::Hello
    } else {
        instance::Request::Show
    };
    match instance::claim(&place, request) {
        Ok(instance::Claim::First(listener)) => Ok(Launch::Run(Some(listener))),
        Ok(instance::Claim::Running) => Ok(Launch::AlreadyRunning),
        Err(e @ instance::InstanceError::NoAnswer) => Err(AppError::Instance(e)),
        Err(e) => {
            eprintln!("persyk: {e}; a second launch will start a second Persyk");
            Ok(Launch::Run(None))
        }
    }
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
    let viewport = viewport.with_icon(Arc::new(window_icon()));
    eframe::NativeOptions {
        viewport,
        event_loop_builder: event_loop_hook(visible),
        ..Default::default()
    }
}

/// Whether the window shows at launch: not when started `--hidden` or as a login item, where
/// a menu-bar/tray icon will exist to reach it.
pub fn starts_visible(hidden: bool, login: bool, tray_host: bool) -> bool {
    !((hidden || login) && tray_host)
}

/// Persyk's window icon, drawn by `scripts/make-icons` beside the app icon.
pub const WINDOW_ICON_PNG: &[u8] = include_bytes!("../../assets/icon/persyk-128.png");

/// The icon eframe is given. Never `None`: eframe 0.37 puts the egui logo in its place
/// (`native/epi_integration.rs`, `load_default_egui_icon`). On macOS an empty icon, which
/// eframe reads as "leave the application icon alone" (`native/app_icon.rs`), so
/// Persyk.app's own Persyk.icns stays; elsewhere Persyk's picture at 128 px (X11's
/// `_NET_WM_ICON`; egui-winit gives it to winit's `with_window_icon`).
pub fn window_icon() -> egui::IconData {
    if cfg!(target_os = "macos") {
        return egui::IconData::default();
    }
    eframe::icon_data::from_png_bytes(WINDOW_ICON_PNG).unwrap_or_default()
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
    // Launched again: the running Persyk shows its window, and this process ends here.
    #[cfg(unix)]
    let listener = match claim_instance(path.as_deref(), options.hidden)? {
        Launch::Run(listener) => listener,
        Launch::AlreadyRunning => {
            eprintln!("persyk: Persyk is already running (its window was asked to show)");
            return Ok(());
        }
    };
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
            frontmost: frontmost::system(),
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
    // the shell shows the window again should the icon fail after all. On macOS the window
    // is built hidden and not activated, and shown only once the launch is known not to be a
    // login item's (the Apple event that tells is current only inside the creation callback):
    // decided hidden first, never shown and then hidden (issue #36 item 4).
    let host = tray::host_available();
    let built_visible = starts_visible(options.hidden, false, host) && !cfg!(target_os = "macos");
    // Finder's Open With: the handler must be in place before AppKit finishes launching.
    #[cfg(target_os = "macos")]
    platform::macos::handle_open_documents();
    eframe::run_native(
        "Persyk",
        native_options(built_visible),
        Box::new(move |cc| {
            #[cfg(target_os = "macos")]
            let options = {
                platform::macos::set_accessory_policy();
                ui.set_microphone_note(permission::macos::microphone_note());
                // A login item starts without `--hidden`: started so, Persyk stays in the
                // menu bar as `--hidden` would; otherwise the window, built hidden, is shown
                // and Persyk activated only now.
                let mut options = options;
                let login = platform::macos::launched_at_login();
                if starts_visible(options.hidden, login, host) {
                    cc.egui_ctx
                        .send_viewport_cmd(egui::ViewportCommand::Visible(true));
                    platform::macos::activate();
                }
                options.hidden |= login;
                options
            };
            let shell = Shell::new(&cc.egui_ctx, ui, options);
            // Every way of "open Persyk again" is one event: a second launch (the socket),
            // on macOS the reopen Apple event (Finder, Spotlight, Launchpad) and a click on
            // a notification banner.
            let post = shell.poster();
            #[cfg(unix)]
            if let Some(listener) = listener {
                let post = post.clone();
                let served = listener.serve(move |request| {
                    if request == instance::Request::Show {
                        post(event::ShellEvent::Reopen);
                    }
                });
                if let Err(e) = served {
                    eprintln!("persyk: {e}");
                }
            }
            #[cfg(target_os = "macos")]
            {
                let reopen = post.clone();
                platform::macos::handle_reopen(Box::new(move || reopen(event::ShellEvent::Reopen)));
                let opener = shell.opener();
                platform::macos::on_open_documents(Box::new(move |files| opener.open(files)));
                effects::macos::install_notification_delegate();
            }
            effects::on_notification_click(Box::new(move || post(event::ShellEvent::Reopen)));
            Ok(Box::new(shell))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #25 item 9: without an icon of its own, eframe shows the egui logo for Persyk
    /// (as the app icon on macOS and Windows), and X11 windows had none. The window icon is
    /// Persyk's picture: 128 px, transparent corners, the blue-violet square with a white
    /// microphone in the middle.
    #[test]
    fn issue25_09_the_window_icon_is_persyks_not_eframes() {
        let icon = native_options(true)
            .viewport
            .icon
            .expect("an icon of Persyk's own, or eframe uses its logo");
        if cfg!(target_os = "macos") {
            assert_eq!(*icon, egui::IconData::default(), "Persyk.app's icns stays");
            return;
        }
        assert_eq!((icon.width, icon.height), (128, 128));
        assert_eq!(icon.rgba.len(), 128 * 128 * 4);
        let px = |x: usize, y: usize| {
            let i = (y * 128 + x) * 4;
            [
                icon.rgba[i],
                icon.rgba[i + 1],
                icon.rgba[i + 2],
                icon.rgba[i + 3],
            ]
        };
        assert_eq!(px(0, 0)[3], 0, "transparent corner");
        let [r, g, b, a] = px(20, 20);
        assert_eq!(a, 255);
        assert!(
            b > 200 && r < 140 && g < 160,
            "the gradient square: {r} {g} {b}"
        );
        let [r, g, b, _] = px(64, 40);
        assert!(
            r > 240 && g > 240 && b > 240,
            "the white microphone: {r} {g} {b}"
        );
        assert_eq!(*icon, window_icon());
    }

    /// Issue #36 item 4: a login item (or `--hidden`) with a menu-bar icon is decided hidden
    /// before the window is shown; without an icon the window must show to be reachable.
    #[test]
    fn issue36_04_a_login_launch_starts_hidden() {
        assert!(!starts_visible(false, true, true));
        assert!(!starts_visible(true, false, true));
        assert!(starts_visible(false, false, true));
        assert!(starts_visible(true, true, false));
    }
}
