//! Effects outside the session: the clipboard and the "Transcription copied" notification.
//!
//! Invariants:
//! - Effects never decide persistence: they run after the session is saved, and a failure is
//!   logged and shown, nothing more.
//! - macOS notifications follow [`deliver`] over a [`NotificationCenter`]: authorization is
//!   asked at most once per process and awaited before a request is added; the request's
//!   completion error, and notifications being off, reach the window with where to turn
//!   them on. The flow is tested with a fake on every platform.
//! - Only surviving canonical text reaches an effect (the caller passes
//!   [`super::model::Finished::transcript`] or a canonical message's text).
//! - A finished recording's transcript goes through [`Effects::deliver_transcript`]:
//!   copied, then pasted into the focused app when "After dictation" says so
//!   ([`super::paste`]); a failed paste leaves the transcript on the clipboard and is
//!   reported with its code. With paste on, the whole delivery (saving the previous
//!   clipboard, which waits for the app that owns it; the keystroke) runs on a thread of
//!   its own and reports through [`Effects::delivered`], so the UI thread never waits. The
//!   same thread then puts the previous clipboard back once the paste read the transcript
//!   ([`paste::finish`]) and, on X11, keeps serving the clipboard until another client owns
//!   it. "The clipboard could not be put back" ([`paste::Kept`]) reaches the window once
//!   per run.

#[cfg(target_os = "macos")]
pub mod macos;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use super::model::Waker;
use super::paste::{
    self, Delivery, PasteAvailability, PasteClipboard, PasteError, Paster, Previous, SavedClipboard,
};
use crate::settings::AfterDictationSettings;

/// Whether the system lets Persyk show notifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyAuthorization {
    /// Nobody has decided yet: asking shows the system's question.
    NotDetermined,
    /// Allowed (also provisionally).
    Allowed,
    /// Turned off by the user.
    Denied,
}

/// A system notification center (User Notifications on macOS); calls block until the
/// system answers, so they run off the UI thread.
pub trait NotificationCenter {
    fn authorization(&self) -> Result<NotifyAuthorization, String>;
    /// Asks the user; `Ok(granted)`.
    fn request_authorization(&self) -> Result<bool, String>;
    /// Adds a notification; `Err` is the completion handler's error.
    fn add(&self, title: &str, body: &str) -> Result<(), String>;
}

/// What the window says when notifications are off.
pub const NOTIFICATIONS_OFF: &str = "notifications are off for Persyk; turn them on in System \
                                     Settings > Notifications > Persyk";

/// What the window says when macOS refuses notifications to this build outright
/// (`UNErrorDomain` code 1, "not allowed", which an ad-hoc-signed Persyk.app gets): System
/// Settings does not list such a build, so sending the user there would not help (issue #36
/// item 5). The finished dictation is said in the window instead.
pub const NOTIFICATIONS_NOT_ALLOWED: &str = "macOS does not allow notifications for this build of \
    Persyk (it is not signed by a registered developer, so System Settings cannot turn them \
    on); finished dictations are said here in the window instead";

/// The sentence for a notification center error: the real reason for "not allowed"
/// (`UNErrorDomain` 1), the domain and code otherwise.
pub fn center_error(domain: &str, code: isize) -> String {
    if domain == "UNErrorDomain" && code == 1 {
        NOTIFICATIONS_NOT_ALLOWED.to_owned()
    } else {
        format!("the notification center refused it ({domain} {code})")
    }
}

/// What a click on one of Persyk's notifications does, set once by the app (show the
/// window): on Linux the banner's default action, which notify-rust reports as
/// `"default"`; on macOS the delegate's `didReceiveNotificationResponse`.
static ON_CLICK: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

/// Sets what a click on one of Persyk's notifications does (the first call wins).
pub fn on_notification_click(f: Box<dyn Fn() + Send + Sync>) {
    let _ = ON_CLICK.set(f);
}

/// A notification was clicked (from the notifier thread on Linux, the notification
/// delegate on macOS).
fn notification_clicked() {
    if let Some(clicked) = ON_CLICK.get() {
        clicked();
    }
}

/// The identifier of a freedesktop notification's default action (a click on its body).
pub const DEFAULT_ACTION: &str = "default";

/// `UNNotificationDismissActionIdentifier`: the banner was dismissed (only reported for
/// categories that ask for it; Persyk's do not).
pub const DISMISS_ACTION: &str = "com.apple.UNNotificationDismissActionIdentifier";

/// Whether the user's response to a notification (its action identifier) shows the window:
/// every response but a dismissal (a click is the default action,
/// `com.apple.UNNotificationDefaultActionIdentifier`).
pub fn response_shows_window(action_identifier: &str) -> bool {
    action_identifier != DISMISS_ACTION
}

/// The notification permission question of one process: asked at most once; while the
/// system's prompt is on screen, other deliveries wait for the user's answer instead of
/// reading the still-undecided status as "off".
#[derive(Debug, Default)]
pub struct Prompt {
    state: Mutex<PromptState>,
    answered: Condvar,
    /// The center's error when asking failed (an ad-hoc-signed build gets "not allowed",
    /// [`NOTIFICATIONS_NOT_ALLOWED`]): every later delivery says the same, not "off".
    refusal: Mutex<Option<String>>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum PromptState {
    #[default]
    NotAsked,
    /// The system's prompt is on screen (one delivery waits for its answer).
    Asking,
    Answered,
}

/// What a delivery that finds the permission undecided does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Ask the user (the first delivery of the process).
    Ask,
    /// Another delivery is asking: wait for the answer.
    Wait,
    /// Asked before and still undecided: do not ask on every recording.
    AskedBefore,
}

impl Prompt {
    pub const fn new() -> Prompt {
        Prompt {
            state: Mutex::new(PromptState::NotAsked),
            answered: Condvar::new(),
            refusal: Mutex::new(None),
        }
    }

    /// Remembers why asking failed (see [`Prompt::refusal`]).
    fn refused(&self, reason: &str) {
        *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason.to_owned());
    }

    /// Why the system refused the question, if it did.
    fn refusal(&self) -> Option<String> {
        self.refusal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn lock(&self) -> MutexGuard<'_, PromptState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn turn(&self) -> Turn {
        let mut state = self.lock();
        match *state {
            PromptState::NotAsked => {
                *state = PromptState::Asking;
                Turn::Ask
            }
            PromptState::Asking => Turn::Wait,
            PromptState::Answered => Turn::AskedBefore,
        }
    }

    fn finish(&self) {
        *self.lock() = PromptState::Answered;
        self.answered.notify_all();
    }

    /// Waits until the prompt was answered, at most `limit`; whether it was.
    fn wait(&self, limit: Duration) -> bool {
        let state = self.lock();
        let (state, _) = self
            .answered
            .wait_timeout_while(state, limit, |s| *s == PromptState::Asking)
            .unwrap_or_else(PoisonError::into_inner);
        *state == PromptState::Answered
    }
}

/// How long a delivery waits for the answer to a prompt another delivery showed (the
/// center's own limit for the prompt, `macos::PROMPT_ANSWER`).
pub const PROMPT_WAIT: Duration = Duration::from_secs(120);

/// What the window says when the prompt was not answered in [`PROMPT_WAIT`].
pub const PROMPT_OPEN: &str = "the notification permission was not answered (System Settings > \
                               Notifications > Persyk decides it later)";

/// Shows one notification: asks for authorization first if nobody has decided (at most
/// once per process, `prompt` remembers it) and waits for the answer, also when another
/// delivery is asking; refuses with [`NOTIFICATIONS_OFF`] when they are off; reports the
/// center's error otherwise.
pub fn deliver(
    center: &dyn NotificationCenter,
    prompt: &Prompt,
    title: &str,
    body: &str,
) -> Result<(), String> {
    match center.authorization()? {
        NotifyAuthorization::Allowed => {}
        NotifyAuthorization::Denied => return Err(NOTIFICATIONS_OFF.into()),
        NotifyAuthorization::NotDetermined => match prompt.turn() {
            Turn::Ask => {
                let granted = center.request_authorization();
                if let Err(reason) = &granted {
                    prompt.refused(reason);
                }
                prompt.finish();
                if !granted? {
                    return Err(NOTIFICATIONS_OFF.into());
                }
            }
            Turn::Wait => {
                if !prompt.wait(PROMPT_WAIT) {
                    return Err(PROMPT_OPEN.into());
                }
                if let Some(reason) = prompt.refusal() {
                    return Err(reason);
                }
                if center.authorization()? != NotifyAuthorization::Allowed {
                    return Err(NOTIFICATIONS_OFF.into());
                }
            }
            // Still undecided after asking: the system's own reason when it refused to ask
            // (issue #36 item 5), else "off".
            Turn::AskedBefore => return Err(prompt.refusal().unwrap_or(NOTIFICATIONS_OFF.into())),
        },
    }
    center.add(title, body)
}

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
    /// Opens a system URL (the System Settings pane for the microphone permission) or a web
    /// link in the browser (a verified release's page or DMG).
    fn open_url(&mut self, _url: &str) -> Result<(), String> {
        Err("not supported here".into())
    }
    /// Delivers a finished recording's transcript: copies it, then pastes it into the
    /// focused app when `after` says so. [`Delivered::Later`]: the outcome arrives through
    /// [`Effects::delivered`] (and `wake` repaints the window then). Effects without a
    /// paster only copy, at once, and report the paste as unavailable.
    fn deliver_transcript(
        &mut self,
        text: &str,
        after: &AfterDictationSettings,
        _wake: &Waker,
    ) -> Delivered {
        let copied = self.copy(text);
        let pasted =
            (copied.is_ok() && after.pastes()).then_some(Err(PasteError::Unavailable(NO_PASTER)));
        Delivered::Now(Delivery {
            copied,
            pasted,
            restore: None,
            kept: None,
        })
    }
    /// A delivery that finished since the last call, by the id [`Delivered::Later`] gave.
    fn delivered(&mut self) -> Option<(u64, Delivery)> {
        None
    }
    /// Whether pasting can work here (what Settings shows beside the choice).
    fn paste_availability(&self) -> PasteAvailability {
        PasteAvailability::Unavailable(NO_PASTER)
    }
    /// Asks for what pasting needs (the macOS Accessibility prompt); never waits for the
    /// user's answer.
    fn request_paste_access(&mut self) -> PasteAvailability {
        self.paste_availability()
    }
}

const NO_PASTER: &str = "Pasting is not available here.";

/// Where a transcript's delivery stands when [`Effects::deliver_transcript`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    Now(Delivery),
    /// Running off the UI thread (reading the previous clipboard waits for the app that
    /// owns it; the keystroke is a round trip to the display server).
    Later(u64),
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
    paster: Arc<dyn Paster>,
    failures_tx: SyncSender<String>,
    failures_rx: Receiver<String>,
    /// Deliveries finished by the paste thread, by id.
    delivered_tx: SyncSender<(u64, Delivery)>,
    delivered_rx: Receiver<(u64, Delivery)>,
    next_delivery: u64,
}

impl Default for SystemEffects {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemEffects {
    pub fn new() -> SystemEffects {
        SystemEffects::with_paster(paste::system())
    }

    /// The real clipboard and notifications with `paster` for the paste keystroke.
    pub fn with_paster(paster: Arc<dyn Paster>) -> SystemEffects {
        let (failures_tx, failures_rx) = sync_channel(8);
        let (delivered_tx, delivered_rx) = sync_channel(8);
        SystemEffects {
            clipboard: None,
            paster,
            failures_tx,
            failures_rx,
            delivered_tx,
            delivered_rx,
            next_delivery: 0,
        }
    }

    fn clipboard(&mut self) -> Result<&mut arboard::Clipboard, String> {
        if self.clipboard.is_none() {
            self.clipboard = Some(arboard::Clipboard::new().map_err(|e| clipboard_reason(&e))?);
        }
        self.clipboard
            .as_mut()
            .ok_or_else(|| "clipboard unavailable".into())
    }
}

/// arboard, where the system offers no clipboard [`paste`] can watch (Wayland, no display):
/// text only, so nothing is saved or put back.
struct Arboard(arboard::Clipboard);

impl PasteClipboard for Arboard {
    fn save(&mut self) -> Previous {
        Previous::Unrestorable
    }
    fn offer(&mut self, text: &str) -> Result<(), String> {
        self.0.set_text(text).map_err(|e| clipboard_reason(&e))
    }
    fn wait_read(&mut self, _deadline: std::time::Duration) -> bool {
        false
    }
    fn restore(&mut self, _saved: &SavedClipboard) -> bool {
        false
    }
}

/// Whether the window was told once this run that the clipboard could not be put back.
static SAID_KEPT: AtomicBool = AtomicBool::new(false);

/// The paste thread: saves the clipboard, copies, pastes, reports, then puts the previous
/// content back once the paste read the transcript ([`paste::finish`]), and keeps serving
/// the clipboard where the system needs its owner to (X11).
fn paste_on_a_thread(
    paster: Arc<dyn Paster>,
    text: String,
    after: AfterDictationSettings,
    report: impl FnOnce(Delivery) + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("persyk-paste".into())
        .spawn(move || {
            let mut clipboard: Box<dyn PasteClipboard + Send> = match paste::system_clipboard() {
                Some(c) => c,
                None => match arboard::Clipboard::new() {
                    Ok(c) => Box::new(Arboard(c)),
                    Err(e) => {
                        return report(Delivery {
                            copied: Err(clipboard_reason(&e)),
                            pasted: None,
                            restore: None,
                            kept: None,
                        });
                    }
                },
            };
            let mut delivery = paste::deliver(&mut *clipboard, &*paster, &text, &after);
            if let Err(reason) = &delivery.copied {
                eprintln!("persyk: clipboard: {reason}");
            }
            if let Some(Err(e)) = &delivery.pasted {
                eprintln!("persyk: {}", e.code());
            }
            if let Some(kept) = delivery.kept {
                eprintln!("persyk: {}", kept.code());
                // Said once per run in the window.
                if SAID_KEPT.swap(true, Ordering::SeqCst) {
                    delivery.kept = None;
                }
            }
            let restore = delivery.restore.take();
            report(delivery);
            if let Some(saved) = restore {
                let put_back = paste::finish(&mut *clipboard, &saved, paste::READ_DEADLINE);
                if put_back != paste::PutBack::Restored {
                    eprintln!("persyk: {}", put_back.code());
                }
            }
            clipboard.keep();
        })
        .map(drop)
}

impl Effects for SystemEffects {
    fn copy(&mut self, text: &str) -> Result<(), String> {
        self.clipboard()?.set_text(text).map_err(|e| {
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

    fn deliver_transcript(
        &mut self,
        text: &str,
        after: &AfterDictationSettings,
        wake: &Waker,
    ) -> Delivered {
        if !after.pastes() {
            return Delivered::Now(Delivery {
                copied: self.copy(text),
                pasted: None,
                restore: None,
                kept: None,
            });
        }
        // The clipboard must be usable at all (the paste thread makes its own handle).
        if let Err(reason) = self.clipboard() {
            return Delivered::Now(Delivery {
                copied: Err(reason),
                pasted: None,
                restore: None,
                kept: None,
            });
        }
        self.next_delivery += 1;
        let id = self.next_delivery;
        let (tx, wake) = (self.delivered_tx.clone(), wake.clone());
        let report = move |d: Delivery| {
            let _ = tx.try_send((id, d));
            wake.wake();
        };
        match paste_on_a_thread(self.paster.clone(), text.to_owned(), *after, report) {
            Ok(()) => Delivered::Later(id),
            // No thread: copy only, and say why nothing was pasted.
            Err(_) => {
                let copied = self.copy(text);
                let pasted = copied
                    .is_ok()
                    .then_some(Err(PasteError::Failed("no thread to paste from")));
                Delivered::Now(Delivery {
                    copied,
                    pasted,
                    restore: None,
                    kept: None,
                })
            }
        }
    }

    fn delivered(&mut self) -> Option<(u64, Delivery)> {
        self.delivered_rx.try_recv().ok()
    }

    fn paste_availability(&self) -> PasteAvailability {
        self.paster.availability()
    }

    fn request_paste_access(&mut self) -> PasteAvailability {
        self.paster.request_access()
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

/// A web link (a verified release's page or DMG) through `xdg-open`; System Settings panes
/// exist only on macOS.
#[cfg(not(target_os = "macos"))]
fn open_url(url: &str) -> Result<(), String> {
    if !url.starts_with("https://") {
        return Err("System Settings exist only on macOS".into());
    }
    let mut child = std::process::Command::new("xdg-open")
        .arg(url)
        .spawn()
        .map_err(|_| "xdg-open could not be started".to_owned())?;
    std::thread::spawn(move || child.wait());
    Ok(())
}

fn clipboard_reason(e: &arboard::Error) -> String {
    match e {
        arboard::Error::ClipboardNotSupported => "clipboard not supported here".into(),
        arboard::Error::ClipboardOccupied => "clipboard busy".into(),
        _ => "clipboard unavailable".into(),
    }
}

/// Shows the notification, then (on this notifier thread, until the server closes the
/// banner: it is transient, and shown 4 s) waits for a click on it: its default action runs [`on_notification_click`]'s
/// callback (issue #25 item 4).
#[cfg(target_os = "linux")]
fn show_notification(title: &str, body: &str) -> Result<(), String> {
    let handle = notify_rust::Notification::new()
        .appname("Persyk")
        .summary(title)
        .body(body)
        .action(DEFAULT_ACTION, "Show Persyk")
        // Transient: the server closes it after the banner (GNOME would otherwise keep it
        // in its list), which ends this thread's wait.
        .hint(notify_rust::Hint::Transient(true))
        .timeout(notify_rust::Timeout::Milliseconds(4000))
        .show()
        .map_err(|_| "no notification service".to_owned())?;
    handle.wait_for_action(|action| {
        if action == DEFAULT_ACTION {
            notification_clicked();
        }
    });
    Ok(())
}

#[cfg(target_os = "macos")]
fn show_notification(title: &str, body: &str) -> Result<(), String> {
    static PROMPT: Prompt = Prompt::new();
    let center = macos::user_notifications()?;
    deliver(&center, &PROMPT, title, body)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn show_notification(_title: &str, _body: &str) -> Result<(), String> {
    Err("notifications are not supported on this system".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::sync::atomic::AtomicUsize;

    struct FakeCenter {
        status: Cell<NotifyAuthorization>,
        grant: bool,
        add_error: Option<String>,
        request_error: Option<String>,
        calls: RefCell<Vec<&'static str>>,
    }

    impl FakeCenter {
        fn new(status: NotifyAuthorization, grant: bool) -> FakeCenter {
            FakeCenter {
                status: Cell::new(status),
                grant,
                add_error: None,
                request_error: None,
                calls: RefCell::default(),
            }
        }
    }

    impl NotificationCenter for FakeCenter {
        fn authorization(&self) -> Result<NotifyAuthorization, String> {
            self.calls.borrow_mut().push("status");
            Ok(self.status.get())
        }
        fn request_authorization(&self) -> Result<bool, String> {
            self.calls.borrow_mut().push("request");
            if let Some(e) = &self.request_error {
                return Err(e.clone());
            }
            self.status.set(if self.grant {
                NotifyAuthorization::Allowed
            } else {
                NotifyAuthorization::Denied
            });
            Ok(self.grant)
        }
        fn add(&self, _title: &str, _body: &str) -> Result<(), String> {
            self.calls.borrow_mut().push("add");
            self.add_error.clone().map_or(Ok(()), Err)
        }
    }

    #[test]
    fn undecided_asks_once_and_adds_only_after_the_answer() {
        let center = FakeCenter::new(NotifyAuthorization::NotDetermined, true);
        let asked = Prompt::new();
        assert_eq!(deliver(&center, &asked, "t", "b"), Ok(()));
        assert_eq!(deliver(&center, &asked, "t", "b"), Ok(()));
        assert_eq!(
            *center.calls.borrow(),
            ["status", "request", "add", "status", "add"]
        );
    }

    #[test]
    fn off_is_said_with_where_to_turn_it_on_and_nothing_is_added() {
        let center = FakeCenter::new(NotifyAuthorization::NotDetermined, false);
        let asked = Prompt::new();
        let err = deliver(&center, &asked, "t", "b").unwrap_err();
        assert!(err.contains("System Settings > Notifications"), "{err}");
        assert_eq!(deliver(&center, &asked, "t", "b"), Err(err));
        assert_eq!(*center.calls.borrow(), ["status", "request", "status"]);
    }

    #[test]
    fn an_unanswered_question_is_not_asked_again() {
        let center = FakeCenter::new(NotifyAuthorization::NotDetermined, true);
        let asked = Prompt::new();
        asked.finish();
        assert_eq!(
            deliver(&center, &asked, "t", "b"),
            Err(NOTIFICATIONS_OFF.to_owned())
        );
        assert_eq!(*center.calls.borrow(), ["status"]);
    }

    #[test]
    fn the_centers_error_reaches_the_caller() {
        let mut center = FakeCenter::new(NotifyAuthorization::Allowed, true);
        center.add_error = Some("the notification center refused it (error 1)".into());
        let asked = Prompt::new();
        assert_eq!(
            deliver(&center, &asked, "t", "b"),
            Err("the notification center refused it (error 1)".to_owned())
        );
        assert_eq!(asked.turn(), Turn::Ask, "nothing was asked");
    }

    /// A center whose prompt stays open until the test answers it (thread-safe).
    struct PromptCenter {
        status: Mutex<NotifyAuthorization>,
        asking: std::sync::mpsc::SyncSender<()>,
        answer: Mutex<std::sync::mpsc::Receiver<bool>>,
        added: AtomicUsize,
    }

    impl NotificationCenter for PromptCenter {
        fn authorization(&self) -> Result<NotifyAuthorization, String> {
            Ok(*self.status.lock().unwrap())
        }
        fn request_authorization(&self) -> Result<bool, String> {
            self.asking.send(()).unwrap();
            let granted = self.answer.lock().unwrap().recv().unwrap();
            *self.status.lock().unwrap() = if granted {
                NotifyAuthorization::Allowed
            } else {
                NotifyAuthorization::Denied
            };
            Ok(granted)
        }
        fn add(&self, _title: &str, _body: &str) -> Result<(), String> {
            self.added.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    /// Issue #25 item 9: a second dictation ending while the first one's permission prompt
    /// was still on screen read the undecided status as "notifications are off" and said so.
    /// It now waits for the user's answer and is shown once they allow it.
    #[test]
    fn issue25_09_a_notification_during_the_first_prompt_waits_for_its_answer() {
        let (asking, asked) = std::sync::mpsc::sync_channel(1);
        let (answer, answers) = std::sync::mpsc::sync_channel(1);
        let center = Arc::new(PromptCenter {
            status: Mutex::new(NotifyAuthorization::NotDetermined),
            asking,
            answer: Mutex::new(answers),
            added: AtomicUsize::new(0),
        });
        let prompt = Arc::new(Prompt::new());
        let deliver_on_a_thread = || {
            let (center, prompt) = (center.clone(), prompt.clone());
            std::thread::spawn(move || deliver(&*center, &prompt, "t", "b"))
        };
        let first = deliver_on_a_thread();
        asked.recv().unwrap(); // the prompt is on screen
        let second = deliver_on_a_thread();
        std::thread::sleep(Duration::from_millis(100));
        assert!(!second.is_finished(), "the second delivery must wait");
        answer.send(true).unwrap();
        assert_eq!(first.join().unwrap(), Ok(()));
        assert_eq!(second.join().unwrap(), Ok(()));
        assert_eq!(center.added.load(Ordering::SeqCst), 2);
    }

    /// Issue #25 item 4: a click on a banner activated Persyk without showing anything.
    /// Clicks (the default action) show the window; a dismissal does not.
    #[test]
    fn issue25_04_a_click_on_a_notification_shows_the_window() {
        assert!(response_shows_window(
            "com.apple.UNNotificationDefaultActionIdentifier"
        ));
        assert!(!response_shows_window(DISMISS_ACTION));
    }

    #[test]
    fn first_words_cuts_and_marks() {
        assert_eq!(first_words("one two three", 5), "one two three");
        assert_eq!(first_words("one  two\nthree four", 2), "one two…");
        assert_eq!(first_words("", 3), "");
    }

    /// Issue #36 item 5: "not allowed" (an ad-hoc-signed build) says the real reason and
    /// never sends the user to a Settings pane that does not list Persyk.
    #[test]
    fn issue36_05_a_build_macos_refuses_notifications_says_why() {
        let not_allowed = center_error("UNErrorDomain", 1);
        assert_eq!(not_allowed, NOTIFICATIONS_NOT_ALLOWED);
        assert!(!not_allowed.contains("System Settings >"), "{not_allowed}");
        assert!(not_allowed.contains("in the window"), "{not_allowed}");
        assert_eq!(
            center_error("UNErrorDomain", 3),
            "the notification center refused it (UNErrorDomain 3)"
        );
        let mut center = FakeCenter::new(NotifyAuthorization::NotDetermined, true);
        center.request_error = Some(center_error("UNErrorDomain", 1));
        let asked = Prompt::new();
        assert_eq!(
            deliver(&center, &asked, "t", "b"),
            Err(NOTIFICATIONS_NOT_ALLOWED.to_owned())
        );
        // Every later dictation says the same real reason — not "turn them on in System
        // Settings", which the window would then show instead — and asks no more.
        for _ in 0..2 {
            assert_eq!(
                deliver(&center, &asked, "t", "b"),
                Err(NOTIFICATIONS_NOT_ALLOWED.to_owned())
            );
        }
        assert_eq!(
            center
                .calls
                .borrow()
                .iter()
                .filter(|c| **c == "request")
                .count(),
            1
        );
    }
}
