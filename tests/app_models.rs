//! The Settings page's on-device models and the first-run page, headless (egui_kittest), over
//! the real backend and the loopback model server of tests/model_server: choosing On this
//! device, a download with progress then "Downloaded", cancel, delete, a model file that is
//! not a model, and the first run offering both a key and an offline download.
#![cfg(feature = "app")]

mod app_support;
mod model_server;

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use app_support::fixture;
use app_support::ui::UiApp;
use eframe::egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use model_server::{MODEL_LEN, Serve, Server, model_byte, serve, sha256_of};
use persyk::app::ui::Page;
use persyk::local::models::{CatalogModel, ModelStore};
use persyk::settings::{RecognitionEngine, Settings};

/// A catalog of one small model under the default model's name, and one other.
fn test_catalog() -> &'static [CatalogModel] {
    let sha256 = sha256_of(MODEL_LEN, model_byte);
    Box::leak(
        vec![
            CatalogModel {
                name: "base.en",
                bytes: MODEL_LEN as u64,
                sha256,
                description: "a small test model",
            },
            CatalogModel {
                name: "other.en",
                bytes: MODEL_LEN as u64,
                sha256,
                description: "another",
            },
        ]
        .into_boxed_slice(),
    )
}

/// The UI with a model store over the loopback server (see [`app`]).
struct App {
    ui: UiApp,
    models: PathBuf,
    _server: Server,
}

impl Deref for App {
    type Target = UiApp;
    fn deref(&self) -> &UiApp {
        &self.ui
    }
}

impl DerefMut for App {
    fn deref_mut(&mut self) -> &mut UiApp {
        &mut self.ui
    }
}

fn app(key: Option<&str>, script: Vec<Serve>) -> App {
    let server = serve(MODEL_LEN, model_byte, script);
    let mut f = fixture(None, key, 1.0, |_| {});
    let models = f.dir.path().join("models");
    f.ui.set_model_store(
        ModelStore::new(models.clone())
            .with_catalog(test_catalog())
            .with_base_url(&server.url())
            .unwrap(),
    );
    App {
        ui: UiApp::new(f, 700.0, 1400.0),
        models,
        _server: server,
    }
}

impl App {
    fn wait_button(&mut self, label: &str) {
        let l = label.to_owned();
        self.wait_until(label, move |h| {
            h.query_all_by_role_and_label(Role::Button, &l)
                .next()
                .is_some()
        });
    }

    fn click_nth(&mut self, role: Role, label: &str, n: usize) {
        self.harness
            .query_all_by_role_and_label(role, label)
            .nth(n)
            .unwrap_or_else(|| panic!("{label} #{n}"))
            .click();
        self.harness.step();
        self.harness.step();
    }

    fn click(&mut self, label: &str) {
        self.click_nth(Role::Button, label, 0);
    }

    fn choose_on_this_device(&mut self) {
        self.harness.state_mut().show_page(Page::Settings);
        self.harness.step();
        self.click_nth(Role::RadioButton, "On this device (Whisper)", 0);
    }

    fn model_file(&self, name: &str) -> PathBuf {
        self.models.join(format!("ggml-{name}.bin"))
    }

    fn shutdown(self) {
        self.ui.shutdown();
    }
}

fn served_bytes_match(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap();
    bytes.len() == MODEL_LEN && bytes.iter().enumerate().all(|(i, b)| *b == model_byte(i))
}

#[test]
fn on_this_device_downloads_with_progress_then_shows_downloaded() {
    let mut app = app(Some("sk-test"), vec![Serve::Trickle]);
    app.choose_on_this_device();
    // The catalog with its states arrives from the backend: nothing downloaded yet.
    app.wait_button("Download");
    assert_eq!(
        app.harness
            .query_all_by_role_and_label(Role::Button, "Download")
            .count(),
        2
    );
    assert!(app.has_label("Not downloaded"));
    app.click_nth(Role::Button, "Download", 0);
    // Progress: a bar and a label that counts, and a Cancel control meanwhile.
    app.wait_label("Downloading ");
    assert!(
        app.harness
            .query_all_by_role(Role::ProgressIndicator)
            .next()
            .is_some()
    );
    assert_eq!(
        app.harness
            .query_all_by_role_and_label(Role::Button, "Cancel")
            .count(),
        1
    );
    app.wait_label("Downloaded and verified");
    assert!(app.has_label("Downloaded"));
    assert!(served_bytes_match(&app.model_file("base.en")));
    assert!(!app.has_label("Downloading "));
    // Saving keeps the choice: on this device, the default model.
    app.click("Save settings");
    app.wait_label("Settings saved");
    let saved = Settings::load(&app.config).unwrap();
    assert_eq!(saved.recognition.engine, RecognitionEngine::Local);
    assert_eq!(saved.recognition.local_model, None);
    // Delete removes the file and offers the download again.
    app.click("Delete");
    app.wait_label("Deleted");
    app.wait_until("two Download buttons again", |h| {
        h.query_all_by_role_and_label(Role::Button, "Download")
            .count()
            == 2
    });
    assert!(!app.model_file("base.en").exists());
    app.shutdown();
}

#[test]
fn cancel_stops_the_download_and_keeps_the_part() {
    let mut app = app(Some("sk-test"), vec![Serve::Trickle]);
    app.choose_on_this_device();
    app.wait_button("Download");
    // The second model.
    app.click_nth(Role::Button, "Download", 1);
    app.wait_label("Downloading ");
    app.click("Cancel");
    app.wait_label("Stopped; Download resumes it");
    app.wait_label("Partly downloaded");
    assert!(!app.model_file("other.en").exists());
    assert!(app.models.join("ggml-other.en.bin.part").exists());
    app.shutdown();
}

#[test]
fn a_model_file_that_is_not_a_model_is_not_saved() {
    let mut app = app(Some("sk-test"), vec![Serve::Full]);
    app.choose_on_this_device();
    app.click_nth(Role::RadioButton, "Use a model file…", 0);
    let file = app.models.parent().unwrap().join("page.bin");
    std::fs::write(&file, b"<html>not a model</html>").unwrap();
    app.harness.get_by_label("Model file").focus();
    app.harness.step();
    app.harness
        .get_by_label("Model file")
        .type_text(&file.display().to_string());
    app.harness.step();
    app.click("Save settings");
    app.wait_label("Not saved: local.model-invalid");
    assert!(!app.config.exists(), "nothing saved");
    app.shutdown();
}

#[test]
fn first_run_offers_a_key_or_an_offline_download() {
    let mut app = app(None, vec![Serve::Full]);
    // No key: the window opens on Settings with both ways to start.
    assert_eq!(app.harness.state().page(), Page::Settings);
    app.harness.step();
    assert!(app.has_label("Persyk needs an OpenAI API key"));
    assert!(app.harness.query_by_label("API key").is_some());
    assert!(app.has_label("Offline: download the Whisper model base.en"));
    app.click("Download base.en and dictate offline");
    // The choice is saved at once and the model downloads.
    app.wait_label("Downloaded and verified");
    assert!(served_bytes_match(&app.model_file("base.en")));
    let saved = Settings::load(&app.config).unwrap();
    assert_eq!(saved.recognition.engine, RecognitionEngine::Local);
    // The first-run explanation has made way for the Recognition section.
    assert!(!app.has_label("Persyk needs an OpenAI API key"));
    assert!(
        app.harness
            .query_all_by_role_and_label(Role::RadioButton, "On this device (Whisper)")
            .next()
            .is_some()
    );
    // The dictation page no longer asks for a key.
    app.harness.state_mut().show_page(Page::Dictation);
    app.harness.step();
    assert!(!app.has_label("Add your OpenAI API key"));
    app.shutdown();
}
