//! The global hotkeys: the dictation key (default ⌥Space) and the optional "Paste last
//! transcription" key — parsing and showing them, registering them with the OS through
//! `global-hotkey`, and what the dictation key's presses and releases mean ([`Gestures`]).
//!
//! Invariants:
//! - An invalid or unavailable hotkey never stops the app: the tray click still works, and
//!   the reason is shown in Settings.
//! - Presses and releases are forwarded to the shell's queue with a repaint request; the
//!   shell decides what they mean through [`Gestures`], a pure state machine (no clock of
//!   its own: each event brings the instant it happened).
//! - One event handler per process. `GlobalHotKeyEvent::set_event_handler` keeps only the
//!   first handler it is given (a `OnceCell`), so [`Hotkeys`] installs one handler, once,
//!   that routes each event by comparing its id with the *current* registrations
//!   ([`ROUTES`], one per [`Slot`]). Changing a combination swaps its route; events of any
//!   other id are dropped.
//! - One `GlobalHotKeyManager` for the [`Hotkeys`] value's life (on X11: one connection
//!   and one thread). Re-registering releases the old combination on that same connection
//!   before grabbing the new one, so saving an unchanged combination never collides with
//!   its own earlier grab; an unchanged combination is simply kept. The two slots never hold
//!   the same combination (the second is refused as [`HotkeyError::Taken`]).
//! - A modifier alone (`"Fn"`, `"RightAlt"`: [`Shortcut::Modifier`], issue #26 item 2) is not
//!   grabbed but observed ([`super::modkeys::Observer`]), for the dictation slot only; its
//!   presses and releases reach the same callback as a grabbed combination's, and a key
//!   joining the chord after the press calls the cancel callback ([`Hotkeys::set_on_cancel`]).

use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use global_hotkey::hotkey::{Code, HotKey, Modifiers};
use global_hotkey::{GlobalHotKeyEvent, GlobalHotKeyManager, HotKeyState};

use super::modkeys::{ModEvent, ModKey, ObserveError, Observer, Watch};
use crate::settings::{DEFAULT_HOTKEY, HotkeyMode, HotkeySettings, TAP_MAX_MS};

/// Why a hotkey cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HotkeyError {
    #[error("hotkey.invalid: not a key combination (try \"Alt+Space\" or \"Ctrl+Shift+D\")")]
    Invalid,
    #[error("hotkey.unavailable: the system did not accept a global hotkey")]
    Unavailable,
    #[error("hotkey.taken: another application already uses this key combination; choose another")]
    Taken,
    #[error(
        "hotkey.needs-modifier: a typing key needs a modifier (⌃, ⌥, ⇧ or ⌘); only F-keys work alone"
    )]
    NeedsModifier,
    #[error(
        "hotkey.input-monitoring: macOS does not let Persyk observe the keyboard; allow Persyk in System Settings › Privacy & Security › Input Monitoring"
    )]
    InputMonitoring,
    #[error("hotkey.modifier-dictation-only: a modifier alone can only be the dictation key")]
    ModifierDictationOnly,
    #[error(
        "hotkey.no-fn: Fn reaches no application on this system; choose Right Alt or a combination"
    )]
    NoFn,
}

impl HotkeyError {
    pub fn code(&self) -> &'static str {
        match self {
            HotkeyError::Invalid => "hotkey.invalid",
            HotkeyError::Unavailable => "hotkey.unavailable",
            HotkeyError::Taken => "hotkey.taken",
            HotkeyError::NeedsModifier => "hotkey.needs-modifier",
            HotkeyError::InputMonitoring => "hotkey.input-monitoring",
            HotkeyError::ModifierDictationOnly => "hotkey.modifier-dictation-only",
            HotkeyError::NoFn => "hotkey.no-fn",
        }
    }
}

/// A shortcut: a combination the OS grabs, or a modifier alone that Persyk observes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shortcut {
    Keys(HotKey),
    Modifier(ModKey),
}

impl Shortcut {
    /// The grabbed combination (`None` for a modifier alone).
    pub fn keys(self) -> Option<HotKey> {
        match self {
            Shortcut::Keys(k) => Some(k),
            Shortcut::Modifier(_) => None,
        }
    }

    /// The shortcut the Mac way: `⌥Space`, `⌃⇧D`, `Fn`, `Right ⌥`.
    pub fn display(&self) -> String {
        match self {
            Shortcut::Keys(k) => display(k),
            Shortcut::Modifier(m) => m.display(),
        }
    }
}

/// The configured dictation shortcut: `None` when the user turned the hotkey off (`""`).
pub fn parse(settings: &HotkeySettings) -> Result<Option<Shortcut>, HotkeyError> {
    parse_keys(settings.keys.as_deref().unwrap_or(DEFAULT_HOTKEY))
}

/// The configured "Paste last transcription" combination: `None` when there is none (the
/// default). A modifier alone is refused ([`HotkeyError::ModifierDictationOnly`]).
pub fn parse_paste_last(settings: &HotkeySettings) -> Result<Option<HotKey>, HotkeyError> {
    match parse_keys(settings.paste_last.as_deref().unwrap_or(""))? {
        None => Ok(None),
        Some(Shortcut::Keys(k)) => Ok(Some(k)),
        Some(Shortcut::Modifier(_)) => Err(HotkeyError::ModifierDictationOnly),
    }
}

/// The configured "Dictate + clean" combination: `None` when there is none (the default).
/// A modifier alone is refused, as for paste-last.
pub fn parse_dictate_clean(settings: &HotkeySettings) -> Result<Option<HotKey>, HotkeyError> {
    match parse_keys(settings.dictate_clean.as_deref().unwrap_or(""))? {
        None => Ok(None),
        Some(Shortcut::Keys(k)) => Ok(Some(k)),
        Some(Shortcut::Modifier(_)) => Err(HotkeyError::ModifierDictationOnly),
    }
}

/// A shortcut as typed or stored: a combination (`"Alt+Space"`, `"Ctrl+Shift+D"`) or a
/// modifier alone (`"Fn"`, `"RightAlt"`: [`ModKey::parse`]); empty: none.
pub fn parse_keys(text: &str) -> Result<Option<Shortcut>, HotkeyError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if let Some(m) = ModKey::parse(text) {
        return Ok(Some(Shortcut::Modifier(m)));
    }
    text.parse::<HotKey>()
        .map(|k| Some(Shortcut::Keys(k)))
        .map_err(|_| HotkeyError::Invalid)
}

/// A combination as typed or stored, never a modifier alone (`None` for empty).
pub fn parse_combination(text: &str) -> Result<Option<HotKey>, HotkeyError> {
    match parse_keys(text)? {
        None => Ok(None),
        Some(Shortcut::Keys(k)) => Ok(Some(k)),
        Some(Shortcut::Modifier(_)) => Err(HotkeyError::ModifierDictationOnly),
    }
}

/// Which of the app's global shortcuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Start and stop dictation (its gestures: [`Gestures`]).
    Dictation = 0,
    /// Paste the last transcription into the focused app (presses only).
    PasteLast = 1,
    /// Esc, grabbed only while the recording indicator shows: cancel the recording (or,
    /// during a clean-up, deliver the words as spoken).
    Cancel = 2,
    /// "Dictate + clean": dictation through the shortcut's clean-up mode (the dictation
    /// key's gestures, with a [`Gestures`] of its own).
    DictateClean = 3,
}

/// The combination of [`Slot::Cancel`]: Esc alone.
pub fn cancel_key() -> HotKey {
    HotKey::new(None, global_hotkey::hotkey::Code::Escape)
}

// -------------------------------------------------------------------------------------------
// What presses and releases mean.

/// What one hotkey event asks of the dictation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    Start,
    Stop,
    /// Discard the recording the press started (a key joined a modifier-only shortcut).
    Cancel,
    Nothing,
}

/// The dictation key's gestures: what a press or a release means in each [`HotkeyMode`],
/// given whether a recording runs (started by any means: the key, the menu, the button).
///
/// - **Toggle:** a press starts when idle and stops when recording; a release is nothing.
/// - **Push to talk:** a press starts, a release stops.
/// - **Auto:** a press starts when idle and stops when recording (so a tap stops a
///   hands-free recording, also one started from the menu). The release of a press that
///   started the recording stops it only if the key was held [`TAP_MAX_MS`] or longer: a
///   tap leaves it running hands-free, a hold was push-to-talk.
///
/// A press while the key is already down (a key repeat) is nothing. Pure: the caller gives
/// each event's instant.
#[derive(Debug, Default, Clone)]
pub struct Gestures {
    held: Option<Held>,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    since: Instant,
    /// This press started the recording (it was idle).
    started: bool,
}

impl Gestures {
    /// The press/release boundary of [`HotkeyMode::Auto`].
    pub const TAP_MAX: Duration = Duration::from_millis(TAP_MAX_MS);

    pub fn new() -> Gestures {
        Gestures::default()
    }

    /// The key went down at `at`.
    pub fn press(&mut self, mode: HotkeyMode, recording: bool, at: Instant) -> Intent {
        if self.held.is_some() {
            return Intent::Nothing;
        }
        self.held = Some(Held {
            since: at,
            started: !recording,
        });
        match mode {
            HotkeyMode::PushToTalk => Intent::Start,
            HotkeyMode::Toggle | HotkeyMode::Auto if recording => Intent::Stop,
            HotkeyMode::Toggle | HotkeyMode::Auto => Intent::Start,
        }
    }

    /// The key came up at `at`.
    pub fn release(&mut self, mode: HotkeyMode, recording: bool, at: Instant) -> Intent {
        let held = self.held.take();
        match mode {
            HotkeyMode::Toggle => Intent::Nothing,
            HotkeyMode::PushToTalk => Intent::Stop,
            HotkeyMode::Auto => match held {
                Some(h)
                    if h.started
                        && recording
                        && at.saturating_duration_since(h.since) >= Self::TAP_MAX =>
                {
                    Intent::Stop
                }
                _ => Intent::Nothing,
            },
        }
    }

    /// A key joined the held modifier-only shortcut (Fn+Delete): the press did not mean
    /// dictation. Cancels the recording that press started, if it still runs; a press that
    /// stopped one (or started none) is left as it was. The key counts as up.
    pub fn cancel(&mut self, recording: bool) -> Intent {
        match self.held.take() {
            Some(h) if h.started && recording => Intent::Cancel,
            _ => Intent::Nothing,
        }
    }

    /// Whether the key is down (as far as the events said).
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }
}

// -------------------------------------------------------------------------------------------
// Showing a combination the Mac way.

/// A combination the Mac way: modifiers as ⌃ ⌥ ⇧ ⌘ (in that order, as macOS menus show
/// them), then the key's name ([`key_name`]): `⌥Space`, `⌃⇧D`, `F5`. The same symbols on
/// Linux (⌘ is the Super key there). egui's fonts have no glyph for the four symbols:
/// Settings paints them and gives this text as the accessible label.
pub fn display(hotkey: &HotKey) -> String {
    let mut out = String::new();
    for (m, symbol) in [
        (Modifiers::CONTROL, "⌃"),
        (Modifiers::ALT, "⌥"),
        (Modifiers::SHIFT, "⇧"),
        (Modifiers::META, "⌘"),
    ] {
        if hotkey.mods.intersects(m) {
            out.push_str(symbol);
        }
    }
    out.push_str(&key_name(hotkey.key));
    out
}

/// A stored shortcut (`"Alt+Space"`, `"RightAlt"`) the Mac way; `None` when it is empty or
/// invalid.
pub fn display_keys(text: &str) -> Option<String> {
    parse_keys(text).ok().flatten().map(|k| k.display())
}

/// A modifier pressed and released alone in the key recorder, as Settings stores it
/// (`"Fn"`, `"RightAlt"`): only the dictation key can be one.
pub fn recorded_modifier(key: ModKey, dictation: bool) -> Result<(Shortcut, String), HotkeyError> {
    if !dictation {
        return Err(HotkeyError::ModifierDictationOnly);
    }
    Ok((Shortcut::Modifier(key), key.name().to_owned()))
}

/// A combination pressed in the key recorder: checked and written the way Settings stores
/// it (`"Alt+Space"`, `"Ctrl+Shift+D"`, `"F5"`). A key without a modifier — or with Shift
/// alone, which only types a capital — is refused unless it is an F-key
/// ([`HotkeyError::NeedsModifier`]); whether the system accepts it is known only when it is
/// registered ([`HotkeyError::Taken`], [`HotkeyError::Unavailable`]).
pub fn recorded(mods: Modifiers, code: Code) -> Result<(HotKey, String), HotkeyError> {
    let mods = mods & (Modifiers::CONTROL | Modifiers::ALT | Modifiers::SHIFT | Modifiers::META);
    if is_modifier(code) {
        return Err(HotkeyError::Invalid);
    }
    let function_key = code
        .to_string()
        .strip_prefix('F')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if (mods - Modifiers::SHIFT).is_empty() && !function_key {
        return Err(HotkeyError::NeedsModifier);
    }
    let mut text = String::new();
    for (m, name) in [
        (Modifiers::CONTROL, "Ctrl+"),
        (Modifiers::ALT, "Alt+"),
        (Modifiers::SHIFT, "Shift+"),
        (Modifiers::META, "Super+"),
    ] {
        if mods.contains(m) {
            text.push_str(name);
        }
    }
    let name = code.to_string();
    text.push_str(
        name.strip_prefix("Key")
            .or_else(|| name.strip_prefix("Digit"))
            .unwrap_or(&name),
    );
    // The stored form must read back as the same combination.
    match parse_keys(&text) {
        Ok(Some(Shortcut::Keys(k))) if k.key == code && k.mods == mods => Ok((k, text)),
        _ => Err(HotkeyError::Invalid),
    }
}

fn is_modifier(code: Code) -> bool {
    matches!(
        code,
        Code::AltLeft
            | Code::AltRight
            | Code::ControlLeft
            | Code::ControlRight
            | Code::ShiftLeft
            | Code::ShiftRight
            | Code::MetaLeft
            | Code::MetaRight
            | Code::Fn
            | Code::FnLock
            | Code::CapsLock
    )
}

/// The key's name as a keyboard shows it, in words where a Mac would use a symbol egui's
/// fonts do not have (`Return`, `Up`, `Page Down`).
pub fn key_name(code: Code) -> String {
    let symbol = match code {
        Code::Space => "Space",
        Code::Enter => "Return",
        Code::Tab => "Tab",
        Code::Backspace => "Backspace",
        Code::Delete => "Delete",
        Code::Escape => "Esc",
        Code::ArrowUp => "Up",
        Code::ArrowDown => "Down",
        Code::ArrowLeft => "Left",
        Code::ArrowRight => "Right",
        Code::Home => "Home",
        Code::End => "End",
        Code::PageUp => "Page Up",
        Code::PageDown => "Page Down",
        Code::Minus => "-",
        Code::Equal => "=",
        Code::BracketLeft => "[",
        Code::BracketRight => "]",
        Code::Backslash => "\\",
        Code::Semicolon => ";",
        Code::Quote => "'",
        Code::Backquote => "`",
        Code::Comma => ",",
        Code::Period => ".",
        Code::Slash => "/",
        other => {
            let name = other.to_string();
            return name
                .strip_prefix("Key")
                .or_else(|| name.strip_prefix("Digit"))
                .unwrap_or(&name)
                .to_owned();
        }
    };
    symbol.to_owned()
}

/// What a press (`true`) or release (`false`) of a registered combination calls, with the
/// instant the event arrived from the OS.
pub type OnHotkey = Arc<dyn Fn(bool, Instant) + Send + Sync>;

type Route = Option<(u32, OnHotkey)>;

/// Each slot's registration id and callback: what the process-wide handler routes to.
static ROUTES: Mutex<[Route; 4]> = Mutex::new([None, None, None, None]);
static HANDLER: Once = Once::new();

fn set_route(slot: Slot, route: Route) {
    ROUTES.lock().unwrap_or_else(|p| p.into_inner())[slot as usize] = route;
}

/// Installs the one handler `global-hotkey` will ever call (idempotent).
fn install_handler() {
    HANDLER.call_once(|| {
        GlobalHotKeyEvent::set_event_handler(Some(|e: GlobalHotKeyEvent| {
            let at = Instant::now();
            let target = ROUTES
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .flatten()
                .find(|(id, _)| *id == e.id())
                .map(|(_, f)| f.clone());
            if let Some(f) = target {
                f(e.state() == HotKeyState::Pressed, at);
            }
        }));
    });
}

/// What a key joining a held modifier-only shortcut calls (after its press was sent).
pub type OnCancel = Arc<dyn Fn() + Send + Sync>;

/// Where the observed modifier's events go: swapped, like [`ROUTES`], without restarting
/// the observer.
#[derive(Default)]
struct ModRoute {
    on_event: Option<OnHotkey>,
    on_cancel: Option<OnCancel>,
}

/// The app's global hotkeys: at most one combination per [`Slot`], or for the dictation
/// slot a modifier alone, observed.
pub struct Hotkeys {
    manager: Option<GlobalHotKeyManager>,
    current: [Option<HotKey>; 4],
    /// The dictation slot's modifier-only shortcut and its observer.
    observed: Option<(ModKey, Observer)>,
    mod_route: Arc<Mutex<ModRoute>>,
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
            current: [None, None, None, None],
            observed: None,
            mod_route: Arc::default(),
        }
    }

    /// The registered dictation shortcut.
    pub fn current(&self) -> Option<Shortcut> {
        match &self.observed {
            Some((m, _)) => Some(Shortcut::Modifier(*m)),
            None => self.current[Slot::Dictation as usize].map(Shortcut::Keys),
        }
    }

    /// What a key joining a held modifier-only dictation shortcut calls (see
    /// [`super::modkeys::Chord`]); without one, such a chord only ends the press.
    pub fn set_on_cancel(&mut self, on_cancel: OnCancel) {
        self.mod_route
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .on_cancel = Some(on_cancel);
    }

    /// Makes `wanted` the dictation shortcut: a combination is registered
    /// ([`Hotkeys::set_slot`]); a modifier alone is observed (an unchanged one keeps its
    /// observer). On `Err` no dictation shortcut is active.
    pub fn set(&mut self, wanted: Option<Shortcut>, on_event: OnHotkey) -> Result<(), HotkeyError> {
        match wanted {
            Some(Shortcut::Modifier(m)) => {
                self.release_slot(Slot::Dictation);
                self.mod_route
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .on_event = Some(on_event);
                if self.observed.as_ref().is_some_and(|(k, _)| *k == m) {
                    return Ok(());
                }
                self.observed = None;
                let route = self.mod_route.clone();
                let send = Arc::new(move |e: ModEvent| {
                    let (on_event, on_cancel) = {
                        let r = route.lock().unwrap_or_else(|p| p.into_inner());
                        (r.on_event.clone(), r.on_cancel.clone())
                    };
                    match (e, on_event, on_cancel) {
                        (ModEvent::Press(at), Some(f), _) => f(true, at),
                        (ModEvent::Release(at), Some(f), _) => f(false, at),
                        (ModEvent::Cancel, _, Some(c)) => c(),
                        (ModEvent::Cancel, Some(f), None) => f(false, Instant::now()),
                        _ => {}
                    }
                });
                let observer = Observer::start(Watch::Key(m, send)).map_err(|e| match e {
                    ObserveError::NeedsInputMonitoring => HotkeyError::InputMonitoring,
                    ObserveError::Unavailable if m == ModKey::Fn => HotkeyError::NoFn,
                    ObserveError::Unavailable => HotkeyError::Unavailable,
                })?;
                self.observed = Some((m, observer));
                Ok(())
            }
            keys => {
                self.stop_observing();
                self.set_slot(Slot::Dictation, keys.and_then(Shortcut::keys), on_event)
            }
        }
    }

    fn stop_observing(&mut self) {
        // Dropping the observer stops its source and joins its threads.
        self.observed = None;
        self.mod_route
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .on_event = None;
    }

    /// Makes `wanted` the combination registered in `slot` (`None`: none), with `on_event`
    /// called for its presses and releases. An unchanged combination stays registered; a
    /// changed one releases the old combination first. The other slot's combination is
    /// refused as [`HotkeyError::Taken`]. On `Err` nothing is registered in `slot`.
    pub fn set_slot(
        &mut self,
        slot: Slot,
        wanted: Option<HotKey>,
        on_event: OnHotkey,
    ) -> Result<(), HotkeyError> {
        install_handler();
        let i = slot as usize;
        if let Some(k) = wanted
            && Some(k) == self.current[i]
        {
            set_route(slot, Some((k.id(), on_event)));
            return Ok(());
        }
        self.release_slot(slot);
        let Some(hotkey) = wanted else {
            return Ok(());
        };
        if self.current.iter().flatten().any(|k| k.id() == hotkey.id()) {
            return Err(HotkeyError::Taken);
        }
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
        set_route(slot, Some((hotkey.id(), on_event)));
        match manager.register(hotkey) {
            Ok(()) => {
                self.current[i] = Some(hotkey);
                Ok(())
            }
            Err(e) => {
                set_route(slot, None);
                Err(match e {
                    global_hotkey::Error::AlreadyRegistered(_) => HotkeyError::Taken,
                    _ => HotkeyError::Unavailable,
                })
            }
        }
    }

    /// Unregisters the dictation shortcut (if any), also a modifier observed.
    pub fn release(&mut self) {
        self.stop_observing();
        self.release_slot(Slot::Dictation);
    }

    /// Unregisters `slot`'s combination (if any).
    pub fn release_slot(&mut self, slot: Slot) {
        set_route(slot, None);
        if let (Some(manager), Some(old)) = (&self.manager, self.current[slot as usize].take()) {
            let _ = manager.unregister(old);
        }
    }
}

impl Drop for Hotkeys {
    fn drop(&mut self) {
        self.stop_observing();
        self.release_slot(Slot::Dictation);
        self.release_slot(Slot::PasteLast);
        self.release_slot(Slot::DictateClean);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: Option<&str>) -> HotkeySettings {
        HotkeySettings {
            keys: k.map(str::to_owned),
            mode: HotkeyMode::Toggle,
            paste_last: None,
            dictate_clean: None,
        }
    }

    #[test]
    fn default_empty_and_invalid() {
        assert!(matches!(parse(&keys(None)), Ok(Some(_))));
        assert!(matches!(parse(&keys(Some("ctrl+shift+d"))), Ok(Some(_))));
        assert_eq!(parse(&keys(Some(""))), Ok(None));
        assert_eq!(parse(&keys(Some("alt+"))), Err(HotkeyError::Invalid));
        assert_eq!(parse(&keys(Some("banana"))), Err(HotkeyError::Invalid));
        // The paste-last key is off unless set.
        assert_eq!(parse_paste_last(&keys(None)), Ok(None));
        let mut s = keys(None);
        s.paste_last = Some("Ctrl+Alt+V".into());
        assert!(matches!(parse_paste_last(&s), Ok(Some(_))));
    }

    /// Issue #25 item 6: the default ⌥Space types a non-breaking space in many layouts and
    /// is the ChatGPT app's, Alfred's and Raycast's; on macOS a second registration of a
    /// taken combination succeeds silently. The Mac default is none of the combinations
    /// macOS or common apps hold; a settings file naming a hotkey keeps it, and one naming
    /// none gets this platform's default.
    #[test]
    fn issue25_06_the_mac_default_hotkey_is_no_known_mac_shortcut() {
        use crate::settings::{DEFAULT_HOTKEY, Settings, default_hotkey};
        let mac = parse_combination(default_hotkey(true)).unwrap().unwrap();
        for taken in [
            "Alt+Space",
            "Cmd+Space",
            "Alt+Cmd+Space",
            "Ctrl+Space",
            "Ctrl+Alt+Space",
            "Shift+Cmd+Space",
            "Ctrl+Shift+Space",
        ] {
            let taken_keys = parse_combination(taken).unwrap().unwrap();
            assert_ne!(mac, taken_keys, "{taken}");
        }
        assert_eq!(display_keys(default_hotkey(true)).as_deref(), Some("⌃⌥D"));
        // It needs a modifier and types no text: what the recorder would accept.
        assert!(mac.mods.contains(Modifiers::CONTROL) && mac.mods.contains(Modifiers::ALT));
        // Older files: a named hotkey is kept, an unnamed one is the default.
        let named: Settings =
            serde_json::from_str(r#"{"hotkey":{"keys":"Alt+Space","mode":"toggle"}}"#).unwrap();
        assert_eq!(parse(&named.hotkey), parse_keys("Alt+Space"));
        let unnamed: Settings = serde_json::from_str(r#"{"hotkey":{"mode":"toggle"}}"#).unwrap();
        assert_eq!(parse(&unnamed.hotkey), parse_keys(DEFAULT_HOTKEY));
        assert_eq!(
            DEFAULT_HOTKEY,
            default_hotkey(cfg!(target_os = "macos")),
            "this platform's"
        );
    }

    #[test]
    fn combinations_show_the_mac_way() {
        let show = |t: &str| display_keys(t).unwrap();
        assert_eq!(show("Alt+Space"), "⌥Space");
        assert_eq!(show("Ctrl+Shift+D"), "⌃⇧D");
        assert_eq!(show("Shift+Ctrl+KeyD"), "⌃⇧D");
        assert_eq!(show("Super+Alt+Digit5"), "⌥⌘5");
        assert_eq!(show("F5"), "F5");
        assert_eq!(show("Ctrl+Alt+Shift+Super+ArrowUp"), "⌃⌥⇧⌘Up");
        assert_eq!(display_keys(""), None);
        assert_eq!(display_keys("banana"), None);
    }

    /// Issue #26 item 2: a modifier alone is a shortcut of its own, stored by name and
    /// shown the Mac way; it can only be the dictation key.
    #[test]
    fn issue26_02_modifiers_alone_parse_show_and_are_dictation_only() {
        assert_eq!(
            parse(&keys(Some("RightAlt"))),
            Ok(Some(Shortcut::Modifier(ModKey::RightAlt)))
        );
        assert_eq!(
            parse(&keys(Some("Fn"))),
            Ok(Some(Shortcut::Modifier(ModKey::Fn)))
        );
        assert_eq!(display_keys("Fn").as_deref(), Some("Fn"));
        assert_eq!(display_keys("RightAlt").as_deref(), Some("Right ⌥"));
        assert_eq!(display_keys("RightCtrl").as_deref(), Some("Right ⌃"));
        assert_eq!(display_keys("right option").as_deref(), Some("Right ⌥"));
        // A combination is still one; "Alt" alone names no side and is no key.
        assert!(matches!(
            parse_keys("Alt+Space"),
            Ok(Some(Shortcut::Keys(_)))
        ));
        assert_eq!(parse_keys("Alt"), Err(HotkeyError::Invalid));
        // Paste-last takes combinations only.
        let mut s = keys(None);
        s.paste_last = Some("RightAlt".into());
        assert_eq!(
            parse_paste_last(&s),
            Err(HotkeyError::ModifierDictationOnly)
        );
        assert_eq!(
            parse_combination("Fn"),
            Err(HotkeyError::ModifierDictationOnly)
        );
        // The recorder stores what reads back.
        let (k, text) = recorded_modifier(ModKey::RightAlt, true).unwrap();
        assert_eq!(parse_keys(&text), Ok(Some(k)));
        assert_eq!(text, "RightAlt");
        assert_eq!(
            recorded_modifier(ModKey::Fn, false),
            Err(HotkeyError::ModifierDictationOnly)
        );
        assert_eq!(
            HotkeyError::InputMonitoring.code(),
            "hotkey.input-monitoring"
        );
    }

    #[test]
    fn issue26_02_a_chord_cancels_only_the_recording_its_press_started() {
        let mut g = Gestures::new();
        // Started by the press, then a key joined: cancel.
        assert_eq!(g.press(Auto, false, t(0)), Start);
        assert_eq!(g.cancel(true), Intent::Cancel);
        assert!(!g.is_held());
        // The release that follows is nothing.
        assert_eq!(g.release(Auto, false, t(900)), Nothing);
        // A press that stopped a recording: the chord changes nothing.
        assert_eq!(g.press(Toggle, true, t(2_000)), Stop);
        assert_eq!(g.cancel(false), Nothing);
        // Push to talk: the recording the press started is cancelled.
        assert_eq!(g.press(PushToTalk, false, t(3_000)), Start);
        assert_eq!(g.cancel(true), Intent::Cancel);
        // No press seen: nothing.
        assert_eq!(g.cancel(true), Nothing);
    }

    #[test]
    fn the_recorder_refuses_typing_keys_and_stores_what_reads_back() {
        let ok = |m, c| recorded(m, c).map(|(k, text)| (display(&k), text));
        assert_eq!(
            ok(Modifiers::ALT, Code::Space),
            Ok(("⌥Space".into(), "Alt+Space".into()))
        );
        assert_eq!(
            ok(Modifiers::CONTROL | Modifiers::SHIFT, Code::KeyD),
            Ok(("⌃⇧D".into(), "Ctrl+Shift+D".into()))
        );
        assert_eq!(
            ok(Modifiers::META | Modifiers::ALT, Code::Digit5),
            Ok(("⌥⌘5".into(), "Alt+Super+5".into()))
        );
        assert_eq!(
            ok(Modifiers::empty(), Code::F5),
            Ok(("F5".into(), "F5".into()))
        );
        assert_eq!(
            ok(Modifiers::CONTROL, Code::ArrowUp),
            Ok(("⌃Up".into(), "Ctrl+ArrowUp".into()))
        );
        for code in [
            Code::KeyD,
            Code::Space,
            Code::Digit1,
            Code::Enter,
            Code::Minus,
        ] {
            assert_eq!(
                recorded(Modifiers::empty(), code).unwrap_err(),
                HotkeyError::NeedsModifier
            );
            assert_eq!(
                recorded(Modifiers::SHIFT, code).unwrap_err(),
                HotkeyError::NeedsModifier,
                "Shift alone types a capital"
            );
        }
        assert_eq!(
            recorded(Modifiers::ALT, Code::ShiftLeft).unwrap_err(),
            HotkeyError::Invalid
        );
        assert_eq!(HotkeyError::NeedsModifier.code(), "hotkey.needs-modifier");
    }

    // The gestures. `t(ms)` is an instant `ms` after a fixed start.
    fn t(ms: u64) -> Instant {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *START.get_or_init(Instant::now) + Duration::from_millis(ms)
    }

    use HotkeyMode::{Auto, PushToTalk, Toggle};
    use Intent::{Nothing, Start, Stop};

    #[test]
    fn auto_a_tap_starts_hands_free_and_the_next_tap_stops() {
        let mut g = Gestures::new();
        assert_eq!(g.press(Auto, false, t(0)), Start);
        assert_eq!(
            g.release(Auto, true, t(120)),
            Nothing,
            "a tap keeps recording"
        );
        assert!(!g.is_held());
        assert_eq!(g.press(Auto, true, t(5_000)), Stop);
        assert_eq!(g.release(Auto, false, t(5_090)), Nothing);
    }

    #[test]
    fn auto_a_hold_is_push_to_talk() {
        let mut g = Gestures::new();
        assert_eq!(g.press(Auto, false, t(0)), Start);
        assert_eq!(g.release(Auto, true, t(2_500)), Stop);
        // Exactly at the boundary it is a hold; just under it a tap.
        assert_eq!(g.press(Auto, false, t(10_000)), Start);
        assert_eq!(g.release(Auto, true, t(10_000 + TAP_MAX_MS)), Stop);
        assert_eq!(g.press(Auto, false, t(20_000)), Start);
        assert_eq!(g.release(Auto, true, t(20_000 + TAP_MAX_MS - 1)), Nothing);
    }

    #[test]
    fn auto_a_tap_or_hold_stops_a_recording_started_elsewhere() {
        // Started from the menu: a tap stops it (on the press), and the release after a
        // long press does nothing more.
        let mut g = Gestures::new();
        assert_eq!(g.press(Auto, true, t(0)), Stop);
        assert_eq!(g.release(Auto, false, t(60)), Nothing);
        assert_eq!(g.press(Auto, true, t(1_000)), Stop);
        assert_eq!(g.release(Auto, true, t(3_000)), Nothing);
    }

    #[test]
    fn auto_a_hold_ended_from_the_menu_does_not_stop_again() {
        let mut g = Gestures::new();
        assert_eq!(g.press(Auto, false, t(0)), Start);
        // Stopped from the menu while held: the release finds nothing recording.
        assert_eq!(g.release(Auto, false, t(2_000)), Nothing);
    }

    #[test]
    fn key_repeats_and_stray_releases_are_ignored() {
        let mut g = Gestures::new();
        assert_eq!(g.press(Auto, false, t(0)), Start);
        assert_eq!(g.press(Auto, true, t(500)), Nothing, "a repeat while held");
        assert_eq!(g.press(Auto, true, t(530)), Nothing);
        assert_eq!(g.release(Auto, true, t(900)), Stop);
        // A release whose press came before the key was registered.
        let mut g = Gestures::new();
        assert_eq!(g.release(Auto, true, t(100)), Nothing);
        assert_eq!(g.release(Toggle, true, t(100)), Nothing);
    }

    #[test]
    fn toggle_and_push_to_talk_keep_their_meaning() {
        let mut g = Gestures::new();
        assert_eq!(g.press(Toggle, false, t(0)), Start);
        assert_eq!(
            g.release(Toggle, true, t(2_000)),
            Nothing,
            "held long: still toggle"
        );
        assert_eq!(g.press(Toggle, true, t(3_000)), Stop);
        assert_eq!(g.release(Toggle, false, t(3_050)), Nothing);

        assert_eq!(g.press(PushToTalk, false, t(4_000)), Start);
        assert_eq!(
            g.release(PushToTalk, true, t(4_050)),
            Stop,
            "even a tap stops"
        );
        assert_eq!(g.press(PushToTalk, true, t(5_000)), Start);
        assert_eq!(g.release(PushToTalk, true, t(6_000)), Stop);
    }
}
