//! The recording indicator (issue #14 item 2).
//!
//! Headless (egui_kittest runs `Shell::tick` and `Shell::draw` as eframe's `logic` and `ui`
//! would; without native windows the indicator's viewport is embedded as an egui window):
//! it appears only while a recording runs, its Stop stops the recording, the setting turns
//! it off, and with the main window hidden the shell asks eframe to run the ui so the
//! indicator's window can open.
//!
//! On a real X server (`tests/xapp`): the real binary, started `--hidden` with a tray icon,
//! opens a window titled "Persyk recording" only while a recording runs, started from the
//! tray icon or the hotkey, stopped by a click on the indicator's Stop or the hotkey, and
//! the text field of another app keeps keyboard focus (and what is typed) throughout.
#![cfg(feature = "app")]

mod app_support;
#[cfg(target_os = "linux")]
mod xapp;

use std::time::{Duration, Instant};

use app_support::{Fixture, fixture, one_utterance};
use eframe::egui::accesskit::Role;
use eframe::egui::{ViewportCommand, ViewportId, ViewportInfo};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use persyk::app::event::TrayState;
use persyk::app::event::{Post, ShellEvent};
use persyk::app::shell::{Shell, ShellOptions, TrayPort};
use persyk::app::ui::indicator::TITLE;
use persyk::settings::Settings;
#[cfg(target_os = "linux")]
use xapp::{Desktop, INDICATOR_TITLE};

/// A guard against hangs only (never a performance threshold).
const WAIT: Duration = Duration::from_secs(30);

struct NoTray;

impl TrayPort for NoTray {
    fn sync(&mut self, _state: TrayState, _recording: bool, _can_copy: bool) {}
}

struct App {
    harness: Harness<'static, Shell>,
    post: Post,
    _fixture: (
        tempfile::TempDir,
        Option<(tokio::runtime::Runtime, persyk::realtime::fake::FakeServer)>,
    ),
}

fn app(edit: impl FnOnce(&mut Settings)) -> App {
    let Fixture { ui, dir, fake, .. } = fixture(
        Some(one_utterance("indicator", "Stopped from the indicator.")),
        Some("sk-test"),
        30.0,
        edit,
    );
    let shell = Shell::with_tray(
        &eframe::egui::Context::default(),
        ui,
        ShellOptions {
            no_hotkey: true,
            ..ShellOptions::default()
        },
        |_post| Ok(Box::new(NoTray) as Box<dyn TrayPort>),
    );
    let post = shell.poster();
    let harness = Harness::builder()
        .with_size(eframe::egui::vec2(640.0, 900.0))
        .build_ui_state(
            |ui, shell: &mut Shell| {
                // As eframe: while the window is hidden, `logic` only.
                shell.tick(ui.ctx());
                if ui.ctx().input(|i| i.viewport().visible()) != Some(false) {
                    shell.draw(ui);
                }
            },
            shell,
        );
    App {
        harness,
        post,
        _fixture: (dir, fake),
    }
}

impl App {
    fn wait_until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        let start = Instant::now();
        loop {
            self.harness.step();
            if done(self) {
                return;
            }
            assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(15));
        }
    }

    fn indicator(&self) -> bool {
        self.harness.query_by_label(TITLE).is_some()
    }

    fn recording(&self) -> bool {
        self.harness.state().view().is_recording()
    }

    fn streaming(&self) -> bool {
        self.harness.state().view().tray_state() == TrayState::Recording
    }
}

/// Issue #14 item 2: nothing showed a recording unless the main window was open. The
/// indicator (title, state, elapsed time, a level meter and Stop) shows only while a
/// recording runs, and its Stop ends the recording.
#[test]
fn issue14_02_the_indicator_shows_only_while_recording_and_its_stop_stops() {
    let mut app = app(|_| {});
    app.harness.step();
    assert!(!app.indicator());
    assert!(!app.harness.state().indicator_shown());

    (app.post)(ShellEvent::TrayClick);
    app.wait_until("the recording to stream", |a| a.streaming());
    // A frame drawn in that state (the engine may have moved on after the last one).
    app.harness.step();
    assert!(app.indicator(), "no indicator while recording");
    assert!(app.harness.state().indicator_shown());
    // The Dictation page shows the state, the time and a meter too: the indicator adds its own.
    assert_eq!(app.harness.query_all_by_label("Recording").count(), 2);
    assert!(
        app.harness.query_all_by_label_contains("0:0").count() >= 2,
        "no elapsed time"
    );
    assert_eq!(
        app.harness
            .query_all_by_role(Role::ProgressIndicator)
            .count(),
        2,
        "no level meter"
    );

    // The indicator's own Stop (the main window's button is "Stop dictation").
    app.harness
        .get_by_role_and_label(Role::Button, "Stop")
        .click();
    app.wait_until("Stop to end the recording", |a| !a.recording());
    app.harness.step();
    assert!(!app.indicator(), "the indicator outlived the recording");
    assert!(!app.harness.state().indicator_shown());
    let saved = std::fs::read_dir(app._fixture.0.path().join("sessions"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("session.jsonl")).ok())
        .collect::<Vec<_>>();
    assert_eq!(saved.len(), 1);
    assert!(saved[0].contains("recording.finished"));
}

/// Issue #14 item 2: "a setting turns it off".
#[test]
fn issue14_02_the_indicator_setting_turns_it_off() {
    let mut app = app(|s| s.feedback.indicator = Some(false));
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("the recording to stream", |a| a.streaming());
    assert!(!app.indicator());
    assert!(!app.harness.state().indicator_shown());
    assert_eq!(
        app.harness
            .query_all_by_role(Role::ProgressIndicator)
            .count(),
        1
    );
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("the recording to end", |a| !a.recording());
}

/// Issue #14 item 2: with the main window hidden (closed to the tray) eframe runs no ui, so
/// no viewport could open; once the indicator is due the shell asks for one ui pass
/// (`RequestPaintWhileHidden`), whose draw opens it; from then on eframe keeps running the
/// ui for the visible child viewport, and nothing more is asked.
#[test]
fn issue14_02_a_hidden_window_still_gets_the_indicator() {
    let mut app = app(|_| {});
    let step = |app: &mut App, hidden: bool| {
        let info = if hidden {
            hidden_root()
        } else {
            ViewportInfo::default()
        };
        app.harness
            .input_mut()
            .viewports
            .insert(ViewportId::ROOT, info);
        app.harness.step();
    };
    let asked = |app: &App| {
        app.harness
            .output()
            .viewport_output
            .get(&ViewportId::ROOT)
            .is_some_and(|v| {
                v.commands
                    .contains(&ViewportCommand::RequestPaintWhileHidden)
            })
    };
    step(&mut app, true);
    assert!(!asked(&app), "asked to paint while idle");

    (app.post)(ShellEvent::TrayClick);
    step(&mut app, true); // the tray click, applied by `logic` alone
    assert!(app.recording());
    assert!(!app.harness.state().indicator_shown());
    assert!(
        asked(&app),
        "no ui pass asked for: the indicator cannot open"
    );

    step(&mut app, false); // the pass eframe runs for that request
    assert!(app.harness.state().indicator_shown());
    step(&mut app, true);
    assert!(!asked(&app), "asked again although the indicator is open");

    (app.post)(ShellEvent::TrayClick);
    app.wait_until("the recording to end", |a| !a.recording());
}

fn hidden_root() -> ViewportInfo {
    // What eframe sees of a window hidden in the tray on macOS (ordered out: occluded).
    ViewportInfo {
        minimized: Some(false),
        occluded: Some(true),
        ..ViewportInfo::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The real binary on Xvfb (Linux: the desktop is X11, D-Bus and PulseAudio).

/// Polls `done` until it holds, checking on every poll that `focus` still has the keyboard
/// and that the main window stays hidden. (Not before the app's first frame: eframe maps a
/// window after the first frame it paints, and the shell unmaps it in the same turn of the
/// event loop, so a poll may see it mapped for that moment.)
#[cfg(target_os = "linux")]
fn wait_keeping_focus(desktop: &Desktop, focus: &str, what: &str, done: impl Fn() -> bool) {
    wait_for(desktop, focus, true, what, done);
}

#[cfg(target_os = "linux")]
fn wait_for(desktop: &Desktop, focus: &str, hidden: bool, what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    loop {
        assert_eq!(
            desktop.focus(),
            focus,
            "the other app lost keyboard focus while waiting for {what}"
        );
        assert!(
            !hidden || desktop.windows("Persyk").is_empty(),
            "the main window showed while waiting for {what}"
        );
        if done() {
            return;
        }
        assert!(
            start.elapsed() < WAIT,
            "timed out waiting for {what}; app log:\n{}\nsessions:\n{}",
            desktop.app_log(),
            xapp::sessions(&desktop.sessions()).join("\n---\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The real-app tests of this file run one at a time: two desktops (Xvfb, a bus, a sound
/// server, the app) side by side on a small machine starve the test microphone and delay
/// the indicator's first frames past a click.
#[cfg(target_os = "linux")]
fn real_app_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Clicks the indicator's Stop button; `false` if the indicator was already gone.
#[cfg(target_os = "linux")]
fn click_stop(desktop: &Desktop) -> bool {
    let Some(id) = desktop.windows(INDICATOR_TITLE).pop() else {
        return false;
    };
    let (_, _, width, height) = desktop.geometry(&id);
    assert!(width > 100 && height > 20, "indicator {width}x{height}");
    // The Stop button is the rightmost control, centred vertically.
    let (x, y) = ((width - 34).to_string(), (height / 2).to_string());
    if !desktop
        .xdotool(&["mousemove", "--window", &id, &x, &y])
        .status
        .success()
    {
        return false;
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(desktop.xdotool(&["click", "1"]).status.success());
    true
}

/// The recordings `root` holds that ended, and how many of them the silence detector ended.
#[cfg(target_os = "linux")]
fn finished(root: &std::path::Path) -> (usize, usize) {
    let sessions = xapp::sessions(root);
    let ended = sessions
        .iter()
        .filter(|s| s.contains("\"recording.finished\""))
        .count();
    let silent = sessions
        .iter()
        .filter(|s| s.contains("capture.silent-input"))
        .count();
    (ended, silent)
}

/// Issue #14 item 2 on a real X server: the indicator window exists only while a recording
/// runs — with the main window hidden in the tray — and the focused text field of another
/// app keeps focus (and receives what is typed) while the indicator opens, while its Stop is
/// clicked and while it closes; started by the hotkey or the tray icon.
#[cfg(target_os = "linux")]
#[test]
fn issue14_02_the_real_app_shows_the_indicator_only_while_recording_and_keeps_focus() {
    let _one_at_a_time = real_app_turn();
    let Some(desktop) = Desktop::start(xapp::RECORDINGS) else {
        return;
    };
    let entry = desktop.tk_entry();
    let focus = desktop.focus();
    assert!(!focus.is_empty(), "the Tk field has no focus");
    let mut persyk = desktop.launch(true, &["app", "--hidden"]);
    let item = desktop.wait_tray();
    let indicator = || !desktop.windows(INDICATOR_TITLE).is_empty();
    // Nothing records: no indicator.
    assert!(!indicator(), "an indicator while idle");
    let sessions = desktop.sessions();

    // 1. Started with the global hotkey, stopped with the indicator's Stop button. (Where
    // the machine is so busy that the test microphone delivers nothing for 2 s, the
    // recording halts with `capture.silent-input` first and closes the indicator: again.)
    let mut stopped = false;
    for attempt in 1..=3 {
        let (before, silent_before) = finished(&sessions);
        assert!(desktop.xdotool(&["key", "alt+space"]).status.success());
        // The first frames have been painted once the indicator shows (see above).
        wait_for(
            &desktop,
            &focus,
            attempt > 1,
            "the indicator (hotkey)",
            indicator,
        );
        // A tray icon exists, so the main window stays hidden.
        assert!(
            desktop.windows("Persyk").is_empty(),
            "the main window showed"
        );
        if attempt == 1 {
            let typed = desktop.xdotool(&["type", "--delay", "20", "abc"]);
            assert!(typed.status.success());
        }
        let clicked = click_stop(&desktop);
        wait_keeping_focus(&desktop, &focus, "the indicator to close", || !indicator());
        wait_keeping_focus(&desktop, &focus, "the recording to be saved", || {
            finished(&sessions).0 > before
        });
        if clicked && finished(&sessions).1 == silent_before {
            stopped = true;
            break;
        }
        eprintln!("attempt {attempt}: the recording halted on a silent test microphone");
    }
    assert!(
        stopped,
        "the indicator's Stop never got to stop a recording"
    );

    // 2. Started from the tray icon, stopped with the hotkey.
    let (before, _) = finished(&sessions);
    desktop.click_tray(&item);
    wait_keeping_focus(&desktop, &focus, "the indicator (tray)", indicator);
    assert!(desktop.xdotool(&["key", "alt+space"]).status.success());
    wait_keeping_focus(&desktop, &focus, "the recording to be saved", || {
        finished(&sessions).0 > before
    });
    wait_keeping_focus(&desktop, &focus, "the indicator to close", || !indicator());

    assert_eq!(
        entry.text(),
        "abc",
        "typing did not reach the focused field"
    );
    assert!(
        desktop.windows("Persyk").is_empty(),
        "the main window showed"
    );
    assert_eq!(desktop.focus(), focus);
    let _ = persyk.kill();
    let _ = persyk.wait();
}

/// The `input` field of window `id`'s `WM_HINTS` (`None`: no hints, or no input field).
#[cfg(target_os = "linux")]
fn input_hint(desktop: &Desktop, id: &str) -> Option<bool> {
    let (conn, _) = x11rb::connect(Some(&desktop.display)).expect("connect to Xvfb");
    let window: u32 = id.parse().expect("a window id");
    x11rb::properties::WmHints::get(&conn, window)
        .expect("ask for WM_HINTS")
        .reply()
        .expect("WM_HINTS")?
        .input
}

/// Issue #25 item 1 on X11: the indicator must never take focus from the window the user
/// types in, also under a window manager that focuses windows on click. winit sets no
/// `WM_HINTS` input field, which window managers read as "give it focus" (ICCCM §4.1.7);
/// the indicator's window now says `input = False` (the "No Input" model). Checked on the
/// real binary: the hint is there while the indicator shows, and a focused Tk entry keeps
/// the keyboard while the indicator's Stop is clicked (Xvfb runs no window manager, so the
/// hint is asserted as the window manager would read it).
#[cfg(target_os = "linux")]
#[test]
fn issue25_01_the_indicator_asks_the_window_manager_for_no_input_focus() {
    let _one_at_a_time = real_app_turn();
    let Some(desktop) = Desktop::start(xapp::RECORDINGS) else {
        return;
    };
    let _entry = desktop.tk_entry();
    let focus = desktop.focus();
    assert!(!focus.is_empty(), "the Tk field has no focus");
    let mut persyk = desktop.launch(true, &["app", "--hidden"]);
    desktop.wait_tray();
    assert!(desktop.xdotool(&["key", "alt+space"]).status.success());
    let indicator = || desktop.windows(INDICATOR_TITLE).pop();
    wait_for(&desktop, &focus, false, "the indicator", || {
        indicator().is_some()
    });
    let id = indicator().expect("the indicator's window");
    wait_for(&desktop, &focus, false, "the indicator's WM_HINTS", || {
        input_hint(&desktop, &id) == Some(false)
    });
    // A click that lands before the indicator laid out its button misses it: click again
    // until the recording stops (the focus is checked on every poll meanwhile).
    let start = Instant::now();
    while indicator().is_some() {
        assert!(
            start.elapsed() < WAIT,
            "the indicator's Stop never stopped the recording"
        );
        click_stop(&desktop);
        let clicked = Instant::now();
        while indicator().is_some() && clicked.elapsed() < Duration::from_secs(2) {
            assert_eq!(desktop.focus(), focus, "the Tk entry lost focus");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert_eq!(desktop.focus(), focus);
    let _ = persyk.kill();
    let _ = persyk.wait();
}

/// Issue #24 items 9 and 10: the indicator's ✕ cancels (nothing kept in the window's
/// transcript, the indicator says so with Undo for a few seconds, then the session is
/// deleted); its Undo keeps the recording.
#[test]
fn issue24_09_the_indicators_cancel_offers_undo_then_deletes_the_recording() {
    let sessions = |app: &App| {
        std::fs::read_dir(app._fixture.0.path().join("sessions"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().join("session.jsonl").is_file())
                    .count()
            })
            .unwrap_or(0)
    };
    // ✕, then nothing: gone after the Undo time, and so is the indicator.
    let mut app = app(|_| {});
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("the recording to stream", |a| a.streaming());
    app.harness.step();
    app.harness
        .get_by_role_and_label(Role::Button, "Cancel recording")
        .click();
    app.wait_until("the cancel to end the recording", |a| !a.recording());
    app.wait_until("the indicator's Undo", |a| {
        a.harness
            .query_all_by_role_and_label(Role::Button, "Undo")
            .count()
            == 2
    });
    // The Dictation page offers it too; the indicator's is the second.
    assert!(app.indicator(), "the indicator offers the Undo");
    assert_eq!(sessions(&app), 1);
    app.wait_until("the indicator to go", |a| !a.indicator());
    app.wait_until("the session to be deleted", |a| sessions(a) == 0);

    // ✕, then the indicator's Undo: kept, and saved as a stop saves it.
    let mut app2 = self::app(|_| {});
    (app2.post)(ShellEvent::TrayClick);
    app2.wait_until("the recording to stream", |a| a.streaming());
    app2.harness.step();
    app2.harness
        .get_by_role_and_label(Role::Button, "Cancel recording")
        .click();
    app2.wait_until("the indicator's Undo", |a| {
        a.harness
            .query_all_by_role_and_label(Role::Button, "Undo")
            .count()
            == 2
    });
    app2.harness
        .query_all_by_role_and_label(Role::Button, "Undo")
        .nth(1)
        .expect("the indicator's Undo")
        .click();
    app2.wait_until("the recording delivered", |a| {
        a.harness
            .query_all_by_label_contains("Saved:")
            .next()
            .is_some()
    });
    let until = Instant::now() + persyk::app::ui::UNDO_FOR + Duration::from_secs(1);
    app2.wait_until("the Undo time to pass", move |_| Instant::now() > until);
    assert_eq!(sessions(&app2), 1);
}

/// Issue #24 item 9 on a real X server: while the indicator shows, Esc cancels the recording
/// from any app (grabbed globally only then): the Tk field keeps focus and gets nothing, the
/// indicator offers Undo, and the session is deleted after the Undo time. Once the indicator
/// is gone, Esc is the field's again.
#[cfg(target_os = "linux")]
#[test]
fn issue24_09_esc_cancels_from_the_focused_app_while_the_indicator_shows() {
    let _one_at_a_time = real_app_turn();
    let Some(desktop) = Desktop::start(xapp::RECORDINGS) else {
        return;
    };
    let entry = desktop.tk_entry();
    let focus = desktop.focus();
    assert!(!focus.is_empty(), "the Tk field has no focus");
    let mut persyk = desktop.launch(true, &["app", "--hidden"]);
    desktop.wait_tray();
    let root = desktop.sessions();
    let count = || {
        std::fs::read_dir(&root)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().join("session.jsonl").is_file())
                    .count()
            })
            .unwrap_or(0)
    };
    let indicator = || !desktop.windows(INDICATOR_TITLE).is_empty();
    assert!(desktop.xdotool(&["key", "alt+space"]).status.success());
    wait_for(&desktop, &focus, true, "the indicator", indicator);
    wait_keeping_focus(&desktop, &focus, "the session", || count() == 1);
    // Recording for a moment, then Esc in the other app.
    std::thread::sleep(Duration::from_millis(800));
    assert!(desktop.xdotool(&["key", "Escape"]).status.success());
    // Cancelled (kept for the Undo time, then deleted) and the indicator gone after it.
    wait_keeping_focus(
        &desktop,
        &focus,
        "the cancelled session to be deleted",
        || count() == 0,
    );
    wait_keeping_focus(&desktop, &focus, "the indicator to close", || !indicator());
    assert_eq!(entry.text(), "", "something reached the focused field");
    // Esc is not grabbed any more: it reaches the field (a Tk entry ignores it, so type a
    // letter after it to see the keyboard is the field's).
    assert!(desktop.xdotool(&["key", "Escape", "x"]).status.success());
    wait_keeping_focus(&desktop, &focus, "the field to get keys again", || {
        entry.text() == "x"
    });
    let _ = persyk.kill();
    let _ = persyk.wait();
}

/// Issue #27 item 7: with a clean-up mode set, the indicator says which one the words will
/// go through ("Recording · Tidy"); without one, only the state.
#[test]
fn issue27_the_indicator_shows_the_clean_up_mode() {
    let mut app = app(|s| {
        s.cleanup.mode = persyk::cleanup::settings::CleanupMode::Tidy;
        s.cleanup.base_url = "http://127.0.0.1:9/v1".into();
        s.cleanup.model = "m".into();
    });
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("the recording to stream", |a| a.streaming());
    app.harness.step();
    assert!(app.harness.query_by_label("Recording · Tidy").is_some());
    app.harness
        .get_by_role_and_label(Role::Button, "Stop")
        .click();
    app.wait_until("the recording to end", |a| !a.recording());

    let mut plain = self::app(|_| {});
    (plain.post)(ShellEvent::TrayClick);
    plain.wait_until("the recording to stream", |a| a.streaming());
    plain.harness.step();
    assert!(
        plain
            .harness
            .query_all_by_label_contains("·")
            .next()
            .is_none()
    );
}
