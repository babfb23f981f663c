//! The OpenAI Realtime API wire protocol: the client events Persyk sends and the server
//! events it understands (GA shape only: the beta shape, `OpenAI-Beta: realtime=v1`, is
//! refused by the service and is gone).
//!
//! Invariants:
//! - Events are plain `serde_json` objects: unknown fields and unknown event types pass
//!   through untouched (they are retained as evidence and otherwise ignored).
//! - Every client event carries a fresh `event_id`, so a server `error` can name it.
//! - The API key never appears in anything built here; it only travels in the
//!   `Authorization` header of the connection request.
//! - What a transcription model accepts comes from one table, [`TRANSCRIPTION_MODELS`]
//!   (looked up by [`model_caps`]): turn detection (`server_vad` or client commits with
//!   `"turn_detection": null` sent explicitly), `keywords`, `prompt`, `delay`, and the
//!   retirement date of legacy models. [`Settings::session_update`] never sends a field the
//!   model refuses, and [`Settings::check`] refuses bad keywords and both language fields
//!   before anything is sent.

use serde_json::{Map, Value, json};

use crate::audio::PCM_RATE_HZ;

/// How a transcription model's turns end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turns {
    /// The service's voice activity detection commits (`turn_detection: server_vad`).
    ServerVad,
    /// The client commits each turn (`turn_detection: null`); see [`super::turns`].
    Client,
}

/// What one transcription model accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelCaps {
    pub name: &'static str,
    pub turns: Turns,
    /// Accepts `transcription.keywords`.
    pub keywords: bool,
    /// Accepts `transcription.prompt`.
    pub prompt: bool,
    /// Accepts `transcription.delay`.
    pub delay: bool,
    /// The service stops this model on that day (ISO date); `None`: current.
    pub retires_on: Option<&'static str>,
}

/// The day the legacy transcription models stop (OpenAI's announcement of 2026-08-26).
pub const LEGACY_SHUTDOWN: &str = "2027-02-26";

const fn legacy(name: &'static str) -> ModelCaps {
    ModelCaps {
        name,
        turns: Turns::ServerVad,
        keywords: false,
        prompt: true,
        delay: false,
        retires_on: Some(LEGACY_SHUTDOWN),
    }
}

/// The one capability table of transcription models, current ones first.
pub const TRANSCRIPTION_MODELS: &[ModelCaps] = &[
    ModelCaps {
        name: "gpt-live-transcribe",
        turns: Turns::Client,
        keywords: true,
        prompt: true,
        delay: false,
        retires_on: None,
    },
    ModelCaps {
        name: "gpt-transcribe",
        turns: Turns::ServerVad,
        keywords: true,
        prompt: true,
        delay: false,
        retires_on: None,
    },
    ModelCaps {
        name: "gpt-realtime-whisper",
        turns: Turns::Client,
        keywords: false,
        prompt: false,
        delay: true,
        retires_on: None,
    },
    legacy("gpt-4o-transcribe"),
    legacy("gpt-4o-mini-transcribe"),
    legacy("gpt-4o-mini-transcribe-2025-12-15"),
    legacy("gpt-4o-transcribe-diarize"),
    legacy("whisper-1"),
];

/// The default transcription model.
pub const DEFAULT_TRANSCRIPTION_MODEL: &str = "gpt-live-transcribe";

/// The input transcription of a conversation when the configured model takes no turn
/// detection (a conversation's turns are server VAD).
pub const CONVERSATION_TRANSCRIPTION_MODEL: &str = "gpt-transcribe";

/// The `delay` values `gpt-realtime-whisper` takes.
pub const DELAYS: &[&str] = &["minimal", "low", "medium", "high", "xhigh"];

/// The capabilities of `model`. A model the table does not know gets the conservative
/// set: client turns (every model takes `turn_detection: null` and commits), a prompt, no
/// keywords, no delay.
pub fn model_caps(model: &str) -> ModelCaps {
    TRANSCRIPTION_MODELS
        .iter()
        .find(|m| m.name == model)
        .copied()
        .unwrap_or(ModelCaps {
            name: "",
            turns: Turns::Client,
            keywords: false,
            prompt: true,
            delay: false,
            retires_on: None,
        })
}

/// Whether `model` is a legacy model that stops working on [`LEGACY_SHUTDOWN`].
pub fn retires_on(model: &str) -> Option<&'static str> {
    TRANSCRIPTION_MODELS
        .iter()
        .find(|m| m.name == model)
        .and_then(|m| m.retires_on)
}

/// Input noise reduction (`audio.input.noise_reduction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NoiseReduction {
    Off,
    /// A headset or laptop microphone close to the mouth (the dictation default).
    #[default]
    NearField,
    FarField,
}

/// Why provider settings cannot be sent (checked before anything is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    #[error(
        "provider.bad-keyword: a keyword must be one non-empty line without '<' or '>' (at most 100 characters)"
    )]
    BadKeyword,
    #[error("provider.too-many-keywords: at most 100 keywords")]
    TooManyKeywords,
    #[error("provider.both-language-fields: give one language or several, not both")]
    BothLanguageFields,
    #[error("provider.bad-delay: the delay must be minimal, low, medium, high or xhigh")]
    BadDelay,
}

impl ProtocolError {
    pub fn code(&self) -> &'static str {
        match self {
            ProtocolError::BadKeyword => "provider.bad-keyword",
            ProtocolError::TooManyKeywords => "provider.too-many-keywords",
            ProtocolError::BothLanguageFields => "provider.both-language-fields",
            ProtocolError::BadDelay => "provider.bad-delay",
        }
    }
}

/// Most keywords sent.
pub const MAX_KEYWORDS: usize = 100;
/// Longest keyword, in characters.
pub const MAX_KEYWORD_CHARS: usize = 100;

/// Checks one keyword: one non-empty line without `<`, `>`, CR or LF (one bad keyword makes
/// the service reject the whole update).
pub fn check_keyword(word: &str) -> Result<(), ProtocolError> {
    let ok = !word.trim().is_empty()
        && word.chars().count() <= MAX_KEYWORD_CHARS
        && !word
            .chars()
            .any(|c| matches!(c, '<' | '>' | '\r' | '\n') || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(ProtocolError::BadKeyword)
    }
}

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
    /// Transcription model ([`DEFAULT_TRANSCRIPTION_MODEL`]) in dictation mode.
    pub transcription_model: String,
    /// Conversation model (`gpt-realtime`) in conversation mode.
    pub conversation_model: String,
    /// One language hint (`language`); never together with `languages`.
    pub language: Option<String>,
    /// Several language hints (`languages`).
    pub languages: Vec<String>,
    /// Words the model should know: `keywords` where the model takes them, else folded into
    /// the `prompt` where it takes one.
    pub keywords: Vec<String>,
    /// `delay` (models whose caps say so): one of [`DELAYS`].
    pub delay: Option<String>,
    pub noise_reduction: NoiseReduction,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            base_url: "wss://api.openai.com/v1".to_owned(),
            mode: Mode::Transcription,
            transcription_model: DEFAULT_TRANSCRIPTION_MODEL.to_owned(),
            conversation_model: "gpt-realtime".to_owned(),
            language: None,
            languages: Vec::new(),
            keywords: Vec::new(),
            delay: None,
            noise_reduction: NoiseReduction::NearField,
        }
    }
}

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

    /// Who ends turns: the transcription model's caps in dictation; server VAD in
    /// conversation (its turns request the assistant's responses).
    pub fn turns(&self) -> Turns {
        match self.mode {
            Mode::Transcription => model_caps(&self.transcription_model).turns,
            Mode::Conversation => Turns::ServerVad,
        }
    }

    /// Checks what the user typed before anything is sent: keywords, language fields, delay.
    pub fn check(&self) -> Result<(), ProtocolError> {
        if self.keywords.len() > MAX_KEYWORDS {
            return Err(ProtocolError::TooManyKeywords);
        }
        for k in &self.keywords {
            check_keyword(k)?;
        }
        if self.language.is_some() && !self.languages.is_empty() {
            return Err(ProtocolError::BothLanguageFields);
        }
        if let Some(d) = &self.delay
            && !DELAYS.contains(&d.as_str())
        {
            return Err(ProtocolError::BadDelay);
        }
        Ok(())
    }

    /// The transcription model sent: the configured one, except that a conversation (whose
    /// turns are server VAD) uses [`CONVERSATION_TRANSCRIPTION_MODEL`] instead of a model that
    /// supports no turn detection.
    pub fn effective_transcription_model(&self) -> &str {
        match self.mode {
            Mode::Conversation if model_caps(&self.transcription_model).turns == Turns::Client => {
                CONVERSATION_TRANSCRIPTION_MODEL
            }
            _ => &self.transcription_model,
        }
    }

    /// The `audio.input.transcription` object, with only the fields the model takes.
    fn transcription(&self) -> Value {
        let model = self.effective_transcription_model();
        let caps = model_caps(model);
        let mut t = Map::new();
        t.insert("model".into(), json!(model));
        if let Some(lang) = &self.language {
            t.insert("language".into(), json!(lang));
        } else if !self.languages.is_empty() {
            t.insert("languages".into(), json!(self.languages));
        }
        let words: Vec<&str> = self.keywords.iter().map(|k| k.trim()).collect();
        if !words.is_empty() {
            if caps.keywords {
                t.insert("keywords".into(), json!(words));
            } else if caps.prompt {
                t.insert(
                    "prompt".into(),
                    json!(format!("Vocabulary: {}.", words.join(", "))),
                );
            }
        }
        if caps.delay
            && let Some(d) = &self.delay
        {
            t.insert("delay".into(), json!(d));
        }
        Value::Object(t)
    }

    fn noise_reduction_json(&self) -> Value {
        match self.noise_reduction {
            NoiseReduction::Off => Value::Null,
            NoiseReduction::NearField => json!({"type": "near_field"}),
            NoiseReduction::FarField => json!({"type": "far_field"}),
        }
    }

    /// The `session.update` that configures the session. `turn_detection` is always
    /// present: `null` (client turns) is sent explicitly, since an omitted field may fall
    /// back to server VAD, which the streaming models refuse.
    pub fn session_update(&self) -> Map<String, Value> {
        let format = json!({"type": "audio/pcm", "rate": PCM_RATE_HZ});
        let turn_detection = match self.turns() {
            Turns::ServerVad => json!({"type": "server_vad"}),
            Turns::Client => Value::Null,
        };
        let input = json!({
            "format": format,
            "transcription": self.transcription(),
            "noise_reduction": self.noise_reduction_json(),
            "turn_detection": turn_detection,
        });
        let session = match self.mode {
            Mode::Transcription => json!({
                "type": "transcription",
                "audio": {"input": input},
            }),
            Mode::Conversation => json!({
                "type": "realtime",
                "model": self.conversation_model,
                "audio": {
                    "input": input,
                    "output": {"format": {"type": "audio/pcm", "rate": PCM_RATE_HZ}},
                },
            }),
        };
        event("session.update", [("session", session)])
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
    /// `conversation.item.added` (and `conversation.item.created`, an older name).
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
        assert_eq!(u["type"], "session.update");
        assert_eq!(u["session"]["type"], "transcription");
        let input = &u["session"]["audio"]["input"];
        assert_eq!(input["format"]["rate"], 24000);
        assert_eq!(input["transcription"]["model"], "gpt-live-transcribe");
        // Explicitly null: the streaming models refuse any turn detection.
        assert_eq!(input.get("turn_detection"), Some(&Value::Null));
        assert_eq!(input["noise_reduction"]["type"], "near_field");
        s.transcription_model = "gpt-4o-transcribe".into();
        let u = s.session_update();
        assert_eq!(
            u["session"]["audio"]["input"]["turn_detection"]["type"],
            "server_vad"
        );
        s.mode = Mode::Conversation;
        assert_eq!(s.url(), "ws://127.0.0.1:9/v1/realtime?model=gpt-realtime");
        assert_eq!(s.turns(), Turns::ServerVad);
        // A conversation never pairs server VAD with a model that refuses it.
        s.transcription_model = DEFAULT_TRANSCRIPTION_MODEL.into();
        let u = s.session_update();
        let input = &u["session"]["audio"]["input"];
        assert_eq!(input["transcription"]["model"], "gpt-transcribe");
        assert_eq!(input["turn_detection"]["type"], "server_vad");
    }

    #[test]
    fn fields_follow_the_capability_table() {
        let mut s = Settings {
            keywords: vec!["Persyk".into(), " rubato ".into()],
            languages: vec!["en".into(), "uk".into()],
            delay: Some("low".into()),
            ..Settings::default()
        };
        let t =
            |s: &Settings| s.session_update()["session"]["audio"]["input"]["transcription"].clone();
        let live = t(&s);
        assert_eq!(live["keywords"], json!(["Persyk", "rubato"]));
        assert_eq!(live["languages"], json!(["en", "uk"]));
        assert!(live.get("language").is_none() && live.get("delay").is_none());
        s.transcription_model = "gpt-realtime-whisper".into();
        let whisper = t(&s);
        assert_eq!(whisper["delay"], "low");
        assert!(whisper.get("keywords").is_none() && whisper.get("prompt").is_none());
        s.transcription_model = "gpt-4o-transcribe".into();
        let legacy = t(&s);
        assert_eq!(legacy["prompt"], "Vocabulary: Persyk, rubato.");
        assert!(legacy.get("keywords").is_none());
        assert_eq!(retires_on("gpt-4o-transcribe"), Some(LEGACY_SHUTDOWN));
        assert_eq!(retires_on("gpt-live-transcribe"), None);
    }

    #[test]
    fn bad_settings_are_refused_before_sending() {
        let mut s = Settings::default();
        assert_eq!(s.check(), Ok(()));
        for bad in ["a<b", "x>", "two\nlines", "cr\r", "", "   "] {
            s.keywords = vec!["fine".into(), bad.into()];
            assert_eq!(s.check(), Err(ProtocolError::BadKeyword), "{bad:?}");
        }
        s.keywords = vec!["w".into(); MAX_KEYWORDS + 1];
        assert_eq!(s.check().unwrap_err().code(), "provider.too-many-keywords");
        s.keywords.clear();
        s.language = Some("en".into());
        s.languages = vec!["de".into()];
        assert_eq!(s.check(), Err(ProtocolError::BothLanguageFields));
        s.languages.clear();
        s.delay = Some("fast".into());
        assert_eq!(s.check().unwrap_err().code(), "provider.bad-delay");
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
