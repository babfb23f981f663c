//! A virtualized vertical list of rows of varying height.

use eframe::egui;

/// Row heights of a virtualized list: measured once a row was laid out, estimated before.
/// Reset when the width changes (wrapping changes every height).
#[derive(Debug, Default)]
pub(super) struct RowHeights {
    width: f32,
    heights: Vec<f32>,
}

/// How a virtual list scrolls and sizes itself.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ListOptions {
    /// Follow the end as rows are added while it is in view (a live transcript).
    pub stick_to_bottom: bool,
    /// As tall as its rows when they fit, instead of all the height there is.
    pub shrink_height: bool,
}

/// A vertical list of `count` rows of varying height where only the rows in the visible
/// viewport are laid out (and so exposed to accessibility); the others take their measured
/// or estimated height.
pub(super) fn virtual_rows(
    ui: &mut egui::Ui,
    count: usize,
    rows: &mut RowHeights,
    row: impl FnMut(&mut egui::Ui, usize),
) {
    virtual_rows_with(ui, count, rows, ListOptions::default(), row);
}

/// [`virtual_rows`] with its scrolling options. Rows added or removed at the end keep the
/// heights measured for the others; a new width re-estimates them all (wrapping changes).
pub(super) fn virtual_rows_with(
    ui: &mut egui::Ui,
    count: usize,
    rows: &mut RowHeights,
    options: ListOptions,
    mut row: impl FnMut(&mut egui::Ui, usize),
) {
    egui::ScrollArea::vertical()
        .stick_to_bottom(options.stick_to_bottom)
        .auto_shrink([false, options.shrink_height])
        .show_viewport(ui, |ui, viewport| {
            let width = ui.available_width();
            let estimate = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
            if (rows.width - width).abs() > 0.5 {
                rows.heights.clear();
                rows.width = width;
            }
            rows.heights.resize(count, estimate);
            // The window onto the rows. A scroll offset past the end (content shrank, or a
            // list following its end saw it move) shows the last screenful instead of an
            // empty view that would itself push the end further down.
            let total: f32 = rows.heights.iter().sum();
            let height = viewport.height();
            let start = viewport.min.y.min(total - height).max(0.0);
            let end = start + height;
            let mut first = 0;
            let mut y = 0.0;
            while first < count && y + rows.heights[first] <= start {
                y += rows.heights[first];
                first += 1;
            }
            let top = ui.max_rect().top();
            let visible = egui::Rect::from_min_size(
                egui::pos2(ui.max_rect().left(), top + y),
                egui::vec2(width, (end - y).max(0.0) + 1.0),
            );
            ui.scope_builder(egui::UiBuilder::new().max_rect(visible), |ui| {
                let mut i = first;
                while i < count && y < end {
                    let before = ui.cursor().top();
                    ui.push_id(i, |ui| row(ui, i));
                    let h = (ui.cursor().top() - before).max(1.0);
                    rows.heights[i] = h;
                    y += h;
                    i += 1;
                }
            });
            // The content is every row's height from the top, whatever was laid out. (Not
            // `set_min_height`: that counts from the first widget placed, which is the first
            // visible row, so the content grew by the scroll offset on every scroll.)
            let total: f32 = rows.heights.iter().sum();
            ui.expand_to_include_rect(egui::Rect::from_min_size(
                egui::pos2(ui.max_rect().left(), top),
                egui::vec2(width, total),
            ));
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The opened session's list lays out (and exposes to accessibility) only the rows in
    /// view, whatever the number of messages; scrolling brings later rows in.
    #[test]
    fn issue15_virtual_rows_lay_out_only_what_is_visible() {
        use egui_kittest::Harness;
        use egui_kittest::kittest::Queryable;
        let rows = std::cell::RefCell::new(RowHeights::default());
        let laid_out = std::cell::Cell::new(0usize);
        let mut harness = Harness::builder()
            .with_size(egui::vec2(400.0, 300.0))
            .build_ui(|ui| {
                laid_out.set(0);
                virtual_rows(ui, 2_000, &mut rows.borrow_mut(), |ui, i| {
                    laid_out.set(laid_out.get() + 1);
                    ui.label(format!("message number {i} with some text to wrap around"));
                });
            });
        harness.run();
        let exposed = harness
            .query_all_by_label_contains("message number")
            .count();
        assert!(exposed > 0 && exposed < 60, "{exposed} rows exposed");
        assert!(laid_out.get() < 60, "{} rows laid out", laid_out.get());
        assert!(
            harness
                .query_by_label_contains("message number 0 ")
                .is_some()
        );
        assert!(
            harness
                .query_by_label_contains("message number 1999 ")
                .is_none()
        );
        // Rows not laid out keep an estimated height: the list is as tall as all its rows.
        let rows = rows.borrow();
        let heights = &rows.heights;
        assert_eq!(heights.len(), 2_000);
        assert!(heights.iter().all(|&h| h > 1.0));
    }

    /// Scrolling a virtual list to its end shows its last rows, and no further: the content
    /// is the rows' height, not that plus the scroll offset. Before, each scroll grew the
    /// content by the offset (the height counted from the first visible row), so the view
    /// could be scrolled past the end into an empty list.
    #[test]
    fn issue15_10_scrolling_to_the_end_shows_the_last_rows() {
        use egui_kittest::Harness;
        use egui_kittest::kittest::Queryable;
        let rows = std::cell::RefCell::new(RowHeights::default());
        let mut harness = Harness::builder()
            .with_size(egui::vec2(400.0, 300.0))
            .build_ui(|ui| {
                virtual_rows(ui, 500, &mut rows.borrow_mut(), |ui, i| {
                    ui.label(format!("row number {i} of the list"));
                });
            });
        harness.run();
        for _ in 0..40 {
            harness.hover_at(egui::pos2(200.0, 150.0));
            harness.event(egui::Event::MouseWheel {
                unit: egui::MouseWheelUnit::Point,
                delta: egui::vec2(0.0, -2_000.0),
                phase: egui::TouchPhase::Move,
                source: egui::MouseWheelSource::Unknown,
                modifiers: egui::Modifiers::default(),
            });
            harness.step();
        }
        harness.run();
        assert!(
            harness.query_by_label_contains("row number 499 ").is_some(),
            "the last row is not shown at the end of the list"
        );
        assert!(harness.query_by_label_contains("row number 0 ").is_none());
    }
}
