//! Platform glue below the shell and the tray: window-level OS calls that belong to no
//! service. macOS has most of it ([`macos`]); on Linux the X11 indicator hint ([`x11`]) and
//! the desktop's light or dark preference ([`portal`]); elsewhere winit and the tray crate
//! cover it.

#[cfg(target_os = "macos")]
pub mod macos;
#[cfg(target_os = "linux")]
pub mod portal;
#[cfg(target_os = "linux")]
pub mod x11;

/// Makes the recording indicator's window (titled `title`) one that never takes keyboard
/// focus from the app the user types in: a non-activating panel that cannot become key or
/// main on macOS, a "No Input" window on X11. Returns whether there is nothing left to do
/// (the shell asks again on later frames until the window exists).
pub fn make_indicator_unfocusable(title: &str) -> bool {
    #[cfg(target_os = "macos")]
    {
        macos::make_indicator_panel(title)
    }
    #[cfg(target_os = "linux")]
    {
        x11::make_indicator_unfocusable(title)
    }
    #[cfg(not(any(target_os = "macos", target_os = "linux")))]
    {
        let _ = title;
        true
    }
}

/// Keeps the system from throttling Persyk while a recording runs or is recognized (macOS:
/// App Nap would slow a hidden app's timers, the capture thread and on-device recognition).
/// Nothing elsewhere.
#[derive(Default)]
pub struct Busy {
    #[cfg(target_os = "macos")]
    activity: Option<macos::Activity>,
}

impl Busy {
    /// Holds the activity while `busy`, ends it when not.
    pub fn set(&mut self, busy: bool) {
        #[cfg(target_os = "macos")]
        if busy != self.activity.is_some() {
            self.activity =
                busy.then(|| macos::Activity::begin("Recording and recognizing speech"));
        }
        #[cfg(not(target_os = "macos"))]
        let _ = busy;
    }
}

// The indicator's class check (macOS), pure so that Linux tests it too.
#[cfg(any(target_os = "macos", test))]
mod panel {
    /// The Objective-C class winit gives every window it creates.
    pub const WINIT_WINDOW_CLASS: &str = "WinitWindow";
    /// The indicator's own class (`macos::IndicatorPanel`): an `NSPanel` that never becomes key
    /// or main.
    pub const INDICATOR_PANEL_CLASS: &str = "PersykIndicatorPanel";
    /// The prefix of the subclass Key-Value Observing swaps in for an observed object.
    const KVO_PREFIX: &str = "NSKVONotifying_";

    /// What the indicator's window needs, by the name of its runtime class and of that class's
    /// superclass.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum PanelStep {
        /// Already the indicator's panel class (observed or not).
        Done,
        /// winit's window, unobserved: give it the panel class.
        Swap,
        /// winit's window under Key-Value Observing (winit 0.30 observes `effectiveAppearance`
        /// on every window, so its runtime class is `NSKVONotifying_WinitWindow`): stop that
        /// observation, give it the panel class, observe again.
        SwapObserved,
        /// A class Persyk does not know the layout of: never changed.
        Leave,
    }

    /// See [`PanelStep`].
    pub fn panel_step(class: &str, superclass: Option<&str>) -> PanelStep {
        let observed = class.strip_prefix(KVO_PREFIX);
        if class == INDICATOR_PANEL_CLASS || observed == Some(INDICATOR_PANEL_CLASS) {
            PanelStep::Done
        } else if class == WINIT_WINDOW_CLASS {
            PanelStep::Swap
        } else if observed == Some(WINIT_WINDOW_CLASS) && superclass == Some(WINIT_WINDOW_CLASS) {
            PanelStep::SwapObserved
        } else {
            PanelStep::Leave
        }
    }
}
#[cfg(any(target_os = "macos", test))]
pub use panel::*;

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #25 item 1: winit 0.30.13 adds a key-value observer to every window it makes
    /// (`effectiveAppearance`, in `window_delegate.rs`), so the indicator's runtime class is
    /// `NSKVONotifying_WinitWindow`; the check compared it with `WinitWindow` and returned
    /// before the window became a panel. The observed class is recognised now (and only
    /// when its superclass really is winit's).
    #[test]
    fn issue25_01_the_indicator_class_check_sees_through_key_value_observing() {
        use PanelStep::*;
        for (class, superclass, step) in [
            ("WinitWindow", Some("NSWindow"), Swap),
            (
                "NSKVONotifying_WinitWindow",
                Some("WinitWindow"),
                SwapObserved,
            ),
            ("PersykIndicatorPanel", Some("NSPanel"), Done),
            (
                "NSKVONotifying_PersykIndicatorPanel",
                Some("PersykIndicatorPanel"),
                Done,
            ),
            // Someone else's subclass, or a name without the class behind it: left alone.
            ("NSKVONotifying_WinitWindow", Some("NSWindow"), Leave),
            ("NSWindow", Some("NSResponder"), Leave),
            ("_NSFullScreenTileWindow", None, Leave),
        ] {
            assert_eq!(panel_step(class, superclass), step, "{class}");
        }
    }
}
