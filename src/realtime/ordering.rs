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
//! - Published history never reorders: an item that would land before an already published
//!   item is placed after the published prefix instead.
//! - Bounded: at most [`MAX_ORDERED_ITEMS`] unpublished items and [`MAX_ORDERED_TEXT`] bytes
//!   of their text; beyond that the caller must enter finishing ([`OrderingError::Limit`]).

use std::collections::HashMap;

/// Most unpublished items held in order.
pub const MAX_ORDERED_ITEMS: usize = 256;
/// Most bytes of text (provisional and final) held for unpublished items.
pub const MAX_ORDERED_TEXT: usize = 4 << 20;

/// Who speaks in a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    User,
    Assistant,
}

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
    }

    /// Records an item and its predecessor. Repeats are ignored.
    pub fn item_added(
        &mut self,
        item_id: &str,
        previous: Option<&str>,
        speaker: Speaker,
    ) -> Result<(), OrderingError> {
        if self.slots.contains_key(item_id) {
            return Ok(());
        }
        if self.pending() >= MAX_ORDERED_ITEMS {
            return Err(OrderingError::Limit);
        }
        let at = match previous {
            Some(p) => match self.order.iter().position(|x| x == p) {
                Some(i) => i + 1,
                None => self.order.len(),
            },
            None => 0,
        }
        .max(self.published);
        self.order.insert(at, item_id.to_owned());
        self.slots.insert(
            item_id.to_owned(),
            Slot {
                speaker,
                provisional: String::new(),
                state: State::Pending,
            },
        );
        Ok(())
    }

    /// Adds provisional text (a delta) to a pending item.
    pub fn delta(&mut self, item_id: &str, delta: &str) -> Result<(), OrderingError> {
        if !self.slots.contains_key(item_id) {
            self.item_added(item_id, None, Speaker::User)?;
        }
        if self.text_bytes + delta.len() > MAX_ORDERED_TEXT {
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
        if !self.slots.contains_key(item_id) {
            // A completion for an item we never saw added: it goes after everything known.
            let previous = self.order.last().cloned();
            if self
                .item_added(item_id, previous.as_deref(), speaker)
                .is_err()
            {
                return Vec::new();
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

    /// Provisional text of unresolved items, in chain order (for display, never for saving).
    pub fn provisional(&self) -> Vec<(String, Speaker, String)> {
        self.order[self.published..]
            .iter()
            .filter_map(|id| {
                let s = self.slots.get(id)?;
                (s.state == State::Pending).then(|| (id.clone(), s.speaker, s.provisional.clone()))
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
                        out.push(p);
                    }
                }
            }
            self.published += 1;
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
    fn later_completion_waits_for_its_predecessor() {
        let mut o = Ordering::new();
        o.item_added("A", None, Speaker::User).unwrap();
        o.item_added("B", Some("A"), Speaker::User).unwrap();
        o.delta("B", "wor").unwrap();
        assert!(o.transcription_completed("B", "world").is_empty());
        assert_eq!(o.provisional().len(), 1, "A is still provisional");
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
        for i in 0..MAX_ORDERED_ITEMS {
            o.item_added(&i.to_string(), None, Speaker::User).unwrap();
        }
        assert_eq!(
            o.item_added("x", None, Speaker::User),
            Err(OrderingError::Limit)
        );
    }
}
