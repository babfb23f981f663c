//! The Dictation page: start/stop, the live transcript, the finished recording.

use super::*;

impl PersykUi {
    pub(super) fn dictation_page(&mut self, ui: &mut egui::Ui) {
        if !self.form.key_stored && self.settings.recognition.engine == RecognitionEngine::Openai {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                "Add your OpenAI API key in Settings to start dictating.",
            );
        }
        if let Some(note) = &self.microphone_note {
            ui.colored_label(ui.visuals().warn_fg_color, note);
        }
        if let Some(model) = &self.settings.provider.transcription_model
            && let Some(day) = retires_on(model.trim())
        {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                format!(
                    "{} stops working on {day}: switch to {DEFAULT_TRANSCRIPTION_MODEL} in Settings.",
                    model.trim()
                ),
            );
        }
        let mut actions = Vec::new();
        match &self.dictation {
            Dictation::Idle | Dictation::Failed(_) | Dictation::Done(_) => {
                if ui.button("Start dictation").clicked() {
                    actions.push(Action::Start);
                }
            }
            Dictation::Starting => {
                ui.add_enabled(false, egui::Button::new("Starting…"));
            }
            Dictation::Live(l) => {
                let label = if l.stopping {
                    "Finishing…"
                } else {
                    "Stop dictation"
                };
                if ui
                    .add_enabled(!l.stopping, egui::Button::new(label))
                    .clicked()
                {
                    actions.push(Action::Stop);
                }
            }
        }
        match &self.dictation {
            Dictation::Idle => {
                ui.label("Click Start dictation, the menu-bar icon or the hotkey, and talk.");
            }
            Dictation::Starting if self.waiting_permission => {
                ui.label("Waiting for microphone permission…");
                ui.label(
                    RichText::new("Answer the system's question to let Persyk use the microphone.")
                        .small()
                        .weak(),
                );
            }
            Dictation::Starting => {
                ui.label("Connecting…");
            }
            Dictation::Failed(code) => {
                ui.colored_label(
                    ui.visuals().error_fg_color,
                    format!("Could not start: {}", describe_start_failure(code)),
                );
                if code == "capture.permission-denied" {
                    ui.label(
                        "Persyk may not use the microphone. Turn Persyk on in System Settings > \
                         Privacy & Security > Microphone, then start again. Nothing was recorded.",
                    );
                    if ui.button("Open Microphone Privacy Settings").clicked() {
                        actions.push(Action::OpenMicrophoneSettings);
                    }
                }
            }
            Dictation::Live(l) => {
                let view = l.live.view.borrow().clone();
                live_status(ui, l, &view);
                ui.separator();
                transcript(ui, &view, true, &self.removals, &mut actions);
            }
            Dictation::Done(d) => {
                done_status(ui, d);
                ui.horizontal(|ui| {
                    if !d.discarded {
                        if !d.finished.transcript.is_empty()
                            && ui.button("Copy transcription").clicked()
                        {
                            actions.push(Action::Copy(d.finished.transcript.clone()));
                        }
                        if ui.button("Discard").clicked() {
                            actions.push(Action::AskDiscard);
                        }
                        if !d.finished.complete
                            && d.finished.wav.is_file()
                            && ui.button("Transcribe again").clicked()
                        {
                            actions.push(Action::TranscribeAgain(d.finished.wav.clone()));
                        }
                    }
                });
                ui.separator();
                if let Some(view) = &d.view {
                    transcript(ui, view, false, &self.removals, &mut actions);
                }
            }
        }
        self.pending.extend(actions);
    }

    pub(super) fn discard_dialog(&mut self, ctx: &egui::Context) {
        let mut actions = Vec::new();
        let modal = egui::Modal::new(egui::Id::unique("persyk-discard")).show(ctx, |ui| {
            ui.heading("Discard this session?");
            ui.label(
                "The session, its recording and its transcript are deleted from disk. \
                 This cannot be undone.",
            );
            ui.horizontal(|ui| {
                if ui.button("Delete session").clicked() {
                    actions.push(Action::ConfirmDiscard);
                }
                if ui.button("Keep").clicked() {
                    actions.push(Action::CancelDiscard);
                }
            });
        });
        if modal.should_close() && actions.is_empty() {
            actions.push(Action::CancelDiscard);
        }
        self.pending.extend(actions);
    }
}

pub(super) fn describe_start_failure(code: &str) -> String {
    let hint = match code {
        "credentials.no-key" => "no API key; add one in Settings",
        "credentials.store-unavailable" => "the secret store could not be read",
        "app.already-recording" => "a recording is already running",
        "capture.permission-denied" => "microphone access is off for Persyk",
        c if c.starts_with("capture.") => "the microphone could not be opened",
        c if c.starts_with("settings.") => "the settings are not valid",
        _ => "",
    };
    if hint.is_empty() {
        code.to_owned()
    } else {
        format!("{hint} ({code})")
    }
}

pub(super) fn fmt_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

pub(super) fn live_status(ui: &mut egui::Ui, l: &LiveRec, view: &EngineView) {
    ui.horizontal(|ui| {
        let state = match (&view.state, l.stopping) {
            (EngineState::Connecting, _) => "Connecting…".to_owned(),
            (EngineState::Streaming, false) => match &l.origin {
                AudioOrigin::Microphone => "Recording".to_owned(),
                AudioOrigin::File(_) => "Transcribing the saved recording".to_owned(),
            },
            (EngineState::Streaming, true) | (EngineState::Finishing, _) => "Finishing…".to_owned(),
            (EngineState::Halted(reason), _) => format!("Stopped: {reason}"),
            (EngineState::Finished, _) => "Finished".to_owned(),
        };
        if matches!(view.state, EngineState::Halted(_)) {
            ui.colored_label(ui.visuals().error_fg_color, state);
        } else {
            ui.label(state);
        }
        ui.label(fmt_elapsed(l.started.elapsed()));
        // The meter: RMS in dB, -60 dB … 0 dB.
        let level = l.live.level();
        let db = 20.0 * level.max(1e-6).log10();
        let fill = ((db + 60.0) / 60.0).clamp(0.0, 1.0);
        ui.add(
            egui::ProgressBar::new(fill)
                .desired_width(120.0)
                .text(RichText::new("level").small()),
        );
    });
    ui.label(
        RichText::new(format!("Saving to {}", l.session.display()))
            .small()
            .weak(),
    );
}

pub(super) fn done_status(ui: &mut egui::Ui, d: &DoneRec) {
    let f = &d.finished;
    if d.discarded {
        ui.label("This session was deleted.");
        return;
    }
    if let Some(code) = &f.error {
        ui.colored_label(
            ui.visuals().error_fg_color,
            format!("The recording could not be finished ({code})"),
        );
    } else if f.complete {
        ui.label(format!(
            "Saved: {:.1} s, complete",
            f.duration_ms as f64 / 1000.0
        ));
    } else {
        ui.colored_label(
            ui.visuals().warn_fg_color,
            format!(
                "Saved: {:.1} s, incomplete{}",
                f.duration_ms as f64 / 1000.0,
                f.halted
                    .as_deref()
                    .map(|r| format!(" — {r}"))
                    .unwrap_or_default()
            ),
        );
    }
    match &d.clipboard {
        Some(Ok(())) => {
            ui.label("Copied to the clipboard");
        }
        Some(Err(reason)) => {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!("Copying failed ({reason}); the session is saved"),
            );
        }
        None if d.delivering.is_some() => {
            ui.label("Copying and pasting…");
        }
        None if f.error.is_none() => {
            ui.label("Nothing to copy: no words were transcribed");
        }
        None => {}
    }
    super::after_dictation::paste_outcome(ui, d.paste.as_ref());
    ui.label(
        RichText::new(format!("Session: {}", f.session.display()))
            .small()
            .weak(),
    );
}

/// The canonical messages with gap markers, then provisional text.
pub(super) fn transcript(
    ui: &mut egui::Ui,
    view: &EngineView,
    live: bool,
    removals: &HashMap<String, RemovalStatus>,
    actions: &mut Vec<Action>,
) {
    egui::ScrollArea::vertical()
        .stick_to_bottom(true)
        .auto_shrink([false, true])
        .show(ui, |ui| {
            let gap_marker = |ui: &mut egui::Ui, at: usize| {
                for _ in view.gap_at.iter().filter(|&&g| g == at) {
                    ui.label(RichText::new("[not transcribed]").italics().weak());
                }
            };
            for (i, m) in view.messages.iter().enumerate() {
                gap_marker(ui, i);
                ui.push_id(&m.entry_id, |ui| {
                    ui.horizontal_wrapped(|ui| {
                        let who = match m.speaker {
                            crate::realtime::ordering::Speaker::User => "",
                            _ => "Assistant: ",
                        };
                        if m.removed {
                            ui.label(RichText::new(format!("{who}{}", m.text)).strikethrough().weak());
                            ui.label(RichText::new("(removed)").small().weak());
                        } else {
                            ui.label(format!("{who}{}", m.text));
                            if ui.small_button("Copy").clicked() {
                                actions.push(Action::Copy(m.text.clone()));
                            }
                            let waiting = removals.get(&m.entry_id) == Some(&RemovalStatus::Waiting);
                            if live
                                && ui
                                    .add_enabled(!waiting, egui::Button::new("Remove").small())
                                    .clicked()
                            {
                                actions.push(Action::Remove(m.entry_id.clone()));
                            }
                        }
                    });
                    if let Some(status) = removals.get(&m.entry_id) {
                        ui.label(RichText::new(status.describe()).small());
                    }
                });
            }
            gap_marker(ui, view.messages.len());
            for (_, text) in &view.provisional {
                ui.horizontal_wrapped(|ui| {
                    ui.label(RichText::new(text).italics().color(Color32::GRAY));
                    ui.label(RichText::new("not yet saved").small().weak());
                });
            }
            if !live && !view.messages.is_empty() {
                ui.label(
                    RichText::new("Removal needs the live provider connection; it closed when the recording ended.")
                        .small()
                        .weak(),
                );
            }
        });
}
