//! Typed records of format v1: the header, the entry envelope and every entry type.
//!
//! These are the writer types: what the store appends is built from them, and the property
//! tests prove that what they express validates — within the constraints the types cannot
//! carry themselves (ids match the ID pattern, `customType` is non-empty, `custom_message`
//! blocks are text or image, parents exist earlier); the store validates every record anyway. Reading goes through the validator
//! first ([`super::validate`]); [`Entry::from_line`] is meant for lines it has accepted.
//!
//! Invariants:
//! - Unknown content blocks and unknown keys inside `message` are kept as raw JSON text and
//!   written back byte for byte ([`Block::Unknown`], [`Message::extra`]).
//! - Serialization puts `type`, `id`, `parentId`, `timestamp` first, then the type's fields;
//!   optional fields that are `None` are omitted, never written as `null`.

use std::borrow::Cow;

use indexmap::IndexMap;
use serde::de::{self, DeserializeOwned};
use serde::ser::{self, SerializeMap};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Parses JSON text whose nesting [`super::record::prescan`] has already bounded (≤ 128
/// containers), lifting serde_json's default limit of 127 so the full allowance parses.
pub(super) fn from_str_deep<'a, T: Deserialize<'a>>(s: &'a str) -> Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(s);
    de.disable_recursion_limit();
    let v = T::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Deserializes a present field as `Some`, even when its value is `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The only format version this crate reads or writes.
pub const FORMAT_VERSION: u64 = 1;

/// Line 1 of every session file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub id: String,
    pub timestamp: String,
}

impl Serialize for Header {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("type", "session")?;
        m.serialize_entry("version", &FORMAT_VERSION)?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("timestamp", &self.timestamp)?;
        m.end()
    }
}

impl Header {
    /// The header as one JSON line, without the "\n".
    pub fn to_line(&self) -> String {
        to_line(self)
    }
}

/// One entry line: the common envelope plus a typed body.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub body: EntryBody,
}

/// The type-specific part of an entry.
// Entries are built and read one at a time, never held in bulk (the index keeps no bodies),
// so the size of the `Message` variant costs nothing worth a `Box` in every constructor.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum EntryBody {
    Message(Message),
    Custom(Custom),
    CustomMessage(CustomMessage),
    SessionInfo(SessionInfo),
    Label(Label),
    ModelChange(ModelChange),
    ApiConnection(ApiConnection),
    RealtimeEvent(RealtimeEvent),
    RecordingStarted(RecordingStarted),
    RecordingFinished(RecordingFinished),
    RecordingInterrupted(RecordingInterrupted),
    MessageRemoved(MessageRemoved),
}

impl EntryBody {
    /// The `type` string of this body.
    pub fn type_name(&self) -> &'static str {
        match self {
            EntryBody::Message(_) => "message",
            EntryBody::Custom(_) => "custom",
            EntryBody::CustomMessage(_) => "custom_message",
            EntryBody::SessionInfo(_) => "session_info",
            EntryBody::Label(_) => "label",
            EntryBody::ModelChange(_) => "model_change",
            EntryBody::ApiConnection(_) => "api_connection",
            EntryBody::RealtimeEvent(_) => "realtime_event",
            EntryBody::RecordingStarted(_) => "recording.started",
            EntryBody::RecordingFinished(_) => "recording.finished",
            EntryBody::RecordingInterrupted(_) => "recording.interrupted",
            EntryBody::MessageRemoved(_) => "message.removed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Custom {
    pub custom_type: String,
    pub data: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomMessage {
    pub custom_type: String,
    pub content: CustomContent,
    pub display: bool,
    /// `Some(Value::Null)` when the file says `"details": null`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
}

/// `custom_message.content`: a plain string or text/image blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CustomContent {
    Text(String),
    Blocks(Vec<Block>),
}

impl CustomContent {
    /// The content as blocks (a plain string is one text block).
    pub fn to_blocks(&self) -> Vec<Block> {
        match self {
            CustomContent::Text(t) => vec![Block::text(t.clone())],
            CustomContent::Blocks(b) => b.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for CustomContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CustomContent, D::Error> {
        // Blocks keep raw JSON, which needs the text itself: decide on the raw value.
        let raw = Box::<RawValue>::deserialize(d)?;
        if raw.get().starts_with('"') {
            from_str_deep(raw.get()).map(CustomContent::Text)
        } else {
            from_str_deep(raw.get()).map(CustomContent::Blocks)
        }
        .map_err(de::Error::custom)
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Label {
    pub target_id: String,
    /// `None` clears the target's label.
    pub label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelChange {
    pub provider: String,
    pub model_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiConnection {
    pub connection_id: String,
    pub provider: String,
    /// Credential-free URL.
    pub endpoint: String,
    pub requested_model: String,
    pub api: String,
    pub origin_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Outgoing,
    Incoming,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Observation {
    SendAttempt,
    SendFailed,
    Received,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RealtimeEvent {
    pub connection_id: String,
    pub direction: Direction,
    pub observation: Observation,
    pub observed_at: String,
    pub sequence: u64,
    pub payload: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_event_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redactions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<Vec<MediaRef>>,
}

/// A payload field whose bytes live in an asset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaRef {
    /// JSON pointer into `payload`; that field is removed or `null`.
    pub pointer: String,
    pub asset: AssetRef,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordingStarted {
    pub recording_id: String,
    /// `assets/<NAME>` of the capture WAV.
    pub asset: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Complete,
    Incomplete,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gap {
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordingFinished {
    pub recording_id: String,
    pub duration_ms: u64,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gaps: Option<Vec<Gap>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordingInterrupted {
    pub recording_id: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageRemoved {
    pub target_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    #[serde(rename = "user")]
    User,
    #[serde(rename = "assistant")]
    Assistant,
    #[serde(rename = "toolResult")]
    ToolResult,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

/// Fields a `toolResult` message requires.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultFields {
    pub tool_call_id: String,
    pub tool_name: String,
    pub is_error: bool,
    /// Kept, never sent to a model.
    pub details: Option<Value>,
}

/// A finalized canonical message.
#[derive(Debug, Clone)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
    /// Epoch milliseconds.
    pub timestamp: u64,
    pub api: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub response_id: Option<String>,
    pub usage: Option<Map<String, Value>>,
    pub stop_reason: Option<StopReason>,
    pub error_message: Option<String>,
    /// Non-secret replay metadata, e.g. the provider item id and its connection id.
    pub replay: Option<Map<String, Value>>,
    /// Present exactly when `role` is `toolResult`.
    pub tool_result: Option<ToolResultFields>,
    /// Keys this version does not define, kept byte for byte in their original order.
    pub extra: IndexMap<String, Box<RawValue>>,
}

impl PartialEq for Message {
    fn eq(&self, o: &Message) -> bool {
        self.role == o.role
            && self.content == o.content
            && self.timestamp == o.timestamp
            && self.api == o.api
            && self.provider == o.provider
            && self.model == o.model
            && self.response_id == o.response_id
            && self.usage == o.usage
            && self.stop_reason == o.stop_reason
            && self.error_message == o.error_message
            && self.replay == o.replay
            && self.tool_result == o.tool_result
            && self.extra.len() == o.extra.len()
            && self
                .extra
                .iter()
                .zip(&o.extra)
                .all(|((ka, va), (kb, vb))| ka == kb && va.get() == vb.get())
    }
}

impl Message {
    /// A message with the given role, content and timestamp and nothing else.
    pub fn new(role: Role, content: Vec<Block>, timestamp: u64) -> Message {
        Message {
            role,
            content,
            timestamp,
            api: None,
            provider: None,
            model: None,
            response_id: None,
            usage: None,
            stop_reason: None,
            error_message: None,
            replay: None,
            tool_result: None,
            extra: IndexMap::new(),
        }
    }

    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for b in &self.content {
            if let Block::Text { text } = b {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("role", &self.role)?;
        m.serialize_entry("content", &self.content)?;
        m.serialize_entry("timestamp", &self.timestamp)?;
        macro_rules! opt {
            ($key:literal, $field:expr) => {
                if let Some(v) = &$field {
                    m.serialize_entry($key, v)?;
                }
            };
        }
        opt!("api", self.api);
        opt!("provider", self.provider);
        opt!("model", self.model);
        opt!("responseId", self.response_id);
        opt!("usage", self.usage);
        opt!("stopReason", self.stop_reason);
        opt!("errorMessage", self.error_message);
        opt!("replay", self.replay);
        if let Some(t) = &self.tool_result {
            m.serialize_entry("toolCallId", &t.tool_call_id)?;
            m.serialize_entry("toolName", &t.tool_name)?;
            m.serialize_entry("isError", &t.is_error)?;
            opt!("details", t.details);
        }
        for (k, v) in &self.extra {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Raw object fields, in order, for field-by-field typed parsing.
struct Fields(IndexMap<String, Box<RawValue>>);

impl Fields {
    fn take<T: DeserializeOwned, E: de::Error>(&mut self, key: &'static str) -> Result<T, E> {
        match self.0.shift_remove(key) {
            Some(raw) => from_str_deep(raw.get()).map_err(E::custom),
            None => Err(E::missing_field(key)),
        }
    }
    fn opt<T: DeserializeOwned, E: de::Error>(
        &mut self,
        key: &'static str,
    ) -> Result<Option<T>, E> {
        match self.0.shift_remove(key) {
            Some(raw) => from_str_deep(raw.get()).map(Some).map_err(E::custom),
            None => Ok(None),
        }
    }
    /// The remaining fields as one JSON object text.
    fn rest_as_object(&self) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(k).unwrap_or_default());
            out.push(':');
            out.push_str(v.get());
        }
        out.push('}');
        out
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Message, D::Error> {
        let mut f = Fields(IndexMap::deserialize(d)?);
        let role: Role = f.take("role")?;
        let tool_result = if role == Role::ToolResult {
            Some(ToolResultFields {
                tool_call_id: f.take("toolCallId")?,
                tool_name: f.take("toolName")?,
                is_error: f.take("isError")?,
                details: f.opt("details")?,
            })
        } else {
            None
        };
        Ok(Message {
            role,
            content: f.take("content")?,
            timestamp: f.take("timestamp")?,
            api: f.opt("api")?,
            provider: f.opt("provider")?,
            model: f.opt("model")?,
            response_id: f.opt("responseId")?,
            usage: f.opt("usage")?,
            stop_reason: f.opt("stopReason")?,
            error_message: f.opt("errorMessage")?,
            replay: f.opt("replay")?,
            tool_result,
            extra: f.0,
        })
    }
}

/// Half-open byte range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

/// A millisecond range inside a recording, `start_ms < end_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MsRange {
    pub start_ms: u64,
    pub end_ms: u64,
}

/// A reference from a record to a file under `assets/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status")]
pub enum AssetRef {
    #[serde(rename = "available", rename_all = "camelCase")]
    Available {
        /// `assets/<NAME>`.
        path: String,
        mime_type: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        byte_range: Option<ByteRange>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encoding: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
    },
    #[serde(rename = "missing")]
    Missing {
        reason: String,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        source: Option<Value>,
    },
}

/// A content block. Unknown block types are kept verbatim.
#[derive(Debug, Clone)]
pub enum Block {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        signature: Option<String>,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Map<String, Value>,
    },
    Image {
        asset: AssetRef,
    },
    Audio {
        asset: AssetRef,
        recording_id: Option<String>,
        range: Option<MsRange>,
    },
    /// A block whose `type` this version does not know, as its original JSON text.
    Unknown(Box<RawValue>),
}

impl PartialEq for Block {
    fn eq(&self, other: &Block) -> bool {
        use Block::*;
        match (self, other) {
            (Text { text: a }, Text { text: b }) => a == b,
            (
                Thinking {
                    thinking: a,
                    signature: sa,
                },
                Thinking {
                    thinking: b,
                    signature: sb,
                },
            ) => a == b && sa == sb,
            (
                ToolCall {
                    id: a,
                    name: na,
                    arguments: xa,
                },
                ToolCall {
                    id: b,
                    name: nb,
                    arguments: xb,
                },
            ) => a == b && na == nb && xa == xb,
            (Image { asset: a }, Image { asset: b }) => a == b,
            (
                Audio {
                    asset: a,
                    recording_id: ra,
                    range: ga,
                },
                Audio {
                    asset: b,
                    recording_id: rb,
                    range: gb,
                },
            ) => a == b && ra == rb && ga == gb,
            (Unknown(a), Unknown(b)) => a.get() == b.get(),
            _ => false,
        }
    }
}

impl Block {
    /// The block's `type` string.
    pub fn type_name(&self) -> Cow<'_, str> {
        match self {
            Block::Text { .. } => "text".into(),
            Block::Thinking { .. } => "thinking".into(),
            Block::ToolCall { .. } => "toolCall".into(),
            Block::Image { .. } => "image".into(),
            Block::Audio { .. } => "audio".into(),
            Block::Unknown(raw) => {
                #[derive(Deserialize)]
                struct Peek {
                    #[serde(rename = "type")]
                    ty: Option<String>,
                }
                serde_json::from_str::<Peek>(raw.get())
                    .ok()
                    .and_then(|p| p.ty)
                    .map_or("unknown".into(), Cow::Owned)
            }
        }
    }

    /// A text block.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text { text: text.into() }
    }
}

/// Blocks as one line for people: text blocks as written, every other block as `[type]`,
/// separated by spaces.
pub fn display_text(blocks: &[Block]) -> String {
    let parts: Vec<Cow<'_, str>> = blocks
        .iter()
        .map(|b| match b {
            Block::Text { text } => Cow::Borrowed(text.as_str()),
            other => Cow::Owned(format!("[{}]", other.type_name())),
        })
        .collect();
    parts.join(" ")
}

/// The words of blocks, for copying and pasting: text blocks only, separated by spaces.
/// Audio, images and every other block carry no words of their own ("[audio]" is never
/// part of what a user copies).
pub fn spoken_text(blocks: &[Block]) -> String {
    let parts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    parts.join(" ")
}

impl Serialize for Block {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Block::Unknown(raw) = self {
            return raw.serialize(s);
        }
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", &self.type_name())?;
        match self {
            Block::Text { text } => m.serialize_entry("text", text)?,
            Block::Thinking {
                thinking,
                signature,
            } => {
                m.serialize_entry("thinking", thinking)?;
                if let Some(sig) = signature {
                    m.serialize_entry("signature", sig)?;
                }
            }
            Block::ToolCall {
                id,
                name,
                arguments,
            } => {
                m.serialize_entry("id", id)?;
                m.serialize_entry("name", name)?;
                m.serialize_entry("arguments", arguments)?;
            }
            Block::Image { asset } => m.serialize_entry("asset", asset)?,
            Block::Audio {
                asset,
                recording_id,
                range,
            } => {
                m.serialize_entry("asset", asset)?;
                if let Some(r) = recording_id {
                    m.serialize_entry("recordingId", r)?;
                }
                if let Some(r) = range {
                    m.serialize_entry("range", r)?;
                }
            }
            Block::Unknown(_) => return Err(ser::Error::custom("unreachable")),
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Block, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        #[derive(Deserialize)]
        struct Peek<'a> {
            #[serde(rename = "type", borrow)]
            ty: Cow<'a, str>,
        }
        let peek: Peek = serde_json::from_str(raw.get()).map_err(de::Error::custom)?;
        let known = matches!(
            peek.ty.as_ref(),
            "text" | "thinking" | "toolCall" | "image" | "audio"
        );
        if !known {
            return Ok(Block::Unknown(raw));
        }
        #[derive(Deserialize)]
        #[serde(tag = "type", deny_unknown_fields)]
        enum Known {
            #[serde(rename = "text")]
            Text { text: String },
            #[serde(rename = "thinking")]
            Thinking {
                thinking: String,
                #[serde(default)]
                signature: Option<String>,
            },
            #[serde(rename = "toolCall")]
            ToolCall {
                id: String,
                name: String,
                arguments: Map<String, Value>,
            },
            #[serde(rename = "image")]
            Image { asset: AssetRef },
            #[serde(rename = "audio", rename_all = "camelCase")]
            Audio {
                asset: AssetRef,
                #[serde(default)]
                recording_id: Option<String>,
                #[serde(default)]
                range: Option<MsRange>,
            },
        }
        let known: Known = from_str_deep(raw.get()).map_err(de::Error::custom)?;
        Ok(match known {
            Known::Text { text } => Block::Text { text },
            Known::Thinking {
                thinking,
                signature,
            } => Block::Thinking {
                thinking,
                signature,
            },
            Known::ToolCall {
                id,
                name,
                arguments,
            } => Block::ToolCall {
                id,
                name,
                arguments,
            },
            Known::Image { asset } => Block::Image { asset },
            Known::Audio {
                asset,
                recording_id,
                range,
            } => Block::Audio {
                asset,
                recording_id,
                range,
            },
        })
    }
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.body.type_name())?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("parentId", &self.parent_id)?;
        m.serialize_entry("timestamp", &self.timestamp)?;
        fn fields<M: SerializeMap, T: Serialize>(m: &mut M, body: &T) -> Result<(), M::Error> {
            match serde_json::to_value(body) {
                Ok(Value::Object(obj)) => {
                    for (k, v) in &obj {
                        m.serialize_entry(k, v)?;
                    }
                    Ok(())
                }
                Ok(_) => Err(ser::Error::custom("entry body is not an object")),
                Err(e) => Err(ser::Error::custom(e)),
            }
        }
        match &self.body {
            EntryBody::Message(msg) => m.serialize_entry("message", msg)?,
            EntryBody::Custom(b) => fields(&mut m, b)?,
            EntryBody::CustomMessage(b) => {
                // Content blocks may hold raw JSON: write them directly.
                m.serialize_entry("customType", &b.custom_type)?;
                m.serialize_entry("content", &b.content)?;
                m.serialize_entry("display", &b.display)?;
                if let Some(d) = &b.details {
                    m.serialize_entry("details", d)?;
                }
            }
            EntryBody::SessionInfo(b) => fields(&mut m, b)?,
            EntryBody::Label(b) => fields(&mut m, b)?,
            EntryBody::ModelChange(b) => fields(&mut m, b)?,
            EntryBody::ApiConnection(b) => fields(&mut m, b)?,
            EntryBody::RealtimeEvent(b) => fields(&mut m, b)?,
            EntryBody::RecordingStarted(b) => fields(&mut m, b)?,
            EntryBody::RecordingFinished(b) => fields(&mut m, b)?,
            EntryBody::RecordingInterrupted(b) => fields(&mut m, b)?,
            EntryBody::MessageRemoved(b) => fields(&mut m, b)?,
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Entry, D::Error> {
        let mut f = Fields(IndexMap::deserialize(d)?);
        let ty: String = f.take("type")?;
        let id = f.take("id")?;
        let parent_id = f.take("parentId")?;
        let timestamp = f.take("timestamp")?;
        fn rest<T: DeserializeOwned, E: de::Error>(f: &Fields) -> Result<T, E> {
            from_str_deep(&f.rest_as_object()).map_err(E::custom)
        }
        let body = match ty.as_str() {
            "message" => {
                let message = f.take("message")?;
                if !f.0.is_empty() {
                    return Err(de::Error::custom("unknown field in message entry"));
                }
                EntryBody::Message(message)
            }
            "custom" => EntryBody::Custom(rest(&f)?),
            "custom_message" => EntryBody::CustomMessage(rest(&f)?),
            "session_info" => EntryBody::SessionInfo(rest(&f)?),
            "label" => EntryBody::Label(rest(&f)?),
            "model_change" => EntryBody::ModelChange(rest(&f)?),
            "api_connection" => EntryBody::ApiConnection(rest(&f)?),
            "realtime_event" => EntryBody::RealtimeEvent(rest(&f)?),
            "recording.started" => EntryBody::RecordingStarted(rest(&f)?),
            "recording.finished" => EntryBody::RecordingFinished(rest(&f)?),
            "recording.interrupted" => EntryBody::RecordingInterrupted(rest(&f)?),
            "message.removed" => EntryBody::MessageRemoved(rest(&f)?),
            _ => return Err(de::Error::custom("unknown entry type")),
        };
        Ok(Entry {
            id,
            parent_id,
            timestamp,
            body,
        })
    }
}

impl Entry {
    /// The entry as one JSON line, without the "\n".
    pub fn to_line(&self) -> String {
        to_line(self)
    }

    /// Parses a line the validator accepted.
    pub fn from_line(line: &str) -> Result<Entry, serde_json::Error> {
        // Bound the depth first, then let the typed parse use the full 128 levels.
        if let Err(code) = super::record::prescan(line.as_bytes()) {
            return Err(serde::de::Error::custom(code.as_str()));
        }
        from_str_deep(line)
    }

    /// The message, for `message` entries.
    pub fn message(&self) -> Option<&Message> {
        match &self.body {
            EntryBody::Message(m) => Some(m),
            _ => None,
        }
    }
}

fn to_line<T: Serialize>(value: &T) -> String {
    // Serializing these types into a String cannot fail: every map key is a string and
    // every number is an integer or a finite float.
    serde_json::to_string(value).unwrap_or_else(|e| unreachable!("serialization failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_block_and_keys_round_trip_byte_for_byte() {
        let line = r#"{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hi"},{"type":"hologram","z":1.50,"w":"\u00e9"}],"timestamp":1,"vendorExtra":{"b":1e3, "a":[ 1 ,2]}}}"#;
        let e = Entry::from_line(line).expect("parses");
        let out = e.to_line();
        assert!(
            out.contains(r#"{"type":"hologram","z":1.50,"w":"\u00e9"}"#),
            "{out}"
        );
        assert!(
            out.contains(r#""vendorExtra":{"b":1e3, "a":[ 1 ,2]}"#),
            "{out}"
        );
        assert_eq!(Entry::from_line(&out).expect("reparses"), e);
    }

    #[test]
    fn header_line() {
        let h = Header {
            id: "00000000-0000-4000-8000-000000000002".into(),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
        };
        assert_eq!(
            h.to_line(),
            r#"{"type":"session","version":1,"id":"00000000-0000-4000-8000-000000000002","timestamp":"2026-01-01T00:00:00.000Z"}"#
        );
    }
}
