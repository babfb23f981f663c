//! Issue 14, item 4: the history, keyboard-first, headless (egui_kittest) against the real
//! backend. The field has focus when the page opens and on ⌘F / Ctrl+F; ↑/↓ select a row,
//! Enter opens it, ⌘C / Ctrl+C copies its surviving text (unless the field has a text
//! selection), Esc clears the query or leaves an opened session; rows are grouped by local
//! day with their time and duration and a Copy button that copies without opening. Widgets
//! are found by role and label, as a screen reader would.
#![cfg(feature = "app")]

mod app_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use app_support::fixture;
use app_support::ui::UiApp;
use eframe::egui::accesskit::Role;
use eframe::egui::{Event, Key, Modifiers};
use egui_kittest::kittest::{NodeT, Queryable};
use persyk::app::ui::Page;
use time::format_description::well_known::Rfc3339;
use time::{Duration as TimeDuration, OffsetDateTime};

type App = UiApp;

/// A UI over the real backend whose root holds the sessions `write` puts there first.
fn app(write: impl FnOnce(&Path)) -> App {
    let f = fixture(None, Some("sk-test-app"), 5.0, |s| {
        write(s.sessions.directory.as_deref().unwrap());
    });
    UiApp::new(f, 640.0, 900.0)
}

impl App {
    fn key(&mut self, key: Key) {
        self.harness.key_press(key);
        self.harness.step();
        self.harness.step();
    }

    fn command(&mut self, key: Key) {
        self.harness.key_press_modifiers(Modifiers::COMMAND, key);
        self.harness.step();
        self.harness.step();
    }

    /// ⌘C / Ctrl+C as winit delivers it: an `Event::Copy`.
    fn copy_shortcut(&mut self) {
        self.harness.event(Event::Copy);
        self.harness.step();
        self.harness.step();
    }

    fn query_focused(&self) -> bool {
        self.harness.get_by_label("Search history").is_focused()
    }

    /// Waits until the copy count reaches `n` (copies of a row go through the backend).
    fn wait_copies(&mut self, n: usize) {
        let copies = self.effects.copies.clone();
        self.wait_until("a copy", move |_| copies.lock().unwrap().len() >= n);
    }

    fn y_of(&self, label: &str) -> f32 {
        self.harness.get_by_label(label).rect().min.y
    }
}

/// A session of user messages `texts`, created at `created`; `duration_ms`: one finished
/// recording of that length.
fn write_session(
    root: &Path,
    name: &str,
    created: &str,
    texts: &[&str],
    duration_ms: Option<u64>,
) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let id = format!("00000000-0000-4000-8000-0000000000{name}");
    let mut out = format!(
        "{{\"type\":\"session\",\"version\":1,\"id\":\"{id}\",\"timestamp\":\"{created}\"}}\n"
    );
    let mut parent = "null".to_owned();
    if duration_ms.is_some() {
        out.push_str(&format!(
            "{{\"type\":\"recording.started\",\"id\":\"{id}-rs\",\"parentId\":null,\"timestamp\":\"{created}\",\
             \"recordingId\":\"rec-{name}\",\"asset\":\"assets/rec-{name}.wav\"}}\n"
        ));
        parent = format!("\"{id}-rs\"");
    }
    for (i, t) in texts.iter().enumerate() {
        let mid = format!("{id}-m{i}");
        out.push_str(&format!(
            "{{\"type\":\"message\",\"id\":\"{mid}\",\"parentId\":{parent},\"timestamp\":\"{created}\",\
             \"message\":{{\"role\":\"user\",\"timestamp\":1,\"content\":[{{\"type\":\"text\",\"text\":\"{t}\"}}]}}}}\n"
        ));
        parent = format!("\"{mid}\"");
    }
    if let Some(d) = duration_ms {
        out.push_str(&format!(
            "{{\"type\":\"recording.finished\",\"id\":\"{id}-rf\",\"parentId\":{parent},\"timestamp\":\"{created}\",\
             \"recordingId\":\"rec-{name}\",\"durationMs\":{d},\"outcome\":\"complete\"}}\n"
        ));
    }
    std::fs::write(dir.join("session.jsonl"), out).unwrap();
    dir
}

/// Three sessions on three days: 03 (newest), 02, 01.
fn three_sessions(root: &Path) {
    write_session(
        root,
        "01",
        "2026-01-01T10:00:00.000Z",
        &["Oldest note", "about apples"],
        None,
    );
    write_session(
        root,
        "02",
        "2026-01-02T10:00:00.000Z",
        &["Middle note", "about pears"],
        None,
    );
    write_session(
        root,
        "03",
        "2026-01-03T10:00:00.000Z",
        &["Newest note", "about plums"],
        None,
    );
}

#[test]
fn issue14_04_the_search_field_has_focus_when_the_page_opens_and_on_command_f() {
    let mut app = app(three_sessions);
    app.harness.step();
    app.click("Search");
    app.wait_label("Newest note");
    assert!(app.query_focused(), "focused when the page opens");
    // Typing goes straight into the field.
    app.harness.event(Event::Text("plums".into()));
    app.wait_until("the query to run", |h| {
        h.query_all_by_label_contains("Oldest note")
            .next()
            .is_none()
    });
    assert!(app.has_label("Newest note"));

    // From another page, ⌘F / Ctrl+F comes back to Search with the field focused.
    app.click("Settings");
    assert_eq!(app.harness.state().page(), Page::Settings);
    app.command(Key::F);
    assert_eq!(app.harness.state().page(), Page::Search);
    assert!(app.query_focused(), "focused after ⌘F");
    app.shutdown();
}

#[test]
fn issue14_04_arrows_move_a_selection_and_enter_opens_it() {
    let mut app = app(three_sessions);
    app.harness.step();
    app.click("Search");
    app.wait_label("Oldest note");
    // Newest first: ↓ selects the first row, ↓↓ the third (it stops at the last), ↑ the
    // second.
    app.key(Key::ArrowDown);
    app.key(Key::ArrowDown);
    app.key(Key::ArrowDown);
    app.key(Key::ArrowDown);
    app.key(Key::ArrowUp);
    assert!(app.query_focused(), "the arrows do not move the focus away");
    app.key(Key::Enter);
    app.wait_label("Read-only: the session as it was");
    assert!(app.has_label("Middle note"));
    assert!(app.has_label("about pears"));
    assert!(!app.has_label("Newest note"));
    // Esc goes back to the results, the field focused again.
    app.key(Key::Escape);
    app.wait_label("Oldest note");
    assert!(!app.has_label("Read-only: the session as it was"));
    assert!(app.query_focused());
    app.shutdown();
}

/// The selected row was shown by a highlight only: a screen reader (and AccessKit) saw no
/// selection. Each row is a list item, and the selected one says so.
#[test]
fn issue14_04_the_selected_row_is_announced_as_selected() {
    let mut app = app(three_sessions);
    app.harness.step();
    app.click("Search");
    app.wait_label("Oldest note");
    let selected = |app: &UiApp| -> Vec<String> {
        app.harness
            .query_all_by_role(Role::ListItem)
            .filter(|n| n.accesskit_node().is_selected() == Some(true))
            .map(|n| {
                ["Oldest note", "Middle note", "Newest note"]
                    .into_iter()
                    .filter(|l| n.query_by_label(l).is_some())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    assert_eq!(app.harness.query_all_by_role(Role::ListItem).count(), 3);
    assert!(selected(&app).is_empty(), "nothing selected yet");
    app.key(Key::ArrowDown);
    app.key(Key::ArrowDown);
    assert_eq!(selected(&app), vec!["Middle note".to_owned()]);
    app.shutdown();
}

#[test]
fn issue14_04_command_c_copies_the_selected_row_unless_the_field_has_a_selection() {
    let mut app = app(three_sessions);
    app.harness.step();
    app.click("Search");
    app.wait_label("Oldest note");
    // Nothing selected: nothing copied.
    app.copy_shortcut();
    app.harness.step();
    assert!(app.copies().is_empty());
    app.key(Key::ArrowDown);
    app.key(Key::ArrowDown);
    app.copy_shortcut();
    app.wait_copies(1);
    assert_eq!(app.copies(), vec!["Middle note about pears".to_owned()]);
    // The key with the command modifier (integrations without `Event::Copy`) does the same.
    app.key(Key::ArrowUp);
    app.command(Key::C);
    app.wait_copies(2);
    assert_eq!(app.copies()[1], "Newest note about plums");
    assert!(
        !app.has_label("Read-only: the session as it was"),
        "copied without opening"
    );

    // Text selected in the field: ⌘C is the field's own copy, not the row's.
    app.harness.event(Event::Text("note".into()));
    app.wait_until("the query to run", |h| {
        h.query_all_by_label_contains("Searching…").next().is_none()
            && h.query_all_by_label_contains("Oldest note")
                .next()
                .is_some()
    });
    app.key(Key::ArrowDown);
    app.command(Key::A);
    app.copy_shortcut();
    // Give a wrongly sent copy time to come back from the backend.
    for _ in 0..20 {
        app.harness.step();
        std::thread::sleep(Duration::from_millis(15));
    }
    assert_eq!(app.copies().len(), 2, "{:?}", app.copies());
    // The selection collapsed (End): ⌘C copies the row again.
    app.key(Key::End);
    app.copy_shortcut();
    app.wait_copies(3);
    assert_eq!(app.copies()[2], "Newest note about plums");
    app.shutdown();
}

#[test]
fn issue14_04_escape_clears_the_query() {
    let mut app = app(three_sessions);
    app.harness.step();
    app.click("Search");
    app.wait_label("Oldest note");
    app.harness.event(Event::Text("apples".into()));
    app.wait_until("one hit", |h| {
        h.query_all_by_label_contains("Newest note")
            .next()
            .is_none()
    });
    app.key(Key::Escape);
    assert_eq!(
        app.harness
            .get_by_label("Search history")
            .value()
            .as_deref(),
        Some("")
    );
    app.wait_label("Newest note");
    assert!(app.has_label("Oldest note"));
    assert!(app.query_focused(), "the field keeps the focus");
    app.shutdown();
}

/// `t` as the session files write it.
fn stamp(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap()
}

#[test]
fn issue14_04_rows_are_grouped_by_day_with_time_duration_and_a_copy_button() {
    let now = OffsetDateTime::now_utc();
    let mut app = app(|root| {
        write_session(root, "01", "2025-03-04T10:00:00.000Z", &["Long ago"], None);
        write_session(
            root,
            "02",
            &stamp(now - TimeDuration::days(1)),
            &["From yesterday"],
            None,
        );
        write_session(
            root,
            "03",
            &stamp(now - TimeDuration::seconds(30)),
            &["From today", "second part"],
            Some(65_400),
        );
        write_session(root, "04", &stamp(now), &["Also today"], None);
    });
    app.harness.step();
    app.click("Search");
    app.wait_label("Long ago");
    // One header per day, newest first, each above its rows.
    assert_eq!(app.harness.query_all_by_label("Today").count(), 1);
    assert_eq!(app.harness.query_all_by_label("Yesterday").count(), 1);
    assert!(app.y_of("Today") < app.y_of("Also today"));
    assert!(app.y_of("From today") < app.y_of("Yesterday"));
    assert!(app.y_of("Yesterday") < app.y_of("From yesterday"));
    // An older day is its date (the year shown: it is not this year's).
    let old = app
        .harness
        .get_by_label_contains("4 March 2025")
        .rect()
        .min
        .y;
    assert!(app.y_of("From yesterday") < old && old < app.y_of("Long ago"));
    // Time (local, HH:MM) and the recording's length.
    assert!(app.has_label("1:05"), "the duration of 65.4 s");
    let times = app
        .harness
        .query_all_by(|n| {
            // A label's text is its accessible value.
            n.role() == Role::Label
                && n.label().or_else(|| n.value()).is_some_and(|l| {
                    let b = l.as_bytes();
                    b.len() == 5 && b[2] == b':' && b[..2].iter().all(u8::is_ascii_digit)
                })
        })
        .count();
    assert_eq!(times, 4, "each row shows its time");

    // Copy on a row copies its surviving text without opening it (rows: 04, 03, 02, 01).
    app.harness
        .query_all_by_role_and_label(Role::Button, "Copy")
        .nth(1)
        .expect("a Copy button per row")
        .click();
    let copies = app.effects.copies.clone();
    app.wait_until("the copy", move |_| !copies.lock().unwrap().is_empty());
    assert_eq!(app.copies(), vec!["From today second part".to_owned()]);
    assert!(!app.has_label("Read-only: the session as it was"));
    assert_eq!(
        app.harness
            .query_all_by_role_and_label(Role::Button, "Copy")
            .count(),
        4
    );
    let _ = &app.root;
    app.shutdown();
}

#[test]
fn issue14_04_the_selected_row_is_scrolled_into_view() {
    let f = fixture(None, Some("sk-test-app"), 5.0, |s| {
        let root = s.sessions.directory.as_deref().unwrap();
        for i in 10..40 {
            write_session(
                root,
                &format!("{i}"),
                &format!("2026-01-01T10:{i:02}:00.000Z"),
                &[&format!("Row number {i}")],
                None,
            );
        }
    });
    let height = 400.0;
    let mut app = UiApp::new(f, 640.0, height);
    app.harness.step();
    app.click("Search");
    app.wait_label("Row number 39");
    // Newest first: the 25th row is "Row number 15", far below the window.
    let target = "Row number 15";
    // Out of view: below the window, or not laid out at all (the list is virtual).
    assert!(
        !app.has_label(target) || app.y_of(target) > height,
        "starts out of view"
    );
    for _ in 0..25 {
        app.key(Key::ArrowDown);
    }
    let y = app.y_of(target);
    assert!((0.0..height).contains(&y), "scrolled into view (y = {y})");
    app.key(Key::Enter);
    app.wait_label("Read-only: the session as it was");
    assert!(app.has_label(target));
    app.shutdown();
}
