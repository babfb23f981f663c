//! The Settings page: the editable form, recognition and model downloads, first run.
//!
//! The form is a column of sections (`widgets::section`): Recognition, Microphone, Shortcut,
//! Startup, Updates, History, After dictation, Appearance — one method each (`*_ui`), so a new control is a row in its
//! section's method. The sections scroll; the Save bar stays at the bottom of the window.
//!
//! Shortcut holds the key recorder: each shortcut shown the Mac way (`⌥Space`, the modifier
//! symbols painted: egui's fonts have none) with "Record shortcut", which takes the next
//! key pressed with its modifiers and refuses a typing key without one. Startup's checkbox
//! shows the login item as the system has it (read back through the backend each time the
//! page shows and after each change; `app::autostart`), never a remembered flag.

use super::onboarding::{coded_sentence_ui, download_state_ui};
use super::style::{self, Icon, space};
use super::widgets::{self, fmt_mib};
use super::*;
use crate::app::autostart::AutostartState;
use crate::app::hotkey::HotkeyError;
use crate::cleanup::settings::CleanupMode;
use global_hotkey::hotkey::{Code, Modifiers};

/// The Settings page's editable copy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsForm {
    pub api_key: String,
    pub key_stored: bool,
    pub base_url: String,
    pub conversation: bool,
    pub model: String,
    pub language: String,
    /// "Words Persyk should know", one per line.
    pub keywords: String,
    /// `near_field` (empty: the default), `far_field` or `off`.
    pub noise_reduction: String,
    /// `gpt-realtime-whisper`'s delay (empty: the provider's default).
    pub delay: String,
    pub device: String,
    pub directory: String,
    pub additional: String,
    /// This Mac's name in the sessions it records (empty: the computer's name).
    pub device_name: String,
    /// Share words, replacements and clean-up modes with the other Macs (issue #37 item 6).
    pub share_settings: bool,
    pub pre_roll_ms: u32,
    pub hotkey: String,
    /// Auto (tap or hold), toggle or push to talk.
    pub hotkey_mode: HotkeyMode,
    /// The "Paste last transcription" shortcut (empty: none).
    pub paste_last: String,
    /// The "Dictate + clean" shortcut (empty: none).
    pub dictate_clean: String,
    /// Recognition on this device (Whisper) instead of OpenAI.
    pub local: bool,
    /// The catalog model (when `use_model_file` is off).
    pub local_model: String,
    /// Use the model file at `model_path` instead of a catalog model.
    pub use_model_file: bool,
    /// The on-device language (a Whisper code; empty: detect).
    pub local_language: String,
    /// "Translate to English" on the device.
    pub local_translate: bool,
    /// "Words Persyk should know" on the device too.
    pub local_vocabulary: bool,
    pub model_path: String,
    /// Inference threads; 0 = automatic.
    pub local_threads: u32,
    /// Start and stop sounds.
    pub sounds: bool,
    /// The recording indicator window.
    pub indicator: bool,
    /// Copy only, or copy and paste.
    pub after: super::after_dictation::AfterDictationForm,
    /// Light, dark or the system's appearance.
    pub theme: ThemeChoice,
    /// Replacements and a model's clean-up.
    pub cleanup: super::cleanup::CleanupForm,
    /// "Check for updates daily".
    pub updates_daily: bool,
}

impl SettingsForm {
    pub(super) fn from_settings(s: &Settings, key_stored: bool) -> SettingsForm {
        SettingsForm {
            api_key: String::new(),
            key_stored,
            base_url: s.provider.base_url.clone().unwrap_or_default(),
            conversation: s.provider.mode.as_deref() == Some("conversation"),
            model: s.provider.transcription_model.clone().unwrap_or_default(),
            language: s.provider.language.clone().unwrap_or_default(),
            keywords: s.provider.keywords.join("\n"),
            noise_reduction: s.provider.noise_reduction.clone().unwrap_or_default(),
            delay: s.provider.delay.clone().unwrap_or_default(),
            device: s.capture.device.clone().unwrap_or_default(),
            device_name: s.sync.device_name.clone().unwrap_or_default(),
            share_settings: s.sync.share_settings,
            directory: s
                .sessions
                .directory
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            additional: s
                .sessions
                .additional_directories
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join("\n"),
            pre_roll_ms: s.capture.pre_roll_ms,
            hotkey: s
                .hotkey
                .keys
                .clone()
                .unwrap_or_else(|| crate::settings::DEFAULT_HOTKEY.to_owned()),
            hotkey_mode: s.hotkey.mode,
            paste_last: s.hotkey.paste_last.clone().unwrap_or_default(),
            dictate_clean: s.hotkey.dictate_clean.clone().unwrap_or_default(),
            local: s.recognition.engine == RecognitionEngine::Local,
            local_model: match &s.recognition.local_model {
                Some(m) if !m.contains('/') => m.trim().to_owned(),
                _ => DEFAULT_LOCAL_MODEL.to_owned(),
            },
            local_language: s.recognition.local_language.clone().unwrap_or_default(),
            local_translate: s.recognition.local_translate,
            local_vocabulary: s.recognition.local_vocabulary_on(),
            use_model_file: s
                .recognition
                .local_model
                .as_ref()
                .is_some_and(|m| m.contains('/')),
            model_path: s
                .recognition
                .local_model
                .clone()
                .filter(|m| m.contains('/'))
                .unwrap_or_default(),
            local_threads: s.recognition.local_threads.unwrap_or(0),
            sounds: s.feedback.sounds_enabled(),
            indicator: s.feedback.indicator_enabled(),
            after: super::after_dictation::AfterDictationForm::from_settings(&s.after_dictation),
            theme: s.appearance.theme,
            cleanup: super::cleanup::CleanupForm::from_settings(&s.cleanup),
            updates_daily: s.updates.daily_enabled(),
        }
    }

    /// The settings this form describes, keeping whatever `base` has that the form does not
    /// show (unknown keys included).
    pub(super) fn to_settings(&self, base: &Settings) -> Settings {
        let opt = |s: &str| {
            let t = s.trim();
            (!t.is_empty()).then(|| t.to_owned())
        };
        let mut s = base.clone();
        s.provider.base_url = opt(&self.base_url);
        // "dictation" is the default: written only if the file already named a mode.
        s.provider.mode = if self.conversation {
            Some("conversation".to_owned())
        } else {
            base.provider.mode.as_ref().map(|_| "dictation".to_owned())
        };
        s.provider.transcription_model = opt(&self.model);
        s.provider.language = opt(&self.language);
        s.provider.keywords = self.keywords.lines().filter_map(opt).collect();
        s.provider.noise_reduction = opt(&self.noise_reduction);
        s.provider.delay = opt(&self.delay);
        s.capture.device = opt(&self.device);
        s.sync.device_name = opt(&self.device_name);
        s.sync.share_settings = self.share_settings;
        s.capture.pre_roll_ms = self.pre_roll_ms;
        s.sessions.directory = opt(&self.directory).map(PathBuf::from);
        s.sessions.additional_directories = self
            .additional
            .lines()
            .filter_map(opt)
            .map(PathBuf::from)
            .collect();
        s.hotkey.keys = Some(self.hotkey.trim().to_owned());
        s.hotkey.mode = self.hotkey_mode;
        s.hotkey.paste_last = opt(&self.paste_last);
        s.hotkey.dictate_clean = opt(&self.dictate_clean);
        s.recognition.engine = if self.local {
            RecognitionEngine::Local
        } else {
            RecognitionEngine::Openai
        };
        // The default model is written only if the file already named one.
        s.recognition.local_model = if self.use_model_file {
            opt(&self.model_path)
        } else if self.local_model == DEFAULT_LOCAL_MODEL && base.recognition.local_model.is_none()
        {
            None
        } else {
            opt(&self.local_model)
        };
        s.recognition.local_threads = (self.local_threads > 0).then_some(self.local_threads);
        s.recognition.local_language = opt(&self.local_language);
        s.recognition.local_translate = self.local_translate;
        s.recognition.local_vocabulary =
            on_by_default(self.local_vocabulary, base.recognition.local_vocabulary);
        s.feedback.sounds = on_by_default(self.sounds, base.feedback.sounds);
        s.feedback.indicator = on_by_default(self.indicator, base.feedback.indicator);
        s.after_dictation = self.after.to_settings();
        s.appearance.theme = self.theme;
        s.cleanup = self.cleanup.to_settings(&base.cleanup);
        s.updates.daily = on_by_default(self.updates_daily, base.updates.daily);
        s
    }
}

/// A setting that is on unless the file says otherwise, as the form saves it: written only
/// when turned off or when the file (`before`) already said.
fn on_by_default(on: bool, before: Option<bool>) -> Option<bool> {
    (!on || before.is_some()).then_some(on)
}

impl PersykUi {
    /// The sections scroll; the Save bar stays at the bottom of the window.
    pub(super) fn settings_page(&mut self, ui: &mut egui::Ui) {
        ui.with_layout(egui::Layout::bottom_up(egui::Align::Min), |ui| {
            // Bottom up: the button row first, its notes above it.
            ui.horizontal(|ui| {
                if ui
                    .add(style::primary_button(ui, Icon::Check, "Save settings"))
                    .clicked()
                {
                    self.pending.push(Action::SaveSettings);
                }
                if self.form_error.is_none() && self.form_saved {
                    ui.label("Settings saved");
                }
            });
            if let Some(e) = &self.form_error {
                // A refused save: the reason as a sentence, its code in the details line.
                let color = ui.visuals().error_fg_color;
                ui.vertical(|ui| coded_sentence_ui(ui, "Not saved: ", e, color));
            }
            if let Some(note) = &self.settings_note {
                let color = ui.visuals().warn_fg_color;
                ui.vertical(|ui| coded_sentence_ui(ui, "", note, color));
            }
            ui.separator();
            ui.with_layout(egui::Layout::top_down(egui::Align::Min), |ui| {
                egui::ScrollArea::vertical()
                    .auto_shrink([false, false])
                    .show(ui, |ui| self.settings_page_ui(ui));
            });
        });
        self.autosave(ui.ctx());
    }

    pub(super) fn settings_page_ui(&mut self, ui: &mut egui::Ui) {
        // Until one dictation has worked (known once the history answered).
        if self.history_known && !self.dictation_worked {
            self.welcome_ui(ui);
        }
        if self.devices.is_none() && !self.devices_asked {
            self.devices_asked = true;
            self.send(Command::ListDevices);
        }
        let before = self.form.clone();
        let mut switch_model = false;
        let scroll_to = self.scroll_to.take();
        widgets::section(ui, "Recognition", |ui| {
            if scroll_to == Some(SettingsSection::Recognition) {
                ui.scroll_to_cursor(Some(egui::Align::Min));
            }
            self.recognition_ui(ui);
            if !self.form.local {
                switch_model = self.provider_ui(ui);
            }
            self.words_ui(ui);
        });
        widgets::section(ui, "Microphone", |ui| {
            if scroll_to == Some(SettingsSection::Microphone) {
                ui.scroll_to_cursor(Some(egui::Align::Min));
            }
            self.microphone_ui(ui)
        });
        widgets::section(ui, "Shortcut", |ui| self.shortcut_ui(ui));
        widgets::section(ui, "Startup", |ui| self.startup_ui(ui));
        widgets::section(ui, "Updates", |ui| {
            if scroll_to == Some(SettingsSection::Updates) {
                ui.scroll_to_cursor(Some(egui::Align::Min));
            }
            self.updates_settings_ui(ui)
        });
        widgets::section(ui, "History", |ui| self.history_folders_ui(ui));
        widgets::section(ui, "After dictation", |ui| {
            self.after_dictation_settings_ui(ui)
        });
        widgets::section(ui, "Clean-up", |ui| self.cleanup_settings_ui(ui));
        widgets::section(ui, "Appearance", |ui| {
            widgets::row(ui, "Theme", |ui, _| {
                ui.horizontal_wrapped(|ui| {
                    let t = &mut self.form.theme;
                    ui.radio_value(t, ThemeChoice::System, "Follow the system");
                    ui.radio_value(t, ThemeChoice::Light, "Light");
                    ui.radio_value(t, ThemeChoice::Dark, "Dark");
                });
            });
        });
        if self.form != before {
            self.form_saved = false;
        }
        if switch_model {
            self.pending.push(Action::SaveSettings);
        }
        ui.add_space(space::M);
    }

    /// Recognition, online: the key, the provider and the model's options. Returns whether
    /// the user asked to switch off a retiring model (saved at once).
    fn provider_ui(&mut self, ui: &mut egui::Ui) -> bool {
        match self.key_storage {
            Some(s) if !s.survives_reboot() => {
                ui.colored_label(ui.visuals().warn_fg_color, s.describe());
            }
            Some(s) => {
                ui.label(style::caption(s.describe()));
            }
            None => {}
        }
        // "Check API key" lands here when the welcome card (which takes it) is not shown.
        let focus = std::mem::take(&mut self.focus_key);
        let f = &mut self.form;
        let mut switch_model = false;
        let stored = f.key_stored;
        field(ui, "API key", |ui| {
            let edit = ui.add(
                egui::TextEdit::singleline(&mut f.api_key)
                    .password(true)
                    .desired_width(f32::INFINITY)
                    .hint_text(if stored {
                        "stored (type to replace)"
                    } else {
                        "sk-…"
                    }),
            );
            if focus {
                edit.request_focus();
                edit.scroll_to_me(Some(egui::Align::Center));
            }
            edit
        });
        // What the provider said about the key just saved, beside the field.
        if self.key_check.is_some() {
            super::onboarding::key_check_ui(ui, self.key_check.as_ref());
        }
        let f = &mut self.form;
        field(ui, "Provider base URL", |ui| {
            ui.add(
                egui::TextEdit::singleline(&mut f.base_url)
                    .desired_width(f32::INFINITY)
                    .hint_text("wss://api.openai.com/v1"),
            )
        });
        widgets::row(ui, "Mode", |ui, _| {
            ui.horizontal_wrapped(|ui| {
                ui.radio_value(&mut f.conversation, false, "Dictation");
                ui.radio_value(&mut f.conversation, true, "Conversation");
            });
        });
        field(ui, "Transcription model", |ui| {
            // The chooser at the right edge, the field in the rest of the row.
            let size = egui::vec2(ui.available_width(), ui.spacing().interact_size.y);
            ui.allocate_ui_with_layout(
                size,
                egui::Layout::right_to_left(egui::Align::Center),
                |ui| {
                    ui.menu_button("Current models", |ui| {
                        for m in TRANSCRIPTION_MODELS
                            .iter()
                            .filter(|m| m.retires_on.is_none())
                        {
                            if ui.selectable_label(f.model == m.name, m.name).clicked() {
                                f.model = m.name.to_owned();
                                ui.close();
                            }
                        }
                    });
                    ui.add(
                        egui::TextEdit::singleline(&mut f.model)
                            .desired_width(f32::INFINITY)
                            .hint_text(DEFAULT_TRANSCRIPTION_MODEL),
                    )
                },
            )
            .inner
        });
        if let Some(day) = retires_on(f.model.trim()) {
            widgets::row(ui, "", |ui, _| {
                ui.colored_label(
                    ui.visuals().warn_fg_color,
                    format!("{} stops working on {day}.", f.model.trim()),
                );
                if ui
                    .button(format!("Switch to {DEFAULT_TRANSCRIPTION_MODEL}"))
                    .clicked()
                {
                    f.model = DEFAULT_TRANSCRIPTION_MODEL.to_owned();
                    switch_model = true;
                }
            });
        }
        if model_caps(f.model.trim()).delay {
            field(ui, "Delay", |ui| {
                egui::ComboBox::from_id_salt("delay")
                    .selected_text(if f.delay.is_empty() {
                        "default"
                    } else {
                        &f.delay
                    })
                    .show_ui(ui, |ui| {
                        ui.selectable_value(&mut f.delay, String::new(), "default");
                        for d in DELAYS {
                            ui.selectable_value(&mut f.delay, (*d).to_owned(), *d);
                        }
                    })
                    .response
            });
        }
        field(ui, "Language", |ui| {
            ui.add(
                egui::TextEdit::singleline(&mut f.language)
                    .desired_width(f32::INFINITY)
                    .hint_text("auto (or en; several: en, uk)"),
            )
        });
        switch_model
    }

    /// "Words Persyk should know", for either engine; on the device with the checkbox that
    /// applies them there.
    fn words_ui(&mut self, ui: &mut egui::Ui) {
        let f = &mut self.form;
        field(ui, "Words Persyk should know (one per line)", |ui| {
            ui.add(
                egui::TextEdit::multiline(&mut f.keywords)
                    .desired_width(f32::INFINITY)
                    .desired_rows(2),
            )
        });
        if f.local {
            widgets::row(ui, "", |ui, _| {
                ui.checkbox(&mut f.local_vocabulary, LOCAL_VOCABULARY);
            });
            ui.label(style::caption(LOCAL_VOCABULARY_CAPTION));
        }
    }

    /// Microphone: the input device, noise reduction, pre-roll.
    fn microphone_ui(&mut self, ui: &mut egui::Ui) {
        let devices = self.devices.as_ref();
        let f = &mut self.form;
        field(ui, "Input device", |ui| {
            let selected = if f.device.is_empty() {
                "System default".to_owned()
            } else if devices.is_some_and(|d| !d.contains(&f.device)) {
                format!("{} (not connected)", f.device)
            } else {
                f.device.clone()
            };
            egui::ComboBox::from_id_salt("microphone")
                .selected_text(selected)
                .width(ui.available_width())
                .truncate()
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut f.device, String::new(), "System default");
                    match devices {
                        Some(list) => {
                            for d in list {
                                ui.selectable_value(&mut f.device, d.clone(), d);
                            }
                        }
                        None => {
                            ui.label("Looking for microphones…");
                        }
                    }
                })
                .response
        });
        if !f.local {
            field(ui, "Noise reduction", |ui| {
                let label = |v: &str| match v {
                    "far_field" => "far field (room microphone)",
                    "off" => "off",
                    _ => "near field (headset, laptop)",
                };
                egui::ComboBox::from_id_salt("noise-reduction")
                    .selected_text(label(&f.noise_reduction))
                    .width(ui.available_width())
                    .show_ui(ui, |ui| {
                        for v in ["", "far_field", "off"] {
                            ui.selectable_value(&mut f.noise_reduction, v.to_owned(), label(v));
                        }
                    })
                    .response
            });
        }
        field(ui, "Pre-roll (ms)", |ui| {
            ui.add(egui::DragValue::new(&mut f.pre_roll_ms).range(0..=500))
        });
        ui.label(style::caption(PRE_ROLL_CAPTION));
    }

    /// Shortcut: the global hotkey and how it behaves, and the paste-last shortcut. Each
    /// shortcut is shown the Mac way with its recorder; the text field under it takes a
    /// combination by name.
    fn shortcut_ui(&mut self, ui: &mut egui::Ui) {
        self.recorder_ui(ui, ShortcutTarget::Dictation);
        let f = &mut self.form;
        field(ui, "Global hotkey", |ui| {
            ui.add(
                egui::TextEdit::singleline(&mut f.hotkey)
                    .desired_width(f32::INFINITY)
                    .hint_text("empty: no hotkey"),
            )
        });
        // Beside the field, and gone once it is fixed: what is typed is checked as typed;
        // what the system refused is checked at each registration (the shell's note).
        if let Err(e) = hotkey::parse_keys(&f.hotkey) {
            widgets::row(ui, "", |ui, _| {
                ui.colored_label(
                    ui.visuals().error_fg_color,
                    "Not a key combination Persyk understands: try Alt+Space or Ctrl+Shift+D.",
                );
                super::onboarding::details_ui(ui, e.code());
            });
        } else if let Some(note) = &self.hotkey_note {
            widgets::row(ui, "", |ui, _| {
                ui.colored_label(ui.visuals().warn_fg_color, note);
            });
        } else if let Some(sentence) = hotkey_in_use(&self.settings.hotkey) {
            widgets::row(ui, "", |ui, _| {
                ui.label(style::caption(sentence));
            });
        }
        widgets::row(ui, "Hotkey mode", |ui, _| {
            ui.horizontal_wrapped(|ui| {
                let m = &mut f.hotkey_mode;
                ui.radio_value(m, HotkeyMode::Auto, "Tap or hold");
                ui.radio_value(m, HotkeyMode::Toggle, "Toggle");
                ui.radio_value(m, HotkeyMode::PushToTalk, "Push to talk");
            });
        });
        ui.label(style::caption(match f.hotkey_mode {
            HotkeyMode::Auto => AUTO_MODE_HELP,
            HotkeyMode::Toggle => "Press once to start dictating, again to stop.",
            HotkeyMode::PushToTalk => "Dictation runs while the keys are held.",
        }));
        if let Ok(Some(hotkey::Shortcut::Modifier(key))) = hotkey::parse_keys(&f.hotkey) {
            ui.label(style::caption(MODIFIER_ALONE_HELP));
            if key == crate::app::modkeys::ModKey::Fn {
                ui.label(style::caption(FN_EMOJI_HELP));
            }
        }
        if self.hotkey_needs_input_monitoring {
            widgets::row(ui, "", |ui, _| {
                if ui.button(OPEN_INPUT_MONITORING).clicked() {
                    self.open_input_monitoring = true;
                }
            });
        }
        if std::mem::take(&mut self.open_input_monitoring)
            && let Err(reason) = self.effects.open_url(PRIVACY_INPUT_MONITORING_URL)
        {
            self.notice = Some((
                format!("System Settings could not be opened ({reason})"),
                true,
            ));
        }
        self.recorder_ui(ui, ShortcutTarget::PasteLast);
        let f = &mut self.form;
        field(ui, "Paste last transcription", |ui| {
            ui.add(
                egui::TextEdit::singleline(&mut f.paste_last)
                    .desired_width(f32::INFINITY)
                    .hint_text("empty: no shortcut"),
            )
        });
        if let Some(problem) = paste_last_problem(f) {
            widgets::row(ui, "", |ui, _| {
                ui.colored_label(ui.visuals().error_fg_color, problem.sentence());
                super::onboarding::details_ui(ui, problem.code());
            });
        } else if let Some(note) = &self.paste_hotkey_note {
            widgets::row(ui, "", |ui, _| {
                ui.colored_label(ui.visuals().warn_fg_color, note);
            });
        }
        self.dictate_clean_ui(ui);
    }

    /// "Dictate + clean": a second dictation shortcut whose words go through a clean-up
    /// mode of its own, whatever the usual mode (or the app's) is.
    fn dictate_clean_ui(&mut self, ui: &mut egui::Ui) {
        self.recorder_ui(ui, ShortcutTarget::DictateClean);
        let f = &mut self.form;
        field(ui, "Dictate + clean", |ui| {
            ui.add(
                egui::TextEdit::singleline(&mut f.dictate_clean)
                    .desired_width(f32::INFINITY)
                    .hint_text("empty: no shortcut"),
            )
        });
        field(ui, "Clean-up for this shortcut", |ui| {
            egui::ComboBox::from_id_salt("dictate-clean-mode")
                .selected_text(f.cleanup.shortcut_mode.label())
                .show_ui(ui, |ui| {
                    for mode in CleanupMode::ALL.into_iter().filter(|m| m.uses_model()) {
                        ui.selectable_value(&mut f.cleanup.shortcut_mode, mode, mode.label());
                    }
                })
                .response
        });
        if let Some(problem) = dictate_clean_problem(f) {
            widgets::row(ui, "", |ui, _| {
                ui.colored_label(ui.visuals().error_fg_color, problem.sentence());
                super::onboarding::details_ui(ui, problem.code());
            });
        } else if let Some(note) = &self.clean_hotkey_note {
            widgets::row(ui, "", |ui, _| {
                ui.colored_label(ui.visuals().warn_fg_color, note);
            });
        } else if !f.dictate_clean.trim().is_empty() {
            let needs_server =
                f.cleanup.base_url.trim().is_empty() || f.cleanup.model.trim().is_empty();
            ui.label(style::caption(if needs_server {
                "This shortcut needs a model server: add one under Clean-up below. Until \
                 then its words are pasted as spoken."
            } else {
                "Dictation by this shortcut goes through this clean-up, whatever the mode \
                 below or the app's own mode is; the dictation key keeps them."
            }));
        }
    }

    /// One shortcut the Mac way (`⌥Space`) with "Record shortcut": while recording, the next
    /// key pressed with its modifiers becomes the shortcut (Esc cancels); a typing key
    /// without a modifier is refused and said. Whether the system accepts the combination is
    /// said once it is registered (the shell's note under the field).
    fn recorder_ui(&mut self, ui: &mut egui::Ui, target: ShortcutTarget) {
        let (row, record) = match target {
            ShortcutTarget::Dictation => ("Shortcut", RECORD_SHORTCUT),
            ShortcutTarget::PasteLast => ("Paste shortcut", RECORD_PASTE_SHORTCUT),
            ShortcutTarget::DictateClean => ("Clean shortcut", RECORD_CLEAN_SHORTCUT),
        };
        let text = match target {
            ShortcutTarget::Dictation => &self.form.hotkey,
            ShortcutTarget::PasteLast => &self.form.paste_last,
            ShortcutTarget::DictateClean => &self.form.dictate_clean,
        };
        let current = hotkey::parse_keys(text);
        let recording = self.recorder.target == Some(target);
        let mut start = false;
        let mut cancel = false;
        let mut captured = None;
        widgets::row(ui, row, |ui, _| {
            ui.horizontal_wrapped(|ui| {
                if recording {
                    ui.label(RichText::new("Press the keys… (Esc cancels)").strong());
                    if target == ShortcutTarget::Dictation {
                        ui.label(style::caption(RECORD_MODIFIER_HINT));
                    }
                    captured = ui.input_mut(take_key_press);
                    cancel = ui.button("Cancel recording").clicked();
                    ui.ctx().request_repaint();
                } else {
                    match &current {
                        Ok(Some(hotkey::Shortcut::Keys(keys))) => {
                            keys_label_ui(ui, keys);
                        }
                        Ok(Some(hotkey::Shortcut::Modifier(key))) => {
                            modifier_label_ui(ui, *key);
                        }
                        Ok(None) => {
                            ui.label(RichText::new("None").strong());
                        }
                        Err(_) => {
                            ui.label(RichText::new("Not a combination").strong());
                        }
                    }
                    start = ui.button(record).clicked();
                }
            });
        });
        if let Some((t, e)) = &self.recorder.refused
            && *t == target
        {
            widgets::row(ui, "", |ui, _| {
                ui.colored_label(ui.visuals().error_fg_color, refused_sentence(e));
                super::onboarding::details_ui(ui, e.code());
            });
        }
        if start {
            self.recorder = Recorder {
                target: Some(target),
                refused: None,
            };
            ui.ctx().memory_mut(|m| m.stop_text_input());
        }
        if cancel {
            self.recorder.target = None;
        }
        match captured {
            Some((egui::Key::Escape, m)) if m.is_none() => self.recorder.target = None,
            Some((key, modifiers)) => {
                self.recorder.target = None;
                let result = key_code(key)
                    .ok_or(HotkeyError::Invalid)
                    .and_then(|code| hotkey::recorded(hotkey_modifiers(modifiers), code));
                match result {
                    Ok((_, text)) => {
                        self.recorder.refused = None;
                        match target {
                            ShortcutTarget::Dictation => self.form.hotkey = text,
                            ShortcutTarget::PasteLast => self.form.paste_last = text,
                            ShortcutTarget::DictateClean => self.form.dictate_clean = text,
                        }
                    }
                    Err(e) => self.recorder.refused = Some((target, e)),
                }
            }
            None => {}
        }
    }

    /// A modifier tapped alone while the recorder waits (the shell's keyboard observer):
    /// the dictation key becomes that modifier; the paste-last recorder refuses it.
    pub(super) fn record_modifier_for(&mut self, key: crate::app::modkeys::ModKey) {
        let Some(target) = self.recorder.target else {
            return;
        };
        self.recorder.target = None;
        match hotkey::recorded_modifier(key, target == ShortcutTarget::Dictation) {
            Ok((_, text)) => {
                self.recorder.refused = None;
                self.form.hotkey = text;
                // The question for Input Monitoring comes now, while the key is being set.
                if !crate::app::modkeys::ask_to_observe() {
                    self.hotkey_needs_input_monitoring = true;
                }
            }
            Err(e) => self.recorder.refused = Some((target, e)),
        }
    }

    /// Startup: whether the system starts Persyk at login, as the system has it (read back
    /// each time the page shows and after each change; never a remembered flag).
    fn startup_ui(&mut self, ui: &mut egui::Ui) {
        if !self.autostart.asked {
            self.autostart.asked = true;
            if let Some(item) = self.autostart.item.clone() {
                self.autostart.busy = true;
                self.send(Command::Autostart { item, on: None });
            }
        }
        let a = &self.autostart;
        let state = a.state.as_ref().and_then(|r| r.as_ref().ok());
        let mut on = state.is_some_and(|s| s.is_on());
        let usable = a.item.is_some() && !a.busy && !matches!(a.state, Some(Err(_)) | None);
        let mut clicked = false;
        widgets::row(ui, "Login", |ui, _| {
            clicked = ui
                .add_enabled(usable, egui::Checkbox::new(&mut on, START_AT_LOGIN))
                .clicked();
        });
        match (&a.item, &a.state) {
            (None, _) => {
                ui.colored_label(ui.visuals().warn_fg_color, a.unavailable.as_str());
            }
            (Some(_), Some(Err(e))) => {
                ui.colored_label(ui.visuals().warn_fg_color, e.sentence());
                super::onboarding::details_ui(ui, e.code());
            }
            (Some(_), Some(Ok(AutostartState::Elsewhere { exec }))) => {
                ui.colored_label(
                    ui.visuals().warn_fg_color,
                    format!(
                        "At login the system starts another program: {exec}. Turning this on \
                         replaces it with this Persyk."
                    ),
                );
            }
            (Some(_), Some(Ok(AutostartState::NeedsApproval))) => {
                ui.colored_label(ui.visuals().warn_fg_color, NEEDS_LOGIN_APPROVAL);
            }
            _ => {}
        }
        if clicked && let Some(item) = self.autostart.item.clone() {
            self.autostart.busy = true;
            self.send(Command::Autostart { item, on: Some(on) });
        }
    }

    /// History: where sessions are written and which folders search also reads.
    fn history_folders_ui(&mut self, ui: &mut egui::Ui) {
        let default_root = crate::settings::default_root(crate::settings::is_dev())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let f = &mut self.form;
        field(ui, "Sessions folder", |ui| {
            ui.add(
                egui::TextEdit::singleline(&mut f.directory)
                    .desired_width(f32::INFINITY)
                    .hint_text(&default_root),
            )
        });
        field(ui, "Also search (one per line)", |ui| {
            ui.add(
                egui::TextEdit::multiline(&mut f.additional)
                    .desired_width(f32::INFINITY)
                    .desired_rows(2),
            )
        });
        // History on every Mac (issue #37): a folder a sync engine copies.
        ui.label(RichText::new("Keep history in a folder you sync").strong());
        ui.label(
            "Put the sessions folder in a folder iCloud Drive, Syncthing or Dropbox copies to \
             your other Macs, and each Mac's history holds all of them.",
        );
        let places = crate::sync::synced_places();
        if !places.is_empty() || super::super::platform::HAS_FOLDER_PANEL {
            ui.horizontal_wrapped(|ui| {
                if super::super::platform::HAS_FOLDER_PANEL
                    && ui
                        .button("Choose a Folder…")
                        .on_hover_text("Choose any folder for new sessions")
                        .clicked()
                    && let Some(Some(folder)) = super::super::platform::choose_folder()
                {
                    move_history_to(f, &folder, &default_root);
                }
                for (engine, place) in &places {
                    let target = place.join("Persyk");
                    if ui
                        .button(format!("Use {engine}"))
                        .on_hover_text(target.display().to_string())
                        .clicked()
                    {
                        move_history_to(f, &target, &default_root);
                    }
                }
            });
        }
        ui.label(
            RichText::new(
                "Choosing another folder moves nothing: the sessions already recorded stay \
                 where they are, and that folder is added to \"Also search\", so they stay in \
                 this Mac's history. New sessions go to the new folder.",
            )
            .weak(),
        );
        let computer = crate::sync::computer_name()
            .unwrap_or("this Mac")
            .to_owned();
        field(ui, "This Mac's name", |ui| {
            ui.add(
                egui::TextEdit::singleline(&mut f.device_name)
                    .desired_width(f32::INFINITY)
                    .hint_text(computer),
            )
        });
        ui.checkbox(
            &mut f.share_settings,
            "Share words, replacements and clean-up modes with my other Macs",
        )
        .on_hover_text(
            "Kept beside the history (persyk-settings.json); the shortcut, microphone, \
             start at login and clean-up server stay this Mac's",
        );
        if let Some(problem) = self.shared_problem {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                match problem {
                    "sync.not-downloaded" => {
                        "The shared settings are not on this Mac yet; this Mac's own are used."
                    }
                    _ => "The shared settings could not be read; this Mac's own are used.",
                },
            )
            .on_hover_text(format!("Details: {problem}"));
        }
        let mut settle = None;
        for copy in &self.shared_conflicts {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                "Another Mac changed the shared settings at the same moment.",
            )
            .on_hover_text(copy.as_str());
            ui.horizontal_wrapped(|ui| {
                if ui
                    .button("Keep both")
                    .on_hover_text("Keep this Mac's settings and add the other Mac's words, replacements and app rules")
                    .clicked()
                {
                    settle = Some((copy.clone(), true));
                }
                if ui
                    .button("Use the other Mac's")
                    .on_hover_text("Use the settings as the other Mac saved them")
                    .clicked()
                {
                    settle = Some((copy.clone(), false));
                }
            });
        }
        if let Some((copy, keep_both)) = settle {
            self.send(Command::ResolveShared { copy, keep_both });
        }
    }

    /// After dictation: what happens to the text (copy, or copy and paste: see
    /// `after_dictation.rs`), the sounds and the recording indicator, one row each.
    fn after_dictation_settings_ui(&mut self, ui: &mut egui::Ui) {
        self.after_dictation_ui(ui);
        // Said once, here: a failed notification is no error on every page.
        if let Some(reason) = &self.notifications_off {
            ui.colored_label(ui.visuals().warn_fg_color, notifications_headline(reason));
            super::onboarding::details_ui(ui, reason);
        }
        let f = &mut self.form;
        widgets::row(ui, "Sounds", |ui, _| {
            ui.checkbox(&mut f.sounds, "Play start and stop sounds");
        });
        widgets::row(ui, "Indicator", |ui, _| {
            ui.checkbox(&mut f.indicator, "Show a recording indicator");
        });
    }

    /// "Recognition": online or on this device, the model picker and threads.
    pub(super) fn recognition_ui(&mut self, ui: &mut egui::Ui) {
        let mut actions = Vec::new();
        let before = self.form.clone();
        widgets::row(ui, "Engine", |ui, _| {
            ui.horizontal_wrapped(|ui| {
                ui.radio_value(&mut self.form.local, false, "OpenAI (online)");
                ui.radio_value(&mut self.form.local, true, "On this device (Whisper)");
            });
        });
        if self.form.local {
            if self.models.store.is_some() && !self.models.asked {
                self.models.asked = true;
                if let Some(store) = self.models.store.clone() {
                    self.send(Command::ListModels { store });
                }
            }
            let f = &mut self.form;
            let m = &self.models;
            match &m.store {
                None => {
                    ui.colored_label(
                        ui.visuals().warn_fg_color,
                        "There is no data folder to keep models in; use a model file.",
                    );
                }
                Some(store) => {
                    ui.label(style::caption(format!(
                        "Models folder: {}",
                        store.dir().display()
                    )));
                    for model in store.catalog() {
                        let state = m.rows.as_ref().and_then(|rows| {
                            rows.iter()
                                .find(|r| r.model.name == model.name)
                                .map(|r| r.state)
                        });
                        ui.push_id(model.name, |ui| {
                            ui.horizontal_wrapped(|ui| {
                                let chosen = !f.use_model_file && f.local_model == model.name;
                                if ui
                                    .radio(
                                        chosen,
                                        format!("{} ({})", model.name, fmt_mib(model.bytes)),
                                    )
                                    .clicked()
                                {
                                    f.use_model_file = false;
                                    f.local_model = model.name.to_owned();
                                }
                                if m.progress.contains_key(model.name) {
                                    // The bar, bytes, speed, time left and Cancel: below.
                                    return;
                                }
                                match state {
                                    Some(ModelState::Installed) => {
                                        ui.label("Downloaded");
                                        if ui.button("Delete").clicked() {
                                            actions
                                                .push(Action::DeleteModel(model.name.to_owned()));
                                        }
                                    }
                                    Some(other) => {
                                        ui.label(match other {
                                            ModelState::Partial { bytes } if bytes > 0 => {
                                                format!("Partly downloaded ({})", fmt_mib(bytes))
                                            }
                                            ModelState::Damaged { .. } => {
                                                "Damaged: download it again".to_owned()
                                            }
                                            _ => "Not downloaded".to_owned(),
                                        });
                                        if ui.button("Download").clicked() {
                                            actions
                                                .push(Action::DownloadModel(model.name.to_owned()));
                                        }
                                        if matches!(
                                            other,
                                            ModelState::Partial { .. } | ModelState::Damaged { .. }
                                        ) && ui.button("Delete").clicked()
                                        {
                                            actions
                                                .push(Action::DeleteModel(model.name.to_owned()));
                                        }
                                    }
                                    None => {
                                        ui.label(RichText::new("…").weak());
                                    }
                                }
                            });
                            ui.label(style::caption(model.description));
                            download_state_ui(ui, m, model.name, &mut actions);
                            if let Some((text, error)) = m.notes.get(model.name) {
                                let color = if *error {
                                    ui.visuals().error_fg_color
                                } else {
                                    ui.visuals().text_color()
                                };
                                ui.colored_label(color, text);
                            }
                        });
                    }
                }
            }
            if ui.radio(f.use_model_file, "Use a model file…").clicked() {
                f.use_model_file = true;
            }
            field(ui, "Model file", |ui| {
                ui.add_enabled(
                    f.use_model_file,
                    egui::TextEdit::singleline(&mut f.model_path)
                        .desired_width(f32::INFINITY)
                        .hint_text("/path/to/ggml-model.bin"),
                )
            });
            field(ui, "Threads (0 = automatic)", |ui| {
                ui.add(egui::DragValue::new(&mut f.local_threads).range(0..=64))
            });
            let languages = crate::local::languages::LANGUAGES;
            let shown = crate::local::languages::name(f.local_language.trim())
                .unwrap_or("Detect in each dictation");
            field(ui, "Spoken language", |ui| {
                egui::ComboBox::from_id_salt("local-language")
                    .selected_text(shown)
                    .height(320.0)
                    .show_ui(ui, |ui| {
                        ui.selectable_value(
                            &mut f.local_language,
                            String::new(),
                            "Detect in each dictation",
                        );
                        for (code, name) in languages {
                            ui.selectable_value(&mut f.local_language, (*code).to_owned(), *name);
                        }
                    })
                    .response
            });
            widgets::row(ui, "", |ui, _| {
                ui.checkbox(&mut f.local_translate, "Translate to English");
            });
            ui.label(style::caption(LOCAL_LANGUAGE_CAPTION));
        }
        if self.form != before {
            self.form_saved = false;
        }
        self.pending.extend(actions);
    }

    pub(super) fn download_model(&mut self, name: String) {
        if let Some(store) = self.models.store.clone() {
            self.models.notes.remove(&name);
            let total = store.find(&name).map_or(0, |m| m.bytes);
            // Shown at once; the backend's reports replace it.
            self.models.progress.insert(
                name.clone(),
                Progress {
                    phase: Phase::Downloading,
                    done_bytes: 0,
                    total_bytes: total,
                },
            );
            self.send(Command::DownloadModel { store, name });
        }
    }

    pub(super) fn save_settings(&mut self) {
        let settings = self.form.to_settings(&self.settings);
        // What was asked, valid or not: the same form is not asked again.
        self.sent = settings.clone();
        self.sent_key = self.form.api_key.clone();
        self.sent_cleanup_key = self.form.cleanup.api_key.clone();
        if let Err(e) = settings.validate() {
            self.form_error = Some(e.to_string());
            return;
        }
        if hotkey::parse(&settings.hotkey).is_err()
            || paste_last_problem(&self.form).is_some()
            || dictate_clean_problem(&self.form).is_some()
        {
            // Said beside the shortcut's field (`shortcut_ui`), until it is fixed.
            self.form_error = None;
            return;
        }
        self.form_error = None;
        // A typed key is checked with the provider of these settings once they are saved
        // (issue #23 item 5): kept unless the provider refuses it, the result beside the field.
        let key = self.form.api_key.trim().to_owned();
        let api_key: Option<String> = None;
        self.saving.push_back((settings.clone(), false));
        let cleanup_key = self.form.cleanup.api_key.trim();
        let cleanup_key = (!cleanup_key.is_empty()).then(|| cleanup_key.to_owned());
        self.send(Command::SaveSettings {
            settings: Box::new(settings),
            api_key,
            cleanup_key,
            seen_shared: Box::new(crate::sync::shared::SharedSettings::of(&self.settings)),
        });
        // A key is checked once (a save on leaving the field and the Save button right
        // after are one key).
        if !key.is_empty() && key != self.checked_key {
            self.checked_key = key.clone();
            self.key_check = Some(KeyCheck::Checking);
            self.send(Command::CheckKey { key });
        }
    }

    /// The shared settings as the backend read or merged them (issue #37 item 6): this
    /// window's copy takes their fields, and so does the form unless the user is editing one
    /// of them (an unsaved edit is never overwritten; its save merges field by field).
    pub(super) fn take_shared(
        &mut self,
        settings: &Settings,
        conflicts: Vec<String>,
        problem: Option<&'static str>,
    ) {
        use crate::sync::shared::SharedSettings;
        let shared = SharedSettings::of(settings);
        let form_now = self.form.to_settings(&self.settings);
        let untouched = SharedSettings::of(&form_now) == SharedSettings::of(&self.settings);
        shared.apply(&mut self.settings);
        if untouched {
            self.form.keywords = shared.keywords.join("\n");
            let mut merged = form_now;
            shared.apply(&mut merged);
            let key = std::mem::take(&mut self.form.cleanup.api_key);
            self.form.cleanup = super::cleanup::CleanupForm::from_settings(&merged.cleanup);
            self.form.cleanup.api_key = key;
            // Not a change of the user's to save again.
            shared.apply(&mut self.sent);
        }
        self.shared_conflicts = conflicts;
        self.shared_problem = problem;
    }

    /// Changes apply when made: a choice at once, a text field once it loses the keyboard
    /// focus. An unfinished choice (a model file without a path) waits.
    fn autosave(&mut self, ctx: &egui::Context) {
        if ctx.egui_wants_keyboard_input()
            || (self.form.use_model_file && self.form.model_path.trim().is_empty())
            || !self.form.cleanup.is_complete()
        {
            return;
        }
        if self.form.to_settings(&self.settings) != self.sent
            || self.form.api_key != self.sent_key
            || self.form.cleanup.api_key != self.sent_cleanup_key
        {
            self.save_settings();
        }
    }
}

/// Points the form's sessions folder at `target` and keeps the folder sessions were written
/// to until now (`default_root` when none was set) in "Also search": nothing is moved, and
/// the sessions already recorded stay in this Mac's history.
fn move_history_to(f: &mut SettingsForm, target: &std::path::Path, default_root: &str) {
    let old = match f.directory.trim() {
        "" => default_root.trim().to_owned(),
        d => d.to_owned(),
    };
    let new = target.display().to_string();
    if old == new {
        return;
    }
    // A folder the user named must exist before a recording writes to it (an explicit
    // sessions folder is never created behind their back); this one they just chose.
    if let Err(e) = crate::session::fsio::create_private_dir_all(target) {
        eprintln!(
            "persyk: the folder for history could not be made: {}",
            e.kind()
        );
        return;
    }
    if !old.is_empty() && !f.additional.lines().any(|l| l.trim() == old) {
        if !f.additional.trim().is_empty() && !f.additional.ends_with('\n') {
            f.additional.push('\n');
        }
        f.additional.push_str(&old);
    }
    f.directory = new;
}

/// The key recorder's buttons.
/// Under "Pre-roll": what it gives, and what an always-open microphone costs (issue #25
/// item 9).
pub const PRE_ROLL_CAPTION: &str = "Pre-roll keeps the microphone open between recordings, so \
                                    a recording starts with the half second before the click. \
                                    While it is on, macOS keeps the orange microphone dot lit, \
                                    and a Bluetooth headset stays in call quality (its \
                                    microphone mode, which makes what you hear sound worse).";

/// Which dictation hotkey the saved settings put in use (registration problems are said
/// instead, by the shell's note), and whether it is Persyk's default; `None` for a
/// combination that does not parse (said beside the field). In words, as stored
/// ("Ctrl+Alt+D"): egui's fonts have no glyphs for ⌃ ⌥ ⇧ ⌘ (the recorder above paints them).
pub fn hotkey_in_use(saved: &crate::settings::HotkeySettings) -> Option<String> {
    let default = crate::settings::DEFAULT_HOTKEY;
    match saved.keys.as_deref().map(str::trim) {
        None => Some(format!("In use: {default}, Persyk's default.")),
        Some("") => Some(
            "No global hotkey is in use: the menu-bar icon and the Start button start \
             dictation."
                .to_owned(),
        ),
        Some(keys) => {
            hotkey::parse_keys(keys).ok()??;
            Some(format!("In use: {keys}."))
        }
    }
}

pub const RECORD_SHORTCUT: &str = "Record shortcut";

/// While the dictation recorder waits: a modifier alone is a shortcut too.
#[cfg(target_os = "macos")]
pub const RECORD_MODIFIER_HINT: &str = "Or press and release Fn or one modifier alone (Right \
     Option, Right Control…). Until Persyk may use Input Monitoring, type its name in the \
     field below instead (Fn, RightAlt): macOS asks once it is saved.";
#[cfg(not(target_os = "macos"))]
pub const RECORD_MODIFIER_HINT: &str = "Or press and release one modifier alone (Right Alt, \
     Right Ctrl…).";

/// Under the hotkey mode when the dictation key is a modifier alone (issue #26 item 2).
#[cfg(target_os = "macos")]
pub const MODIFIER_ALONE_HELP: &str = "Persyk watches for this key alone (macOS asks once for \
     Input Monitoring) and never takes it from other apps: pressed with another key, it does \
     what it always did and starts nothing.";
#[cfg(not(target_os = "macos"))]
pub const MODIFIER_ALONE_HELP: &str = "Persyk watches for this key alone and never takes it \
     from other apps: pressed with another key, it does what it always did and starts nothing.";

/// How to stop Fn (Globe) opening the emoji picker or switching the input source, shown
/// when Fn is the dictation key. macOS labels the setting "Press 🌐 key to"; egui's fonts
/// have no 🌐, so the key is named in words.
pub const FN_EMOJI_HELP: &str = "So that Fn does nothing else when you press it alone: System \
     Settings › Keyboard › \"Press Globe key to\": choose \"Do Nothing\".";

/// The button shown when macOS refused the keyboard observer.
pub const OPEN_INPUT_MONITORING: &str = "Open Input Monitoring settings";

/// System Settings › Privacy & Security › Input Monitoring.
pub const PRIVACY_INPUT_MONITORING_URL: &str =
    "x-apple.systempreferences:com.apple.preference.security?Privacy_ListenEvent";
pub const RECORD_PASTE_SHORTCUT: &str = "Record paste shortcut";
/// Under the on-device language and "Translate to English".
pub const LOCAL_LANGUAGE_CAPTION: &str = "The language and translation apply to models for 99 \
     languages (base, large-v3-turbo); English-only models (.en) always hear English. \
     Translated dictation saves the English words, and the session notes the language.";
pub const LOCAL_VOCABULARY: &str = "Use these words on the device";
pub const LOCAL_VOCABULARY_CAPTION: &str = "Where the model writes something that sounds like \
     one of your words, Persyk recognizes that stretch again with the words as a hint and \
     takes your spelling only if the model agrees; nothing else changes, and the words it \
     first heard stay in the session.";
pub const RECORD_CLEAN_SHORTCUT: &str = "Record clean shortcut";

/// Which shortcut the recorder sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ShortcutTarget {
    Dictation,
    PasteLast,
    DictateClean,
}

/// The key recorder (Settings › Shortcut): which shortcut is being recorded, and why the
/// last combination pressed was refused.
#[derive(Debug, Default)]
pub(super) struct Recorder {
    pub(super) target: Option<ShortcutTarget>,
    pub(super) refused: Option<(ShortcutTarget, HotkeyError)>,
}

fn refused_sentence(e: &HotkeyError) -> &'static str {
    match e {
        HotkeyError::NeedsModifier => MODIFIER_NEEDED,
        HotkeyError::ModifierDictationOnly => {
            "A modifier alone can only be the dictation key: press a combination for pasting."
        }
        _ => "Persyk cannot use that key for a shortcut: choose another.",
    }
}

/// Why a typing key alone is refused (the modifiers named as this platform's keyboard does).
#[cfg(target_os = "macos")]
const MODIFIER_NEEDED: &str = "That key types text: hold Control, Option or Command with it \
     (F-keys work alone). Press Record shortcut to try again.";
#[cfg(not(target_os = "macos"))]
const MODIFIER_NEEDED: &str = "That key types text: hold Ctrl or Alt with it (F-keys work \
     alone). Press Record shortcut to try again.";

/// A combination the Mac way (`⌥Space`, `⌃⇧D`): egui's fonts have no ⌃ ⌥ ⇧ ⌘, so the
/// modifiers are painted as strokes, then the key's name is written; the accessible label
/// is the same text ([`hotkey::display`]).
fn keys_label_ui(ui: &mut egui::Ui, keys: &global_hotkey::hotkey::HotKey) -> egui::Response {
    let font = egui::FontId::proportional(style::HEADING_SIZE);
    let color = ui.visuals().strong_text_color();
    let galley = ui
        .painter()
        .layout_no_wrap(hotkey::key_name(keys.key), font, color);
    let mods: Vec<Modifiers> = [
        Modifiers::CONTROL,
        Modifiers::ALT,
        Modifiers::SHIFT,
        Modifiers::META,
    ]
    .into_iter()
    .filter(|m| keys.mods.contains(*m))
    .collect();
    let glyph = galley.size().y * 0.62;
    let step = glyph + 3.0;
    let size = egui::vec2(mods.len() as f32 * step + galley.size().x, galley.size().y);
    let (rect, response) = ui.allocate_exact_size(size, egui::Sense::hover());
    let label = hotkey::display(keys);
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Label, true, label.as_str()));
    let painter = ui.painter_at(rect.expand(1.0));
    let stroke = egui::Stroke::new(1.4, color);
    for (i, m) in mods.iter().enumerate() {
        let min = egui::pos2(rect.left() + i as f32 * step, rect.center().y - glyph / 2.0);
        paint_modifier(
            &painter,
            egui::Rect::from_min_size(min, egui::vec2(glyph, glyph)),
            *m,
            stroke,
        );
    }
    painter.galley(
        egui::pos2(rect.left() + mods.len() as f32 * step, rect.top()),
        galley,
        color,
    );
    response
}

/// A modifier alone the Mac way: "Fn", or the side in words and the modifier's symbol
/// painted ("Right ⌥"); the accessible label is the text ([`ModKey::display`]).
fn modifier_label_ui(ui: &mut egui::Ui, key: crate::app::modkeys::ModKey) -> egui::Response {
    use crate::app::modkeys::ModKey;
    let font = egui::FontId::proportional(style::HEADING_SIZE);
    let color = ui.visuals().strong_text_color();
    let (word, symbol) = match key.side() {
        None => ("Fn", None),
        Some((side, _)) => (
            side,
            Some(match key {
                ModKey::LeftCtrl | ModKey::RightCtrl => Modifiers::CONTROL,
                ModKey::LeftAlt | ModKey::RightAlt => Modifiers::ALT,
                ModKey::LeftShift | ModKey::RightShift => Modifiers::SHIFT,
                _ => Modifiers::META,
            }),
        ),
    };
    let galley = ui.painter().layout_no_wrap(word.to_owned(), font, color);
    let glyph = galley.size().y * 0.62;
    let extra = if symbol.is_some() { glyph + 6.0 } else { 0.0 };
    let size = egui::vec2(galley.size().x + extra, galley.size().y);
    let (rect, response) = ui.allocate_exact_size(size, egui::Sense::hover());
    let label = key.display();
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Label, true, label.as_str()));
    let painter = ui.painter_at(rect.expand(1.0));
    let width = galley.size().x;
    painter.galley(rect.left_top(), galley, color);
    if let Some(m) = symbol {
        let min = egui::pos2(rect.left() + width + 6.0, rect.center().y - glyph / 2.0);
        paint_modifier(
            &painter,
            egui::Rect::from_min_size(min, egui::vec2(glyph, glyph)),
            m,
            egui::Stroke::new(1.4, color),
        );
    }
    response
}

/// One modifier's symbol as strokes in the square `r`: ⌃ a caret, ⌥ the option switch,
/// ⇧ an outlined arrow, ⌘ the looped square.
fn paint_modifier(painter: &egui::Painter, r: egui::Rect, m: Modifiers, stroke: egui::Stroke) {
    let at = |x: f32, y: f32| egui::pos2(r.left() + x * r.width(), r.top() + y * r.height());
    if m == Modifiers::CONTROL {
        painter.line(vec![at(0.1, 0.6), at(0.5, 0.2), at(0.9, 0.6)], stroke);
    } else if m == Modifiers::ALT {
        painter.line(
            vec![at(0.0, 0.2), at(0.35, 0.2), at(0.7, 0.85), at(1.0, 0.85)],
            stroke,
        );
        painter.line_segment([at(0.6, 0.2), at(1.0, 0.2)], stroke);
    } else if m == Modifiers::SHIFT {
        let arrow = vec![
            at(0.5, 0.0),
            at(1.0, 0.5),
            at(0.75, 0.5),
            at(0.75, 1.0),
            at(0.25, 1.0),
            at(0.25, 0.5),
            at(0.0, 0.5),
        ];
        painter.add(egui::Shape::closed_line(arrow, stroke));
    } else {
        // ⌘: a square whose corners run out into loops.
        let radius = 0.17 * r.width();
        for (x, y) in [(0.25, 0.25), (0.75, 0.25), (0.25, 0.75), (0.75, 0.75)] {
            painter.circle_stroke(at(x, y), radius, stroke);
        }
        let square = vec![at(0.25, 0.42), at(0.25, 0.58)];
        painter.line(square, stroke);
        for (a, b) in [
            ((0.42, 0.25), (0.58, 0.25)),
            ((0.42, 0.75), (0.58, 0.75)),
            ((0.75, 0.42), (0.75, 0.58)),
        ] {
            painter.line_segment([at(a.0, a.1), at(b.0, b.1)], stroke);
        }
    }
}

/// The first key pressed this frame, with its modifiers, taken out of the input so nothing
/// else on the page acts on it.
fn take_key_press(input: &mut egui::InputState) -> Option<(egui::Key, egui::Modifiers)> {
    let mut found = None;
    input.events.retain(|e| match e {
        egui::Event::Key {
            key,
            pressed: true,
            repeat: false,
            modifiers,
            ..
        } if found.is_none() => {
            found = Some((*key, *modifiers));
            false
        }
        _ => true,
    });
    found
}

/// egui's modifiers as the hotkey library's (⌘ is the Command key on macOS; egui reports
/// no Super key elsewhere).
fn hotkey_modifiers(m: egui::Modifiers) -> Modifiers {
    let mut out = Modifiers::empty();
    for (held, modifier) in [
        (m.ctrl, Modifiers::CONTROL),
        (m.alt, Modifiers::ALT),
        (m.shift, Modifiers::SHIFT),
        (m.mac_cmd, Modifiers::META),
    ] {
        if held {
            out |= modifier;
        }
    }
    out
}

/// The key's physical position as the hotkey library names it (US layout positions, as the
/// system's hotkeys are); `None` for keys a shortcut cannot use.
fn key_code(key: egui::Key) -> Option<Code> {
    use egui::Key as K;
    let letters = [
        Code::KeyA,
        Code::KeyB,
        Code::KeyC,
        Code::KeyD,
        Code::KeyE,
        Code::KeyF,
        Code::KeyG,
        Code::KeyH,
        Code::KeyI,
        Code::KeyJ,
        Code::KeyK,
        Code::KeyL,
        Code::KeyM,
        Code::KeyN,
        Code::KeyO,
        Code::KeyP,
        Code::KeyQ,
        Code::KeyR,
        Code::KeyS,
        Code::KeyT,
        Code::KeyU,
        Code::KeyV,
        Code::KeyW,
        Code::KeyX,
        Code::KeyY,
        Code::KeyZ,
    ];
    let digits = [
        Code::Digit0,
        Code::Digit1,
        Code::Digit2,
        Code::Digit3,
        Code::Digit4,
        Code::Digit5,
        Code::Digit6,
        Code::Digit7,
        Code::Digit8,
        Code::Digit9,
    ];
    let functions = [
        Code::F1,
        Code::F2,
        Code::F3,
        Code::F4,
        Code::F5,
        Code::F6,
        Code::F7,
        Code::F8,
        Code::F9,
        Code::F10,
        Code::F11,
        Code::F12,
        Code::F13,
        Code::F14,
        Code::F15,
        Code::F16,
        Code::F17,
        Code::F18,
        Code::F19,
        Code::F20,
        Code::F21,
        Code::F22,
        Code::F23,
        Code::F24,
    ];
    let name = key.name();
    if let [c] = name.as_bytes()
        && c.is_ascii_uppercase()
    {
        return letters.get(usize::from(c - b'A')).copied();
    }
    if let Some(n) = name.strip_prefix('F').and_then(|n| n.parse::<usize>().ok()) {
        return functions.get(n.checked_sub(1)?).copied();
    }
    Some(match key {
        K::Num0
        | K::Num1
        | K::Num2
        | K::Num3
        | K::Num4
        | K::Num5
        | K::Num6
        | K::Num7
        | K::Num8
        | K::Num9 => {
            let n = name.bytes().last()?.checked_sub(b'0')?;
            return digits.get(usize::from(n)).copied();
        }
        K::ArrowDown => Code::ArrowDown,
        K::ArrowLeft => Code::ArrowLeft,
        K::ArrowRight => Code::ArrowRight,
        K::ArrowUp => Code::ArrowUp,
        K::Escape => Code::Escape,
        K::Tab => Code::Tab,
        K::Backspace => Code::Backspace,
        K::Enter => Code::Enter,
        K::Space => Code::Space,
        K::Insert => Code::Insert,
        K::Delete => Code::Delete,
        K::Home => Code::Home,
        K::End => Code::End,
        K::PageUp => Code::PageUp,
        K::PageDown => Code::PageDown,
        K::Comma => Code::Comma,
        K::Backslash => Code::Backslash,
        K::Slash => Code::Slash,
        K::OpenBracket => Code::BracketLeft,
        K::CloseBracket => Code::BracketRight,
        K::Backtick => Code::Backquote,
        K::Minus => Code::Minus,
        K::Period => Code::Period,
        K::Equals => Code::Equal,
        K::Semicolon => Code::Semicolon,
        K::Quote => Code::Quote,
        _ => return None,
    })
}

/// What "Tap or hold" means, under the mode choice.
pub const AUTO_MODE_HELP: &str = "Tap the hotkey to start dictating hands-free and tap again \
     to stop; or hold it while you speak and let go to stop.";

/// The Startup checkbox's label.
pub const START_AT_LOGIN: &str = "Start Persyk at login";

/// What Settings says when macOS waits for the user to allow the login item.
pub const NEEDS_LOGIN_APPROVAL: &str = "macOS asks you to allow Persyk to start at login: \
     turn it on in System Settings › General › Login Items.";

/// Why the typed paste-last shortcut cannot be used (`None`: it can, or it is empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PasteLastProblem {
    Invalid,
    SameAsHotkey,
    /// Already the dictation key or the paste-last shortcut (for Dictate + clean).
    SameAsAnother,
}

impl PasteLastProblem {
    fn sentence(self) -> &'static str {
        match self {
            PasteLastProblem::Invalid => {
                "Not a key combination Persyk understands: try Ctrl+Alt+V."
            }
            PasteLastProblem::SameAsHotkey => {
                "This is already the dictation hotkey: choose another combination."
            }
            PasteLastProblem::SameAsAnother => {
                "This is already another Persyk shortcut: choose another combination."
            }
        }
    }

    fn code(self) -> &'static str {
        match self {
            PasteLastProblem::Invalid => "hotkey.invalid",
            PasteLastProblem::SameAsHotkey | PasteLastProblem::SameAsAnother => "hotkey.taken",
        }
    }
}

/// Why the typed Dictate + clean shortcut cannot be used: not a combination, or the
/// dictation key's or the paste-last shortcut's.
fn dictate_clean_problem(form: &SettingsForm) -> Option<PasteLastProblem> {
    let other = |text: &str| {
        hotkey::parse_keys(text)
            .ok()
            .flatten()
            .and_then(hotkey::Shortcut::keys)
    };
    match hotkey::parse_combination(&form.dictate_clean) {
        Err(_) => Some(PasteLastProblem::Invalid),
        Ok(Some(clean))
            if [other(&form.hotkey), other(&form.paste_last)]
                .into_iter()
                .flatten()
                .any(|k| k.id() == clean.id()) =>
        {
            Some(PasteLastProblem::SameAsAnother)
        }
        Ok(_) => None,
    }
}

fn paste_last_problem(form: &SettingsForm) -> Option<PasteLastProblem> {
    match hotkey::parse_combination(&form.paste_last) {
        Err(_) => Some(PasteLastProblem::Invalid),
        Ok(Some(paste))
            if hotkey::parse_keys(&form.hotkey)
                .ok()
                .flatten()
                .and_then(hotkey::Shortcut::keys)
                .is_some_and(|dictation| dictation.id() == paste.id()) =>
        {
            Some(PasteLastProblem::SameAsHotkey)
        }
        Ok(_) => None,
    }
}

/// What Settings says once a notification could not be shown.
#[cfg(target_os = "macos")]
pub const NOTIFICATIONS_OFF: &str = "Notifications are off for Persyk, so finished dictations \
     are copied without a banner. Turn them on in System Settings › Notifications › Persyk.";
#[cfg(not(target_os = "macos"))]
pub const NOTIFICATIONS_OFF: &str = "Notifications are off: the desktop did not show Persyk's \
     notification, so finished dictations are copied without one. Turn notifications on in \
     the desktop's settings.";

/// What Settings says when macOS refuses notifications to this build outright (an
/// ad-hoc-signed Persyk.app, `UNErrorDomain` 1): System Settings does not list such a build,
/// so it is not sent there (issue #36 item 5).
pub const NOTIFICATIONS_NOT_ALLOWED: &str = "macOS does not allow notifications for this build \
     of Persyk, and System Settings cannot turn them on for it: finished dictations are copied \
     without a banner, and the Dictation page says each one.";

/// Settings' line for a notification that could not be shown, from the reason the effects
/// reported: the real one when macOS refuses this build, "off" (and where to turn them on)
/// otherwise.
pub fn notifications_headline(reason: &str) -> &'static str {
    if reason == crate::app::effects::NOTIFICATIONS_NOT_ALLOWED {
        NOTIFICATIONS_NOT_ALLOWED
    } else {
        NOTIFICATIONS_OFF
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn choosing_a_synced_folder_moves_nothing_and_keeps_the_old_one_searched() {
        let tmp = tempfile::tempdir().expect("tmp");
        let target = tmp.path().join("Sync/Persyk");
        let mut form = SettingsForm::from_settings(&Settings::default(), false);
        form.additional = "/Volumes/Old".into();
        move_history_to(&mut form, &target, "/Users/anna/Documents/persyk/sessions");
        assert_eq!(form.directory, target.display().to_string());
        assert_eq!(
            form.additional,
            "/Volumes/Old\n/Users/anna/Documents/persyk/sessions"
        );
        assert!(target.is_dir(), "the chosen folder is made");
        // Choosing it again, or another place after it, never loses a folder.
        move_history_to(&mut form, &target, "/Users/anna/Documents/persyk/sessions");
        assert_eq!(form.additional.lines().count(), 2);
        let other = tmp.path().join("Dropbox/Persyk");
        move_history_to(&mut form, &other, "/Users/anna/Documents/persyk/sessions");
        assert!(
            form.additional
                .lines()
                .any(|l| l == target.display().to_string())
        );
        let settings = form.to_settings(&Settings::default());
        assert_eq!(
            settings.sessions.directory.as_deref(),
            Some(other.as_path())
        );
        assert_eq!(settings.sessions.additional_directories.len(), 3);
    }
    use super::*;

    /// Issue #36 item 5: a build macOS refuses notifications to is not sent to a System
    /// Settings pane that does not list it; notifications turned off still are.
    #[test]
    fn issue36_05_settings_says_the_real_reason_notifications_are_refused() {
        let refused = notifications_headline(crate::app::effects::NOTIFICATIONS_NOT_ALLOWED);
        assert_eq!(refused, NOTIFICATIONS_NOT_ALLOWED);
        assert!(!refused.contains("Turn them on"), "{refused}");
        assert_eq!(
            notifications_headline(crate::app::effects::NOTIFICATIONS_OFF),
            NOTIFICATIONS_OFF
        );
    }

    #[test]
    fn settings_form_round_trips_and_keeps_unknown_keys() {
        let mut s = Settings::default();
        s.other.insert("future".into(), serde_json::json!({"x": 1}));
        let form = SettingsForm::from_settings(&s, false);
        let back = form.to_settings(&s);
        assert_eq!(back.other, s.other);
        assert_eq!(back.provider, s.provider);
        assert_eq!(back.sessions, s.sessions);
        assert_eq!(back.hotkey.keys.as_deref(), Some("Alt+Space"));
    }

    #[test]
    fn the_recognition_choice_round_trips() {
        let s = Settings::default();
        let mut form = SettingsForm::from_settings(&s, false);
        assert!(!form.local);
        assert_eq!(form.local_model, DEFAULT_LOCAL_MODEL);
        // The default model is not written out; another one, a file and threads are.
        form.local = true;
        let back = form.to_settings(&s);
        assert_eq!(back.recognition.engine, RecognitionEngine::Local);
        assert_eq!(back.recognition.local_model, None);
        form.local_model = "small.en".into();
        form.local_threads = 4;
        let back = form.to_settings(&s);
        assert_eq!(back.recognition.local_model.as_deref(), Some("small.en"));
        assert_eq!(back.recognition.local_threads, Some(4));
        form.use_model_file = true;
        form.model_path = " /m/ggml-x.bin ".into();
        let back = form.to_settings(&s);
        assert_eq!(
            back.recognition.local_model.as_deref(),
            Some("/m/ggml-x.bin")
        );
        let again = SettingsForm::from_settings(&back, false);
        assert!(again.use_model_file && again.local);
        assert_eq!(again.model_path, "/m/ggml-x.bin");
        assert_eq!(again.local_threads, 4);
    }

    #[test]
    fn the_sounds_choice_round_trips() {
        let s = Settings::default();
        let mut form = SettingsForm::from_settings(&s, false);
        assert!(form.sounds);
        // On is the default and is not written out; off is.
        assert_eq!(form.to_settings(&s).feedback.sounds, None);
        form.sounds = false;
        let back = form.to_settings(&s);
        assert_eq!(back.feedback.sounds, Some(false));
        assert!(!back.feedback.sounds_enabled());
        let mut again = SettingsForm::from_settings(&back, false);
        assert!(!again.sounds);
        again.sounds = true;
        assert_eq!(again.to_settings(&back).feedback.sounds, Some(true));
    }

    #[test]
    fn the_indicator_choice_round_trips_and_keeps_unknown_keys() {
        let s: Settings =
            serde_json::from_str(r#"{"feedback": {"later": 1}, "future": true}"#).unwrap();
        let mut form = SettingsForm::from_settings(&s, false);
        assert!(form.indicator);
        assert_eq!(form.to_settings(&s).feedback.indicator, None);
        form.indicator = false;
        let back = form.to_settings(&s);
        assert_eq!(back.feedback.indicator, Some(false));
        assert!(!back.feedback.indicator_enabled());
        let json = serde_json::to_value(&back).unwrap();
        assert_eq!(json["feedback"]["indicator"], false);
        assert_eq!(json["future"], true);
        assert_eq!(json["feedback"]["later"], 1);
        assert!(!SettingsForm::from_settings(&back, false).indicator);
    }
}
