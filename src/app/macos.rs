//! macOS-only pieces: no Dock icon, bringing the window to the front, the recording
//! indicator as a non-activating panel, the microphone
//! permission (status and the system prompt), and notifications through the User
//! Notifications framework (authorization awaited, completion errors reported, banners
//! presented while Persyk is frontmost through a `UNUserNotificationCenterDelegate`).
//!
//! Invariants:
//! - Everything here runs only on macOS (`cfg(target_os = "macos")`); Linux builds never
//!   see it, and `scripts/check-macos` type-checks it.
//! - `UNUserNotificationCenter` exists only for a bundled app (it needs a bundle
//!   identifier); outside `Persyk.app` notifications are reported as unavailable instead of
//!   crashing.
//! - The recording indicator never activates Persyk or becomes the key window: a click on
//!   its Stop button reaches the button while the app the user types in stays frontmost and
//!   keeps keyboard focus ([`make_indicator_panel`]).

use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use objc2::rc::Retained;
use objc2::runtime::{AnyObject, NSObject, NSObjectProtocol, ProtocolObject};
use objc2::{ClassType, MainThreadMarker, MainThreadOnly, define_class, msg_send};
use objc2_app_kit::{
    NSApplication, NSApplicationActivationPolicy, NSEvent, NSEventModifierFlags, NSPanel,
    NSResponder, NSStatusWindowLevel, NSWindow, NSWindowCollectionBehavior, NSWindowStyleMask,
};
use objc2_av_foundation::{AVAuthorizationStatus, AVCaptureDevice, AVMediaTypeAudio};
use objc2_foundation::{NSBundle, NSError, NSString};
use objc2_user_notifications::{
    UNAuthorizationOptions, UNAuthorizationStatus, UNMutableNotificationContent, UNNotification,
    UNNotificationPresentationOptions, UNNotificationRequest, UNNotificationSettings,
    UNUserNotificationCenter, UNUserNotificationCenterDelegate,
};

use super::effects::{NotificationCenter, NotifyAuthorization};
use super::permission::Access;

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

/// Brings Persyk to the front: an Accessory app is not activated by showing its window.
pub fn activate() {
    if let Some(mtm) = MainThreadMarker::new() {
        #[allow(deprecated)] // `activate` needs macOS 14; this works on every version.
        NSApplication::sharedApplication(mtm).activateIgnoringOtherApps(true);
    }
}

define_class!(
    /// The recording indicator's class: a panel that never becomes key or main, so showing
    /// it or clicking it leaves keyboard focus where the user was typing.
    #[unsafe(super(NSPanel, NSWindow, NSResponder, NSObject))]
    #[thread_kind = MainThreadOnly]
    #[name = "PersykIndicatorPanel"]
    struct IndicatorPanel;

    impl IndicatorPanel {
        #[unsafe(method(canBecomeKeyWindow))]
        fn can_become_key_window(&self) -> bool {
            false
        }

        #[unsafe(method(canBecomeMainWindow))]
        fn can_become_main_window(&self) -> bool {
            false
        }
    }
);

/// Makes the window titled `title` (the indicator, created by winit as an ordinary
/// `NSWindow`) a non-activating panel at status-bar level, on every Space and beside
/// full-screen apps, out of the window cycle, and never key or main. Returns whether the
/// window was found (the shell tries again on the next frame until it was).
pub fn make_indicator_panel(title: &str) -> bool {
    let Some(mtm) = MainThreadMarker::new() else {
        return false;
    };
    let wanted = NSString::from_str(title);
    for window in NSApplication::sharedApplication(mtm).windows().iter() {
        if !window.title().isEqualToString(&wanted) {
            continue;
        }
        let object: &AnyObject = &window;
        if object.class() != IndicatorPanel::class() {
            // winit's window class is NSWindow plus two overridden methods and no instance
            // variables, so its objects are laid out as an NSWindow; NSPanel adds no state
            // of its own. The panel class only changes what `canBecomeKey/MainWindow` say.
            if object.class().name().to_bytes() != b"WinitWindow" {
                return true; // not the window we know how to change: leave it as it is
            }
            // SAFETY: see above; this runs on the main thread, before any other code could
            // hold the class of this object.
            unsafe { AnyObject::set_class(object, IndicatorPanel::class()) };
        }
        window.setStyleMask(window.styleMask() | NSWindowStyleMask::NonactivatingPanel);
        window.setHidesOnDeactivate(false);
        window.setLevel(NSStatusWindowLevel);
        window.setCollectionBehavior(
            NSWindowCollectionBehavior::CanJoinAllSpaces
                | NSWindowCollectionBehavior::Stationary
                | NSWindowCollectionBehavior::FullScreenAuxiliary
                | NSWindowCollectionBehavior::IgnoresCycle,
        );
        return true;
    }
    false
}

/// Whether Control is held now (a ctrl-click on the menu-bar icon opens the menu).
pub fn control_held() -> bool {
    NSEvent::modifierFlags_class().contains(NSEventModifierFlags::Control)
}

/// How long the notification center may take to answer a question without a prompt.
const CENTER_ANSWER: Duration = Duration::from_secs(10);
/// How long the user may take to answer the authorization prompt.
const PROMPT_ANSWER: Duration = Duration::from_secs(120);

define_class!(
    /// Lets banners show while Persyk is the frontmost app (macOS hides them otherwise).
    #[unsafe(super(NSObject))]
    #[name = "PersykNotificationDelegate"]
    struct NotificationDelegate;

    unsafe impl NSObjectProtocol for NotificationDelegate {}

    unsafe impl UNUserNotificationCenterDelegate for NotificationDelegate {
        #[unsafe(method(userNotificationCenter:willPresentNotification:withCompletionHandler:))]
        fn will_present(
            &self,
            _center: &UNUserNotificationCenter,
            _notification: &UNNotification,
            handler: &block2::DynBlock<dyn Fn(UNNotificationPresentationOptions)>,
        ) {
            handler.call((UNNotificationPresentationOptions::Banner
                | UNNotificationPresentationOptions::List
                | UNNotificationPresentationOptions::Sound,));
        }
    }
);

/// Installs the delegate that presents banners while Persyk is frontmost (once, at start;
/// only in `Persyk.app`). The center holds its delegate weakly, so it lives until exit.
pub fn install_notification_delegate() {
    if !bundled() {
        return;
    }
    let delegate: Retained<NotificationDelegate> =
        unsafe { msg_send![NotificationDelegate::class(), new] };
    let center = UNUserNotificationCenter::currentNotificationCenter();
    center.setDelegate(Some(ProtocolObject::from_ref(&*delegate)));
    std::mem::forget(delegate);
}

/// The User Notifications center (exists only for a bundled app).
pub struct UserNotifications(Retained<UNUserNotificationCenter>);

/// The center, or why there is none.
pub fn user_notifications() -> Result<UserNotifications, String> {
    if !bundled() {
        return Err("notifications need Persyk.app (not a bare binary)".into());
    }
    Ok(UserNotifications(
        UNUserNotificationCenter::currentNotificationCenter(),
    ))
}

fn error_text(error: *mut NSError) -> Option<String> {
    // SAFETY: the framework passes a valid NSError or null.
    unsafe { error.as_ref() }
        .map(|e| format!("the notification center refused it (error {})", e.code()))
}

impl NotificationCenter for UserNotifications {
    fn authorization(&self) -> Result<NotifyAuthorization, String> {
        let (tx, rx) = mpsc::sync_channel(1);
        let handler = block2::RcBlock::new(move |settings: NonNull<UNNotificationSettings>| {
            // SAFETY: the framework passes a valid settings object.
            let status = unsafe { settings.as_ref() }.authorizationStatus();
            let _ = tx.try_send(if status == UNAuthorizationStatus::NotDetermined {
                NotifyAuthorization::NotDetermined
            } else if status == UNAuthorizationStatus::Denied {
                NotifyAuthorization::Denied
            } else {
                NotifyAuthorization::Allowed
            });
        });
        self.0
            .getNotificationSettingsWithCompletionHandler(&handler);
        rx.recv_timeout(CENTER_ANSWER)
            .map_err(|_| "the notification center did not answer".to_owned())
    }

    fn request_authorization(&self) -> Result<bool, String> {
        let (tx, rx) = mpsc::sync_channel(1);
        let handler =
            block2::RcBlock::new(move |granted: objc2::runtime::Bool, error: *mut NSError| {
                let _ = tx.try_send(match error_text(error) {
                    Some(e) => Err(e),
                    None => Ok(granted.as_bool()),
                });
            });
        self.0.requestAuthorizationWithOptions_completionHandler(
            UNAuthorizationOptions::Alert | UNAuthorizationOptions::Sound,
            &handler,
        );
        rx.recv_timeout(PROMPT_ANSWER)
            .map_err(|_| "the notification permission was not answered".to_owned())?
    }

    fn add(&self, title: &str, body: &str) -> Result<(), String> {
        let content = UNMutableNotificationContent::new();
        content.setTitle(&NSString::from_str(title));
        content.setBody(&NSString::from_str(body));
        let id = NSString::from_str(&format!("persyk-{}", crate::session::store::new_id()));
        let request =
            UNNotificationRequest::requestWithIdentifier_content_trigger(&id, &content, None);
        let (tx, rx) = mpsc::sync_channel(1);
        let handler = block2::RcBlock::new(move |error: *mut NSError| {
            let _ = tx.try_send(error_text(error));
        });
        self.0
            .addNotificationRequest_withCompletionHandler(&request, Some(&handler));
        match rx.recv_timeout(CENTER_ANSWER) {
            Ok(None) => Ok(()),
            Ok(Some(e)) => Err(e),
            Err(_) => Err("the notification center did not answer".into()),
        }
    }
}
