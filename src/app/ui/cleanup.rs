//! Clean-up in the window: the Settings section (mode, model server, replacements), the
//! "Cleaning up…" state after a stop, and the sentence that says what was delivered.
//!
//! Invariants:
//! - The form is an editable copy; only `to_settings` turns it into settings, and the key
//!   field goes to the secret store, never into the settings file.
//! - A sentence per outcome; the reason code only in the details line (and the log).

use super::style::{self, space};
use super::widgets;
use super::*;
use crate::cleanup::Chosen;
use crate::cleanup::replace::Rule;
use crate::cleanup::settings::{AppRule, CleanupMode, CleanupSettings};

/// The Clean-up section's editable copy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CleanupForm {
    pub mode: CleanupMode,
    pub language: String,
    pub instruction: String,
    pub base_url: String,
    pub model: String,
    /// A new key for the model server (empty: keep the one stored for this server; a key is
    /// kept per server, so another server's is never sent here).
    pub api_key: String,
    /// Replacement rows: (spoken, written). Empty rows are dropped on save.
    pub replacements: Vec<(String, String)>,
    /// Modes by app: (app identifier, mode). Rows without an app are dropped on save.
    pub per_app: Vec<(String, CleanupMode)>,
    /// The "Dictate + clean" shortcut's mode.
    pub shortcut_mode: CleanupMode,
}

/// How a replacement's "written" side names a line break in the form (typed as the two
/// characters backslash and n).
const LINE_BREAK: &str = "\\n";

impl CleanupForm {
    pub(super) fn from_settings(s: &CleanupSettings) -> CleanupForm {
        CleanupForm {
            mode: s.mode,
            language: s.language.clone(),
            instruction: s.instruction.clone(),
            base_url: s.base_url.clone(),
            model: s.model.clone(),
            api_key: String::new(),
            replacements: s
                .replacements
                .iter()
                .map(|r| (r.from.clone(), r.to.replace('\n', LINE_BREAK)))
                .collect(),
            per_app: s.per_app.iter().map(|r| (r.app.clone(), r.mode)).collect(),
            shortcut_mode: s.shortcut_mode(),
        }
    }

    /// Whether any mode, the default's or an app's, asks a model (the server fields show).
    fn any_model(&self) -> bool {
        self.mode.uses_model()
            || self
                .per_app
                .iter()
                .any(|(app, mode)| !app.trim().is_empty() && mode.uses_model())
    }

    /// Whether a chosen mode has what it needs (a server and a model; a language for
    /// Translate, an instruction for My instruction): until then changes wait, instead of
    /// a save refused at every keystroke (the Save button still says what is missing).
    pub(super) fn is_complete(&self) -> bool {
        let filled = |s: &str| !s.trim().is_empty();
        let modes = std::iter::once(self.mode).chain(
            self.per_app
                .iter()
                .filter(|(app, _)| filled(app))
                .map(|(_, mode)| *mode),
        );
        let mut server_needed = false;
        for mode in modes {
            match mode {
                CleanupMode::AsSpoken => {}
                CleanupMode::Translate if !filled(&self.language) => return false,
                CleanupMode::Custom if !filled(&self.instruction) => return false,
                _ => server_needed = true,
            }
        }
        !server_needed || (filled(&self.base_url) && filled(&self.model))
    }

    pub(super) fn to_settings(&self, base: &CleanupSettings) -> CleanupSettings {
        CleanupSettings {
            mode: self.mode,
            language: self.language.trim().to_owned(),
            instruction: self.instruction.trim().to_owned(),
            base_url: self.base_url.trim().to_owned(),
            model: self.model.trim().to_owned(),
            replacements: self
                .replacements
                .iter()
                .filter(|(from, _)| !from.trim().is_empty())
                .map(|(from, to)| Rule {
                    from: from.trim().to_owned(),
                    to: to.replace(LINE_BREAK, "\n"),
                })
                .collect(),
            deadline_ms: base.deadline_ms,
            // Written only when it is not the default (Tidy), or when the file had it.
            shortcut_mode: (self.shortcut_mode != CleanupMode::Tidy
                || base.shortcut_mode.is_some())
            .then_some(self.shortcut_mode),
            per_app: self
                .per_app
                .iter()
                .filter(|(app, _)| !app.trim().is_empty())
                .map(|(app, mode)| AppRule {
                    app: app.trim().to_owned(),
                    mode: *mode,
                })
                .collect(),
        }
    }
}

/// Where a server is, said the way the Settings page shows it.
pub(super) fn server_place(base_url: &str) -> &'static str {
    let host = base_url
        .trim()
        .parse::<tokio_tungstenite::tungstenite::http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned));
    match host {
        Some(h) if crate::endpoint::is_loopback_host(&h) => "On this Mac: nothing leaves it.",
        Some(_) => "In the cloud: your words are sent to this server.",
        None => "",
    }
}

impl PersykUi {
    /// Settings › Clean-up.
    pub(super) fn cleanup_settings_ui(&mut self, ui: &mut egui::Ui) {
        let f = &mut self.form.cleanup;
        widgets::field(ui, "After recognition", |ui| {
            egui::ComboBox::from_id_salt("cleanup-mode")
                .selected_text(f.mode.label())
                .show_ui(ui, |ui| {
                    for mode in CleanupMode::ALL {
                        ui.selectable_value(&mut f.mode, mode, mode.label());
                    }
                })
                .response
        });
        ui.label(style::caption(f.mode.description()));
        let uses = |f: &CleanupForm, m: CleanupMode| {
            f.mode == m
                || f.per_app
                    .iter()
                    .any(|(app, mode)| *mode == m && !app.is_empty())
        };
        if uses(f, CleanupMode::Translate) {
            widgets::row(ui, "Into", |ui, label| {
                ui.add(egui::TextEdit::singleline(&mut f.language).hint_text("English"))
                    .labelled_by(label);
            });
        }
        if uses(f, CleanupMode::Custom) {
            widgets::row(ui, "Instruction", |ui, label| {
                ui.add(
                    egui::TextEdit::multiline(&mut f.instruction)
                        .desired_rows(2)
                        .hint_text("Write it as a bulleted list."),
                )
                .labelled_by(label);
            });
        }
        if f.any_model() {
            widgets::row(ui, "Model server", |ui, label| {
                ui.add(
                    egui::TextEdit::singleline(&mut f.base_url)
                        .hint_text("http://127.0.0.1:11434/v1"),
                )
                .labelled_by(label);
            });
            let place = server_place(&f.base_url);
            if !place.is_empty() {
                ui.label(style::caption(place));
            }
            widgets::row(ui, "Model", |ui, label| {
                ui.add(egui::TextEdit::singleline(&mut f.model).hint_text("llama3.2"))
                    .labelled_by(label);
            });
            widgets::row(ui, "Server key", |ui, label| {
                ui.add(
                    egui::TextEdit::singleline(&mut f.api_key)
                        .password(true)
                        .hint_text("Only for a server that asks for one"),
                )
                .labelled_by(label);
            });
            ui.label(style::caption(
                "A key is kept for its own server: change the address and the key saved for \
                 the old one stays with it, never sent to the new one.",
            ));
            ui.label(style::caption(
                "Your spoken words are saved first. The clean-up is pasted only if it comes \
                 within 3 seconds and still says what you said; otherwise your words are \
                 pasted as spoken.",
            ));
        }
        self.per_app_ui(ui);
        let f = &mut self.form.cleanup;
        ui.add_space(space::S);
        ui.label(RichText::new("Replacements").strong());
        ui.label(style::caption(format!(
            "What you say becomes what is written, whole words, in every dictation. \
             {LINE_BREAK} writes a line break."
        )));
        let mut remove = None;
        for (i, (from, to)) in f.replacements.iter_mut().enumerate() {
            ui.horizontal(|ui| {
                let n = i + 1;
                let said = ui
                    .add(
                        egui::TextEdit::singleline(from)
                            .desired_width(140.0)
                            .hint_text("persic"),
                    )
                    .on_hover_text("Said");
                name(ui, &said, format!("Said (replacement {n})"));
                ui.label("becomes");
                let written = ui
                    .add(
                        egui::TextEdit::singleline(to)
                            .desired_width(140.0)
                            .hint_text("Persyk"),
                    )
                    .on_hover_text("Written");
                name(ui, &written, format!("Written (replacement {n})"));
                let label = format!("Remove replacement {n}");
                if style::icon_only_button(ui, style::Icon::Trash, &label).clicked() {
                    remove = Some(i);
                }
            });
        }
        if let Some(i) = remove {
            f.replacements.remove(i);
        }
        if ui.button("Add replacement").clicked() {
            f.replacements.push((String::new(), String::new()));
        }
    }
}

impl PersykUi {
    /// Settings › Clean-up › Modes by app: rows of (app, mode), and the app of the last
    /// dictation offered as a new row.
    fn per_app_ui(&mut self, ui: &mut egui::Ui) {
        let last_app = self.last_app.clone();
        let f = &mut self.form.cleanup;
        ui.add_space(space::S);
        ui.label(RichText::new("Modes by app").strong());
        ui.label(style::caption(
            "Dictation into one of these apps goes through its own mode; every other app \
             gets the one above. An app is named by its bundle identifier (com.apple.mail).",
        ));
        let mut remove = None;
        for (i, (app, mode)) in f.per_app.iter_mut().enumerate() {
            let n = i + 1;
            ui.horizontal(|ui| {
                let field = ui.add(
                    egui::TextEdit::singleline(app)
                        .desired_width(180.0)
                        .hint_text("com.apple.mail"),
                );
                name(ui, &field, format!("App (mode by app {n})"));
                egui::ComboBox::from_id_salt(("cleanup-app-mode", i))
                    .selected_text(mode.label())
                    .show_ui(ui, |ui| {
                        for m in CleanupMode::ALL {
                            ui.selectable_value(mode, m, m.label());
                        }
                    });
                let label = format!("Remove mode by app {n}");
                if style::icon_only_button(ui, style::Icon::Trash, &label).clicked() {
                    remove = Some(i);
                }
            });
        }
        if let Some(i) = remove {
            f.per_app.remove(i);
        }
        ui.horizontal(|ui| {
            if ui.button("Add a mode for an app").clicked() {
                f.per_app.push((String::new(), CleanupMode::Tidy));
            }
            let known = |id: &str| {
                f.per_app
                    .iter()
                    .any(|(app, _)| app.eq_ignore_ascii_case(id))
            };
            if let Some(id) = last_app.filter(|id| !known(id))
                && ui
                    .button(format!("Add {id}"))
                    .on_hover_text("The app you last dictated into")
                    .clicked()
            {
                f.per_app.push((id, CleanupMode::Tidy));
            }
        });
    }
}

/// "What changed": a collapsed word diff from the spoken words to the clean-up — removed
/// words struck through, added ones in the accent colour.
pub(super) fn changes_ui(ui: &mut egui::Ui, id: &str, spoken: &str, cleaned: &str) {
    use crate::cleanup::diff::{Change, word_diff};
    egui::CollapsingHeader::new("What changed")
        .id_salt(("cleanup-changes", id))
        .show(ui, |ui| {
            let Some(diff) = word_diff(spoken, cleaned) else {
                ui.label(style::caption("Too long to compare here."));
                return;
            };
            let font = egui::TextStyle::Body.resolve(ui.style());
            let plain = ui.visuals().text_color();
            let weak = ui.visuals().weak_text_color();
            let accent = style::Palette::current(ui).accent;
            let mut job = egui::text::LayoutJob::default();
            for (i, change) in diff.iter().enumerate() {
                let (text, format) = match change {
                    Change::Same(t) => (t, egui::TextFormat::simple(font.clone(), plain)),
                    Change::Removed(t) => (
                        t,
                        egui::TextFormat {
                            strikethrough: egui::Stroke::new(1.0, weak),
                            ..egui::TextFormat::simple(font.clone(), weak)
                        },
                    ),
                    Change::Added(t) => (
                        t,
                        egui::TextFormat {
                            underline: egui::Stroke::new(1.0, accent),
                            ..egui::TextFormat::simple(font.clone(), accent)
                        },
                    ),
                };
                if i > 0 {
                    job.append(" ", 0.0, egui::TextFormat::simple(font.clone(), plain));
                }
                job.append(text, 0.0, format);
            }
            ui.label(job);
        });
}

/// Gives a widget without a visible label its accessible name.
fn name(ui: &egui::Ui, response: &egui::Response, label: String) {
    ui.ctx()
        .accesskit_node_builder(response.id, |node| node.set_label(label));
}

/// Under the control while a model cleans up: what is happening and the way out.
pub(super) fn cleaning_status_ui(ui: &mut egui::Ui, mode: &str, actions: &mut Vec<Action>) {
    ui.label(RichText::new(format!("Cleaning up ({mode})…")).strong());
    ui.label(style::caption(
        "Your words are saved. Esc pastes them as spoken.",
    ));
    if ui.button("Use my words").clicked() {
        actions.push(Action::CancelCleanup);
    }
}

/// The sentence after a dictation that had a clean-up.
pub(super) fn outcome_ui(ui: &mut egui::Ui, f: &Finished) {
    let Some(c) = &f.cleanup else { return };
    match (c.chosen, c.reason) {
        (Chosen::Model, _) if c.mode == CleanupMode::Translate.label() => {
            ui.label(
                "Translated: not checked for meaning (its numbers, names and questions were).",
            );
        }
        (Chosen::Model, _) => {
            ui.label(format!("Cleaned up ({}).", c.mode));
        }
        (Chosen::Replaced, None) => {
            ui.label("Your replacements were applied.");
        }
        (_, Some(code)) => {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                format!("Pasted as spoken: {}", reason_sentence(code)),
            );
            super::onboarding::details_ui(ui, code);
        }
        (Chosen::Spoken, None) => {}
    }
}

/// Why the words went out as spoken, as a sentence.
pub(super) fn reason_sentence(code: &str) -> &'static str {
    // The guard names the kind of change it refused ("…it changed a “not”.").
    if let Some(r) = crate::cleanup::guard::Rejection::from_code(code) {
        return r.sentence();
    }
    match code {
        "cleanup.timeout" => "the clean-up took longer than its deadline.",
        "cleanup.cancelled" => "you chose your words.",
        "cleanup.too-short" => "three words or fewer need no clean-up.",
        "cleanup.unreachable" => "the model server could not be reached.",
        "cleanup.unauthorized" => "the model server refused the key.",
        "cleanup.rate-limited" => "the model server is busy.",
        "cleanup.http-status" | "cleanup.malformed-reply" => {
            "the model server did not answer as expected."
        }
        "cleanup.cut-off" => "the model's answer was cut off.",
        "cleanup.refused" => "the model refused to answer.",
        "cleanup.no-server"
        | "cleanup.no-model"
        | "cleanup.bad-url"
        | "cleanup.insecure-url"
        | "cleanup.credentials-in-url"
        | "cleanup.no-language"
        | "cleanup.no-instruction" => {
            "the clean-up settings are not complete (Settings › Clean-up)."
        }
        _ => "the clean-up did not work.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_round_trips_and_drops_empty_rows() {
        let s = CleanupSettings {
            mode: CleanupMode::Tidy,
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "m".into(),
            replacements: vec![Rule {
                from: "new line".into(),
                to: "\n".into(),
            }],
            deadline_ms: Some(2000),
            ..CleanupSettings::default()
        };
        let mut form = CleanupForm::from_settings(&s);
        assert_eq!(
            form.replacements,
            [("new line".to_owned(), "\\n".to_owned())]
        );
        form.replacements.push((" ".into(), "x".into()));
        assert_eq!(form.to_settings(&s), s);
    }

    #[test]
    fn a_model_mode_waits_for_its_server_model_and_language() {
        let mut f = CleanupForm::default();
        assert!(f.is_complete());
        f.mode = CleanupMode::Translate;
        assert!(!f.is_complete());
        f.base_url = "http://127.0.0.1:11434/v1".into();
        f.model = "m".into();
        assert!(!f.is_complete());
        f.language = "German".into();
        assert!(f.is_complete());
        f.mode = CleanupMode::Custom;
        assert!(!f.is_complete());
    }

    #[test]
    fn servers_are_placed() {
        assert_eq!(
            server_place("http://127.0.0.1:11434/v1"),
            "On this Mac: nothing leaves it."
        );
        assert!(server_place("https://api.groq.com/openai/v1").starts_with("In the cloud"));
        assert_eq!(server_place(""), "");
    }
}
