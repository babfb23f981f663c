//! The global hotkey (default ⌥Space): parsing what the user types in Settings, and
//! registering it with the OS through `global-hotkey`.
//!
//! Invariants:
//! - An invalid or unavailable hotkey never stops the app: the tray click still works, and
//!   the reason is shown in Settings.
//! - Presses and releases are forwarded to the shell's queue with a repaint request; the
//!   shell decides what they mean (toggle or push-to-talk).
//! - One event handler per process. `GlobalHotKeyEvent::set_event_handler` keeps only the
//!   first handler it is given (a `OnceCell`), so [`Hotkeys`] installs one handler, once,
//!   that routes each event by comparing its id with the *current* registration
//!   ([`ROUTE`]). Changing the combination swaps the route; events of any other id are
//!   dropped.
//! - One `GlobalHotKeyManager` for the [`Hotkeys`] value's life (on X11: one connection
//!   and one thread). Re-registering releases the old combination on that same connection
//!   before grabbing the new one, so saving an unchanged combination never collides with
//!   its own earlier grab; an unchanged combination is simply kept.

use std::sync::{Arc, Mutex, Once};

use global_hotkey::hotkey::HotKey;
use global_hotkey::{GlobalHotKeyEvent, GlobalHotKeyManager, HotKeyState};

use crate::settings::{DEFAULT_HOTKEY, HotkeySettings};

/// Why a hotkey cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HotkeyError {
    #[error("hotkey.invalid: not a key combination (try \"Alt+Space\" or \"Ctrl+Shift+D\")")]
    Invalid,
    #[error("hotkey.unavailable: the system did not accept a global hotkey")]
    Unavailable,
    #[error("hotkey.taken: another application already uses this key combination; choose another")]
    Taken,
}

impl HotkeyError {
    pub fn code(&self) -> &'static str {
        match self {
            HotkeyError::Invalid => "hotkey.invalid",
            HotkeyError::Unavailable => "hotkey.unavailable",
            HotkeyError::Taken => "hotkey.taken",
        }
    }
}

/// The configured combination: `None` when the user turned the hotkey off (`""`).
pub fn parse(settings: &HotkeySettings) -> Result<Option<HotKey>, HotkeyError> {
    let text = settings.keys.as_deref().unwrap_or(DEFAULT_HOTKEY).trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<HotKey>()
        .map(Some)
        .map_err(|_| HotkeyError::Invalid)
}

/// What a press (`true`) or release (`false`) of the registered combination calls.
pub type OnHotkey = Arc<dyn Fn(bool) + Send + Sync>;

/// The current registration's id and callback: what the process-wide handler routes to.
static ROUTE: Mutex<Option<(u32, OnHotkey)>> = Mutex::new(None);
static HANDLER: Once = Once::new();

fn set_route(route: Option<(u32, OnHotkey)>) {
    *ROUTE.lock().unwrap_or_else(|p| p.into_inner()) = route;
}

/// Installs the one handler `global-hotkey` will ever call (idempotent).
fn install_handler() {
    HANDLER.call_once(|| {
        GlobalHotKeyEvent::set_event_handler(Some(|e: GlobalHotKeyEvent| {
            let target = ROUTE
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .filter(|(id, _)| *id == e.id())
                .map(|(_, f)| f.clone());
            if let Some(f) = target {
                f(e.state() == HotKeyState::Pressed);
            }
        }));
    });
}

/// The app's global hotkey: at most one combination registered at a time.
pub struct Hotkeys {
    manager: Option<GlobalHotKeyManager>,
    current: Option<HotKey>,
}

impl Default for Hotkeys {
    fn default() -> Self {
        Self::new()
    }
}

impl Hotkeys {
    /// Nothing registered yet; the OS manager is created on the first [`Hotkeys::set`].
    pub fn new() -> Hotkeys {
        Hotkeys {
            manager: None,
            current: None,
        }
    }

    /// The registered combination.
    pub fn current(&self) -> Option<HotKey> {
        self.current
    }

    /// Makes `wanted` the registered combination (`None`: no hotkey), with `on_event`
    /// called for its presses and releases. An unchanged combination stays registered; a
    /// changed one releases the old combination first. On `Err` no combination is
    /// registered.
    pub fn set(&mut self, wanted: Option<HotKey>, on_event: OnHotkey) -> Result<(), HotkeyError> {
        install_handler();
        if let Some(k) = wanted
            && Some(k) == self.current
        {
            set_route(Some((k.id(), on_event)));
            return Ok(());
        }
        self.release();
        let Some(hotkey) = wanted else {
            return Ok(());
        };
        // Without an X display `global-hotkey` "registers" into a thread that has already
        // given up; say so instead (Wayland sessions without XWayland).
        #[cfg(target_os = "linux")]
        if std::env::var_os("DISPLAY").is_none() {
            return Err(HotkeyError::Unavailable);
        }
        if self.manager.is_none() {
            self.manager = Some(GlobalHotKeyManager::new().map_err(|_| HotkeyError::Unavailable)?);
        }
        let Some(manager) = &self.manager else {
            return Err(HotkeyError::Unavailable);
        };
        // Routed before the grab, so a press right after registering is not lost.
        set_route(Some((hotkey.id(), on_event)));
        match manager.register(hotkey) {
            Ok(()) => {
                self.current = Some(hotkey);
                Ok(())
            }
            Err(e) => {
                set_route(None);
                Err(match e {
                    global_hotkey::Error::AlreadyRegistered(_) => HotkeyError::Taken,
                    _ => HotkeyError::Unavailable,
                })
            }
        }
    }

    /// Unregisters the current combination (if any).
    pub fn release(&mut self) {
        set_route(None);
        if let (Some(manager), Some(old)) = (&self.manager, self.current.take()) {
            let _ = manager.unregister(old);
        }
    }
}

impl Drop for Hotkeys {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::HotkeyMode;

    fn keys(k: Option<&str>) -> HotkeySettings {
        HotkeySettings {
            keys: k.map(str::to_owned),
            mode: HotkeyMode::Toggle,
        }
    }

    #[test]
    fn default_empty_and_invalid() {
        assert!(matches!(parse(&keys(None)), Ok(Some(_))));
        assert!(matches!(parse(&keys(Some("ctrl+shift+d"))), Ok(Some(_))));
        assert_eq!(parse(&keys(Some(""))), Ok(None));
        assert_eq!(parse(&keys(Some("alt+"))), Err(HotkeyError::Invalid));
        assert_eq!(parse(&keys(Some("banana"))), Err(HotkeyError::Invalid));
    }
}
