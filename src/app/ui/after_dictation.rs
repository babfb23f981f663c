//! Settings → "After dictation": copy only, or copy and paste into the active app, and
//! "Put the previous clipboard back after pasting".
//!
//! Invariants:
//! - The paste choice is offered only where pasting can work; where it never can (Wayland,
//!   no display) the section says why in one sentence and the choice is disabled (a saved
//!   `paste` stays saved and shows selected, so nothing changes behind the user's back).
//! - Choosing paste asks the caller to request access ([`AfterDictationRequest::AskAccess`]:
//!   the macOS Accessibility prompt); while access is missing the section explains where to
//!   turn it on and offers to open that pane. When the user says it is on ("I turned it on")
//!   and macOS still refuses — its permission belongs to the exact build it was given to, so
//!   a rebuilt Persyk can show "on" and not be trusted — the section says to remove Persyk
//!   from the list and add it again ([`STALE_ACCESS`]; issue #25 item 7).
//! - The form converts to and from [`AfterDictationSettings`] without loss.

use eframe::egui;

use super::{Action, PersykUi};
use crate::app::paste::{PRIVACY_ACCESSIBILITY_URL, PasteAvailability, PasteError};
use crate::settings::{AfterAction, AfterDictationSettings};

/// What macOS 15.4 and later means for "put back" (issue #36 item 6).
/// No pointer to System Settings: it lists Persyk only once macOS has asked about it, and
/// Persyk never reads where macOS would ask.
pub const MAC_PASTE_PRIVACY: &str = "On macOS 15.4 and later Persyk reads the clipboard to put \
    it back only where macOS lets it without asking you; elsewhere the transcript stays on the \
    clipboard after a paste.";

/// The section's part of the settings form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AfterDictationForm {
    pub paste: bool,
    pub restore_clipboard: bool,
    pub copy_file_transcripts: bool,
}

impl AfterDictationForm {
    pub fn from_settings(s: &AfterDictationSettings) -> AfterDictationForm {
        AfterDictationForm {
            paste: s.pastes(),
            restore_clipboard: s.restore_clipboard,
            copy_file_transcripts: s.copy_file_transcripts,
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
            copy_file_transcripts: self.copy_file_transcripts,
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
    /// "I turned it on": look again, and if access is still missing say why it can be.
    CheckAccess,
}

/// What the window says when macOS has not given Accessibility access.
pub const NEEDS_ACCESS: &str = "Pasting needs Accessibility access: turn Persyk on in System \
                                Settings > Privacy & Security > Accessibility. Until then the \
                                text is only copied.";

/// What the window says when the user turned Accessibility access on and macOS still says
/// no: the permission was given to another build of Persyk (an update, a rebuild signed ad
/// hoc), which the list shows under the same name.
pub const STALE_ACCESS: &str = "macOS still does not let Persyk paste, although Persyk may \
                                show as on: the permission belongs to the exact build it was \
                                given to, and this one is new to macOS. In System Settings > \
                                Privacy & Security > Accessibility, remove Persyk from the \
                                list and add it again (select it, the minus button, then the \
                                plus button and Persyk in Applications). Until then the text \
                                is only copied.";

/// The button that says access was turned on in System Settings.
pub const TURNED_IT_ON: &str = "I turned it on";

/// Draws the section's rows (two radio choices, the put-back checkbox, a note); the caller
/// draws the section around them.
/// `claimed`: the user said access is on and macOS still refused it.
pub fn after_dictation_section(
    ui: &mut egui::Ui,
    form: &mut AfterDictationForm,
    availability: &PasteAvailability,
    claimed: bool,
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
                if cfg!(target_os = "macos") && form.paste && form.restore_clipboard {
                    // Issue #36 item 6: said once here, not at every dictation.
                    ui.label(super::style::caption(MAC_PASTE_PRIVACY));
                }
            });
        });
    });
    super::widgets::row(ui, "Files", |ui, _| {
        ui.checkbox(
            &mut form.copy_file_transcripts,
            "Copy a transcribed file's text to the clipboard when it is done",
        );
    });
    if form.paste && !was {
        request = Some(AfterDictationRequest::AskAccess);
    }
    match availability {
        PasteAvailability::Available => {}
        PasteAvailability::NeedsAccess if form.paste => {
            let sentence = if claimed { STALE_ACCESS } else { NEEDS_ACCESS };
            ui.colored_label(ui.visuals().warn_fg_color, sentence);
            ui.horizontal(|ui| {
                if ui.button("Open Accessibility Settings").clicked() {
                    request = Some(AfterDictationRequest::OpenAccessibilitySettings);
                }
                if ui.button(TURNED_IT_ON).clicked() {
                    request = Some(AfterDictationRequest::CheckAccess);
                }
            });
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
        if let Some(request) = after_dictation_section(
            ui,
            &mut self.form.after,
            &self.paste_availability,
            self.access_claimed,
        ) {
            self.pending.push(Action::AfterDictation(request));
        }
    }

    pub(super) fn after_dictation_request(&mut self, request: AfterDictationRequest) {
        match request {
            AfterDictationRequest::AskAccess => {
                self.paste_availability = self.effects.request_paste_access();
            }
            AfterDictationRequest::CheckAccess => {
                self.paste_availability = self.effects.paste_availability();
                self.access_claimed = self.paste_availability == PasteAvailability::NeedsAccess;
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
        PasteError::PersykInFront => {
            "Persyk was in front, and a paste would have landed in Persyk itself.".to_owned()
        }
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
                    copy_file_transcripts: false,
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
        harness_claimed(availability, false)
    }

    fn harness_claimed(
        availability: PasteAvailability,
        claimed: bool,
    ) -> Harness<'static, (AfterDictationForm, Vec<AfterDictationRequest>)> {
        Harness::new_ui_state(
            move |ui, (form, requests): &mut (AfterDictationForm, Vec<AfterDictationRequest>)| {
                if let Some(r) = after_dictation_section(ui, form, &availability, claimed) {
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

    /// Issue #25 item 7: TCC binds an ad-hoc signature to the exact build, so after a
    /// rebuild System Settings shows Persyk "on" while `AXIsProcessTrusted()` is false, and
    /// the window only repeated "turn Persyk on". Saying it is on ("I turned it on") while
    /// macOS still refuses now asks to remove Persyk from the list and add it again.
    #[test]
    fn issue25_07_access_on_but_not_trusted_says_remove_and_add_again() {
        let mut h = harness(PasteAvailability::NeedsAccess);
        h.state_mut().0.paste = true;
        h.run();
        h.get_by_label(NEEDS_ACCESS);
        h.get_by_label(TURNED_IT_ON).click();
        h.run();
        assert_eq!(h.state().1, [AfterDictationRequest::CheckAccess]);

        let mut h = harness_claimed(PasteAvailability::NeedsAccess, true);
        h.state_mut().0.paste = true;
        h.run();
        assert!(h.query_by_label(NEEDS_ACCESS).is_none());
        h.get_by_label(STALE_ACCESS);
        assert!(STALE_ACCESS.contains("remove Persyk from the list and add it again"));
        // Once access works nothing is said.
        let mut h = harness_claimed(PasteAvailability::Available, true);
        h.state_mut().0.paste = true;
        h.run();
        assert!(h.query_by_label(STALE_ACCESS).is_none());
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
