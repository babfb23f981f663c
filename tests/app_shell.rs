//! The eframe shell, headless (egui_kittest runs `Shell::tick` then `Shell::draw`, what
//! eframe's `logic` and `ui` call): closing hides to the tray or quits without one; tray clicks, menu entries and
//! the push-to-talk hotkey drive dictation through the same event queue the OS callbacks
//! use; the tray icon follows the recording's state; quitting finishes a running recording.
//! The tray itself is a recorder standing in for `tray-icon` (Xvfb has no tray host).
#![cfg(feature = "app")]

mod app_support;
#[cfg(feature = "local")]
mod support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use app_support::shell::shell_harness;
use app_support::{Fixture, fixture, one_utterance};
use eframe::egui::{ViewportCommand, ViewportEvent, ViewportId};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use persyk::app::event::TrayState;
use persyk::app::event::{MenuAction, Post, ShellEvent};
use persyk::app::shell::{Shell, ShellOptions, TrayPort};
use persyk::app::sounds::{Cue, Sounds};
use persyk::app::tray::TrayError;
use persyk::app::ui::Page;
use persyk::settings::HotkeyMode;

type Syncs = Arc<Mutex<Vec<(TrayState, bool, bool)>>>;
type RecentMenus = Arc<Mutex<Vec<Vec<String>>>>;

/// Records what the shell shows, once per change, and each "Recent" submenu it is given.
struct FakeTray(Syncs, RecentMenus);

impl TrayPort for FakeTray {
    fn sync(&mut self, state: TrayState, recording: bool, can_copy: bool) {
        let mut v = self.0.lock().unwrap();
        if v.last() != Some(&(state, recording, can_copy)) {
            v.push((state, recording, can_copy));
        }
    }
    fn set_recent(&mut self, labels: &[String]) {
        self.1.lock().unwrap().push(labels.to_vec());
    }
}

struct ShellApp {
    harness: Harness<'static, Shell>,
    post: Post,
    syncs: Syncs,
    recent: RecentMenus,
    fixture_rest: (tempfile::TempDir, std::path::PathBuf),
    _fake: Option<(tokio::runtime::Runtime, persyk::realtime::fake::FakeServer)>,
    copies: Arc<Mutex<Vec<String>>>,
}

fn shell(f: Fixture, with_tray: bool) -> ShellApp {
    let syncs: Syncs = Arc::default();
    let recent: RecentMenus = Arc::default();
    let Fixture {
        ui,
        effects,
        root,
        dir,
        fake,
        ..
    } = f;
    let tray_syncs = syncs.clone();
    let tray_recent = recent.clone();
    let harness = shell_harness(
        ui,
        ShellOptions {
            hidden: false,
            no_hotkey: true,
            ..ShellOptions::default()
        },
        move |_post| {
            if with_tray {
                Ok(Box::new(FakeTray(tray_syncs, tray_recent)) as Box<dyn TrayPort>)
            } else {
                Err(TrayError::NoHost)
            }
        },
    );
    let post = harness.state().poster();
    ShellApp {
        harness,
        post,
        syncs,
        recent,
        fixture_rest: (dir, root),
        _fake: fake,
        copies: effects.copies,
    }
}

impl ShellApp {
    fn step(&mut self) {
        self.harness.step();
    }

    fn wait_until(&mut self, what: &str, done: impl Fn(&ShellApp) -> bool) {
        let start = Instant::now();
        loop {
            self.step();
            if done(self) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "timed out waiting for {what}; tray saw {:?}",
                self.syncs.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(15));
        }
    }

    /// The viewport commands of the last frame.
    fn commands(&self) -> Vec<ViewportCommand> {
        self.harness
            .output()
            .viewport_output
            .get(&ViewportId::ROOT)
            .map(|v| v.commands.clone())
            .unwrap_or_default()
    }

    fn close_window(&mut self) {
        self.harness
            .input_mut()
            .viewports
            .entry(ViewportId::ROOT)
            .or_default()
            .events
            .push(ViewportEvent::Close);
        self.step();
    }

    fn last_sync(&self) -> Option<(TrayState, bool, bool)> {
        self.syncs.lock().unwrap().last().copied()
    }

    fn saw(&self, state: TrayState) -> bool {
        self.syncs.lock().unwrap().iter().any(|s| s.0 == state)
    }

    /// The "Recent" labels the tray shows now.
    fn recent_menu(&self) -> Option<Vec<String>> {
        self.recent.lock().unwrap().last().cloned()
    }

    fn root(&self) -> &Path {
        &self.fixture_rest.1
    }
}

fn dictation_scenario() -> persyk::realtime::fake::Scenario {
    one_utterance("shell", "Said through the tray.")
}

fn session_files(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("session.jsonl")).ok())
        .collect()
}

#[test]
fn closing_hides_to_the_tray_and_the_menu_brings_the_window_back() {
    let mut app = shell(fixture(None, Some("sk-test"), 5.0, |_| {}), true);
    app.step();
    assert_eq!(app.last_sync(), Some((TrayState::Idle, false, false)));
    app.close_window();
    let commands = app.commands();
    assert!(
        commands.contains(&ViewportCommand::CancelClose),
        "{commands:?}"
    );
    assert!(commands.contains(&ViewportCommand::Visible(false)));
    assert!(!app.harness.state().is_quitting());
    (app.post)(ShellEvent::Menu(MenuAction::Open));
    app.step();
    let commands = app.commands();
    assert!(
        commands.contains(&ViewportCommand::Visible(true)),
        "{commands:?}"
    );
    assert!(commands.contains(&ViewportCommand::Focus));
    assert!(!commands.contains(&ViewportCommand::Visible(false)));
    (app.post)(ShellEvent::Menu(MenuAction::Settings));
    app.step();
    assert_eq!(app.harness.state().view().page(), Page::Settings);
    (app.post)(ShellEvent::Menu(MenuAction::Search));
    app.step();
    assert_eq!(app.harness.state().view().page(), Page::Search);
}

/// Issue #25 item 9: Persyk has no app menu (so that ⌘Q reaches its own quit path), and
/// with it went ⌘W: the shortcut did nothing. ⌘W (Ctrl+W) now closes the window as its close
/// button does: to the menu bar while a tray icon exists.
#[test]
fn issue25_09_command_w_closes_the_window_to_the_menu_bar() {
    let mut app = shell(fixture(None, Some("sk-test"), 5.0, |_| {}), true);
    app.step();
    // One key event with its modifiers, so that the frame that handles it is the last one
    // of the step (the harness gives each queued event a frame of its own).
    app.harness.event(eframe::egui::Event::Key {
        key: eframe::egui::Key::W,
        physical_key: None,
        pressed: true,
        repeat: false,
        modifiers: eframe::egui::Modifiers::COMMAND,
    });
    app.step();
    let commands = app.commands();
    assert!(
        commands.contains(&ViewportCommand::Visible(false)),
        "{commands:?}"
    );
    assert!(!app.harness.state().is_quitting());
}

/// Issue #25 item 9: ⌘M (Ctrl+M) minimizes the window, as a Mac app's Window menu would; the
/// key did nothing (it was bound on macOS only, untested). ⌘H is a Mac key only (it hides
/// the app, `NSApp hide:`).
#[test]
fn issue25_09_command_m_minimizes_and_command_h_is_a_mac_key() {
    use eframe::egui::Key;
    use persyk::app::shell::{WindowKey, window_keys};
    let mut app = shell(fixture(None, Some("sk-test"), 5.0, |_| {}), true);
    app.step();
    app.harness.event(eframe::egui::Event::Key {
        key: Key::M,
        physical_key: None,
        pressed: true,
        repeat: false,
        modifiers: eframe::egui::Modifiers::COMMAND,
    });
    app.step();
    let commands = app.commands();
    assert!(
        commands.contains(&ViewportCommand::Minimized(true)),
        "{commands:?}"
    );
    assert!(!commands.contains(&ViewportCommand::Visible(false)));
    assert!(!app.harness.state().is_quitting());
    assert_eq!(
        window_keys(true),
        [
            (Key::W, WindowKey::Close),
            (Key::H, WindowKey::Hide),
            (Key::M, WindowKey::Minimize)
        ]
    );
    assert_eq!(
        window_keys(false),
        [(Key::W, WindowKey::Close), (Key::M, WindowKey::Minimize)]
    );
}

/// Issue #25 item 4: launching Persyk again (a second `persyk`, Finder's reopen event, a
/// click on a notification) showed nothing. Each posts `Reopen`, which shows and focuses the
/// hidden window, also while Persyk finishes quitting.
#[test]
fn issue25_04_launching_again_shows_and_focuses_the_hidden_window() {
    let mut app = shell(fixture(None, Some("sk-test"), 5.0, |_| {}), true);
    app.step();
    app.close_window();
    assert!(app.commands().contains(&ViewportCommand::Visible(false)));
    (app.post)(ShellEvent::Reopen);
    app.step();
    let commands = app.commands();
    assert!(
        commands.contains(&ViewportCommand::Visible(true)),
        "{commands:?}"
    );
    assert!(commands.contains(&ViewportCommand::Focus), "{commands:?}");
    assert_eq!(app.harness.state().view().page(), Page::Dictation);
}

#[test]
fn without_a_tray_the_window_says_so_and_closing_quits() {
    let mut app = shell(fixture(None, Some("sk-test"), 5.0, |_| {}), false);
    app.step();
    assert!(
        app.harness
            .query_all_by_label_contains("No menu-bar/tray icon on this desktop")
            .next()
            .is_some()
    );
    app.close_window();
    assert!(app.harness.state().is_quitting());
    // Quitting goes through the one quit path: the window closes once the backend stopped.
    app.wait_until("the window to close", |a| a.harness.state().is_closing());
}

#[test]
fn tray_clicks_toggle_dictation_and_the_icon_follows() {
    let mut app = shell(
        fixture(Some(dictation_scenario()), Some("sk-test"), 30.0, |_| {}),
        true,
    );
    app.step();
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("recording", |a| {
        a.last_sync() == Some((TrayState::Recording, true, false))
    });
    assert!(app.saw(TrayState::Connecting));
    app.wait_until("a canonical message", |a| {
        a.harness
            .query_all_by_label("Said through the tray.")
            .next()
            .is_some()
    });
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("idle with something to copy", |a| {
        a.last_sync() == Some((TrayState::Idle, false, true))
    });
    assert!(app.saw(TrayState::Finishing));
    assert_eq!(
        app.harness.state().view().last_transcript(),
        Some("Said through the tray.")
    );
    (app.post)(ShellEvent::Menu(MenuAction::CopyLast));
    app.step();
    assert_eq!(
        app.copies.lock().unwrap().clone(),
        vec!["Said through the tray.".to_owned(); 2]
    );
}

/// Dictates once through the tray with a cue recorder in place of the sound device and
/// returns the cues it was asked to play.
fn cues_of_one_dictation(edit: impl FnOnce(&mut persyk::settings::Settings)) -> Vec<Cue> {
    let mut app = shell(
        fixture(Some(dictation_scenario()), Some("sk-test"), 30.0, edit),
        true,
    );
    let played: Arc<Mutex<Vec<Cue>>> = Arc::default();
    let recorder = played.clone();
    app.harness
        .state_mut()
        .set_sounds(Sounds::spawn(move |cue| recorder.lock().unwrap().push(cue)));
    app.step();
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("a canonical message", |a| {
        a.harness
            .query_all_by_label("Said through the tray.")
            .next()
            .is_some()
    });
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("idle again", |a| {
        a.last_sync() == Some((TrayState::Idle, false, true))
    });
    // The player runs on its own thread: give it a moment to take the last cue.
    let start = Instant::now();
    while played.lock().unwrap().len() < 2 && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    played.lock().unwrap().clone()
}

#[test]
fn a_dictation_plays_the_start_cue_then_the_stop_cue() {
    assert_eq!(cues_of_one_dictation(|_| {}), vec![Cue::Start, Cue::Stop]);
}

#[test]
fn no_cue_plays_when_sounds_are_turned_off() {
    let cues = cues_of_one_dictation(|s| s.feedback.sounds = Some(false));
    assert!(cues.is_empty(), "{cues:?}");
}

#[test]
fn push_to_talk_records_while_the_hotkey_is_held() {
    let mut app = shell(
        fixture(Some(dictation_scenario()), Some("sk-test"), 30.0, |s| {
            s.hotkey.mode = HotkeyMode::PushToTalk;
        }),
        true,
    );
    app.step();
    (app.post)(ShellEvent::hotkey(true));
    app.wait_until("recording", |a| {
        a.last_sync() == Some((TrayState::Recording, true, false))
    });
    // A repeated press while held does not toggle.
    (app.post)(ShellEvent::hotkey(true));
    app.step();
    assert!(app.harness.state().view().is_recording());
    app.wait_until("a canonical message", |a| {
        a.harness
            .query_all_by_label("Said through the tray.")
            .next()
            .is_some()
    });
    (app.post)(ShellEvent::hotkey(false));
    app.wait_until("stopped", |a| !a.harness.state().view().is_recording());
    assert_eq!(session_files(app.root()).len(), 1);
}

#[test]
fn quitting_from_the_menu_finishes_a_running_recording_first() {
    let mut app = shell(
        fixture(Some(dictation_scenario()), Some("sk-test"), 30.0, |_| {}),
        true,
    );
    app.step();
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("a canonical message", |a| {
        a.harness
            .query_all_by_label("Said through the tray.")
            .next()
            .is_some()
    });
    (app.post)(ShellEvent::Menu(MenuAction::Quit));
    app.step();
    assert!(app.harness.state().is_quitting());
    // The window keeps painting "Finishing…" until the recording is saved, then closes.
    assert!(
        app.harness.state().is_closing()
            || app
                .harness
                .query_all_by_label("Finishing…")
                .next()
                .is_some()
    );
    app.wait_until("the window to close", |a| {
        a.commands().contains(&ViewportCommand::Close)
    });
    // The window closed only after the session was finished on disk.
    let files = session_files(app.root());
    assert_eq!(files.len(), 1);
    assert!(files[0].contains("\"recording.finished\""));
    assert!(files[0].contains("Said through the tray."));
}

/// A saved session with one user message `text`, created at `created`.
fn saved_session(root: &Path, n: usize, created: &str, text: &str) {
    let dir = root.join(format!("saved-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    let id = format!("00000000-0000-4000-8000-{n:012}");
    std::fs::write(
        dir.join("session.jsonl"),
        format!(
            "{{\"type\":\"session\",\"version\":1,\"id\":\"{id}\",\"timestamp\":\"{created}\"}}\n\
             {{\"type\":\"message\",\"id\":\"{id}-m\",\"parentId\":null,\"timestamp\":\"{created}\",\
             \"message\":{{\"role\":\"user\",\"timestamp\":1,\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}\n"
        ),
    )
    .unwrap();
}

#[test]
fn issue14_04_recent_lists_the_last_five_transcriptions_and_a_click_copies() {
    let mut app = shell(
        fixture(Some(dictation_scenario()), Some("sk-test"), 30.0, |s| {
            let root = s.sessions.directory.clone().unwrap();
            // Six saved sessions (the oldest falls off), and an empty one (no text: left out).
            for n in 1..=6 {
                saved_session(
                    &root,
                    n,
                    &format!("2026-01-0{n}T10:00:00.000Z"),
                    &format!("Saved note number {n} with more words than a menu label shows"),
                );
            }
            let empty = root.join("saved-7");
            std::fs::create_dir_all(&empty).unwrap();
            std::fs::write(
                empty.join("session.jsonl"),
                "{\"type\":\"session\",\"version\":1,\"id\":\"00000000-0000-4000-8000-000000000007\",\
                 \"timestamp\":\"2026-01-07T10:00:00.000Z\"}\n",
            )
            .unwrap();
        }),
        true,
    );
    // At start, from the history: newest first, first words as labels.
    app.wait_until("Recent from the history", |a| {
        a.recent_menu().is_some_and(|m| m.len() == 5)
    });
    let menu = app.recent_menu().unwrap();
    assert_eq!(menu[0], "Saved note number 6 with more words than…");
    assert_eq!(menu[4], "Saved note number 2 with more words than…");
    // A click copies the full surviving text.
    (app.post)(ShellEvent::Menu(MenuAction::Recent(1)));
    app.step();
    assert_eq!(
        app.copies.lock().unwrap().clone(),
        vec!["Saved note number 5 with more words than a menu label shows".to_owned()]
    );

    // A finished recording goes first; the list stays five long.
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("a canonical message", |a| {
        a.harness
            .query_all_by_label("Said through the tray.")
            .next()
            .is_some()
    });
    (app.post)(ShellEvent::TrayClick);
    app.wait_until("idle with something to copy", |a| {
        a.last_sync() == Some((TrayState::Idle, false, true))
    });
    let menu = app.recent_menu().unwrap();
    assert_eq!(menu.len(), 5);
    assert_eq!(menu[0], "Said through the tray.");
    assert_eq!(menu[1], "Saved note number 6 with more words than…");
    (app.post)(ShellEvent::Menu(MenuAction::Recent(0)));
    app.step();
    assert_eq!(
        app.copies.lock().unwrap().last().map(String::as_str),
        Some("Said through the tray.")
    );
    // A slot past the end copies nothing.
    let copies = app.copies.lock().unwrap().len();
    (app.post)(ShellEvent::Menu(MenuAction::Recent(7)));
    app.step();
    assert_eq!(app.copies.lock().unwrap().len(), copies);
}

/// Issue #27 item 7: the menu's "Clean-up" submenu switches the mode for the next
/// dictations, saved at once; a model mode without a server opens Settings and says why.
#[test]
fn issue27_the_menu_switches_the_clean_up_mode() {
    use persyk::cleanup::settings::CleanupMode;
    // A server is set up: Tidy from the menu is saved.
    let mut app = shell(
        fixture(None, Some("sk-test"), 5.0, |s| {
            s.cleanup.base_url = "http://127.0.0.1:11434/v1".into();
            s.cleanup.model = "llama3.2".into();
        }),
        true,
    );
    app.step();
    (app.post)(ShellEvent::Menu(MenuAction::Cleanup(CleanupMode::Tidy)));
    app.wait_until("Tidy saved", |a| {
        a.harness.state().view().settings().cleanup.mode == CleanupMode::Tidy
    });
    let config = app.fixture_rest.0.path().join("settings.json");
    let saved = persyk::settings::Settings::load(&config).expect("settings");
    assert_eq!(saved.cleanup.mode, CleanupMode::Tidy);
    (app.post)(ShellEvent::Menu(MenuAction::Cleanup(CleanupMode::AsSpoken)));
    app.wait_until("As spoken saved", |a| {
        a.harness.state().view().settings().cleanup.mode == CleanupMode::AsSpoken
    });

    // No server: Settings opens and says what is missing; nothing is saved.
    let mut app = shell(fixture(None, Some("sk-test"), 5.0, |_| {}), true);
    app.step();
    (app.post)(ShellEvent::Menu(MenuAction::Cleanup(CleanupMode::Polish)));
    app.wait_until("Settings", |a| {
        a.harness.state().view().page() == Page::Settings
    });
    app.step();
    assert!(
        app.harness
            .query_all_by_label_contains("Polish needs a model server")
            .next()
            .is_some()
    );
    assert_eq!(
        app.harness.state().view().settings().cleanup.mode,
        CleanupMode::AsSpoken
    );
}

/// Issue #38 item 1: Finder's Open With (and a file dropped on the app's icon) reaches the
/// shell as files to open: while the window is closed to the menu bar, the files are queued
/// from another thread, the window comes back on the Dictation page and each file is
/// transcribed on the device into history, in the order given. (The `odoc` Apple event that
/// carries them on macOS ends in the same `Opener`; `platform::OpenQueue` keeps launch-time
/// files for it and is unit-tested.)
#[cfg(feature = "local")]
#[test]
fn issue38_01_files_the_system_opens_bring_the_window_back_and_are_transcribed() {
    let model = support::test_model();
    let mut app = shell(
        fixture(None, None, 1.0, |s| {
            s.provider.transcription_model = None;
            s.recognition.engine = persyk::settings::RecognitionEngine::Local;
            s.recognition.local_model = Some(model.to_string_lossy().into_owned());
        }),
        true,
    );
    app.step();
    app.close_window();
    assert!(app.commands().contains(&ViewportCommand::Visible(false)));
    let opener = app.harness.state().opener();
    let files = vec![
        support::test_media("jfk.m4a"),
        support::test_media("jfk.flac"),
    ];
    std::thread::spawn(move || opener.open(files))
        .join()
        .unwrap();
    app.step();
    let commands = app.commands();
    assert!(
        commands.contains(&ViewportCommand::Visible(true)),
        "{commands:?}"
    );
    assert_eq!(app.harness.state().view().page(), Page::Dictation);
    let start = Instant::now();
    while app
        .harness
        .query_all_by_label_contains("jfk.flac was transcribed")
        .next()
        .is_none()
    {
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "timed out waiting for both files"
        );
        std::thread::sleep(Duration::from_millis(50));
        app.step();
    }
    let texts = session_files(app.root());
    assert_eq!(texts.len(), 2, "one session per file");
    for name in ["jfk.m4a", "jfk.flac"] {
        let t = texts.iter().find(|t| t.contains(name)).expect(name);
        assert!(
            t.contains("ask not what your country can do for you"),
            "{name}"
        );
    }
}
