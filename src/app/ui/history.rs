//! The Search page: search-as-you-type over saved sessions and the read-only opened session.

use super::*;

impl PersykUi {
    pub(super) fn run_search(&mut self) {
        self.search.generation += 1;
        self.search.waiting = true;
        let command = Command::Search {
            query: self.search.query.clone(),
            generation: self.search.generation,
            after: None,
        };
        self.send(command);
    }

    pub(super) fn more_results(&mut self) {
        let Some(after) = self.search.results.as_ref().and_then(|r| r.next.clone()) else {
            return;
        };
        self.search.waiting = true;
        let command = Command::Search {
            query: self.search.query.clone(),
            generation: self.search.generation,
            after: Some(after),
        };
        self.send(command);
    }

    /// Asks for the pages in view that are neither loaded nor asked for, and drops loaded
    /// pages more than [`PAGES_KEPT`] pages away from the view.
    pub(super) fn show_pages(&mut self, first: usize, last: usize) {
        let Some(pages) = self.search.opened.as_ref().and_then(|o| o.pages.clone()) else {
            return;
        };
        let margin = PAGES_KEPT * MAX_PAGE;
        self.search
            .opened_pages
            .retain(|&s, _| s + margin >= first && s <= last + margin);
        let mut start = first;
        while start <= last {
            if !self.search.opened_pages.contains_key(&start)
                && !self.search.pages_asked.contains(&start)
            {
                let asked = self.backend.send(Command::ReadPage {
                    pages: pages.clone(),
                    generation: self.search.open_generation,
                    start,
                });
                // A busy backend: asked again next frame.
                if asked.is_ok() {
                    self.search.pages_asked.insert(start);
                }
            }
            start += MAX_PAGE;
        }
    }

    pub(super) fn search_page(&mut self, ui: &mut egui::Ui) {
        let mut actions = Vec::new();
        let recording = self.is_recording();
        if let Some(opened) = &self.search.opened {
            let rows = &mut self.search.opened_rows;
            let pages = &self.search.opened_pages;
            opened_session(ui, opened, pages, rows, recording, &mut actions);
            self.pending.extend(actions);
            return;
        }
        let response = ui
            .horizontal(|ui| {
                let l = ui.label("Search history");
                ui.add(
                    egui::TextEdit::singleline(&mut self.search.query)
                        .hint_text("words from any saved session")
                        .desired_width(f32::INFINITY),
                )
                .labelled_by(l.id)
            })
            .inner;
        if response.changed() {
            self.search.edited_at = Some(Instant::now());
        }
        if let Some((text, error)) = &self.search.message {
            let color = if *error {
                ui.visuals().error_fg_color
            } else {
                ui.visuals().weak_text_color()
            };
            ui.colored_label(color, text);
        }
        if self.search.waiting || self.search.edited_at.is_some() {
            ui.label(RichText::new("Searching…").weak());
        }
        if self.search.opening {
            ui.label(RichText::new("Opening…").weak());
        }
        let Some(results) = &self.search.results else {
            self.pending.extend(actions);
            return;
        };
        for d in &results.root_diagnostics {
            ui.colored_label(ui.visuals().warn_fg_color, format!("Root problem: {d}"));
        }
        if let Some(code) = results.error {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!("Invalid query ({code})"),
            );
        }
        if !results.skipped.is_empty() {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                format!("{} session(s) could not be searched", results.skipped.len()),
            );
        }
        if results.rows.is_empty() && results.error.is_none() {
            ui.label(if self.search.query.trim().is_empty() {
                "No sessions yet."
            } else {
                "No matches."
            });
        }
        let query = self.search.query.trim().to_owned();
        egui::ScrollArea::vertical().show(ui, |ui| {
            for (i, row) in results.rows.iter().enumerate() {
                ui.push_id(i, |ui| result_row(ui, row, &query, &mut actions));
                ui.separator();
            }
            if results.next.is_some()
                && ui
                    .add_enabled(!self.search.waiting, egui::Button::new("More results"))
                    .clicked()
            {
                actions.push(Action::MoreResults);
            }
        });
        self.pending.extend(actions);
    }
}

pub(super) fn result_row(
    ui: &mut egui::Ui,
    row: &ResultRow,
    query: &str,
    actions: &mut Vec<Action>,
) {
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(&row.label).strong());
        if let Some(created) = &row.created {
            ui.label(RichText::new(short_date(created)).weak());
        }
        if row.duplicate_of.is_some() {
            ui.label(RichText::new("duplicate id").color(ui.visuals().warn_fg_color))
                .on_hover_text("Another folder holds a session with the same id");
        }
        if row.needs_recovery {
            ui.label(RichText::new("needs recovery").color(ui.visuals().warn_fg_color));
        } else if let Some(code) = row.diagnostic {
            ui.label(RichText::new(code).color(ui.visuals().warn_fg_color));
        }
    });
    if let Some(excerpt) = &row.excerpt {
        ui.label(highlighted(excerpt, query, ui.visuals()));
    }
    ui.horizontal(|ui| {
        if ui.button("Open").clicked() {
            actions.push(Action::Open(row.clone()));
        }
        if row.needs_recovery && ui.button("Recover").clicked() {
            actions.push(Action::Recover(row.location.clone()));
        }
    });
}

/// Loaded pages kept on either side of the ones in view.
pub(super) const PAGES_KEPT: usize = 2;

pub(super) fn opened_session(
    ui: &mut egui::Ui,
    opened: &OpenedSession,
    pages: &BTreeMap<usize, Vec<OpenedMessage>>,
    rows: &mut RowHeights,
    recording: bool,
    actions: &mut Vec<Action>,
) {
    let total = opened.pages.as_ref().map_or(0, |p| p.total);
    ui.horizontal(|ui| {
        if ui.button("Back to results").clicked() {
            actions.push(Action::CloseOpened);
        }
        // The backend reads the text page by page, only when asked.
        if total > 0 && ui.button("Copy all").clicked() {
            actions.push(Action::CopyAll);
        }
        for wav in &opened.retranscribable {
            if ui
                .add_enabled(!recording, egui::Button::new("Transcribe again"))
                .clicked()
            {
                actions.push(Action::TranscribeAgain(wav.clone()));
            }
        }
    });
    ui.label(
        RichText::new(format!(
            "{} (read-only, at leaf {})",
            opened.location.display(),
            opened.leaf.as_deref().unwrap_or("none")
        ))
        .small()
        .weak(),
    );
    if total == 0 {
        ui.label("No messages.");
    }
    let mut shown: Option<(usize, usize)> = None;
    virtual_rows(ui, total, rows, |ui, i| {
        let start = i - i % MAX_PAGE;
        shown = Some(shown.map_or((start, start), |(a, b)| (a.min(start), b.max(start))));
        let Some(m) = pages.get(&start).and_then(|p| p.get(i - start)) else {
            ui.label(RichText::new("…").weak());
            return;
        };
        ui.horizontal_wrapped(|ui| {
            if m.role != "user" {
                ui.label(RichText::new(format!("{}:", m.role)).weak());
            }
            ui.label(&m.text);
            if ui.small_button("Copy").clicked() {
                actions.push(Action::Copy(m.text.clone()));
            }
        });
    });
    if let Some((first, last)) = shown {
        actions.push(Action::ShowPages(first, last));
    }
}

/// `2026-11-30T22:30:20.123Z` → `2026-11-30 22:30`.
pub(super) fn short_date(created: &str) -> String {
    match (created.get(..10), created.get(11..16)) {
        (Some(d), Some(t)) => format!("{d} {t}"),
        _ => created.to_owned(),
    }
}
