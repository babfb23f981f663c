//! A virtualized vertical list of rows of varying height.

use eframe::egui;

/// Row heights of a virtualized list: measured once a row was laid out, estimated before.
/// Reset when the width changes (wrapping changes every height).
#[derive(Debug, Default)]
pub(super) struct RowHeights {
    width: f32,
    heights: Vec<f32>,
}

/// A vertical list of `count` rows of varying height where only the rows in the visible
/// viewport are laid out (and so exposed to accessibility); the others take their measured
/// or estimated height.
pub(super) fn virtual_rows(
    ui: &mut egui::Ui,
    count: usize,
    rows: &mut RowHeights,
    mut row: impl FnMut(&mut egui::Ui, usize),
) {
    egui::ScrollArea::vertical()
        .auto_shrink([false, false])
        .show_viewport(ui, |ui, viewport| {
            let width = ui.available_width();
            let estimate = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
            if rows.heights.len() != count || (rows.width - width).abs() > 0.5 {
                rows.heights = vec![estimate; count];
                rows.width = width;
            }
            let mut first = 0;
            let mut y = 0.0;
            while first < count && y + rows.heights[first] <= viewport.min.y {
                y += rows.heights[first];
                first += 1;
            }
            let top = ui.max_rect().top();
            let visible = egui::Rect::from_min_size(
                egui::pos2(ui.max_rect().left(), top + y),
                egui::vec2(width, (viewport.max.y - y).max(0.0) + 1.0),
            );
            ui.scope_builder(egui::UiBuilder::new().max_rect(visible), |ui| {
                let mut i = first;
                while i < count && y < viewport.max.y {
                    let before = ui.cursor().top();
                    ui.push_id(i, |ui| row(ui, i));
                    let h = (ui.cursor().top() - before).max(1.0);
                    rows.heights[i] = h;
                    y += h;
                    i += 1;
                }
            });
            let total: f32 = rows.heights.iter().sum();
            ui.set_min_height(total);
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
}
