//! The macOS source of raw key events: a listen-only `CGEventTap` (flagsChanged for the
//! modifiers and Fn, keyDown / keyUp for the keys that join a chord) on a CFRunLoop thread
//! of its own.
//!
//! Invariants:
//! - Listen-only (`kCGEventTapOptionListenOnly`): the tap cannot change or swallow an event,
//!   so Fn+Delete, Right ⌥+arrows and everything else reach the focused app as before. It
//!   needs Input Monitoring (not Accessibility): asked for with `CGRequestListenEventAccess`
//!   when the dictation key becomes a modifier alone (never for the key recorder); when the tap cannot be created the start fails with
//!   [`ObserveError::NeedsInputMonitoring`] and Settings offers the Privacy pane.
//! - A modifier's flagsChanged event says which key changed (its virtual keycode) and the
//!   flags after the change: it is down when its device-dependent bit (or, for Fn, the
//!   secondary-fn flag) is set.
//! - A tap the system disabled (a slow callback, or secure input) is enabled again from the
//!   callback.
//! - Dropping the source stops its run loop (a flag checked each second, and
//!   `CFRunLoopStop`), joins the thread, and the thread invalidates and releases the tap.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::mpsc::{Sender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use super::{ModKey, ObserveError, RawKey, Seen, Source};

type CFTypeRef = *const c_void;
type CFMachPortRef = *mut c_void;
type CFRunLoopRef = *mut c_void;
type CFRunLoopSourceRef = *mut c_void;
type CFStringRef = *const c_void;
type CGEventRef = *mut c_void;
type CGEventTapProxy = *mut c_void;
type CGEventTapCallBack = unsafe extern "C" fn(
    proxy: CGEventTapProxy,
    kind: u32,
    event: CGEventRef,
    user_info: *mut c_void,
) -> CGEventRef;

#[link(name = "CoreGraphics", kind = "framework")]
unsafe extern "C" {
    fn CGEventTapCreate(
        tap: u32,
        place: u32,
        options: u32,
        events_of_interest: u64,
        callback: CGEventTapCallBack,
        user_info: *mut c_void,
    ) -> CFMachPortRef;
    fn CGEventTapEnable(tap: CFMachPortRef, enable: bool);
    fn CGEventGetIntegerValueField(event: CGEventRef, field: u32) -> i64;
    fn CGEventGetFlags(event: CGEventRef) -> u64;
    fn CGPreflightListenEventAccess() -> bool;
    fn CGRequestListenEventAccess() -> bool;
}

#[link(name = "CoreFoundation", kind = "framework")]
unsafe extern "C" {
    static kCFRunLoopCommonModes: CFStringRef;
    static kCFRunLoopDefaultMode: CFStringRef;
    fn CFMachPortCreateRunLoopSource(
        allocator: CFTypeRef,
        port: CFMachPortRef,
        order: isize,
    ) -> CFRunLoopSourceRef;
    fn CFMachPortInvalidate(port: CFMachPortRef);
    fn CFRunLoopGetCurrent() -> CFRunLoopRef;
    fn CFRunLoopAddSource(rl: CFRunLoopRef, source: CFRunLoopSourceRef, mode: CFStringRef);
    fn CFRunLoopRemoveSource(rl: CFRunLoopRef, source: CFRunLoopSourceRef, mode: CFStringRef);
    fn CFRunLoopRunInMode(mode: CFStringRef, seconds: f64, return_after_source: bool) -> i32;
    fn CFRunLoopStop(rl: CFRunLoopRef);
    fn CFRunLoopWakeUp(rl: CFRunLoopRef);
    fn CFRelease(cf: CFTypeRef);
}

const SESSION_EVENT_TAP: u32 = 1;
const TAIL_APPEND: u32 = 1;
const LISTEN_ONLY: u32 = 1;
const KEY_DOWN: u32 = 10;
const KEY_UP: u32 = 11;
const FLAGS_CHANGED: u32 = 12;
const TAP_DISABLED_BY_TIMEOUT: u32 = 0xFFFF_FFFE;
const TAP_DISABLED_BY_USER_INPUT: u32 = 0xFFFF_FFFF;
/// `kCGKeyboardEventKeycode`.
const KEYCODE_FIELD: u32 = 9;
/// `kCGEventFlagMaskSecondaryFn`.
const FLAG_FN: u64 = 0x0080_0000;
/// `kCGEventFlagMaskAlphaShift` (Caps Lock).
const FLAG_CAPS: u64 = 0x0001_0000;

/// A modifier's virtual keycode (`kVK_…`), what it is, and the flag that says it is down
/// (the device-dependent `NX_DEVICE…KEYMASK` bits; Fn's secondary-fn flag).
const MODIFIERS: [(i64, ModKey, u64); 9] = [
    (63, ModKey::Fn, FLAG_FN),        // kVK_Function
    (59, ModKey::LeftCtrl, 0x0001),   // kVK_Control
    (62, ModKey::RightCtrl, 0x2000),  // kVK_RightControl
    (58, ModKey::LeftAlt, 0x0020),    // kVK_Option
    (61, ModKey::RightAlt, 0x0040),   // kVK_RightOption
    (56, ModKey::LeftShift, 0x0002),  // kVK_Shift
    (60, ModKey::RightShift, 0x0004), // kVK_RightShift
    (55, ModKey::LeftSuper, 0x0008),  // kVK_Command
    (54, ModKey::RightSuper, 0x0010), // kVK_RightCommand
];

/// Caps Lock's keycode (`kVK_CapsLock`): a flagsChanged key that is no shortcut.
const CAPS_LOCK: i64 = 57;

/// What the callback reads: where to send, and the tap to enable again.
struct Shared {
    tx: Mutex<Sender<RawKey>>,
    tap: AtomicPtr<c_void>,
}

/// What one tap event is, from its type, keycode and flags (`None`: not a key event).
fn classify(kind: u32, keycode: i64, flags: u64) -> Option<(Seen, bool)> {
    let other = || Seen::Other(u32::try_from(keycode).unwrap_or(u32::MAX));
    match kind {
        KEY_DOWN => Some((other(), true)),
        KEY_UP => Some((other(), false)),
        FLAGS_CHANGED => {
            if keycode == CAPS_LOCK {
                return Some((other(), flags & FLAG_CAPS != 0));
            }
            MODIFIERS
                .iter()
                .find(|(code, _, _)| *code == keycode)
                .map(|(_, key, mask)| (Seen::Mod(*key), flags & mask != 0))
        }
        _ => None,
    }
}

unsafe extern "C" fn callback(
    _proxy: CGEventTapProxy,
    kind: u32,
    event: CGEventRef,
    user_info: *mut c_void,
) -> CGEventRef {
    let at = Instant::now();
    if user_info.is_null() {
        return event;
    }
    // SAFETY: `user_info` is the `Shared` the run loop thread keeps alive (an `Arc` it
    // holds) until after the tap is invalidated.
    let shared = unsafe { &*(user_info as *const Shared) };
    if kind == TAP_DISABLED_BY_TIMEOUT || kind == TAP_DISABLED_BY_USER_INPUT {
        let tap = shared.tap.load(Ordering::Acquire);
        if !tap.is_null() {
            // SAFETY: the tap is valid until the run loop thread invalidates it, after
            // which no callback runs.
            unsafe { CGEventTapEnable(tap, true) };
        }
        return event;
    }
    if event.is_null() {
        return event;
    }
    // SAFETY: a valid event handed to the callback for its duration.
    let (keycode, flags) = unsafe {
        (
            CGEventGetIntegerValueField(event, KEYCODE_FIELD),
            CGEventGetFlags(event),
        )
    };
    if let Some((key, down)) = classify(kind, keycode, flags)
        && let Ok(tx) = shared.tx.lock()
    {
        let _ = tx.send(RawKey { key, down, at });
    }
    // Listen-only: the return value is ignored; the event goes on unchanged.
    event
}

/// The run loop to stop, passed between threads (CFRunLoopStop is thread-safe).
struct RunLoop(CFRunLoopRef);
// SAFETY: a CFRunLoop may be stopped and woken from any thread.
unsafe impl Send for RunLoop {}

/// The tap's thread, until dropped.
pub(super) struct TapSource {
    stop: Arc<AtomicBool>,
    run_loop: RunLoop,
    thread: Option<JoinHandle<()>>,
}

impl Source for TapSource {}

/// Asks for Input Monitoring now if Persyk lacks it (the system's prompt, once per app):
/// called when the key recorder takes a modifier alone, so the question comes while the user
/// is setting the key, not at some later start (issue #36 item 9). Whether it is granted.
pub(super) fn ask_input_monitoring() -> bool {
    // SAFETY: plain queries; the request shows the system's prompt once per app.
    unsafe { CGPreflightListenEventAccess() || CGRequestListenEventAccess() }
}

impl TapSource {
    /// Starts the tap; without Input Monitoring, `ask` shows the system's prompt (once per
    /// app: the dictation key was set to a modifier alone), else it fails at once (the key
    /// recorder, which must not prompt for a combination).
    pub(super) fn start(tx: Sender<RawKey>, ask: bool) -> Result<TapSource, ObserveError> {
        // SAFETY: plain queries; the request shows the system's prompt once per app.
        unsafe {
            if !CGPreflightListenEventAccess() {
                if !ask {
                    return Err(ObserveError::NeedsInputMonitoring);
                }
                CGRequestListenEventAccess();
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            tx: Mutex::new(tx),
            tap: AtomicPtr::new(std::ptr::null_mut()),
        });
        let (ready_tx, ready) = sync_channel::<Result<RunLoop, ObserveError>>(1);
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("persyk-event-tap".into())
            .spawn(move || run(shared, thread_stop, ready_tx))
            .map_err(|_| ObserveError::Unavailable)?;
        match ready.recv() {
            Ok(Ok(run_loop)) => Ok(TapSource {
                stop,
                run_loop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(ObserveError::Unavailable)
            }
        }
    }
}

impl Drop for TapSource {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // SAFETY: the run loop lives as long as its thread, which is joined below.
        unsafe {
            CFRunLoopStop(self.run_loop.0);
            CFRunLoopWakeUp(self.run_loop.0);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    ready: std::sync::mpsc::SyncSender<Result<RunLoop, ObserveError>>,
) {
    let mask = (1u64 << KEY_DOWN) | (1u64 << KEY_UP) | (1u64 << FLAGS_CHANGED);
    let info = Arc::as_ptr(&shared) as *mut c_void;
    // SAFETY: `info` points at `shared`, which this function keeps alive past the tap's
    // invalidation below; the callback has the declared signature.
    let tap = unsafe {
        CGEventTapCreate(
            SESSION_EVENT_TAP,
            TAIL_APPEND,
            LISTEN_ONLY,
            mask,
            callback,
            info,
        )
    };
    if tap.is_null() {
        let _ = ready.send(Err(ObserveError::NeedsInputMonitoring));
        return;
    }
    shared.tap.store(tap, Ordering::Release);
    // SAFETY: a valid mach port; the source is released below.
    let source = unsafe { CFMachPortCreateRunLoopSource(std::ptr::null(), tap, 0) };
    if source.is_null() {
        // SAFETY: the tap was created above and is released once.
        unsafe {
            CFMachPortInvalidate(tap);
            CFRelease(tap);
        }
        let _ = ready.send(Err(ObserveError::Unavailable));
        return;
    }
    // SAFETY: this thread's run loop, the source and the tap created above.
    let run_loop = unsafe {
        let rl = CFRunLoopGetCurrent();
        CFRunLoopAddSource(rl, source, kCFRunLoopCommonModes);
        CGEventTapEnable(tap, true);
        rl
    };
    if ready.send(Ok(RunLoop(run_loop))).is_ok() {
        while !stop.load(Ordering::Acquire) {
            // SAFETY: runs this thread's run loop for at most a second (the stop flag is
            // looked at in between; `CFRunLoopStop` ends a run early).
            unsafe { CFRunLoopRunInMode(kCFRunLoopDefaultMode, 1.0, false) };
        }
    }
    // SAFETY: removing and releasing what was created above, once; no callback runs after
    // the tap is invalidated, so `shared` may go after it.
    unsafe {
        CFRunLoopRemoveSource(run_loop, source, kCFRunLoopCommonModes);
        CGEventTapEnable(tap, false);
        CFMachPortInvalidate(tap);
        CFRelease(source);
        CFRelease(tap);
    }
    shared.tap.store(std::ptr::null_mut(), Ordering::Release);
    drop(shared);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_changed_says_which_modifier_and_whether_it_is_down() {
        assert_eq!(
            classify(FLAGS_CHANGED, 63, FLAG_FN),
            Some((Seen::Mod(ModKey::Fn), true))
        );
        assert_eq!(
            classify(FLAGS_CHANGED, 63, 0),
            Some((Seen::Mod(ModKey::Fn), false))
        );
        // Right ⌥ down while Left ⌥ is held: its own bit decides.
        assert_eq!(
            classify(FLAGS_CHANGED, 61, 0x0008_0000 | 0x0020 | 0x0040),
            Some((Seen::Mod(ModKey::RightAlt), true))
        );
        assert_eq!(
            classify(FLAGS_CHANGED, 61, 0x0008_0000 | 0x0020),
            Some((Seen::Mod(ModKey::RightAlt), false))
        );
        assert_eq!(
            classify(KEY_DOWN, 51, FLAG_FN),
            Some((Seen::Other(51), true))
        );
        assert_eq!(classify(FLAGS_CHANGED, 200, 0), None);
    }
}
