//! X11 window glue: the recording indicator asks the window manager never to give it input
//! focus.
//!
//! ICCCM §4.1.7: a window whose `WM_HINTS` say `input = False` (and that does not take part
//! in `WM_TAKE_FOCUS`, which winit does not) uses the "No Input" focus model: the window
//! manager does not give it the keyboard, also when it is clicked. winit sets no `WM_HINTS`
//! input field at all, which window managers read as "give it focus on click", so clicking
//! the indicator's Stop would take the keyboard from the app the user types in; the window
//! type `_NET_WM_WINDOW_TYPE_NOTIFICATION` alone is only a hint some window managers follow.
//!
//! Invariants:
//! - Only a window of this process (its `_NET_WM_PID`) is changed.
//! - Plain X calls on a short-lived connection of its own; nothing here imports another
//!   room of the app.

use x11rb::connection::Connection;
use x11rb::properties::WmHints;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, Window};
use x11rb::rust_connection::RustConnection;

/// How deep below the root the window is looked for (a reparenting window manager puts a
/// frame or two between the root and the client window).
const DEPTH: usize = 4;

/// Sets `WM_HINTS.input = False` on this process's windows titled `title`. Returns whether
/// there is nothing left to do: a window was found and changed, or this session has no X
/// display (the shell asks again on later frames until then, also when the server could not
/// be reached this time).
pub fn make_indicator_unfocusable(title: &str) -> bool {
    if std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty()) {
        return true;
    }
    let Ok((conn, screen)) = x11rb::connect(None) else {
        return false;
    };
    let Some(root) = conn.setup().roots.get(screen).map(|s| s.root) else {
        return true;
    };
    let mut windows = Vec::new();
    find(&conn, root, title, DEPTH, &mut windows);
    let hints = |window| {
        WmHints::get(&conn, window)
            .ok()
            .and_then(|c| c.reply().ok())
            .flatten()
    };
    for &window in &windows {
        let mut wanted = hints(window).unwrap_or_default();
        wanted.input = Some(false);
        let _ = wanted.set(&conn, window);
    }
    // Read back (a round trip: the server has processed the change before this connection
    // closes, and it says whether the change held).
    !windows.is_empty()
        && windows
            .iter()
            .all(|&w| hints(w).is_some_and(|h| h.input == Some(false)))
}

/// This process's windows titled `title` at most `depth` levels below `parent`.
fn find(conn: &RustConnection, parent: Window, title: &str, depth: usize, out: &mut Vec<Window>) {
    let Some(children) = conn
        .query_tree(parent)
        .ok()
        .and_then(|c| c.reply().ok())
        .map(|r| r.children)
    else {
        return;
    };
    for &child in &children {
        if titled(conn, child, title) && ours(conn, child) {
            out.push(child);
        } else if depth > 0 {
            find(conn, child, title, depth - 1, out);
        }
    }
}

fn property(conn: &RustConnection, window: Window, name: &[u8]) -> Option<Vec<u8>> {
    let atom = conn.intern_atom(true, name).ok()?.reply().ok()?.atom;
    if atom == x11rb::NONE {
        return None;
    }
    let reply = conn
        .get_property(false, window, atom, AtomEnum::ANY, 0, 1024)
        .ok()?
        .reply()
        .ok()?;
    (reply.type_ != x11rb::NONE).then_some(reply.value)
}

fn titled(conn: &RustConnection, window: Window, title: &str) -> bool {
    [&b"_NET_WM_NAME"[..], b"WM_NAME"]
        .into_iter()
        .any(|name| property(conn, window, name).as_deref() == Some(title.as_bytes()))
}

fn ours(conn: &RustConnection, window: Window) -> bool {
    property(conn, window, b"_NET_WM_PID")
        .and_then(|v| <[u8; 4]>::try_from(v.as_slice()).ok())
        .is_some_and(|pid| u32::from_ne_bytes(pid) == std::process::id())
}
