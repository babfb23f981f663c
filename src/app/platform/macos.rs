//! macOS window glue the shell and the tray need: no Dock icon, bringing the window to the
//! front, the recording indicator as a non-activating panel, whether Control is held, and
//! the activity that keeps App Nap away while a recording runs.
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

use std::ffi::c_void;

use objc2::rc::Retained;
use objc2::runtime::{AnyClass, AnyObject, NSObject, NSObjectProtocol, ProtocolObject};
use objc2::{ClassType, DefinedClass, MainThreadMarker, MainThreadOnly, define_class, msg_send};
use objc2_app_kit::{
    NSApplication, NSApplicationActivationPolicy, NSEvent, NSEventModifierFlags, NSPanel,
    NSResponder, NSScreen, NSStatusWindowLevel, NSWindow, NSWindowCollectionBehavior,
    NSWindowStyleMask,
};
use objc2_foundation::{NSActivityOptions, NSProcessInfo, NSString};

use super::PanelStep;

/// Menu-bar only: no Dock icon, no app menu (the bundle's `LSUIElement` does the same for
/// `Persyk.app`; this covers a bare binary).
pub fn set_accessory_policy() {
    if let Some(mtm) = MainThreadMarker::new() {
        let app = NSApplication::sharedApplication(mtm);
        app.setActivationPolicy(NSApplicationActivationPolicy::Accessory);
    }
}

/// Brings Persyk to the front: an Accessory app is not activated by showing its window.
/// Unhidden first: hidden by another app's "Hide Others" (⌥⌘H), the window would stay hidden
/// (Persyk never hides itself: [`yield_focus`]).
pub fn activate() {
    if let Some(mtm) = MainThreadMarker::new() {
        let app = NSApplication::sharedApplication(mtm);
        app.unhideWithoutActivation();
        #[allow(deprecated)] // `activate` needs macOS 14; this works on every version.
        app.activateIgnoringOtherApps(true);
    }
}

/// `kCoreEventClass` (`'aevt'`), the class of the reopen Apple event.
const CORE_EVENT_CLASS: u32 = u32::from_be_bytes(*b"aevt");
/// `kAEReopenApplication` (`'rapp'`): Persyk.app was opened again while it runs (Finder,
/// Spotlight, Launchpad, `open -a Persyk`).
const REOPEN_APPLICATION: u32 = u32::from_be_bytes(*b"rapp");

/// `kAEOpenApplication` (`'oapp'`): the event an app is launched with.
const OPEN_APPLICATION: u32 = u32::from_be_bytes(*b"oapp");
/// `keyAEPropData` (`'prdt'`): the open event's parameter that says how it was opened.
const PROP_DATA: u32 = u32::from_be_bytes(*b"prdt");
/// `keyAELaunchedAsLogInItem` (`'lgit'`): that parameter's value for a login item.
const LAUNCHED_AS_LOGIN_ITEM: u32 = u32::from_be_bytes(*b"lgit");

/// Whether macOS opened Persyk as a login item ("Start Persyk at login",
/// `SMAppService.mainApp`): the Apple event being handled is the launch's
/// `kAEOpenApplication` with `keyAEPropData` = `keyAELaunchedAsLogInItem`. A login item is
/// started as Finder starts the app, without `--hidden`; this is how the app tells. Only
/// meaningful while the launch event is current: from `applicationDidFinishLaunching:`,
/// inside which winit builds the window and eframe calls Persyk's creation callback.
pub fn launched_at_login() -> bool {
    let Some(manager) = AnyClass::get(c"NSAppleEventManager") else {
        return false;
    };
    // SAFETY: `sharedAppleEventManager`, `currentAppleEvent` (nil outside an event),
    // `eventID` (`AEEventID`, a `UInt32`), `paramDescriptorForKeyword:` (`AEKeyword`,
    // `UInt32`; nil when absent) and `enumCodeValue` (`OSType`, `UInt32`) are
    // NSAppleEventManager's and NSAppleEventDescriptor's documented messages, called on the
    // main thread during launch.
    unsafe {
        let manager: Retained<AnyObject> = msg_send![manager, sharedAppleEventManager];
        let event: Option<Retained<AnyObject>> = msg_send![&*manager, currentAppleEvent];
        let Some(event) = event else {
            return false;
        };
        let id: u32 = msg_send![&*event, eventID];
        if id != OPEN_APPLICATION {
            return false;
        }
        let how: Option<Retained<AnyObject>> =
            msg_send![&*event, paramDescriptorForKeyword: PROP_DATA];
        match how {
            Some(how) => {
                let code: u32 = msg_send![&*how, enumCodeValue];
                code == LAUNCHED_AS_LOGIN_ITEM
            }
            None => false,
        }
    }
}

/// What [`ReopenHandler`] calls.
struct OnReopen(Box<dyn Fn()>);

define_class!(
    /// Receives the reopen Apple event (see [`handle_reopen`]).
    #[unsafe(super(NSObject))]
    #[thread_kind = MainThreadOnly]
    #[name = "PersykReopenHandler"]
    #[ivars = OnReopen]
    struct ReopenHandler;

    impl ReopenHandler {
        #[unsafe(method(handleReopen:withReplyEvent:))]
        fn handle_reopen(&self, _event: &AnyObject, _reply: &AnyObject) {
            (self.ivars().0)();
        }
    }
);

/// Calls `on_reopen` (on the main thread) each time Persyk.app is opened again while it
/// runs, the event AppKit turns into `applicationShouldHandleReopen:hasVisibleWindows:`.
///
/// winit 0.30.13 owns the application delegate (`WinitApplicationDelegate`, declared with
/// `declare_class!` in `platform_impl/macos/app_state.rs`, implementing only
/// `applicationDidFinishLaunching:` and `applicationWillTerminate:`) and sets it when the
/// event loop is built, so Persyk cannot give it a delegate method of its own without
/// changing winit's class at run time (`class_addMethod`), which would also depend on
/// whether AppKit looks the method up again after `setDelegate:`. Instead this replaces the
/// handler of the Apple event behind that delegate method, `kAEReopenApplication`, through
/// `NSAppleEventManager` (the documented way to handle a core Apple event yourself; the
/// manager keeps one handler per event, the last one set). It is installed from eframe's
/// creation callback, which runs after `applicationDidFinishLaunching:`, so AppKit's own
/// handler, installed while launching, is already there to be replaced; the reopen event is
/// only ever sent to an app that has finished launching.
pub fn handle_reopen(on_reopen: Box<dyn Fn()>) {
    let Some(mtm) = MainThreadMarker::new() else {
        return;
    };
    let handler = ReopenHandler::alloc(mtm).set_ivars(OnReopen(on_reopen));
    // SAFETY: NSObject's `init` on a freshly allocated object.
    let handler: Retained<ReopenHandler> = unsafe { msg_send![super(handler), init] };
    let Some(manager) = AnyClass::get(c"NSAppleEventManager") else {
        return;
    };
    // SAFETY: `sharedAppleEventManager` returns the process's manager; the handler object
    // implements the selector with the signature the manager calls (`event`, `replyEvent`),
    // and event class and id are `FourCharCode`s (`UInt32`).
    unsafe {
        let manager: Retained<AnyObject> = msg_send![manager, sharedAppleEventManager];
        let _: () = msg_send![
            &*manager,
            setEventHandler: &*handler,
            andSelector: objc2::sel!(handleReopen:withReplyEvent:),
            forEventClass: CORE_EVENT_CLASS,
            andEventID: REOPEN_APPLICATION
        ];
    }
    // The manager does not retain its handlers: this one lives as long as the process.
    std::mem::forget(handler);
}

/// `kAEOpenDocuments` (`'odoc'`): open these files (Finder's Open With, a file dropped on
/// the app's icon, `open -a Persyk memo.m4a`).
const OPEN_DOCUMENTS: u32 = u32::from_be_bytes(*b"odoc");
/// `keyDirectObject` (`'----'`): the open event's list of files.
const DIRECT_OBJECT: u32 = u32::from_be_bytes(*b"----");
/// The notification `NSApp finishLaunching` posts once AppKit's own Apple event handlers are
/// installed and before it handles the launch's event (the constant's value is its name).
const WILL_FINISH_LAUNCHING: &str = "NSApplicationWillFinishLaunchingNotification";

thread_local! {
    /// The files asked for, until the shell takes them (main thread only: AppKit delivers
    /// Apple events and notifications there).
    static OPEN_QUEUE: std::cell::RefCell<super::OpenQueue> =
        std::cell::RefCell::new(super::OpenQueue::default());
}

define_class!(
    /// Receives `NSApplicationWillFinishLaunchingNotification` and then the open-documents
    /// Apple event (see [`handle_open_documents`]).
    #[unsafe(super(NSObject))]
    #[thread_kind = MainThreadOnly]
    #[name = "PersykOpenDocumentsHandler"]
    struct OpenDocumentsHandler;

    impl OpenDocumentsHandler {
        #[unsafe(method(willFinishLaunching:))]
        fn will_finish_launching(&self, _note: &AnyObject) {
            install_open_documents(self);
        }

        #[unsafe(method(handleOpenDocuments:withReplyEvent:))]
        fn handle_open_documents(&self, event: &AnyObject, _reply: &AnyObject) {
            let files = document_paths(event);
            OPEN_QUEUE.with(|q| q.borrow_mut().deliver(files));
        }
    }
);

/// Makes Persyk the receiver of the open-documents Apple event. Called before eframe starts
/// the event loop. When Persyk is launched *by* Open With, AppKit handles that event during
/// launch, between `applicationWillFinishLaunching:` and `applicationDidFinishLaunching:`
/// (Apple's "How Cocoa Applications Handle Apple Events"), so the handler must be in place by
/// the first: winit's delegate (`WinitApplicationDelegate`, 0.30.13) does not implement that
/// method and AppKit's default handler would send the event to `application:openURLs:`, which
/// winit's delegate lacks too. The will-finish notification is observed instead: AppKit has
/// installed its own handlers by then, so Persyk's replaces theirs (the manager keeps the last
/// one set). The files go to [`on_open_documents`]'s sink, or wait for it.
pub fn handle_open_documents() {
    let Some(mtm) = MainThreadMarker::new() else {
        return;
    };
    let handler = OpenDocumentsHandler::alloc(mtm).set_ivars(());
    // SAFETY: NSObject's `init` on a freshly allocated object.
    let handler: Retained<OpenDocumentsHandler> = unsafe { msg_send![super(handler), init] };
    let Some(center) = AnyClass::get(c"NSNotificationCenter") else {
        return;
    };
    let name = NSString::from_str(WILL_FINISH_LAUNCHING);
    // SAFETY: `defaultCenter` and `addObserver:selector:name:object:` are
    // NSNotificationCenter's documented messages; the handler implements the selector with
    // the one-argument signature the center calls, and a nil object means "from anyone".
    unsafe {
        let center: Retained<AnyObject> = msg_send![center, defaultCenter];
        let _: () = msg_send![
            &*center,
            addObserver: &*handler,
            selector: objc2::sel!(willFinishLaunching:),
            name: &*name,
            object: std::ptr::null::<AnyObject>()
        ];
    }
    // Neither the center (since macOS 10.11) nor the event manager retains it: it lives as
    // long as the process.
    std::mem::forget(handler);
}

/// Sets the handler of `'aevt'/'odoc'` to `handler` (from the will-finish notification).
fn install_open_documents(handler: &OpenDocumentsHandler) {
    let Some(manager) = AnyClass::get(c"NSAppleEventManager") else {
        return;
    };
    // SAFETY: as in `handle_reopen`: the manager's documented message, a selector the
    // handler implements with the (event, replyEvent) signature, `FourCharCode`s.
    unsafe {
        let manager: Retained<AnyObject> = msg_send![manager, sharedAppleEventManager];
        let _: () = msg_send![
            &*manager,
            setEventHandler: handler,
            andSelector: objc2::sel!(handleOpenDocuments:withReplyEvent:),
            forEventClass: CORE_EVENT_CLASS,
            andEventID: OPEN_DOCUMENTS
        ];
    }
}

/// The paths an open-documents event names: its direct object is a list of file
/// descriptors (an alias, a bookmark or a file URL, each coerced by `fileURLValue`, macOS
/// 10.11+); a single descriptor is taken as a list of one.
fn document_paths(event: &AnyObject) -> Vec<std::path::PathBuf> {
    let url_path = |descriptor: &AnyObject| -> Option<std::path::PathBuf> {
        // SAFETY: `fileURLValue` (NSURL or nil) and NSURL's `path` (NSString or nil) are
        // documented messages on these objects.
        let url: Option<Retained<AnyObject>> = unsafe { msg_send![descriptor, fileURLValue] };
        let url = url?;
        // SAFETY: as above.
        let path: Option<Retained<NSString>> = unsafe { msg_send![&*url, path] };
        Some(std::path::PathBuf::from(path?.to_string()))
    };
    // SAFETY: `paramDescriptorForKeyword:` (nil when absent), `numberOfItems` (`NSInteger`)
    // and `descriptorAtIndex:` (1-based, nil past the end) are NSAppleEventDescriptor's.
    unsafe {
        let list: Option<Retained<AnyObject>> =
            msg_send![event, paramDescriptorForKeyword: DIRECT_OBJECT];
        let Some(list) = list else {
            return Vec::new();
        };
        let count: isize = msg_send![&*list, numberOfItems];
        if count <= 0 {
            return url_path(&list).into_iter().collect();
        }
        (1..=count)
            .filter_map(|i| {
                let item: Option<Retained<AnyObject>> = msg_send![&*list, descriptorAtIndex: i];
                item.and_then(|item| url_path(&item))
            })
            .collect()
    }
}

/// Where the files asked for go from now on (the shell's opener); the ones asked for at
/// launch, before the shell existed, are sent first.
pub fn on_open_documents(sink: Box<dyn Fn(Vec<std::path::PathBuf>)>) {
    OPEN_QUEUE.with(|q| q.borrow_mut().connect(sink));
}

/// Gives the keyboard back to the app that was in front before Persyk, without hiding
/// Persyk (`NSApp deactivate`; the caller hides the main window). Never `NSApp hide:`: a
/// hidden app's next window — the recording indicator — stays off screen until the app is
/// unhidden, or unhides the whole app and takes focus when ordered front (issue #36 item 3).
pub fn yield_focus() {
    if let Some(mtm) = MainThreadMarker::new() {
        NSApplication::sharedApplication(mtm).deactivate();
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
///
/// winit observes every window's `effectiveAppearance` (Key-Value Observing), so the
/// window's runtime class is KVO's subclass `NSKVONotifying_WinitWindow`. Its class is not
/// swapped under KVO: winit's observation is removed (KVO gives the object its own class
/// back once nobody observes it), the class becomes [`IndicatorPanel`], and the observation
/// is added again with winit's options (old and new values, no context), so KVO derives its
/// subclass from the panel, winit's delegate still gets the change dictionary it expects,
/// and its `removeObserver` when the window closes finds the observation it made.
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
        let class_name = |class: &AnyClass| class.name().to_str().unwrap_or("").to_owned();
        let class = object.class();
        let superclass = class.superclass().map(class_name);
        let step = super::panel_step(&class_name(class), superclass.as_deref());
        let panel = match step {
            PanelStep::Done => true,
            PanelStep::Leave => false,
            PanelStep::Swap => {
                // SAFETY: see `swap_to_panel`.
                unsafe { swap_to_panel(object) }
            }
            PanelStep::SwapObserved => {
                let key = NSString::from_str(OBSERVED_KEY);
                // SAFETY: `delegate` is winit's window delegate, the object that observes
                // `effectiveAppearance` on this window (window_delegate.rs); it is removed
                // and added back with the options winit used, on the main thread.
                unsafe {
                    let delegate: Option<Retained<AnyObject>> = msg_send![&*window, delegate];
                    let Some(delegate) = delegate else {
                        return true; // not winit's window after all: leave it as it is
                    };
                    let _: () = msg_send![&*window, removeObserver: &*delegate, forKeyPath: &*key];
                    let swapped = object.class().name().to_bytes()
                        == super::WINIT_WINDOW_CLASS.as_bytes()
                        && swap_to_panel(object);
                    let _: () = msg_send![
                        &*window,
                        addObserver: &*delegate,
                        forKeyPath: &*key,
                        options: OBSERVE_NEW_AND_OLD,
                        context: std::ptr::null_mut::<c_void>()
                    ];
                    swapped
                }
            }
        };
        if panel {
            window.setStyleMask(window.styleMask() | NSWindowStyleMask::NonactivatingPanel);
        }
        // Level and Spaces apply to any window, a panel or not; it stays should Persyk be
        // hidden (another app's "Hide Others").
        window.setHidesOnDeactivate(false);
        window.setCanHide(false);
        window.setLevel(NSStatusWindowLevel);
        window.setCollectionBehavior(
            NSWindowCollectionBehavior::CanJoinAllSpaces
                | NSWindowCollectionBehavior::Stationary
                | NSWindowCollectionBehavior::FullScreenAuxiliary
                | NSWindowCollectionBehavior::IgnoresCycle,
        );
        // What the indicator ended up as, so a wrong state shows in the log (issue #36 item 3):
        // its class (`PersykIndicatorPanel`, or KVO's subclass of it), style (with
        // `NonactivatingPanel`, 1 << 7), whether it hides with the app, whether it is on
        // screen and whether Persyk is hidden or active.
        let app = NSApplication::sharedApplication(mtm);
        eprintln!(
            "persyk: indicator window: class {}, style {:#x}, can hide {}, visible {}, app \
             hidden {}, app active {}",
            class_name(object.class()),
            window.styleMask().0,
            window.canHide(),
            window.isVisible(),
            app.isHidden(),
            app.isActive()
        );
        return true;
    }
    false
}

/// Before the recording indicator opens: a hidden Persyk (another app's "Hide Others",
/// ⌥⌘H, hides it too) would keep the new window off screen until unhidden, or unhide itself
/// and take the keyboard when the window is ordered front (issue #36 item 3). Unhidden here
/// without activation: the app the user types in keeps the keyboard, and the main window,
/// closed to the menu bar, stays closed.
pub fn unhide_for_indicator() {
    if let Some(mtm) = MainThreadMarker::new() {
        let app = NSApplication::sharedApplication(mtm);
        if app.isHidden() {
            eprintln!("persyk: Persyk was hidden; unhidden without activation for the indicator");
            app.unhideWithoutActivation();
        }
    }
}

/// The key path winit observes on every window.
const OBSERVED_KEY: &str = "effectiveAppearance";
/// `NSKeyValueObservingOptionNew | NSKeyValueObservingOptionOld`, as winit registers it.
const OBSERVE_NEW_AND_OLD: usize = 0x01 | 0x02;

/// Gives winit's window the panel class. Returns `true`.
///
/// # Safety
/// `object` is a `WinitWindow` (exactly that class, not observed) on the main thread.
/// winit's window class is NSWindow plus two overridden methods and no instance variables,
/// so its objects are laid out as an NSWindow; NSPanel adds no state of its own. The panel
/// class only changes what `canBecomeKey/MainWindow` say and lets the non-activating style
/// take effect.
unsafe fn swap_to_panel(object: &AnyObject) -> bool {
    // SAFETY: as the caller promised.
    unsafe { AnyObject::set_class(object, IndicatorPanel::class()) };
    true
}

/// Where the recording indicator goes (see [`super::indicator_position`]): the screens
/// as AppKit lists them (the first is the primary, whose height flips the coordinates), the
/// pointer (`NSEvent.mouseLocation`) and the screen of the key window (`NSScreen.mainScreen`).
pub fn indicator_place(size: (f64, f64), margin: f64) -> Option<(f32, f32)> {
    let mtm = MainThreadMarker::new()?;
    let rect = |r: objc2_foundation::NSRect| super::CocoaRect {
        x: r.origin.x,
        y: r.origin.y,
        width: r.size.width,
        height: r.size.height,
    };
    let screens: Vec<super::ScreenRects> = NSScreen::screens(mtm)
        .iter()
        .map(|s| super::ScreenRects {
            frame: rect(s.frame()),
            visible: rect(s.visibleFrame()),
        })
        .collect();
    let key = NSScreen::mainScreen(mtm).and_then(|main| {
        let frame = rect(main.frame());
        screens.iter().position(|s| s.frame == frame)
    });
    let pointer = NSEvent::mouseLocation();
    super::indicator_position(&screens, Some((pointer.x, pointer.y)), key, size, margin)
}

/// Whether Control is held now (a ctrl-click on the menu-bar icon opens the menu).
pub fn control_held() -> bool {
    NSEvent::modifierFlags_class().contains(NSEventModifierFlags::Control)
}

/// A user-initiated activity (`NSProcessInfo beginActivityWithOptions:reason:`): while one is
/// held, App Nap does not throttle Persyk's timers and threads, hidden or not. Ended on drop.
pub struct Activity(Retained<ProtocolObject<dyn NSObjectProtocol>>);

impl Activity {
    pub fn begin(reason: &str) -> Activity {
        Activity(
            NSProcessInfo::processInfo().beginActivityWithOptions_reason(
                NSActivityOptions::UserInitiated,
                &NSString::from_str(reason),
            ),
        )
    }
}

impl Drop for Activity {
    fn drop(&mut self) {
        // SAFETY: the token `beginActivityWithOptions:reason:` returned, ended once.
        unsafe { NSProcessInfo::processInfo().endActivity(&self.0) };
    }
}

/// Settings › History's "Choose a Folder…": the system's open panel for one folder (new
/// folders may be made in it), run modally on the main thread. `None` off the main thread;
/// `Some(None)` when the user cancels.
pub fn choose_folder() -> Option<Option<std::path::PathBuf>> {
    use objc2_app_kit::{NSModalResponseOK, NSOpenPanel};
    let mtm = MainThreadMarker::new()?;
    let panel = NSOpenPanel::openPanel(mtm);
    panel.setCanChooseFiles(false);
    panel.setCanChooseDirectories(true);
    panel.setCanCreateDirectories(true);
    panel.setAllowsMultipleSelection(false);
    panel.setMessage(Some(&NSString::from_str(
        "Choose the folder to keep your history in (a folder your Macs sync)",
    )));
    if panel.runModal() != NSModalResponseOK {
        return Some(None);
    }
    let urls = panel.URLs();
    Some(
        urls.iter()
            .filter_map(|url| url.path())
            .map(|p| std::path::PathBuf::from(p.to_string()))
            .next(),
    )
}

/// "Transcribe a File…": the system's open panel (several files at once), run modally on
/// the main thread. `None` off the main thread; an empty list when the user cancels.
pub fn choose_media_files() -> Option<Vec<std::path::PathBuf>> {
    use objc2_app_kit::{NSModalResponseOK, NSOpenPanel};
    let mtm = MainThreadMarker::new()?;
    let panel = NSOpenPanel::openPanel(mtm);
    panel.setCanChooseFiles(true);
    panel.setCanChooseDirectories(false);
    panel.setAllowsMultipleSelection(true);
    panel.setMessage(Some(&NSString::from_str(
        "Choose audio or video files to transcribe on this Mac",
    )));
    if panel.runModal() != NSModalResponseOK {
        return Some(Vec::new());
    }
    let urls = panel.URLs();
    Some(
        urls.iter()
            .filter_map(|url| url.path())
            .map(|p| std::path::PathBuf::from(p.to_string()))
            .collect(),
    )
}
