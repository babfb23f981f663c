//! Small widgets shared by the pages.

use eframe::egui::{self, text::LayoutJob};

/// A grid row: a label and the widget it names (for screen readers and tests alike).
pub(super) fn field(
    ui: &mut egui::Ui,
    label: &str,
    add: impl FnOnce(&mut egui::Ui) -> egui::Response,
) {
    let l = ui.label(label);
    add(ui).labelled_by(l.id);
    ui.end_row();
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
