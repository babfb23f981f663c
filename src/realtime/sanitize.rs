//! Removing credentials from provider payloads, URLs and headers before anything is persisted,
//! logged or shown.
//!
//! Invariants:
//! - [`sanitize_value`] is total: it walks every string and key of any JSON value, in place,
//!   and returns the RFC 6901 pointer of every value it changed (for `realtime_event.redactions`).
//! - What it removes: values under credential-named keys (`authorization`, `api-key`,
//!   `api_key`, `x-api-key`, `password`, tool `headers`); `client_secret` values (the GA
//!   ephemeral key object or string); `Sec-WebSocket-Protocol` `openai-insecure-api-key.*`
//!   entries; any `sk-…`/`ek_…`-shaped token or bearer token inside any string; user-info and
//!   credential query parameters of URLs inside any string.
//! - Speech is not rewritten. The values of [`SPEECH_KEYS`] (`transcript`, `delta`, `text`:
//!   what the user said or the assistant answered) and canonical message text go through
//!   [`sanitize_speech`], which redacts only high-confidence credential shapes (`sk-…`,
//!   `ek_…` keys); "the bearer of bad news" or a dictated URL's `?code=42` stay as spoken.
//!   Everything else in a payload gets the full treatment above.
//! - A redacted value becomes the string [`REDACTED`]; a redacted substring becomes
//!   `[redacted]` inside the surrounding text, so the rest stays useful as evidence.

use serde_json::{Map, Value};

use crate::session::secrets::{is_credential_param, looks_secret};

/// What a redacted value or substring is replaced with.
pub const REDACTED: &str = "[redacted]";

const SECRET_KEYS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "api-key",
    "api_key",
    "apikey",
    "x-api-key",
    "openai-api-key",
    "password",
    "client_secret",
    "secret",
    "access_token",
    "refresh_token",
    "headers",
    "cookie",
    "set-cookie",
];

/// Payload keys whose string values are speech (transcripts, transcript and text deltas,
/// text parts): only [`sanitize_speech`] applies to them.
pub const SPEECH_KEYS: &[&str] = &["transcript", "delta", "text"];

fn escape_token(t: &str) -> String {
    t.replace('~', "~0").replace('/', "~1")
}

/// Sanitizes `value` in place; returns the JSON pointers of redacted values.
pub fn sanitize_value(value: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(value, &mut String::new(), &mut out);
    out
}

/// Sanitizes a payload object in place (see [`sanitize_value`]).
pub fn sanitize_object(obj: &mut Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let mut path = String::new();
    walk_object(obj, &mut path, &mut out);
    out
}

fn walk(value: &mut Value, path: &mut String, out: &mut Vec<String>) {
    match value {
        Value::Object(m) => walk_object(m, path, out),
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                walk(v, path, out);
                path.truncate(len);
            }
        }
        Value::String(s) => {
            if let Some(clean) = sanitize_text(s) {
                *s = clean;
                out.push(path.clone());
            }
        }
        _ => {}
    }
}

fn walk_object(m: &mut Map<String, Value>, path: &mut String, out: &mut Vec<String>) {
    for (k, v) in m.iter_mut() {
        let len = path.len();
        path.push('/');
        path.push_str(&escape_token(k));
        let key = k.to_ascii_lowercase();
        if key == "client_secret"
            && let Value::Object(secret) = v
        {
            // The GA ephemeral key object: keep `expires_at`, drop `value`.
            if let Some(val) = secret.get_mut("value")
                && !is_redacted(val)
            {
                *val = Value::String(REDACTED.to_owned());
                out.push(format!("{path}/value"));
            }
        } else if SECRET_KEYS.contains(&key.as_str()) && !v.is_null() && !is_redacted(v) {
            *v = Value::String(REDACTED.to_owned());
            out.push(path.clone());
        } else if key == "sec-websocket-protocol" {
            redact_protocols(v, path, out);
        } else if SPEECH_KEYS.contains(&key.as_str())
            && let Value::String(text) = v
        {
            if let Some(clean) = sanitize_speech(text) {
                *text = clean;
                out.push(path.clone());
            }
        } else {
            walk(v, path, out);
        }
        path.truncate(len);
    }
}

fn is_redacted(v: &Value) -> bool {
    v.as_str() == Some(REDACTED)
}

fn redact_protocols(v: &mut Value, path: &str, out: &mut Vec<String>) {
    if let Value::String(s) = v {
        let parts: Vec<String> = s
            .split(',')
            .map(|p| {
                let p = p.trim();
                if p.starts_with("openai-insecure-api-key.") {
                    format!("openai-insecure-api-key.{REDACTED}")
                } else {
                    p.to_owned()
                }
            })
            .collect();
        let joined = parts.join(", ");
        if joined != *s {
            *s = joined;
            out.push(path.to_owned());
        }
    }
}

/// Returns a copy of spoken text with only high-confidence credential shapes (`sk-…`,
/// `ek_…` and the other key prefixes of [`looks_secret`], at least 16 characters after the
/// prefix) replaced by `[redacted]`; `None` when there is none. Words such as "bearer" and
/// URLs in the speech stay as they are.
pub fn sanitize_speech(s: &str) -> Option<String> {
    if !looks_secret(s) {
        return None;
    }
    let out = redact_tokens(s);
    (out != s).then_some(out)
}

/// Returns a cleaned copy of `s` when it contains a credential-shaped token, a bearer token,
/// or a URL with user-info or credential query parameters; `None` when it is clean.
pub fn sanitize_text(s: &str) -> Option<String> {
    let needs = looks_secret(s) || s.contains("://") || s.to_ascii_lowercase().contains("bearer ");
    if !needs {
        return None;
    }
    let mut changed = false;
    let mut out = String::with_capacity(s.len());
    for (i, word) in split_keep(s).into_iter().enumerate() {
        let _ = i;
        let cleaned = clean_word(word);
        if cleaned != word {
            changed = true;
        }
        out.push_str(&cleaned);
    }
    // "Bearer <token>": redact the token after the word.
    let lower = out.to_ascii_lowercase();
    if let Some(pos) = lower.find("bearer ") {
        let start = pos + 7;
        let end = out[start..]
            .find(char::is_whitespace)
            .map_or(out.len(), |e| start + e);
        if end > start && &out[start..end] != REDACTED {
            out.replace_range(start..end, REDACTED);
            changed = true;
        }
    }
    changed.then_some(out)
}

/// Splits into alternating runs of whitespace and non-whitespace, keeping both.
fn split_keep(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (i, c) in s.char_indices() {
        let space =
            c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '(' | ')' | '<' | '>');
        match in_space {
            Some(prev) if prev != space => {
                parts.push(&s[start..i]);
                start = i;
            }
            _ => {}
        }
        in_space = Some(space);
    }
    if start < s.len() {
        parts.push(&s[start..]);
    }
    parts
}

fn clean_word(word: &str) -> String {
    if word.contains("://") {
        return sanitize_url(word).0;
    }
    if looks_secret(word) {
        return redact_tokens(word);
    }
    word.to_owned()
}

/// Replaces every credential-shaped token inside `word` with `[redacted]`.
fn redact_tokens(word: &str) -> String {
    let mut out = String::new();
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        if looks_secret(token) {
            out.push_str(REDACTED);
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for c in word.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

/// Removes user-info and credential query parameters from a URL (and any secret-shaped
/// token); returns the cleaned URL and whether anything changed.
pub fn sanitize_url(url: &str) -> (String, bool) {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let auth_start = scheme_end + 3;
        let auth_end = out[auth_start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |e| auth_start + e);
        if let Some(at) = out[auth_start..auth_end].rfind('@') {
            out.replace_range(auth_start..auth_start + at, REDACTED);
        }
    }
    if let Some(q) = out.find('?') {
        let (base, query) = out.split_at(q + 1);
        let (query, fragment) = match query.find('#') {
            Some(h) => (&query[..h], &query[h..]),
            None => (query, ""),
        };
        let cleaned: Vec<String> = query
            .split('&')
            .map(|pair| {
                let (name, _) = pair.split_once('=').unwrap_or((pair, ""));
                if is_credential_param(name) && pair.contains('=') {
                    format!("{name}={REDACTED}")
                } else {
                    pair.to_owned()
                }
            })
            .collect();
        out = format!("{base}{}{fragment}", cleaned.join("&"));
    }
    if looks_secret(&out) {
        out = redact_tokens(&out);
    }
    let changed = out != url;
    (out, changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX0123456789";

    #[test]
    fn redacts_every_shape() {
        let mut v = json!({
            "type": "session.update",
            "headers": {"Authorization": format!("Bearer {KEY}")},
            "session": {
                "client_secret": {"value": "ek_68af12345678901234567890", "expires_at": 1},
                "tools": [{"type": "mcp", "server_url": "https://u:p@mcp.example.com/x?token=abc&q=1",
                           "authorization": "tok", "headers": {"X": "y"}}],
                "instructions": format!("my key is {KEY}, keep it"),
            },
            "Sec-WebSocket-Protocol": "realtime, openai-insecure-api-key.sk-abc, openai-beta.realtime-v1",
            "text": "an ordinary sentence about desks",
        });
        let ptrs = sanitize_value(&mut v);
        let text = v.to_string();
        assert!(!text.contains("sk-proj"), "{text}");
        assert!(!text.contains("ek_68"), "{text}");
        assert!(!text.contains("u:p@"), "{text}");
        assert!(!text.contains("token=abc"), "{text}");
        assert!(text.contains("q=1"));
        assert!(text.contains("keep it"));
        assert!(text.contains("expires_at"));
        assert!(text.contains("openai-beta.realtime-v1"));
        assert!(text.contains("an ordinary sentence about desks"));
        for p in [
            "/headers",
            "/session/client_secret/value",
            "/session/tools/0/server_url",
            "/session/tools/0/authorization",
            "/session/tools/0/headers",
            "/session/instructions",
            "/Sec-WebSocket-Protocol",
        ] {
            assert!(ptrs.iter().any(|x| x == p), "missing {p} in {ptrs:?}");
        }
        assert_eq!(ptrs.len(), 7, "{ptrs:?}");
        // Idempotent.
        assert!(sanitize_value(&mut v).is_empty());
    }

    #[test]
    fn speech_keeps_words_and_loses_keys() {
        assert_eq!(sanitize_speech("I am the bearer of bad news."), None);
        assert_eq!(
            sanitize_speech("see https://example.com/docs?code=42"),
            None
        );
        assert_eq!(
            sanitize_speech(&format!("my key is {KEY}, ok")).as_deref(),
            Some("my key is [redacted], ok")
        );
        let mut v = json!({"type": "conversation.item.input_audio_transcription.completed",
            "transcript": "Bearer of https://u:p@example.com/x?token=1",
            "error": {"message": "see https://u:p@example.com/x?token=1"}});
        let ptrs = sanitize_value(&mut v);
        assert_eq!(ptrs, ["/error/message"]);
        assert_eq!(
            v["transcript"],
            "Bearer of https://u:p@example.com/x?token=1"
        );
    }

    #[test]
    fn urls() {
        assert!(!sanitize_url("wss://api.openai.com/v1/realtime?intent=transcription").1);
        let (u, changed) = sanitize_url("wss://x.test/v1?api_key=123&model=m#f");
        assert!(changed);
        assert_eq!(u, "wss://x.test/v1?api_key=[redacted]&model=m#f");
    }
}
