//! Effects outside the session: the clipboard and the "Transcription copied" notification.
//!
//! Invariants:
//! - Effects never decide persistence: they run after the session is saved, and a failure is
//!   logged and shown, nothing more.
//! - Only surviving canonical text reaches an effect (the caller passes
//!   [`super::model::Finished::transcript`] or a canonical message's text).

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// The app's effects; tests substitute a recorder.
pub trait Effects {
    /// Puts `text` on the clipboard. `Err` is a short, content-free reason.
    fn copy(&mut self, text: &str) -> Result<(), String>;
    /// Shows a notification (asynchronously; failures arrive through [`Effects::failures`]).
    fn notify(&mut self, title: &str, body: &str);
    /// A notification failure reported since the last call.
    fn failures(&mut self) -> Option<String> {
        None
    }
    /// Opens a system URL (the System Settings pane for the microphone permission).
    fn open_url(&mut self, _url: &str) -> Result<(), String> {
        Err("not supported here".into())
    }
}

/// The first words of `text` for a notification body (at most `max_words`, then "…").
pub fn first_words(text: &str, max_words: usize) -> String {
    let mut words = text.split_whitespace();
    let head: Vec<&str> = words.by_ref().take(max_words).collect();
    let mut out = head.join(" ");
    if words.next().is_some() {
        out.push('…');
    }
    out
}

/// The real clipboard and notifications.
pub struct SystemEffects {
    /// Kept for the app's life: on X11 the clipboard owner must stay alive to serve pastes.
    clipboard: Option<arboard::Clipboard>,
    failures_tx: SyncSender<String>,
    failures_rx: Receiver<String>,
}

impl Default for SystemEffects {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemEffects {
    pub fn new() -> SystemEffects {
        let (failures_tx, failures_rx) = sync_channel(8);
        SystemEffects {
            clipboard: None,
            failures_tx,
            failures_rx,
        }
    }
}

impl Effects for SystemEffects {
    fn copy(&mut self, text: &str) -> Result<(), String> {
        if self.clipboard.is_none() {
            self.clipboard = Some(arboard::Clipboard::new().map_err(|e| clipboard_reason(&e))?);
        }
        let Some(clipboard) = self.clipboard.as_mut() else {
            return Err("clipboard unavailable".into());
        };
        clipboard.set_text(text).map_err(|e| {
            let reason = clipboard_reason(&e);
            eprintln!("persyk: clipboard: {reason}");
            reason
        })
    }

    fn notify(&mut self, title: &str, body: &str) {
        let (title, body) = (title.to_owned(), body.to_owned());
        let failures = self.failures_tx.clone();
        // Notification servers answer over D-Bus / XPC; never on the UI thread.
        let spawned = std::thread::Builder::new()
            .name("persyk-notify".into())
            .spawn(move || {
                if let Err(reason) = show_notification(&title, &body) {
                    eprintln!("persyk: notification: {reason}");
                    let _ = failures.try_send(reason);
                }
            });
        if spawned.is_err() {
            let _ = self
                .failures_tx
                .try_send("could not start the notifier".into());
        }
    }

    fn failures(&mut self) -> Option<String> {
        self.failures_rx.try_recv().ok()
    }

    fn open_url(&mut self, url: &str) -> Result<(), String> {
        open_url(url)
    }
}

/// `open URL` (Launch Services); the child is reaped on a thread of its own.
#[cfg(target_os = "macos")]
fn open_url(url: &str) -> Result<(), String> {
    let mut child = std::process::Command::new("/usr/bin/open")
        .arg(url)
        .spawn()
        .map_err(|_| "open could not be started".to_owned())?;
    std::thread::spawn(move || child.wait());
    Ok(())
}

#[cfg(not(target_os = "macos"))]
fn open_url(_url: &str) -> Result<(), String> {
    Err("System Settings exist only on macOS".into())
}

fn clipboard_reason(e: &arboard::Error) -> String {
    match e {
        arboard::Error::ClipboardNotSupported => "clipboard not supported here".into(),
        arboard::Error::ClipboardOccupied => "clipboard busy".into(),
        _ => "clipboard unavailable".into(),
    }
}

#[cfg(target_os = "linux")]
fn show_notification(title: &str, body: &str) -> Result<(), String> {
    notify_rust::Notification::new()
        .appname("Persyk")
        .summary(title)
        .body(body)
        .timeout(notify_rust::Timeout::Milliseconds(4000))
        .show()
        .map(drop)
        .map_err(|_| "no notification service".into())
}

#[cfg(target_os = "macos")]
fn show_notification(title: &str, body: &str) -> Result<(), String> {
    super::macos::notify(title, body)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn show_notification(_title: &str, _body: &str) -> Result<(), String> {
    Err("notifications are not supported on this system".into())
}

#[cfg(test)]
mod tests {
    use super::first_words;

    #[test]
    fn first_words_cuts_and_marks() {
        assert_eq!(first_words("one two three", 5), "one two three");
        assert_eq!(first_words("one  two\nthree four", 2), "one two…");
        assert_eq!(first_words("", 3), "");
    }
}
