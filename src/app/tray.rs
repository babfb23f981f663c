//! The menu-bar (macOS) / status-notifier (Linux, `ksni`) icon and its menu.
//!
//! Invariants:
//! - Created on the main thread after the event loop runs (eframe's creation closure).
//! - Menu and icon events only queue a [`ShellEvent`] and wake the window; they never touch
//!   app state from the tray's thread.
//! - "Recent" holds the last [`RECENT_LEN`] transcriptions (first words as labels); its items
//!   are made once and only relabelled, added or removed as the list changes, so a click maps
//!   to a slot ([`MenuAction::Recent`]) and the window copies that slot's full text.
//! - "Paste last transcription" is enabled only while there is a transcript to paste (the
//!   newest of "Recent"); disabled, its label says there is none yet.
//! - Where no tray host exists (a Linux desktop without a status-notifier host), creation
//!   reports [`TrayError::NoHost`] and the app keeps its window instead.

use std::collections::HashMap;
use std::sync::Arc;

use tray_icon::menu::{
    CheckMenuItem, Menu, MenuEvent, MenuId, MenuItem, PredefinedMenuItem, Submenu,
};

use crate::cleanup::settings::CleanupMode;
use tray_icon::{Icon, MouseButton, MouseButtonState, TrayIcon, TrayIconBuilder, TrayIconEvent};

use super::event::{MenuAction, ShellEvent, TrayState};
use super::model::RECENT_LEN;

/// Words of a transcription shown as its "Recent" label.
pub const RECENT_LABEL_WORDS: usize = 8;

/// The "Recent" labels of transcriptions (newest first): their first words, and the Mac
/// that recorded one when it was not this one.
pub fn recent_labels<'a>(
    items: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Vec<String> {
    items
        .into_iter()
        .take(RECENT_LEN)
        .map(|(t, other_mac)| {
            let words = super::effects::first_words(t, RECENT_LABEL_WORDS);
            match other_mac {
                // Another Mac's transcription says where it was made (issue #37).
                Some(mac) => format!("{words} — on {mac}"),
                None => words,
            }
        })
        .collect()
}

/// The menu entry that checks for a newer Persyk (the answer shows in Settings › Updates).
pub const CHECK_UPDATES: &str = "Check for Updates…";

/// The menu entry that pastes the newest transcript into the focused app.
pub const PASTE_LAST: &str = "Paste last transcription";
/// The same entry, disabled, while there is no transcript.
pub const PASTE_LAST_NONE: &str = "Paste last transcription (none yet)";

/// Why there is no tray icon.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrayError {
    #[error(
        "tray.no-host: this desktop shows no status-notifier (tray) icons; Persyk keeps its window open instead"
    )]
    NoHost,
    #[error("tray.failed: the tray icon could not be created")]
    Failed,
}

impl TrayError {
    pub fn code(&self) -> &'static str {
        match self {
            TrayError::NoHost => "tray.no-host",
            TrayError::Failed => "tray.failed",
        }
    }
}

/// The decoded RGBA of a state's icon. On Linux panels may be dark or light, so the black
/// template glyph is tinted mid-grey there; macOS tints template images itself.
pub fn icon_rgba(state: TrayState) -> Option<(Vec<u8>, u32, u32)> {
    let data = eframe::icon_data::from_png_bytes(state.png()).ok()?;
    let mut rgba = data.rgba;
    if cfg!(not(target_os = "macos")) {
        for px in rgba.chunks_exact_mut(4) {
            px[0] = 0x90;
            px[1] = 0x90;
            px[2] = 0x90;
        }
    }
    Some((rgba, data.width, data.height))
}

/// The live tray icon.
pub struct Tray {
    icon: TrayIcon,
    icons: HashMap<TrayState, Icon>,
    state: TrayState,
    toggle: MenuItem,
    copy_last: MenuItem,
    /// "Paste last transcription": enabled only when there is one.
    paste_last: MenuItem,
    recording: bool,
    /// "Recent", its slots and the "nothing yet" line shown while it is empty.
    recent: Submenu,
    recent_items: Vec<MenuItem>,
    recent_empty: MenuItem,
    /// The labels shown (`None`: the submenu holds the "nothing yet" line).
    recent_shown: Vec<String>,
    /// "Clean-up" and its checkable entries, one per mode.
    _cleanup: Submenu,
    cleanup_items: Vec<(CleanupMode, CheckMenuItem)>,
}

impl Tray {
    /// Creates the icon and menu; events go to `post`.
    pub fn create(post: Arc<dyn Fn(ShellEvent) + Send + Sync>) -> Result<Tray, TrayError> {
        if !host_available() {
            return Err(TrayError::NoHost);
        }
        let mut icons = HashMap::new();
        for s in TrayState::ALL {
            let (rgba, w, h) = icon_rgba(s).ok_or(TrayError::Failed)?;
            icons.insert(
                s,
                Icon::from_rgba(rgba, w, h).map_err(|_| TrayError::Failed)?,
            );
        }
        let toggle = MenuItem::new("Start dictation", true, None);
        let copy_last = MenuItem::new("Copy last transcription", false, None);
        let paste_last = MenuItem::new(PASTE_LAST_NONE, false, None);
        let recent = Submenu::new("Recent", true);
        let recent_empty = MenuItem::new("No transcriptions yet", false, None);
        recent
            .append(&recent_empty)
            .map_err(|_| TrayError::Failed)?;
        let recent_items: Vec<MenuItem> = (0..RECENT_LEN)
            .map(|_| MenuItem::new("", true, None))
            .collect();
        let cleanup = Submenu::new("Clean-up", true);
        let cleanup_items: Vec<(CleanupMode, CheckMenuItem)> = CleanupMode::ALL
            .iter()
            .map(|m| (*m, CheckMenuItem::new(m.label(), true, false, None)))
            .collect();
        for (_, item) in &cleanup_items {
            cleanup.append(item).map_err(|_| TrayError::Failed)?;
        }
        let transcribe_file = MenuItem::new("Transcribe a File…", true, None);
        let open = MenuItem::new("Open Persyk", true, None);
        let search = MenuItem::new("Search history…", true, None);
        let settings = MenuItem::new("Settings…", true, None);
        let check_updates = MenuItem::new(CHECK_UPDATES, true, None);
        let quit = MenuItem::new("Quit Persyk", true, None);
        let menu = Menu::new();
        menu.append_items(&[
            &toggle,
            &copy_last,
            &paste_last,
            &recent,
            &cleanup,
            &transcribe_file,
            &PredefinedMenuItem::separator(),
            &open,
            &search,
            &settings,
            &check_updates,
            &PredefinedMenuItem::separator(),
            &quit,
        ])
        .map_err(|_| TrayError::Failed)?;
        let mut actions: HashMap<MenuId, MenuAction> = [
            (toggle.id().clone(), MenuAction::Toggle),
            (copy_last.id().clone(), MenuAction::CopyLast),
            (paste_last.id().clone(), MenuAction::PasteLast),
            (transcribe_file.id().clone(), MenuAction::TranscribeFile),
            (open.id().clone(), MenuAction::Open),
            (search.id().clone(), MenuAction::Search),
            (settings.id().clone(), MenuAction::Settings),
            (check_updates.id().clone(), MenuAction::CheckUpdates),
            (quit.id().clone(), MenuAction::Quit),
        ]
        .into_iter()
        .collect();
        for (i, item) in recent_items.iter().enumerate() {
            actions.insert(item.id().clone(), MenuAction::Recent(i));
        }
        for (mode, item) in &cleanup_items {
            actions.insert(item.id().clone(), MenuAction::Cleanup(*mode));
        }
        {
            let post = post.clone();
            MenuEvent::set_event_handler(Some(move |e: MenuEvent| {
                if let Some(a) = actions.get(e.id()) {
                    post(ShellEvent::Menu(*a));
                }
            }));
        }
        // Right click opens the menu (tray-icon's default); a plain left click toggles
        // dictation; a ctrl-click (the Mac's other right click) opens the menu too.
        TrayIconEvent::set_event_handler(Some(move |e: TrayIconEvent| {
            if let TrayIconEvent::Click {
                button: MouseButton::Left,
                button_state: MouseButtonState::Up,
                ..
            } = e
            {
                post(if control_held() {
                    ShellEvent::TrayMenu
                } else {
                    ShellEvent::TrayClick
                });
            }
        }));
        let idle = icons
            .get(&TrayState::Idle)
            .cloned()
            .ok_or(TrayError::Failed)?;
        let builder = TrayIconBuilder::new()
            .with_menu(Box::new(menu))
            .with_tooltip(TrayState::Idle.tooltip())
            .with_menu_on_left_click(false);
        // macOS recolours a template image for light and dark menu bars.
        #[cfg(target_os = "macos")]
        let builder = builder.with_icon_templated(idle);
        #[cfg(not(target_os = "macos"))]
        let builder = builder.with_icon(idle);
        let icon = builder.build().map_err(|_| TrayError::Failed)?;
        Ok(Tray {
            icon,
            icons,
            state: TrayState::Idle,
            toggle,
            copy_last,
            paste_last,
            recording: false,
            recent,
            recent_items,
            recent_empty,
            recent_shown: Vec::new(),
            _cleanup: cleanup,
            cleanup_items,
        })
    }

    /// Opens the icon's menu (macOS; elsewhere the host shows it on right click).
    pub fn show_menu(&self) {
        self.icon.show_menu();
    }

    /// Shows `state`, the toggle's label and whether there is something to copy.
    pub fn sync(&mut self, state: TrayState, recording: bool, can_copy: bool) {
        if state != self.state {
            if let Some(icon) = self.icons.get(&state) {
                #[cfg(target_os = "macos")]
                let _ = self.icon.set_icon_templated(Some(icon.clone()));
                #[cfg(not(target_os = "macos"))]
                let _ = self.icon.set_icon(Some(icon.clone()));
            }
            let _ = self.icon.set_tooltip(Some(state.tooltip()));
            self.state = state;
        }
        if recording != self.recording {
            self.toggle.set_text(if recording {
                "Stop dictation"
            } else {
                "Start dictation"
            });
            self.recording = recording;
        }
        if self.copy_last.is_enabled() != can_copy {
            self.copy_last.set_enabled(can_copy);
        }
    }
}

impl Tray {
    /// Enables "Paste last transcription" when there is a transcript; while there is none
    /// the entry is disabled and says so.
    pub fn set_can_paste_last(&mut self, can_paste: bool) {
        if self.paste_last.is_enabled() != can_paste {
            self.paste_last.set_enabled(can_paste);
            self.paste_last.set_text(if can_paste {
                PASTE_LAST
            } else {
                PASTE_LAST_NONE
            });
        }
    }

    /// Shows `labels` (newest first, at most [`RECENT_LEN`]) under "Recent".
    /// Checks `mode` (and only it) in the "Clean-up" submenu; a click toggles a check item
    /// by itself, so this runs on every sync, not only on a change.
    pub fn set_cleanup_mode(&mut self, mode: CleanupMode) {
        for (m, item) in &self.cleanup_items {
            let want = *m == mode;
            if item.is_checked() != want {
                item.set_checked(want);
            }
        }
    }

    pub fn set_recent(&mut self, labels: &[String]) {
        if labels == self.recent_shown.as_slice() {
            return;
        }
        let labels = &labels[..labels.len().min(self.recent_items.len())];
        let before = self.recent_shown.len();
        // Menu updates are best effort: a failed one leaves the previous entries.
        if before == 0 && !labels.is_empty() {
            let _ = self.recent.remove(&self.recent_empty);
        }
        for item in self.recent_items.iter().take(before).skip(labels.len()) {
            let _ = self.recent.remove(item);
        }
        for (i, label) in labels.iter().enumerate() {
            self.recent_items[i].set_text(label);
            if i >= before {
                let _ = self.recent.append(&self.recent_items[i]);
            }
        }
        if labels.is_empty() && before > 0 {
            let _ = self.recent.append(&self.recent_empty);
        }
        self.recent_shown = labels.to_vec();
    }
}

impl Drop for Tray {
    fn drop(&mut self) {
        MenuEvent::set_event_handler(None::<fn(MenuEvent)>);
        TrayIconEvent::set_event_handler(None::<fn(TrayIconEvent)>);
    }
}

#[cfg(target_os = "macos")]
fn control_held() -> bool {
    super::platform::macos::control_held()
}

#[cfg(not(target_os = "macos"))]
fn control_held() -> bool {
    false
}

/// Whether a status-notifier host is registered on the session bus (Linux).
#[cfg(target_os = "linux")]
pub fn host_available() -> bool {
    let probe = || -> zbus::Result<bool> {
        let conn = zbus::blocking::Connection::session()?;
        let proxy = zbus::blocking::Proxy::new(
            &conn,
            "org.kde.StatusNotifierWatcher",
            "/StatusNotifierWatcher",
            "org.kde.StatusNotifierWatcher",
        )?;
        proxy.get_property::<bool>("IsStatusNotifierHostRegistered")
    };
    probe().unwrap_or(false)
}

/// The macOS menu bar always exists.
#[cfg(not(target_os = "linux"))]
pub fn host_available() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #37: the menu's Recent names the Mac a transcription came from when it was not
    /// this one; this Mac's own show their words alone, and at most [`RECENT_LEN`] show.
    #[test]
    fn issue37_recent_names_another_macs_transcription() {
        let labels = recent_labels([
            ("buy milk and call the bank", None),
            ("the meeting moves to Thursday", Some("Travel Mac")),
            ("one", None),
            ("two", None),
            ("three", None),
            ("four", None),
        ]);
        assert_eq!(labels.len(), RECENT_LEN);
        assert_eq!(labels[0], "buy milk and call the bank");
        assert_eq!(labels[1], "the meeting moves to Thursday — on Travel Mac");
    }
}
