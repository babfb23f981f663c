//! The Dictation page: a large centred Start/Stop control with the state, the elapsed time
//! and the input level under it, then the live transcript (or the finished recording's) in a
//! card filling the rest of the window.

use super::style::{self, Icon, RecordFace, space};
use super::*;

impl PersykUi {
    pub(super) fn dictation_page(&mut self, ui: &mut egui::Ui) {
        self.update_banner_ui(ui);
        // While no recognizer is usable: why, with the button that fixes it (Start is off).
        let blocker = self.blocker().filter(|_| !self.is_recording());
        if let Some(b) = blocker {
            self.blocker_ui(ui, b);
        }
        let blocked = blocker.map(|b| self.blocker_sentence(b));
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
            let disabled = blocked.as_deref().filter(|_| face == RecordFace::Start);
            if style::record_button(ui, face, label, meter, disabled).clicked() {
                actions.push(match face {
                    RecordFace::Stop => Action::Stop,
                    _ => Action::Start,
                });
            }
            ui.add_space(space::XS);
            if let Some(c) = &self.cancelled {
                let left = c.until.saturating_duration_since(Instant::now()).as_secs() + 1;
                ui.label(RichText::new("Recording cancelled").strong());
                ui.label(style::caption(format!(
                    "Nothing was copied. It is deleted in {left} s unless you undo."
                )));
                if ui.button("Undo").clicked() {
                    actions.push(Action::UndoCancel);
                }
                ui.add_space(space::S);
            }
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
                        format!(
                            "Click here, the menu-bar icon or press {}, then talk.",
                            keys.trim()
                        )
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
                    // A sentence and its fix; the code in the details line (and the log).
                    let color = ui.visuals().error_fg_color;
                    self.problem_ui(ui, code, color, &mut actions);
                }
                Dictation::Live(l) if l.cleaning => {
                    super::cleanup::cleaning_status_ui(
                        ui,
                        l.cleanup.unwrap_or(self.settings.cleanup.mode.label()),
                        &mut actions,
                    );
                }
                Dictation::Live(l) => {
                    let view = l.live.view.borrow();
                    live_status(ui, l, &view);
                }
                Dictation::Done(d) => {
                    done_status(ui, d, &mut actions, |ui, code, actions| {
                        let color = ui.visuals().warn_fg_color;
                        self.problem_ui(ui, code, color, actions)
                    });
                    if !d.discarded && !d.finished.removed {
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
        self.files_ui(ui, &mut actions);
        // The transcript under it, in a card filling the rest of the window.
        let view = match &self.dictation {
            Dictation::Live(l) => Some((
                std::borrow::Cow::Owned(l.live.view.borrow().clone()),
                true,
                false,
            )),
            // Removal after the recording needed the provider's connection; on the device
            // nothing was remote, so the note would not apply.
            Dictation::Done(d) => d
                .view
                .as_ref()
                .map(|v| (std::borrow::Cow::Borrowed(v), false, d.online)),
            _ => None,
        };
        if let Some((view, live, note)) = view {
            let rows = &mut self.transcript_rows;
            ui.add_space(space::M);
            style::card(ui).show(ui, |ui| {
                ui.set_min_size(ui.available_size());
                transcript(ui, &view, (live, note), &self.removals, rows, &mut actions);
            });
        }
        self.pending.extend(actions);
    }

    pub(super) fn discard_dialog(&mut self, ctx: &egui::Context) {
        let mut actions = Vec::new();
        // The session just recorded is discarded; one from the history is deleted.
        let just_recorded = matches!(&self.dictation, Dictation::Done(d)
            if self.confirm_discard.as_ref() == Some(&d.finished.session));
        let modal = egui::Modal::new(egui::Id::unique("persyk-discard")).show(ctx, |ui| {
            ui.heading(if just_recorded {
                "Discard this session?"
            } else {
                "Delete this session?"
            });
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
    ui.label(style::caption("Saved to disk as you speak"));
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

/// Under the control once a recording ended: what was saved, why part of it was not
/// transcribed (a sentence with its fix, the code in a details line), what became of the
/// text. `problem_ui` draws a code as a sentence with its fix.
pub(super) fn done_status(
    ui: &mut egui::Ui,
    d: &DoneRec,
    actions: &mut Vec<Action>,
    problem_ui: impl Fn(&mut egui::Ui, &str, &mut Vec<Action>),
) {
    let f = &d.finished;
    if d.discarded {
        ui.label("This session was deleted.");
        return;
    }
    if f.removed {
        // A start that recorded nothing: said as a sentence, and no session was left.
        ui.colored_label(
            ui.visuals().error_fg_color,
            "The recording could not start.",
        );
        let code = f
            .error
            .as_deref()
            .or(f.halted.as_deref().map(crate::pipeline::halt_code));
        if let Some(code) = code {
            problem_ui(ui, code, actions);
        }
        ui.label("Nothing was recorded, so no session was kept.");
        return;
    }
    let length = fmt_elapsed(Duration::from_millis(f.duration_ms));
    if let Some(code) = &f.error {
        ui.colored_label(
            ui.visuals().error_fg_color,
            "The recording could not be finished.",
        );
        problem_ui(ui, code, actions);
    } else if f.complete {
        ui.label(format!("Saved: {length} recorded."));
    } else {
        ui.colored_label(
            ui.visuals().warn_fg_color,
            format!("Saved: {length} recorded, but part of it was not transcribed."),
        );
        if let Some(reason) = f.halted.as_deref() {
            let code = crate::pipeline::halt_code(reason);
            if code.starts_with("provider.") || code == "engine.halted" {
                let fix = (code == "provider.unauthorized").then_some(Fix::CheckKey);
                ui.colored_label(
                    ui.visuals().warn_fg_color,
                    format!("{}.", crate::app::model::halt_sentence(reason)),
                );
                if let Some(fix) = fix
                    && ui.button("Check API key").clicked()
                {
                    actions.push(Action::Fix(fix));
                }
                super::onboarding::details_ui(ui, crate::app::model::halt_details(reason));
            } else {
                problem_ui(ui, code, actions);
            }
        }
    }
    super::cleanup::outcome_ui(ui, f);
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
    /// While recording, before any text: the microphone is heard (on the device the first
    /// text comes at the first pause).
    Listening,
}

/// The transcript's rows in reading order: canonical messages with their gap markers
/// (`gap_at` is sorted), then provisional text, then the note when `note` (a finished
/// recording whose removals needed the provider's connection); "Listening…" alone while
/// `live` and nothing has come yet.
pub(super) fn transcript_lines(view: &EngineView, (live, note): (bool, bool)) -> Vec<Line> {
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
    if note && !view.messages.is_empty() {
        lines.push(Line::Note);
    }
    if live && lines.is_empty() {
        lines.push(Line::Listening);
    }
    lines
}

/// The canonical messages with gap markers, then provisional text: a virtualized list
/// (only the rows in view are laid out), following the end while it is in view.
pub(super) fn transcript(
    ui: &mut egui::Ui,
    view: &EngineView,
    (live, note): (bool, bool),
    removals: &HashMap<String, RemovalStatus>,
    rows: &mut RowHeights,
    actions: &mut Vec<Action>,
) {
    let lines = transcript_lines(view, (live, note));
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
        Line::Listening => {
            ui.label(RichText::new("Listening…").italics().color(Color32::GRAY));
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
            heard_ms: 0,
        }
    }

    #[test]
    fn transcript_lines_put_gaps_before_the_message_they_precede() {
        use Line::*;
        assert_eq!(
            transcript_lines(&view(3, vec![0, 2, 2, 3], 1), (false, false)),
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
            transcript_lines(&view(1, vec![], 0), (false, true)),
            vec![Message(0), Note]
        );
        assert_eq!(
            transcript_lines(&view(0, vec![0], 0), (false, true)),
            vec![Gap]
        );
        // On the device nothing was remote: no note.
        assert_eq!(
            transcript_lines(&view(1, vec![], 0), (false, false)),
            vec![Message(0)]
        );
    }

    #[test]
    fn issue24_10_a_recording_says_listening_until_its_first_text() {
        use Line::*;
        assert_eq!(
            transcript_lines(&view(0, vec![], 0), (true, false)),
            vec![Listening]
        );
        assert_eq!(
            transcript_lines(&view(0, vec![], 1), (true, false)),
            vec![Provisional(0)]
        );
        assert_eq!(
            transcript_lines(&view(1, vec![], 0), (true, false)),
            vec![Message(0)]
        );
        assert!(transcript_lines(&view(0, vec![], 0), (false, false)).is_empty());
    }
}
