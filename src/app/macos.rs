//! macOS-only pieces: no Dock icon, the microphone permission state, and notifications
//! through the User Notifications framework.
//!
//! Invariants:
//! - Everything here runs only on macOS (`cfg(target_os = "macos")`); Linux builds never
//!   see it, and `scripts/check-macos` type-checks it.
//! - `UNUserNotificationCenter` exists only for a bundled app (it needs a bundle
//!   identifier); outside `Persyk.app` notifications are reported as unavailable instead of
//!   crashing.

use std::sync::Mutex;

use objc2::MainThreadMarker;
use objc2_app_kit::{NSApplication, NSApplicationActivationPolicy};
use objc2_av_foundation::{AVAuthorizationStatus, AVCaptureDevice, AVMediaTypeAudio};
use objc2_foundation::{NSBundle, NSString};
use super::permission::Access;
use objc2_user_notifications::{
    UNAuthorizationOptions, UNMutableNotificationContent, UNNotificationRequest,
    UNUserNotificationCenter,
};

/// Menu-bar only: no Dock icon, no app menu (the bundle's `LSUIElement` does the same for
/// `Persyk.app`; this covers a bare binary).
pub fn set_accessory_policy() {
    if let Some(mtm) = MainThreadMarker::new() {
        let app = NSApplication::sharedApplication(mtm);
        app.setActivationPolicy(NSApplicationActivationPolicy::Accessory);
    }
}

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

fn bundled() -> bool {
    NSBundle::mainBundle().bundleIdentifier().is_some()
}

/// Shows a notification (asks for permission the first time).
pub fn notify(title: &str, body: &str) -> Result<(), String> {
    if !bundled() {
        return Err("notifications need Persyk.app (not a bare binary)".into());
    }
    let center = UNUserNotificationCenter::currentNotificationCenter();
    let granted = block2::RcBlock::new(
        |_granted: objc2::runtime::Bool, _error: *mut objc2_foundation::NSError| {},
    );
    center.requestAuthorizationWithOptions_completionHandler(
        UNAuthorizationOptions::Alert | UNAuthorizationOptions::Sound,
        &granted,
    );
    let content = UNMutableNotificationContent::new();
    content.setTitle(&NSString::from_str(title));
    content.setBody(&NSString::from_str(body));
    let id = NSString::from_str(&format!("persyk-{}", crate::session::store::new_id()));
    let request = UNNotificationRequest::requestWithIdentifier_content_trigger(&id, &content, None);
    center.addNotificationRequest_withCompletionHandler(&request, None);
    Ok(())
}
