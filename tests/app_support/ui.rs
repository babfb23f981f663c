//! The window's UI headless, as the app's page tests drive it: a [`Fixture`]'s `PersykUi` in
//! an egui_kittest harness, stepped until what the test waits for holds; widgets found by role
//! and label, as a screen reader would. Test files add their own methods in `impl UiApp`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eframe::egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use persyk::app::ui::PersykUi;
use persyk::realtime::fake::FakeServer;

use super::{Fixture, MemKeys, Recorded};

/// A guard against hangs only (never a performance threshold): [`UiApp::wait`]'s default.
pub const WAIT: Duration = Duration::from_secs(30);

/// A [`Fixture`] with its UI in a harness.
pub struct UiApp {
    pub harness: Harness<'static, PersykUi>,
    pub effects: Recorded,
    pub keys: Arc<MemKeys>,
    pub root: PathBuf,
    pub config: PathBuf,
    pub dir: tempfile::TempDir,
    pub fake: Option<(tokio::runtime::Runtime, FakeServer)>,
    /// How long [`UiApp::wait_until`] waits before it fails.
    pub wait: Duration,
}

impl UiApp {
    /// `f`'s UI in a window `width` × `height` points.
    pub fn new(f: Fixture, width: f32, height: f32) -> UiApp {
        let harness = Harness::builder()
            .with_size(eframe::egui::vec2(width, height))
            .build_ui_state(|ui, state: &mut PersykUi| state.ui(ui), f.ui);
        let mut app = UiApp {
            harness,
            effects: f.effects,
            keys: f.keys,
            root: f.root,
            config: f.config,
            dir: f.dir,
            fake: f.fake,
            wait: WAIT,
        };
        // The welcome card appears (or not) once the history answered; wait for that so no
        // click lands on a page that moves under it.
        app.wait_until("the history's first answer", |h| h.state().history_known());
        app
    }

    /// Steps the UI (other threads are working) until `done` holds.
    pub fn wait_until(&mut self, what: &str, done: impl Fn(&Harness<'static, PersykUi>) -> bool) {
        let start = Instant::now();
        loop {
            self.harness.step();
            if done(&self.harness) {
                return;
            }
            if start.elapsed() >= self.wait {
                panic!(
                    "timed out waiting for {what}; the window shows: {:#?}",
                    shown(&self.harness)
                );
            }
            std::thread::sleep(Duration::from_millis(15));
        }
    }

    /// Steps the UI until a widget's label contains `text`.
    pub fn wait_label(&mut self, text: &str) {
        let t = text.to_owned();
        self.wait_until(text, move |h| {
            h.query_all_by_label_contains(&t).next().is_some()
        });
    }

    pub fn has_label(&self, text: &str) -> bool {
        self.harness
            .query_all_by_label_contains(text)
            .next()
            .is_some()
    }

    /// Clicks the button `label` and lets two frames pass.
    pub fn click(&mut self, label: &str) {
        self.harness
            .get_by_role_and_label(Role::Button, label)
            .click();
        self.harness.step();
        self.harness.step();
    }

    /// Clicks the `n`th (from 0) widget of `role` named `label` and lets two frames pass.
    pub fn click_nth(&mut self, role: Role, label: &str, n: usize) {
        self.harness
            .query_all_by_role_and_label(role, label)
            .nth(n)
            .unwrap_or_else(|| panic!("{label} #{n}"))
            .click();
        self.harness.step();
        self.harness.step();
    }

    /// How many buttons named `label` the window shows.
    pub fn buttons(&self, label: &str) -> usize {
        self.harness
            .query_all_by_role_and_label(Role::Button, label)
            .count()
    }

    /// What the effects copied to the clipboard so far.
    pub fn copies(&self) -> Vec<String> {
        self.effects.copies.lock().unwrap().clone()
    }

    pub fn shutdown(mut self) {
        assert!(self.harness.state_mut().shutdown(Duration::from_secs(30)));
    }
}

/// Every label the window shows now, as a screen reader reads them (what a timed-out wait
/// prints, so a CI log says what was there instead).
pub fn shown(h: &Harness<'static, PersykUi>) -> Vec<String> {
    h.query_all_by_label_contains("")
        .filter_map(|n| {
            // A text label's words are its value (AccessKit's Role::Label).
            let node = n.accesskit_node();
            node.label().or_else(|| node.value())
        })
        .filter(|l| !l.is_empty())
        .collect()
}
