//! Settings › Updates and the update line: "Check for updates daily", "Check now", and what
//! the last check found, in a sentence.
//!
//! Invariants:
//! - A release is offered only as `crate::update` verified it; the window opens its links
//!   (the release page, the DMG) in the browser and installs nothing.
//! - A failed daily check is quiet: one weak line in Settings, nothing anywhere else; only a
//!   check the user asked for says "Couldn't check for updates" with its code as details.
//! - A newer release found by any check is also said at the top of the Dictation page until
//!   the next check answers otherwise.

use super::style;
use super::widgets;
use super::*;
use crate::update::{Checked, Release, UpdateError};

/// Settings › Updates' checkbox.
pub const CHECK_DAILY: &str = "Check for updates daily";
/// The button that checks now.
pub const CHECK_NOW: &str = "Check now";
/// What a failed check says (the code follows as details when the user asked).
pub const COULD_NOT_CHECK: &str = "Couldn't check for updates";

/// The update check as the window knows it.
#[derive(Debug, Default)]
pub(super) struct UpdateView {
    /// A check the user asked for is running.
    pub checking: bool,
    /// The last answer, and whether the user asked for it.
    pub last: Option<(Result<Checked, UpdateError>, bool)>,
}

impl UpdateView {
    /// The newer release the last check found.
    fn available(&self) -> Option<&Release> {
        match &self.last {
            Some((Ok(Checked::Available(r)), _)) => Some(r),
            _ => None,
        }
    }
}

/// "Persyk 0.2.0 is available" (the links follow it).
pub fn available_sentence(release: &Release) -> String {
    format!("Persyk {} is available", release.version)
}

/// The sentence for a check's answer other than a newer release.
pub fn answer_sentence(result: &Result<Checked, UpdateError>) -> String {
    match result {
        Ok(Checked::Available(r)) => available_sentence(r),
        Ok(Checked::UpToDate { current }) => format!("Persyk {current} is up to date."),
        // A feed older than this build: nothing newer exists.
        Err(UpdateError::Older) => {
            format!("Persyk {} is up to date.", crate::update::CURRENT_VERSION)
        }
        Err(_) => format!("{COULD_NOT_CHECK}."),
    }
}

impl PersykUi {
    /// "Check for Updates…" (the tray) and "Check now": asks the backend, shows Settings ›
    /// Updates' answer when it comes.
    pub fn check_updates(&mut self) {
        self.updates.checking = true;
        self.scroll_to = Some(SettingsSection::Updates);
        self.send(Command::CheckUpdates);
    }

    /// What the last check said, as the window says it (`None`: no answer yet).
    pub fn update_sentence(&self) -> Option<String> {
        self.updates.last.as_ref().map(|(r, _)| answer_sentence(r))
    }

    pub(super) fn apply_update_checked(
        &mut self,
        manual: bool,
        result: Result<Checked, UpdateError>,
    ) {
        if manual {
            self.updates.checking = false;
        }
        // A quiet daily failure does not replace what the user's own check said.
        let keep =
            !manual && result.is_err() && self.updates.last.as_ref().is_some_and(|(_, m)| *m);
        if !keep {
            self.updates.last = Some((result, manual));
        }
    }

    /// Settings › Updates.
    pub(super) fn updates_settings_ui(&mut self, ui: &mut egui::Ui) {
        let f = &mut self.form;
        widgets::row(ui, "Updates", |ui, _| {
            ui.checkbox(&mut f.updates_daily, CHECK_DAILY);
        });
        ui.horizontal(|ui| {
            let button = ui.add_enabled(!self.updates.checking, egui::Button::new(CHECK_NOW));
            if button.clicked() {
                self.pending.push(Action::CheckUpdates);
            }
            if self.updates.checking {
                ui.spinner();
                ui.label("Checking for updates…");
            }
        });
        match &self.updates.last {
            Some((Ok(Checked::Available(release)), _)) => {
                let release = release.clone();
                self.release_ui(ui, &release, true);
            }
            Some((Err(e), manual)) if !matches!(e, UpdateError::Older) => {
                if *manual {
                    ui.colored_label(ui.visuals().warn_fg_color, format!("{COULD_NOT_CHECK}."));
                    super::onboarding::details_ui(ui, e.code());
                } else {
                    ui.label(style::caption(format!("{COULD_NOT_CHECK}.")).weak());
                }
            }
            Some((result, _)) => {
                ui.label(answer_sentence(result));
            }
            None => {}
        }
    }

    /// The Dictation page's line when a check found a newer release.
    pub(super) fn update_banner_ui(&mut self, ui: &mut egui::Ui) {
        if let Some(release) = self.updates.available().cloned() {
            self.release_ui(ui, &release, false);
        }
    }

    /// "Persyk 0.x is available — What's new — Download", and (in Settings) the DMG's
    /// SHA-256 to compare with `shasum -a 256` after downloading.
    fn release_ui(&mut self, ui: &mut egui::Ui, release: &Release, details: bool) {
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new(available_sentence(release)).strong());
            ui.label("—");
            if ui.link("What's new").clicked() {
                self.pending
                    .push(Action::OpenLink(release.notes_url.clone()));
            }
            ui.label("—");
            if ui.link("Download").clicked() {
                self.pending.push(Action::OpenLink(release.dmg_url.clone()));
            }
        });
        if details {
            ui.label(
                style::caption(format!(
                    "The download is the signed release's disk image ({}). Its SHA-256: {}",
                    widgets::fmt_mib(release.dmg_bytes),
                    release.dmg_sha256
                ))
                .weak(),
            );
        }
    }
}
