//! The X11 CLIPBOARD for a paste: saves every target the current owner offers, owns the
//! clipboard with the transcript, sees the target app's selection request for it, and puts
//! the saved targets back.
//!
//! The X11 clipboard is a conversation: the owner's client answers each `SelectionRequest`
//! itself, so the transcript (and the restored content after it) live as long as this
//! owner serves them. [`X11Clipboard::keep`] serves until another client takes the
//! clipboard (`SelectionClear`); the paste thread runs it, so at most one owner of a paste
//! lives at a time (the next paste's owner, or any copy, ends the previous one).
//!
//! Invariants:
//! - A save is whole or it is [`Previous::Unrestorable`]: an owner that answers a target in
//!   increments (`INCR`, for large data), a target larger than one request can carry, no
//!   answer within [`ANSWER`], or a save longer than [`SAVE_BUDGET`] make the save
//!   unrestorable (so nothing half is put back).
//! - Only a text target served after [`PasteClipboard::expect_paste`] to the client that had
//!   the keyboard focus then (the target app; not a clipboard manager copying every new
//!   content) counts as the paste's read.
//! - Ownership uses a real server time (ICCCM §2.1), which the `TIMESTAMP` target answers.
//! - Content is never logged; errors are short fixed reasons.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use x11rb::connection::{Connection, RequestConnection as _};
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{
    self, Atom, AtomEnum, ConnectionExt as _, CreateWindowAux, EventMask, PropMode,
    SelectionNotifyEvent, SelectionRequestEvent, Window, WindowClass,
};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

use super::{PasteClipboard, Previous, SavedClipboard, SavedFormat};

/// How long the current owner may take to answer one conversion while saving.
const ANSWER: Duration = Duration::from_secs(2);
/// How long saving everything may take (an owner with many slow targets): the paste waits
/// for it.
const SAVE_BUDGET: Duration = Duration::from_secs(4);
/// At most this much saved content (bytes, all targets together); more is unrestorable.
const MAX_SAVED_BYTES: usize = 64 << 20;

x11rb::atom_manager! {
    Atoms: AtomsCookie {
        CLIPBOARD,
        TARGETS,
        MULTIPLE,
        TIMESTAMP,
        SAVE_TARGETS,
        DELETE,
        INSERT_SELECTION,
        INSERT_PROPERTY,
        INCR,
        ATOM_PAIR,
        UTF8_STRING,
        TEXT,
        TEXT_PLAIN_UTF8: b"text/plain;charset=utf-8",
        TEXT_PLAIN: b"text/plain",
        PERSYK_CLIPBOARD,
    }
}

/// What the clipboard serves while Persyk owns it: `(target, type, format, data)`.
type Served = Vec<(Atom, Atom, u8, Vec<u8>)>;

/// Persyk's owner of CLIPBOARD, on its own connection to `DISPLAY`.
pub struct X11Clipboard {
    conn: RustConnection,
    window: Window,
    atoms: Atoms,
    /// What is served now; empty while Persyk does not own the clipboard.
    served: Served,
    /// Whether Persyk owns the clipboard (no `SelectionClear` since it took it).
    owned: bool,
    /// Reads count from [`PasteClipboard::expect_paste`] on, and only by the client that
    /// had the keyboard focus then (the target; `Some(None)`: focus on no client's window,
    /// any reader counts).
    expecting: Option<Option<u32>>,
    read: bool,
    /// The server time Persyk took the clipboard at (ICCCM: never `CurrentTime`).
    owned_at: u32,
}

/// Why the X11 clipboard could not be used (fixed sentences, for the log and the window).
pub type Failed = &'static str;

const BROKEN: Failed = "the connection to the X server broke";

impl X11Clipboard {
    /// Connects to `DISPLAY` and makes the (unmapped) window that owns the clipboard.
    pub fn connect() -> Result<X11Clipboard, Failed> {
        let (conn, screen) = x11rb::connect(None).map_err(|_| "no X display")?;
        let root = conn
            .setup()
            .roots
            .get(screen)
            .map(|s| s.root)
            .ok_or("no X screen")?;
        let atoms = Atoms::new(&conn)
            .map_err(|_| "the X server did not answer")?
            .reply()
            .map_err(|_| "the X server did not answer")?;
        let window = conn.generate_id().map_err(|_| "no X resource id")?;
        conn.create_window(
            x11rb::COPY_DEPTH_FROM_PARENT,
            window,
            root,
            0,
            0,
            1,
            1,
            0,
            WindowClass::INPUT_OUTPUT,
            x11rb::COPY_FROM_PARENT,
            &CreateWindowAux::new().event_mask(EventMask::PROPERTY_CHANGE),
        )
        .map_err(|_| "the X server did not answer")?;
        conn.flush().map_err(|_| "the X server did not answer")?;
        Ok(X11Clipboard {
            conn,
            window,
            atoms,
            served: Vec::new(),
            owned: false,
            expecting: None,
            read: false,
            owned_at: x11rb::CURRENT_TIME,
        })
    }

    /// Waits for the next event until `until`: `Ok(None)` at the deadline, `Err` when the
    /// connection broke.
    fn next_event(&self, until: Instant) -> Result<Option<Event>, Failed> {
        loop {
            if let Some(event) = self.conn.poll_for_event().map_err(|_| BROKEN)? {
                return Ok(Some(event));
            }
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                return Ok(None);
            };
            let mut fd = libc::pollfd {
                fd: self.conn.stream().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = i32::try_from(left.as_millis().clamp(1, 60_000)).unwrap_or(60_000);
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut fd, 1, ms) };
            if ready < 0
                && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                return Err(BROKEN);
            }
        }
    }

    /// The X client a resource belongs to (the bits above the resource-id mask the server
    /// gives every client).
    fn client_of(&self, resource: u32) -> u32 {
        resource & !self.conn.setup().resource_id_mask
    }

    /// A server timestamp, from a zero-length append to Persyk's own window (ICCCM §2.1).
    fn server_time(&mut self) -> u32 {
        let appended = self
            .conn
            .change_property8(
                PropMode::APPEND,
                self.window,
                self.atoms.PERSYK_CLIPBOARD,
                AtomEnum::STRING,
                &[],
            )
            .is_ok()
            && self.conn.flush().is_ok();
        if !appended {
            return x11rb::CURRENT_TIME;
        }
        let until = Instant::now() + ANSWER;
        while let Ok(Some(event)) = self.next_event(until) {
            match event {
                Event::PropertyNotify(n) if n.window == self.window => return n.time,
                other => self.handle(&other),
            }
        }
        x11rb::CURRENT_TIME
    }

    /// Handles an event that is not the one a caller waits for: answers requests for what
    /// Persyk serves, notes when another client took the clipboard.
    fn handle(&mut self, event: &Event) {
        match event {
            Event::SelectionRequest(request) => self.answer(request),
            Event::SelectionClear(clear) if clear.selection == self.atoms.CLIPBOARD => {
                self.owned = false;
                self.served.clear();
            }
            _ => {}
        }
    }

    fn is_text(&self, target: Atom) -> bool {
        [
            self.atoms.UTF8_STRING,
            self.atoms.TEXT,
            self.atoms.TEXT_PLAIN_UTF8,
            self.atoms.TEXT_PLAIN,
            AtomEnum::STRING.into(),
        ]
        .contains(&target)
    }

    /// Answers one `SelectionRequest` (ICCCM §2.2): the data, or a refusal (`property`
    /// `NONE`), then a `SelectionNotify` to the requestor.
    fn answer(&mut self, request: &SelectionRequestEvent) {
        let property = if request.property == x11rb::NONE {
            request.target // obsolete clients
        } else {
            request.property
        };
        let max = self.conn.maximum_request_bytes().saturating_sub(64);
        let served = if !self.owned || request.selection != self.atoms.CLIPBOARD {
            false
        } else if request.target == self.atoms.TIMESTAMP {
            self.conn
                .change_property32(
                    PropMode::REPLACE,
                    request.requestor,
                    property,
                    AtomEnum::INTEGER,
                    &[self.owned_at],
                )
                .is_ok()
        } else if request.target == self.atoms.TARGETS {
            let mut targets: Vec<u32> = vec![self.atoms.TARGETS, self.atoms.TIMESTAMP];
            targets.extend(self.served.iter().map(|(t, ..)| *t));
            self.conn
                .change_property32(
                    PropMode::REPLACE,
                    request.requestor,
                    property,
                    AtomEnum::ATOM,
                    &targets,
                )
                .is_ok()
        } else if let Some((_, kind, format, data)) = self
            .served
            .iter()
            .find(|(t, ..)| *t == request.target)
            .filter(|(.., data)| data.len() <= max)
        {
            let units =
                u32::try_from(data.len() / usize::from((*format / 8).max(1))).unwrap_or(u32::MAX);
            let ok = self
                .conn
                .change_property(
                    PropMode::REPLACE,
                    request.requestor,
                    property,
                    *kind,
                    *format,
                    units,
                    data,
                )
                .is_ok();
            let by_target = match self.expecting {
                Some(Some(client)) => self.client_of(request.requestor) == client,
                Some(None) => true,
                None => false,
            };
            if ok && by_target && request.requestor != self.window && self.is_text(request.target) {
                self.read = true;
            }
            ok
        } else {
            false
        };
        let notify = SelectionNotifyEvent {
            response_type: xproto::SELECTION_NOTIFY_EVENT,
            sequence: 0,
            time: request.time,
            requestor: request.requestor,
            selection: request.selection,
            target: request.target,
            property: if served { property } else { x11rb::NONE },
        };
        let _ = self
            .conn
            .send_event(false, request.requestor, EventMask::NO_EVENT, notify);
        let _ = self.conn.flush();
    }

    /// Asks the owner for `target` into Persyk's property; the property's reply, or `None`
    /// when refused or not answered in time. Events that arrive meanwhile are handled.
    fn convert(&mut self, target: Atom, by: Instant) -> Option<xproto::GetPropertyReply> {
        let prop = self.atoms.PERSYK_CLIPBOARD;
        self.conn
            .convert_selection(
                self.window,
                self.atoms.CLIPBOARD,
                target,
                prop,
                x11rb::CURRENT_TIME,
            )
            .ok()?;
        self.conn.flush().ok()?;
        let until = (Instant::now() + ANSWER).min(by);
        loop {
            let event = self.next_event(until).ok().flatten()?;
            match event {
                Event::SelectionNotify(n) if n.requestor == self.window && n.target == target => {
                    if n.property == x11rb::NONE {
                        return None;
                    }
                    return self
                        .conn
                        .get_property(true, self.window, prop, AtomEnum::ANY, 0, u32::MAX / 4)
                        .ok()?
                        .reply()
                        .ok();
                }
                other => self.handle(&other),
            }
        }
    }

    fn atom_name(&self, atom: Atom) -> Option<String> {
        let reply = self.conn.get_atom_name(atom).ok()?.reply().ok()?;
        String::from_utf8(reply.name).ok()
    }

    fn atom(&self, name: &str) -> Option<Atom> {
        Some(
            self.conn
                .intern_atom(false, name.as_bytes())
                .ok()?
                .reply()
                .ok()?
                .atom,
        )
    }

    /// Takes the clipboard to serve `served`; whether the server made Persyk its owner.
    fn own(&mut self, served: Served) -> bool {
        self.served = served;
        self.owned_at = self.server_time();
        let taken = self
            .conn
            .set_selection_owner(self.window, self.atoms.CLIPBOARD, self.owned_at)
            .ok()
            .and_then(|_| self.conn.get_selection_owner(self.atoms.CLIPBOARD).ok())
            .and_then(|c| c.reply().ok())
            .is_some_and(|r| r.owner == self.window);
        self.owned = taken;
        taken
    }
}

impl PasteClipboard for X11Clipboard {
    fn save(&mut self) -> Previous {
        let Some(owner) = self
            .conn
            .get_selection_owner(self.atoms.CLIPBOARD)
            .ok()
            .and_then(|c| c.reply().ok())
            .map(|r| r.owner)
        else {
            return Previous::Unrestorable;
        };
        if owner == x11rb::NONE {
            return Previous::Empty;
        }
        let by = Instant::now() + SAVE_BUDGET;
        let Some(reply) = self.convert(self.atoms.TARGETS, by) else {
            return Previous::Unrestorable;
        };
        let Some(targets) = reply.value32() else {
            return Previous::Unrestorable;
        };
        let targets: Vec<Atom> = targets.collect();
        // Targets that are requests to the owner, not content.
        let meta = [
            self.atoms.TARGETS,
            self.atoms.MULTIPLE,
            self.atoms.TIMESTAMP,
            self.atoms.SAVE_TARGETS,
            self.atoms.DELETE,
            self.atoms.INSERT_SELECTION,
            self.atoms.INSERT_PROPERTY,
        ];
        let max = self.conn.maximum_request_bytes().saturating_sub(64);
        let mut saved = SavedClipboard::default();
        let mut total = 0usize;
        for target in targets.into_iter().filter(|t| !meta.contains(t)) {
            let Some(reply) = self.convert(target, by) else {
                // Refused although offered, or no answer: not something to put back whole.
                return Previous::Unrestorable;
            };
            if reply.type_ == self.atoms.INCR || reply.bytes_after > 0 {
                return Previous::Unrestorable;
            }
            total += reply.value.len();
            if reply.value.len() > max || total > MAX_SAVED_BYTES {
                return Previous::Unrestorable;
            }
            let (Some(name), Some(kind)) = (self.atom_name(target), self.atom_name(reply.type_))
            else {
                return Previous::Unrestorable;
            };
            saved.formats.push(SavedFormat {
                item: 0,
                name,
                encoding: (kind, reply.format),
                data: reply.value,
            });
        }
        if saved.formats.is_empty() {
            Previous::Empty
        } else {
            Previous::Saved(saved)
        }
    }

    fn offer(&mut self, text: &str) -> Result<(), String> {
        let utf8 = text.as_bytes().to_vec();
        let mut served: Served = vec![
            (
                self.atoms.UTF8_STRING,
                self.atoms.UTF8_STRING,
                8,
                utf8.clone(),
            ),
            (
                self.atoms.TEXT_PLAIN_UTF8,
                self.atoms.TEXT_PLAIN_UTF8,
                8,
                utf8.clone(),
            ),
            (self.atoms.TEXT, self.atoms.UTF8_STRING, 8, utf8),
        ];
        // STRING is Latin-1: offered only when the text is.
        if let Some(latin1) = text
            .chars()
            .map(|c| u8::try_from(u32::from(c)).ok())
            .collect::<Option<Vec<u8>>>()
        {
            served.push((AtomEnum::STRING.into(), AtomEnum::STRING.into(), 8, latin1));
        }
        self.read = false;
        self.expecting = None;
        if self.own(served) {
            Ok(())
        } else {
            Err("the X server did not make Persyk the clipboard's owner".into())
        }
    }

    fn expect_paste(&mut self) {
        // Requests already here (a clipboard manager copying the new content) are not the
        // paste's.
        while let Ok(Some(event)) = self.conn.poll_for_event() {
            self.handle(&event);
        }
        // The target is the client with the keyboard focus now; a clipboard manager that
        // copies every new content is another client, and its read is not the paste's.
        let focus = self
            .conn
            .get_input_focus()
            .ok()
            .and_then(|c| c.reply().ok())
            .map(|r| r.focus)
            .filter(|&w| w > 1) // None (0) and PointerRoot (1) name no client
            .map(|w| self.client_of(w));
        self.read = false;
        self.expecting = Some(focus);
    }

    fn wait_read(&mut self, deadline: Duration) -> bool {
        let until = Instant::now() + deadline;
        while self.owned && !self.read {
            match self.next_event(until) {
                Ok(Some(event)) => self.handle(&event),
                Ok(None) | Err(_) => break,
            }
        }
        self.expecting = None;
        self.owned && self.read
    }

    fn restore(&mut self, saved: &SavedClipboard) -> bool {
        // Requests waiting now are handled first: a SelectionClear among them means the
        // user copied something meanwhile.
        while let Ok(Some(event)) = self.conn.poll_for_event() {
            self.handle(&event);
        }
        if !self.owned {
            return false;
        }
        let mut served = Served::new();
        for f in &saved.formats {
            let (Some(target), Some(kind)) = (self.atom(&f.name), self.atom(&f.encoding.0)) else {
                return false;
            };
            served.push((target, kind, f.encoding.1, f.data.clone()));
        }
        // Owning again (a new ownership time) tells clipboard managers the content changed.
        self.own(served)
    }

    fn keep(&mut self) {
        while self.owned {
            match self.next_event(Instant::now() + Duration::from_secs(3600)) {
                Ok(Some(event)) => self.handle(&event),
                Ok(None) => {}
                Err(_) => return,
            }
        }
    }
}

impl Drop for X11Clipboard {
    fn drop(&mut self) {
        let _ = self.conn.destroy_window(self.window);
        let _ = self.conn.flush();
    }
}
