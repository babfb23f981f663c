//! The shell's events and the icon's state: the types the shell, the tray and the UI share,
//! one floor below all three so none of them imports another for a type.
//!
//! Invariants:
//! - Plain data: nothing here touches a window, the tray or a thread.
//! - An event only says what happened; the shell decides what it means (the tray and the
//!   hotkey only queue a [`ShellEvent`] through a [`Post`]).

use std::sync::Arc;
use std::time::Instant;

/// A tray menu entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MenuAction {
    Toggle,
    CopyLast,
    /// "Paste last transcription": paste the newest transcript into the focused app.
    PasteLast,
    /// A "Recent" entry, by its place (0: the newest).
    Recent(usize),
    /// "Clean-up" submenu: the mode for the next dictations.
    Cleanup(crate::cleanup::settings::CleanupMode),
    /// "Transcribe a File…": choose audio or video files to transcribe (issue #38).
    TranscribeFile,
    Open,
    Search,
    Settings,
    /// "Check for Updates…": check the release feed now and show the answer in Settings.
    CheckUpdates,
    Quit,
}

/// Something the OS told us, queued for the UI thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellEvent {
    Menu(MenuAction),
    /// A plain left click on the icon (toggles dictation).
    TrayClick,
    /// A ctrl-click on the icon: open its menu, as a right click does (macOS).
    TrayMenu,
    /// The global dictation hotkey was pressed (`true`) or released, at `at` (when the OS
    /// reported it: a tap and a hold are told apart by these instants, not by when the UI
    /// thread got to the event).
    Hotkey {
        pressed: bool,
        at: Instant,
    },
    /// A key joined the held modifier-only dictation shortcut after its press was sent
    /// (Fn+Delete): the press was not meant as dictation.
    HotkeyChord,
    /// Settings' key recorder saw this modifier pressed and released alone.
    ModifierTapped(crate::app::modkeys::ModKey),
    /// The "Paste last transcription" shortcut was pressed.
    PasteLastHotkey,
    /// The "Dictate + clean" shortcut was pressed (`true`) or released, at `at`.
    CleanHotkey {
        pressed: bool,
        at: Instant,
    },
    /// Esc while the recording indicator shows (grabbed globally only then).
    EscapeHotkey,
    /// Persyk was launched again (a second `persyk`, Finder, Spotlight, the Dock's reopen
    /// event on macOS) or a notification banner was clicked: show and focus the window.
    Reopen,
    /// The system asked Persyk to open files (Finder's Open With, a file dropped on the
    /// app's icon): they wait in the shell's list (`shell::Opener`) until the UI thread takes
    /// them (issue #38).
    OpenFiles,
}

impl ShellEvent {
    /// A dictation hotkey event that happened now.
    pub fn hotkey(pressed: bool) -> ShellEvent {
        ShellEvent::Hotkey {
            pressed,
            at: Instant::now(),
        }
    }
}

/// A function that queues a [`ShellEvent`] and wakes the window (safe from any thread).
pub type Post = Arc<dyn Fn(ShellEvent) + Send + Sync>;

/// What the icon shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrayState {
    Idle,
    Connecting,
    Recording,
    Finishing,
    Error,
}

impl TrayState {
    pub const ALL: [TrayState; 5] = [
        TrayState::Idle,
        TrayState::Connecting,
        TrayState::Recording,
        TrayState::Finishing,
        TrayState::Error,
    ];

    /// The template PNG (44×44, black on transparent) drawn for the menu bar.
    pub fn png(self) -> &'static [u8] {
        match self {
            TrayState::Idle => include_bytes!("../../assets/tray/idle.png"),
            TrayState::Connecting => include_bytes!("../../assets/tray/connecting.png"),
            TrayState::Recording => include_bytes!("../../assets/tray/recording.png"),
            TrayState::Finishing => include_bytes!("../../assets/tray/finishing.png"),
            TrayState::Error => include_bytes!("../../assets/tray/error.png"),
        }
    }

    pub fn tooltip(self) -> &'static str {
        match self {
            TrayState::Idle => "Persyk — ready",
            TrayState::Connecting => "Persyk — connecting…",
            TrayState::Recording => "Persyk — recording",
            TrayState::Finishing => "Persyk — finishing…",
            TrayState::Error => "Persyk — the last recording had a problem",
        }
    }
}
