//! The Search page: search-as-you-type over saved sessions and the read-only opened session.
//!
//! Keyboard-first: the field has focus when the page opens and on ⌘F / Ctrl+F; ↑/↓ move a
//! selection through the rows (highlighted, scrolled into view), Enter opens it, ⌘C /
//! Ctrl+C copies its surviving text (unless the field has a text selection), Esc clears the
//! query or leaves an opened session. Rows are grouped under local-day headers ("Today",
//! "Yesterday", then dates), each with its local time, its recording length and a Copy
//! button that copies without opening. Times are formatted when an answer arrives
//! ([`RowTime`]), never per frame.

use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime, UtcOffset};

use super::*;
use eframe::egui::{Key, Modifiers};

impl PersykUi {
    /// A deleted session leaves the list and, if it was open, the opened view.
    pub(super) fn forget_session(&mut self, session: &std::path::Path) {
        if let Some(results) = &mut self.search.results
            && let Some(i) = results.rows.iter().position(|r| r.location == session)
        {
            results.rows.remove(i);
            if i < self.search.times.len() {
                self.search.times.remove(i);
            }
            self.search.selected = None;
            self.search.result_rows = RowHeights::default();
        }
        if self
            .search
            .opened
            .as_ref()
            .is_some_and(|o| o.location == session)
        {
            self.stop_playback();
            self.search.opened = None;
            self.search.opened_pages.clear();
            self.search.pages_asked.clear();
        }
    }

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

    /// The window's keyboard shortcuts for history, handled before any page is drawn (so
    /// the search field never sees the keys it would otherwise take): ⌘F / Ctrl+F from
    /// anywhere; on the Search page ↑/↓ (selection), Enter (open), ⌘C / Ctrl+C (copy the
    /// selected row unless the field has a text selection) and Esc (clear the query, or
    /// back to the results from an opened session).
    pub(super) fn history_keys(&mut self, ctx: &egui::Context) {
        if ctx.input_mut(|i| i.consume_key(Modifiers::COMMAND, Key::F)) {
            if self.page != Page::Search {
                self.show_page(Page::Search);
            }
            self.pending.push(Action::CloseOpened);
            self.search.focus_query = true;
            return;
        }
        if self.page != Page::Search {
            return;
        }
        if self.search.opened.is_some() {
            if ctx.input_mut(|i| i.consume_key(Modifiers::NONE, Key::Escape)) {
                self.pending.push(Action::CloseOpened);
                self.search.focus_query = true;
            }
            return;
        }
        if ctx.input_mut(|i| i.consume_key(Modifiers::NONE, Key::Escape)) {
            // egui drops the focus on Esc: the field keeps it here.
            self.search.focus_query = true;
            if !self.search.query.is_empty() {
                self.search.query.clear();
                self.search.edited_at = None;
                self.run_search();
            }
        }
        let count = self.search.results.as_ref().map_or(0, |r| r.rows.len());
        // With a button or another widget focused, the keys are egui's (focus moves,
        // Enter presses the button).
        let free = ctx.memory(|m| m.focused().is_none_or(|id| id == query_id()));
        if count == 0 || !free {
            return;
        }
        let (down, up) = ctx.input_mut(|i| {
            (
                i.consume_key(Modifiers::NONE, Key::ArrowDown),
                i.consume_key(Modifiers::NONE, Key::ArrowUp),
            )
        });
        if down || up {
            let next = match (self.search.selected, down) {
                (None, _) => 0,
                (Some(i), true) => (i + 1).min(count - 1),
                (Some(i), false) => i.saturating_sub(1),
            };
            self.search.selected = Some(next);
            self.search.scroll_to_selected = true;
        }
        let Some(row) = self
            .search
            .selected
            .and_then(|i| self.search.results.as_ref()?.rows.get(i))
            .cloned()
        else {
            return;
        };
        if ctx.input_mut(|i| i.consume_key(Modifiers::NONE, Key::Enter)) {
            self.pending.push(Action::Open(row));
            return;
        }
        // Text selected in the field or in a label is the user's to copy (egui's own copy).
        if !query_has_selection(ctx) && !label_has_selection(ctx) && take_copy(ctx) {
            self.pending.push(Action::CopyRow(row));
        }
    }

    pub(super) fn search_page(&mut self, ui: &mut egui::Ui) {
        let mut actions = Vec::new();
        let recording = self.is_recording();
        let clean_up_set = self.settings.cleanup.is_active();
        let position = self.playback_position();
        if let Some(opened) = &self.search.opened {
            let rows = &mut self.search.opened_rows;
            let pages = &self.search.opened_pages;
            let state = OpenedState {
                recording,
                clean_up_set,
                playing: self.playback.as_ref().map(|p| &p.key),
                position: position.as_deref(),
            };
            // When it was recorded and for how long, from the row it was opened from.
            if let Some(row) = self
                .search
                .opened_from
                .as_ref()
                .filter(|r| r.location == opened.location)
            {
                let t = RowTime::of(row);
                let today = local_date(OffsetDateTime::now_utc());
                let mut line = t.day_label(today);
                if let Some(time) = &t.time {
                    line.push_str(&format!(", {time}"));
                }
                if let Some(d) = &t.duration {
                    line.push_str(&format!(" · {d} recorded"));
                }
                ui.label(RichText::new(line).strong());
            }
            if let Some((sentence, code)) = &self.playback_note {
                ui.colored_label(ui.visuals().error_fg_color, *sentence);
                super::onboarding::details_ui(ui, code);
            }
            opened_session(ui, opened, pages, rows, state, &mut actions);
            self.pending.extend(actions);
            return;
        }
        let response = ui
            .horizontal(|ui| {
                let l = ui.label("Search history");
                ui.add(
                    egui::TextEdit::singleline(&mut self.search.query)
                        .id(query_id())
                        .hint_text("words from any saved session")
                        .desired_width(f32::INFINITY),
                )
                .labelled_by(l.id)
            })
            .inner;
        if std::mem::take(&mut self.search.focus_query) {
            response.request_focus();
        }
        if response.changed() {
            self.search.edited_at = Some(Instant::now());
            self.search.selected = None;
        }
        if let Some((text, error)) = &self.search.message {
            let color = if *error {
                ui.visuals().error_fg_color
            } else {
                ui.visuals().weak_text_color()
            };
            ui.colored_label(color, text);
            if let (true, Some(code)) = (*error, &self.search.details) {
                super::onboarding::details_ui(ui, code);
            }
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
            let color = ui.visuals().warn_fg_color;
            super::onboarding::coded_sentence_ui(ui, "History folder: ", d, color);
        }
        if let Some(code) = results.error {
            ui.colored_label(
                ui.visuals().error_fg_color,
                "This search cannot be run: try other words.",
            );
            super::onboarding::details_ui(ui, code);
        }
        if !results.skipped.is_empty() {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                format!("{} session(s) could not be searched", results.skipped.len()),
            );
        }
        // Older versions left a session per failed start: one action clears those (the
        // backend deletes only sessions without a message and without audio).
        if self.search.query.trim().is_empty()
            && results
                .rows
                .iter()
                .any(|r| r.duration_ms.unwrap_or(0) == 0 && r.diagnostic.is_none())
            && ui
                .button("Remove empty sessions")
                .on_hover_text("Delete every session that holds no words and no audio")
                .clicked()
        {
            actions.push(Action::DeleteEmpty);
        }
        if results.rows.is_empty() && results.error.is_none() {
            ui.label(if self.search.query.trim().is_empty() {
                "No sessions yet."
            } else {
                "No matches."
            });
        }
        let query = self.search.query.trim().to_owned();
        let today = local_date(OffsetDateTime::now_utc());
        let selected = self.search.selected;
        let scroll = std::mem::take(&mut self.search.scroll_to_selected);
        let times = &self.search.times;
        let waiting = self.search.waiting;
        // One row per result, then "More results" when there are more: only the rows in
        // view are laid out (a page of 500 results laid out every row every frame).
        let count = results.rows.len() + usize::from(results.next.is_some());
        let options = ListOptions {
            shrink_height: true,
            scroll_to: selected.filter(|_| scroll),
            ..ListOptions::default()
        };
        let heights = &mut self.search.result_rows;
        virtual_rows_with(ui, count, heights, options, |ui, i| {
            let Some(row) = results.rows.get(i) else {
                if ui
                    .add_enabled(!waiting, egui::Button::new("More results"))
                    .clicked()
                {
                    actions.push(Action::MoreResults);
                }
                return;
            };
            let time = times.get(i);
            let day = time.and_then(|t| t.day);
            // A day's header above its first row.
            let previous_day = i.checked_sub(1).map(|p| times.get(p).and_then(|t| t.day));
            if previous_day != Some(day) {
                let header = time.map_or_else(|| "No date".to_owned(), |t| t.day_label(today));
                ui.add_space(4.0);
                ui.label(RichText::new(header).strong());
            }
            let is_selected = selected == Some(i);
            let frame = egui::Frame::new()
                .inner_margin(egui::Margin::symmetric(4, 2))
                .corner_radius(4.0)
                .fill(if is_selected {
                    ui.visuals().selection.bg_fill.gamma_multiply(0.35)
                } else {
                    Color32::TRANSPARENT
                });
            frame.show(ui, |ui| {
                // A list item that says whether it is the selected one, so a screen reader
                // announces the selection the highlight shows (its widgets are its children).
                ui.ctx().accesskit_node_builder(ui.unique_id(), |node| {
                    node.set_role(egui::accesskit::Role::ListItem);
                    node.set_selected(is_selected);
                });
                ui.set_width(ui.available_width());
                result_row(ui, row, time, &query, &mut actions);
            });
            ui.separator();
        });
        self.pending.extend(actions);
    }

    /// Keeps [`SearchState::times`] beside the rows: computed once per answer, not per frame.
    pub(super) fn time_rows(&mut self, continued: bool) {
        if !continued {
            self.search.times.clear();
            self.search.selected = None;
            self.search.result_rows = RowHeights::default();
        }
        let Some(results) = &self.search.results else {
            return;
        };
        let from = self.search.times.len();
        self.search.times.extend(
            results.rows[from.min(results.rows.len())..]
                .iter()
                .map(RowTime::of),
        );
    }
}

/// The search field's id (its text selection decides what ⌘C copies).
fn query_id() -> egui::Id {
    egui::Id::unique("persyk.history.query")
}

/// Whether the search field has focus and some of its text selected.
fn query_has_selection(ctx: &egui::Context) -> bool {
    ctx.memory(|m| m.has_focus(query_id()))
        && egui::TextEdit::load_state(ctx, query_id())
            .and_then(|s| s.cursor.char_range())
            .is_some_and(|r| !r.is_empty())
}

/// Whether text is selected in a label (an excerpt, a title): ⌘C copies that instead.
fn label_has_selection(ctx: &egui::Context) -> bool {
    ctx.plugin::<egui::text_selection::LabelSelectionState>()
        .lock()
        .has_selection()
}

/// Takes ⌘C / Ctrl+C from this frame's input: winit sends it as `Event::Copy`, other
/// integrations (and tests) as the key with the command modifier.
fn take_copy(ctx: &egui::Context) -> bool {
    ctx.input_mut(|i| {
        let before = i.events.len();
        i.events.retain(|e| !matches!(e, egui::Event::Copy));
        let copied = i.events.len() != before;
        i.consume_key(Modifiers::COMMAND, Key::C) || copied
    })
}

/// A row's local day, time and duration, formatted once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RowTime {
    day: Option<Date>,
    /// `14:05` (local time).
    time: Option<String>,
    /// `1:05` (recorded audio).
    duration: Option<String>,
}

impl RowTime {
    fn of(row: &ResultRow) -> RowTime {
        let local = row
            .created
            .as_deref()
            .and_then(|c| OffsetDateTime::parse(c, &Rfc3339).ok())
            .map(to_local);
        RowTime {
            day: local.map(|t| t.date()),
            time: local.map(|t| format!("{:02}:{:02}", t.hour(), t.minute())),
            duration: row.duration_ms.map(format_duration),
        }
    }

    fn day_label(&self, today: Date) -> String {
        self.day
            .map_or_else(|| "No date".to_owned(), |d| day_label(d, today))
    }
}

/// The group header of `day` seen on `today` (both local): "Today", "Yesterday", else the
/// date ("Monday, 30 November"; with the year when it is not this year's).
pub(super) fn day_label(day: Date, today: Date) -> String {
    if day == today {
        return "Today".into();
    }
    if today.previous_day() == Some(day) {
        return "Yesterday".into();
    }
    let mut label = format!("{}, {} {}", day.weekday(), day.day(), day.month());
    if day.year() != today.year() {
        label.push_str(&format!(" {}", day.year()));
    }
    label
}

/// An entry's time of day where the user is: `14:05:09` (`None`: not a readable time).
pub(super) fn clock(iso: &str) -> Option<String> {
    let t = to_local(OffsetDateTime::parse(iso, &Rfc3339).ok()?);
    Some(format!(
        "{:02}:{:02}:{:02}",
        t.hour(),
        t.minute(),
        t.second()
    ))
}

/// `65_000` → `1:05`; an hour or more: `1:02:03`.
pub(super) fn format_duration(duration_ms: u64) -> String {
    let s = duration_ms / 1000;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// Today's date where the user is.
fn local_date(now: OffsetDateTime) -> Date {
    to_local(now).date()
}

/// `t` in the system's time zone (UTC when it cannot be told).
fn to_local(t: OffsetDateTime) -> OffsetDateTime {
    t.to_offset(local_offset_at(t))
}

/// The system's UTC offset at `t` (its time zone's rule at that instant, daylight saving
/// included), from `localtime_r`: thread-safe, and it reads the zone but never changes the
/// environment. (The `time` crate asks for a single-threaded process before it does this.)
#[cfg(unix)]
fn local_offset_at(t: OffsetDateTime) -> UtcOffset {
    // `time_t` is 64-bit on the platforms Persyk runs on; elsewhere a far date is UTC.
    #[allow(clippy::useless_conversion, irrefutable_let_patterns)]
    let Ok(secs) = libc::time_t::try_from(t.unix_timestamp()) else {
        return UtcOffset::UTC;
    };
    let mut tm = std::mem::MaybeUninit::<libc::tm>::uninit();
    // SAFETY: `localtime_r` writes the broken-down time into `tm` (ours, properly sized)
    // and returns null on failure, in which case `tm` is not read.
    let filled = unsafe { libc::localtime_r(&secs, tm.as_mut_ptr()) };
    if filled.is_null() {
        return UtcOffset::UTC;
    }
    // SAFETY: a non-null return means `tm` was initialized.
    let tm = unsafe { tm.assume_init() };
    i32::try_from(tm.tm_gmtoff)
        .ok()
        .and_then(|s| UtcOffset::from_whole_seconds(s).ok())
        .unwrap_or(UtcOffset::UTC)
}

#[cfg(not(unix))]
fn local_offset_at(_t: OffsetDateTime) -> UtcOffset {
    UtcOffset::UTC
}

/// Whether a row's excerpt says what its label already says (a session without a name is
/// labelled by its first words, which are also the excerpt when nothing else matched).
fn excerpt_repeats_label(row: &ResultRow) -> bool {
    let Some(excerpt) = &row.excerpt else {
        return false;
    };
    let trim = |s: &str| {
        s.trim_matches(|c: char| c == '…' || c.is_whitespace())
            .to_owned()
    };
    let (l, e) = (trim(&row.label), trim(excerpt));
    !l.is_empty() && (l == e || l.starts_with(&e) || e.starts_with(&l))
}

pub(super) fn result_row(
    ui: &mut egui::Ui,
    row: &ResultRow,
    time: Option<&RowTime>,
    query: &str,
    actions: &mut Vec<Action>,
) {
    ui.horizontal_wrapped(|ui| {
        if let Some(t) = time.and_then(|t| t.time.as_deref()) {
            ui.label(RichText::new(t).weak());
        }
        if let Some(d) = time.and_then(|t| t.duration.as_deref()) {
            ui.label(RichText::new(d).weak())
                .on_hover_text("Length of the recording");
        }
        // A label that is the text itself (no session name) is shown once: the longer of
        // the two, highlighted.
        if excerpt_repeats_label(row) {
            let excerpt = row.excerpt.as_deref().unwrap_or_default();
            let text = if excerpt.len() >= row.label.len() {
                excerpt
            } else {
                &row.label
            };
            ui.label(highlighted(text, query, ui.visuals()));
        } else {
            ui.label(RichText::new(&row.label).strong());
        }
        if let Some(name) = &row.from_file {
            ui.label(RichText::new(format!("from a file: {name}")).weak())
                .on_hover_text("Transcribed from this file, not dictated");
        }
        if let Some(mac) = &row.other_mac {
            ui.label(RichText::new(format!("recorded on {mac}")).weak())
                .on_hover_text("Recorded on another Mac and brought here by your sync folder");
        }
        if let Some(mac) = &row.recording_on {
            ui.label(RichText::new(format!("recording on {mac} now")).weak())
                .on_hover_text(
                    "Another Mac is recording this session; it can be changed once that stops",
                );
        }
        if row.syncing {
            ui.label(RichText::new("syncing").weak())
                .on_hover_text("Your sync engine is still bringing this session's files");
        }
        if row.copies > 0 {
            ui.label(
                RichText::new("has a copy from another Mac").color(ui.visuals().warn_fg_color),
            )
            .on_hover_text(
                "Two Macs changed this session at the same moment; Merge keeps both changes",
            );
        }
        if row.duplicate_of.is_some() {
            ui.label(RichText::new("duplicate id").color(ui.visuals().warn_fg_color))
                .on_hover_text("Another folder holds a session with the same id");
        }
        if row.needs_recovery {
            ui.label(RichText::new("needs recovery").color(ui.visuals().warn_fg_color));
        } else if let Some(code) = row
            .diagnostic
            .filter(|_| !row.syncing && row.recording_on.is_none())
        {
            // A sentence on the row; the file's first diagnostic code in its tooltip.
            ui.label(RichText::new("cannot be read fully").color(ui.visuals().warn_fg_color))
                .on_hover_text(format!("Details: {code}"));
        }
    });
    if let Some(excerpt) = row.excerpt.as_ref().filter(|_| !excerpt_repeats_label(row)) {
        ui.label(highlighted(excerpt, query, ui.visuals()));
    }
    ui.horizontal(|ui| {
        if ui.button("Open").clicked() {
            actions.push(Action::Open(row.clone()));
        }
        if ui
            .button("Copy")
            .on_hover_text("Copy the session's text without opening it")
            .clicked()
        {
            actions.push(Action::CopyRow(row.clone()));
        }
        if row.needs_recovery && ui.button("Recover").clicked() {
            actions.push(Action::Recover(row.location.clone()));
        }
        // Merging is an explicit recovery (every entry of both files kept, appends only).
        if row.copies > 0
            && !row.needs_recovery
            && row.recording_on.is_none()
            && ui
                .button("Merge")
                .on_hover_text("Merge the other Mac's copy into this session")
                .clicked()
        {
            actions.push(Action::Recover(row.location.clone()));
        }
        if row.recording_on.is_none()
            && ui
                .button("Delete…")
                .on_hover_text("Delete this session, its recording and its transcript")
                .clicked()
        {
            actions.push(Action::AskDelete(row.location.clone()));
        }
    });
}

/// Loaded pages kept on either side of the ones in view.
pub(super) const PAGES_KEPT: usize = 2;

/// Bytes of message text (≈ characters) not laid out the frame before that the opened session lays out
/// in one frame (at least one message). A fast scroll brings a screenful of new text every
/// frame; shaping all of it at once made the slowest frames (in the `app_history` bench,
/// 2–3 new messages of ≈ 1,300 characters a frame; 2.6–4 ms in release). Messages over the
/// budget appear the next frame.
pub(super) const NEW_TEXT_PER_FRAME: usize = 1_200;

/// What the opened session's controls depend on besides the session.
#[derive(Debug, Clone, Copy)]
pub(super) struct OpenedState<'a> {
    /// A recording is running (nothing that writes or records starts, nothing plays).
    pub recording: bool,
    /// A clean-up is set up in Settings ("Clean up again").
    pub clean_up_set: bool,
    /// What plays back (or is being read to play): its button reads "Stop playback".
    pub playing: Option<&'a PlayKey>,
    /// How far it played, `0:03 / 0:10`, once it plays.
    pub position: Option<&'a str>,
}

/// The button that plays (labelled `label`; `small` in a message's row; a click asks for
/// `play`), or stops what plays while `playing`, with its position beside it.
fn play_button(
    ui: &mut egui::Ui,
    playing: bool,
    (label, hover): (&str, &str),
    small: bool,
    state: OpenedState<'_>,
    play: impl FnOnce() -> Action,
    actions: &mut Vec<Action>,
) {
    let button = |text: &str| {
        let b = egui::Button::new(text);
        if small { b.small() } else { b }
    };
    if playing {
        if ui
            .add(button("Stop playback"))
            .on_hover_text("Stop playing the recording")
            .clicked()
        {
            actions.push(Action::StopPlayback);
        }
        if let Some(p) = state.position {
            ui.label(RichText::new(p).small().weak().monospace());
        }
    } else if ui
        .add_enabled(!state.recording, button(label))
        .on_hover_text(hover)
        .on_disabled_hover_text("Nothing plays while a recording runs")
        .clicked()
    {
        actions.push(play());
    }
}

pub(super) fn opened_session(
    ui: &mut egui::Ui,
    opened: &OpenedSession,
    pages: &BTreeMap<usize, Vec<OpenedMessage>>,
    rows: &mut RowHeights,
    state: OpenedState<'_>,
    actions: &mut Vec<Action>,
) {
    let OpenedState {
        recording,
        clean_up_set,
        ..
    } = state;
    let total = opened.pages.as_ref().map_or(0, |p| p.total);
    ui.horizontal(|ui| {
        if ui.button("Back to results").clicked() {
            actions.push(Action::CloseOpened);
        }
        // The backend reads the text page by page, only when asked.
        if total > 0 && ui.button("Copy all").clicked() {
            actions.push(Action::CopyAll);
        }
        // With a clean-up in the session: the words as they were said, too.
        let cleaned = pages
            .values()
            .flatten()
            .any(|m| m.cleanup.as_ref().is_some_and(|c| c.delivered));
        if cleaned && ui.button("Copy all as spoken").clicked() {
            actions.push(Action::CopyAllAsSpoken);
        }
        // The same confirmation as a row's Delete… (never the session being recorded: the
        // store refuses it, and the button waits until the recording ends).
        if ui
            .add_enabled(!recording, egui::Button::new("Delete…"))
            .on_hover_text("Delete this session, after a confirmation")
            .clicked()
        {
            actions.push(Action::AskDelete(opened.location.clone()));
        }
        if total > 0
            && clean_up_set
            && ui
                .add_enabled(!recording, egui::Button::new("Clean up again"))
                .on_hover_text("Your spoken words through the clean-up set in Settings")
                .clicked()
        {
            actions.push(Action::CleanUpAgain);
        }
        // The whole recording (each one, when the session holds several).
        let count = opened.recordings.len();
        for (i, asset) in opened.recordings.iter().enumerate() {
            let hover = if count > 1 {
                format!("Play recording {} of {count} from its start", i + 1)
            } else {
                "Play the whole recording from its start".to_owned()
            };
            let playing = matches!(state.playing, Some(PlayKey::Recording(a)) if a == asset);
            let label = ("Play recording", hover.as_str());
            let play = || {
                let clip = ClipRequest::whole(asset.clone());
                Action::Play(PlayKey::Recording(asset.clone()), clip)
            };
            play_button(ui, playing, label, false, state, play, actions);
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
    // Where it lives and which leaf it shows are details: in the tooltip, not the page.
    ui.label(
        RichText::new("Read-only: the session as it was when it was found.")
            .small()
            .weak(),
    )
    .on_hover_text(format!(
        "{} (at leaf {})",
        opened.location.display(),
        opened.leaf.as_deref().unwrap_or("none")
    ));
    if total == 0 {
        ui.label("No messages.");
    }
    let mut shown: Option<(usize, usize)> = None;
    let message = |i: usize| {
        let start = i - i % MAX_PAGE;
        pages.get(&start).and_then(|p| p.get(i - start))
    };
    let options = ListOptions {
        budget: Some(NEW_TEXT_PER_FRAME),
        ..ListOptions::default()
    };
    // What a row costs to lay out anew: its text's bytes (a row waiting for its page, one).
    let cost = |i: usize| message(i).map_or(1, |m| m.text.len().max(1));
    virtual_rows_budgeted(ui, total, rows, options, cost, |ui, i| {
        let start = i - i % MAX_PAGE;
        shown = Some(shown.map_or((start, start), |(a, b)| (a.min(start), b.max(start))));
        let Some(m) = message(i) else {
            ui.label(RichText::new("…").weak());
            return;
        };
        ui.horizontal_wrapped(|ui| {
            if let Some(t) = clock(&m.timestamp) {
                ui.label(RichText::new(t).small().weak().monospace());
            }
            if let Some(c) = &m.cleanup {
                ui.label(RichText::new(format!("{}:", c.caption())).weak());
            } else if m.role != "user" {
                ui.label(RichText::new(format!("{}:", m.role)).weak());
            }
            ui.label(&m.text);
            if ui.small_button("Copy").clicked() {
                actions.push(Action::Copy(m.text.clone()));
            }
            // The stretch of the recording this message was recognized from.
            if let Some(clip) = &m.audio {
                let playing = matches!(state.playing, Some(PlayKey::Message(id)) if id == &m.id);
                let label = ("Play", "Play the recording of this message");
                let play = || Action::Play(PlayKey::Message(m.id.clone()), clip.clone());
                play_button(ui, playing, label, true, state, play, actions);
            }
            // What the clean-up changed in the words it was made from (when they are loaded).
            if let Some(c) = &m.cleanup {
                let spoken: Option<Vec<&str>> = c
                    .sources
                    .iter()
                    .map(|id| {
                        pages
                            .values()
                            .flatten()
                            .find(|s| &s.id == id)
                            .map(|s| s.text.as_str())
                    })
                    .collect();
                if let Some(spoken) = spoken.filter(|s| !s.is_empty()) {
                    super::cleanup::changes_ui(ui, &m.id, &spoken.join(" "), &m.text);
                }
            }
            // A clean-up can be taken out again; the spoken words stay.
            if m.cleanup.is_some()
                && ui
                    .add_enabled(!recording, egui::Button::new("Use my words").small())
                    .on_hover_text("Remove this clean-up; your spoken words stay")
                    .clicked()
            {
                actions.push(Action::UseMyWords(m.id.clone()));
            }
        });
    });
    if let Some((first, last)) = shown {
        actions.push(Action::ShowPages(first, last));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Month;

    fn date(y: i32, m: Month, d: u8) -> Date {
        Date::from_calendar_date(y, m, d).unwrap()
    }

    #[test]
    fn day_labels_from_a_fixed_today() {
        let today = date(2026, Month::December, 1);
        assert_eq!(day_label(today, today), "Today");
        assert_eq!(
            day_label(date(2026, Month::November, 30), today),
            "Yesterday"
        );
        assert_eq!(
            day_label(date(2026, Month::November, 29), today),
            "Sunday, 29 November"
        );
        // Across a year boundary: yesterday is still "Yesterday"; an older date has its year.
        let new_year = date(2027, Month::January, 1);
        assert_eq!(
            day_label(date(2026, Month::December, 31), new_year),
            "Yesterday"
        );
        assert_eq!(
            day_label(date(2026, Month::December, 30), new_year),
            "Wednesday, 30 December 2026"
        );
        // A date after today (a clock set back) is a date, never "Today".
        assert_eq!(
            day_label(date(2026, Month::December, 2), today),
            "Wednesday, 2 December"
        );
    }

    #[test]
    fn a_label_that_is_the_excerpt_is_shown_once() {
        let row = |label: &str, excerpt: Option<&str>| ResultRow {
            location: std::path::PathBuf::from("/s"),
            session_id: None,
            leaf: None,
            label: label.to_owned(),
            created: None,
            duration_ms: None,
            excerpt: excerpt.map(str::to_owned),
            duplicate_of: None,
            diagnostic: None,
            needs_recovery: false,
            from_file: None,
            other_mac: None,
            copies: 0,
            syncing: false,
            recording_on: None,
        };
        assert!(excerpt_repeats_label(&row(
            "Hello there…",
            Some("Hello there, friend")
        )));
        assert!(excerpt_repeats_label(&row(
            "Hello there",
            Some("Hello there")
        )));
        assert!(!excerpt_repeats_label(&row(
            "Meeting notes",
            Some("…the Needle here…")
        )));
        assert!(!excerpt_repeats_label(&row("Meeting notes", None)));
    }

    #[test]
    fn an_entry_time_reads_as_a_clock() {
        let t = clock("2026-12-02T16:05:09.123Z").expect("a time");
        assert_eq!(t.len(), 8);
        // Minutes move with half-hour zones; seconds never do.
        assert!(t.ends_with(":09"), "{t}");
        assert_eq!(clock("not a time"), None);
    }

    #[test]
    fn durations_read_as_minutes_and_seconds() {
        assert_eq!(format_duration(0), "0:00");
        assert_eq!(format_duration(65_400), "1:05");
        assert_eq!(format_duration(3_723_000), "1:02:03");
    }
}
