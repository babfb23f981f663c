//! What a session left unfinished, as reported when it is opened again.
//!
//! Invariant: this only reads. Nothing missing is generated: a provider item that was
//! committed but never transcribed stays a reported pending item, never a message.
//!
//! What is reported: recordings without an end; committed provider items with neither a
//! message nor a gap (nor an empty final transcript) in any recording, finished or not — a
//! finishing engine accounts for every item, so one left over is work a restart must
//! surface; responses the provider created and never finished, while their recording is
//! unfinished (a finished recording records them as gaps); removal intents not applied;
//! recordings that finished `incomplete` (audio not all recognized: "Transcribe again" can
//! recognize their WAV), with the reasons of their gaps.

use std::collections::HashSet;

use serde_json::Value;

use super::removal::{self, PendingIntent};
use crate::session::format::{EntryBody, Outcome};
use crate::session::index::EntryKind;
use crate::session::recover::unfinished_recordings;
use crate::session::store::{SessionHandle, StoreError};

/// Unfinished work of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnfinishedWork {
    /// Recording ids with `recording.started` and neither `finished` nor `interrupted`.
    pub recordings: Vec<String>,
    /// `(connectionId, itemId)` of user items the provider committed that have neither a
    /// message nor a recorded gap.
    pub pending_items: Vec<(String, String)>,
    /// `(connectionId, responseId)` of responses created (`response.created`) without a
    /// `response.done`, in a session with an unfinished recording.
    pub pending_responses: Vec<(String, String)>,
    /// Removals requested and not applied.
    pub removal_intents: Vec<PendingIntent>,
    /// Recording ids that finished `incomplete`, each with its gaps' reasons (deduplicated,
    /// in order).
    pub incomplete_recordings: Vec<(String, Vec<String>)>,
}

impl UnfinishedWork {
    pub fn is_empty(&self) -> bool {
        self.recordings.is_empty()
            && self.pending_items.is_empty()
            && self.pending_responses.is_empty()
            && self.removal_intents.is_empty()
            && self.incomplete_recordings.is_empty()
    }
}

/// Reads what `handle`'s session left unfinished.
pub fn unfinished_work(handle: &SessionHandle) -> Result<UnfinishedWork, StoreError> {
    let recordings: Vec<String> = unfinished_recordings(handle)?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let removal_intents = removal::pending_intents(handle)?;
    let pending_items;
    let mut pending_responses = Vec::new();
    let mut incomplete_recordings = Vec::new();
    {
        let positions: Vec<u32> = handle.with_index(|i| {
            (0..i.len() as u32)
                .filter(|&p| {
                    matches!(
                        i.entry(p).kind(),
                        EntryKind::RealtimeEvent
                            | EntryKind::Message
                            | EntryKind::RecordingFinished
                    )
                })
                .collect()
        });
        let mut committed: Vec<(String, String)> = Vec::new();
        let mut resolved: HashSet<(String, String)> = HashSet::new();
        let mut created: Vec<(String, String)> = Vec::new();
        let mut done: HashSet<(String, String)> = HashSet::new();
        let mut gap_items: HashSet<String> = HashSet::new();
        for chunk in positions.chunks(256) {
            for item in handle.read_positions(chunk)? {
                match item.entry.body {
                    EntryBody::RealtimeEvent(ev) => {
                        let ty = ev.payload.get("type").and_then(Value::as_str);
                        let item_id = ev.payload.get("item_id").and_then(Value::as_str);
                        match (ty, item_id) {
                            (Some("input_audio_buffer.committed"), Some(id)) => {
                                let key = (ev.connection_id.clone(), id.to_owned());
                                if !committed.contains(&key) {
                                    committed.push(key);
                                }
                            }
                            (
                                Some("conversation.item.input_audio_transcription.completed"),
                                Some(id),
                            ) => {
                                // An empty final transcript resolves without a message.
                                let empty = ev
                                    .payload
                                    .get("transcript")
                                    .and_then(Value::as_str)
                                    .is_some_and(|t| t.trim().is_empty());
                                if empty {
                                    resolved.insert((ev.connection_id.clone(), id.to_owned()));
                                }
                            }
                            (Some(t @ ("response.created" | "response.done")), _) => {
                                let id = ev
                                    .payload
                                    .get("response")
                                    .and_then(|r| r.get("id"))
                                    .and_then(Value::as_str)
                                    .unwrap_or_default();
                                let key = (ev.connection_id.clone(), id.to_owned());
                                if t == "response.done" {
                                    done.insert(key);
                                } else if !created.contains(&key) {
                                    created.push(key);
                                }
                            }
                            _ => {}
                        }
                    }
                    EntryBody::Message(m) => {
                        let replay = m.replay.as_ref();
                        let s = |k: &str| {
                            replay
                                .and_then(|r| r.get(k))
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned()
                        };
                        resolved.insert((s("connectionId"), s("itemId")));
                    }
                    EntryBody::RecordingFinished(f) => {
                        if f.outcome == Outcome::Incomplete {
                            let mut reasons: Vec<String> = Vec::new();
                            for g in f.gaps.iter().flatten() {
                                if !reasons.contains(&g.reason) {
                                    reasons.push(g.reason.clone());
                                }
                            }
                            incomplete_recordings.push((f.recording_id.clone(), reasons));
                        }
                        for g in f.gaps.unwrap_or_default() {
                            if let Some(id) = g.item_id {
                                gap_items.insert(id);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        pending_items = committed
            .into_iter()
            .filter(|k| !resolved.contains(k) && !gap_items.contains(&k.1))
            .collect();
        if !recordings.is_empty() {
            pending_responses = created.into_iter().filter(|k| !done.contains(k)).collect();
        }
    }
    Ok(UnfinishedWork {
        recordings,
        pending_items,
        pending_responses,
        removal_intents,
        incomplete_recordings,
    })
}
