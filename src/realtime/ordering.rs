//! Provider-order publication: which transcripts and responses become canonical messages, and
//! in which order.
//!
//! The provider tells us each conversation item's predecessor (`previous_item_id` on
//! `input_audio_buffer.committed` and `conversation.item.added`). Items form a chain; the
//! chain, not the arrival order of completions, decides message order. A slot resolves when
//! its transcription completes or fails (user) or its response is done (assistant);
//! resolved slots are published strictly in chain order, so if B completes before A, B waits.
//!
//! Invariants:
//! - A message's text is only ever a provider's final transcript or a done response: deltas
//!   are provisional, for display only, and never published.
//! - A failure closes its slot as a gap; [`Ordering::close_unresolved`] closes what is left at
//!   the drain deadline. Once closed or published, a slot never changes: repeated and late
//!   completions are evidence only (they return nothing).
//! - A delta for an item not yet committed (streaming models send deltas while the user
//!   speaks) opens an unlinked slot at the end of the chain; the item's commit or
//!   `item.added` then places it by its predecessor, as long as nothing after it is published.
//! - Published history never reorders: an item that would land before an already published
//!   item is placed after the published prefix instead.
//! - Bounded: at most [`MAX_ORDERED_ITEMS`] unpublished items and [`MAX_ORDERED_TEXT`] bytes
//!   of their text — provisional text and final text waiting behind a pending item alike.
//!   Reaching a bound never drops an item silently: it sets [`Ordering::limited`] (the caller
//!   must enter finishing), an item that does not fit becomes an overflow gap
//!   ([`LIMIT_REASON`], with its id) published after the chain, and a final text that does
//!   not fit closes its slot as such a gap. At most [`MAX_OVERFLOW_ITEMS`] overflow ids are
//!   kept; items beyond those are counted and published as one gap without an id.

use std::collections::HashMap;

use crate::recognize::Speaker;

/// Most unpublished items held in order.
pub const MAX_ORDERED_ITEMS: usize = 256;
/// Most bytes of text (provisional and final) held for unpublished items.
pub const MAX_ORDERED_TEXT: usize = 4 << 20;

/// Most items recorded (by id) as overflow gaps after the limit.
pub const MAX_OVERFLOW_ITEMS: usize = 1024;
/// The gap reason of items that did not fit the ordering bounds.
pub const LIMIT_REASON: &str = "ordering.limit";

/// How an assistant response ended (`response.done` status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseStatus {
    Completed,
    Cancelled,
    Incomplete(Option<String>),
    Failed(Option<String>),
}

impl ResponseStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            ResponseStatus::Completed => "completed",
            ResponseStatus::Cancelled => "cancelled",
            ResponseStatus::Incomplete(_) => "incomplete",
            ResponseStatus::Failed(_) => "failed",
        }
    }
}

/// Something ready to be written, in chain order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// A canonical message.
    Message {
        item_id: String,
        speaker: Speaker,
        text: String,
        /// `None` for user transcripts.
        response: Option<(String, ResponseStatus)>,
    },
    /// An item that will never have text: a failed transcription or one closed at stop.
    /// `item_id` is empty only for the one gap that counts overflow items past
    /// [`MAX_OVERFLOW_ITEMS`].
    Gap { item_id: String, reason: String },
}

/// The ordering limit was reached; the caller must stop taking work and finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OrderingError {
    #[error("ordering.limit: more than 256 unpublished items or 4 MiB of their text")]
    Limit,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Pending,
    Done(Option<Published>),
}

#[derive(Debug)]
struct Slot {
    speaker: Speaker,
    /// Placed by a predecessor (`false`: opened by an early delta, at the end).
    linked: bool,
    provisional: String,
    state: State,
}

/// The ordering state of one connection.
#[derive(Debug, Default)]
pub struct Ordering {
    order: Vec<String>,
    slots: HashMap<String, Slot>,
    published: usize,
    text_bytes: usize,
    /// A bound was reached (the caller must finish).
    limited: bool,
    /// Items that arrived after the item bound, in arrival order: gaps after the chain.
    overflow: Vec<String>,
    overflow_published: usize,
    /// Overflow items beyond [`MAX_OVERFLOW_ITEMS`] (counted, not kept).
    overflow_lost: usize,
    overflow_lost_published: bool,
}

impl Ordering {
    pub fn new() -> Ordering {
        Ordering::default()
    }

    /// Unpublished items.
    pub fn pending(&self) -> usize {
        self.order.len() - self.published
    }

    /// Whether every known item is published or closed.
    pub fn is_settled(&self) -> bool {
        self.pending() == 0
            && self.overflow_published == self.overflow.len()
            && (self.overflow_lost == 0 || self.overflow_lost_published)
    }

    /// Whether a bound was reached: the caller must stop taking work and finish.
    pub fn limited(&self) -> bool {
        self.limited
    }

    /// Bytes of text (provisional and final) held for unpublished items.
    pub fn text_bytes(&self) -> usize {
        self.text_bytes
    }

    fn is_overflow(&self, item_id: &str) -> bool {
        self.overflow.iter().any(|x| x == item_id)
    }

    /// Records `item_id` as an overflow gap (or counts it past [`MAX_OVERFLOW_ITEMS`]).
    fn overflow_item(&mut self, item_id: &str) {
        self.limited = true;
        if self.overflow.len() < MAX_OVERFLOW_ITEMS {
            self.overflow.push(item_id.to_owned());
        } else {
            self.overflow_lost += 1;
        }
    }

    /// Records an item and its predecessor. Repeats are ignored.
    pub fn item_added(
        &mut self,
        item_id: &str,
        previous: Option<&str>,
        speaker: Speaker,
    ) -> Result<(), OrderingError> {
        if self.is_overflow(item_id) {
            return Ok(());
        }
        if let Some(slot) = self.slots.get_mut(item_id) {
            // An early delta's slot: place it by its predecessor now, unless published.
            if !slot.linked && slot.state == State::Pending {
                slot.linked = true;
                if let Some(pos) = self.order.iter().position(|x| x == item_id)
                    && pos >= self.published
                {
                    self.order.remove(pos);
                    let at = self.position_after(previous);
                    self.order.insert(at, item_id.to_owned());
                }
            }
            return Ok(());
        }
        // Once items overflow, later ones follow them (their order must hold).
        if self.pending() >= MAX_ORDERED_ITEMS || !self.overflow.is_empty() {
            self.overflow_item(item_id);
            return Err(OrderingError::Limit);
        }
        let at = self.position_after(previous);
        self.order.insert(at, item_id.to_owned());
        self.slots.insert(
            item_id.to_owned(),
            Slot {
                speaker,
                linked: true,
                provisional: String::new(),
                state: State::Pending,
            },
        );
        Ok(())
    }

    /// Where an item whose predecessor is `previous` goes (never inside the published prefix).
    fn position_after(&self, previous: Option<&str>) -> usize {
        match previous {
            Some(p) => match self.order.iter().position(|x| x == p) {
                Some(i) => i + 1,
                None => self.order.len(),
            },
            None => 0,
        }
        .max(self.published)
    }

    /// Adds provisional text (a delta) to a pending item.
    pub fn delta(&mut self, item_id: &str, delta: &str) -> Result<(), OrderingError> {
        if self.is_overflow(item_id) {
            return Ok(()); // Already a gap: provisional text is display only.
        }
        if !self.slots.contains_key(item_id) {
            // Not committed yet: an unlinked slot at the end until its commit places it.
            if self.pending() >= MAX_ORDERED_ITEMS || !self.overflow.is_empty() {
                self.overflow_item(item_id);
                return Err(OrderingError::Limit);
            }
            self.order.push(item_id.to_owned());
            self.slots.insert(
                item_id.to_owned(),
                Slot {
                    speaker: Speaker::User,
                    linked: false,
                    provisional: String::new(),
                    state: State::Pending,
                },
            );
        }
        if self.text_bytes + delta.len() > MAX_ORDERED_TEXT {
            self.limited = true;
            return Err(OrderingError::Limit);
        }
        if let Some(slot) = self.slots.get_mut(item_id)
            && slot.state == State::Pending
        {
            slot.provisional.push_str(delta);
            self.text_bytes += delta.len();
        }
        Ok(())
    }

    fn resolve(
        &mut self,
        item_id: &str,
        speaker: Speaker,
        outcome: Option<Published>,
    ) -> Vec<Published> {
        if self.is_overflow(item_id) {
            return Vec::new(); // Already an overflow gap: evidence only.
        }
        if !self.slots.contains_key(item_id) {
            // A completion for an item we never saw added: it goes after everything known
            // (or, past the bound, becomes an overflow gap).
            let previous = self.order.last().cloned();
            if self
                .item_added(item_id, previous.as_deref(), speaker)
                .is_err()
            {
                return self.publish_ready();
            }
        }
        let Some(slot) = self.slots.get_mut(item_id) else {
            return Vec::new();
        };
        if slot.state != State::Pending {
            return Vec::new(); // Repeated or late: evidence only.
        }
        self.text_bytes -= slot.provisional.len();
        slot.provisional = String::new();
        // Final text waits in memory until its predecessors resolve: it counts in the bound.
        let final_bytes = match &outcome {
            Some(Published::Message { text, .. }) => text.len(),
            _ => 0,
        };
        let outcome = if self.text_bytes + final_bytes > MAX_ORDERED_TEXT {
            self.limited = true;
            Some(Published::Gap {
                item_id: item_id.to_owned(),
                reason: LIMIT_REASON.to_owned(),
            })
        } else {
            self.text_bytes += final_bytes;
            outcome
        };
        slot.state = State::Done(outcome);
        self.publish_ready()
    }

    /// A final user transcript. Empty transcripts resolve the slot without a message.
    pub fn transcription_completed(&mut self, item_id: &str, transcript: &str) -> Vec<Published> {
        let outcome = (!transcript.trim().is_empty()).then(|| Published::Message {
            item_id: item_id.to_owned(),
            speaker: Speaker::User,
            text: transcript.to_owned(),
            response: None,
        });
        self.resolve(item_id, Speaker::User, outcome)
    }

    /// A failed transcription: the slot closes as a gap.
    pub fn transcription_failed(&mut self, item_id: &str, reason: &str) -> Vec<Published> {
        let gap = Published::Gap {
            item_id: item_id.to_owned(),
            reason: reason.to_owned(),
        };
        self.resolve(item_id, Speaker::User, Some(gap))
    }

    /// An assistant item's final text at `response.done`.
    pub fn response_done(
        &mut self,
        item_id: &str,
        response_id: &str,
        text: &str,
        status: ResponseStatus,
    ) -> Vec<Published> {
        let outcome = (!text.is_empty()).then(|| Published::Message {
            item_id: item_id.to_owned(),
            speaker: Speaker::Assistant,
            text: text.to_owned(),
            response: Some((response_id.to_owned(), status)),
        });
        self.resolve(item_id, Speaker::Assistant, outcome)
    }

    /// Closes every unresolved slot as a gap with `reason` and publishes everything.
    pub fn close_unresolved(&mut self, reason: &str) -> Vec<Published> {
        let pending: Vec<String> = self.order[self.published..]
            .iter()
            .filter(|id| {
                self.slots
                    .get(*id)
                    .is_some_and(|s| s.state == State::Pending)
            })
            .cloned()
            .collect();
        for id in &pending {
            if let Some(slot) = self.slots.get_mut(id) {
                self.text_bytes -= slot.provisional.len();
                slot.provisional = String::new();
                slot.state = State::Done(Some(Published::Gap {
                    item_id: id.clone(),
                    reason: reason.to_owned(),
                }));
            }
        }
        self.publish_ready()
    }

    /// What became publishable without a resolution (overflow gaps once the chain is out).
    pub fn take_ready(&mut self) -> Vec<Published> {
        self.publish_ready()
    }

    /// Pending items opened by deltas and not placed by a commit yet.
    pub fn unlinked(&self) -> usize {
        self.order[self.published..]
            .iter()
            .filter(|id| {
                self.slots
                    .get(*id)
                    .is_some_and(|s| !s.linked && s.state == State::Pending)
            })
            .count()
    }

    /// Whether `item_id` is a known item (in the chain or an overflow gap).
    pub fn contains(&self, item_id: &str) -> bool {
        self.slots.contains_key(item_id) || self.is_overflow(item_id)
    }

    /// Text of unpublished items, in chain order (for display, never for saving): the
    /// provisional deltas of pending items and the final text of completed items that wait
    /// for a predecessor.
    pub fn provisional(&self) -> Vec<(String, Speaker, String)> {
        self.order[self.published..]
            .iter()
            .filter_map(|id| {
                let s = self.slots.get(id)?;
                match &s.state {
                    State::Pending => Some((id.clone(), s.speaker, s.provisional.clone())),
                    State::Done(Some(Published::Message { text, .. })) => {
                        Some((id.clone(), s.speaker, text.clone()))
                    }
                    State::Done(_) => None,
                }
            })
            .collect()
    }

    fn publish_ready(&mut self) -> Vec<Published> {
        let mut out = Vec::new();
        while let Some(id) = self.order.get(self.published) {
            let Some(slot) = self.slots.get_mut(id) else {
                break;
            };
            match &mut slot.state {
                State::Pending => break,
                State::Done(p) => {
                    if let Some(p) = p.take() {
                        if let Published::Message { text, .. } = &p {
                            self.text_bytes -= text.len();
                        }
                        out.push(p);
                    }
                }
            }
            self.published += 1;
        }
        // Overflow gaps follow the whole chain.
        if self.published == self.order.len() {
            for id in &self.overflow[self.overflow_published..] {
                out.push(Published::Gap {
                    item_id: id.clone(),
                    reason: LIMIT_REASON.to_owned(),
                });
            }
            self.overflow_published = self.overflow.len();
            if self.overflow_lost > 0 && !self.overflow_lost_published {
                self.overflow_lost_published = true;
                out.push(Published::Gap {
                    item_id: String::new(),
                    reason: format!("{LIMIT_REASON}: {} more items", self.overflow_lost),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(p: &[Published]) -> Vec<String> {
        p.iter()
            .map(|x| match x {
                Published::Message { text, .. } => text.clone(),
                Published::Gap { item_id, .. } => format!("gap:{item_id}"),
            })
            .collect()
    }

    #[test]
    fn early_deltas_do_not_jump_ahead_of_committed_items() {
        let mut o = Ordering::new();
        o.item_added("A", None, Speaker::User).unwrap();
        // B streams while A waits for its transcript.
        o.delta("B", "wor").unwrap();
        o.delta("B", "ld").unwrap();
        o.item_added("B", Some("A"), Speaker::User).unwrap();
        assert!(o.transcription_completed("B", "world").is_empty());
        assert_eq!(
            texts(&o.transcription_completed("A", "hello")),
            ["hello", "world"]
        );
        // An early delta of C, then C's commit names B: C stays after B.
        o.delta("C", "x").unwrap();
        o.item_added("C", Some("B"), Speaker::User).unwrap();
        assert_eq!(texts(&o.transcription_completed("C", "again")), ["again"]);
    }

    #[test]
    fn later_completion_waits_for_its_predecessor() {
        let mut o = Ordering::new();
        o.item_added("A", None, Speaker::User).unwrap();
        o.item_added("B", Some("A"), Speaker::User).unwrap();
        o.delta("B", "wor").unwrap();
        assert!(o.transcription_completed("B", "world").is_empty());
        let shown: Vec<(String, String)> = o
            .provisional()
            .into_iter()
            .map(|(id, _, t)| (id, t))
            .collect();
        assert_eq!(
            shown,
            [("A".into(), String::new()), ("B".into(), "world".into())],
            "A is still provisional and B stays visible while it waits"
        );
        assert_eq!(
            texts(&o.transcription_completed("A", "hello")),
            ["hello", "world"]
        );
        assert!(o.is_settled());
    }

    #[test]
    fn failures_are_gaps_and_late_completions_are_evidence() {
        let mut o = Ordering::new();
        o.item_added("A", None, Speaker::User).unwrap();
        o.item_added("B", Some("A"), Speaker::User).unwrap();
        assert_eq!(texts(&o.transcription_failed("A", "provider")), ["gap:A"]);
        assert_eq!(texts(&o.transcription_completed("B", "two")), ["two"]);
        assert!(
            o.transcription_completed("B", "two").is_empty(),
            "duplicate"
        );
        assert!(
            o.transcription_completed("A", "late").is_empty(),
            "late after gap"
        );
    }

    #[test]
    fn assistant_only_at_response_done_and_close_at_stop() {
        let mut o = Ordering::new();
        o.item_added("U", None, Speaker::User).unwrap();
        o.item_added("R", Some("U"), Speaker::Assistant).unwrap();
        o.item_added("U2", Some("R"), Speaker::User).unwrap();
        o.delta("R", "Sure").unwrap();
        assert_eq!(
            texts(&o.transcription_completed("U", "question")),
            ["question"]
        );
        assert!(o.transcription_completed("U2", "next").is_empty());
        assert_eq!(
            texts(&o.response_done("R", "resp_1", "Sure thing", ResponseStatus::Completed)),
            ["Sure thing", "next"]
        );
        o.item_added("U3", Some("U2"), Speaker::User).unwrap();
        assert_eq!(texts(&o.close_unresolved("drain deadline")), ["gap:U3"]);
    }

    #[test]
    fn published_history_never_reorders() {
        let mut o = Ordering::new();
        o.item_added("A", None, Speaker::User).unwrap();
        o.transcription_completed("A", "one");
        o.item_added("C", Some("A"), Speaker::User).unwrap();
        o.transcription_completed("C", "three");
        // B claims A as predecessor after C was published: it goes after C.
        o.item_added("B", Some("A"), Speaker::User).unwrap();
        assert_eq!(texts(&o.transcription_completed("B", "two")), ["two"]);
    }

    #[test]
    fn limits() {
        let mut o = Ordering::new();
        let mut previous: Option<String> = None;
        for i in 0..MAX_ORDERED_ITEMS {
            o.item_added(&i.to_string(), previous.as_deref(), Speaker::User)
                .unwrap();
            previous = Some(i.to_string());
        }
        assert!(!o.limited());
        assert_eq!(
            o.item_added("x", previous.as_deref(), Speaker::User),
            Err(OrderingError::Limit)
        );
        assert!(o.limited());
        // Later items and completions are not dropped: the overflow becomes gaps after the
        // chain, and final text behind the pending head counts in the bound.
        assert!(o.transcription_completed("y", "late").is_empty());
        assert!(o.transcription_completed("1", "one").is_empty());
        assert_eq!(o.text_bytes(), 3);
        assert!(!o.is_settled());
        let out = texts(&o.close_unresolved("stop"));
        assert_eq!(out.len(), MAX_ORDERED_ITEMS + 2, "{out:?}");
        assert_eq!(out[0], "gap:0");
        assert_eq!(out[1], "one");
        assert_eq!(out[out.len() - 2..], ["gap:x", "gap:y"]);
        assert!(o.is_settled());
        assert_eq!(o.text_bytes(), 0);
    }

    #[test]
    fn final_text_counts_in_the_bound() {
        let mut o = Ordering::new();
        o.item_added("A", None, Speaker::User).unwrap();
        o.item_added("B", Some("A"), Speaker::User).unwrap();
        let big = "w".repeat(MAX_ORDERED_TEXT + 1);
        assert!(o.transcription_completed("B", &big).is_empty());
        assert!(o.limited(), "the waiting text did not fit");
        assert_eq!(texts(&o.transcription_completed("A", "a")), ["a", "gap:B"]);
    }
}
