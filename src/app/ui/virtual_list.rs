//! A virtualized vertical list of rows of varying height.
//!
//! Only the rows in the viewport are laid out. Per frame the list costs the rows in view,
//! never the number of rows: the total height is kept as rows are measured, and the first
//! row in view is found from the last frame's. A list given a layout budget also bounds the
//! new text laid out in one frame: a fast scroll brings a screenful of rows never laid out
//! before, and shaping all of it at once was the slowest frame; rows over the budget keep
//! their height (one never measured: the mean of the measured rows) as blank space for a
//! frame (a repaint is asked) and are laid out next.

use eframe::egui;

/// Row heights of a virtualized list: measured once a row was laid out, estimated before.
/// Reset when the width changes (wrapping changes every height).
#[derive(Debug, Default)]
pub(super) struct RowHeights {
    width: f32,
    heights: Vec<f32>,
    /// The sum of `heights` (kept as they change: summing 150,000 rows each frame cost more
    /// than the frame's layout).
    total: f64,
    /// The first row laid out last frame and its top: where this frame's search starts.
    anchor: (usize, f64),
    /// The rows laid out last frame, with the cost they were laid out at (their text is in
    /// egui's layout cache, so laying them out again is cheap).
    laid: Vec<(usize, usize)>,
    /// The viewport's top and height last frame (to scroll a row into view).
    view: (f32, f32),
    /// Which rows were measured, and the sum of their heights: a row left for a later
    /// frame (over the budget) takes their mean, which is nearer than one line of text.
    measured: Vec<bool>,
    measured_sum: f64,
    measured_count: usize,
}

impl RowHeights {
    fn set(&mut self, i: usize, h: f32) {
        let change = f64::from(h) - f64::from(self.heights[i]);
        self.total += change;
        if self.measured[i] {
            self.measured_sum += change;
        }
        self.heights[i] = h;
    }

    fn resize(&mut self, count: usize, estimate: f32) {
        if count < self.heights.len() {
            for i in count..self.heights.len() {
                let h = f64::from(self.heights[i]);
                self.total -= h;
                if self.measured[i] {
                    self.measured_sum -= h;
                    self.measured_count -= 1;
                }
            }
        } else {
            self.total += f64::from(estimate) * (count - self.heights.len()) as f64;
        }
        self.heights.resize(count, estimate);
        self.measured.resize(count, false);
        if self.anchor.0 > count {
            self.anchor = (0, 0.0);
        }
    }

    fn clear(&mut self) {
        self.heights.clear();
        self.total = 0.0;
        self.anchor = (0, 0.0);
        self.laid.clear();
        self.measured.clear();
        self.measured_sum = 0.0;
        self.measured_count = 0;
    }

    fn measure(&mut self, i: usize, h: f32) {
        if !self.measured[i] {
            self.measured[i] = true;
            self.measured_sum += f64::from(self.heights[i]);
            self.measured_count += 1;
        }
        self.set(i, h);
    }

    /// A row not measured yet takes the mean height of the measured ones.
    fn estimate_from_measured(&mut self, i: usize) {
        if !self.measured[i] && self.measured_count > 0 {
            self.set(i, (self.measured_sum / self.measured_count as f64) as f32);
        }
    }

    /// The first row whose bottom is below `start`, and its top; walks from the last
    /// frame's first row (heights change only from it on, so its top is still right).
    fn first_at(&mut self, start: f64) -> (usize, f64) {
        let count = self.heights.len();
        let (mut first, mut y) = self.anchor;
        while first > 0 && y > start {
            first -= 1;
            y -= f64::from(self.heights[first]);
        }
        while first < count && y + f64::from(self.heights[first]) <= start {
            y += f64::from(self.heights[first]);
            first += 1;
        }
        (first, y.max(0.0))
    }
}

/// How a virtual list scrolls and sizes itself.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ListOptions {
    /// Follow the end as rows are added while it is in view (a live transcript).
    pub stick_to_bottom: bool,
    /// As tall as its rows when they fit, instead of all the height there is.
    pub shrink_height: bool,
    /// Scroll this row into view this frame (a keyboard selection).
    pub scroll_to: Option<usize>,
    /// At most this much new work (the row cost's unit, e.g. characters of text) is laid
    /// out in one frame, but always one new row; `None`: no limit.
    pub budget: Option<usize>,
}

/// A vertical list of `count` rows of varying height where only the rows in the visible
/// viewport are laid out (and so exposed to accessibility); the others take their measured
/// or estimated height. (The app's lists pass options: [`virtual_rows_with`].)
#[cfg(test)]
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
    row: impl FnMut(&mut egui::Ui, usize),
) {
    virtual_rows_budgeted(ui, count, rows, options, |_| 0, row);
}

/// [`virtual_rows_with`] where `cost(i)` is what laying out row `i` anew costs (bytes of
/// text), counted against [`ListOptions::budget`]; a row laid out last frame at the same
/// cost is free (its text is in egui's layout cache).
pub(super) fn virtual_rows_budgeted(
    ui: &mut egui::Ui,
    count: usize,
    rows: &mut RowHeights,
    options: ListOptions,
    cost: impl Fn(usize) -> usize,
    mut row: impl FnMut(&mut egui::Ui, usize),
) {
    let mut area = egui::ScrollArea::vertical()
        .stick_to_bottom(options.stick_to_bottom)
        .auto_shrink([false, options.shrink_height]);
    if let Some(i) = options.scroll_to.filter(|&i| i < rows.heights.len()) {
        let top: f32 = rows.heights[..i].iter().sum();
        let bottom = top + rows.heights[i];
        let (view_top, view_height) = rows.view;
        if top < view_top {
            area = area.vertical_scroll_offset(top);
        } else if bottom > view_top + view_height {
            area = area.vertical_scroll_offset((bottom - view_height).max(0.0));
        }
    }
    area.show_viewport(ui, |ui, viewport| {
        let width = ui.available_width();
        let estimate = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
        if (rows.width - width).abs() > 0.5 {
            rows.clear();
            rows.width = width;
        }
        rows.resize(count, estimate);
        // The window onto the rows. A scroll offset past the end (content shrank, or a
        // list following its end saw it move) shows the last screenful instead of an
        // empty view that would itself push the end further down.
        let height = viewport.height();
        let start = f64::from(viewport.min.y)
            .min(rows.total - f64::from(height))
            .max(0.0);
        let end = start + f64::from(height);
        rows.view = (start as f32, height);
        let (first, top_of_first) = rows.first_at(start);
        rows.anchor = (first, top_of_first);
        let mut y = top_of_first;
        let top = ui.max_rect().top();
        let visible = egui::Rect::from_min_size(
            egui::pos2(ui.max_rect().left(), top + y as f32),
            egui::vec2(width, (end - y).max(0.0) as f32 + 1.0),
        );
        let last_frame = std::mem::take(&mut rows.laid);
        let mut spent = 0usize;
        let mut deferred = false;
        ui.scope_builder(egui::UiBuilder::new().max_rect(visible), |ui| {
            let mut i = first;
            while i < count && y < end {
                let c = cost(i);
                let cached = last_frame.binary_search(&(i, c)).is_ok();
                let over = options
                    .budget
                    .is_some_and(|b| spent > 0 && spent.saturating_add(c) > b);
                if !cached && over {
                    // Laid out next frame; until then its space, so nothing moves.
                    rows.estimate_from_measured(i);
                    let gap = ui.spacing().item_spacing.y;
                    ui.allocate_space(egui::vec2(width, (rows.heights[i] - gap).max(0.0)));
                    deferred = true;
                } else {
                    if !cached {
                        spent = spent.saturating_add(c);
                    }
                    let before = ui.cursor().top();
                    ui.push_id(i, |ui| row(ui, i));
                    let h = (ui.cursor().top() - before).max(1.0);
                    if options.scroll_to == Some(i) {
                        // Its measured height may differ from the one scrolled to.
                        let left = ui.max_rect().left();
                        ui.scroll_to_rect(
                            egui::Rect::from_min_size(
                                egui::pos2(left, before),
                                egui::vec2(width, h),
                            ),
                            None,
                        );
                    }
                    rows.measure(i, h);
                    rows.laid.push((i, c));
                }
                y += f64::from(rows.heights[i]);
                i += 1;
            }
        });
        if deferred {
            ui.ctx().request_repaint();
        }
        // The content is every row's height from the top, whatever was laid out. (Not
        // `set_min_height`: that counts from the first widget placed, which is the first
        // visible row, so the content grew by the scroll offset on every scroll.)
        ui.expand_to_include_rect(egui::Rect::from_min_size(
            egui::pos2(ui.max_rect().left(), top),
            egui::vec2(width, rows.total as f32),
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
    fn issue15_15_scrolling_to_the_end_shows_the_last_rows() {
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
        // The kept total is the rows' heights summed.
        let rows = rows.borrow();
        let sum: f64 = rows.heights.iter().map(|&h| f64::from(h)).sum();
        assert!((rows.total - sum).abs() < 0.01, "{} vs {sum}", rows.total);
    }

    /// Scrolling back up finds the first row in view from the last frame's (walking back),
    /// not from the top: the first rows show again. And a list with a budget lays out one
    /// row a frame when every row costs more than it, then fills the view.
    #[test]
    fn scrolling_back_up_and_a_layout_budget() {
        use egui_kittest::Harness;
        use egui_kittest::kittest::Queryable;
        let rows = std::cell::RefCell::new(RowHeights::default());
        let laid_out = std::cell::Cell::new(0usize);
        let mut harness = Harness::builder()
            .with_size(egui::vec2(400.0, 300.0))
            .with_max_steps(100)
            .build_ui(|ui| {
                laid_out.set(0);
                let options = ListOptions {
                    budget: Some(10),
                    ..ListOptions::default()
                };
                let mut rows = rows.borrow_mut();
                virtual_rows_budgeted(
                    ui,
                    500,
                    &mut rows,
                    options,
                    |_| 8,
                    |ui, i| {
                        laid_out.set(laid_out.get() + 1);
                        ui.label(format!("row number {i} of the list"));
                    },
                );
            });
        // The rows of the frame before again (cheap), and one new row.
        let mut before = laid_out.get();
        for _ in 0..5 {
            harness.step();
            assert!(
                laid_out.get() <= before + 1,
                "{} after {before}",
                laid_out.get()
            );
            before = laid_out.get();
        }
        harness.run();
        assert!(harness.query_by_label_contains("row number 5 ").is_some());
        let wheel = |harness: &mut Harness<'_>, dy: f32| {
            for _ in 0..10 {
                harness.hover_at(egui::pos2(200.0, 150.0));
                harness.event(egui::Event::MouseWheel {
                    unit: egui::MouseWheelUnit::Point,
                    delta: egui::vec2(0.0, dy),
                    phase: egui::TouchPhase::Move,
                    source: egui::MouseWheelSource::Unknown,
                    modifiers: egui::Modifiers::default(),
                });
                harness.step();
            }
            harness.run();
        };
        wheel(&mut harness, -1_000.0);
        assert!(harness.query_by_label_contains("row number 0 ").is_none());
        wheel(&mut harness, 2_000.0);
        assert!(harness.query_by_label_contains("row number 0 ").is_some());
        let rows = rows.borrow();
        let sum: f64 = rows.heights.iter().map(|&h| f64::from(h)).sum();
        assert!((rows.total - sum).abs() < 0.01, "{} vs {sum}", rows.total);
        let measured: Vec<f64> = (0..500)
            .filter(|&i| rows.measured[i])
            .map(|i| f64::from(rows.heights[i]))
            .collect();
        assert_eq!(measured.len(), rows.measured_count);
        let sum: f64 = measured.iter().sum();
        assert!((rows.measured_sum - sum).abs() < 0.01);
    }
}
