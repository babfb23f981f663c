//! One client for every model server that speaks OpenAI-compatible Chat Completions
//! (OpenAI, Groq, OpenRouter, Ollama, LM Studio, llama-server), over the HTTP client
//! already in the tree (ureq, rustls).
//!
//! Invariants:
//! - `https://` anywhere, plain `http://` only to a loopback host, no other scheme
//!   (`ws://`, `wss://`) and no user name or password in the URL (the rule of
//!   [`crate::endpoint::check_http_url`]); a loopback server is labelled "this-device",
//!   anything else "cloud".
//! - A loopback server is reached directly, never through a proxy the environment names;
//!   a cloud server through the environment's proxy when one is set
//!   ([`crate::endpoint::proxy_for`]).
//! - No redirect is followed: a `3xx` answer is `cleanup.http-status`, so neither the
//!   transcript nor the key goes anywhere but the configured server, and only its reply is
//!   used.
//! - Every request: temperature 0, `max_tokens` bounded by the input's length, reasoning
//!   asked off (`reasoning_effort: "none"`) and a structured reply asked for
//!   (`response_format` with a JSON schema holding the text); a server that refuses a field
//!   (HTTP 400 or 422) is asked again without the reasoning field, then without the schema,
//!   and this client remembers not to send what it answered without.
//! - Every wait has a deadline: connect and the whole exchange are bounded
//!   ([`Timeouts`]); a reply body is read up to [`MAX_REPLY_BYTES`].
//! - The key is sent only in the `Authorization` header; it is in no error, no `Debug`
//!   output and no log line. Errors carry codes and HTTP statuses, never reply text.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use tokio_tungstenite::tungstenite::http::Uri;

use crate::endpoint;

use super::prompt::Prompt;

/// The most reply bytes read.
pub const MAX_REPLY_BYTES: u64 = 1 << 20;

/// Where and what to ask.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// e.g. `http://127.0.0.1:8080/v1` or `https://api.groq.com/openai/v1`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// How long each part of an exchange may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    /// The whole request, from connect to the last byte of the reply.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(3),
            // Past the delivery deadline on purpose: a result that arrives after the spoken
            // words were delivered is still stored (as late), up to this long.
            total: Duration::from_secs(30),
        }
    }
}

/// Why a request produced no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error("cleanup.bad-url: the model server address is not a URL")]
    BadUrl,
    #[error("cleanup.insecure-url: http:// is allowed only for a server on this machine")]
    InsecureUrl,
    #[error(
        "cleanup.credentials-in-url: the model server address must not carry a user name or password; put the key in the Server key field"
    )]
    CredentialsInUrl,
    #[error("cleanup.tls: no trusted certificates to reach an https:// server")]
    Tls,
    #[error("cleanup.unreachable: the model server could not be reached")]
    Unreachable,
    #[error("cleanup.timeout: the model server did not answer in time")]
    Timeout,
    #[error("cleanup.unauthorized: the model server refused the key (HTTP {status})")]
    Unauthorized { status: u16 },
    #[error("cleanup.rate-limited: the model server is busy (HTTP 429)")]
    RateLimited,
    #[error("cleanup.http-status: the model server answered HTTP {status}")]
    HttpStatus { status: u16 },
    #[error("cleanup.malformed-reply: the reply is not a chat completion")]
    Malformed,
    #[error("cleanup.cut-off: the reply stopped at its length limit")]
    CutOff,
    #[error("cleanup.refused: the model refused to answer")]
    Refused,
}

impl ClientError {
    pub fn code(&self) -> &'static str {
        match self {
            ClientError::BadUrl => "cleanup.bad-url",
            ClientError::InsecureUrl => "cleanup.insecure-url",
            ClientError::CredentialsInUrl => "cleanup.credentials-in-url",
            ClientError::Tls => "cleanup.tls",
            ClientError::Unreachable => "cleanup.unreachable",
            ClientError::Timeout => "cleanup.timeout",
            ClientError::Unauthorized { .. } => "cleanup.unauthorized",
            ClientError::RateLimited => "cleanup.rate-limited",
            ClientError::HttpStatus { .. } => "cleanup.http-status",
            ClientError::Malformed => "cleanup.malformed-reply",
            ClientError::CutOff => "cleanup.cut-off",
            ClientError::Refused => "cleanup.refused",
        }
    }
}

/// A client for one server and model. Cheap to share (`Arc`); remembers whether the server
/// takes the reasoning field.
pub struct Client {
    agent: ureq::Agent,
    config: ServerConfig,
    on_this_device: bool,
    send_reasoning: AtomicBool,
    send_schema: AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.config)
            .field("on_this_device", &self.on_this_device)
            .finish()
    }
}

/// What a server returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// `choices[0].message.content`, unprocessed.
    pub content: String,
    /// Whether the reasoning field was sent with the request that answered.
    pub reasoning_field_sent: bool,
    /// Whether the structured-reply schema was sent with the request that answered.
    pub schema_sent: bool,
}

impl Client {
    pub fn new(config: ServerConfig, timeouts: Timeouts) -> Result<Client, ClientError> {
        let url = config.base_url.trim().trim_end_matches('/').to_owned();
        endpoint::check_http_url(&url).map_err(|e| match e {
            endpoint::EndpointError::Insecure => ClientError::InsecureUrl,
            endpoint::EndpointError::Credentials => ClientError::CredentialsInUrl,
            _ => ClientError::BadUrl,
        })?;
        let uri: Uri = url.parse().map_err(|_| ClientError::BadUrl)?;
        let on_this_device = uri.host().is_some_and(endpoint::is_loopback_host);
        let agent = agent(&uri, timeouts)?;
        Ok(Client {
            agent,
            config: ServerConfig {
                base_url: url,
                ..config
            },
            on_this_device,
            send_reasoning: AtomicBool::new(true),
            send_schema: AtomicBool::new(true),
        })
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// "this-device" or "cloud".
    pub fn location(&self) -> &'static str {
        if self.on_this_device {
            "this-device"
        } else {
            "cloud"
        }
    }

    /// Asks for one completion of `prompt`, with at most `max_tokens` of reply.
    pub fn complete(&self, prompt: &Prompt, max_tokens: u32) -> Result<Reply, ClientError> {
        let mut reasoning = self.send_reasoning.load(Ordering::Relaxed);
        let mut schema = self.send_schema.load(Ordering::Relaxed);
        loop {
            match self.request(prompt, max_tokens, reasoning, schema) {
                // A field was refused; the server does not say which: the reasoning field
                // goes first, then the schema (at most three requests).
                Err(ClientError::HttpStatus { status: 400 | 422 }) if reasoning || schema => {
                    if reasoning {
                        reasoning = false;
                    } else {
                        schema = false;
                    }
                }
                Ok(reply) => {
                    // It answered without them: never send those to this server again.
                    if !reasoning {
                        self.send_reasoning.store(false, Ordering::Relaxed);
                    }
                    if !schema {
                        self.send_schema.store(false, Ordering::Relaxed);
                    }
                    return Ok(reply);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn request(
        &self,
        prompt: &Prompt,
        max_tokens: u32,
        reasoning_field: bool,
        schema: bool,
    ) -> Result<Reply, ClientError> {
        let messages: Vec<Value> = prompt
            .messages
            .iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
            "stream": false,
        });
        if reasoning_field {
            body["reasoning_effort"] = json!("none");
        }
        if schema {
            body["response_format"] = super::prompt::reply_schema();
        }
        let url = format!("{}/chat/completions", self.config.base_url);
        let mut request = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        let bytes = serde_json::to_vec(&body).map_err(|_| ClientError::Malformed)?;
        let response = request.send(&bytes[..]).map_err(transport_error)?;
        let status = response.status().as_u16();
        match status {
            200 => {}
            401 | 403 => return Err(ClientError::Unauthorized { status }),
            429 => return Err(ClientError::RateLimited),
            s => return Err(ClientError::HttpStatus { status: s }),
        }
        let mut raw = Vec::new();
        response
            .into_body()
            .into_reader()
            .take(MAX_REPLY_BYTES)
            .read_to_end(&mut raw)
            .map_err(|e| transport_error(ureq::Error::Io(e)))?;
        parse_reply(&raw).map(|content| Reply {
            content,
            reasoning_field_sent: reasoning_field,
            schema_sent: schema,
        })
    }
}

/// `choices[0].message.content` of a chat completion.
fn parse_reply(raw: &[u8]) -> Result<String, ClientError> {
    let v: Value = serde_json::from_slice(raw).map_err(|_| ClientError::Malformed)?;
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or(ClientError::Malformed)?;
    match choice.get("finish_reason").and_then(Value::as_str) {
        Some("length") => return Err(ClientError::CutOff),
        Some("content_filter") => return Err(ClientError::Refused),
        _ => {}
    }
    let message = choice.get("message").ok_or(ClientError::Malformed)?;
    if message
        .get("refusal")
        .is_some_and(|r| r.as_str().is_some_and(|s| !s.is_empty()))
    {
        return Err(ClientError::Refused);
    }
    match message.get("content") {
        Some(Value::String(s)) => Ok(s.clone()),
        // Some servers send null content with everything in reasoning: nothing to use.
        Some(Value::Null) | None => Ok(String::new()),
        Some(_) => Err(ClientError::Malformed),
    }
}

fn transport_error(e: ureq::Error) -> ClientError {
    match e {
        ureq::Error::Timeout(_) => ClientError::Timeout,
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => ClientError::Timeout,
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock => ClientError::Timeout,
        _ => ClientError::Unreachable,
    }
}

/// `max_tokens` for a reply to `input`: about twice the input's tokens (a token is about
/// four characters of English; other scripts need more), at least 64, at most 8192.
pub fn max_tokens_for(input: &str) -> u32 {
    let chars = input.chars().count() as u64;
    (chars / 2 + 64).clamp(64, 8192) as u32
}

/// The shared agent set-up for `server` (its proxy choice; no redirects) with the
/// clean-up's deadlines.
fn agent(server: &Uri, timeouts: Timeouts) -> Result<ureq::Agent, ClientError> {
    let config = crate::endpoint::http_agent_config(server)
        .ok_or(ClientError::Tls)?
        .timeout_connect(Some(timeouts.connect))
        .timeout_global(Some(timeouts.total))
        .build();
    Ok(config.new_agent())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_or_fail_with_a_code() {
        let ok = br#"{"choices":[{"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}]}"#;
        assert_eq!(parse_reply(ok), Ok("Hi.".to_owned()));
        let cut = br#"{"choices":[{"message":{"content":"Hi"},"finish_reason":"length"}]}"#;
        assert_eq!(parse_reply(cut), Err(ClientError::CutOff));
        let refused = br#"{"choices":[{"message":{"content":null,"refusal":"no"}}]}"#;
        assert_eq!(parse_reply(refused), Err(ClientError::Refused));
        assert_eq!(parse_reply(b"{not json"), Err(ClientError::Malformed));
        assert_eq!(
            parse_reply(br#"{"choices":[]}"#),
            Err(ClientError::Malformed)
        );
        let null = br#"{"choices":[{"message":{"content":null}}]}"#;
        assert_eq!(parse_reply(null), Ok(String::new()));
    }

    #[test]
    fn urls_are_checked_and_labelled() {
        let c = |url: &str| {
            Client::new(
                ServerConfig {
                    base_url: url.to_owned(),
                    model: "m".into(),
                    api_key: Some("sk-secret".into()),
                },
                Timeouts::default(),
            )
        };
        assert_eq!(
            c("http://127.0.0.1:8080/v1/").map(|c| c.location()),
            Ok("this-device")
        );
        assert_eq!(
            c("http://localhost:11434/v1").map(|c| c.location()),
            Ok("this-device")
        );
        assert_eq!(
            c("http://example.com/v1").map(|c| c.location()),
            Err(ClientError::InsecureUrl)
        );
        assert_eq!(
            c("not a url").map(|c| c.location()),
            Err(ClientError::BadUrl)
        );
        // Websocket schemes are for the Realtime API, not a chat server; a user name or
        // password in the URL would go out as Basic authentication.
        for ws in ["ws://127.0.0.1:1/v1", "wss://example.com/v1"] {
            assert_eq!(
                c(ws).map(|c| c.location()),
                Err(ClientError::BadUrl),
                "{ws}"
            );
        }
        assert_eq!(
            c("http://user:pw@127.0.0.1:1/v1").map(|c| c.location()),
            Err(ClientError::CredentialsInUrl)
        );
        let client = c("http://127.0.0.1:1/v1").expect("client");
        assert_eq!(client.config().base_url, "http://127.0.0.1:1/v1");
        assert!(!format!("{client:?}").contains("sk-secret"));
    }

    #[test]
    fn max_tokens_follow_the_input() {
        assert_eq!(max_tokens_for(""), 64);
        assert_eq!(max_tokens_for(&"a".repeat(1000)), 564);
        assert_eq!(max_tokens_for(&"a".repeat(100_000)), 8192);
    }
}
