//! "Check for Updates…" headless (egui_kittest) over the real backend and a loopback feed
//! server (tests/support/update.rs): a signed newer release is said in a sentence with its
//! links and "Download" opens the verified DMG's URL; a feed signed by another key, an older
//! release and an unreachable feed are said without offering anything; a failed daily check
//! is quiet; the daily checkbox is saved.
#![cfg(feature = "app")]

mod app_support;
mod support;

use std::sync::Arc;

use app_support::shell::{StateTray, shell_harness};
use app_support::ui::UiApp;
use app_support::{ToneMic, fixture_full};
use eframe::egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use persyk::app::backend::UpdateConfig;
use persyk::app::event::{MenuAction, ShellEvent};
use persyk::app::model::Update;
use persyk::app::shell::{ShellOptions, TrayPort};
use persyk::app::ui::Page;
use persyk::app::ui::updates::{CHECK_DAILY, CHECK_NOW, COULD_NOT_CHECK};
use persyk::settings::Settings;
use persyk::update::{Source, UpdateError};
use support::update::{FeedServer, signed, test_key, unreachable_url};

const DMG: &str = "https://github.com/persyk/persyk/releases/download/v99.0.0/Persyk-99.0.0.dmg";

/// The window with its update check pointed at `feed_url` (signed with the test key).
fn app(feed_url: &str) -> UiApp {
    app_with(feed_url, false, |_| {})
}

/// [`app`] with the daily check allowed (`daily`, first run at once) and settings `edit`ed.
fn app_with(feed_url: &str, daily: bool, edit: impl FnOnce(&mut Settings)) -> UiApp {
    let updates = UpdateConfig {
        source: Source::new(feed_url, test_key()),
        daily,
        first_daily_check: std::time::Duration::ZERO,
    };
    let f = fixture_full(
        None,
        Some("sk-test"),
        Arc::new(ToneMic { seconds: 1.0 }),
        None,
        updates,
        edit,
    );
    UiApp::new(f, 720.0, 2400.0)
}

fn serving(fixture: &str) -> FeedServer {
    let server = FeedServer::start();
    let (feed, sig) = signed(fixture);
    server.publish(&feed, &sig, "persyk-update.json");
    server
}

/// Settings › Updates, then "Check now", until the answer is there.
fn check_now(app: &mut UiApp) -> String {
    app.harness.state_mut().show_page(Page::Settings);
    app.harness.step();
    app.click(CHECK_NOW);
    app.wait_until("the update check's answer", |h| {
        h.state().update_sentence().is_some()
    });
    app.harness.step();
    app.harness.state().update_sentence().unwrap_or_default()
}

#[test]
fn a_signed_newer_release_is_offered_and_download_opens_the_verified_dmg() {
    let server = serving("newer.json");
    let mut app = app(&server.url("persyk-update.json"));
    assert_eq!(check_now(&mut app), "Persyk 99.0.0 is available");
    app.wait_label("Persyk 99.0.0 is available");
    assert!(app.has_label(
        "Its SHA-256: 5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"
    ));
    // Nothing is downloaded or opened until the user asks.
    assert!(app.effects.opened.lock().unwrap().is_empty());
    app.harness
        .get_by_role_and_label(Role::Link, "Download")
        .click();
    app.harness.step();
    app.harness.step();
    assert_eq!(*app.effects.opened.lock().unwrap(), [DMG]);
    // The Dictation page says it too.
    app.harness.state_mut().show_page(Page::Dictation);
    app.harness.step();
    assert!(app.has_label("Persyk 99.0.0 is available"));
    app.harness
        .get_by_role_and_label(Role::Link, "What's new")
        .click();
    app.harness.step();
    app.harness.step();
    assert_eq!(
        app.effects
            .opened
            .lock()
            .unwrap()
            .last()
            .map(String::as_str),
        Some("https://github.com/persyk/persyk/releases/tag/v99.0.0")
    );
    app.shutdown();
}

#[test]
fn the_menus_check_for_updates_shows_settings_with_the_answer() {
    let server = serving("newer.json");
    let updates = UpdateConfig {
        source: Source::new(&server.url("persyk-update.json"), test_key()),
        daily: false,
        first_daily_check: std::time::Duration::ZERO,
    };
    let f = fixture_full(
        None,
        Some("sk-test"),
        Arc::new(ToneMic { seconds: 1.0 }),
        None,
        updates,
        |_| {},
    );
    let _rest = (f.dir, f.fake);
    let mut harness = shell_harness(
        f.ui,
        ShellOptions {
            hidden: false,
            no_hotkey: true,
            ..ShellOptions::default()
        },
        |_post| Ok(Box::new(StateTray(Default::default())) as Box<dyn TrayPort>),
    );
    harness.step();
    assert_eq!(harness.state().view().page(), Page::Dictation);
    // The tray's "Check for Updates…".
    (harness.state().poster())(ShellEvent::Menu(MenuAction::CheckUpdates));
    let start = std::time::Instant::now();
    while harness.state().view().update_sentence().is_none() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "no answer"
        );
        harness.step();
        std::thread::sleep(std::time::Duration::from_millis(15));
    }
    harness.step();
    harness.step();
    assert_eq!(harness.state().view().page(), Page::Settings);
    assert!(
        harness
            .query_all_by_label_contains("Persyk 99.0.0 is available")
            .next()
            .is_some()
    );
    assert_eq!(
        *server.requests.lock().unwrap(),
        ["/persyk-update.json", "/persyk-update.json.minisig"]
    );
}

#[test]
fn a_bad_signature_offers_nothing_and_says_it_could_not_check() {
    let server = serving("wrong-key.json");
    let mut app = app(&server.url("persyk-update.json"));
    assert_eq!(check_now(&mut app), format!("{COULD_NOT_CHECK}."));
    app.wait_label("Details: update.bad-signature");
    assert!(!app.has_label("is available"));
    assert!(
        app.harness
            .query_by_role_and_label(Role::Link, "Download")
            .is_none()
    );
    app.shutdown();
}

#[test]
fn an_older_release_is_up_to_date() {
    let server = serving("older.json");
    let mut app = app(&server.url("persyk-update.json"));
    let sentence = check_now(&mut app);
    assert_eq!(
        sentence,
        format!("Persyk {} is up to date.", env!("CARGO_PKG_VERSION"))
    );
    app.wait_label("is up to date.");
    assert!(
        app.harness
            .query_by_role_and_label(Role::Link, "Download")
            .is_none()
    );
    app.shutdown();
}

#[test]
fn an_unreachable_feed_says_it_could_not_check() {
    let mut app = app(&unreachable_url());
    assert_eq!(check_now(&mut app), format!("{COULD_NOT_CHECK}."));
    app.wait_label("Details: update.unreachable");
    app.shutdown();
}

#[test]
fn a_failed_daily_check_is_quiet() {
    let mut app = app(&unreachable_url());
    // What the backend's daily check answers offline.
    app.harness.state_mut().apply(Update::UpdateChecked {
        manual: false,
        result: Err(UpdateError::Unreachable),
    });
    app.harness.step();
    // Nothing on the Dictation page ...
    assert!(!app.has_label(COULD_NOT_CHECK));
    // ... one weak line in Settings, without a code.
    app.harness.state_mut().show_page(Page::Settings);
    app.harness.step();
    app.harness.step();
    assert!(app.has_label(COULD_NOT_CHECK));
    assert!(!app.has_label("Details: update."));
    app.shutdown();
}

#[test]
fn the_daily_check_runs_by_itself_and_says_a_newer_release_on_the_dictation_page() {
    let server = serving("newer.json");
    let mut app = app_with(&server.url("persyk-update.json"), true, |_| {});
    assert_eq!(app.harness.state().page(), Page::Dictation);
    app.wait_label("Persyk 99.0.0 is available");
    assert!(
        app.harness
            .query_by_role_and_label(Role::Link, "Download")
            .is_some()
    );
    assert_eq!(server.requests.lock().unwrap().len(), 2);
    app.shutdown();
}

#[test]
fn the_daily_check_stays_off_when_the_setting_is_off() {
    let server = serving("newer.json");
    let mut app = app_with(&server.url("persyk-update.json"), true, |s| {
        s.updates.daily = Some(false)
    });
    // The first daily check was due at once: give it time to (wrongly) run.
    let until = std::time::Instant::now() + std::time::Duration::from_millis(1500);
    while std::time::Instant::now() < until {
        app.harness.step();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(server.requests.lock().unwrap().is_empty());
    assert_eq!(app.harness.state().update_sentence(), None);
    // "Check now" still works.
    assert_eq!(check_now(&mut app), "Persyk 99.0.0 is available");
    app.shutdown();
}

#[test]
fn the_daily_check_box_is_saved() {
    let server = serving("newer.json");
    let mut app = app(&server.url("persyk-update.json"));
    app.harness.state_mut().show_page(Page::Settings);
    app.harness.step();
    app.harness
        .get_by_role_and_label(Role::CheckBox, CHECK_DAILY)
        .click();
    app.harness.step();
    let config = app.config.clone();
    app.wait_until("the settings file says daily: false", move |_| {
        Settings::load(&config).is_ok_and(|s| !s.updates.daily_enabled())
    });
    // No check ran by itself meanwhile (daily checks are off in tests).
    assert!(server.requests.lock().unwrap().is_empty());
    app.shutdown();
}
