//! Which app is in front when a dictation starts: the identifiers a clean-up mode by app
//! ([`crate::cleanup::settings::AppRule`]) is matched against — the bundle identifier on
//! macOS (`com.apple.mail`), the `WM_CLASS` instance and class on X11 (`thunderbird`,
//! `Thunderbird`).
//!
//! Invariants:
//! - Only identifiers are read: no window title, no content of the app.
//! - Never an error and never a panic: an app that cannot be told (Wayland without X11, no
//!   window in front, a window without a class) is "unknown", an empty list, and the
//!   dictation gets the default mode.
//! - Called off the UI thread, once per start; on X11 it opens its own short-lived
//!   connection (a handful of round trips), so it never shares the hotkey or paste
//!   connections' state.
//! - On macOS the same read also keeps the app's process id ([`dictation_app_pid`]): the
//!   paste gives the keyboard back to that app should Persyk itself be in front when the
//!   transcript is ready (issue #36 item 3). Only the latest start's is kept.

use std::sync::Arc;

/// Reads the identifiers of the app in front (empty: unknown).
pub type Frontmost = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// The system's answer.
pub fn system() -> Frontmost {
    Arc::new(front_app)
}

/// Always unknown (tests and benches that do not care).
pub fn unknown() -> Frontmost {
    Arc::new(Vec::new)
}

/// A fixed answer (tests).
pub fn fixed(ids: &[&str]) -> Frontmost {
    let ids: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
    Arc::new(move || ids.clone())
}

#[cfg(target_os = "linux")]
fn front_app() -> Vec<String> {
    x11::front_app().unwrap_or_default()
}

#[cfg(target_os = "macos")]
fn front_app() -> Vec<String> {
    use objc2_app_kit::NSWorkspace;
    let workspace = NSWorkspace::sharedWorkspace();
    let front = workspace.frontmostApplication();
    DICTATION_APP.store(
        front.as_ref().map_or(0, |app| app.processIdentifier()),
        std::sync::atomic::Ordering::Relaxed,
    );
    front
        .and_then(|app| app.bundleIdentifier())
        .map(|id| vec![id.to_string()])
        .unwrap_or_default()
}

/// The process id of the app in front when the latest dictation started (0: unknown).
#[cfg(target_os = "macos")]
static DICTATION_APP: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The process in front when the latest dictation started, as [`system`] read it (`None`:
/// none was read yet, or no app was in front).
#[cfg(target_os = "macos")]
pub fn dictation_app_pid() -> Option<i32> {
    let pid = DICTATION_APP.load(std::sync::atomic::Ordering::Relaxed);
    (pid > 0).then_some(pid)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn front_app() -> Vec<String> {
    Vec::new()
}

#[cfg(target_os = "linux")]
pub mod x11 {
    //! The app in front on X11: the window manager's `_NET_ACTIVE_WINDOW`, or without a
    //! window manager the input focus; then up the window tree to the first window with a
    //! `WM_CLASS` (toolkits focus an inner window of the top-level one).

    use x11rb::connection::Connection;
    use x11rb::protocol::xproto::{AtomEnum, ConnectionExt, Window};

    /// How far up the tree a class is looked for.
    const MAX_DEPTH: usize = 16;

    /// `WM_CLASS` instance and class of the app in front; `None` when there is no X
    /// server, no window in front, or it has no class.
    pub fn front_app() -> Option<Vec<String>> {
        let (conn, screen) = x11rb::connect(None).ok()?;
        let root = conn.setup().roots.get(screen)?.root;
        let mut window = active_window(&conn, root).or_else(|| {
            let focus = conn.get_input_focus().ok()?.reply().ok()?.focus;
            // 0 = None, 1 = PointerRoot: nothing focused in particular.
            (focus > 1).then_some(focus)
        })?;
        for _ in 0..MAX_DEPTH {
            if window == root || window == 0 {
                return None;
            }
            if let Some(ids) = wm_class(&conn, window) {
                return Some(ids);
            }
            window = conn.query_tree(window).ok()?.reply().ok()?.parent;
        }
        None
    }

    fn active_window(conn: &impl Connection, root: Window) -> Option<Window> {
        let atom = conn
            .intern_atom(true, b"_NET_ACTIVE_WINDOW")
            .ok()?
            .reply()
            .ok()?
            .atom;
        if atom == 0 {
            return None;
        }
        let reply = conn
            .get_property(false, root, atom, AtomEnum::WINDOW, 0, 1)
            .ok()?
            .reply()
            .ok()?;
        reply.value32()?.next().filter(|w| *w != 0)
    }

    fn wm_class(conn: &impl Connection, window: Window) -> Option<Vec<String>> {
        let reply = conn
            .get_property(false, window, AtomEnum::WM_CLASS, AtomEnum::STRING, 0, 64)
            .ok()?
            .reply()
            .ok()?;
        let ids = parse_wm_class(&reply.value);
        (!ids.is_empty()).then_some(ids)
    }

    /// `WM_CLASS` is two NUL-terminated Latin-1 strings, instance then class.
    pub(super) fn parse_wm_class(value: &[u8]) -> Vec<String> {
        value
            .split(|b| *b == 0)
            .filter(|part| !part.is_empty())
            .take(2)
            .map(|part| part.iter().map(|&b| char::from(b)).collect())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_and_unknown_answer_what_they_say() {
        assert_eq!(fixed(&["com.apple.mail"])(), vec!["com.apple.mail"]);
        assert!(unknown()().is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn wm_class_reads_instance_then_class() {
        assert_eq!(
            x11::parse_wm_class(b"thunderbird\0Thunderbird\0"),
            vec!["thunderbird", "Thunderbird"]
        );
        assert_eq!(x11::parse_wm_class(b"xterm\0"), vec!["xterm"]);
        assert!(x11::parse_wm_class(b"").is_empty());
        assert_eq!(
            x11::parse_wm_class(b"caf\xe9\0Caf\xe9\0extra\0"),
            vec!["café", "Café"]
        );
    }
}
