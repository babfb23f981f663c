//! Getting a new user to a working dictation: the welcome card, what keeps Start from
//! working (and the button that fixes it), model downloads with their progress and failures,
//! and every rejection said as a sentence with its fix beside it.
//!
//! Invariants:
//! - Recognition switches to the device only once the model is installed and verified
//!   (`ModelsView::switch_when_installed`); a failed download changes no setting.
//! - The welcome card stays until one dictation has worked: the history holds a session with
//!   words in it, or a recording of this run finished with some (read from the files, so it
//!   holds across launches with nothing extra stored).
//! - While no recognizer is usable ([`PersykUi::blocker`]) the Dictation page says why in one
//!   sentence with the fixing button, and Start is disabled with that sentence as its reason.
//! - The main flow shows sentences; stable codes appear only in a details line (and the log).

use eframe::egui::{self, RichText};

use super::style::{self, space};
use super::widgets::fmt_mib;
use super::*;

impl PersykUi {
    /// Why no recognizer can run now (`None`: Start can be pressed). Unknown facts (the
    /// models folder not listed yet) never block: the backend has the last word.
    pub(super) fn blocker(&self) -> Option<Blocker> {
        match self.settings.recognition.engine {
            RecognitionEngine::Openai => (!self.form.key_stored).then_some(Blocker::NoKey),
            RecognitionEngine::Local => {
                let name = self.local_model_name()?;
                if self.models.progress.contains_key(name) {
                    return Some(Blocker::ModelDownloading);
                }
                let state = self
                    .models
                    .rows
                    .as_ref()?
                    .iter()
                    .find(|r| r.model.name == name)?
                    .state;
                (state != ModelState::Installed).then_some(Blocker::ModelMissing)
            }
        }
    }

    /// The catalog model the saved settings choose (`None`: a model file, checked when it
    /// was saved).
    fn local_model_name(&self) -> Option<&str> {
        match self
            .settings
            .recognition
            .local_model
            .as_deref()
            .map(str::trim)
        {
            Some(m) if m.contains('/') => None,
            Some(m) if !m.is_empty() => Some(m),
            _ => Some(DEFAULT_LOCAL_MODEL),
        }
    }

    /// Whether the models folder holds `name`, verified (as last listed).
    fn is_installed(&self, name: &str) -> bool {
        self.models.rows.as_ref().is_some_and(|rows| {
            rows.iter()
                .any(|r| r.model.name == name && r.state == ModelState::Installed)
        })
    }

    /// The sentence that says why Start cannot be pressed.
    pub(super) fn blocker_sentence(&self, blocker: Blocker) -> String {
        let model = self.local_model_name().unwrap_or(DEFAULT_LOCAL_MODEL);
        match blocker {
            Blocker::NoKey if self.is_installed(DEFAULT_LOCAL_MODEL) => format!(
                "To dictate, add an OpenAI API key (online), or use the downloaded \
                 {DEFAULT_LOCAL_MODEL} model on this Mac without a network."
            ),
            Blocker::NoKey => format!(
                "To dictate, add an OpenAI API key (online), or download the {DEFAULT_LOCAL_MODEL} \
                 model{} once and dictate on this Mac without a network.",
                self.model_size(DEFAULT_LOCAL_MODEL)
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default()
            ),
            Blocker::ModelMissing => format!(
                "The on-device model {model} is not downloaded yet: download it to dictate."
            ),
            Blocker::ModelDownloading => {
                format!(
                    "The model {model} is downloading: dictation can start once it is installed."
                )
            }
        }
    }

    fn model_size(&self, name: &str) -> Option<String> {
        self.models
            .store
            .as_ref()
            .and_then(|s| s.find(name))
            .map(|m| fmt_mib(m.bytes))
    }

    /// "Download base.en (141 MiB)".
    pub(super) fn download_label(&self, name: &str) -> String {
        match self.model_size(name) {
            Some(size) => format!("Download {name} ({size})"),
            None => format!("Download {name}"),
        }
    }

    /// The label of a fix's button.
    fn fix_label(&self, fix: Fix) -> String {
        match fix {
            Fix::AddKey => "Add an OpenAI key".to_owned(),
            Fix::CheckKey => "Check API key".to_owned(),
            Fix::DownloadModel => self.download_label(DEFAULT_LOCAL_MODEL),
            Fix::ChooseModel => "Choose a model".to_owned(),
            Fix::ChooseMicrophone => "Choose microphone".to_owned(),
            Fix::MicrophonePrivacy => "Open Microphone Privacy Settings".to_owned(),
            Fix::OpenSettings => "Open Settings".to_owned(),
        }
    }

    /// Does what a fix's button says.
    pub(super) fn fix(&mut self, fix: Fix) {
        match fix {
            Fix::AddKey | Fix::CheckKey => {
                self.show_page(Page::Settings);
                self.form.local = false;
                self.focus_key = true;
            }
            Fix::DownloadModel => self.act(Action::GetDefaultModel),
            Fix::ChooseModel => {
                self.show_page(Page::Settings);
                self.form.local = true;
                self.scroll_to = Some(SettingsSection::Recognition);
            }
            Fix::ChooseMicrophone => {
                self.show_page(Page::Settings);
                self.scroll_to = Some(SettingsSection::Microphone);
            }
            Fix::MicrophonePrivacy => self.act(Action::OpenMicrophoneSettings),
            Fix::OpenSettings => self.show_page(Page::Settings),
        }
    }

    /// A rejection: its sentence (in `color`) with the fixing button beside it, and the code
    /// in a details line under it.
    pub(super) fn problem_ui(
        &self,
        ui: &mut egui::Ui,
        code: &str,
        color: egui::Color32,
        actions: &mut Vec<Action>,
    ) {
        let Problem { sentence, fix } = problem(code);
        ui.colored_label(color, sentence);
        if let Some(fix) = fix
            && ui.button(self.fix_label(fix)).clicked()
        {
            actions.push(Action::Fix(fix));
        }
        details_ui(ui, code);
    }

    /// The top of the Dictation page while no recognizer is usable: why, and the buttons
    /// that fix it.
    pub(super) fn blocker_ui(&mut self, ui: &mut egui::Ui, blocker: Blocker) {
        let mut actions = Vec::new();
        let model = self
            .local_model_name()
            .unwrap_or(DEFAULT_LOCAL_MODEL)
            .to_owned();
        style::card(ui).show(ui, |ui| {
            ui.set_width(ui.available_width());
            ui.label(RichText::new(self.blocker_sentence(blocker)).strong());
            match blocker {
                Blocker::NoKey => {
                    ui.horizontal_wrapped(|ui| {
                        if ui.button(self.fix_label(Fix::AddKey)).clicked() {
                            actions.push(Action::Fix(Fix::AddKey));
                        }
                        self.download_button_ui(ui, DEFAULT_LOCAL_MODEL, &mut actions);
                    });
                    download_state_ui(ui, &self.models, DEFAULT_LOCAL_MODEL, &mut actions);
                }
                Blocker::ModelMissing | Blocker::ModelDownloading => {
                    self.download_button_ui(ui, &model, &mut actions);
                    download_state_ui(ui, &self.models, &model, &mut actions);
                }
            }
        });
        ui.add_space(space::S);
        self.pending.extend(actions);
    }

    /// "Download base.en (141 MiB)", unless it is downloading already.
    /// An installed default model that is not in use yet is offered as "Use base.en on this
    /// Mac" (the same action: an installed model "downloads" at once, then switches).
    fn download_button_ui(&self, ui: &mut egui::Ui, name: &str, actions: &mut Vec<Action>) {
        if self.models.progress.contains_key(name) || self.models.store.is_none() {
            return;
        }
        let label = if self.is_installed(name) {
            format!("Use {name} on this Mac")
        } else {
            self.download_label(name)
        };
        if ui.button(label).clicked() {
            actions.push(if name == DEFAULT_LOCAL_MODEL {
                Action::GetDefaultModel
            } else {
                Action::DownloadModel(name.to_owned())
            });
        }
    }

    /// The welcome card at the top of Settings until one dictation has worked: the online
    /// way (a key field, checked at once) and the offline way (download the default model),
    /// each with its own button, then "Ready" once either works.
    pub(super) fn welcome_ui(&mut self, ui: &mut egui::Ui) {
        let mut actions = Vec::new();
        let ready = self.blocker().is_none();
        ui.add_space(space::S);
        style::card(ui).show(ui, |ui| {
            ui.set_width(ui.available_width());
            ui.label(style::heading("Welcome to Persyk"));
            if ready {
                let keys = self
                    .settings
                    .hotkey
                    .keys
                    .as_deref()
                    .unwrap_or(crate::settings::DEFAULT_HOTKEY)
                    .trim()
                    .to_owned();
                ui.label(RichText::new("Ready to dictate.").strong());
                ui.label(if keys.is_empty() {
                    "Press Start on the Dictation page or click the menu-bar icon, then talk."
                        .to_owned()
                } else {
                    format!(
                        "Press Start on the Dictation page, click the menu-bar icon or press \
                         {keys}, then talk."
                    )
                });
                if ui.button("Go to Dictation").clicked() {
                    actions.push(Action::GoToDictation);
                }
            } else {
                ui.label("Choose how Persyk turns your speech into text:");
            }
            ui.add_space(space::S);
            ui.label(RichText::new("Online, with OpenAI").strong());
            ui.label(style::caption(
                "Paste your API key. Persyk checks it with OpenAI at once and keeps it in the \
                 system's key store, never in a file or a session.",
            ));
            let checking = self.key_check == Some(KeyCheck::Checking);
            let mut submit = false;
            ui.horizontal(|ui| {
                let label = ui.label("OpenAI API key");
                let button_width = 110.0;
                let edit = ui.add_sized(
                    [
                        (ui.available_width() - button_width).max(80.0),
                        ui.spacing().interact_size.y,
                    ],
                    egui::TextEdit::singleline(&mut self.welcome_key)
                        .password(true)
                        .hint_text("sk-…"),
                );
                let edit = edit.labelled_by(label.id);
                if std::mem::take(&mut self.focus_key) {
                    edit.request_focus();
                    edit.scroll_to_me(Some(egui::Align::Center));
                }
                submit = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                let filled = !self.welcome_key.trim().is_empty();
                if ui
                    .add_enabled(filled && !checking, egui::Button::new("Use this key"))
                    .clicked()
                {
                    submit = true;
                }
            });
            if submit && !checking {
                actions.push(Action::CheckKey);
            }
            key_check_ui(ui, self.key_check.as_ref());
            if self.key_check.is_none() && self.form.key_stored {
                ui.label(style::caption(
                    "A key is stored; paste another to replace it.",
                ));
            }
            ui.add_space(space::S);
            ui.label(RichText::new("On this Mac, with Whisper").strong());
            ui.label(style::caption(format!(
                "Download the model {DEFAULT_LOCAL_MODEL}{} once, then dictate without a key \
                 or a network.",
                self.model_size(DEFAULT_LOCAL_MODEL)
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default()
            )));
            let in_use = self.settings.recognition.engine == RecognitionEngine::Local
                && self.local_model_name() == Some(DEFAULT_LOCAL_MODEL);
            if self.is_installed(DEFAULT_LOCAL_MODEL) && in_use {
                ui.label(format!("{DEFAULT_LOCAL_MODEL} is downloaded."));
            } else if self.models.store.is_none() {
                ui.colored_label(
                    ui.visuals().warn_fg_color,
                    "There is no data folder to keep models in.",
                );
            } else {
                self.download_button_ui(ui, DEFAULT_LOCAL_MODEL, &mut actions);
                // Only the download this card started (Settings › Recognition shows its own).
                if self.models.switch_when_installed.as_deref() == Some(DEFAULT_LOCAL_MODEL) {
                    download_state_ui(ui, &self.models, DEFAULT_LOCAL_MODEL, &mut actions);
                }
            }
        });
        self.pending.extend(actions);
    }
}

/// A running download's progress (bytes, speed, time left, Cancel) or its failure said with
/// what to do next; nothing otherwise.
pub(super) fn download_state_ui(
    ui: &mut egui::Ui,
    models: &ModelsView,
    name: &str,
    actions: &mut Vec<Action>,
) {
    if let Some(p) = models.progress.get(name) {
        ui.horizontal_wrapped(|ui| {
            ui.add(
                egui::ProgressBar::new(p.fraction())
                    .desired_width(160.0)
                    .show_percentage(),
            );
            if ui.button("Cancel").clicked() {
                actions.push(Action::CancelDownload(name.to_owned()));
            }
        });
        ui.label(progress_text(p, models.since.get(name).copied()));
        return;
    }
    if let Some(code) = models.failures.get(name) {
        let failure = model_failure(code);
        ui.colored_label(ui.visuals().error_fg_color, failure.sentence);
        ui.horizontal_wrapped(|ui| {
            if failure.retry && ui.button("Try again").clicked() {
                actions.push(if models.switch_when_installed.as_deref() == Some(name) {
                    Action::GetDefaultModel
                } else {
                    Action::DownloadModel(name.to_owned())
                });
            }
            if failure.other_model && ui.button("Choose another model").clicked() {
                actions.push(Action::Fix(Fix::ChooseModel));
            }
        });
        details_ui(ui, code);
    }
}

/// The details line under a sentence: the stable code, small and weak (also in the log).
/// A "code: message" text (an error's Display) as the window says it: `prefix` and the
/// message as a sentence, then the code in the details line. Text without a leading code is
/// shown as it is.
pub(super) fn coded_sentence_ui(ui: &mut egui::Ui, prefix: &str, text: &str, color: Color32) {
    match split_code(text) {
        Some((code, message)) => {
            ui.colored_label(color, format!("{prefix}{}", as_sentence(message)));
            details_ui(ui, code);
        }
        None => {
            ui.colored_label(color, format!("{prefix}{text}"));
        }
    }
}

/// `("settings.bad-language", "the language must be …")` from `"settings.bad-language: the
/// language must be …"`; `None` when the text does not start with a code.
pub(super) fn split_code(text: &str) -> Option<(&str, &str)> {
    let (code, message) = text.split_once(": ")?;
    let is_code = code.contains('.')
        && code
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    is_code.then_some((code, message))
}

/// The first letter capitalized and a full stop at the end.
fn as_sentence(message: &str) -> String {
    let m = message.trim();
    let mut chars = m.chars();
    let mut s: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    if !s.ends_with(['.', '!', '?', ')']) {
        s.push('.');
    }
    s
}

pub(super) fn details_ui(ui: &mut egui::Ui, code: &str) {
    ui.label(style::caption(format!("Details: {code}")).weak());
}

/// A failed download as the window says it, and which next steps it offers.
pub(super) struct ModelFailure {
    pub sentence: &'static str,
    /// "Try again" (a resumable or transient failure).
    pub retry: bool,
    /// "Choose another model".
    pub other_model: bool,
}

/// What a failed download's code means to a user, and what to do next.
pub(super) fn model_failure(code: &str) -> ModelFailure {
    let (sentence, retry, other_model) = match code {
        "models.offline" => (
            "No network connection: the download server could not be reached. Connect to the \
             internet, then try again.",
            true,
            false,
        ),
        "models.network" | "models.truncated" => (
            "The download was interrupted. Try again: it continues where it stopped.",
            true,
            false,
        ),
        "models.disk-full" | "models.no-space" => (
            "There is not enough free disk space for the model. Free some space and try again, \
             or choose a smaller model.",
            true,
            true,
        ),
        "models.hash-mismatch" | "models.size-mismatch" | "models.invalid-file" => (
            "The downloaded file was not the expected model, so nothing was installed. Try \
             again later, or choose another model.",
            true,
            true,
        ),
        "models.http-status" => (
            "The download server refused the request. Try again later, or choose another \
             model.",
            true,
            true,
        ),
        "models.busy" => ("This model is being downloaded already.", false, false),
        "models.tls" => (
            "Secure connections are not available here, so the model cannot be downloaded.",
            false,
            true,
        ),
        "models.part-not-a-file" => (
            "Something other than a download is in the way in the models folder. Delete the \
             model, then try again.",
            false,
            true,
        ),
        "models.bad-redirect" => (
            "The download server sent the download somewhere Persyk does not go (an \
             unencrypted address off this Mac). Try again later, or choose another model.",
            true,
            true,
        ),
        "models.unsafe-folder" => (
            "The models folder belongs to another user or others may write in it, so Persyk \
             does not trust the models there. Make the folder yours and private, or choose \
             another folder.",
            false,
            false,
        ),
        _ => ("The download failed.", true, true),
    };
    ModelFailure {
        sentence,
        retry,
        other_model,
    }
}

/// "Downloading 12 of 141 MiB · 3.1 MiB/s · about 40 s left" (speed and time once measurable), or the
/// check of an earlier partial download.
pub(super) fn progress_text(p: &Progress, since: Option<(Instant, u64)>) -> String {
    if p.phase == Phase::Checking {
        return "Checking the partial download…".to_owned();
    }
    let mut text = format!(
        "Downloading {} of {}",
        fmt_mib(p.done_bytes).trim_end_matches(" MiB"),
        fmt_mib(p.total_bytes)
    );
    if let Some((start, bytes)) = since {
        let seconds = start.elapsed().as_secs_f64();
        let moved = p.done_bytes.saturating_sub(bytes);
        if seconds >= 0.2 && moved > 0 {
            let per_second = moved as f64 / seconds;
            let left = p.total_bytes.saturating_sub(p.done_bytes) as f64 / per_second;
            text.push_str(&format!(
                " · {:.1} MiB/s · {}",
                per_second / (1024.0 * 1024.0),
                time_left(left)
            ));
        }
    }
    text
}

/// "about 40 s left", "about 3 min left".
fn time_left(seconds: f64) -> String {
    let s = seconds.ceil().max(1.0) as u64;
    if s < 60 {
        format!("about {s} s left")
    } else if s < 3600 {
        format!("about {} min left", s.div_ceil(60))
    } else {
        format!("about {} h {} min left", s / 3600, s % 3600 / 60)
    }
}

/// What the provider said about a key: checking, accepted, refused, or kept unchecked.
pub(super) fn key_check_ui(ui: &mut egui::Ui, check: Option<&KeyCheck>) {
    match check {
        Some(KeyCheck::Checking) => {
            ui.label("Checking the key with OpenAI…");
        }
        Some(KeyCheck::Done { code: None, .. }) => {
            ui.label(RichText::new("Ready: OpenAI accepted the key.").strong());
        }
        Some(KeyCheck::Done {
            code: Some(code),
            stored,
        }) => {
            let sentence = match (code.as_str(), stored) {
                ("provider.unauthorized", _) => {
                    "OpenAI refused this key. Check that you copied all of it."
                }
                (_, true) => {
                    "OpenAI could not be reached, so the key was kept without a check. \
                     Dictation works once the network is back."
                }
                _ => "The key could not be checked or kept.",
            };
            let color = if *stored {
                ui.visuals().warn_fg_color
            } else {
                ui.visuals().error_fg_color
            };
            ui.colored_label(color, sentence);
            details_ui(ui, code);
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_says_bytes_then_speed_and_time_left() {
        let p = Progress {
            phase: Phase::Downloading,
            done_bytes: 12 << 20,
            total_bytes: 141 << 20,
        };
        assert_eq!(progress_text(&p, None), "Downloading 12 of 141 MiB");
        let start = Instant::now() - Duration::from_secs(4);
        let text = progress_text(&p, Some((start, 0)));
        assert!(
            text.starts_with("Downloading 12 of 141 MiB · 3.0 MiB/s · about "),
            "{text}"
        );
        assert!(text.ends_with(" left"), "{text}");
        assert_eq!(time_left(39.2), "about 40 s left");
        assert_eq!(time_left(150.0), "about 3 min left");
    }

    #[test]
    fn every_download_failure_says_what_to_do_next() {
        for code in [
            "models.offline",
            "models.network",
            "models.disk-full",
            "models.no-space",
            "models.hash-mismatch",
            "models.http-status",
            "models.whatever",
        ] {
            let f = model_failure(code);
            assert!(f.retry || f.other_model, "{code}");
            assert!(!f.sentence.contains("models."), "{code}");
        }
    }
}
