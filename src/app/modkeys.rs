//! Modifier-only shortcuts (issue #26 item 2): hold Fn (Globe) or Right ⌥ to talk, as in
//! Wispr Flow. `global-hotkey` can only grab a key *with* modifiers, so a modifier alone is
//! observed instead: the platform's key events are read (never grabbed) and turned into the
//! same press / release events the grabbed combination produces, which the shell's
//! [`super::hotkey::Gestures`] reads unchanged (Tap or hold, Toggle, Push to talk).
//!
//! What it owns: the names of the observable modifiers ([`ModKey`]: parsing the stored text
//! `"Fn"`, `"RightAlt"`, …, and showing it the Mac way, "Right ⌥"); the pure state machines
//! that decide what the raw events mean ([`Chord`] for the bound key, [`SoloTap`] for the
//! key recorder); and the observer thread ([`Observer`]) that feeds them from the platform's
//! source (`x11`: XInput2 raw key events; `macos`: a listen-only `CGEventTap`).
//!
//! Invariants:
//! - Observe, never grab: every key keeps reaching the focused app (the X11 source only
//!   selects raw events on the root window; the macOS tap is listen-only).
//! - A key joining the chord cancels. The press is sent only once the modifier has been
//!   held alone for [`Chord::WAIT`], or when it comes up alone before that (press and
//!   release then go together, each with the instant it happened, so Tap or hold still
//!   tells a tap from a hold); any other key pressed meanwhile means nothing is sent. A key
//!   joining after the press was sent sends [`ModEvent::Cancel`], which the shell turns into
//!   a cancel of the recording that press started (as Esc does).
//! - The machines are pure: the caller gives each event's instant and asks
//!   [`Chord::due`] when to look again; the observer thread is the only clock.
//! - Explicit shutdown: dropping an [`Observer`] stops its source and joins its threads.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "linux")]
mod x11;

/// A modifier key that can be a shortcut on its own, one side of the keyboard each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModKey {
    /// Fn (Globe) on a Mac keyboard (no event reaches X11 for it on most PC keyboards).
    Fn,
    LeftCtrl,
    RightCtrl,
    LeftAlt,
    RightAlt,
    LeftShift,
    RightShift,
    LeftSuper,
    RightSuper,
}

impl ModKey {
    pub const ALL: [ModKey; 9] = [
        ModKey::Fn,
        ModKey::LeftCtrl,
        ModKey::RightCtrl,
        ModKey::LeftAlt,
        ModKey::RightAlt,
        ModKey::LeftShift,
        ModKey::RightShift,
        ModKey::LeftSuper,
        ModKey::RightSuper,
    ];

    /// The stored form (`hotkey.keys`): `"Fn"`, `"RightAlt"`, `"LeftCtrl"`, …
    pub fn name(self) -> &'static str {
        match self {
            ModKey::Fn => "Fn",
            ModKey::LeftCtrl => "LeftCtrl",
            ModKey::RightCtrl => "RightCtrl",
            ModKey::LeftAlt => "LeftAlt",
            ModKey::RightAlt => "RightAlt",
            ModKey::LeftShift => "LeftShift",
            ModKey::RightShift => "RightShift",
            ModKey::LeftSuper => "LeftSuper",
            ModKey::RightSuper => "RightSuper",
        }
    }

    /// The key the Mac way: "Fn", "Right ⌥", "Left ⌃", "Right ⌘".
    pub fn display(self) -> String {
        match self.side() {
            None => "Fn".to_owned(),
            Some((side, symbol)) => format!("{side} {symbol}"),
        }
    }

    /// The side and the modifier's symbol (`None` for Fn).
    pub fn side(self) -> Option<(&'static str, &'static str)> {
        Some(match self {
            ModKey::Fn => return None,
            ModKey::LeftCtrl => ("Left", "⌃"),
            ModKey::RightCtrl => ("Right", "⌃"),
            ModKey::LeftAlt => ("Left", "⌥"),
            ModKey::RightAlt => ("Right", "⌥"),
            ModKey::LeftShift => ("Left", "⇧"),
            ModKey::RightShift => ("Right", "⇧"),
            ModKey::LeftSuper => ("Left", "⌘"),
            ModKey::RightSuper => ("Right", "⌘"),
        })
    }

    /// A stored or typed name (case and spaces ignored): the stored forms, `global-hotkey`'s
    /// key codes (`"AltRight"`, `"MetaLeft"`) and the Mac words (`"RightOption"`,
    /// `"RightCommand"`, `"Globe"`).
    pub fn parse(text: &str) -> Option<ModKey> {
        let t: String = text
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect();
        let (side, rest) = if let Some(rest) = t.strip_prefix("right") {
            (Some(true), rest.to_owned())
        } else if let Some(rest) = t.strip_prefix("left") {
            (Some(false), rest.to_owned())
        } else if let Some(rest) = t.strip_suffix("right") {
            (Some(true), rest.to_owned())
        } else if let Some(rest) = t.strip_suffix("left") {
            (Some(false), rest.to_owned())
        } else {
            (None, t.clone())
        };
        let right = match side {
            None => return matches!(t.as_str(), "fn" | "globe" | "function").then_some(ModKey::Fn),
            Some(r) => r,
        };
        Some(match (rest.as_str(), right) {
            ("ctrl" | "control" | "⌃", true) => ModKey::RightCtrl,
            ("ctrl" | "control" | "⌃", false) => ModKey::LeftCtrl,
            ("alt" | "option" | "opt" | "⌥", true) => ModKey::RightAlt,
            ("alt" | "option" | "opt" | "⌥", false) => ModKey::LeftAlt,
            ("shift" | "⇧", true) => ModKey::RightShift,
            ("shift" | "⇧", false) => ModKey::LeftShift,
            ("super" | "cmd" | "command" | "meta" | "win" | "⌘", true) => ModKey::RightSuper,
            ("super" | "cmd" | "command" | "meta" | "win" | "⌘", false) => ModKey::LeftSuper,
            _ => return None,
        })
    }
}

/// One key as a source saw it: a modifier Persyk can name, or any other key (by the
/// source's own code, only ever compared for equality).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Mod(ModKey),
    Other(u32),
}

/// A key going down (`down`) or up at `at`, from a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawKey {
    pub key: Seen,
    pub down: bool,
    pub at: Instant,
}

/// What the bound modifier's gestures send to the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModEvent {
    /// The modifier went down alone at this instant (sent late: see [`Chord::WAIT`]).
    Press(Instant),
    /// It came up at this instant.
    Release(Instant),
    /// A key joined while it was held, after the press was sent: undo what the press did.
    Cancel,
}

/// Keys still held that went down longer ago than this are forgotten (a release the source
/// never saw, e.g. one that happened while it was starting, must not block the modifier).
const STALE: Duration = Duration::from_secs(10);

/// The other keys held, by key, with when they went down.
#[derive(Debug, Default, Clone)]
struct HeldKeys(Vec<(Seen, Instant)>);

impl HeldKeys {
    fn down(&mut self, key: Seen, at: Instant) {
        if !self.0.iter().any(|(k, _)| *k == key) {
            self.0.push((key, at));
        }
    }
    fn up(&mut self, key: Seen) {
        self.0.retain(|(k, _)| *k != key);
    }
    /// Whether any key is held (forgetting those held implausibly long).
    fn any(&mut self, at: Instant) -> bool {
        self.0
            .retain(|(_, since)| at.saturating_duration_since(*since) < STALE);
        !self.0.is_empty()
    }
}

/// The bound modifier's state machine: raw key events in, [`ModEvent`]s out.
///
/// | state   | event                          | sends                 | next    |
/// |---------|--------------------------------|-----------------------|---------|
/// | idle    | modifier down, nothing else held | —                   | waiting |
/// | idle    | modifier down, another key held  | —                   | spoiled |
/// | waiting | [`Chord::WAIT`] passed (`tick`)  | Press(down)         | pressed |
/// | waiting | modifier up                      | Press(down), Release(up) | idle |
/// | waiting | another key down                 | —                   | spoiled |
/// | pressed | modifier up                      | Release(up)         | idle    |
/// | pressed | another key down                 | Cancel              | spoiled |
/// | spoiled | modifier up                      | —                   | idle    |
///
/// A modifier down while it is already down (a key repeat) changes nothing.
#[derive(Debug, Clone)]
pub struct Chord {
    key: ModKey,
    state: State,
    others: HeldKeys,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    Waiting(Instant),
    Pressed,
    Spoiled,
}

impl Chord {
    /// How long the modifier must be held alone before the press is sent. **Choice:** a
    /// second key of a chord (Fn+Delete, Right ⌥+arrow) usually follows within this, so most
    /// chords never start a recording; a tap shorter than it still sends its press (with the
    /// release), and a hold starts recording 200 ms after the key went down (the pre-roll,
    /// when on, covers it).
    pub const WAIT: Duration = Duration::from_millis(200);

    pub fn new(key: ModKey) -> Chord {
        Chord {
            key,
            state: State::Idle,
            others: HeldKeys::default(),
        }
    }

    /// The key this machine watches.
    pub fn key(&self) -> ModKey {
        self.key
    }

    /// One raw event; what it sends, in order (at most two).
    pub fn event(&mut self, e: RawKey) -> Vec<ModEvent> {
        if e.key != Seen::Mod(self.key) {
            if !e.down {
                self.others.up(e.key);
                return Vec::new();
            }
            self.others.down(e.key, e.at);
            return match self.state {
                State::Idle | State::Spoiled => Vec::new(),
                State::Waiting(_) => {
                    self.state = State::Spoiled;
                    Vec::new()
                }
                State::Pressed => {
                    self.state = State::Spoiled;
                    vec![ModEvent::Cancel]
                }
            };
        }
        match (self.state, e.down) {
            (State::Idle, true) => {
                self.state = if self.others.any(e.at) {
                    State::Spoiled
                } else {
                    State::Waiting(e.at)
                };
                Vec::new()
            }
            (State::Waiting(since), false) => {
                self.state = State::Idle;
                vec![ModEvent::Press(since), ModEvent::Release(e.at)]
            }
            (State::Pressed, false) => {
                self.state = State::Idle;
                vec![ModEvent::Release(e.at)]
            }
            (State::Spoiled, false) => {
                self.state = State::Idle;
                Vec::new()
            }
            // A repeat while down, or a release never pressed.
            _ => Vec::new(),
        }
    }

    /// When [`Chord::tick`] has something to send (`None`: nothing is pending).
    pub fn due(&self) -> Option<Instant> {
        match self.state {
            State::Waiting(since) => Some(since + Self::WAIT),
            _ => None,
        }
    }

    /// Time passed to `now`: sends the press of a modifier held alone for [`Chord::WAIT`].
    pub fn tick(&mut self, now: Instant) -> Option<ModEvent> {
        match self.state {
            State::Waiting(since) if now >= since + Self::WAIT => {
                self.state = State::Pressed;
                Some(ModEvent::Press(since))
            }
            _ => None,
        }
    }
}

/// The key recorder's machine: which modifier was pressed and released with no other key
/// down meanwhile (a modifier that was part of a combination is not a tap).
#[derive(Debug, Default, Clone)]
pub struct SoloTap {
    held: HeldKeys,
    /// The one key down since all keys were up, while it is still alone.
    alone: Option<ModKey>,
}

impl SoloTap {
    pub fn new() -> SoloTap {
        SoloTap::default()
    }

    /// One raw event; the modifier tapped alone, when this event completes the tap.
    pub fn event(&mut self, e: RawKey) -> Option<ModKey> {
        if e.down {
            let first = !self.held.any(e.at);
            let repeat = self.held.0.iter().any(|(k, _)| *k == e.key);
            self.held.down(e.key, e.at);
            if repeat {
                return None;
            }
            self.alone = match (first, e.key) {
                (true, Seen::Mod(m)) => Some(m),
                _ => None,
            };
            None
        } else {
            self.held.up(e.key);
            match self.alone.take() {
                Some(m) if e.key == Seen::Mod(m) => Some(m),
                _ => None,
            }
        }
    }
}

/// What an [`Observer`] is for.
#[derive(Clone)]
pub enum Watch {
    /// The bound modifier's gestures.
    Key(ModKey, Arc<dyn Fn(ModEvent) + Send + Sync>),
    /// The key recorder: each modifier tapped alone.
    Taps(Arc<dyn Fn(ModKey) + Send + Sync>),
}

/// Why keys cannot be observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObserveError {
    /// No source on this system (no X display, Wayland, no XInput2, Fn on X11).
    Unavailable,
    /// macOS refused the event tap: Input Monitoring is not allowed for Persyk.
    NeedsInputMonitoring,
}

/// A platform source of raw key events: stopped (and its thread joined) on drop.
pub(crate) trait Source: Send {}

/// Observes the keyboard for one purpose ([`Watch`]) until dropped: the platform's source
/// thread sends [`RawKey`]s to a machine thread, which runs [`Chord`] or [`SoloTap`] with
/// its own clock and calls the callback.
pub struct Observer {
    source: Option<Box<dyn Source>>,
    machine: Option<JoinHandle<()>>,
}

impl Observer {
    /// Starts observing; fails when the system offers no source (said to the user).
    pub fn start(watch: Watch) -> Result<Observer, ObserveError> {
        if let Watch::Key(ModKey::Fn, _) = &watch
            && !cfg!(target_os = "macos")
        {
            return Err(ObserveError::Unavailable);
        }
        let (tx, rx) = mpsc::channel::<RawKey>();
        let source = start_source(tx, matches!(watch, Watch::Key(..)))?;
        let machine = std::thread::Builder::new()
            .name("persyk-modkeys".into())
            .spawn(move || run_machine(rx, watch))
            .map_err(|_| ObserveError::Unavailable)?;
        Ok(Observer {
            source: Some(source),
            machine: Some(machine),
        })
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        // The source's drop stops its thread, which drops the sender: the machine ends.
        drop(self.source.take());
        if let Some(m) = self.machine.take() {
            let _ = m.join();
        }
    }
}

/// The platform's source; `ask`: a permission the source needs may be asked for (macOS).
#[cfg(target_os = "linux")]
fn start_source(tx: Sender<RawKey>, _ask: bool) -> Result<Box<dyn Source>, ObserveError> {
    x11::X11Source::start(tx).map(|s| Box::new(s) as Box<dyn Source>)
}

#[cfg(target_os = "macos")]
fn start_source(tx: Sender<RawKey>, ask: bool) -> Result<Box<dyn Source>, ObserveError> {
    macos::TapSource::start(tx, ask).map(|s| Box::new(s) as Box<dyn Source>)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn start_source(_tx: Sender<RawKey>, _ask: bool) -> Result<Box<dyn Source>, ObserveError> {
    Err(ObserveError::Unavailable)
}

/// The machine thread: until the source hangs up.
fn run_machine(rx: Receiver<RawKey>, watch: Watch) {
    match watch {
        Watch::Key(key, send) => {
            let mut chord = Chord::new(key);
            loop {
                let next = match chord.due() {
                    Some(due) => {
                        match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                            Ok(e) => Some(e),
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    None => match rx.recv() {
                        Ok(e) => Some(e),
                        Err(_) => return,
                    },
                };
                match next {
                    Some(e) => {
                        // Time passed before this event first (a press due earlier).
                        if let Some(out) = chord.tick(e.at) {
                            send(out);
                        }
                        for out in chord.event(e) {
                            send(out);
                        }
                    }
                    None => {
                        if let Some(out) = chord.tick(Instant::now()) {
                            send(out);
                        }
                    }
                }
            }
        }
        Watch::Taps(send) => {
            let mut taps = SoloTap::new();
            while let Ok(e) = rx.recv() {
                if let Some(m) = taps.event(e) {
                    send(m);
                }
            }
        }
    }
}

/// Asks for what observing a modifier alone needs (macOS: Input Monitoring, with the
/// system's prompt when not granted yet); elsewhere nothing to ask. Whether it is granted.
pub fn ask_to_observe() -> bool {
    #[cfg(target_os = "macos")]
    {
        macos::ask_input_monitoring()
    }
    #[cfg(not(target_os = "macos"))]
    {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *START.get_or_init(Instant::now) + Duration::from_millis(ms)
    }

    const R: Seen = Seen::Mod(ModKey::RightAlt);
    const L: Seen = Seen::Mod(ModKey::LeftAlt);
    const DEL: Seen = Seen::Other(22);
    const ARROW: Seen = Seen::Other(113);

    /// One step of a table: an event (`Some`) or the clock reaching `at` (`None`).
    type Step = (Option<(Seen, bool)>, u64, Vec<ModEvent>);

    fn run(key: ModKey, steps: Vec<Step>) {
        let mut c = Chord::new(key);
        for (i, (event, ms, want)) in steps.into_iter().enumerate() {
            let got = match event {
                Some((key, down)) => c.event(RawKey {
                    key,
                    down,
                    at: t(ms),
                }),
                None => c.tick(t(ms)).into_iter().collect(),
            };
            assert_eq!(got, want, "step {i} at {ms} ms");
        }
    }

    use ModEvent::{Cancel, Press, Release};

    #[test]
    fn a_tap_sends_press_and_release_with_their_instants() {
        run(
            ModKey::RightAlt,
            vec![
                (Some((R, true)), 0, vec![]),
                (None, 100, vec![]),
                (Some((R, false)), 120, vec![Press(t(0)), Release(t(120))]),
                (None, 400, vec![]),
            ],
        );
    }

    #[test]
    fn a_hold_sends_the_press_after_the_wait_and_the_release_when_let_go() {
        let mut c = Chord::new(ModKey::RightAlt);
        assert!(
            c.event(RawKey {
                key: R,
                down: true,
                at: t(1000)
            })
            .is_empty()
        );
        assert_eq!(c.due(), Some(t(1000) + Chord::WAIT));
        run(
            ModKey::RightAlt,
            vec![
                (Some((R, true)), 0, vec![]),
                (None, 199, vec![]),
                (None, 200, vec![Press(t(0))]),
                (None, 900, vec![]),
                (Some((R, false)), 2500, vec![Release(t(2500))]),
            ],
        );
    }

    #[test]
    fn a_key_joining_before_the_wait_sends_nothing_at_all() {
        run(
            ModKey::Fn,
            vec![
                (Some((Seen::Mod(ModKey::Fn), true)), 0, vec![]),
                (Some((DEL, true)), 80, vec![]),
                (Some((DEL, false)), 150, vec![]),
                (None, 600, vec![]),
                (Some((Seen::Mod(ModKey::Fn), false)), 700, vec![]),
                // Then a clean tap works again.
                (Some((Seen::Mod(ModKey::Fn), true)), 1000, vec![]),
                (
                    Some((Seen::Mod(ModKey::Fn), false)),
                    1100,
                    vec![Press(t(1000)), Release(t(1100))],
                ),
            ],
        );
    }

    #[test]
    fn a_key_joining_after_the_press_cancels_once() {
        run(
            ModKey::RightAlt,
            vec![
                (Some((R, true)), 0, vec![]),
                (None, 250, vec![Press(t(0))]),
                (Some((ARROW, true)), 400, vec![Cancel]),
                (Some((ARROW, false)), 450, vec![]),
                (Some((ARROW, true)), 500, vec![]),
                (Some((ARROW, false)), 550, vec![]),
                (Some((R, false)), 900, vec![]),
            ],
        );
    }

    #[test]
    fn key_repeats_change_nothing() {
        run(
            ModKey::RightAlt,
            vec![
                (Some((R, true)), 0, vec![]),
                (Some((R, true)), 30, vec![]),
                (None, 200, vec![Press(t(0))]),
                (Some((R, true)), 500, vec![]),
                (Some((R, true)), 530, vec![]),
                (Some((R, false)), 800, vec![Release(t(800))]),
                (Some((R, false)), 810, vec![]),
            ],
        );
    }

    #[test]
    fn the_other_sides_modifier_is_another_key() {
        // Left ⌥ alone is not Right ⌥; held first, it makes Right ⌥ part of a chord.
        run(
            ModKey::RightAlt,
            vec![
                (Some((L, true)), 0, vec![]),
                (Some((L, false)), 100, vec![]),
                (None, 400, vec![]),
                (Some((L, true)), 1000, vec![]),
                (Some((R, true)), 1050, vec![]),
                (None, 1400, vec![]),
                (Some((R, false)), 1500, vec![]),
                (Some((L, false)), 1600, vec![]),
                (Some((R, true)), 2000, vec![]),
                (Some((L, true)), 2100, vec![]),
                (Some((R, false)), 2200, vec![]),
            ],
        );
    }

    #[test]
    fn a_key_held_implausibly_long_is_forgotten() {
        // Its release was never seen: after STALE the modifier works alone again.
        run(
            ModKey::RightAlt,
            vec![
                (Some((DEL, true)), 0, vec![]),
                (Some((R, true)), 20_000, vec![]),
                (
                    Some((R, false)),
                    20_100,
                    vec![Press(t(20_000)), Release(t(20_100))],
                ),
            ],
        );
    }

    #[test]
    fn the_recorder_takes_a_modifier_tapped_alone_only() {
        let mut s = SoloTap::new();
        let mut e = |key, down, ms| {
            s.event(RawKey {
                key,
                down,
                at: t(ms),
            })
        };
        assert_eq!(e(R, true, 0), None);
        assert_eq!(e(R, true, 30), None, "a repeat");
        assert_eq!(e(R, false, 90), Some(ModKey::RightAlt));
        // A combination: neither key is a tap.
        assert_eq!(e(L, true, 200), None);
        assert_eq!(e(DEL, true, 250), None);
        assert_eq!(e(DEL, false, 300), None);
        assert_eq!(e(L, false, 350), None);
        // Two modifiers together: neither.
        assert_eq!(e(Seen::Mod(ModKey::RightCtrl), true, 400), None);
        assert_eq!(e(R, true, 420), None);
        assert_eq!(e(R, false, 500), None);
        assert_eq!(e(Seen::Mod(ModKey::RightCtrl), false, 520), None);
        // A typing key alone is nobody's tap.
        assert_eq!(e(DEL, true, 600), None);
        assert_eq!(e(DEL, false, 650), None);
        assert_eq!(e(Seen::Mod(ModKey::Fn), true, 700), None);
        assert_eq!(e(Seen::Mod(ModKey::Fn), false, 800), Some(ModKey::Fn));
    }

    #[test]
    fn names_parse_and_show_the_mac_way() {
        for k in ModKey::ALL {
            assert_eq!(ModKey::parse(k.name()), Some(k), "{k:?}");
        }
        for (text, key) in [
            ("fn", ModKey::Fn),
            ("Globe", ModKey::Fn),
            ("AltRight", ModKey::RightAlt),
            ("right option", ModKey::RightAlt),
            ("Right ⌥", ModKey::RightAlt),
            ("ControlRight", ModKey::RightCtrl),
            ("RightCommand", ModKey::RightSuper),
            ("MetaLeft", ModKey::LeftSuper),
            ("ShiftRight", ModKey::RightShift),
        ] {
            assert_eq!(ModKey::parse(text), Some(key), "{text}");
        }
        for text in ["Alt", "Right", "RightSpace", "Alt+Space", "", "Fnord"] {
            assert_eq!(ModKey::parse(text), None, "{text}");
        }
        assert_eq!(ModKey::Fn.display(), "Fn");
        assert_eq!(ModKey::RightAlt.display(), "Right ⌥");
        assert_eq!(ModKey::RightCtrl.display(), "Right ⌃");
        assert_eq!(ModKey::LeftSuper.display(), "Left ⌘");
        assert_eq!(ModKey::RightShift.display(), "Right ⇧");
    }
}
