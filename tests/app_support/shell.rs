//! The shell headless, as the app's tests drive it: `Shell` over a `PersykUi` in an
//! egui_kittest harness that runs, each frame, what eframe calls (`tick` for its `logic`, then
//! `draw` for its `ui`), and a tray that records what it is shown (Xvfb has no tray host).

use std::sync::{Arc, Mutex};

use egui_kittest::Harness;
use persyk::app::event::Post;
use persyk::app::event::TrayState;
use persyk::app::shell::{Shell, ShellOptions, TrayPort};
use persyk::app::tray::TrayError;
use persyk::app::ui::PersykUi;

/// The states a [`StateTray`] was shown, once per change.
pub type TraySyncs = Arc<Mutex<Vec<TrayState>>>;

/// A tray that records each state it is shown, once per change.
pub struct StateTray(pub TraySyncs);

impl TrayPort for StateTray {
    fn sync(&mut self, state: TrayState, _recording: bool, _can_copy: bool) {
        let mut v = self.0.lock().unwrap();
        if v.last() != Some(&state) {
            v.push(state);
        }
    }
}

/// The shell over `ui` with `options` and the tray `make_tray` makes, in a 640×900 harness
/// that runs `tick` then `draw` each frame. The shell's own wake-ups go to a context of
/// their own; the test steps the harness.
pub fn shell_harness(
    ui: PersykUi,
    options: ShellOptions,
    make_tray: impl FnOnce(Post) -> Result<Box<dyn TrayPort>, TrayError>,
) -> Harness<'static, Shell> {
    let shell = Shell::with_tray(&eframe::egui::Context::default(), ui, options, make_tray);
    Harness::builder()
        .with_size(eframe::egui::vec2(640.0, 900.0))
        .build_ui_state(
            |ui, shell: &mut Shell| {
                shell.tick(ui.ctx());
                shell.draw(ui);
            },
            shell,
        )
}
