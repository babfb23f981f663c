//! The recording indicator: a small window near the bottom centre of the screen while a
//! recording runs, with its state, the elapsed time, the input level and a Stop button.
//!
//! [`PersykUi::indicator`] makes the model (live clock and level sources, so the window
//! repaints on its own); [`indicator_ui`] renders its [`IndicatorView`] and returns what was
//! clicked; the shell (`shell.rs`) shows it in a deferred egui viewport built by
//! [`viewport_builder`] and applies the [`IndicatorAction`]. Headless (egui_kittest, or any
//! backend without multiple viewports) the same content shows as an egui window inside the
//! main one.
//!
//! Invariants:
//! - It exists only while a recording runs (starting, connecting, recording, finishing) and
//!   `feedback.indicator` is on; when the shell stops asking for the viewport eframe closes
//!   its window, and nothing repaints for it while idle.
//! - It never takes focus from the app the user is typing in: built inactive
//!   (`with_active(false)`), undecorated, off the taskbar, always on top, an X11
//!   `_NET_WM_WINDOW_TYPE_NOTIFICATION`; on macOS the shell makes it a non-activating panel
//!   that cannot become the key window (`macos::make_indicator_panel`).
//! - Its title, [`TITLE`], is stable: tests find the window by it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

/// The indicator window's title (what `xdotool search --name` and accessibility see).
pub const TITLE: &str = "Persyk recording";
/// Its size in points.
pub const SIZE: egui::Vec2 = egui::vec2(320.0, 44.0);
/// Repaint cadence while shown (elapsed time and level meter).
pub const REPAINT: Duration = LIVE_REPAINT;
/// Distance from the bottom of the screen (above the Dock or a bottom panel).
pub const BOTTOM_MARGIN: f32 = 96.0;

/// What a running recording is doing, as the indicator says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndicatorState {
    /// Waiting for the user to answer the microphone prompt.
    WaitingPermission,
    Connecting,
    Recording,
    /// "Transcribe again": a saved recording is streamed.
    Transcribing,
    Finishing,
    /// The engine halted; the recording is ending (the reason is the engine's).
    Halted(String),
    /// Cancelled: saved, and deleted when the Undo time is over.
    Cancelled,
}

impl IndicatorState {
    fn label(&self) -> String {
        match self {
            IndicatorState::WaitingPermission => "Waiting for the microphone…".into(),
            IndicatorState::Connecting => "Connecting…".into(),
            IndicatorState::Recording => "Recording".into(),
            IndicatorState::Transcribing => "Transcribing".into(),
            IndicatorState::Finishing => "Finishing…".into(),
            IndicatorState::Halted(reason) => crate::app::model::halt_sentence(reason),
            IndicatorState::Cancelled => "Recording cancelled".into(),
        }
    }
}

/// What the indicator shows, with live sources for what moves (the clock and the level), so
/// its window can repaint on its own without a pass of the main window.
#[derive(Debug, Clone)]
pub struct IndicatorModel {
    pub state: IndicatorState,
    /// When the recording started (`None` while it is starting).
    pub started: Option<Instant>,
    /// The recording's input level (an `f32` RMS in the bits), when there is one.
    pub level: Option<Arc<AtomicU32>>,
    pub can_stop: bool,
    /// The clean-up mode the words will go through ("Tidy"), when one is set.
    pub cleanup: Option<&'static str>,
}

impl IndicatorModel {
    /// What the indicator shows now.
    pub fn view(&self) -> IndicatorView {
        IndicatorView {
            state: self.state.clone(),
            elapsed: self.started.map(|t| t.elapsed()).unwrap_or_default(),
            level: self
                .level
                .as_ref()
                .map_or(0.0, |l| f32::from_bits(l.load(Ordering::Relaxed))),
            can_stop: self.can_stop,
            cleanup: self.cleanup,
        }
    }
}

/// Everything the indicator shows at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct IndicatorView {
    pub state: IndicatorState,
    pub elapsed: Duration,
    /// RMS of the latest 100 ms of input, 0.0–1.0.
    pub level: f32,
    /// Stop is offered (not while the recording already finishes).
    pub can_stop: bool,
    /// The clean-up mode, shown beside the state ("Recording · Tidy").
    pub cleanup: Option<&'static str>,
}

/// What a click on the indicator asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndicatorAction {
    Stop,
    /// ✕: cancel the recording (kept for an Undo).
    Cancel,
    Undo,
}

/// The indicator's viewport.
pub fn viewport_id() -> egui::ViewportId {
    egui::ViewportId::from_hash_of("persyk-recording-indicator")
}

/// The indicator's window: undecorated, inactive, on top, off the taskbar, at `at` (macOS:
/// the bottom centre of the screen with the pointer, chosen by the platform glue when the
/// indicator opens) or else near the bottom centre of a monitor of `monitor_size` points
/// (where the platform lets a window place itself; Wayland does not).
pub fn viewport_builder(
    monitor_size: Option<egui::Vec2>,
    at: Option<egui::Pos2>,
) -> egui::ViewportBuilder {
    let mut builder = egui::ViewportBuilder::default()
        .with_title(TITLE)
        .with_app_id("persyk-indicator")
        .with_inner_size(SIZE)
        .with_resizable(false)
        .with_decorations(false)
        .with_active(false)
        .with_taskbar(false)
        .with_always_on_top()
        .with_window_type(egui::X11WindowType::Notification);
    if let Some(at) = at {
        builder = builder.with_position(at);
    } else if let Some(screen) = monitor_size.filter(|s| s.x > SIZE.x && s.y > SIZE.y) {
        let y = (screen.y - SIZE.y - BOTTOM_MARGIN).max(0.0);
        builder = builder.with_position(egui::pos2(((screen.x - SIZE.x) / 2.0).round(), y));
    }
    builder
}

/// The fill of the level meter: RMS in dB, −60 dB … 0 dB, as the Dictation page shows it.
pub fn level_fill(level: f32) -> f32 {
    let db = 20.0 * level.max(1e-6).log10();
    ((db + 60.0) / 60.0).clamp(0.0, 1.0)
}

/// Renders the indicator's content; returns what was clicked.
pub fn indicator_ui(ui: &mut egui::Ui, view: &IndicatorView) -> Option<IndicatorAction> {
    let mut action = None;
    egui::Frame::window(ui.style())
        .inner_margin(egui::Margin::symmetric(10, 6))
        .show(ui, |ui| {
            ui.set_min_width(SIZE.x - 24.0);
            ui.horizontal_centered(|ui| {
                let (dot, state) = match &view.state {
                    IndicatorState::Halted(_) => {
                        (ui.visuals().error_fg_color, ui.visuals().error_fg_color)
                    }
                    IndicatorState::Recording | IndicatorState::Transcribing => (
                        Color32::from_rgb(0xe0, 0x3a, 0x3a),
                        ui.visuals().text_color(),
                    ),
                    _ => (ui.visuals().weak_text_color(), ui.visuals().text_color()),
                };
                let (rect, _) =
                    ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
                ui.painter().circle_filled(rect.center(), 5.0, dot);
                match view.cleanup {
                    Some(mode) if view.state != IndicatorState::Cancelled => {
                        ui.colored_label(state, format!("{} · {mode}", view.state.label()))
                            .on_hover_text(format!("Your words will be cleaned up: {mode}"));
                    }
                    _ => {
                        ui.colored_label(state, view.state.label());
                    }
                }
                if view.state == IndicatorState::Cancelled {
                    ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                        if ui
                            .button("Undo")
                            .on_hover_text("Keep the recording and copy it as usual")
                            .clicked()
                        {
                            action = Some(IndicatorAction::Undo);
                        }
                    });
                    return;
                }
                ui.label(RichText::new(dictation::fmt_elapsed(view.elapsed)).monospace());
                ui.add(
                    egui::ProgressBar::new(level_fill(view.level))
                        .desired_width(70.0)
                        .desired_height(8.0),
                )
                .on_hover_text("Input level");
                // Right to left: Stop stays the rightmost control, ✕ beside it.
                ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                    if ui
                        .add_enabled(view.can_stop, egui::Button::new("Stop"))
                        .on_hover_text("Stop dictation")
                        .clicked()
                    {
                        action = Some(IndicatorAction::Stop);
                    }
                    if view.can_stop
                        && style::icon_only_button(ui, style::Icon::Close, "Cancel recording")
                            .clicked()
                    {
                        action = Some(IndicatorAction::Cancel);
                    }
                });
            });
        });
    action
}

impl PersykUi {
    /// The clean-up mode's name when a model mode is set (replacements alone are not shown).
    fn cleanup_label(&self) -> Option<&'static str> {
        let mode = self.starting_cleanup.unwrap_or(self.settings.cleanup.mode);
        mode.uses_model().then(|| mode.label())
    }

    /// What the indicator shows; `None` while no recording runs (the indicator is gone).
    /// The `feedback.indicator` setting is the shell's to apply.
    pub fn indicator(&self) -> Option<IndicatorModel> {
        match &self.dictation {
            Dictation::Starting => Some(IndicatorModel {
                state: if self.waiting_permission {
                    IndicatorState::WaitingPermission
                } else {
                    IndicatorState::Connecting
                },
                started: None,
                level: None,
                can_stop: true,
                cleanup: self.cleanup_label(),
            }),
            Dictation::Live(l) => {
                let state = match (&l.live.view.borrow().state, l.stopping) {
                    (EngineState::Connecting, false) => IndicatorState::Connecting,
                    (EngineState::Streaming, false) => match l.origin {
                        AudioOrigin::Microphone => IndicatorState::Recording,
                        AudioOrigin::File(_) => IndicatorState::Transcribing,
                    },
                    (EngineState::Halted(reason), _) => IndicatorState::Halted(reason.clone()),
                    _ => IndicatorState::Finishing,
                };
                Some(IndicatorModel {
                    can_stop: !l.stopping && !matches!(state, IndicatorState::Finishing),
                    state,
                    started: Some(l.started),
                    level: Some(l.live.level.clone()),
                    cleanup: l.cleanup,
                })
            }
            // A cancelled recording waits for its Undo where the user is looking.
            Dictation::Idle | Dictation::Done(_) | Dictation::Failed(_) => {
                self.cancelled.as_ref().map(|_| IndicatorModel {
                    state: IndicatorState::Cancelled,
                    started: None,
                    level: None,
                    can_stop: false,
                    cleanup: None,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_sits_at_the_bottom_centre() {
        let b = viewport_builder(Some(egui::vec2(1440.0, 900.0)), None);
        let pos = b.position.expect("a position");
        assert_eq!(pos.x, (1440.0 - SIZE.x) / 2.0);
        assert_eq!(pos.y, 900.0 - SIZE.y - BOTTOM_MARGIN);
        assert_eq!(b.title.as_deref(), Some(TITLE));
        assert_eq!(b.decorations, Some(false));
        assert_eq!(b.active, Some(false));
        assert_eq!(b.window_level, Some(egui::WindowLevel::AlwaysOnTop));
        // Unknown monitor: the platform places it.
        assert_eq!(viewport_builder(None, None).position, None);
        let at = egui::pos2(2240.0, 940.0);
        assert_eq!(
            viewport_builder(Some(egui::vec2(1440.0, 900.0)), Some(at)).position,
            Some(at)
        );
    }

    #[test]
    fn the_meter_maps_minus_60_to_0_db() {
        assert_eq!(level_fill(0.0), 0.0);
        assert_eq!(level_fill(1.0), 1.0);
        assert!((level_fill(0.031_622_8) - 0.5).abs() < 1e-3);
    }
}
