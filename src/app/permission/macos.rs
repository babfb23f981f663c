//! The microphone permission on macOS: AVFoundation's status and the system prompt, for
//! [`super::SystemPermission`].
//!
//! Invariants:
//! - macOS only; `scripts/check-macos` type-checks it.
//! - The prompt's answer reaches the caller exactly once, from whatever queue AVFoundation
//!   calls back on.

use std::sync::Mutex;

use objc2_av_foundation::{AVAuthorizationStatus, AVCaptureDevice, AVMediaTypeAudio};

use super::Access;

/// The microphone permission as AVFoundation reports it.
pub fn microphone_access() -> Access {
    let Some(audio) = (unsafe { AVMediaTypeAudio }) else {
        return Access::Granted;
    };
    let status = unsafe { AVCaptureDevice::authorizationStatusForMediaType(audio) };
    if status == AVAuthorizationStatus::Authorized {
        Access::Granted
    } else if status == AVAuthorizationStatus::NotDetermined {
        Access::NotDetermined
    } else if status == AVAuthorizationStatus::Restricted {
        Access::Restricted
    } else {
        Access::Denied
    }
}

/// Shows the system's microphone prompt; `answer(granted)` runs once, on an arbitrary
/// dispatch queue.
pub fn request_microphone_access(answer: Box<dyn FnOnce(bool) + Send>) {
    let Some(audio) = (unsafe { AVMediaTypeAudio }) else {
        answer(true);
        return;
    };
    let answer = Mutex::new(Some(answer));
    let handler = block2::RcBlock::new(move |granted: objc2::runtime::Bool| {
        if let Some(f) = answer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            f(granted.as_bool());
        }
    });
    unsafe { AVCaptureDevice::requestAccessForMediaType_completionHandler(audio, &handler) };
}

/// What the system says about microphone access; `Some(text)` when the user must act.
pub fn microphone_note() -> Option<String> {
    let status = microphone_access();
    if status == Access::Denied || status == Access::Restricted {
        Some(
            "Microphone access is off for Persyk. Open System Settings > Privacy & Security > \
             Microphone and turn Persyk on, then start again."
                .into(),
        )
    } else {
        None
    }
}
