//! macOS window glue the shell and the tray need: no Dock icon, bringing the window to the
//! front, the recording indicator as a non-activating panel, and whether Control is held.
//! The services' own macOS glue lives beside each service (`effects::macos` for
//! notifications, `permission::macos` for the microphone, `paste`'s ⌘V), implementing the
//! trait that service owns.
//!
//! Invariants:
//! - Everything here runs only on macOS (`cfg(target_os = "macos")`); Linux builds never
//!   see it, and `scripts/check-macos` type-checks it.
//! - Plain OS calls: nothing here imports another room of the app.
//! - The recording indicator never activates Persyk or becomes the key window: a click on
//!   its Stop button reaches the button while the app the user types in stays frontmost and
//!   keeps keyboard focus ([`make_indicator_panel`]).

use objc2::runtime::{AnyObject, NSObject};
use objc2::{ClassType, MainThreadMarker, MainThreadOnly, define_class};
use objc2_app_kit::{
    NSApplication, NSApplicationActivationPolicy, NSEvent, NSEventModifierFlags, NSPanel,
    NSResponder, NSStatusWindowLevel, NSWindow, NSWindowCollectionBehavior, NSWindowStyleMask,
};
use objc2_foundation::NSString;

/// Menu-bar only: no Dock icon, no app menu (the bundle's `LSUIElement` does the same for
/// `Persyk.app`; this covers a bare binary).
pub fn set_accessory_policy() {
    if let Some(mtm) = MainThreadMarker::new() {
        let app = NSApplication::sharedApplication(mtm);
        app.setActivationPolicy(NSApplicationActivationPolicy::Accessory);
    }
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
