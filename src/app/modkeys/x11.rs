//! The X11 source of raw key events: XInput2 `RawKeyPress` / `RawKeyRelease` selected on the
//! root window over a connection of its own, read on a thread of its own.
//!
//! Invariants:
//! - Observe only: raw events are a copy of what the devices send; nothing is grabbed, so
//!   every key still reaches the focused window.
//! - Keycodes are named through the server's keyboard mapping (read at start and again on
//!   each `MappingNotify`): `Alt_R` / `ISO_Level3_Shift` / `Meta_R` are Right ⌥,
//!   `Control_R` Right ⌃, `Super_R` Right ⌘, `Shift_R` Right ⇧, and the left ones alike;
//!   every other keycode is some other key.
//! - The thread sleeps in `poll` on the connection and a wake-up pipe: no timer while idle.
//!   Dropping the source writes to the pipe and joins the thread; an I/O error ends the
//!   thread (the machine then sees the channel close), never a panic.

use std::os::fd::AsRawFd;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::Instant;

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::Event;
use x11rb::protocol::xinput::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{ConnectionExt as _, Mapping};
use x11rb::rust_connection::RustConnection;

use super::{ModKey, ObserveError, RawKey, Seen, Source};

/// XIAllMasterDevices: raw events of every keyboard, once each.
const ALL_MASTER_DEVICES: u16 = 1;

/// The modifier a keysym names, if any.
fn keysym_mod(keysym: u32) -> Option<ModKey> {
    Some(match keysym {
        0xffea | 0xfe03 | 0xffe8 => ModKey::RightAlt, // Alt_R, ISO_Level3_Shift, Meta_R
        0xffe9 | 0xffe7 => ModKey::LeftAlt,           // Alt_L, Meta_L
        0xffe4 => ModKey::RightCtrl,                  // Control_R
        0xffe3 => ModKey::LeftCtrl,                   // Control_L
        0xffe2 => ModKey::RightShift,                 // Shift_R
        0xffe1 => ModKey::LeftShift,                  // Shift_L
        0xffec | 0xffee => ModKey::RightSuper,        // Super_R, Hyper_R
        0xffeb | 0xffed => ModKey::LeftSuper,         // Super_L, Hyper_L
        _ => return None,
    })
}

/// Each keycode's modifier (index: keycode − min_keycode), from its first keysym.
struct Keymap {
    min: u8,
    mods: Vec<Option<ModKey>>,
}

impl Keymap {
    fn read(conn: &RustConnection) -> Result<Keymap, ObserveError> {
        let setup = conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let count = max.saturating_sub(min).saturating_add(1);
        let reply = conn
            .get_keyboard_mapping(min, count)
            .map_err(|_| ObserveError::Unavailable)?
            .reply()
            .map_err(|_| ObserveError::Unavailable)?;
        let per = usize::from(reply.keysyms_per_keycode).max(1);
        let mods = reply
            .keysyms
            .chunks(per)
            .map(|syms| syms.iter().find(|s| **s != 0).and_then(|s| keysym_mod(*s)))
            .collect();
        Ok(Keymap { min, mods })
    }

    fn seen(&self, keycode: u32) -> Seen {
        let m = u8::try_from(keycode)
            .ok()
            .and_then(|k| k.checked_sub(self.min))
            .and_then(|i| self.mods.get(usize::from(i)).copied().flatten());
        match m {
            Some(m) => Seen::Mod(m),
            None => Seen::Other(keycode),
        }
    }
}

/// The raw key events of the X display named by `DISPLAY`, until dropped.
pub(super) struct X11Source {
    wake: std::fs::File,
    thread: Option<JoinHandle<()>>,
}

impl Source for X11Source {}

impl X11Source {
    pub(super) fn start(tx: Sender<RawKey>) -> Result<X11Source, ObserveError> {
        if std::env::var_os("DISPLAY").is_none() {
            return Err(ObserveError::Unavailable);
        }
        let (conn, screen) = x11rb::connect(None).map_err(|_| ObserveError::Unavailable)?;
        conn.extension_information(xinput::X11_EXTENSION_NAME)
            .ok()
            .flatten()
            .ok_or(ObserveError::Unavailable)?;
        let version = conn
            .xinput_xi_query_version(2, 0)
            .map_err(|_| ObserveError::Unavailable)?
            .reply()
            .map_err(|_| ObserveError::Unavailable)?;
        if version.major_version < 2 {
            return Err(ObserveError::Unavailable);
        }
        let root = conn
            .setup()
            .roots
            .get(screen)
            .ok_or(ObserveError::Unavailable)?
            .root;
        conn.xinput_xi_select_events(
            root,
            &[xinput::EventMask {
                deviceid: ALL_MASTER_DEVICES,
                mask: vec![
                    xinput::XIEventMask::RAW_KEY_PRESS | xinput::XIEventMask::RAW_KEY_RELEASE,
                ],
            }],
        )
        .map_err(|_| ObserveError::Unavailable)?
        .check()
        .map_err(|_| ObserveError::Unavailable)?;
        let keymap = Keymap::read(&conn)?;
        let (read, wake) = pipe().ok_or(ObserveError::Unavailable)?;
        let thread = std::thread::Builder::new()
            .name("persyk-x11-keys".into())
            .spawn(move || run(conn, keymap, read, tx))
            .map_err(|_| ObserveError::Unavailable)?;
        Ok(X11Source {
            wake,
            thread: Some(thread),
        })
    }
}

impl Drop for X11Source {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = self.wake.write_all(&[1]);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A pipe: (read end, write end).
fn pipe() -> Option<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    unsafe {
        Some((
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        ))
    }
}

fn run(conn: RustConnection, mut keymap: Keymap, wake: std::fs::File, tx: Sender<RawKey>) {
    loop {
        // Everything already read or readable without blocking.
        loop {
            let event = match conn.poll_for_event() {
                Ok(Some(e)) => e,
                Ok(None) => break,
                Err(_) => return,
            };
            let at = Instant::now();
            let raw = match event {
                Event::XinputRawKeyPress(e) => Some((e.detail, true)),
                Event::XinputRawKeyRelease(e) => Some((e.detail, false)),
                Event::MappingNotify(m) if m.request == Mapping::KEYBOARD => {
                    if let Ok(k) = Keymap::read(&conn) {
                        keymap = k;
                    }
                    None
                }
                _ => None,
            };
            if let Some((keycode, down)) = raw {
                let key = keymap.seen(keycode);
                if tx.send(RawKey { key, down, at }).is_err() {
                    return;
                }
            }
        }
        if conn.flush().is_err() {
            return;
        }
        let mut fds = [
            libc::pollfd {
                fd: conn.stream().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfd entries, both descriptors open for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            return;
        }
    }
}
