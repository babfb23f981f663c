//! Clean-up in the app (issue #27): a dictation through the real backend, the fake Realtime
//! provider and a scripted OpenAI-compatible model server on loopback; what is copied, what
//! the window says, what the session keeps.
#![cfg(feature = "app")]

mod app_support;
#[allow(dead_code)]
#[path = "support/chat.rs"]
mod chat;

use std::path::PathBuf;
use std::time::Duration;

use app_support::ui::UiApp;
use app_support::{fixture, one_utterance};
use chat::{ChatServer, Reply};
use eframe::egui;
use egui_kittest::kittest::Queryable;
use persyk::cleanup::replace::Rule;
use persyk::cleanup::settings::{AppRule, CleanupMode};
use persyk::settings::Settings;
use serde_json::Value;

const SPOKEN: &str = "so um I think we should move the meeting to Friday";
const TIDY: &str = "I think we should move the meeting to Friday.";

fn app_with(server: Option<&ChatServer>, edit: impl FnOnce(&mut Settings)) -> UiApp {
    app_sized(server, edit, 900.0)
}

/// `app_with` in a window `height` points tall.
fn app_sized(server: Option<&ChatServer>, edit: impl FnOnce(&mut Settings), height: f32) -> UiApp {
    let url = server.map(ChatServer::url);
    UiApp::new(
        fixture(
            Some(one_utterance("app-cleanup", SPOKEN)),
            Some("sk-test-app"),
            3.0,
            |s| {
                if let Some(url) = url {
                    s.cleanup.mode = CleanupMode::Tidy;
                    s.cleanup.base_url = url;
                    s.cleanup.model = "tiny-cleaner".into();
                }
                edit(s);
            },
        ),
        640.0,
        height,
    )
}

fn entries(app: &UiApp) -> Vec<Value> {
    let sessions: Vec<PathBuf> = std::fs::read_dir(&app.root)
        .expect("root")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("session.jsonl").is_file())
        .collect();
    assert_eq!(sessions.len(), 1);
    std::fs::read_to_string(sessions[0].join("session.jsonl"))
        .expect("session")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

fn of_type(all: &[Value], t: &str) -> usize {
    all.iter().filter(|e| e["customType"] == t).count()
}

/// Start; stop once the spoken words are a saved message.
fn dictate(app: &mut UiApp) {
    dictate_words(app, SPOKEN);
}

/// Start; stop once `spoken` is a saved message.
fn dictate_words(app: &mut UiApp, spoken: &str) {
    app.click("Start dictation");
    app.wait_label(spoken);
    app.wait_until("the saved message", |h| {
        h.query_all_by_role_and_label(egui::accesskit::Role::Button, "Copy")
            .next()
            .is_some()
    });
    app.click("Stop dictation");
}

#[test]
fn issue27_a_tidy_dictation_copies_the_clean_up_and_keeps_both_texts() {
    let server = ChatServer::start(vec![Reply::Content(TIDY.into())]);
    let mut app = app_with(Some(&server), |_| {});
    dictate(&mut app);
    app.wait_label("Cleaned up (Tidy).");
    assert_eq!(app.copies(), [TIDY]);
    assert_eq!(app.harness.state().last_transcript(), Some(TIDY));
    let all = entries(&app);
    assert_eq!(of_type(&all, "persyk.cleanup"), 1);
    assert!(
        all.iter()
            .any(|e| e["type"] == "message" && e["message"]["content"][0]["text"] == SPOKEN)
    );

    // History: both texts, the clean-up captioned; Copy all gives what was delivered, Copy
    // all as spoken the words.
    app.click("Search");
    app.wait_until("the session's row", |h| {
        h.query_all_by_role_and_label(egui::accesskit::Role::Button, "Open")
            .next()
            .is_some()
    });
    app.click("Open");
    app.wait_label("Read-only: the session as it was");
    // When and how long (issue #24 item 8): the day, the time and the recorded length.
    assert!(app.has_label("Today, "));
    assert!(app.has_label(" recorded"));
    assert!(app.has_label(SPOKEN));
    assert!(app.has_label("Cleaned up (tidy):"));
    // What changed: the words it dropped and the clean-up's, in one line.
    app.harness.get_by_label("What changed").click();
    app.harness.step();
    app.wait_label("so um I think we should move the meeting to Friday.");
    app.click("Copy all");
    let wait_copies = |app: &mut UiApp, n: usize| {
        let copies = app.effects.copies.clone();
        app.wait_until("a copy", move |_| copies.lock().unwrap().len() >= n);
    };
    wait_copies(&mut app, 2);
    assert_eq!(app.copies()[1], TIDY);
    app.click("Copy all as spoken");
    wait_copies(&mut app, 3);
    assert_eq!(app.copies()[2], SPOKEN);

    // "Use my words": the clean-up leaves the conversation (a message.removed at the tip);
    // the spoken words stay, and Copy all gives them.
    app.click("Use my words");
    app.wait_label("The clean-up was removed; your words stay.");
    app.wait_until("the session shown without the clean-up", |h| {
        h.query_all_by_label_contains("Cleaned up (tidy):")
            .next()
            .is_none()
            && h.query_all_by_label_contains(SPOKEN).next().is_some()
    });
    let all = entries(&app);
    let cleanup_id = all
        .iter()
        .find(|e| e["customType"] == "persyk.cleanup")
        .map(|e| e["id"].clone())
        .expect("the clean-up stays in the file");
    let last = all.last().expect("entries");
    assert_eq!(last["type"], "message.removed");
    assert_eq!(last["targetId"], cleanup_id);
    app.click("Copy all");
    wait_copies(&mut app, 4);
    assert_eq!(app.copies()[3], SPOKEN);
    let dir = std::fs::read_dir(&app.root)
        .expect("root")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("session.jsonl").is_file())
        .expect("the session");
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_persyk"))
        .arg("check")
        .arg(&dir)
        .output()
        .expect("persyk check");
    assert!(check.status.success());
    app.shutdown();
}

/// An app whose microphone says `spoken`, cleaning up in `mode` through `server`.
fn app_saying(server: &ChatServer, spoken: &str, mode: CleanupMode) -> UiApp {
    let url = server.url();
    UiApp::new(
        fixture(
            Some(one_utterance("app-cleanup", spoken)),
            Some("sk-test-app"),
            3.0,
            |s| {
                s.cleanup.mode = mode;
                s.cleanup.language = "German".into();
                s.cleanup.base_url = url;
                s.cleanup.model = "tiny-cleaner".into();
            },
        ),
        640.0,
        900.0,
    )
}

/// Issue #35 item 8: "Pasted as spoken: …" names the kind of change the guard refused, and
/// the words go out as spoken.
#[test]
fn issue35_08_the_window_names_the_change_it_refused() {
    for (spoken, reply, sentence) in [
        (
            "I can't make it to the review on Tuesday",
            "I can make it to the review on Tuesday.",
            "Pasted as spoken: it changed a “not”.",
        ),
        (
            "is the build server down right now",
            "Yes, the build server is down right now.",
            "Pasted as spoken: it answered your question.",
        ),
    ] {
        let server = ChatServer::start(vec![Reply::Content(reply.into())]);
        let mut app = app_saying(&server, spoken, CleanupMode::Tidy);
        dictate_words(&mut app, spoken);
        app.wait_label(sentence);
        assert_eq!(app.copies(), [spoken]);
        app.shutdown();
    }
}

/// Issue #35 item 4: a translation is pasted, and says in the window and in history that
/// only its numbers, names and questions were checked.
#[test]
fn issue35_04_a_translation_says_it_was_not_checked_for_meaning() {
    let german = "Ich glaube, wir sollten das Treffen auf Freitag verschieben.";
    let server = ChatServer::start(vec![Reply::Content(german.into())]);
    let mut app = app_saying(&server, SPOKEN, CleanupMode::Translate);
    dictate(&mut app);
    app.wait_label("Translated: not checked for meaning (its numbers, names and questions were).");
    assert_eq!(app.copies(), [german]);
    app.click("Search");
    app.wait_until("the session's row", |h| {
        h.query_all_by_role_and_label(egui::accesskit::Role::Button, "Open")
            .next()
            .is_some()
    });
    app.click("Open");
    app.wait_label("not checked for meaning");
    app.shutdown();
}

#[test]
fn issue27_an_answering_model_pastes_the_spoken_words_and_says_why() {
    let server = ChatServer::start(vec![Reply::Content(
        "Friday works well for most teams. Would you like me to draft an invitation?".into(),
    )]);
    let mut app = app_with(Some(&server), |_| {});
    dictate(&mut app);
    app.wait_label("Pasted as spoken: it left out words you said.");
    assert_eq!(app.copies(), [SPOKEN]);
    let all = entries(&app);
    assert_eq!(of_type(&all, "persyk.cleanup"), 0);
    assert_eq!(of_type(&all, "persyk.cleanup-attempt"), 1);
    app.shutdown();
}

#[test]
fn issue27_esc_while_cleaning_pastes_the_spoken_words_at_once() {
    // The server answers after 20 s; the deadline is 30 s: only Esc ends the wait early.
    let server = ChatServer::start(vec![Reply::Slow(Duration::from_secs(20), TIDY.into())]);
    let mut app = app_with(Some(&server), |s| s.cleanup.deadline_ms = Some(30_000));
    dictate(&mut app);
    app.wait_label("Cleaning up (Tidy)…");
    assert!(app.has_label("Use my words"));
    app.harness.key_press(egui::Key::Escape);
    app.wait_label("Pasted as spoken: you chose your words.");
    assert_eq!(app.copies(), [SPOKEN]);
    app.shutdown();
}

#[test]
fn issue27_use_my_words_and_a_missing_server_deliver_the_spoken_words() {
    let server = ChatServer::start(vec![Reply::Slow(Duration::from_secs(20), TIDY.into())]);
    let mut app = app_with(Some(&server), |s| s.cleanup.deadline_ms = Some(30_000));
    dictate(&mut app);
    app.wait_label("Cleaning up (Tidy)…");
    app.click("Use my words");
    app.wait_label("Pasted as spoken: you chose your words.");
    assert_eq!(app.copies(), [SPOKEN]);
    app.shutdown();

    // Nothing listens on the server's port: the words go out, said in a sentence.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    drop(listener);
    let mut app = app_with(None, |s| {
        s.cleanup.mode = CleanupMode::Tidy;
        s.cleanup.base_url = url;
        s.cleanup.model = "m".into();
    });
    dictate(&mut app);
    app.wait_label("Pasted as spoken: the model server could not be reached.");
    assert_eq!(app.copies(), [SPOKEN]);
    app.shutdown();
}

#[test]
fn issue27_replacements_apply_without_a_model() {
    let mut app = app_with(None, |s| {
        s.cleanup.replacements = vec![Rule {
            from: "Friday".into(),
            to: "Thursday".into(),
        }];
    });
    dictate(&mut app);
    app.wait_label("Your replacements were applied.");
    assert_eq!(
        app.copies(),
        ["so um I think we should move the meeting to Thursday"]
    );
    assert_eq!(of_type(&entries(&app), "persyk.cleanup"), 1);
    app.shutdown();
}

#[test]
fn issue27_the_clean_up_section_saves_mode_server_and_replacements() {
    // Tall enough that the Clean-up section is on screen without scrolling.
    let mut app = app_sized(None, |_| {}, 3000.0);
    app.harness
        .state_mut()
        .show_page(persyk::app::ui::Page::Settings);
    app.harness.step();
    app.wait_label("After recognition");
    // Choose Tidy in the mode menu.
    app.harness.get_by_label("After recognition").click();
    app.harness.step();
    app.harness.step();
    app.harness
        .get_by_role_and_label(egui::accesskit::Role::Button, "Tidy")
        .click();
    app.harness.step();
    app.wait_label("Model server");
    let type_into = |app: &mut UiApp, label: &str, text: &str| {
        app.harness.get_by_label(label).focus();
        app.harness.step();
        app.harness.get_by_label(label).type_text(text);
        app.harness.step();
    };
    type_into(&mut app, "Model server", "http://127.0.0.1:11434/v1");
    type_into(&mut app, "Model", "llama3.2");
    app.wait_label("On this Mac: nothing leaves it.");
    app.click("Add replacement");
    type_into(&mut app, "Said (replacement 1)", "persic");
    type_into(&mut app, "Written (replacement 1)", "Persyk");
    app.click("Save settings");
    app.wait_label("Settings saved");
    let saved = Settings::load(&app.config).expect("settings");
    assert_eq!(saved.cleanup.mode, CleanupMode::Tidy);
    assert_eq!(saved.cleanup.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(saved.cleanup.model, "llama3.2");
    assert_eq!(
        saved.cleanup.replacements,
        [Rule {
            from: "persic".into(),
            to: "Persyk".into()
        }]
    );
    app.shutdown();
}

#[test]
fn issue27_clean_up_again_from_history_after_a_refused_clean_up() {
    // The first answer is refused by the guard (the words go out as spoken); "Clean up again"
    // from history asks again and gets a faithful one.
    let server = ChatServer::start(vec![
        Reply::Content("Paris is lovely on Fridays.".into()),
        Reply::Content(TIDY.into()),
        Reply::Content(TIDY.into()),
    ]);
    let mut app = app_with(Some(&server), |_| {});
    dictate(&mut app);
    app.wait_label("Pasted as spoken:");
    assert_eq!(app.copies(), [SPOKEN]);
    app.click("Search");
    app.wait_until("the session's row", |h| {
        h.query_all_by_role_and_label(egui::accesskit::Role::Button, "Open")
            .next()
            .is_some()
    });
    app.click("Open");
    app.wait_label("Read-only: the session as it was");
    assert!(!app.has_label("Cleaned up (tidy):"));
    app.click("Clean up again");
    app.wait_label("Cleaned up again (Tidy) and copied.");
    assert_eq!(app.copies().last().map(String::as_str), Some(TIDY));
    app.wait_label("Cleaned up (tidy):");
    let all = entries(&app);
    assert_eq!(of_type(&all, "persyk.cleanup"), 1);
    assert_eq!(of_type(&all, "persyk.cleanup-attempt"), 1);
    assert_eq!(server.requests().len(), 2);

    // Again: the newer clean-up takes the place of the older in what Copy all gives.
    let copies = app.copies().len();
    app.click("Clean up again");
    let seen = app.effects.copies.clone();
    app.wait_until("the second copy", move |_| {
        seen.lock().unwrap().len() > copies
    });
    app.wait_until("two clean-ups shown", |h| {
        h.query_all_by_label_contains("Cleaned up (tidy):").count() == 2
    });
    let copies = app.copies().len();
    app.click("Copy all");
    let seen = app.effects.copies.clone();
    app.wait_until("Copy all", move |_| seen.lock().unwrap().len() > copies);
    assert_eq!(app.copies().last().map(String::as_str), Some(TIDY));
    app.shutdown();
}

/// A fixture whose dictations start with the app known by `front` in front, the model
/// server set up and As spoken as the default mode.
fn app_in_front(
    front: &[&str],
    server: &ChatServer,
    edit: impl FnOnce(&mut Settings),
    height: f32,
) -> UiApp {
    let url = server.url();
    UiApp::new(
        app_support::fixture_in_front(
            persyk::app::frontmost::fixed(front),
            Some(one_utterance("app-cleanup", SPOKEN)),
            Some("sk-test-app"),
            std::sync::Arc::new(app_support::ToneMic { seconds: 3.0 }),
            None,
            persyk::app::backend::UpdateConfig::off(),
            |s| {
                s.cleanup.mode = CleanupMode::AsSpoken;
                s.cleanup.base_url = url;
                s.cleanup.model = "tiny-cleaner".into();
                edit(s);
            },
        ),
        640.0,
        height,
    )
}

#[test]
fn issue27_a_mode_by_app_cleans_up_dictation_into_that_app_and_no_other() {
    let rules = |s: &mut Settings| {
        s.cleanup.per_app = vec![AppRule {
            app: "thunderbird".into(),
            mode: CleanupMode::Tidy,
        }];
    };
    // Thunderbird in front (X11 instance and class): its mode, Tidy, on the indicator and
    // in what is copied.
    let server = ChatServer::start(vec![Reply::Content(TIDY.into())]);
    let mut app = app_in_front(&["thunderbird", "Thunderbird"], &server, rules, 900.0);
    app.click("Start dictation");
    app.wait_until("the indicator names the app's mode", |h| {
        h.state()
            .indicator()
            .is_some_and(|m| m.cleanup == Some("Tidy"))
    });
    dictate_rest(&mut app);
    app.wait_label("Cleaned up (Tidy).");
    assert_eq!(app.copies(), [TIDY]);
    assert_eq!(server.requests().len(), 1);
    let all = entries(&app);
    assert_eq!(of_type(&all, "persyk.cleanup"), 1);
    let cleanup = all
        .iter()
        .find(|e| e["customType"] == "persyk.cleanup")
        .expect("the clean-up");
    assert_eq!(cleanup["details"]["mode"], "tidy");
    app.shutdown();

    // Another app in front: the default, As spoken — no model asked, nothing on the
    // indicator, the words copied as spoken.
    let server = ChatServer::start(vec![Reply::Content(TIDY.into())]);
    let mut app = app_in_front(&["xterm", "XTerm"], &server, rules, 3000.0);
    app.click("Start dictation");
    app.wait_until("the indicator", |h| h.state().indicator().is_some());
    assert_eq!(
        app.harness.state().indicator().and_then(|m| m.cleanup),
        None
    );
    dictate_rest(&mut app);
    app.wait_until("the words copied", |h| {
        h.state().last_transcript().is_some()
    });
    assert_eq!(app.copies(), [SPOKEN]);
    assert!(server.requests().is_empty());
    assert_eq!(of_type(&entries(&app), "persyk.cleanup"), 0);

    // Settings offers the app just dictated into; added with Tidy and saved, it is in the
    // settings file beside the first rule.
    app.harness
        .state_mut()
        .show_page(persyk::app::ui::Page::Settings);
    app.harness.step();
    app.wait_label("Modes by app");
    app.click("Add XTerm");
    app.wait_until("the new row", |h| {
        h.query_by_label("App (mode by app 2)").is_some()
    });
    app.click("Save settings");
    app.wait_label("Settings saved");
    let saved = Settings::load(&app.config).expect("settings");
    assert_eq!(
        saved.cleanup.per_app,
        [
            AppRule {
                app: "thunderbird".into(),
                mode: CleanupMode::Tidy
            },
            AppRule {
                app: "XTerm".into(),
                mode: CleanupMode::Tidy
            }
        ]
    );
    assert_eq!(saved.cleanup.mode, CleanupMode::AsSpoken);
    app.shutdown();
}

/// The rest of [`dictate`] after the start: the words saved, then Stop.
fn dictate_rest(app: &mut UiApp) {
    app.wait_label(SPOKEN);
    app.wait_until("the saved message", |h| {
        h.query_all_by_role_and_label(egui::accesskit::Role::Button, "Copy")
            .next()
            .is_some()
    });
    app.click("Stop dictation");
}
