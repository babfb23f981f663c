//! How a clean-up is kept: beside the spoken words, never instead of them.
//!
//! - An accepted result is a `custom_message` with `customType: "persyk.cleanup"`, display
//!   on, its text as `content`, and `details` that say where it came from (the source
//!   messages' ids and SHA-256, the mode and its prompt hash, the engine and model, the
//!   latency, the guard's figures, and whether it was delivered or arrived late).
//! - A failed, timed-out or refused attempt is a `custom` entry with `customType:
//!   "persyk.cleanup-attempt"` and `data` holding the reason code and figures — no text.
//!
//! Invariants:
//! - The spoken `message` entries are committed before anything here is written, and nothing
//!   here changes them.
//! - Both entries are appended as children of the session's *current tip* (the last entry in
//!   file order, read under the append lock's committed index when the entry is written),
//!   never of the older source message: a late result must not start a sibling branch that
//!   would hide newer dictation from the default leaf.
//! - `details` and `data` are built from typed values only (ids, hashes, codes, figures); the
//!   dictated text appears only in the clean-up's `content`.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::session::LeafSelector;
use crate::session::format::{Custom, CustomContent, CustomMessage, EntryBody};
use crate::session::store::{SessionHandle, StoreError};

use super::guard::Fidelity;

/// `customType` of a stored clean-up.
pub const CLEANUP_TYPE: &str = "persyk.cleanup";
/// `customType` of an attempt that produced no stored clean-up.
pub const ATTEMPT_TYPE: &str = "persyk.cleanup-attempt";

/// A spoken message a clean-up was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceRef {
    /// The `message` entry's id.
    pub id: String,
    /// SHA-256 (hex) of the message's text as it entered the clean-up.
    pub sha256: String,
}

impl SourceRef {
    pub fn new(id: impl Into<String>, text: &str) -> SourceRef {
        SourceRef {
            id: id.into(),
            sha256: sha256_hex(text),
        }
    }
}

/// Whether the clean-up reached the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Delivery {
    /// Pasted or copied in place of the spoken words.
    Delivered,
    /// Arrived after the deadline: the spoken words had been delivered; kept for history.
    Late,
}

/// Who made the clean-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Engine {
    /// "replacements" or "openai-compatible".
    pub kind: String,
    /// The model id the server was asked for, when a model was used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// "this-device" for a loopback server, "cloud" otherwise; absent without a server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// Everything about one clean-up except its text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub sources: Vec<SourceRef>,
    /// SHA-256 of the whole input text (the sources joined as delivered).
    pub input_sha256: String,
    /// "replacements", "tidy", "translate:German", "custom:Notes", …
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_sha256: Option<String>,
    pub engine: Engine,
    pub latency_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<Fidelity>,
    /// Replacements applied (replacements mode only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacements: Option<usize>,
}

/// The `persyk.cleanup` entry for an accepted result.
pub fn cleanup_entry(
    text: &str,
    provenance: &Provenance,
    delivery: Delivery,
    rewritten: bool,
) -> EntryBody {
    let mut details = to_object(provenance);
    details.insert("delivery".into(), to_value(&delivery));
    details.insert("rewritten".into(), Value::Bool(rewritten));
    EntryBody::CustomMessage(CustomMessage {
        custom_type: CLEANUP_TYPE.to_owned(),
        content: CustomContent::Text(text.to_owned()),
        display: true,
        details: Some(Value::Object(details)),
    })
}

/// The `persyk.cleanup-attempt` entry for an attempt that produced nothing to keep.
/// `reason` is a stable code (`cleanup.timeout`, `cleanup.words-missing`, …).
pub fn attempt_entry(reason: &str, provenance: &Provenance) -> EntryBody {
    let mut data = to_object(provenance);
    data.insert("reason".into(), Value::String(reason.to_owned()));
    EntryBody::Custom(Custom {
        custom_type: ATTEMPT_TYPE.to_owned(),
        data: Value::Object(data),
    })
}

/// Appends `body` as a child of the session's current tip; returns the new entry's id.
pub fn append_at_tip(handle: &SessionHandle, body: EntryBody) -> Result<String, StoreError> {
    // Anything another writer appended since this handle last looked is part of the tip.
    handle.refresh()?;
    let mut at_tip = handle.continuation(&LeafSelector::Default)?;
    at_tip.append_one(body)
}

pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn to_value<T: Serialize>(v: &T) -> Value {
    // Plain structs of strings and numbers: serialization cannot fail; a non-finite float
    // (a length ratio over an empty input) becomes null.
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn to_object<T: Serialize>(v: &T) -> serde_json::Map<String, Value> {
    match to_value(v) {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provenance() -> Provenance {
        Provenance {
            sources: vec![SourceRef::new("m1", "so um call me back")],
            input_sha256: sha256_hex("so um call me back"),
            mode: "tidy".into(),
            prompt_sha256: Some("ab".repeat(32)),
            engine: Engine {
                kind: "openai-compatible".into(),
                model: Some("smollm2".into()),
                location: Some("this-device".into()),
            },
            latency_ms: 412,
            fidelity: Some(
                super::super::guard::check(
                    "so um call me back",
                    "Call me back.",
                    super::super::guard::Strictness::Strict,
                )
                .0,
            ),
            replacements: None,
        }
    }

    #[test]
    fn a_clean_up_carries_its_provenance_in_details_and_its_text_only_in_content() {
        let body = cleanup_entry("Call me back.", &provenance(), Delivery::Delivered, false);
        let EntryBody::CustomMessage(cm) = &body else {
            panic!("not a custom_message");
        };
        assert_eq!(cm.custom_type, "persyk.cleanup");
        assert!(cm.display);
        assert_eq!(cm.content, CustomContent::Text("Call me back.".into()));
        let details = cm.details.as_ref().expect("details");
        assert_eq!(details["sources"][0]["id"], "m1");
        assert_eq!(
            details["sources"][0]["sha256"],
            sha256_hex("so um call me back")
        );
        assert_eq!(details["mode"], "tidy");
        assert_eq!(details["engine"]["kind"], "openai-compatible");
        assert_eq!(details["engine"]["location"], "this-device");
        assert_eq!(details["latencyMs"], 412);
        assert_eq!(details["delivery"], "delivered");
        assert_eq!(details["rewritten"], false);
        assert_eq!(details["fidelity"]["checked"], "edits");
        assert_eq!(details["fidelity"]["edits"]["fillers"], 1);
        let text = serde_json::to_string(details).expect("json");
        assert!(!text.contains("call me back"), "{text}");
    }

    #[test]
    fn an_attempt_has_a_reason_and_no_text() {
        let body = attempt_entry("cleanup.timeout", &provenance());
        let EntryBody::Custom(c) = &body else {
            panic!("not a custom entry");
        };
        assert_eq!(c.custom_type, "persyk.cleanup-attempt");
        assert_eq!(c.data["reason"], "cleanup.timeout");
        let text = serde_json::to_string(&c.data).expect("json");
        assert!(!text.to_lowercase().contains("call me back"), "{text}");
    }
}
