//! Removal intents: how a removal survives a crash or a local write failure.
//!
//! Before the engine asks the provider to delete an item it appends a `custom` entry of type
//! [`INTENT_TYPE`] naming the message entry, the provider item and its connection. After the
//! provider's acknowledgement it appends `message.removed`. If that append fails (or the app
//! dies in between), the intent stays on disk with the retained `conversation.item.deleted`
//! event as proof of the remote success; [`reconcile`] later appends the missing
//! `message.removed` locally — it never sends the delete again.
//!
//! Invariants:
//! - An intent without proof of remote deletion is reported ([`pending_intents`]) and left
//!   alone: the remote outcome is unknown, and nothing is fabricated.
//! - The engine makes the proof (the retained `conversation.item.deleted`) durable in its own
//!   append before it appends `message.removed`, so a failed `message.removed` never takes the
//!   proof with it: the intent stays retryable.
//! - An intent names the delete's client `event_id`; a retained `error` naming that event id
//!   on the same connection is an explicit rejection. A rejected intent is settled (the
//!   content stays), so it is not pending and never looks like an unconfirmed one.
//! - `message.removed` only excludes; the message text and audio stay in the file.

use serde_json::{Value, json};

use crate::session::format::{Custom, EntryBody, MessageRemoved};
use crate::session::index::EntryKind;
use crate::session::store::{SessionHandle, StoreError};

/// `customType` of a removal intent.
pub const INTENT_TYPE: &str = "persyk.removal-intent";

/// The intent entry for removing message entry `target_id` (provider item `item_id` on
/// connection `connection_id`, asked with the client event `event_id`).
pub fn intent_body(
    target_id: &str,
    item_id: &str,
    connection_id: &str,
    event_id: &str,
) -> EntryBody {
    EntryBody::Custom(Custom {
        custom_type: INTENT_TYPE.into(),
        data: json!({"targetId": target_id, "itemId": item_id, "connectionId": connection_id,
                     "eventId": event_id}),
    })
}

/// A removal that was requested and has no `message.removed` yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingIntent {
    pub target_id: String,
    pub item_id: String,
    pub connection_id: String,
    /// A retained `conversation.item.deleted` for this item on this connection exists.
    pub remote_deleted: bool,
}

/// What [`reconcile`] did with one pending intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciled {
    /// `message.removed` appended (the provider had confirmed).
    Applied { target_id: String },
    /// No proof of remote deletion: left pending, reported.
    Unconfirmed { target_id: String },
    /// The target is not on the current branch; a removal there would be invalid.
    NotOnBranch { target_id: String },
}

fn positions_of(
    handle: &SessionHandle,
    pred: impl Fn(EntryKind, Option<&str>) -> bool,
) -> Vec<u32> {
    handle.with_index(|i| {
        (0..i.len() as u32)
            .filter(|&p| pred(i.entry(p).kind(), i.custom_type(p).map(|t| &**t)))
            .collect()
    })
}

/// Removal intents without a `message.removed` and not rejected by the provider, with
/// whether the provider confirmed them.
pub fn pending_intents(handle: &SessionHandle) -> Result<Vec<PendingIntent>, StoreError> {
    let intent_pos = positions_of(handle, |k, t| {
        k == EntryKind::Custom && t == Some(INTENT_TYPE)
    });
    if intent_pos.is_empty() {
        return Ok(Vec::new());
    }
    let mut intents = Vec::new();
    let mut event_ids: Vec<String> = Vec::new();
    for chunk in intent_pos.chunks(256) {
        for item in handle.read_positions(chunk)? {
            if let EntryBody::Custom(c) = item.entry.body {
                let s = |k: &str| {
                    c.data
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                event_ids.push(s("eventId"));
                intents.push(PendingIntent {
                    target_id: s("targetId"),
                    item_id: s("itemId"),
                    connection_id: s("connectionId"),
                    remote_deleted: false,
                });
            }
        }
    }
    let removed: Vec<String> = handle.with_index(|i| {
        (0..i.len() as u32)
            .filter_map(|p| i.entry(p).removal_target().map(|t| i.id(t).into_owned()))
            .collect()
    });
    let mut open: Vec<(PendingIntent, String, bool)> = intents
        .into_iter()
        .zip(event_ids)
        .filter(|(it, _)| !removed.contains(&it.target_id))
        .map(|(it, ev)| (it, ev, false))
        .collect();
    if open.is_empty() {
        return Ok(Vec::new());
    }
    let events = positions_of(handle, |k, _| k == EntryKind::RealtimeEvent);
    for chunk in events.chunks(256) {
        for item in handle.read_positions(chunk)? {
            let EntryBody::RealtimeEvent(ev) = item.entry.body else {
                continue;
            };
            match ev.payload.get("type").and_then(Value::as_str) {
                Some("conversation.item.deleted") => {
                    let item_id = ev.payload.get("item_id").and_then(Value::as_str);
                    for (it, _, _) in open.iter_mut() {
                        if Some(it.item_id.as_str()) == item_id
                            && it.connection_id == ev.connection_id
                        {
                            it.remote_deleted = true;
                        }
                    }
                }
                Some("error") => {
                    let failed = ev
                        .payload
                        .get("error")
                        .and_then(|e| e.get("event_id"))
                        .and_then(Value::as_str);
                    for (it, event_id, rejected) in open.iter_mut() {
                        if !event_id.is_empty()
                            && Some(event_id.as_str()) == failed
                            && it.connection_id == ev.connection_id
                        {
                            *rejected = true;
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Ok(open
        .into_iter()
        .filter(|(it, _, rejected)| it.remote_deleted || !rejected)
        .map(|(it, _, _)| it)
        .collect())
}

/// Applies confirmed intents locally (appends `message.removed` below the default leaf).
pub fn reconcile(handle: &SessionHandle) -> Result<Vec<Reconciled>, StoreError> {
    let mut out = Vec::new();
    for it in pending_intents(handle)? {
        if !it.remote_deleted {
            out.push(Reconciled::Unconfirmed {
                target_id: it.target_id,
            });
            continue;
        }
        let (leaf, on_branch) = handle.with_index(|i| {
            let leaf = i.len().checked_sub(1).map(|p| p as u32);
            let on = match (leaf, i.position(&it.target_id)) {
                (Some(l), Some(t)) => i.is_ancestor_or_self(t, l),
                _ => false,
            };
            (leaf.map(|l| i.id(l).into_owned()), on)
        });
        if !on_branch {
            out.push(Reconciled::NotOnBranch {
                target_id: it.target_id,
            });
            continue;
        }
        let mut c = handle.continuation(&crate::session::LeafSelector::Default)?;
        c.set_leaf(leaf);
        c.append_one(EntryBody::MessageRemoved(MessageRemoved {
            target_id: it.target_id.clone(),
        }))?;
        out.push(Reconciled::Applied {
            target_id: it.target_id,
        });
    }
    Ok(out)
}
