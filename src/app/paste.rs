//! "After dictation → Copy and paste into the active app": the paste keystroke, posted to
//! whatever app has keyboard focus once the clipboard holds the transcript.
//!
//! - macOS: ⌘V as two `CGEvent`s (key down and up of `kVK_ANSI_V` with the command flag)
//!   posted at the HID tap, only while `AXIsProcessTrusted()` holds (Accessibility access).
//!   Turning the setting on calls `AXIsProcessTrustedWithOptions` with the prompt, which
//!   shows the system's dialog; until access is on the window says where to turn it on.
//! - Linux X11: Ctrl+V through the XTest extension (x11rb, its own short-lived connection to
//!   `DISPLAY`): Control_L down, V down, V up, Control_L up, then one round trip so the
//!   server has them before [`Paster::paste`] returns.
//! - Wayland (`XDG_SESSION_TYPE=wayland`, or `WAYLAND_DISPLAY` without `DISPLAY`): not
//!   available. Wayland gives an app no way to type into another one (XTest under XWayland
//!   reaches only X11 apps), so the setting says so and Persyk only copies.
//!
//! Invariants:
//! - [`deliver`] pastes only after the clipboard accepted the transcript, and a paste that
//!   fails leaves the transcript on the clipboard (never the previous text) and returns a
//!   [`PasteError`] with a stable code for the window. Copy-only never touches the paster.
//! - "Put the previous clipboard back" restores only plain text, only after a successful
//!   paste, [`RESTORE_DELAY_MS`] later (the target app reads the clipboard when it handles
//!   the keystroke, which it does on its own schedule), and only if the clipboard still
//!   holds the transcript ([`put_back`]): a copy the user made meanwhile is never
//!   overwritten.
//! - Nothing here reads or logs the text beyond moving it; errors carry no user text.
//! - The platform sits behind [`Paster`], so the flow is tested with a fake everywhere.

use std::sync::Arc;

use crate::settings::AfterDictationSettings;

/// How long after the paste keystroke the previous clipboard text is put back. The target
/// app asks for the clipboard's content while it handles ⌘V / Ctrl+V; 500 ms covers a busy
/// app without leaving the transcript on the clipboard for long.
pub const RESTORE_DELAY_MS: u64 = 500;

/// The System Settings pane where Accessibility access is turned on (macOS).
pub const PRIVACY_ACCESSIBILITY_URL: &str =
    "x-apple.systempreferences:com.apple.preference.security?Privacy_Accessibility";

/// Why the transcript was not pasted (it is on the clipboard all the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PasteError {
    /// This system offers no way to type into another app (Wayland, no display).
    #[error("paste.unavailable: {0}")]
    Unavailable(&'static str),
    /// macOS: Accessibility access is off for Persyk.
    #[error(
        "paste.not-trusted: Persyk may not type into other apps until Accessibility access is \
         on (System Settings → Privacy & Security → Accessibility)"
    )]
    NotTrusted,
    /// The keystroke could not be sent.
    #[error("paste.failed: the paste keystroke could not be sent ({0})")]
    Failed(&'static str),
}

impl PasteError {
    pub fn code(&self) -> &'static str {
        match self {
            PasteError::Unavailable(_) => "paste.unavailable",
            PasteError::NotTrusted => "paste.not-trusted",
            PasteError::Failed(_) => "paste.failed",
        }
    }
}

/// Whether pasting can work here, as Settings shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasteAvailability {
    Available,
    /// macOS: works once Accessibility access is turned on.
    NeedsAccess,
    /// Never on this system; the sentence says why.
    Unavailable(&'static str),
}

/// Posts the paste keystroke to the app that has keyboard focus.
pub trait Paster: Send + Sync {
    fn availability(&self) -> PasteAvailability;
    /// Asks the system for what pasting needs (macOS: shows the Accessibility prompt) and
    /// says where things stand now. Never blocks on the user's answer.
    fn request_access(&self) -> PasteAvailability {
        self.availability()
    }
    /// Posts ⌘V / Ctrl+V. Called only when [`Paster::availability`] said `Available`.
    fn paste(&self) -> Result<(), PasteError>;
}

/// The clipboard, as far as delivering a transcript needs it.
pub trait TextClipboard {
    /// The clipboard's text, if it holds text.
    fn text(&mut self) -> Option<String>;
    /// Replaces the clipboard's content; `Err` is a short, content-free reason.
    fn set_text(&mut self, text: &str) -> Result<(), String>;
}

/// What became of a finished recording's transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The copy to the clipboard.
    pub copied: Result<(), String>,
    /// The paste, when the settings ask for one and the copy succeeded.
    pub pasted: Option<Result<(), PasteError>>,
    /// The previous clipboard text to put back after [`RESTORE_DELAY_MS`] (see
    /// [`put_back`]); only after a successful paste with "put back" on.
    pub restore: Option<String>,
}

/// Copies `text`, then pastes it when `after` says so. See the module invariants.
pub fn deliver(
    clipboard: &mut dyn TextClipboard,
    paster: &dyn Paster,
    text: &str,
    after: &AfterDictationSettings,
) -> Delivery {
    let previous = if after.restores() {
        clipboard.text()
    } else {
        None
    };
    let copied = clipboard.set_text(text);
    if copied.is_err() || !after.pastes() {
        return Delivery {
            copied,
            pasted: None,
            restore: None,
        };
    }
    let pasted = match paster.availability() {
        PasteAvailability::Available => paster.paste(),
        PasteAvailability::NeedsAccess => Err(PasteError::NotTrusted),
        PasteAvailability::Unavailable(why) => Err(PasteError::Unavailable(why)),
    };
    let restore = match pasted {
        Ok(()) => previous.filter(|p| p != text),
        Err(_) => None,
    };
    Delivery {
        copied,
        pasted: Some(pasted),
        restore,
    }
}

/// Puts `previous` back if the clipboard still holds `pasted` (the user may have copied
/// something else meanwhile). Returns whether it did.
pub fn put_back(clipboard: &mut dyn TextClipboard, previous: &str, pasted: &str) -> bool {
    clipboard.text().as_deref() == Some(pasted) && clipboard.set_text(previous).is_ok()
}

/// The paster of this system.
pub fn system() -> Arc<dyn Paster> {
    #[cfg(target_os = "macos")]
    {
        Arc::new(macos::MacPaster)
    }
    #[cfg(target_os = "linux")]
    {
        Arc::new(x11::X11Paster)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Arc::new(Nowhere)
    }
}

/// Systems without a paster.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
struct Nowhere;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
impl Paster for Nowhere {
    fn availability(&self) -> PasteAvailability {
        PasteAvailability::Unavailable("Persyk cannot paste into other apps on this system.")
    }
    fn paste(&self) -> Result<(), PasteError> {
        Err(PasteError::Unavailable("not supported on this system"))
    }
}

/// Where a Linux session can take the XTest keystroke, from its environment
/// (`DISPLAY`, `WAYLAND_DISPLAY`, `XDG_SESSION_TYPE`).
pub fn unix_availability(
    display: Option<&str>,
    wayland_display: Option<&str>,
    session_type: Option<&str>,
) -> PasteAvailability {
    let set = |v: Option<&str>| v.is_some_and(|v| !v.is_empty());
    if session_type.is_some_and(|t| t.eq_ignore_ascii_case("wayland"))
        || (set(wayland_display) && !set(display))
    {
        PasteAvailability::Unavailable(WAYLAND)
    } else if !set(display) {
        PasteAvailability::Unavailable(NO_DISPLAY)
    } else {
        PasteAvailability::Available
    }
}

/// Settings' sentence for a Wayland session.
pub const WAYLAND: &str = "Pasting is not available on Wayland: it gives no app a way to type \
                           into another one. Persyk copies the text; paste it with Ctrl+V.";
const NO_DISPLAY: &str = "Pasting needs an X11 display, and this session has none.";

#[cfg(target_os = "linux")]
mod x11 {
    use x11rb::connection::{Connection, RequestConnection};
    use x11rb::protocol::xproto::{self, ConnectionExt as _};
    use x11rb::protocol::xtest::{self, ConnectionExt as _};

    use super::{PasteAvailability, PasteError, Paster};

    const XK_CONTROL_L: u32 = 0xffe3;
    const XK_V_LOWER: u32 = 0x0076;

    /// Ctrl+V through XTest.
    pub struct X11Paster;

    impl Paster for X11Paster {
        fn availability(&self) -> PasteAvailability {
            let var = |k| std::env::var(k).ok();
            super::unix_availability(
                var("DISPLAY").as_deref(),
                var("WAYLAND_DISPLAY").as_deref(),
                var("XDG_SESSION_TYPE").as_deref(),
            )
        }

        fn paste(&self) -> Result<(), PasteError> {
            let failed = |_| PasteError::Failed("the X server did not answer");
            let (conn, screen) =
                x11rb::connect(None).map_err(|_| PasteError::Failed("no X display"))?;
            if conn
                .extension_information(xtest::X11_EXTENSION_NAME)
                .map_err(failed)?
                .is_none()
            {
                return Err(PasteError::Unavailable(
                    "the X server has no XTest extension, which pasting needs",
                ));
            }
            let setup = conn.setup();
            let root = setup
                .roots
                .get(screen)
                .map(|s| s.root)
                .ok_or(PasteError::Failed("no X screen"))?;
            let (min, max) = (setup.min_keycode, setup.max_keycode);
            let map = conn
                .get_keyboard_mapping(min, max.saturating_sub(min).saturating_add(1))
                .map_err(failed)?
                .reply()
                .map_err(|_| PasteError::Failed("the X server did not answer"))?;
            let per = map.keysyms_per_keycode;
            let ctrl = keycode_for(&map.keysyms, per, min, XK_CONTROL_L)
                .ok_or(PasteError::Failed("no Control key in the keyboard map"))?;
            let v = keycode_for(&map.keysyms, per, min, XK_V_LOWER)
                .ok_or(PasteError::Failed("no V key in the keyboard map"))?;
            for (kind, key) in [
                (xproto::KEY_PRESS_EVENT, ctrl),
                (xproto::KEY_PRESS_EVENT, v),
                (xproto::KEY_RELEASE_EVENT, v),
                (xproto::KEY_RELEASE_EVENT, ctrl),
            ] {
                conn.xtest_fake_input(kind, key, x11rb::CURRENT_TIME, root, 0, 0, 0)
                    .map_err(failed)?;
            }
            // One round trip: the server has processed the four events when it answers.
            conn.get_input_focus()
                .map_err(failed)?
                .reply()
                .map_err(|_| PasteError::Failed("the X server did not answer"))?;
            Ok(())
        }
    }

    /// The first keycode whose keysyms (`per` columns each, from `min`) include `keysym`,
    /// preferring the unshifted column.
    pub(super) fn keycode_for(keysyms: &[u32], per: u8, min: u8, keysym: u32) -> Option<u8> {
        let per = usize::from(per.max(1));
        let find = |column: Option<usize>| {
            keysyms.chunks(per).enumerate().find_map(|(i, row)| {
                let hit = match column {
                    Some(c) => row.get(c) == Some(&keysym),
                    None => row.contains(&keysym),
                };
                hit.then(|| u8::try_from(usize::from(min) + i).ok())
                    .flatten()
            })
        };
        find(Some(0)).or_else(|| find(None))
    }
}

#[cfg(target_os = "macos")]
mod macos {
    use std::ffi::c_void;

    use super::{PasteAvailability, PasteError, Paster};

    type CFTypeRef = *const c_void;

    /// `CFDictionaryKeyCallBacks` / `CFDictionaryValueCallBacks`, used by address only.
    #[repr(C)]
    struct CallBacks {
        _opaque: [u8; 0],
    }

    #[link(name = "ApplicationServices", kind = "framework")]
    unsafe extern "C" {
        fn AXIsProcessTrusted() -> u8;
        fn AXIsProcessTrustedWithOptions(options: CFTypeRef) -> u8;
        static kAXTrustedCheckOptionPrompt: CFTypeRef;
    }

    #[link(name = "CoreFoundation", kind = "framework")]
    unsafe extern "C" {
        static kCFBooleanTrue: CFTypeRef;
        static kCFTypeDictionaryKeyCallBacks: CallBacks;
        static kCFTypeDictionaryValueCallBacks: CallBacks;
        fn CFDictionaryCreate(
            allocator: CFTypeRef,
            keys: *const CFTypeRef,
            values: *const CFTypeRef,
            count: isize,
            key_callbacks: *const CallBacks,
            value_callbacks: *const CallBacks,
        ) -> CFTypeRef;
        fn CFRelease(cf: CFTypeRef);
    }

    #[link(name = "CoreGraphics", kind = "framework")]
    unsafe extern "C" {
        fn CGEventSourceCreate(state: i32) -> CFTypeRef;
        fn CGEventCreateKeyboardEvent(source: CFTypeRef, key: u16, down: bool) -> CFTypeRef;
        fn CGEventSetFlags(event: CFTypeRef, flags: u64);
        fn CGEventPost(tap: u32, event: CFTypeRef);
    }

    /// `kVK_ANSI_V` (the V key's position, whatever the layout).
    const KEY_V: u16 = 0x09;
    const FLAG_COMMAND: u64 = 0x0010_0000;
    const HID_EVENT_TAP: u32 = 0;
    const COMBINED_SESSION_STATE: i32 = 0;

    /// ⌘V through CGEvent, behind Accessibility access.
    pub struct MacPaster;

    fn trusted() -> bool {
        // SAFETY: a plain query without arguments.
        unsafe { AXIsProcessTrusted() != 0 }
    }

    impl Paster for MacPaster {
        fn availability(&self) -> PasteAvailability {
            if trusted() {
                PasteAvailability::Available
            } else {
                PasteAvailability::NeedsAccess
            }
        }

        fn request_access(&self) -> PasteAvailability {
            // SAFETY: a one-entry CFDictionary of CF constants, released after the call.
            let granted = unsafe {
                let keys = [kAXTrustedCheckOptionPrompt];
                let values = [kCFBooleanTrue];
                let options = CFDictionaryCreate(
                    std::ptr::null(),
                    keys.as_ptr(),
                    values.as_ptr(),
                    1,
                    &raw const kCFTypeDictionaryKeyCallBacks,
                    &raw const kCFTypeDictionaryValueCallBacks,
                );
                if options.is_null() {
                    false
                } else {
                    let granted = AXIsProcessTrustedWithOptions(options) != 0;
                    CFRelease(options);
                    granted
                }
            };
            if granted {
                PasteAvailability::Available
            } else {
                PasteAvailability::NeedsAccess
            }
        }

        fn paste(&self) -> Result<(), PasteError> {
            if !trusted() {
                return Err(PasteError::NotTrusted);
            }
            // SAFETY: CoreGraphics objects created here and released here; a null result
            // is checked before use.
            unsafe {
                let source = CGEventSourceCreate(COMBINED_SESSION_STATE);
                let down = CGEventCreateKeyboardEvent(source, KEY_V, true);
                let up = CGEventCreateKeyboardEvent(source, KEY_V, false);
                let ok = !down.is_null() && !up.is_null();
                if ok {
                    CGEventSetFlags(down, FLAG_COMMAND);
                    CGEventSetFlags(up, FLAG_COMMAND);
                    CGEventPost(HID_EVENT_TAP, down);
                    CGEventPost(HID_EVENT_TAP, up);
                }
                for cf in [down, up, source] {
                    if !cf.is_null() {
                        CFRelease(cf);
                    }
                }
                if ok {
                    Ok(())
                } else {
                    Err(PasteError::Failed("no keyboard event could be made"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::AfterAction;
    use std::sync::Mutex;

    #[derive(Default)]
    struct FakeClipboard {
        text: Option<String>,
        refuse: bool,
        log: Vec<String>,
    }

    impl TextClipboard for FakeClipboard {
        fn text(&mut self) -> Option<String> {
            self.log.push("get".into());
            self.text.clone()
        }
        fn set_text(&mut self, text: &str) -> Result<(), String> {
            if self.refuse {
                return Err("clipboard unavailable".into());
            }
            self.log.push(format!("set {text}"));
            self.text = Some(text.to_owned());
            Ok(())
        }
    }

    struct FakePaster {
        availability: PasteAvailability,
        result: Result<(), PasteError>,
        pastes: Mutex<u32>,
    }

    impl FakePaster {
        fn new(availability: PasteAvailability, result: Result<(), PasteError>) -> FakePaster {
            FakePaster {
                availability,
                result,
                pastes: Mutex::new(0),
            }
        }
        fn pastes(&self) -> u32 {
            *self.pastes.lock().unwrap()
        }
    }

    impl Paster for FakePaster {
        fn availability(&self) -> PasteAvailability {
            self.availability
        }
        fn paste(&self) -> Result<(), PasteError> {
            *self.pastes.lock().unwrap() += 1;
            self.result
        }
    }

    fn after(action: AfterAction, restore: bool) -> AfterDictationSettings {
        AfterDictationSettings {
            action,
            restore_clipboard: restore,
        }
    }

    #[test]
    fn copy_only_never_pastes_or_reads_the_clipboard() {
        let mut clip = FakeClipboard::default();
        let paster = FakePaster::new(PasteAvailability::Available, Ok(()));
        let d = deliver(&mut clip, &paster, "hello", &after(AfterAction::Copy, true));
        assert_eq!(d.copied, Ok(()));
        assert_eq!((d.pasted, d.restore), (None, None));
        assert_eq!(paster.pastes(), 0);
        assert_eq!(clip.log, ["set hello"]);
    }

    #[test]
    fn paste_follows_the_copy_and_restores_only_when_asked() {
        let mut clip = FakeClipboard {
            text: Some("before".into()),
            ..FakeClipboard::default()
        };
        let paster = FakePaster::new(PasteAvailability::Available, Ok(()));
        let d = deliver(
            &mut clip,
            &paster,
            "hello",
            &after(AfterAction::Paste, true),
        );
        assert_eq!(d.pasted, Some(Ok(())));
        assert_eq!(d.restore.as_deref(), Some("before"));
        assert_eq!(clip.log, ["get", "set hello"]);
        assert_eq!(paster.pastes(), 1);

        let d = deliver(
            &mut clip,
            &paster,
            "again",
            &after(AfterAction::Paste, false),
        );
        assert_eq!((d.pasted, d.restore), (Some(Ok(())), None));
    }

    #[test]
    fn a_failed_paste_keeps_the_transcript_on_the_clipboard_with_a_code() {
        for (availability, result, code) in [
            (PasteAvailability::NeedsAccess, Ok(()), "paste.not-trusted"),
            (
                PasteAvailability::Unavailable(WAYLAND),
                Ok(()),
                "paste.unavailable",
            ),
            (
                PasteAvailability::Available,
                Err(PasteError::Failed("the X server did not answer")),
                "paste.failed",
            ),
        ] {
            let mut clip = FakeClipboard {
                text: Some("before".into()),
                ..FakeClipboard::default()
            };
            let paster = FakePaster::new(availability, result);
            let d = deliver(
                &mut clip,
                &paster,
                "hello",
                &after(AfterAction::Paste, true),
            );
            assert_eq!(d.copied, Ok(()));
            assert_eq!(d.pasted.unwrap().unwrap_err().code(), code);
            // Nothing to put back: the transcript stays where the user can paste it.
            assert_eq!(d.restore, None);
            assert_eq!(clip.text.as_deref(), Some("hello"));
        }
    }

    #[test]
    fn no_paste_when_the_copy_failed() {
        let mut clip = FakeClipboard {
            refuse: true,
            ..FakeClipboard::default()
        };
        let paster = FakePaster::new(PasteAvailability::Available, Ok(()));
        let d = deliver(
            &mut clip,
            &paster,
            "hello",
            &after(AfterAction::Paste, true),
        );
        assert!(d.copied.is_err());
        assert_eq!((d.pasted, d.restore), (None, None));
        assert_eq!(paster.pastes(), 0);
    }

    #[test]
    fn put_back_leaves_a_newer_copy_alone() {
        let mut clip = FakeClipboard {
            text: Some("hello".into()),
            ..FakeClipboard::default()
        };
        assert!(put_back(&mut clip, "before", "hello"));
        assert_eq!(clip.text.as_deref(), Some("before"));
        clip.text = Some("the user copied this".into());
        assert!(!put_back(&mut clip, "before", "hello"));
        assert_eq!(clip.text.as_deref(), Some("the user copied this"));
    }

    #[test]
    fn wayland_and_missing_displays_are_unavailable() {
        use PasteAvailability::*;
        assert_eq!(unix_availability(Some(":0"), None, Some("x11")), Available);
        assert_eq!(unix_availability(Some(":0"), None, None), Available);
        assert_eq!(
            unix_availability(None, Some("wayland-0"), None),
            Unavailable(WAYLAND)
        );
        assert_eq!(
            unix_availability(Some(":0"), Some("wayland-0"), Some("wayland")),
            Unavailable(WAYLAND)
        );
        assert_eq!(
            unix_availability(Some(""), None, None),
            Unavailable(NO_DISPLAY)
        );
        assert_eq!(
            unix_availability(None, None, Some("tty")),
            Unavailable(NO_DISPLAY)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn keycodes_come_from_the_keyboard_map() {
        // Two keysyms per keycode from keycode 8: 8 = a/A, 9 = v/V, 10 = Control_L.
        let map = [0x61, 0x41, 0x76, 0x56, 0xffe3, 0];
        assert_eq!(x11::keycode_for(&map, 2, 8, 0x76), Some(9));
        assert_eq!(x11::keycode_for(&map, 2, 8, 0xffe3), Some(10));
        assert_eq!(x11::keycode_for(&map, 2, 8, 0x56), Some(9));
        assert_eq!(x11::keycode_for(&map, 2, 8, 0x7a), None);
    }
}
