//! Files on the Dictation page (issue #38): "Transcribe a File…", a file dropped on the
//! window, the one being transcribed with its progress bar and Cancel, the files waiting, and
//! what became of the last one.
//!
//! Invariants:
//! - The window never opens or decodes a file: it hands paths to the backend
//!   ([`Command::TranscribeFiles`]) and reads the shared [`FileProgress`] each frame.
//! - Only a file's name is shown or kept, never its folder.
//! - What became of the last file that ended is shown until another one ends, also while the
//!   next file of a queue runs (it starts at once, so the outcome would otherwise never be
//!   seen).
//! - A finished file's text goes to the clipboard only when Settings › After dictation says
//!   so (`copy_file_transcripts`); a long one (a minute or more of audio) is announced by a
//!   notification, since the user has usually turned to something else.

use std::sync::Arc;

use super::style::{self, space};
use super::*;
use crate::app::model::{FileDone, FileProgress};

/// A file at least this long ends with a notification.
pub(super) const NOTIFY_FROM_MS: u64 = 60_000;

/// What the window knows of the files.
#[derive(Default)]
pub(super) struct FilesView {
    /// The file being transcribed.
    pub(super) progress: Option<Arc<FileProgress>>,
    /// The files waiting their turn, by name.
    pub(super) waiting: Vec<String>,
    /// The last file that ended (or could not start).
    pub(super) last: Option<FileDone>,
    /// Off macOS (no system file panel here): the path typed into the page's field.
    pub(super) path: String,
    /// Give the path field the keyboard focus next frame (the menu's "Transcribe a File…").
    pub(super) focus_path: bool,
}

impl PersykUi {
    /// Transcribes `files`, one after another (a drop, the menu, Open With).
    pub fn transcribe_files(&mut self, files: Vec<PathBuf>) {
        let files: Vec<PathBuf> = files
            .into_iter()
            .filter(|f| !f.as_os_str().is_empty())
            .collect();
        if files.is_empty() {
            return;
        }
        self.page = Page::Dictation;
        self.send(Command::TranscribeFiles { files });
    }

    /// "Transcribe a File…": the system's file panel on macOS; elsewhere the page's path
    /// field takes the keyboard.
    pub fn choose_files(&mut self) {
        self.page = Page::Dictation;
        match super::super::platform::choose_media_files() {
            Some(files) => self.transcribe_files(files),
            None => self.files.focus_path = true,
        }
    }

    /// Stops the file being transcribed (what was recognized is kept).
    pub fn cancel_file(&mut self) {
        if self.files.progress.is_some() {
            self.send(Command::CancelFile);
        }
    }

    /// Whether a file is being transcribed.
    pub fn file_in_progress(&self) -> bool {
        self.files.progress.is_some()
    }

    /// Files dropped on the window this frame.
    pub(super) fn take_dropped(&mut self, ctx: &egui::Context) {
        let dropped: Vec<PathBuf> = ctx.input(|i| {
            i.raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                .collect()
        });
        if !dropped.is_empty() {
            self.transcribe_files(dropped);
        }
    }

    pub(super) fn apply_file_ended(&mut self, done: FileDone) {
        if self
            .files
            .progress
            .as_ref()
            .is_some_and(|p| p.name == done.name)
            || done.refused.is_none()
        {
            self.files.progress = None;
        }
        let f = &done.finished;
        let text = f.transcript.trim();
        if done.refused.is_none() && f.error.is_none() && !text.is_empty() {
            self.dictation_worked = true;
            self.recent.retain(|r| r.session != f.session);
            self.recent.insert(
                0,
                RecentItem {
                    session: f.session.clone(),
                    text: f.transcript.clone(),
                    other_mac: None,
                },
            );
            self.recent.truncate(RECENT_LEN);
            if self.settings.after_dictation.copy_file_transcripts {
                let transcript = f.transcript.clone();
                self.copy(&transcript);
            }
            if f.duration_ms >= NOTIFY_FROM_MS {
                let body = file_sentence(&done);
                self.effects.notify("File transcribed", &body);
            }
        }
        if self.page == Page::Search {
            self.run_search();
        }
        self.files.last = Some(done);
    }

    /// The files section, under the dictation control.
    pub(super) fn files_ui(&mut self, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
        ui.add_space(space::S);
        ui.vertical_centered(|ui| {
            if let Some(p) = &self.files.progress {
                file_progress_ui(ui, p, actions);
                ui.ctx().request_repaint_after(Duration::from_millis(250));
            } else if cfg!(target_os = "macos") {
                if ui.button("Transcribe a File…").clicked() {
                    actions.push(Action::ChooseFiles);
                }
            } else {
                ui.horizontal(|ui| {
                    let label = ui.label("File to transcribe");
                    let field = ui
                        .add(
                            egui::TextEdit::singleline(&mut self.files.path)
                                .hint_text("path of an audio or video file")
                                .desired_width(240.0),
                        )
                        .labelled_by(label.id);
                    if std::mem::take(&mut self.files.focus_path) {
                        field.request_focus();
                    }
                    let typed = self.files.path.trim().to_owned();
                    let enter = field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                    if (ui
                        .add_enabled(!typed.is_empty(), egui::Button::new("Transcribe a File…"))
                        .clicked()
                        || enter)
                        && !typed.is_empty()
                    {
                        actions.push(Action::TranscribeFiles(vec![PathBuf::from(typed)]));
                        self.files.path.clear();
                    }
                });
            }
            if !self.files.waiting.is_empty() {
                ui.label(style::caption(format!(
                    "Waiting: {}",
                    self.files.waiting.join(", ")
                )));
            }
            // What became of the last file stays in view while the next one runs: a queue
            // of files moves on at once, and each outcome is worth a look.
            if let Some(done) = &self.files.last {
                let sentence = file_sentence(done);
                if done.refused.is_some() || done.finished.error.is_some() {
                    ui.colored_label(ui.visuals().error_fg_color, sentence);
                } else if !done.finished.complete {
                    ui.colored_label(ui.visuals().warn_fg_color, sentence);
                } else {
                    ui.label(sentence);
                }
                if done.refused.is_none()
                    && done.finished.error.is_none()
                    && !done.finished.transcript.trim().is_empty()
                    && ui.button("Copy the file's transcription").clicked()
                {
                    actions.push(Action::Copy(done.finished.transcript.clone()));
                }
            }
            if self.files.progress.is_none() {
                ui.label(style::caption(
                    "Or drop audio or video files on this window (MP3, M4A, WAV, FLAC, MP4, MOV…).",
                ));
            }
        });
    }
}

/// The bar, the position of the length, the time taken and the estimate, and Cancel.
fn file_progress_ui(ui: &mut egui::Ui, p: &FileProgress, actions: &mut Vec<Action>) {
    let position = Duration::from_millis(p.position_ms());
    let total = p.total_ms().map(Duration::from_millis);
    let fraction = total.map_or(0.0, |t| {
        (position.as_secs_f32() / t.as_secs_f32().max(0.001)).clamp(0.0, 1.0)
    });
    ui.label(RichText::new(format!("Transcribing {}", p.name)).strong());
    let mut bar = egui::ProgressBar::new(fraction).desired_width(280.0);
    if total.is_none() {
        bar = bar.animate(true);
    }
    ui.add(bar);
    let elapsed = p.started.elapsed();
    let mut line = match total {
        Some(t) => format!(
            "{} of {} · {} elapsed",
            fmt_clock(position),
            fmt_clock(t),
            fmt_clock(elapsed)
        ),
        None => format!("{} · {} elapsed", fmt_clock(position), fmt_clock(elapsed)),
    };
    if p.paused.load(std::sync::atomic::Ordering::Relaxed) {
        line.push_str(" · waiting for your dictation");
    } else if let Some(left) = p.left(Instant::now()) {
        line.push_str(&format!(" · about {} left", fmt_clock(left)));
    }
    ui.label(style::caption(line));
    if ui.button("Cancel file transcription").clicked() {
        actions.push(Action::CancelFile);
    }
}

/// m:ss, or h:mm:ss from an hour.
pub(super) fn fmt_clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// What became of a file, in one sentence (its name, never its folder).
pub(super) fn file_sentence(done: &FileDone) -> String {
    let f = &done.finished;
    let at = fmt_clock(Duration::from_millis(f.duration_ms));
    if let Some(reason) = &done.refused {
        // "capture.unsupported-codec: the file's audio is Opus, …" → its sentence.
        let text = reason.split_once(": ").map_or(reason.as_str(), |(_, t)| t);
        let code = reason.split(':').next().unwrap_or(reason);
        return match code {
            c if c.starts_with("local.model")
                || c.starts_with("models.")
                || c == "local.unavailable" =>
            {
                format!(
                    "{} was not transcribed: files are recognized on this Mac, and no model is installed. Download one in Settings.",
                    done.name
                )
            }
            _ => format!("{} was not transcribed: {text}.", done.name),
        };
    }
    if let Some(code) = &f.error {
        return format!(
            "{} could not be transcribed ({code}); anything recognized is in history.",
            done.name
        );
    }
    let words = if f.transcript.trim().is_empty() {
        "no words were recognized"
    } else {
        "its words are in history"
    };
    let halted = f.halted.as_deref().unwrap_or("");
    if done.cancelled || halted == crate::pipeline::CANCELLED_CODE {
        format!(
            "{} was cancelled after {at}: {words}, the rest is marked not transcribed.",
            done.name
        )
    } else if halted == "capture.input-damaged" {
        format!(
            "{} is damaged after {at}: {words}, the rest could not be read.",
            done.name
        )
    } else if !f.complete {
        format!(
            "{} was transcribed up to {at} ({}): {words}; the rest is marked not transcribed.",
            done.name,
            if halted.is_empty() {
                "incomplete"
            } else {
                halted
            }
        )
    } else {
        format!("{} was transcribed ({at}): {words}.", done.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::model::Finished;

    fn done(complete: bool, halted: Option<&str>, cancelled: bool) -> FileDone {
        FileDone {
            name: "memo.m4a".into(),
            finished: Finished {
                session: PathBuf::from("/s"),
                wav: PathBuf::from("/s/a.wav"),
                transcript: "hello".into(),
                duration_ms: 754_000,
                complete,
                halted: halted.map(str::to_owned),
                error: None,
                removed: false,
                cleanup: None,
            },
            cancelled,
            refused: None,
        }
    }

    #[test]
    fn sentences_say_where_a_file_stopped() {
        assert_eq!(
            file_sentence(&done(false, Some("capture.input-damaged"), false)),
            "memo.m4a is damaged after 12:34: its words are in history, the rest could not be read."
        );
        assert!(
            file_sentence(&done(false, Some("capture.cancelled"), true))
                .contains("cancelled after 12:34")
        );
        assert_eq!(
            file_sentence(&done(true, None, false)),
            "memo.m4a was transcribed (12:34): its words are in history."
        );
        let mut refused = done(false, None, false);
        refused.refused = Some("capture.no-audio-track: the file has no audio track".into());
        assert_eq!(
            file_sentence(&refused),
            "memo.m4a was not transcribed: the file has no audio track."
        );
    }

    #[test]
    fn clock_reads_hours() {
        assert_eq!(fmt_clock(Duration::from_secs(59)), "0:59");
        assert_eq!(fmt_clock(Duration::from_secs(3725)), "1:02:05");
    }
}
