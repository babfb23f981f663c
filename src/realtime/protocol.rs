//! The OpenAI Realtime API wire protocol: the client events Persyk sends and the server
//! events it understands (GA shape; the beta shape only behind [`Settings::beta`]).
//!
//! Invariants:
//! - Events are plain `serde_json` objects: unknown fields and unknown event types pass
//!   through untouched (they are retained as evidence and otherwise ignored).
//! - Every client event carries a fresh `event_id`, so a server `error` can name it.
//! - The API key never appears in anything built here; it only travels in the
//!   `Authorization` header of the connection request.

use serde_json::{Map, Value, json};

/// Dictation (transcription only) or conversation (the assistant answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Transcription,
    Conversation,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Transcription => "transcription",
            Mode::Conversation => "conversation",
        }
    }
}

/// Provider settings for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// e.g. `wss://api.openai.com/v1`, or `ws://127.0.0.1:PORT/v1` for a loopback server.
    pub base_url: String,
    pub mode: Mode,
    /// Transcription model (`gpt-4o-transcribe`) in dictation mode.
    pub transcription_model: String,
    /// Conversation model (`gpt-realtime`) in conversation mode.
    pub conversation_model: String,
    pub language: Option<String>,
    /// Speak the beta event shape (`OpenAI-Beta: realtime=v1`); api.openai.com rejects it.
    pub beta: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            base_url: "wss://api.openai.com/v1".to_owned(),
            mode: Mode::Transcription,
            transcription_model: "gpt-4o-transcribe".to_owned(),
            conversation_model: "gpt-realtime".to_owned(),
            language: None,
            beta: false,
        }
    }
}

/// Sample rate of `audio/pcm` both ways.
pub const PCM_RATE_HZ: u32 = 24_000;

impl Settings {
    /// The websocket URL to connect to.
    pub fn url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        match self.mode {
            Mode::Transcription => format!("{base}/realtime?intent=transcription"),
            Mode::Conversation => format!("{base}/realtime?model={}", self.conversation_model),
        }
    }

    /// The model named in provenance records.
    pub fn requested_model(&self) -> &str {
        match self.mode {
            Mode::Transcription => &self.transcription_model,
            Mode::Conversation => &self.conversation_model,
        }
    }

    /// The `session.update` that configures the session.
    pub fn session_update(&self) -> Map<String, Value> {
        let mut transcription = json!({ "model": self.transcription_model });
        if let Some(lang) = &self.language {
            transcription["language"] = json!(lang);
        }
        if self.beta {
            return self.beta_session_update(transcription);
        }
        let format = json!({"type": "audio/pcm", "rate": PCM_RATE_HZ});
        let session = match self.mode {
            Mode::Transcription => json!({
                "type": "transcription",
                "audio": {"input": {
                    "format": format,
                    "transcription": transcription,
                    "turn_detection": {"type": "server_vad"},
                }},
            }),
            Mode::Conversation => json!({
                "type": "realtime",
                "model": self.conversation_model,
                "audio": {
                    "input": {
                        "format": format,
                        "transcription": transcription,
                        "turn_detection": {"type": "server_vad"},
                    },
                    "output": {"format": {"type": "audio/pcm", "rate": PCM_RATE_HZ}},
                },
            }),
        };
        event("session.update", [("session", session)])
    }

    /// The beta shape (`OpenAI-Beta: realtime=v1`): flat audio formats, and a separate
    /// `transcription_session.update` for dictation.
    fn beta_session_update(&self, transcription: Value) -> Map<String, Value> {
        match self.mode {
            Mode::Transcription => event(
                "transcription_session.update",
                [(
                    "session",
                    json!({
                        "input_audio_format": "pcm16",
                        "input_audio_transcription": transcription,
                        "turn_detection": {"type": "server_vad"},
                    }),
                )],
            ),
            Mode::Conversation => event(
                "session.update",
                [(
                    "session",
                    json!({
                        "modalities": ["text", "audio"],
                        "input_audio_format": "pcm16",
                        "output_audio_format": "pcm16",
                        "input_audio_transcription": transcription,
                        "turn_detection": {"type": "server_vad"},
                    }),
                )],
            ),
        }
    }
}

/// A fresh client event id.
pub fn new_event_id() -> String {
    format!("evt_{}", uuid::Uuid::now_v7().simple())
}

fn event<const N: usize>(ty: &str, fields: [(&str, Value); N]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), Value::String(ty.to_owned()));
    m.insert("event_id".into(), Value::String(new_event_id()));
    for (k, v) in fields {
        m.insert(k.to_owned(), v);
    }
    m
}

/// `input_audio_buffer.append` with base64 audio.
pub fn append(audio_base64: String) -> Map<String, Value> {
    event(
        "input_audio_buffer.append",
        [("audio", Value::String(audio_base64))],
    )
}

/// `input_audio_buffer.commit`.
pub fn commit() -> Map<String, Value> {
    event("input_audio_buffer.commit", [])
}

/// `conversation.item.delete`.
pub fn item_delete(item_id: &str) -> Map<String, Value> {
    event("conversation.item.delete", [("item_id", json!(item_id))])
}

/// How a `response.done` ended, with each output message's transcript or text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseDone {
    pub response_id: String,
    pub status: String,
    pub status_reason: Option<String>,
    /// `(item_id, text)` of each output message.
    pub items: Vec<(String, String)>,
}

/// The server events the engine acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    SessionCreated,
    SessionUpdated,
    /// `input_audio_buffer.committed`.
    Committed {
        item_id: String,
        previous: Option<String>,
    },
    /// `conversation.item.added` (GA) / `conversation.item.created` (beta).
    ItemAdded {
        item_id: String,
        previous: Option<String>,
        role: Option<String>,
    },
    TranscriptionDelta {
        item_id: String,
        delta: String,
    },
    TranscriptionCompleted {
        item_id: String,
        transcript: String,
    },
    TranscriptionFailed {
        item_id: String,
        reason: String,
    },
    /// Assistant transcript or text delta (provisional).
    ResponseDelta {
        item_id: String,
        delta: String,
    },
    /// `response.created`: a response is streaming until its `response.done`.
    ResponseCreated {
        response_id: String,
    },
    /// `response.output_item.added`: an output item of a streaming response.
    ResponseItemAdded {
        response_id: String,
        item_id: String,
    },
    ResponseDone(ResponseDone),
    ItemDeleted {
        item_id: String,
    },
    Error {
        code: Option<String>,
        /// The client event that failed.
        event_id: Option<String>,
    },
    /// Retained, otherwise ignored.
    Other,
}

fn s(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_owned)
}

/// Reads the fields the engine needs from a server event.
pub fn classify(ev: &Value) -> ServerEvent {
    let ty = ev.get("type").and_then(Value::as_str).unwrap_or_default();
    let item_id = || s(ev, "item_id").unwrap_or_default();
    match ty {
        "session.created" | "transcription_session.created" => ServerEvent::SessionCreated,
        "session.updated" | "transcription_session.updated" => ServerEvent::SessionUpdated,
        "input_audio_buffer.committed" => ServerEvent::Committed {
            item_id: item_id(),
            previous: s(ev, "previous_item_id"),
        },
        "conversation.item.added" | "conversation.item.created" => {
            let item = ev.get("item").cloned().unwrap_or(Value::Null);
            ServerEvent::ItemAdded {
                item_id: s(&item, "id").unwrap_or_default(),
                previous: s(ev, "previous_item_id"),
                role: s(&item, "role"),
            }
        }
        "conversation.item.input_audio_transcription.delta" => ServerEvent::TranscriptionDelta {
            item_id: item_id(),
            delta: s(ev, "delta").unwrap_or_default(),
        },
        "conversation.item.input_audio_transcription.completed" => {
            ServerEvent::TranscriptionCompleted {
                item_id: item_id(),
                transcript: s(ev, "transcript").unwrap_or_default(),
            }
        }
        "conversation.item.input_audio_transcription.failed" => {
            let err = ev.get("error").cloned().unwrap_or(Value::Null);
            ServerEvent::TranscriptionFailed {
                item_id: item_id(),
                reason: s(&err, "code")
                    .or_else(|| s(&err, "type"))
                    .unwrap_or_else(|| "transcription_failed".to_owned()),
            }
        }
        "response.output_audio_transcript.delta"
        | "response.output_text.delta"
        | "response.audio_transcript.delta"
        | "response.text.delta" => ServerEvent::ResponseDelta {
            item_id: item_id(),
            delta: s(ev, "delta").unwrap_or_default(),
        },
        "response.created" => {
            let r = ev.get("response").cloned().unwrap_or(Value::Null);
            ServerEvent::ResponseCreated {
                response_id: s(&r, "id").unwrap_or_default(),
            }
        }
        "response.output_item.added" => {
            let item = ev.get("item").cloned().unwrap_or(Value::Null);
            ServerEvent::ResponseItemAdded {
                response_id: s(ev, "response_id").unwrap_or_default(),
                item_id: s(&item, "id").unwrap_or_default(),
            }
        }
        "response.done" => {
            let r = ev.get("response").cloned().unwrap_or(Value::Null);
            let details = r.get("status_details").cloned().unwrap_or(Value::Null);
            let items = r
                .get("output")
                .and_then(Value::as_array)
                .map(|out| {
                    out.iter()
                        .filter(|i| i.get("type").and_then(Value::as_str) == Some("message"))
                        .map(|i| (s(i, "id").unwrap_or_default(), item_text(i)))
                        .collect()
                })
                .unwrap_or_default();
            ServerEvent::ResponseDone(ResponseDone {
                response_id: s(&r, "id").unwrap_or_default(),
                status: s(&r, "status").unwrap_or_default(),
                status_reason: s(&details, "reason"),
                items,
            })
        }
        "conversation.item.deleted" => ServerEvent::ItemDeleted { item_id: item_id() },
        "error" => {
            let err = ev.get("error").cloned().unwrap_or(Value::Null);
            ServerEvent::Error {
                code: s(&err, "code"),
                event_id: s(&err, "event_id"),
            }
        }
        _ => ServerEvent::Other,
    }
}

/// The text of an output message item: its `output_text` texts or `output_audio` transcripts.
fn item_text(item: &Value) -> String {
    let mut out = String::new();
    for part in item
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = part
            .get("text")
            .or_else(|| part.get("transcript"))
            .and_then(Value::as_str);
        if let Some(t) = text {
            out.push_str(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_update() {
        let mut s = Settings {
            base_url: "ws://127.0.0.1:9/v1/".into(),
            ..Settings::default()
        };
        assert_eq!(s.url(), "ws://127.0.0.1:9/v1/realtime?intent=transcription");
        let u = s.session_update();
        assert_eq!(u["session"]["type"], "transcription");
        assert_eq!(u["session"]["audio"]["input"]["format"]["rate"], 24000);
        s.mode = Mode::Conversation;
        assert_eq!(s.url(), "ws://127.0.0.1:9/v1/realtime?model=gpt-realtime");
        s.beta = true;
        let b = s.session_update();
        assert_eq!(b["type"], "session.update");
        assert_eq!(b["session"]["input_audio_format"], "pcm16");
        s.mode = Mode::Transcription;
        assert_eq!(s.session_update()["type"], "transcription_session.update");
    }

    #[test]
    fn classify_events() {
        let ev = json!({"type":"input_audio_buffer.committed","event_id":"e","item_id":"b","previous_item_id":"a"});
        assert_eq!(
            classify(&ev),
            ServerEvent::Committed {
                item_id: "b".into(),
                previous: Some("a".into())
            }
        );
        let ev = json!({"type":"error","event_id":"e2","error":{"type":"invalid_request_error","code":"input_audio_buffer_commit_empty","message":"m","event_id":"evt_1"}});
        assert_eq!(
            classify(&ev),
            ServerEvent::Error {
                code: Some("input_audio_buffer_commit_empty".into()),
                event_id: Some("evt_1".into())
            }
        );
        let ev = json!({"type":"response.created","response":{"id":"r","status":"in_progress"}});
        assert_eq!(
            classify(&ev),
            ServerEvent::ResponseCreated {
                response_id: "r".into()
            }
        );
        let ev = json!({"type":"response.done","response":{"id":"r","status":"completed","output":[{"id":"i","type":"message","role":"assistant","content":[{"type":"output_audio","transcript":"Hi"}]}]}});
        match classify(&ev) {
            ServerEvent::ResponseDone(d) => assert_eq!(d.items, vec![("i".into(), "Hi".into())]),
            other => panic!("{other:?}"),
        }
    }
}
