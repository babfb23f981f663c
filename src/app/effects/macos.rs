//! Notifications on macOS through the User Notifications framework: authorization awaited,
//! completion errors reported, banners presented while Persyk is frontmost through a
//! `UNUserNotificationCenterDelegate`. [`UserNotifications`] implements the
//! [`NotificationCenter`] that [`super::deliver`] drives.
//!
//! Invariants:
//! - macOS only; `scripts/check-macos` type-checks it.
//! - `UNUserNotificationCenter` exists only for a bundled app (it needs a bundle
//!   identifier); outside `Persyk.app` notifications are reported as unavailable instead of
//!   crashing.

use std::ptr::NonNull;
use std::sync::mpsc;
use std::time::Duration;

use objc2::rc::Retained;
use objc2::runtime::{NSObject, NSObjectProtocol, ProtocolObject};
use objc2::{ClassType, define_class, msg_send};
use objc2_foundation::{NSBundle, NSError, NSString};
use objc2_user_notifications::{
    UNAuthorizationOptions, UNAuthorizationStatus, UNMutableNotificationContent, UNNotification,
    UNNotificationPresentationOptions, UNNotificationRequest, UNNotificationResponse,
    UNNotificationSettings, UNUserNotificationCenter, UNUserNotificationCenterDelegate,
};

use super::{NotificationCenter, NotifyAuthorization};

fn bundled() -> bool {
    NSBundle::mainBundle().bundleIdentifier().is_some()
}

/// How long the notification center may take to answer a question without a prompt.
const CENTER_ANSWER: Duration = Duration::from_secs(10);
/// How long the user may take to answer the authorization prompt.
const PROMPT_ANSWER: Duration = Duration::from_secs(120);

define_class!(
    /// Lets banners show while Persyk is the frontmost app (macOS hides them otherwise), and
    /// shows the window when one is clicked.
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

        /// A click on a banner (its default action) activates Persyk, which has no window
        /// in front: show it (issue #25 item 4).
        #[unsafe(method(userNotificationCenter:didReceiveNotificationResponse:withCompletionHandler:))]
        fn did_receive(
            &self,
            _center: &UNUserNotificationCenter,
            response: &UNNotificationResponse,
            handler: &block2::DynBlock<dyn Fn()>,
        ) {
            if super::response_shows_window(&response.actionIdentifier().to_string()) {
                super::notification_clicked();
            }
            handler.call(());
        }
    }
);

/// Installs the delegate that presents banners while Persyk is frontmost and reports a
/// click on one ([`super::on_notification_click`]) (once, at start; only in `Persyk.app`).
/// The center holds its delegate weakly, so it lives until exit.
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
    unsafe { error.as_ref() }.map(|e| super::center_error(&e.domain().to_string(), e.code()))
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
