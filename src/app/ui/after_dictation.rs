//! Settings → "After dictation": copy only, or copy and paste into the active app, and
//! "Put the previous clipboard back after pasting".
//!
//! Invariants:
//! - The paste choice is offered only where pasting can work; where it never can (Wayland,
//!   no display) the section says why in one sentence and the choice is disabled (a saved
//!   `paste` stays saved and shows selected, so nothing changes behind the user's back).
//! - Choosing paste asks the caller to request access ([`AfterDictationRequest::AskAccess`]:
//!   the macOS Accessibility prompt); while access is missing the section explains where to
//!   turn it on and offers to open that pane.
//! - The form converts to and from [`AfterDictationSettings`] without loss.

use eframe::egui;

use super::{Action, PersykUi};
use crate::app::paste::{PRIVACY_ACCESSIBILITY_URL, PasteAvailability, PasteError};
use crate::settings::{AfterAction, AfterDictationSettings};

/// The section's part of the settings form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AfterDictationForm {
    pub paste: bool,
    pub restore_clipboard: bool,
}

impl AfterDictationForm {
    pub fn from_settings(s: &AfterDictationSettings) -> AfterDictationForm {
        AfterDictationForm {
            paste: s.pastes(),
            restore_clipboard: s.restore_clipboard,
        }
    }

    pub fn to_settings(self) -> AfterDictationSettings {
        AfterDictationSettings {
            action: if self.paste {
                AfterAction::Paste
            } else {
                AfterAction::Copy
            },
            restore_clipboard: self.restore_clipboard,
        }
    }
}

/// What the section asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDictationRequest {
    /// Paste was just chosen: ask for access (`Effects::request_paste_access`) and show
    /// the answer.
    AskAccess,
    /// Open the Accessibility pane of System Settings (`paste::PRIVACY_ACCESSIBILITY_URL`).
    OpenAccessibilitySettings,
}

/// What the window says when macOS has not given Accessibility access.
pub const NEEDS_ACCESS: &str = "Pasting needs Accessibility access: turn Persyk on in System \
                                Settings > Privacy & Security > Accessibility. Until then the \
                                text is only copied.";

/// Draws the section's rows (two radio choices, the put-back checkbox, a note); the caller
/// draws the section around them.
pub fn after_dictation_section(
    ui: &mut egui::Ui,
    form: &mut AfterDictationForm,
    availability: &PasteAvailability,
) -> Option<AfterDictationRequest> {
    let mut request = None;
    let can_paste = !matches!(availability, PasteAvailability::Unavailable(_));
    let was = form.paste;
    super::widgets::row(ui, "Transcript", |ui, _| {
        ui.vertical(|ui| {
            ui.radio_value(&mut form.paste, false, "Copy to the clipboard");
            ui.add_enabled_ui(can_paste, |ui| {
                ui.radio_value(&mut form.paste, true, "Copy and paste into the active app");
                ui.add_enabled(
                    form.paste,
                    egui::Checkbox::new(
                        &mut form.restore_clipboard,
                        "Put the previous clipboard back after pasting",
                    ),
                );
            });
        });
    });
    if form.paste && !was {
        request = Some(AfterDictationRequest::AskAccess);
    }
    match availability {
        PasteAvailability::Available => {}
        PasteAvailability::NeedsAccess if form.paste => {
            ui.colored_label(ui.visuals().warn_fg_color, NEEDS_ACCESS);
            if ui.button("Open Accessibility Settings").clicked() {
                request = Some(AfterDictationRequest::OpenAccessibilitySettings);
            }
        }
        PasteAvailability::NeedsAccess => {}
        PasteAvailability::Unavailable(why) => {
            ui.colored_label(ui.visuals().warn_fg_color, *why);
        }
    }
    request
}

impl PersykUi {
    /// Settings → After dictation, below the form's grid.
    pub(super) fn after_dictation_ui(&mut self, ui: &mut egui::Ui) {
        if self.paste_availability == PasteAvailability::NeedsAccess {
            // Cheap (`AXIsProcessTrusted`): notices access granted in System Settings.
            self.paste_availability = self.effects.paste_availability();
        }
        if let Some(request) =
            after_dictation_section(ui, &mut self.form.after, &self.paste_availability)
        {
            self.pending.push(Action::AfterDictation(request));
        }
    }

    pub(super) fn after_dictation_request(&mut self, request: AfterDictationRequest) {
        match request {
            AfterDictationRequest::AskAccess => {
                self.paste_availability = self.effects.request_paste_access();
            }
            AfterDictationRequest::OpenAccessibilitySettings => {
                if let Err(reason) = self.effects.open_url(PRIVACY_ACCESSIBILITY_URL) {
                    self.notice = Some((
                        format!("System Settings could not be opened ({reason})"),
                        true,
                    ));
                }
            }
        }
    }
}

/// Under a finished recording: what became of the paste (nothing when none was asked).
pub(super) fn paste_outcome(ui: &mut egui::Ui, paste: Option<&Result<(), PasteError>>) {
    match paste {
        Some(Ok(())) => {
            ui.label("Pasted into the active app");
        }
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().warn_fg_color, not_pasted_sentence(e));
        }
        None => {}
    }
}

/// "Not pasted (code): why. The text is on the clipboard." for a paste that failed.
pub(super) fn not_pasted_sentence(e: &PasteError) -> String {
    let why = match e {
        PasteError::NotTrusted => NEEDS_ACCESS.to_owned(),
        PasteError::Unavailable(why) => (*why).to_owned(),
        PasteError::Failed(why) => format!("The paste keystroke could not be sent ({why})."),
    };
    format!(
        "Not pasted ({}): {why} The text is on the clipboard.",
        e.code()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::paste::WAYLAND;
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;

    #[test]
    fn the_form_round_trips_the_settings() {
        for action in [AfterAction::Copy, AfterAction::Paste] {
            for restore_clipboard in [false, true] {
                let s = AfterDictationSettings {
                    action,
                    restore_clipboard,
                };
                assert_eq!(AfterDictationForm::from_settings(&s).to_settings(), s);
            }
        }
        assert_eq!(
            AfterDictationForm::default().to_settings(),
            AfterDictationSettings::default()
        );
    }

    fn harness(
        availability: PasteAvailability,
    ) -> Harness<'static, (AfterDictationForm, Vec<AfterDictationRequest>)> {
        Harness::new_ui_state(
            move |ui, (form, requests): &mut (AfterDictationForm, Vec<AfterDictationRequest>)| {
                if let Some(r) = after_dictation_section(ui, form, &availability) {
                    requests.push(r);
                }
            },
            (AfterDictationForm::default(), Vec::new()),
        )
    }

    #[test]
    fn choosing_paste_asks_for_access_once_and_explains_a_refusal() {
        let mut h = harness(PasteAvailability::NeedsAccess);
        h.run();
        assert!(h.query_by_label(NEEDS_ACCESS).is_none());
        h.get_by_label("Copy and paste into the active app").click();
        h.run();
        assert!(h.state().0.paste);
        assert_eq!(h.state().1, [AfterDictationRequest::AskAccess]);
        h.get_by_label(NEEDS_ACCESS);
        h.get_by_label("Open Accessibility Settings").click();
        h.run();
        assert_eq!(
            h.state().1,
            [
                AfterDictationRequest::AskAccess,
                AfterDictationRequest::OpenAccessibilitySettings
            ]
        );
        h.get_by_label("Put the previous clipboard back after pasting")
            .click();
        h.run();
        assert!(h.state().0.restore_clipboard);
    }

    #[test]
    fn wayland_says_why_and_offers_copy_only() {
        let mut h = harness(PasteAvailability::Unavailable(WAYLAND));
        h.run();
        h.get_by_label(WAYLAND);
        h.get_by_label("Copy and paste into the active app").click();
        h.run();
        assert!(!h.state().0.paste);
        assert!(h.state().1.is_empty());
    }
}
