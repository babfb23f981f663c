//! The Dictation page: a large centred Start/Stop control with the state, the elapsed time
//! and the input level under it, then the live transcript (or the finished recording's) in a
//! card filling the rest of the window.

use super::style::{self, Icon, RecordFace, space};
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
        // Without a transcript under it, the control sits in the upper middle of the page.
        let alone = matches!(
            &self.dictation,
            Dictation::Idle | Dictation::Starting | Dictation::Failed(_)
        );
        ui.add_space(if alone {
            (ui.available_height() * 0.2).max(space::M)
        } else {
            space::M
        });
        // The control, centred, with what it is doing under it.
        ui.vertical_centered(|ui| {
            let (face, label, level) = match &self.dictation {
                Dictation::Idle | Dictation::Failed(_) | Dictation::Done(_) => {
                    (RecordFace::Start, "Start dictation", None)
                }
                Dictation::Starting => (RecordFace::Busy, "Starting…", None),
                Dictation::Live(l) if l.stopping => (RecordFace::Busy, "Finishing…", None),
                Dictation::Live(l) => (RecordFace::Stop, "Stop dictation", Some(l.live.level())),
            };
            let meter = level.map(|l| ((20.0 * l.max(1e-6).log10() + 60.0) / 60.0).clamp(0.0, 1.0));
            if style::record_button(ui, face, label, meter).clicked() {
                actions.push(match face {
                    RecordFace::Stop => Action::Stop,
                    _ => Action::Start,
                });
            }
            ui.add_space(space::XS);
            match &self.dictation {
                Dictation::Idle => {
                    ui.label(RichText::new("Start dictation").strong());
                    let keys = self
                        .settings
                        .hotkey
                        .keys
                        .as_deref()
                        .unwrap_or(crate::settings::DEFAULT_HOTKEY);
                    ui.label(style::caption(if keys.trim().is_empty() {
                        "Click here or the menu-bar icon, then talk.".to_owned()
                    } else {
                        format!("Click here, the menu-bar icon or press {}, then talk.", keys.trim())
                    }));
                }
                Dictation::Starting if self.waiting_permission => {
                    ui.label(RichText::new("Waiting for microphone permission…").strong());
                    ui.label(style::caption(
                        "Answer the system's question to let Persyk use the microphone.",
                    ));
                }
                Dictation::Starting => {
                    ui.label(RichText::new("Connecting…").strong());
                }
                Dictation::Failed(code) => {
                    ui.label(RichText::new("Start dictation").strong());
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
                    let view = l.live.view.borrow();
                    live_status(ui, l, &view);
                }
                Dictation::Done(d) => {
                    done_status(ui, d);
                    if !d.discarded {
                        centered_row(ui, "done-actions", |ui| {
                            if !d.finished.transcript.is_empty()
                                && ui
                                    .add(style::icon_button(Icon::Copy, "Copy transcription"))
                                    .clicked()
                            {
                                actions.push(Action::Copy(d.finished.transcript.clone()));
                            }
                            if ui.add(style::icon_button(Icon::Trash, "Discard")).clicked() {
                                actions.push(Action::AskDiscard);
                            }
                            if !d.finished.complete
                                && d.finished.wav.is_file()
                                && ui
                                    .add(style::icon_button(Icon::Retry, "Transcribe again"))
                                    .clicked()
                            {
                                actions.push(Action::TranscribeAgain(d.finished.wav.clone()));
                            }
                        });
                    }
                }
            }
        });
        // The transcript under it, in a card filling the rest of the window.
        let view = match &self.dictation {
            Dictation::Live(l) => {
                Some((std::borrow::Cow::Owned(l.live.view.borrow().clone()), true))
            }
            Dictation::Done(d) => d
                .view
                .as_ref()
                .map(|v| (std::borrow::Cow::Borrowed(v), false)),
            _ => None,
        };
        if let Some((view, live)) = view {
            let rows = &mut self.transcript_rows;
            ui.add_space(space::M);
            style::card(ui).show(ui, |ui| {
                ui.set_min_size(ui.available_size());
                transcript(ui, &view, live, &self.removals, rows, &mut actions);
            });
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

/// Under the control while recording: the state, the elapsed time, the level meter.
pub(super) fn live_status(ui: &mut egui::Ui, l: &LiveRec, view: &EngineView) {
    let state = match (&view.state, l.stopping) {
        (EngineState::Connecting, _) => "Connecting…".to_owned(),
        (EngineState::Streaming, false) => match &l.origin {
            AudioOrigin::Microphone => "Recording".to_owned(),
            AudioOrigin::File(_) => "Transcribing the saved recording".to_owned(),
        },
        (EngineState::Streaming, true) | (EngineState::Finishing, _) => "Finishing…".to_owned(),
        // Capture goes on: the audio is kept whatever the engine does.
        (EngineState::Halted(reason), _) => format!(
            "{}. Still recording: the audio is saved",
            crate::app::model::halt_sentence(reason)
        ),
        (EngineState::Finished, _) => "Finished".to_owned(),
    };
    ui.label(
        RichText::new(fmt_elapsed(l.started.elapsed()))
            .size(style::TITLE_SIZE)
            .family(egui::FontFamily::Monospace),
    );
    if matches!(view.state, EngineState::Halted(_)) {
        ui.colored_label(ui.visuals().error_fg_color, state);
    } else {
        ui.label(RichText::new(state).strong());
    }
    ui.add_space(space::XS);
    style::level_meter(ui, l.live.level(), 200.0);
    ui.add_space(space::XS);
    ui.label(style::caption(format!("Saving to {}", l.session.display())));
}

/// A row of buttons centred in `ui` (its width is measured on the frame before; a change
/// asks egui to redo the frame, so nothing is drawn off centre).
pub(super) fn centered_row(ui: &mut egui::Ui, salt: &str, add: impl FnOnce(&mut egui::Ui)) {
    let id = ui.scope_id().with(salt);
    let known: Option<f32> = ui.data(|d| d.get_temp(id));
    ui.horizontal(|ui| {
        let space = ((ui.available_width() - known.unwrap_or(0.0)) / 2.0).max(0.0);
        ui.add_space(space);
        let start = ui.cursor().min.x;
        add(ui);
        let width = ui.min_rect().right() - start;
        if known.is_none_or(|k| (k - width).abs() > 0.5) {
            ui.data_mut(|d| d.insert_temp(id, width));
            ui.ctx().request_discard("centre a row of buttons");
        }
    });
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
                    .map(|r| format!(". {}", crate::app::model::halt_sentence(r)))
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
    ui.label(style::caption(format!("Session: {}", f.session.display())));
}

/// One row of the transcript list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Line {
    /// A "[not transcribed]" marker.
    Gap,
    /// `view.messages[n]`.
    Message(usize),
    /// `view.provisional[n]` ("not yet saved").
    Provisional(usize),
    /// After the recording: why removal is no longer offered.
    Note,
}

/// The transcript's rows in reading order: canonical messages with their gap markers
/// (`gap_at` is sorted), then provisional text, then the note.
pub(super) fn transcript_lines(view: &EngineView, live: bool) -> Vec<Line> {
    let mut lines = Vec::with_capacity(view.messages.len() + view.gap_at.len() + 2);
    let mut gaps = view.gap_at.iter().peekable();
    for i in 0..=view.messages.len() {
        while gaps.next_if(|&&g| g <= i).is_some() {
            lines.push(Line::Gap);
        }
        if i < view.messages.len() {
            lines.push(Line::Message(i));
        }
    }
    lines.extend(gaps.map(|_| Line::Gap));
    lines.extend((0..view.provisional.len()).map(Line::Provisional));
    if !live && !view.messages.is_empty() {
        lines.push(Line::Note);
    }
    lines
}

/// The canonical messages with gap markers, then provisional text: a virtualized list
/// (only the rows in view are laid out), following the end while it is in view.
pub(super) fn transcript(
    ui: &mut egui::Ui,
    view: &EngineView,
    live: bool,
    removals: &HashMap<String, RemovalStatus>,
    rows: &mut RowHeights,
    actions: &mut Vec<Action>,
) {
    let lines = transcript_lines(view, live);
    let options = ListOptions {
        stick_to_bottom: true,
        shrink_height: true,
        ..ListOptions::default()
    };
    virtual_rows_with(ui, lines.len(), rows, options, |ui, n| match lines[n] {
        Line::Gap => {
            ui.label(RichText::new("[not transcribed]").italics().weak());
        }
        Line::Message(i) => {
            let m = &view.messages[i];
            ui.push_id(&m.entry_id, |ui| {
                ui.horizontal_wrapped(|ui| {
                    let who = match m.speaker {
                        crate::recognize::Speaker::User => "",
                        _ => "Assistant: ",
                    };
                    if m.removed {
                        ui.label(
                            RichText::new(format!("{who}{}", m.text))
                                .strikethrough()
                                .weak(),
                        );
                        ui.label(RichText::new("(removed)").small().weak());
                    } else {
                        ui.label(format!("{who}{}", m.text));
                        if style::icon_only_button(ui, Icon::Copy, "Copy").clicked() {
                            actions.push(Action::Copy(m.text.clone()));
                        }
                        let waiting = removals.get(&m.entry_id) == Some(&RemovalStatus::Waiting);
                        if live
                            && ui
                                .add_enabled_ui(!waiting, |ui| {
                                    style::icon_only_button(ui, Icon::Trash, "Remove")
                                })
                                .inner
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
        Line::Provisional(i) => {
            ui.horizontal_wrapped(|ui| {
                ui.label(
                    RichText::new(&view.provisional[i].1)
                        .italics()
                        .color(Color32::GRAY),
                );
                ui.label(RichText::new("not yet saved").small().weak());
            });
        }
        Line::Note => {
            ui.label(
                RichText::new(
                    "Removal needs the live provider connection; it closed when the recording \
                     ended.",
                )
                .small()
                .weak(),
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recognize::Speaker;
    use crate::recognize::{EngineState, PublishedMessage};

    fn view(messages: usize, gap_at: Vec<usize>, provisional: usize) -> EngineView {
        EngineView {
            state: EngineState::Streaming,
            provisional: (0..provisional)
                .map(|i| (format!("item_p{i}"), format!("words {i}")))
                .collect(),
            messages: (0..messages)
                .map(|i| PublishedMessage {
                    entry_id: format!("entry-{i}"),
                    item_id: format!("item_{i}"),
                    speaker: Speaker::User,
                    text: format!("message {i}"),
                    removed: false,
                })
                .collect(),
            gaps: gap_at.len(),
            gap_at,
        }
    }

    #[test]
    fn transcript_lines_put_gaps_before_the_message_they_precede() {
        use Line::*;
        assert_eq!(
            transcript_lines(&view(3, vec![0, 2, 2, 3], 1), true),
            vec![
                Gap,
                Message(0),
                Message(1),
                Gap,
                Gap,
                Message(2),
                Gap,
                Provisional(0)
            ]
        );
        assert_eq!(
            transcript_lines(&view(1, vec![], 0), false),
            vec![Message(0), Note]
        );
        assert_eq!(transcript_lines(&view(0, vec![0], 0), false), vec![Gap]);
    }
}
