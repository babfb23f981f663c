//! Issue #24 item 9: Esc cancels a recording — nothing is copied or pasted, "Recording
//! cancelled" with Undo keeps it for a few seconds, then it is deleted; Undo keeps it and
//! delivers it as a stop would have. The real backend, the fake provider on loopback,
//! egui_kittest.
#![cfg(feature = "app")]

mod app_support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use app_support::ui::UiApp;
use app_support::{fixture, one_utterance};
use eframe::egui;
use egui_kittest::kittest::Queryable;
use persyk::app::ui::UNDO_FOR;

const SAID: &str = "Words I want to take back.";

fn app() -> UiApp {
    UiApp::new(
        fixture(
            Some(one_utterance("cancel", SAID)),
            Some("sk-test"),
            30.0,
            |_| {},
        ),
        640.0,
        900.0,
    )
}

fn sessions(app: &UiApp) -> Vec<PathBuf> {
    std::fs::read_dir(&app.root)
        .expect("root")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("session.jsonl").is_file())
        .collect()
}

/// Start; wait until the words are a saved message.
fn record(app: &mut UiApp) {
    app.click("Start dictation");
    app.wait_until("the saved message", |h| {
        h.query_all_by_role_and_label(egui::accesskit::Role::Button, "Copy")
            .next()
            .is_some()
    });
}

#[test]
fn issue24_09_esc_cancels_nothing_is_copied_and_the_session_goes_after_the_undo_time() {
    let mut app = app();
    record(&mut app);
    app.harness.key_press(egui::Key::Escape);
    app.wait_label("Recording cancelled");
    assert!(app.has_label("Nothing was copied."));
    assert!(app.copies().is_empty());
    assert!(!app.harness.state().is_recording());
    assert_eq!(sessions(&app).len(), 1, "kept while Undo is offered");
    // Past the Undo time: deleted through the store, nothing ever copied.
    app.wait_until("the Undo time to end", |h| !h.state().undo_pending());
    let root = app.root.clone();
    app.wait_until("no session left", move |_| {
        std::fs::read_dir(&root)
            .map(|d| {
                d.flatten()
                    .all(|e| !e.path().join("session.jsonl").is_file())
            })
            .unwrap_or(false)
    });
    assert!(app.copies().is_empty());
    assert_eq!(app.harness.state().last_transcript(), None);
    app.shutdown();
}

#[test]
fn issue24_09_undo_keeps_the_recording_and_delivers_it() {
    let mut app = app();
    record(&mut app);
    app.harness.key_press(egui::Key::Escape);
    app.wait_label("Recording cancelled");
    app.click("Undo");
    app.wait_label("Saved:");
    assert_eq!(app.copies(), [SAID]);
    assert_eq!(app.harness.state().last_transcript(), Some(SAID));
    // Still there after the Undo time.
    let until = Instant::now() + UNDO_FOR + Duration::from_secs(1);
    app.wait_until("the Undo time to pass", move |_| Instant::now() > until);
    assert_eq!(sessions(&app).len(), 1);
    app.shutdown();
}
