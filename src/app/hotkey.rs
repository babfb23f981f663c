//! The global hotkey (default ⌥Space): parsing what the user types in Settings, and
//! registering it with the OS through `global-hotkey`.
//!
//! Invariants:
//! - An invalid or unavailable hotkey never stops the app: the tray click still works, and
//!   the reason is shown in Settings.
//! - Presses and releases are forwarded to the shell's queue with a repaint request; the
//!   shell decides what they mean (toggle or push-to-talk).

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
}

impl HotkeyError {
    pub fn code(&self) -> &'static str {
        match self {
            HotkeyError::Invalid => "hotkey.invalid",
            HotkeyError::Unavailable => "hotkey.unavailable",
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

/// A registered hotkey; unregistered on drop.
pub struct Registered {
    manager: GlobalHotKeyManager,
    hotkey: HotKey,
}

impl Registered {
    /// Registers `hotkey`; `on_event(pressed)` runs on the hotkey thread for each press and
    /// release.
    pub fn register(
        hotkey: HotKey,
        on_event: impl Fn(bool) + Send + Sync + 'static,
    ) -> Result<Registered, HotkeyError> {
        let manager = GlobalHotKeyManager::new().map_err(|_| HotkeyError::Unavailable)?;
        manager
            .register(hotkey)
            .map_err(|_| HotkeyError::Unavailable)?;
        let id = hotkey.id();
        GlobalHotKeyEvent::set_event_handler(Some(move |e: GlobalHotKeyEvent| {
            if e.id() == id {
                on_event(e.state() == HotKeyState::Pressed);
            }
        }));
        Ok(Registered { manager, hotkey })
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        GlobalHotKeyEvent::set_event_handler(None::<fn(GlobalHotKeyEvent)>);
        let _ = self.manager.unregister(self.hotkey);
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
