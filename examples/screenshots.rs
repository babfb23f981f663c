//! The Persyk window showing one page with sample content, for `scripts/screenshots`, which
//! captures it under Xvfb into `docs/screenshots/`. Not part of the app: it runs the app's
//! real shell, style and backend (search reads real session files written to a temporary
//! folder), with a key store, microphone and clipboard that do nothing.
//!
//! ```text
//! cargo run --example screenshots -- PAGE THEME
//!   PAGE:  dictation | transcript | search | settings | welcome | problem
//!          (welcome: the first run, no key and no history; problem: a start refused with
//!          its fix beside the sentence)
//!   THEME: light | dark
//! ```

// The benches' stand-ins: no microphone, a key store with a fixed key, no clipboard.
#[path = "../benches/support/app.rs"]
mod stand_ins;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use eframe::egui;
use persyk::app::event::TrayState;
use persyk::app::model::{AudioOrigin, Live, Update};
use persyk::app::shell::{Shell, ShellOptions, TrayPort};
use persyk::app::ui::Page;
use persyk::recognize::Speaker;
use persyk::recognize::{EngineState, EngineView, PublishedMessage};
use persyk::settings::Settings;

/// A menu-bar icon that is not shown (the screenshot is of the window).
struct NoTray;
impl TrayPort for NoTray {
    fn sync(&mut self, _: TrayState, _: bool, _: bool) {}
}

/// What a user dictates: the transcript of the "transcript" page and the saved sessions.
const SAID: &[&str] = &[
    "Quick note before the design review: the onboarding flow still asks for the API key twice.",
    "Let's move the microphone picker into its own section and keep the defaults as they are.",
    "Action items: Maria checks the contrast of the dark theme, I update the screenshots.",
    "Also remember to book the meeting room for Thursday at ten.",
    "The release notes should mention that transcripts stay on disk as plain files.",
];

const SESSIONS: &[(&str, &str, &[&str])] = &[
    (
        "2026-11-30T16:42:10.000Z",
        "a1",
        &["Draft reply to Jonas: yes, the Thursday meeting works, send me the agenda."],
    ),
    (
        "2026-11-30T11:05:44.000Z",
        "a2",
        &[
            "Grocery list: oat milk, coffee beans, two lemons, basil.",
            "And batteries for the keyboard.",
        ],
    ),
    (
        "2026-11-29T18:20:02.000Z",
        "a3",
        &["Idea for the blog post: why local files beat a database for personal notes."],
    ),
    (
        "2026-11-28T09:12:31.000Z",
        "a4",
        &["Standup: finished the search page, today the settings sections, no blockers."],
    ),
    (
        "2026-11-27T15:47:55.000Z",
        "a5",
        &["Call the dentist to move the appointment to next week."],
    ),
];

/// A saved session: a header and one user message per text.
fn write_session(root: &Path, name: &str, created: &str, texts: &[&str]) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("session folder");
    let id = format!("00000000-0000-4000-8000-0000000000{name}");
    let mut out = format!(
        "{{\"type\":\"session\",\"version\":1,\"id\":\"{id}\",\"timestamp\":\"{created}\"}}\n"
    );
    let mut parent = "null".to_owned();
    for (i, t) in texts.iter().enumerate() {
        let mid = format!("{id}-m{i}");
        out.push_str(&format!(
            "{{\"type\":\"message\",\"id\":\"{mid}\",\"parentId\":{parent},\"timestamp\":\"{created}\",\
             \"message\":{{\"role\":\"user\",\"timestamp\":1,\"content\":[{{\"type\":\"text\",\"text\":\"{t}\"}}]}}}}\n"
        ));
        parent = format!("\"{mid}\"");
    }
    std::fs::write(dir.join("session.jsonl"), out).expect("session file");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (page, theme) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [page, theme @ ("light" | "dark")]
            if [
                "dictation",
                "transcript",
                "search",
                "settings",
                "welcome",
                "problem",
            ]
            .contains(&page) =>
        {
            (
                page.to_owned(),
                if theme == "dark" {
                    egui::Theme::Dark
                } else {
                    egui::Theme::Light
                },
            )
        }
        _ => {
            eprintln!(
                "usage: screenshots dictation|transcript|search|settings|welcome|problem light|dark"
            );
            std::process::exit(2);
        }
    };

    let dir: PathBuf =
        std::env::temp_dir().join(format!("persyk-screenshots-{}", std::process::id()));
    let root = dir.join("Persyk");
    std::fs::create_dir_all(&root).expect("sessions folder");
    // The first run has no history (the welcome stays until a dictation has worked).
    if page != "welcome" {
        for (created, name, texts) in SESSIONS {
            write_session(&root, name, created, texts);
        }
    }
    let mut settings = Settings::default();
    settings.sessions.directory = Some(root.clone());
    let mut ui = stand_ins::ui_with_key(settings, page != "welcome");

    // Kept alive while the window runs: the live transcript's source.
    let mut live_source = None;
    match page.as_str() {
        "transcript" => {
            let view = EngineView {
                state: EngineState::Streaming,
                provisional: vec![("item_live".into(), "and one more thing about the".into())],
                messages: SAID
                    .iter()
                    .enumerate()
                    .map(|(i, t)| PublishedMessage {
                        entry_id: format!("entry-{i}"),
                        item_id: format!("item_{i}"),
                        speaker: Speaker::User,
                        text: (*t).to_owned(),
                        removed: false,
                    })
                    .collect(),
                gaps: 0,
                gap_at: Vec::new(),
                heard_ms: 0,
            };
            let (tx, rx) = tokio::sync::watch::channel(view);
            live_source = Some(tx);
            ui.apply(Update::Started {
                session: root.join("2026-12-01T09-30-00Z"),
                origin: AudioOrigin::Microphone,
                live: Live {
                    view: rx,
                    level: Arc::new(AtomicU32::new(0.12f32.to_bits())),
                },
                cleanup: None,
                app: None,
            });
        }
        "search" => ui.show_page(Page::Search),
        "problem" => ui.apply(Update::StartFailed {
            code: "capture.silent-input".into(),
        }),
        "settings" => ui.show_page(Page::Settings),
        _ => {}
    }

    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("Persyk")
            .with_app_id("persyk")
            .with_inner_size([520.0, 600.0]),
        ..Default::default()
    };
    let result = eframe::run_native(
        "Persyk",
        options,
        Box::new(move |cc| {
            let shell = Shell::with_tray(
                &cc.egui_ctx,
                ui,
                ShellOptions {
                    no_hotkey: true,
                    ..ShellOptions::default()
                },
                |_post| Ok(Box::new(NoTray) as Box<dyn TrayPort>),
            );
            // The system's appearance is what the app follows; here it is chosen.
            cc.egui_ctx.set_theme(theme);
            Ok(Box::new(shell))
        }),
    );
    drop(live_source);
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = result {
        eprintln!("screenshots: the window could not be opened ({e})");
        std::process::exit(1);
    }
}
