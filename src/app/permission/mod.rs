//! Microphone permission: ask before the first capture, and refuse clearly when it is off.
//!
//! On macOS a capture started while the permission is *not determined* shows no prompt: it
//! delivers zeros, and the silence detector halts it with `capture.silent-input`. So before
//! the input is opened, [`ensure_access`] (the app's backend) or [`ensure_access_blocking`]
//! (`persyk dictate`) look at the status, ask the system when nobody has decided yet, and
//! wait for the answer.
//!
//! Invariants:
//! - The input is opened only after access is granted; nothing is recorded (no session, no
//!   WAV, no silence detector) while the question is open or after a refusal.
//! - A refusal, now or earlier, is `capture.permission-denied`; the window then offers a
//!   way to the System Settings pane ([`PRIVACY_MICROPHONE_URL`]).
//! - The platform sits behind [`MicrophonePermission`], so the flow is tested with a fake
//!   everywhere. Outside macOS the system implementation always answers "granted".

#[cfg(target_os = "macos")]
pub mod macos;

use std::sync::Arc;

/// The System Settings pane where the microphone permission is changed (macOS).
pub const PRIVACY_MICROPHONE_URL: &str =
    "x-apple.systempreferences:com.apple.preference.security?Privacy_Microphone";

/// What the system says about microphone access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Nobody has decided yet: asking shows the system prompt.
    NotDetermined,
    Granted,
    /// The user said no (changed only in System Settings).
    Denied,
    /// A policy (parental controls, MDM) forbids it.
    Restricted,
}

/// The system's microphone permission.
pub trait MicrophonePermission: Send + Sync {
    fn status(&self) -> Access;
    /// Asks the user. `answer(granted)` is called exactly once, from any thread.
    fn request(&self, answer: Box<dyn FnOnce(bool) + Send>);
}

/// Why capture may not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PermissionError {
    #[error(
        "capture.permission-denied: microphone access is off for Persyk (System Settings → \
         Privacy & Security → Microphone)"
    )]
    Denied,
}

impl PermissionError {
    pub fn code(&self) -> &'static str {
        match self {
            PermissionError::Denied => "capture.permission-denied",
        }
    }
}

/// Waits until microphone access is settled: `Ok` when granted (asking first if nobody has
/// decided yet; `waiting` runs just before the question is asked), else
/// `capture.permission-denied`.
pub async fn ensure_access(
    permission: &dyn MicrophonePermission,
    waiting: impl FnOnce(),
) -> Result<(), PermissionError> {
    match permission.status() {
        Access::Granted => Ok(()),
        Access::Denied | Access::Restricted => Err(PermissionError::Denied),
        Access::NotDetermined => {
            waiting();
            let (tx, rx) = tokio::sync::oneshot::channel();
            permission.request(Box::new(move |granted| {
                let _ = tx.send(granted);
            }));
            match rx.await {
                Ok(true) => Ok(()),
                // No answer (the handler was dropped) counts as no.
                _ => Err(PermissionError::Denied),
            }
        }
    }
}

/// [`ensure_access`] for a thread that may block (the CLI).
pub fn ensure_access_blocking(
    permission: &dyn MicrophonePermission,
    waiting: impl FnOnce(),
) -> Result<(), PermissionError> {
    match permission.status() {
        Access::Granted => Ok(()),
        Access::Denied | Access::Restricted => Err(PermissionError::Denied),
        Access::NotDetermined => {
            waiting();
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            permission.request(Box::new(move |granted| {
                let _ = tx.send(granted);
            }));
            match rx.recv() {
                Ok(true) => Ok(()),
                _ => Err(PermissionError::Denied),
            }
        }
    }
}

/// The system's permission: AVFoundation on macOS; elsewhere always granted (Linux has no
/// per-app microphone permission that an app could ask for).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemPermission;

impl MicrophonePermission for SystemPermission {
    fn status(&self) -> Access {
        #[cfg(target_os = "macos")]
        {
            macos::microphone_access()
        }
        #[cfg(not(target_os = "macos"))]
        {
            Access::Granted
        }
    }

    fn request(&self, answer: Box<dyn FnOnce(bool) + Send>) {
        #[cfg(target_os = "macos")]
        {
            macos::request_microphone_access(answer);
        }
        #[cfg(not(target_os = "macos"))]
        {
            answer(true);
        }
    }
}

/// The system permission, shared.
pub fn system() -> Arc<dyn MicrophonePermission> {
    Arc::new(SystemPermission)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A permission that starts at `status` and, when asked, answers `answer` (from another
    /// thread, as macOS does) and remembers it.
    struct Fake {
        status: Mutex<Access>,
        answer: Option<bool>,
        asked: AtomicUsize,
    }

    impl Fake {
        fn new(status: Access, answer: Option<bool>) -> Fake {
            Fake {
                status: Mutex::new(status),
                answer,
                asked: AtomicUsize::new(0),
            }
        }
    }

    impl MicrophonePermission for Fake {
        fn status(&self) -> Access {
            *self.status.lock().unwrap()
        }
        fn request(&self, answer: Box<dyn FnOnce(bool) + Send>) {
            self.asked.fetch_add(1, Ordering::SeqCst);
            if let Some(granted) = self.answer {
                *self.status.lock().unwrap() = if granted {
                    Access::Granted
                } else {
                    Access::Denied
                };
                std::thread::spawn(move || answer(granted));
            }
            // `None`: the answer is dropped unanswered.
        }
    }

    fn both(fake: &Fake) -> [(Result<(), PermissionError>, bool); 2] {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut waited = false;
        let a = rt.block_on(ensure_access(fake, || waited = true));
        let first = (a, waited);
        let mut waited = false;
        let b = ensure_access_blocking(fake, || waited = true);
        [first, (b, waited)]
    }

    #[test]
    fn not_determined_asks_once_and_waits_for_the_answer() {
        let fake = Fake::new(Access::NotDetermined, Some(true));
        let [(first, waited), (second, waited_again)] = both(&fake);
        assert_eq!(first, Ok(()));
        assert!(waited, "the window is told it waits for the answer");
        // Granted is remembered: the second start does not ask again.
        assert_eq!(second, Ok(()));
        assert!(!waited_again);
        assert_eq!(fake.asked.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_refusal_is_permission_denied_and_is_not_asked_again() {
        let fake = Fake::new(Access::NotDetermined, Some(false));
        let [(first, waited), (second, waited_again)] = both(&fake);
        assert_eq!(first, Err(PermissionError::Denied));
        assert!(waited);
        assert_eq!(second, Err(PermissionError::Denied));
        assert!(!waited_again);
        assert_eq!(fake.asked.load(Ordering::SeqCst), 1);
        assert_eq!(PermissionError::Denied.code(), "capture.permission-denied");
    }

    #[test]
    fn denied_restricted_and_granted_never_ask() {
        for (status, expected) in [
            (Access::Denied, Err(PermissionError::Denied)),
            (Access::Restricted, Err(PermissionError::Denied)),
            (Access::Granted, Ok(())),
        ] {
            let fake = Fake::new(status, Some(true));
            for (result, waited) in both(&fake) {
                assert_eq!(result, expected, "{status:?}");
                assert!(!waited);
            }
            assert_eq!(fake.asked.load(Ordering::SeqCst), 0);
        }
    }

    #[test]
    fn an_unanswered_request_counts_as_no() {
        let fake = Fake::new(Access::NotDetermined, None);
        for (result, waited) in both(&fake) {
            assert_eq!(result, Err(PermissionError::Denied));
            assert!(waited);
        }
    }

    #[test]
    fn the_system_permission_outside_macos_is_granted() {
        if cfg!(not(target_os = "macos")) {
            assert_eq!(SystemPermission.status(), Access::Granted);
            assert_eq!(
                ensure_access_blocking(&SystemPermission, || panic!("no question")),
                Ok(())
            );
        }
    }
}
