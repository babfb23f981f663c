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

/// Just before the recording indicator's window opens: on macOS, a hidden Persyk is
/// unhidden without activation so the window can show without taking the keyboard; nothing
/// elsewhere.
pub fn before_indicator_opens() {
    #[cfg(target_os = "macos")]
    macos::unhide_for_indicator();
}

/// "Transcribe a File…": the system's file panel where there is one (macOS), with the files
/// chosen (empty: cancelled). `None` where Persyk has no panel: the window's path field is
/// used instead.
pub fn choose_media_files() -> Option<Vec<std::path::PathBuf>> {
    #[cfg(target_os = "macos")]
    {
        macos::choose_media_files()
    }
    #[cfg(not(target_os = "macos"))]
    {
        None
    }
}

/// Settings › History's folder chooser: the system's panel where there is one (macOS), with
/// the folder chosen (`Some(None)`: cancelled). `None` where Persyk has no panel: the path is
/// typed, or a synced place's button used.
pub fn choose_folder() -> Option<Option<std::path::PathBuf>> {
    #[cfg(target_os = "macos")]
    {
        macos::choose_folder()
    }
    #[cfg(not(target_os = "macos"))]
    {
        None
    }
}

/// Whether [`choose_folder`] has a panel to show here.
pub const HAS_FOLDER_PANEL: bool = cfg!(target_os = "macos");

/// Files the system asks Persyk to open (macOS: Finder's Open With, the `odoc` Apple event),
/// kept until the window can take them. On launch the event arrives before the window and its
/// shell exist (AppKit handles it between `applicationWillFinishLaunching:` and
/// `applicationDidFinishLaunching:`), so the files wait here until [`OpenQueue::connect`]
/// gives the queue where to send them; after that each request is passed on as it comes.
/// Plain logic, so that Linux tests it too.
#[cfg(any(target_os = "macos", test))]
#[derive(Default)]
pub struct OpenQueue {
    waiting: Vec<std::path::PathBuf>,
    sink: Option<Box<dyn Fn(Vec<std::path::PathBuf>)>>,
}

#[cfg(any(target_os = "macos", test))]
impl OpenQueue {
    /// Files to open: passed on at once when connected, else kept in order.
    pub fn deliver(&mut self, files: Vec<std::path::PathBuf>) {
        if files.is_empty() {
            return;
        }
        match &self.sink {
            Some(sink) => sink(files),
            None => self.waiting.extend(files),
        }
    }

    /// Where files go from now on; the ones that came before are sent there first.
    pub fn connect(&mut self, sink: Box<dyn Fn(Vec<std::path::PathBuf>)>) {
        let waiting = std::mem::take(&mut self.waiting);
        if !waiting.is_empty() {
            sink(waiting);
        }
        self.sink = Some(sink);
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

/// Where the recording indicator (`size`, points) goes, `margin` above the bottom of the
/// screen that has the pointer (macOS; see [`indicator_position`]); `None` elsewhere, where
/// the indicator goes to the main window's monitor.
pub fn indicator_place(size: (f64, f64), margin: f64) -> Option<(f32, f32)> {
    #[cfg(target_os = "macos")]
    {
        macos::indicator_place(size, margin)
    }
    #[cfg(not(target_os = "macos"))]
    {
        let _ = (size, margin);
        None
    }
}

// The indicator's screen (macOS), pure so that Linux tests it too.
#[cfg(any(target_os = "macos", test))]
mod screens {
    /// A rectangle in AppKit's global coordinates: points, origin at the bottom left of the
    /// primary display (the first `NSScreen.screens` lists), y up.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct CocoaRect {
        pub x: f64,
        pub y: f64,
        pub width: f64,
        pub height: f64,
    }

    impl CocoaRect {
        fn contains(&self, (x, y): (f64, f64)) -> bool {
            x >= self.x && x < self.x + self.width && y >= self.y && y < self.y + self.height
        }
    }

    /// One display: its whole frame, and the part windows may use (`visibleFrame`: without
    /// the menu bar and the Dock).
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct ScreenRects {
        pub frame: CocoaRect,
        pub visible: CocoaRect,
    }

    /// Where the indicator of `size` goes: centred, `margin` above the bottom of the visible
    /// area of the screen that has the `pointer`, else of the screen with the key window
    /// (`key`, an index into `screens`), else of the first (primary) screen — so on a
    /// second display it shows where the user is working, not on the main window's display.
    /// In winit's desktop coordinates, as egui's `ViewportBuilder::with_position` takes them:
    /// points, origin at the top left of the primary display, y down. `None` without screens.
    pub fn indicator_position(
        screens: &[ScreenRects],
        pointer: Option<(f64, f64)>,
        key: Option<usize>,
        (width, height): (f64, f64),
        margin: f64,
    ) -> Option<(f32, f32)> {
        let primary = screens.first()?;
        let screen = pointer
            .and_then(|p| screens.iter().find(|s| s.frame.contains(p)))
            .or_else(|| key.and_then(|k| screens.get(k)))
            .unwrap_or(primary);
        let v = screen.visible;
        let x = v.x + ((v.width - width) / 2.0).max(0.0);
        // The window's top edge, AppKit's way, then flipped about the primary's height.
        let top = v.y + margin.min((v.height - height).max(0.0)) + height;
        let y = primary.frame.height - top;
        Some((x.round() as f32, y.round() as f32))
    }
}
#[cfg(any(target_os = "macos", test))]
pub use screens::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(x: f64, y: f64, width: f64, height: f64) -> CocoaRect {
        CocoaRect {
            x,
            y,
            width,
            height,
        }
    }

    /// Issue #25 item 9: the indicator went to the bottom of the main window's monitor,
    /// measured from the origin of the desktop, whatever display the user worked on. It goes
    /// to the display with the pointer (else the key window's, else the primary), inside that
    /// display's visible area, in winit's flipped coordinates.
    #[test]
    fn issue25_09_the_indicator_goes_to_the_screen_with_the_pointer() {
        // A 1440x900 laptop (menu bar 25 pt, Dock 70 pt at the bottom), a 1920x1080 display
        // to its right whose bottom is 180 pt lower, and a 1280x800 one above the laptop.
        let laptop = ScreenRects {
            frame: rect(0.0, 0.0, 1440.0, 900.0),
            visible: rect(0.0, 70.0, 1440.0, 805.0),
        };
        let right = ScreenRects {
            frame: rect(1440.0, -180.0, 1920.0, 1080.0),
            visible: rect(1440.0, -180.0, 1920.0, 1055.0),
        };
        let above = ScreenRects {
            frame: rect(80.0, 900.0, 1280.0, 800.0),
            visible: rect(80.0, 900.0, 1280.0, 775.0),
        };
        let screens = [laptop, right, above];
        let size = (320.0, 44.0);
        let at = |pointer, key| indicator_position(&screens, pointer, key, size, 96.0);
        // On the laptop: centred, 96 pt above the Dock; y down from the laptop's top.
        assert_eq!(at(Some((700.0, 400.0)), None), Some((560.0, 690.0)));
        // On the right-hand display: its own centre and bottom (y below the laptop's 900).
        assert_eq!(at(Some((2000.0, -100.0)), None), Some((2240.0, 940.0)));
        // Above the laptop: negative y in winit's coordinates.
        assert_eq!(at(Some((500.0, 1200.0)), None), Some((560.0, -140.0)));
        // The pointer decides over the key window's screen; without a pointer on any
        // screen the key window's screen is used, else the primary.
        assert_eq!(at(Some((700.0, 400.0)), Some(1)), at(None, Some(0)));
        assert_eq!(
            at(Some((-5000.0, 0.0)), Some(1)),
            at(Some((2000.0, -100.0)), None)
        );
        assert_eq!(at(None, Some(7)), at(Some((700.0, 400.0)), None));
        assert_eq!(indicator_position(&[], None, None, size, 96.0), None);
        // A screen smaller than the indicator: its left edge and bottom.
        let tiny = [ScreenRects {
            frame: rect(0.0, 0.0, 200.0, 40.0),
            visible: rect(0.0, 0.0, 200.0, 40.0),
        }];
        assert_eq!(
            indicator_position(&tiny, None, None, size, 96.0),
            Some((0.0, -4.0))
        );
    }

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

    /// Issue #38 item 1: files Finder asks Persyk to open at launch come before the window
    /// exists; none is lost or reordered, later ones go straight through, and an empty
    /// request sends nothing.
    #[test]
    fn issue38_01_files_opened_before_the_window_wait_for_it_in_order() {
        use std::cell::RefCell;
        use std::path::PathBuf;
        use std::rc::Rc;
        let got: Rc<RefCell<Vec<Vec<PathBuf>>>> = Rc::default();
        let mut queue = OpenQueue::default();
        queue.deliver(vec![PathBuf::from("/a/memo.m4a")]);
        queue.deliver(Vec::new());
        queue.deliver(vec![
            PathBuf::from("/b/talk.mp4"),
            PathBuf::from("/c/x.wav"),
        ]);
        assert!(got.borrow().is_empty());
        let sink = got.clone();
        queue.connect(Box::new(move |files| sink.borrow_mut().push(files)));
        assert_eq!(
            *got.borrow(),
            vec![vec![
                PathBuf::from("/a/memo.m4a"),
                PathBuf::from("/b/talk.mp4"),
                PathBuf::from("/c/x.wav"),
            ]],
            "the waiting files, once, in order"
        );
        queue.deliver(Vec::new());
        queue.deliver(vec![PathBuf::from("/d/late.flac")]);
        assert_eq!(got.borrow().len(), 2);
        assert_eq!(got.borrow()[1], vec![PathBuf::from("/d/late.flac")]);
    }
}
