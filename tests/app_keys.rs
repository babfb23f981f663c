//! Issue #26 items 1, 4 and 5: one key for both gestures ("Tap or hold"), "Paste last
//! transcription" (its shortcut and the menu entry), and "Start Persyk at login".
//!
//! Headless (no display): the shell as eframe runs it (`Shell::tick` + `draw` in an
//! egui_kittest harness) over the real backend, the fake provider on loopback and a tone as
//! the microphone; hotkey events are posted with the instants a tap or a hold would have, so
//! no test depends on the machine's speed. Settings is driven by its accessible labels.
//!
//! On a real X server (each `…_x11` test re-runs itself in a child on a fresh Xvfb): the
//! real global hotkey grab with keys pressed and held by `xdotool`, and the real paste
//! (XTest) into a focused Tk entry (`tests/paste_target.py`). Skipped, with a note, where
//! Xvfb, xdotool or python3 with tkinter is missing (`scripts/setup` installs them).
#![cfg(all(feature = "app", target_os = "linux"))]

mod app_support;
#[allow(dead_code)]
#[path = "support/chat.rs"]
mod chat;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use app_support::shell::shell_harness;
use app_support::ui::UiApp;
use app_support::x11::{Target, in_xvfb_child};
use app_support::{Fixture, ToneMic, fixture, fixture_with, one_utterance, scenario};
use chat::{ChatServer, Reply};
use eframe::egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use persyk::app::autostart::{DESKTOP_FILE, LoginItem};
use persyk::app::effects::{Delivered, Effects, SystemEffects};
use persyk::app::event::{MenuAction, Post, ShellEvent, TrayState};
use persyk::app::model::Waker;
use persyk::app::paste::Delivery;
use persyk::app::shell::{Shell, ShellOptions, TrayPort};
use persyk::app::ui::Page;
use persyk::settings::{AfterDictationSettings, HotkeyMode, Settings, TAP_MAX_MS};

/// A guard against hangs only (never a performance threshold).
const WAIT: Duration = Duration::from_secs(30);
const SAID: &str = "One key for both gestures.";
/// What the scripted model makes of [`SAID`] (the guard lets it through).
const TIDY_SAID: &str = "One key, for both gestures.";

// ---------------------------------------------------------------------------------------------
// The shell, headless.

/// What the tray was shown: the icon's states and whether "Paste last" was enabled.
#[derive(Default, Clone)]
struct Seen {
    states: Arc<Mutex<Vec<TrayState>>>,
    can_paste: Arc<Mutex<Vec<bool>>>,
}

struct FakeTray(Seen);

impl TrayPort for FakeTray {
    fn sync(&mut self, state: TrayState, _recording: bool, _can_copy: bool) {
        let mut v = self.0.states.lock().unwrap();
        if v.last() != Some(&state) {
            v.push(state);
        }
    }
    fn set_can_paste_last(&mut self, can_paste: bool) {
        let mut v = self.0.can_paste.lock().unwrap();
        if v.last() != Some(&can_paste) {
            v.push(can_paste);
        }
    }
}

/// Effects that copy into memory and "paste" by recording what a paste delivered.
#[derive(Default, Clone)]
struct Pasted {
    copies: Arc<Mutex<Vec<String>>>,
    pastes: Arc<Mutex<Vec<String>>>,
}

impl Effects for Pasted {
    fn copy(&mut self, text: &str) -> Result<(), String> {
        self.copies.lock().unwrap().push(text.to_owned());
        Ok(())
    }
    fn notify(&mut self, _title: &str, _body: &str) {}
    fn deliver_transcript(
        &mut self,
        text: &str,
        after: &AfterDictationSettings,
        _wake: &Waker,
    ) -> Delivered {
        let copied = self.copy(text);
        let pasted = after.pastes().then(|| {
            self.pastes.lock().unwrap().push(text.to_owned());
            Ok(())
        });
        Delivered::Now(Delivery {
            copied,
            pasted,
            restore: None,
            kept: None,
        })
    }
}

struct App {
    harness: Harness<'static, Shell>,
    post: Post,
    seen: Seen,
    effects: Pasted,
    root: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _fake: Option<(tokio::runtime::Runtime, persyk::realtime::fake::FakeServer)>,
}

/// The shell with the settings `edit` makes (the hotkey mode is the default, Auto, unless
/// `edit` changes it), the fake provider saying [`SAID`] and a 30 s tone.
fn app(edit: impl FnOnce(&mut Settings)) -> App {
    keys_app(one_utterance("keys", SAID), false, edit)
}

/// The shell over the fake provider `scenario`, a 30 s tone and recorded effects, with the
/// settings `edit` makes; `real_keys`: the real global hotkey grab (the `…_x11` tests).
fn keys_app(
    scenario: persyk::realtime::fake::Scenario,
    real_keys: bool,
    edit: impl FnOnce(&mut Settings),
) -> App {
    let effects = Pasted::default();
    let f = fixture_with(
        Some(scenario),
        Some("sk-test"),
        Arc::new(ToneMic { seconds: 30.0 }),
        Some(Box::new(effects.clone())),
        edit,
    );
    shell_app(f, effects, !real_keys)
}

fn shell_app(f: Fixture, effects: Pasted, no_hotkey: bool) -> App {
    let Fixture {
        ui,
        dir,
        fake,
        root,
        ..
    } = f;
    let seen = Seen::default();
    let tray = seen.clone();
    let harness = shell_harness(
        ui,
        ShellOptions {
            no_hotkey,
            ..ShellOptions::default()
        },
        move |_| Ok(Box::new(FakeTray(tray)) as Box<dyn TrayPort>),
    );
    let post = harness.state().poster();
    App {
        harness,
        post,
        seen,
        effects,
        root,
        _dir: dir,
        _fake: fake,
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
            assert!(
                start.elapsed() < WAIT,
                "timed out waiting for {what}; tray saw {:?}",
                self.seen.states.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(15));
        }
    }

    /// Keeps the frames going for `ms`.
    fn run_for(&mut self, ms: u64) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(ms) {
            self.harness.step();
            std::thread::sleep(Duration::from_millis(15));
        }
    }

    fn key(&self, pressed: bool, at: Instant) {
        (self.post)(ShellEvent::Hotkey { pressed, at });
    }

    /// A tap: down and up `ms` apart (shorter than the tap limit).
    fn tap(&mut self, ms: u64) {
        let at = Instant::now();
        self.key(true, at);
        self.key(false, at + Duration::from_millis(ms));
        self.harness.step();
    }

    fn recording(&self) -> bool {
        self.harness.state().view().is_recording()
    }

    fn wait_recording(&mut self) {
        self.wait_until("the recording to run", |a| {
            a.seen.states.lock().unwrap().last() == Some(&TrayState::Recording)
        });
        // The scripted utterance ends 400 ms into the audio; give the provider its turn.
        self.run_for(1500);
    }

    fn wait_finished(&mut self) {
        self.wait_until("the recording to finish", |a| {
            !a.recording() && a.harness.state().view().last_transcript().is_some()
        });
    }

    fn says(&self, text: &str) -> bool {
        self.harness
            .query_all_by_label_contains(text)
            .next()
            .is_some()
    }
}

/// The fake provider for two recordings: two connections, each transcribing [`SAID`].
fn two_recordings(name: &str) -> persyk::realtime::fake::Scenario {
    let connection = format!(
        r#"{{"utterances": [{{"end_ms": 400, "transcript": "{SAID}", "delay_ms": 50}}],
            "close_after_commit_ms": 200}}"#
    );
    scenario(&format!(
        r#"{{"name": "{name}", "connections": [{connection}, {connection}]}}"#
    ))
}

/// Item 1: in the default mode a tap starts hands-free dictation — it goes on after the key
/// is up — and the next tap stops it and delivers the text.
#[test]
fn issue26_01_auto_a_tap_starts_hands_free_and_the_next_tap_stops() {
    let mut app = app(|_| {});
    app.harness.step();
    assert_eq!(
        app.harness.state().view().settings().hotkey.mode,
        HotkeyMode::Auto
    );
    app.tap(90);
    app.wait_recording();
    assert!(app.recording(), "a tap must leave the recording running");
    app.tap(90);
    app.wait_finished();
    assert_eq!(app.effects.copies.lock().unwrap().as_slice(), [SAID]);
    assert_eq!(session_count(&app.root), 1);
}

/// Item 1: held, the same key is push-to-talk: letting go stops and delivers.
#[test]
fn issue26_01_auto_a_hold_is_push_to_talk() {
    let mut app = app(|_| {});
    app.harness.step();
    let down = Instant::now();
    app.key(true, down);
    app.wait_recording();
    let up = Instant::now();
    assert!(up - down >= Duration::from_millis(TAP_MAX_MS));
    app.key(false, up);
    app.wait_finished();
    assert_eq!(app.effects.copies.lock().unwrap().as_slice(), [SAID]);
}

/// Item 1: a recording started from the menu is stopped by a tap, and a release after a
/// long press that stopped it does nothing more (no new recording).
#[test]
fn issue26_01_auto_a_tap_stops_a_recording_started_from_the_menu() {
    let mut app = app(|_| {});
    app.harness.step();
    (app.post)(ShellEvent::Menu(MenuAction::Toggle));
    app.wait_recording();
    let at = Instant::now();
    app.key(true, at);
    app.key(false, at + Duration::from_millis(1200));
    app.wait_finished();
    app.run_for(300);
    assert!(!app.recording());
    assert_eq!(session_count(&app.root), 1);
}

/// Item 1: Toggle stays what it was: a long press does not stop on release.
#[test]
fn issue26_01_toggle_keeps_recording_after_a_long_press() {
    let mut app = app(|s| s.hotkey.mode = HotkeyMode::Toggle);
    app.harness.step();
    let at = Instant::now();
    app.key(true, at);
    app.key(false, at + Duration::from_millis(2000));
    app.wait_recording();
    assert!(app.recording());
    app.tap(50);
    app.wait_finished();
}

/// Item 1: a release the old registration never forwarded (the settings were saved while
/// the key was down) does not leave the key "held": the next press still counts.
#[test]
fn issue26_01_a_release_lost_to_a_new_registration_does_not_stick() {
    let mut app = app(|_| {});
    app.harness.step();
    app.key(true, Instant::now());
    app.wait_recording();
    // Saved while held: the shell registers again; the release never comes.
    (app.post)(ShellEvent::Menu(MenuAction::Settings));
    app.harness.step();
    app.harness
        .get_by_role_and_label(Role::RadioButton, "Toggle")
        .click_accesskit();
    app.wait_until("the mode to be saved", |a| {
        a.harness.state().view().settings().hotkey.mode == HotkeyMode::Toggle
    });
    app.harness.step();
    assert!(app.recording());
    let tapped = Instant::now();
    app.tap(60);
    app.wait_finished();
    // Stopped by the tap, not by the 30 s microphone running out.
    assert!(
        tapped.elapsed() < Duration::from_secs(10),
        "the press was ignored"
    );
}

/// Item 4: "Paste last transcription" is disabled until there is a transcript (and says
/// so if asked anyway); then the menu entry and its shortcut paste the newest transcript
/// through the after-dictation path, with copy-only after dictation.
#[test]
fn issue26_04_paste_last_from_the_menu_and_the_shortcut() {
    let mut app = app(|_| {});
    app.harness.step();
    assert_eq!(app.seen.can_paste.lock().unwrap().as_slice(), [false]);
    (app.post)(ShellEvent::Menu(MenuAction::PasteLast));
    app.harness.step();
    assert!(app.says("There is no transcription to paste yet."));
    assert!(app.effects.pastes.lock().unwrap().is_empty());

    app.tap(60);
    app.wait_recording();
    app.tap(60);
    app.wait_finished();
    // Copy only after dictation (the default): nothing pasted yet.
    assert!(app.effects.pastes.lock().unwrap().is_empty());
    app.harness.step();
    assert_eq!(app.seen.can_paste.lock().unwrap().as_slice(), [false, true]);

    (app.post)(ShellEvent::Menu(MenuAction::PasteLast));
    app.harness.step();
    assert_eq!(app.effects.pastes.lock().unwrap().as_slice(), [SAID]);
    assert!(app.says("Pasted the last transcription"));
    (app.post)(ShellEvent::PasteLastHotkey);
    app.harness.step();
    assert_eq!(app.effects.pastes.lock().unwrap().as_slice(), [SAID, SAID]);
}

/// Item 4: after a restart the newest transcript comes from the history — its words only,
/// never the "[audio]" marker of the recording's audio block.
#[test]
fn issue26_04_paste_last_after_a_restart_pastes_the_words_from_the_history() {
    let mut first = app(|_| {});
    first.harness.step();
    first.tap(60);
    first.wait_recording();
    first.tap(60);
    first.wait_finished();
    let root = first.root.clone();

    let effects = Pasted::default();
    let f = fixture_with(
        None,
        Some("sk-test"),
        Arc::new(ToneMic { seconds: 1.0 }),
        Some(Box::new(effects.clone())),
        |s| s.sessions.directory = Some(root.clone()),
    );
    let mut again = shell_app(f, effects, true);
    again.wait_until("the history's newest transcript", |a| {
        a.seen.can_paste.lock().unwrap().last() == Some(&true)
    });
    assert_eq!(again.harness.state().view().paste_last_text(), Some(SAID));
    (again.post)(ShellEvent::Menu(MenuAction::PasteLast));
    again.harness.step();
    let pastes = again.effects.pastes.lock().unwrap().clone();
    assert_eq!(pastes, [SAID]);
    assert!(!pastes[0].contains("[audio]"));
    drop(first);
}

fn session_count(root: &std::path::Path) -> usize {
    std::fs::read_dir(root)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().join("session.jsonl").exists())
                .count()
        })
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Settings.

fn settings_app(edit: impl FnOnce(&mut Settings)) -> UiApp {
    let f = fixture(None, Some("sk-test"), 1.0, edit);
    let mut app = UiApp::new(f, 640.0, 1600.0);
    app.harness.state_mut().show_page(Page::Settings);
    app.harness.step();
    app
}

fn type_into(app: &mut UiApp, label: &str, text: &str) {
    app.harness.get_by_label(label).focus();
    app.harness.step();
    app.harness
        .key_press_modifiers(eframe::egui::Modifiers::COMMAND, eframe::egui::Key::A);
    app.harness.get_by_label(label).type_text(text);
    app.harness.step();
    // Leave the field (a text field is saved when it loses the keyboard focus): click the
    // mode that is already chosen.
    app.harness
        .get_by_role_and_label(Role::RadioButton, "Tap or hold")
        .click();
    app.harness.step();
    app.harness.step();
}

/// Item 1: Settings offers the three modes, "Tap or hold" chosen for a new user; a choice
/// applies at once and is written to the file.
#[test]
fn issue26_01_settings_offers_tap_or_hold_and_saves_the_choice() {
    let mut app = settings_app(|_| {});
    let tap_or_hold = app
        .harness
        .get_by_role_and_label(Role::RadioButton, "Tap or hold");
    assert_eq!(
        tap_or_hold.accesskit_node().toggled(),
        Some(eframe::egui::accesskit::Toggled::True)
    );
    assert!(app.has_label("hold it while you speak"));
    app.harness
        .get_by_role_and_label(Role::RadioButton, "Toggle")
        .click();
    app.wait_until("the choice to be saved", |h| {
        h.state().settings().hotkey.mode == HotkeyMode::Toggle
    });
    let saved = Settings::load(&app.config).unwrap();
    assert_eq!(saved.hotkey.mode, HotkeyMode::Toggle);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&app.config).unwrap()).unwrap();
    assert_eq!(json["hotkey"]["mode"], "toggle");
    app.shutdown();
}

/// Item 4: the paste-last shortcut is off by default, saved when typed, and refused beside
/// its field when it is the dictation hotkey or no combination.
#[test]
fn issue26_04_the_paste_last_shortcut_is_saved_or_refused_beside_its_field() {
    let mut app = settings_app(|_| {});
    assert_eq!(app.harness.state().settings().hotkey.paste_last, None);
    type_into(&mut app, "Paste last transcription", "Alt+Space");
    app.wait_label("This is already the dictation hotkey");
    assert!(app.has_label("hotkey.taken"));
    type_into(&mut app, "Paste last transcription", "ctrl+");
    app.wait_label("Not a key combination Persyk understands: try Ctrl+Alt+V.");
    assert_eq!(Settings::load(&app.config).unwrap().hotkey.paste_last, None);
    type_into(&mut app, "Paste last transcription", "Ctrl+Alt+V");
    app.wait_until("the shortcut to be saved", |h| {
        h.state().settings().hotkey.paste_last.as_deref() == Some("Ctrl+Alt+V")
    });
    assert!(!app.has_label("This is already the dictation hotkey"));
    assert_eq!(
        Settings::load(&app.config)
            .unwrap()
            .hotkey
            .paste_last
            .as_deref(),
        Some("Ctrl+Alt+V")
    );
    app.shutdown();
}

/// Issue #27 item 7: "Dictate + clean" is its own shortcut, saved beside its mode (Tidy
/// unless chosen), refused when it is another Persyk shortcut.
#[test]
fn issue27_07_the_dictate_and_clean_shortcut_is_saved_with_its_mode() {
    let mut app = settings_app(|_| {});
    assert_eq!(app.harness.state().settings().hotkey.dictate_clean, None);
    type_into(&mut app, "Dictate + clean", "Alt+Space");
    app.wait_label("This is already another Persyk shortcut");
    assert!(app.has_label("hotkey.taken"));
    type_into(&mut app, "Dictate + clean", "Ctrl+Alt+C");
    app.wait_until("the shortcut to be saved", |h| {
        h.state().settings().hotkey.dictate_clean.as_deref() == Some("Ctrl+Alt+C")
    });
    // No server yet: said under the shortcut.
    app.wait_label("This shortcut needs a model server");
    app.harness
        .get_by_label("Clean-up for this shortcut")
        .click();
    app.harness.step();
    app.harness.step();
    app.harness
        .get_by_role_and_label(Role::Button, "Polish")
        .click();
    app.harness.step();
    app.click("Save settings");
    app.wait_label("Settings saved");
    let saved = Settings::load(&app.config).unwrap();
    assert_eq!(saved.hotkey.dictate_clean.as_deref(), Some("Ctrl+Alt+C"));
    assert_eq!(
        saved.cleanup.shortcut_mode(),
        persyk::cleanup::settings::CleanupMode::Polish
    );
    // The usual mode is untouched.
    assert_eq!(
        saved.cleanup.mode,
        persyk::cleanup::settings::CleanupMode::AsSpoken
    );
    app.shutdown();
}

/// Issue #27 item 7: a tap of "Dictate + clean" dictates through its mode (Tidy) while the
/// usual mode is As spoken: the indicator names it, the model is asked, the clean-up is
/// copied; a tap of the dictation key right after dictates as spoken, asking nothing.
#[test]
fn issue27_07_dictate_and_clean_cleans_up_while_the_dictation_key_does_not() {
    let server = ChatServer::start(vec![Reply::Content(TIDY_SAID.into())]);
    let url = server.url();
    let mut app = keys_app(two_recordings("keys-clean"), false, move |s| {
        s.cleanup.base_url = url;
        s.cleanup.model = "tiny-cleaner".into();
    });
    app.harness.step();
    let at = Instant::now();
    (app.post)(ShellEvent::CleanHotkey { pressed: true, at });
    (app.post)(ShellEvent::CleanHotkey {
        pressed: false,
        at: at + Duration::from_millis(90),
    });
    app.harness.step();
    assert_eq!(
        app.harness
            .state()
            .view()
            .indicator()
            .and_then(|m| m.cleanup),
        Some("Tidy")
    );
    app.wait_recording();
    assert_eq!(
        app.harness
            .state()
            .view()
            .indicator()
            .and_then(|m| m.cleanup),
        Some("Tidy")
    );
    // A second tap of the same shortcut stops it.
    let at = Instant::now();
    (app.post)(ShellEvent::CleanHotkey { pressed: true, at });
    (app.post)(ShellEvent::CleanHotkey {
        pressed: false,
        at: at + Duration::from_millis(90),
    });
    app.wait_finished();
    assert_eq!(app.effects.copies.lock().unwrap().as_slice(), [TIDY_SAID]);
    assert_eq!(server.requests().len(), 1);

    // The dictation key: the usual mode, As spoken.
    app.tap(90);
    app.wait_recording();
    assert_eq!(
        app.harness
            .state()
            .view()
            .indicator()
            .and_then(|m| m.cleanup),
        None
    );
    app.tap(90);
    app.wait_until("the second recording to finish", |a| {
        !a.recording() && a.effects.copies.lock().unwrap().len() == 2
    });
    assert_eq!(
        app.effects.copies.lock().unwrap().as_slice(),
        [TIDY_SAID, SAID]
    );
    assert_eq!(server.requests().len(), 1);
}

/// Item 5: "Start Persyk at login" is off by default; ticking it writes the XDG autostart
/// entry for this program, unticking removes it, and what is shown is read back from the
/// folder each time Settings opens (a change made elsewhere shows; an entry that starts
/// another program is said as such).
#[test]
fn issue26_05_start_at_login_writes_reads_back_and_removes_the_entry() {
    let mut app = settings_app(|_| {});
    let autostart = app.dir.path().join("xdg-config/autostart");
    let exe = std::path::PathBuf::from("/opt/Persyk Test/persyk");
    let entry = autostart.join(DESKTOP_FILE);
    app.harness
        .state_mut()
        .set_login_item(LoginItem::xdg(&autostart, exe.clone()));
    let toggled = |app: &UiApp| {
        app.harness
            .get_by_role_and_label(Role::CheckBox, "Start Persyk at login")
            .accesskit_node()
            .toggled()
    };
    let enabled = |h: &Harness<'static, persyk::app::ui::PersykUi>| {
        !h.get_by_role_and_label(Role::CheckBox, "Start Persyk at login")
            .accesskit_node()
            .is_disabled()
    };
    app.wait_until("the login item to be read", enabled);
    assert_eq!(toggled(&app), Some(eframe::egui::accesskit::Toggled::False));
    assert!(!entry.exists());

    app.harness
        .get_by_role_and_label(Role::CheckBox, "Start Persyk at login")
        .click();
    app.wait_until("the entry to be written", |h| enabled(h) && entry.exists());
    app.harness.step();
    assert_eq!(toggled(&app), Some(eframe::egui::accesskit::Toggled::True));
    let text = std::fs::read_to_string(&entry).unwrap();
    assert!(
        text.contains("Exec=\"/opt/Persyk Test/persyk\" --hidden"),
        "{text}"
    );

    // Removed behind Persyk's back: shown off the next time Settings opens.
    std::fs::remove_file(&entry).unwrap();
    app.harness.state_mut().show_page(Page::Dictation);
    app.harness.step();
    app.harness.state_mut().show_page(Page::Settings);
    app.wait_until("the login item to be read again", |h| {
        enabled(h)
            && h.get_by_role_and_label(Role::CheckBox, "Start Persyk at login")
                .accesskit_node()
                .toggled()
                == Some(eframe::egui::accesskit::Toggled::False)
    });

    // Another program's entry: said as it is, not shown as on.
    std::fs::write(&entry, "[Desktop Entry]\nExec=/usr/bin/persyk --hidden\n").unwrap();
    app.harness.state_mut().show_page(Page::Dictation);
    app.harness.step();
    app.harness.state_mut().show_page(Page::Settings);
    app.wait_label("At login the system starts another program: /usr/bin/persyk --hidden");
    assert_eq!(toggled(&app), Some(eframe::egui::accesskit::Toggled::False));

    // Ticking replaces it with this program's; unticking removes it.
    app.harness
        .get_by_role_and_label(Role::CheckBox, "Start Persyk at login")
        .click();
    app.wait_until("this program's entry", |h| {
        enabled(h)
            && std::fs::read_to_string(&entry).is_ok_and(|t| t.contains("/opt/Persyk Test/persyk"))
    });
    app.harness.step();
    app.harness
        .get_by_role_and_label(Role::CheckBox, "Start Persyk at login")
        .click();
    app.wait_until("the entry to be removed", |h| enabled(h) && !entry.exists());
    app.shutdown();
}

/// Item 5: a login item that cannot be written is said as a sentence with its code, and
/// the checkbox shows what the system has (still off).
#[test]
fn issue26_05_a_login_item_that_cannot_be_written_is_said_with_its_code() {
    let mut app = settings_app(|_| {});
    let autostart = app.dir.path().join("autostart");
    // Where the entry is written first (then renamed) stands a folder: the write fails.
    std::fs::create_dir_all(autostart.join(format!(".{DESKTOP_FILE}.tmp"))).unwrap();
    app.harness.state_mut().set_login_item(LoginItem::xdg(
        &autostart,
        std::path::PathBuf::from("/usr/bin/persyk"),
    ));
    let enabled = |h: &Harness<'static, persyk::app::ui::PersykUi>| {
        !h.get_by_role_and_label(Role::CheckBox, "Start Persyk at login")
            .accesskit_node()
            .is_disabled()
    };
    app.wait_until("the login item to be read", enabled);
    app.harness
        .get_by_role_and_label(Role::CheckBox, "Start Persyk at login")
        .click();
    app.wait_label("The login item could not be read or written.");
    assert!(app.has_label("autostart.io"));
    assert!(!autostart.join(DESKTOP_FILE).exists());

    // An autostart "folder" that is a file: the read already fails, and says so.
    let blocker = app.dir.path().join("not-a-folder");
    std::fs::write(&blocker, "").unwrap();
    app.harness.state_mut().set_login_item(LoginItem::xdg(
        &blocker,
        std::path::PathBuf::from("/usr/bin/persyk"),
    ));
    app.wait_label("The login item could not be read or written.");
    assert!(!enabled(&app.harness));
    app.shutdown();
}

/// Item 3: Settings shows the shortcut the Mac way; "Record shortcut" takes the next
/// combination pressed (Esc cancels), refuses a typing key without a modifier and says why,
/// and an F-key alone is fine.
#[test]
fn issue26_03_the_key_recorder_takes_a_combination_and_refuses_typing_keys() {
    use eframe::egui::{Key, Modifiers};
    let mut app = settings_app(|_| {});
    assert!(app.has_label("⌥Space"), "the default shown the Mac way");
    app.click("Record shortcut");
    assert!(app.has_label("Press the keys… (Esc cancels)"));

    // A typing key alone (or with Shift) types: refused, and said.
    app.harness.key_press(Key::D);
    app.harness.step();
    app.wait_label("That key types text");
    assert!(app.has_label("hotkey.needs-modifier"));
    assert!(!app.has_label("Press the keys"));
    app.click("Record shortcut");
    app.harness.key_press_modifiers(Modifiers::SHIFT, Key::D);
    app.harness.step();
    app.wait_label("That key types text");
    assert_eq!(app.harness.state().settings().hotkey.keys, None);

    // A combination: shown the Mac way and saved at once.
    app.click("Record shortcut");
    app.harness
        .key_press_modifiers(Modifiers::CTRL | Modifiers::SHIFT, Key::D);
    app.wait_until("the recorded shortcut to be saved", |h| {
        h.state().settings().hotkey.keys.as_deref() == Some("Ctrl+Shift+D")
    });
    assert!(app.has_label("⌃⇧D"));
    assert!(!app.has_label("That key types text"));
    assert_eq!(
        Settings::load(&app.config).unwrap().hotkey.keys.as_deref(),
        Some("Ctrl+Shift+D")
    );

    // Esc cancels and changes nothing.
    app.click("Record shortcut");
    app.harness.key_press(Key::Escape);
    app.harness.step();
    app.harness.step();
    assert!(!app.has_label("Press the keys"));
    assert!(app.has_label("⌃⇧D"));

    // The paste-last shortcut has its own recorder; an F-key works alone.
    assert!(app.has_label("None"));
    app.click("Record paste shortcut");
    app.harness.key_press(Key::F5);
    app.wait_until("the paste shortcut to be saved", |h| {
        h.state().settings().hotkey.paste_last.as_deref() == Some("F5")
    });
    assert!(app.has_label("F5"));
    app.shutdown();
}

/// Item 2 in Settings: a modifier tapped alone while "Record shortcut" waits (what the
/// shell's keyboard observer reports) becomes the dictation key, saved at once and shown the
/// Mac way ("Right ⌥"), with what a modifier alone means; the paste recorder refuses one.
/// Fn shows how to stop it opening the emoji picker.
#[test]
fn issue26_02_the_recorder_takes_a_modifier_alone_and_fn_says_how_to_free_it() {
    use persyk::app::modkeys::ModKey;
    use persyk::app::ui::{FN_EMOJI_HELP, MODIFIER_ALONE_HELP};
    let mut app = settings_app(|_| {});
    // Not while the recorder is idle.
    app.harness.state_mut().record_modifier(ModKey::RightAlt);
    app.harness.step();
    assert_eq!(app.harness.state().settings().hotkey.keys, None);

    app.click("Record shortcut");
    app.harness.state_mut().record_modifier(ModKey::RightAlt);
    app.wait_until("the modifier to be saved", |h| {
        h.state().settings().hotkey.keys.as_deref() == Some("RightAlt")
    });
    assert!(app.has_label("Right ⌥"));
    assert!(app.has_label(&MODIFIER_ALONE_HELP[..40]));
    assert!(!app.has_label(&FN_EMOJI_HELP[..40]));
    assert_eq!(
        Settings::load(&app.config).unwrap().hotkey.keys.as_deref(),
        Some("RightAlt")
    );

    app.click("Record shortcut");
    app.harness.state_mut().record_modifier(ModKey::Fn);
    app.wait_until("Fn to be saved", |h| {
        h.state().settings().hotkey.keys.as_deref() == Some("Fn")
    });
    assert!(app.has_label(&FN_EMOJI_HELP[..40]));

    // Paste-last takes combinations only.
    app.click("Record paste shortcut");
    app.harness.state_mut().record_modifier(ModKey::RightCtrl);
    app.wait_label("A modifier alone can only be the dictation key");
    assert!(app.has_label("hotkey.modifier-dictation-only"));
    assert_eq!(app.harness.state().settings().hotkey.paste_last, None);
    app.shutdown();
}

// ---------------------------------------------------------------------------------------------
// On a real X server.

/// Waits until the Tk entry holds `want`, keeping the app's frames going.
fn wait_entry(target: &mut Target, app: &mut App, want: &str) {
    let start = Instant::now();
    loop {
        app.harness.step();
        let answer = target.ask("entry");
        if answer["entry"] == want {
            assert_eq!(answer["focus"], true, "the entry lost keyboard focus");
            return;
        }
        assert!(
            start.elapsed() < WAIT,
            "timed out waiting for {want:?}; the entry says {answer}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn xdotool(args: &[&str]) {
    let ok = std::process::Command::new("xdotool")
        .args(args)
        .status()
        .expect("xdotool");
    assert!(ok.success(), "xdotool {args:?}");
}

/// Items 1 and 4 through the real X11 grab: Alt+Space held for a second records and stops
/// when let go; tapped, it starts hands-free (still recording after the key is up) and the
/// next tap stops. Then the paste-last shortcut (Ctrl+Alt+V) and the menu entry paste the
/// transcript into the focused Tk entry (XTest), which keeps focus.
#[test]
fn issue26_01_04_tap_hold_and_paste_last_through_the_real_x11_grab() {
    if !in_xvfb_child("issue26_01_04_tap_hold_and_paste_last_through_the_real_x11_grab") {
        return;
    }
    let mut target = Target::start();
    let two = two_recordings("keys-x11");
    let f = fixture_with(
        Some(two),
        Some("sk-test"),
        Arc::new(ToneMic { seconds: 30.0 }),
        Some(Box::new(SystemEffects::new())),
        |s| s.hotkey.paste_last = Some("Ctrl+Alt+V".into()),
    );
    let mut app = shell_app(f, Pasted::default(), false);
    app.harness.step();
    assert_eq!(app.harness.state().view().hotkey_note, None);
    assert_eq!(app.harness.state().view().paste_hotkey_note, None);

    // Held: push-to-talk.
    xdotool(&["keydown", "alt+space"]);
    app.wait_recording();
    xdotool(&["keyup", "alt+space"]);
    app.wait_finished();
    assert_eq!(session_count(&app.root), 1);

    // Tapped: hands-free until the next tap.
    xdotool(&["key", "alt+space"]);
    app.wait_recording();
    assert!(app.recording(), "a tap must leave the recording running");
    xdotool(&["key", "alt+space"]);
    app.wait_until("the second recording to finish", |a| {
        !a.recording() && session_count(&a.root) == 2
    });
    // Copy only after dictation: nothing was typed into the entry.
    assert_eq!(target.ask("entry")["entry"], "");

    xdotool(&["key", "ctrl+alt+v"]);
    wait_entry(&mut target, &mut app, SAID);
    (app.post)(ShellEvent::Menu(MenuAction::PasteLast));
    wait_entry(&mut target, &mut app, &format!("{SAID}{SAID}"));
}

/// Issue #27 item 7 through the real X11 grab: Ctrl+Alt+C as "Dictate + clean", tapped to
/// start and tapped again to stop, dictates through Tidy (the model on loopback is asked
/// once, its clean-up copied) while As spoken stays the usual mode.
#[test]
fn issue27_07_dictate_and_clean_through_the_real_x11_grab() {
    if !in_xvfb_child("issue27_07_dictate_and_clean_through_the_real_x11_grab") {
        return;
    }
    let server = ChatServer::start(vec![Reply::Content(TIDY_SAID.into())]);
    let url = server.url();
    let mut app = keys_app(one_utterance("keys-clean-x11", SAID), true, move |s| {
        s.hotkey.dictate_clean = Some("Ctrl+Alt+C".into());
        s.cleanup.base_url = url;
        s.cleanup.model = "tiny-cleaner".into();
    });
    app.harness.step();
    assert_eq!(app.harness.state().view().clean_hotkey_note, None);
    xdotool(&["key", "ctrl+alt+c"]);
    app.wait_recording();
    assert!(app.recording(), "a tap must leave the recording running");
    xdotool(&["key", "ctrl+alt+c"]);
    app.wait_finished();
    assert_eq!(app.effects.copies.lock().unwrap().as_slice(), [TIDY_SAID]);
    assert_eq!(server.requests().len(), 1);
}

/// Item 3 through the real X11 grab: while "Record shortcut" waits, the grabbed Alt+Space
/// is let go (pressing it starts no dictation); a combination another X client holds is
/// recorded and saved, and Settings says it is taken (`hotkey.taken`); once a free one is
/// recorded it works as the hotkey.
#[test]
fn issue26_03_the_recorder_lets_the_grab_go_and_says_a_taken_combination_x11() {
    use eframe::egui::{Key, Modifiers};
    use persyk::app::hotkey::{self, Hotkeys};
    if !in_xvfb_child("issue26_03_the_recorder_lets_the_grab_go_and_says_a_taken_combination_x11") {
        return;
    }
    // Another application holds Ctrl+Shift+D (a connection of its own grabs it).
    let mut other = Hotkeys::new();
    other
        .set(
            hotkey::parse_keys("Ctrl+Shift+D").unwrap(),
            Arc::new(|_, _| {}),
        )
        .unwrap();
    let mut app = keys_app(one_utterance("keys", SAID), true, |_| {});
    app.harness.step();
    assert_eq!(app.harness.state().view().hotkey_note, None);
    (app.post)(ShellEvent::Menu(MenuAction::Settings));
    app.harness.step();
    app.harness
        .get_by_role_and_label(Role::Button, "Record shortcut")
        .click();
    app.run_for(300);
    // Let go while recording: Alt+Space reaches no grab.
    xdotool(&["key", "alt+space"]);
    app.run_for(800);
    assert!(
        !app.recording(),
        "the grab was kept while recording a shortcut"
    );

    app.harness
        .key_press_modifiers(Modifiers::CTRL | Modifiers::SHIFT, Key::D);
    app.wait_until("the taken combination to be said", |a| {
        a.harness
            .state()
            .view()
            .hotkey_note
            .as_deref()
            .is_some_and(|n| n.contains("hotkey.taken"))
    });
    assert!(app.says("hotkey.taken"));
    assert_eq!(
        app.harness.state().view().settings().hotkey.keys.as_deref(),
        Some("Ctrl+Shift+D")
    );

    // A free combination: registered, and it dictates.
    app.harness
        .get_by_role_and_label(Role::Button, "Record shortcut")
        .click();
    app.harness.step();
    app.harness
        .key_press_modifiers(Modifiers::CTRL | Modifiers::ALT, Key::K);
    app.wait_until("the free combination to be registered", |a| {
        let v = a.harness.state().view();
        v.settings().hotkey.keys.as_deref() == Some("Ctrl+Alt+K") && v.hotkey_note.is_none()
    });
    app.run_for(300);
    xdotool(&["key", "ctrl+alt+k"]);
    app.wait_recording();
    xdotool(&["key", "ctrl+alt+k"]);
    app.wait_finished();
    drop(other);
}

/// Item 1, the measurement behind the 300 ms boundary on X11: the instants the real grab
/// reports (stamped on `global-hotkey`'s thread, which reads its connection every 50 ms) for
/// a tap (`xdotool key`: down and up at once) and for holds of 150 ms and 1 s. Prints each
/// press → release duration; asserts only which side of the boundary each falls on.
#[test]
fn issue26_01_x11_taps_and_holds_fall_on_their_side_of_the_boundary_x11() {
    use persyk::app::hotkey::{self, Hotkeys};
    if !in_xvfb_child("issue26_01_x11_taps_and_holds_fall_on_their_side_of_the_boundary_x11") {
        return;
    }
    let events: Arc<Mutex<Vec<(bool, Instant)>>> = Arc::default();
    let seen = events.clone();
    let mut keys = Hotkeys::new();
    keys.set(
        hotkey::parse_keys("Alt+Space").unwrap(),
        Arc::new(move |pressed, at| seen.lock().unwrap().push((pressed, at))),
    )
    .unwrap();
    let measure = |hold_ms: Option<u64>| -> Duration {
        events.lock().unwrap().clear();
        match hold_ms {
            None => xdotool(&["key", "alt+space"]),
            Some(ms) => {
                xdotool(&["keydown", "alt+space"]);
                std::thread::sleep(Duration::from_millis(ms));
                xdotool(&["keyup", "alt+space"]);
            }
        }
        let start = Instant::now();
        loop {
            let e = events.lock().unwrap().clone();
            if let [(true, down), (false, up)] = e.as_slice() {
                return *up - *down;
            }
            assert!(start.elapsed() < WAIT, "no press and release: {e:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let boundary = Duration::from_millis(TAP_MAX_MS);
    for (what, hold) in [
        ("tap", None),
        ("hold 150 ms", Some(150)),
        ("hold 1 s", Some(1000)),
    ] {
        let runs: Vec<Duration> = (0..5).map(|_| measure(hold)).collect();
        eprintln!("MEASURED {what}: press → release as reported {runs:?}");
        for d in runs {
            match hold {
                Some(ms) if ms >= TAP_MAX_MS => assert!(d >= boundary, "{what}: {d:?}"),
                _ => assert!(d < boundary, "{what}: {d:?}"),
            }
        }
    }
}

/// Right Alt down or up alone, through XTest (see `app_support::x11::key_event`).
fn right_alt(down: bool) {
    app_support::x11::key_event(app_support::x11::ALT_R, down);
}

/// Item 2 through XInput2 raw key events: Right Alt (`Alt_R`) alone is the dictation key.
/// Observed, not grabbed: keys typed meanwhile reach the focused Tk entry, and typing alone
/// starts nothing. Held, it is push-to-talk (recording starts, and stops when let go). A
/// chord — Right Alt held with BackSpace pressed within the wait — starts no dictation, and
/// the BackSpace still reaches the entry. A key joining after the press was sent cancels
/// the recording that press started while Right Alt is still held.
#[test]
fn issue26_02_right_alt_alone_is_observed_push_to_talk_and_a_chord_starts_nothing_x11() {
    if !in_xvfb_child(
        "issue26_02_right_alt_alone_is_observed_push_to_talk_and_a_chord_starts_nothing_x11",
    ) {
        return;
    }
    let mut target = Target::start();
    let two = two_recordings("modkeys-x11");
    let mut app = keys_app(two, true, |s| s.hotkey.keys = Some("RightAlt".into()));
    app.harness.step();
    assert_eq!(app.harness.state().view().hotkey_note, None);
    // The observer's thread is up once the shell registered it; give it a moment to select.
    app.run_for(300);

    // Typing passes through and starts nothing.
    xdotool(&["type", "abc"]);
    wait_entry(&mut target, &mut app, "abc");
    app.run_for(500);
    assert!(!app.recording(), "typing started a dictation");

    // Held alone: push-to-talk.
    right_alt(true);
    app.wait_recording();
    right_alt(false);
    app.wait_finished();
    assert_eq!(session_count(&app.root), 1);
    let states = app.seen.states.lock().unwrap().len();

    // A chord within the wait: nothing starts, and BackSpace reaches the entry.
    right_alt(true);
    xdotool(&["key", "BackSpace"]);
    std::thread::sleep(Duration::from_millis(600));
    right_alt(false);
    wait_entry(&mut target, &mut app, "ab");
    app.run_for(800);
    assert!(!app.recording(), "a chord started a dictation");
    assert_eq!(
        app.seen.states.lock().unwrap().len(),
        states,
        "the chord changed the icon: {:?}",
        app.seen.states.lock().unwrap()
    );
    assert_eq!(session_count(&app.root), 1);

    // A key joining after the press: the recording it started is cancelled while the key
    // is still held (push-to-talk would have gone on until the release).
    right_alt(true);
    app.wait_until("the recording to start", |a| a.recording());
    xdotool(&["key", "BackSpace"]);
    app.wait_until("the chord to cancel the recording", |a| !a.recording());
    right_alt(false);
    wait_entry(&mut target, &mut app, "a");
    assert!(
        app.harness.state().view().undo_pending(),
        "the chord did not cancel (no Undo offered)"
    );
}

/// Item 2, the recorder: while "Record shortcut" waits, Right Alt pressed and released alone
/// (seen by the raw-event observer; egui reports no key for a modifier) becomes the
/// dictation key, shown the Mac way, and then dictates when held.
#[test]
fn issue26_02_the_recorder_takes_right_alt_tapped_alone_x11() {
    if !in_xvfb_child("issue26_02_the_recorder_takes_right_alt_tapped_alone_x11") {
        return;
    }
    let mut app = keys_app(one_utterance("keys", SAID), true, |_| {});
    app.harness.step();
    (app.post)(ShellEvent::Menu(MenuAction::Settings));
    app.harness.step();
    app.harness
        .get_by_role_and_label(Role::Button, "Record shortcut")
        .click();
    app.run_for(400);
    // A combination with Right Alt in it is no tap.
    right_alt(true);
    xdotool(&["key", "Control_R"]);
    right_alt(false);
    app.run_for(400);
    assert_ne!(
        app.harness.state().view().settings().hotkey.keys.as_deref(),
        Some("RightAlt")
    );
    right_alt(true);
    right_alt(false);
    app.wait_until("Right Alt to be saved as the hotkey", |a| {
        let v = a.harness.state().view();
        v.settings().hotkey.keys.as_deref() == Some("RightAlt") && v.hotkey_note.is_none()
    });
    assert!(app.says("Right ⌥"), "shown the Mac way");
    app.run_for(300);
    right_alt(true);
    app.wait_recording();
    right_alt(false);
    app.wait_finished();
}
