//! The window's one visual language: a spacing scale, a type hierarchy, the colours of the
//! light and dark themes, and a few painted icons.
//!
//! [`install`] puts it on the context once (the shell calls it when the window is created;
//! tests, benches and the screenshot example call it the same way). The theme follows the
//! system's appearance (`ThemePreference::System`; eframe passes winit's theme in every
//! frame), and is light where the system says nothing (Linux without a desktop setting).
//! Pages use the names here — [`space`], [`title`], [`caption`], [`card`], [`Icon`] — rather
//! than numbers and colours of their own.
//!
//! Icons are painted with the `Painter` (no icon font): egui's default fonts lack most
//! symbols a Mac user knows (⏺, ⚙, a clipboard), and a painted icon scales with the text and
//! takes the widget's text colour. An icon is never the only label: buttons keep their
//! words, which are also what screen readers announce and what tests find them by.

use eframe::egui::{
    self, Color32, CornerRadius, FontFamily, FontId, Margin, Pos2, Rect, RichText, Stroke,
    TextStyle, Theme, ThemePreference, Vec2, epaint::PathShape, pos2, vec2,
};

/// The spacing scale, in points. Everything between widgets is one of these.
pub mod space {
    pub const XS: f32 = 4.0;
    pub const S: f32 = 8.0;
    pub const M: f32 = 12.0;
    pub const L: f32 = 16.0;
    pub const XL: f32 = 24.0;
    pub const XXL: f32 = 32.0;
}

/// The type hierarchy: title (a page's one big line), heading (a section), body, caption.
pub const TITLE_SIZE: f32 = 22.0;
pub const HEADING_SIZE: f32 = 15.0;
pub const BODY_SIZE: f32 = 13.5;
pub const CAPTION_SIZE: f32 = 11.5;

/// The width of a form row's label column (see `widgets::field`), at most.
pub const LABEL_WIDTH: f32 = 150.0;

/// The colours of one theme.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    /// The window background.
    pub window: Color32,
    /// A card (section, transcript) on the window.
    pub card: Color32,
    pub card_stroke: Color32,
    pub text: Color32,
    pub weak_text: Color32,
    /// Selection, focus, the selected tab.
    pub accent: Color32,
    /// The record control.
    pub record: Color32,
    pub warn: Color32,
    pub error: Color32,
    /// The level meter's track and the page switcher's background.
    pub track: Color32,
    /// The selected segment of the page switcher.
    pub segment: Color32,
}

impl Palette {
    pub fn of(theme: Theme) -> Palette {
        match theme {
            // macOS system colours (controlAccentColor blue, systemRed, …) for each appearance.
            Theme::Light => Palette {
                window: Color32::from_rgb(0xF2, 0xF2, 0xF4),
                card: Color32::WHITE,
                card_stroke: Color32::from_rgb(0xDD, 0xDD, 0xE1),
                text: Color32::from_rgb(0x1D, 0x1D, 0x1F),
                weak_text: Color32::from_rgb(0x6E, 0x6E, 0x73),
                accent: Color32::from_rgb(0x00, 0x7A, 0xFF),
                record: Color32::from_rgb(0xFF, 0x3B, 0x30),
                warn: Color32::from_rgb(0xB2, 0x5E, 0x00),
                error: Color32::from_rgb(0xD7, 0x00, 0x15),
                track: Color32::from_rgb(0xE3, 0xE3, 0xE8),
                segment: Color32::WHITE,
            },
            Theme::Dark => Palette {
                window: Color32::from_rgb(0x1E, 0x1E, 0x20),
                card: Color32::from_rgb(0x2A, 0x2A, 0x2D),
                card_stroke: Color32::from_rgb(0x3A, 0x3A, 0x3E),
                text: Color32::from_rgb(0xEC, 0xEC, 0xEE),
                weak_text: Color32::from_rgb(0x98, 0x98, 0x9F),
                accent: Color32::from_rgb(0x0A, 0x84, 0xFF),
                record: Color32::from_rgb(0xFF, 0x45, 0x3A),
                warn: Color32::from_rgb(0xFF, 0xB3, 0x40),
                error: Color32::from_rgb(0xFF, 0x6B, 0x60),
                track: Color32::from_rgb(0x3A, 0x3A, 0x3E),
                segment: Color32::from_rgb(0x5C, 0x5C, 0x61),
            },
        }
    }

    /// The palette of the theme `ui` is drawn in.
    pub fn current(ui: &egui::Ui) -> Palette {
        Palette::of(if ui.visuals().dark_mode {
            Theme::Dark
        } else {
            Theme::Light
        })
    }
}

/// Installs the style on `ctx`: both themes, following the system (light when unknown).
pub fn install(ctx: &egui::Context) {
    ctx.options_mut(|o| {
        o.theme_preference = ThemePreference::System;
        o.fallback_theme = Theme::Light;
    });
    for theme in [Theme::Light, Theme::Dark] {
        ctx.style_mut_of(theme, |style| apply(style, theme));
    }
}

/// Writes the visual language into one theme's `style`.
pub fn apply(style: &mut egui::Style, theme: Theme) {
    let p = Palette::of(theme);
    let prop = |size| FontId::new(size, FontFamily::Proportional);
    style.text_styles = [
        (TextStyle::Heading, prop(HEADING_SIZE)),
        (TextStyle::Body, prop(BODY_SIZE)),
        (TextStyle::Button, prop(BODY_SIZE)),
        (TextStyle::Small, prop(CAPTION_SIZE)),
        (
            TextStyle::Monospace,
            FontId::new(12.5, FontFamily::Monospace),
        ),
    ]
    .into();

    let s = &mut style.spacing;
    s.item_spacing = vec2(space::S, space::S);
    s.button_padding = vec2(10.0, 4.0);
    s.interact_size = vec2(40.0, 24.0);
    s.window_margin = Margin::same(space::L as i8);
    s.menu_margin = Margin::same(space::S as i8);
    s.indent = space::L;
    s.icon_spacing = 6.0;
    s.combo_width = 120.0;
    s.text_edit_width = 240.0;

    let v = &mut style.visuals;
    v.panel_fill = p.window;
    v.window_fill = p.card;
    v.window_stroke = Stroke::new(1.0, p.card_stroke);
    v.window_corner_radius = CornerRadius::same(12);
    v.menu_corner_radius = CornerRadius::same(8);
    v.override_text_color = None;
    v.weak_text_color = Some(p.weak_text);
    v.hyperlink_color = p.accent;
    v.warn_fg_color = p.warn;
    v.error_fg_color = p.error;
    v.extreme_bg_color = if theme == Theme::Dark {
        Color32::from_rgb(0x1A, 0x1A, 0x1C)
    } else {
        Color32::WHITE
    };
    v.faint_bg_color = p.track;
    v.selection.bg_fill = p
        .accent
        .gamma_multiply(if theme == Theme::Dark { 0.55 } else { 0.28 });
    v.selection.stroke = Stroke::new(1.0, p.accent);
    v.text_cursor.stroke = Stroke::new(2.0, p.accent);
    let radius = CornerRadius::same(6);
    let w = &mut v.widgets;
    for wv in [
        &mut w.noninteractive,
        &mut w.inactive,
        &mut w.hovered,
        &mut w.active,
        &mut w.open,
    ] {
        wv.corner_radius = radius;
    }
    w.noninteractive.fg_stroke = Stroke::new(1.0, p.text);
    w.noninteractive.bg_stroke = Stroke::new(1.0, p.card_stroke);
    w.inactive.fg_stroke = Stroke::new(1.0, p.text);
    w.inactive.bg_stroke = Stroke::new(1.0, p.card_stroke);
    w.hovered.fg_stroke = Stroke::new(1.5, p.text);
    w.hovered.bg_stroke = Stroke::new(1.0, p.accent.gamma_multiply(0.6));
    w.active.bg_stroke = Stroke::new(1.0, p.accent);
    w.open.bg_stroke = Stroke::new(1.0, p.accent);
    if theme == Theme::Light {
        // Buttons a little whiter than the window, as on macOS.
        w.inactive.weak_bg_fill = Color32::WHITE;
        w.inactive.bg_fill = Color32::from_rgb(0xE4, 0xE4, 0xE8);
        w.hovered.weak_bg_fill = Color32::from_rgb(0xF7, 0xF7, 0xF9);
        w.active.weak_bg_fill = Color32::from_rgb(0xE8, 0xE8, 0xEC);
    } else {
        w.inactive.weak_bg_fill = Color32::from_rgb(0x3A, 0x3A, 0x3E);
        w.inactive.bg_fill = Color32::from_rgb(0x4A, 0x4A, 0x4F);
        w.hovered.weak_bg_fill = Color32::from_rgb(0x46, 0x46, 0x4B);
        w.active.weak_bg_fill = Color32::from_rgb(0x52, 0x52, 0x57);
    }
}

/// A page's one big line.
pub fn title(text: impl Into<String>) -> RichText {
    // A size rather than a named text style: a context without this style installed
    // (tests that draw the UI on their own) still renders it.
    RichText::new(text).size(TITLE_SIZE).strong()
}

/// A section's name.
pub fn heading(text: impl Into<String>) -> RichText {
    RichText::new(text).heading().strong()
}

/// Secondary text: hints, paths, notes.
pub fn caption(text: impl Into<String>) -> RichText {
    RichText::new(text).small().weak()
}

/// The window's frame: the window colour, the page margin.
pub fn page(style: &egui::Style) -> egui::Frame {
    egui::Frame::new()
        .fill(style.visuals.panel_fill)
        .inner_margin(Margin::symmetric(space::L as i8, space::M as i8))
}

/// The frame of a card: sections of Settings, the transcript.
pub fn card(ui: &egui::Ui) -> egui::Frame {
    let p = Palette::current(ui);
    egui::Frame::new()
        .fill(p.card)
        .stroke(Stroke::new(1.0, p.card_stroke))
        .corner_radius(CornerRadius::same(10))
        .inner_margin(Margin::symmetric(space::M as i8, space::M as i8))
}

/// The painted icons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icon {
    Microphone,
    Search,
    Gear,
    Copy,
    Trash,
    Retry,
    Check,
    Back,
    /// ✕ (cancel).
    Close,
}

/// `icon` as a button atom of the text's height, painted in the button's text colour.
pub fn icon<'a>(icon: Icon) -> egui::Atom<'a> {
    egui::Atom::paint(Vec2::splat(15.0), move |ui, args| {
        paint_icon(ui.painter(), icon, args.rect, args.fallback_text_color);
    })
}

/// A small frameless button showing only `icon`; `label` is its accessible name (what
/// screen readers say and tests click) and its tooltip.
pub fn icon_only_button(ui: &mut egui::Ui, kind: Icon, label: &str) -> egui::Response {
    let response = ui.add(
        egui::Button::new(icon(kind))
            .frame_when_inactive(false)
            .min_size(Vec2::splat(22.0)),
    );
    let enabled = ui.is_enabled();
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, enabled, label));
    response.on_hover_text(label)
}

/// The page's primary action: white on the accent colour, as a macOS default button.
pub fn primary_button<'a>(ui: &egui::Ui, kind: Icon, label: &str) -> egui::Button<'a> {
    let white = Color32::WHITE;
    let atom = egui::Atom::paint(Vec2::splat(15.0), move |ui, args| {
        paint_icon(ui.painter(), kind, args.rect, white);
    });
    egui::Button::new((atom, RichText::new(label).color(white)))
        .fill(Palette::current(ui).accent)
        .stroke(Stroke::NONE)
}

/// A button with `icon` before `label` (the label is what it is called).
pub fn icon_button<'a>(kind: Icon, label: impl Into<egui::WidgetText>) -> egui::Button<'a> {
    egui::Button::new((icon(kind), label.into()))
}

/// Paints `icon` in `rect` (square is best) with `color`.
pub fn paint_icon(painter: &egui::Painter, icon: Icon, rect: Rect, color: Color32) {
    let c = rect.center();
    let r = rect.width().min(rect.height()) / 2.0;
    let stroke = Stroke::new((r * 0.18).max(1.2), color);
    let at = |x: f32, y: f32| pos2(c.x + x * r, c.y + y * r);
    match icon {
        Icon::Microphone => {
            let capsule = Rect::from_min_max(at(-0.38, -0.95), at(0.38, 0.25));
            painter.rect_stroke(
                capsule,
                CornerRadius::same((0.38 * r) as u8),
                stroke,
                egui::StrokeKind::Middle,
            );
            painter.add(PathShape::line(
                arc(c, 0.68 * r, 0.0, 180.0, -0.1 * r),
                stroke,
            ));
            painter.line_segment([at(0.0, 0.6), at(0.0, 0.95)], stroke);
            painter.line_segment([at(-0.35, 0.95), at(0.35, 0.95)], stroke);
        }
        Icon::Search => {
            painter.circle_stroke(at(-0.18, -0.18), 0.55 * r, stroke);
            painter.line_segment(
                [at(0.24, 0.24), at(0.85, 0.85)],
                Stroke::new(stroke.width * 1.4, color),
            );
        }
        Icon::Gear => {
            painter.circle_stroke(c, 0.52 * r, stroke);
            painter.circle_stroke(c, 0.18 * r, stroke);
            let teeth = Stroke::new(stroke.width * 1.6, color);
            for i in 0..8 {
                let a = i as f32 * std::f32::consts::TAU / 8.0;
                let (s, co) = a.sin_cos();
                painter.line_segment(
                    [
                        pos2(c.x + co * 0.6 * r, c.y + s * 0.6 * r),
                        pos2(c.x + co * 0.92 * r, c.y + s * 0.92 * r),
                    ],
                    teeth,
                );
            }
        }
        Icon::Copy => {
            let back = Rect::from_min_max(at(-0.8, -0.8), at(0.3, 0.4));
            let front = Rect::from_min_max(at(-0.3, -0.3), at(0.8, 0.9));
            let radius = CornerRadius::same((0.2 * r) as u8);
            painter.rect_stroke(back, radius, stroke, egui::StrokeKind::Middle);
            painter.rect_filled(front, radius, painter_bg(painter));
            painter.rect_stroke(front, radius, stroke, egui::StrokeKind::Middle);
        }
        Icon::Trash => {
            painter.line_segment([at(-0.8, -0.6), at(0.8, -0.6)], stroke);
            painter.line_segment([at(-0.25, -0.6), at(-0.2, -0.85)], stroke);
            painter.line_segment([at(0.25, -0.6), at(0.2, -0.85)], stroke);
            painter.line_segment([at(-0.2, -0.85), at(0.2, -0.85)], stroke);
            painter.add(PathShape::line(
                vec![at(-0.6, -0.6), at(-0.48, 0.9), at(0.48, 0.9), at(0.6, -0.6)],
                stroke,
            ));
        }
        Icon::Retry => {
            // A circular arrow, open at the top right, the head at its end.
            let points = arc(c, 0.7 * r, -40.0, 250.0, 0.0);
            if let [.., before, end] = points[..] {
                let dir = (end - before).normalized();
                let side = vec2(-dir.y, dir.x);
                let back = end - dir * 0.45 * r;
                painter.add(PathShape::line(
                    vec![back + side * 0.35 * r, end, back - side * 0.35 * r],
                    stroke,
                ));
            }
            painter.add(PathShape::line(points, stroke));
        }
        Icon::Check => {
            painter.add(PathShape::line(
                vec![at(-0.75, 0.05), at(-0.25, 0.55), at(0.8, -0.55)],
                Stroke::new(stroke.width * 1.2, color),
            ));
        }
        Icon::Back => {
            painter.add(PathShape::line(
                vec![at(0.3, -0.7), at(-0.4, 0.0), at(0.3, 0.7)],
                Stroke::new(stroke.width * 1.2, color),
            ));
        }
        Icon::Close => {
            let s = Stroke::new(stroke.width * 1.2, color);
            painter.line_segment([at(-0.55, -0.55), at(0.55, 0.55)], s);
            painter.line_segment([at(0.55, -0.55), at(-0.55, 0.55)], s);
        }
    }
}

/// The fill behind an icon (to hide what a filled shape covers).
fn painter_bg(painter: &egui::Painter) -> Color32 {
    let v = &painter.ctx().global_style().visuals;
    v.widgets.inactive.weak_bg_fill
}

/// Points on a circle around `c` of radius `r` from `from_deg` to `to_deg` (0° = right,
/// clockwise, screen coordinates), shifted down by `dy`.
fn arc(c: Pos2, r: f32, from_deg: f32, to_deg: f32, dy: f32) -> Vec<Pos2> {
    let steps = 24;
    (0..=steps)
        .map(|i| {
            let a = (from_deg + (to_deg - from_deg) * i as f32 / steps as f32).to_radians();
            pos2(c.x + r * a.cos(), c.y + dy + r * a.sin())
        })
        .collect()
}

/// The big round Start/Stop control of the Dictation page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFace {
    /// A red dot: click to start.
    Start,
    /// A square: click to stop.
    Stop,
    /// Greyed: connecting or finishing.
    Busy,
}

/// Diameter of the record control.
pub const RECORD_SIZE: f32 = 84.0;

/// The record control: a round button labelled `label` (what screen readers say and tests
/// click); `level` (0…1) draws a halo while recording. `disabled`: why it cannot be pressed
/// now, which becomes its tooltip and its accessible description.
pub fn record_button(
    ui: &mut egui::Ui,
    face: RecordFace,
    label: &str,
    level: Option<f32>,
    disabled: Option<&str>,
) -> egui::Response {
    let enabled = face != RecordFace::Busy && disabled.is_none();
    let halo = 10.0;
    let (rect, response) = ui.allocate_exact_size(
        Vec2::splat(RECORD_SIZE + 2.0 * halo),
        if enabled {
            egui::Sense::click()
        } else {
            egui::Sense::hover()
        },
    );
    let label = label.to_owned();
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, enabled, &label));
    if let Some(reason) = disabled {
        ui.ctx().accesskit_node_builder(response.id, |node| {
            node.set_description(reason.to_owned());
        });
    }
    if ui.is_rect_visible(rect) {
        let p = Palette::current(ui);
        let painter = ui.painter();
        let c = rect.center();
        let r = RECORD_SIZE / 2.0;
        if let Some(level) = level {
            let grow = halo * level.clamp(0.0, 1.0);
            painter.circle_filled(c, r + grow, p.record.gamma_multiply(0.22));
        }
        let hovered = response.hovered() && enabled;
        let ring = if enabled { p.record } else { p.weak_text };
        painter.circle_filled(c, r, p.card);
        painter.circle_stroke(c, r - 1.5, Stroke::new(3.0, ring.gamma_multiply(0.9)));
        let inner = if hovered {
            ring.gamma_multiply(0.85)
        } else {
            ring
        };
        match face {
            RecordFace::Start => {
                painter.circle_filled(c, r * 0.62, inner);
            }
            RecordFace::Stop => {
                painter.rect_filled(
                    Rect::from_center_size(c, Vec2::splat(r * 0.78)),
                    CornerRadius::same(6),
                    inner,
                );
            }
            RecordFace::Busy => {
                // Three dots: working.
                for dx in [-1.0, 0.0, 1.0] {
                    painter.circle_filled(pos2(c.x + dx * r * 0.34, c.y), r * 0.1, inner);
                }
            }
        }
        if response.has_focus() {
            painter.circle_stroke(c, r + 3.0, Stroke::new(2.0, p.accent));
        }
    }
    match disabled {
        Some(reason) => response.on_hover_text(reason),
        None => response.on_hover_cursor(egui::CursorIcon::PointingHand),
    }
}

/// The input level meter: `level` is the RMS (0…1) of the last 100 ms, drawn on a
/// −60…0 dB scale as a row of bars. Exposed to accessibility as a progress indicator.
pub fn level_meter(ui: &mut egui::Ui, level: f32, width: f32) -> egui::Response {
    let db = 20.0 * level.max(1e-6).log10();
    let fill = ((db + 60.0) / 60.0).clamp(0.0, 1.0);
    let (rect, response) = ui.allocate_exact_size(vec2(width, 14.0), egui::Sense::hover());
    response.widget_info(|| {
        let mut info =
            egui::WidgetInfo::labeled(egui::Role::ProgressIndicator, true, "Input level");
        info.value = Some(f64::from(fill));
        info
    });
    if ui.is_rect_visible(rect) {
        let p = Palette::current(ui);
        let bars = 24;
        let gap = 2.0;
        let bar_w = (rect.width() - gap * (bars - 1) as f32) / bars as f32;
        let lit = (fill * bars as f32).round() as usize;
        for i in 0..bars {
            let x = rect.left() + i as f32 * (bar_w + gap);
            // Taller towards the loud end, as a meter is read.
            let h = rect.height() * (0.45 + 0.55 * i as f32 / (bars - 1) as f32);
            let bar =
                Rect::from_min_max(pos2(x, rect.bottom() - h), pos2(x + bar_w, rect.bottom()));
            let color = if i < lit {
                if i as f32 >= bars as f32 * 0.85 {
                    p.record
                } else {
                    p.accent
                }
            } else {
                p.track
            };
            ui.painter().rect_filled(bar, CornerRadius::same(1), color);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_themes_get_the_type_scale_and_the_window_colour() {
        let ctx = egui::Context::default();
        install(&ctx);
        for theme in [Theme::Light, Theme::Dark] {
            let style = ctx.style_of(theme);
            assert_eq!(style.text_styles[&TextStyle::Heading].size, HEADING_SIZE);
            assert_eq!(style.text_styles[&TextStyle::Body].size, BODY_SIZE);
            assert_eq!(style.visuals.panel_fill, Palette::of(theme).window);
            assert_eq!(style.visuals.dark_mode, theme == Theme::Dark);
        }
        assert_eq!(ctx.options(|o| o.theme_preference), ThemePreference::System);
    }

    #[test]
    fn text_on_both_themes_has_contrast() {
        // WCAG relative luminance contrast of body and caption text on window and card.
        fn lum(c: Color32) -> f32 {
            let f = |v: u8| {
                let v = f32::from(v) / 255.0;
                if v <= 0.03928 {
                    v / 12.92
                } else {
                    ((v + 0.055) / 1.055).powf(2.4)
                }
            };
            0.2126 * f(c.r()) + 0.7152 * f(c.g()) + 0.0722 * f(c.b())
        }
        fn contrast(a: Color32, b: Color32) -> f32 {
            let (x, y) = (lum(a), lum(b));
            (x.max(y) + 0.05) / (x.min(y) + 0.05)
        }
        for theme in [Theme::Light, Theme::Dark] {
            let p = Palette::of(theme);
            for bg in [p.window, p.card] {
                assert!(contrast(p.text, bg) >= 7.0, "{theme:?} body text");
                assert!(contrast(p.weak_text, bg) >= 4.5, "{theme:?} caption text");
                assert!(contrast(p.warn, bg) >= 3.0, "{theme:?} warning");
                assert!(contrast(p.error, bg) >= 4.5, "{theme:?} error");
            }
        }
    }
}
