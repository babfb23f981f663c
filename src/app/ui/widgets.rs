//! Small widgets shared by the pages.

use eframe::egui::{self, text::LayoutJob};

use super::style::{self, LABEL_WIDTH, space};

/// A form row: `label` in the label column, then the widget it names (for screen readers
/// and tests alike), which gets the rest of the row's width. Text fields should ask for
/// `desired_width(f32::INFINITY)`: they then end at the card's edge whatever the window's
/// width (a field never runs off the right edge).
pub(super) fn field(
    ui: &mut egui::Ui,
    label: &str,
    add: impl FnOnce(&mut egui::Ui) -> egui::Response,
) {
    row(ui, label, |ui, label_id| {
        add(ui).labelled_by(label_id);
    });
}

/// A form row whose right side is any content (radio groups, a checkbox with its note);
/// `add` gets the label's id to name its widgets by.
pub(super) fn row(ui: &mut egui::Ui, label: &str, add: impl FnOnce(&mut egui::Ui, egui::Id)) {
    ui.horizontal_top(|ui| {
        let width = LABEL_WIDTH.min(ui.available_width() * 0.36);
        let l = ui
            .allocate_ui_with_layout(
                egui::vec2(width, ui.spacing().interact_size.y),
                egui::Layout::top_down(egui::Align::Min),
                |ui| {
                    ui.set_width(width);
                    // Centred on the first line of the control beside it.
                    ui.add_space(3.0);
                    ui.add(egui::Label::new(label).wrap())
                },
            )
            .inner;
        ui.vertical(|ui| {
            ui.set_width(ui.available_width());
            add(ui, l.id);
        });
    });
}

/// A titled group of settings: the heading, then a card holding what `add` draws. The
/// Settings page is a column of these; a new group is one call.
pub(super) fn section<R>(
    ui: &mut egui::Ui,
    title: &str,
    add: impl FnOnce(&mut egui::Ui) -> R,
) -> R {
    ui.add_space(space::S);
    ui.label(style::heading(title));
    ui.add_space(space::XS);
    style::card(ui)
        .show(ui, |ui| {
            ui.set_width(ui.available_width());
            ui.spacing_mut().item_spacing.y = space::S;
            add(ui)
        })
        .inner
}

/// A size in whole MiB ("141 MiB").
pub(super) fn fmt_mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// `text` with every case-insensitive occurrence of `query` highlighted.
pub fn highlighted(text: &str, query: &str, visuals: &egui::Visuals) -> LayoutJob {
    let mut job = LayoutJob::default();
    let plain = egui::TextFormat {
        color: visuals.text_color(),
        ..Default::default()
    };
    let marked = egui::TextFormat {
        color: visuals.strong_text_color(),
        background: visuals.selection.bg_fill,
        ..Default::default()
    };
    for (range, hit) in match_ranges(text, query) {
        job.append(
            &text[range],
            0.0,
            if hit { marked.clone() } else { plain.clone() },
        );
    }
    job
}

/// Splits `text` into (byte range, is_match) runs for a case-insensitive literal `query`.
pub fn match_ranges(text: &str, query: &str) -> Vec<(std::ops::Range<usize>, bool)> {
    let q: Vec<char> = query.chars().flat_map(char::to_lowercase).collect();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut plain_start = 0;
    let mut i = 0;
    while !q.is_empty() && i < chars.len() {
        // Compare lowercased chars starting at i.
        let mut folded = Vec::with_capacity(q.len());
        let mut j = i;
        while j < chars.len() && folded.len() < q.len() {
            folded.extend(chars[j].1.to_lowercase());
            j += 1;
        }
        if folded == q {
            let start = chars[i].0;
            let end = chars.get(j).map_or(text.len(), |c| c.0);
            if plain_start < start {
                out.push((plain_start..start, false));
            }
            out.push((start..end, true));
            plain_start = end;
            i = j;
        } else {
            i += 1;
        }
    }
    if plain_start < text.len() {
        out.push((plain_start..text.len(), false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_ranges_are_case_insensitive_and_cover_the_text() {
        let r = match_ranges("Hello hello HELLO!", "hello");
        assert_eq!(
            r,
            vec![
                (0..5, true),
                (5..6, false),
                (6..11, true),
                (11..12, false),
                (12..17, true),
                (17..18, false)
            ]
        );
        assert_eq!(match_ranges("Straße", "STRASSE"), vec![(0..7, false)]);
        assert_eq!(
            match_ranges("ÄBC äbc", "äb"),
            vec![(0..3, true), (3..5, false), (5..8, true), (8..9, false)]
        );
        assert_eq!(match_ranges("abc", ""), vec![(0..3, false)]);
    }
}
