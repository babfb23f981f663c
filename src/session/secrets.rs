//! Recognizing text that looks like a credential.
//!
//! Used wherever the core must refuse to persist or print a secret: endpoints in
//! `api_connection` entries, and (through the realtime sanitizer) provider payloads. The rules
//! are deliberately broad: a false positive costs a redaction, a false negative leaks a key.

/// Prefixes of known credential formats, each followed by at least [`MIN_SECRET_TAIL`] token
/// characters: OpenAI API keys (`sk-…`, `sk-proj-…`) and ephemeral client secrets (`ek_…`).
const PREFIXES: &[&str] = &["sk-", "ek_", "rk-", "sess-"];
const MIN_SECRET_TAIL: usize = 16;

fn is_token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_')
}

/// Whether a URL query parameter named `name` (any case) carries a credential: `key`, `sig`,
/// `auth`, `authorization`, `code`, or any name ending in key/token/secret/password/signature.
pub fn is_credential_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    matches!(
        name.as_str(),
        "key" | "sig" | "auth" | "authorization" | "code"
    ) || ["key", "token", "secret", "password", "signature"]
        .iter()
        .any(|suffix| name.ends_with(suffix))
}

/// Whether `s` contains something shaped like an API key or bearer token.
pub fn looks_secret(s: &str) -> bool {
    let b = s.as_bytes();
    for prefix in PREFIXES {
        let mut from = 0;
        while let Some(pos) = s[from..].find(prefix) {
            let start = from + pos;
            // The prefix must begin a token, not sit inside a longer word.
            let boundary = start == 0 || !is_token_char(b[start - 1]);
            let tail = b[start + prefix.len()..]
                .iter()
                .take_while(|&&c| is_token_char(c))
                .count();
            if boundary && tail >= MIN_SECRET_TAIL {
                return true;
            }
            from = start + prefix.len();
        }
    }
    let lower = s.to_ascii_lowercase();
    if let Some(pos) = lower.find("bearer ") {
        let tail = b[pos + 7..]
            .iter()
            .take_while(|&&c| is_token_char(c) || c == b'.')
            .count();
        if tail >= 8 {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::looks_secret;

    #[test]
    fn shapes() {
        assert!(looks_secret("sk-proj-abcdefghijklmnopqrstuvwxyz"));
        assert!(looks_secret("key=ek_1234567890abcdef1234"));
        assert!(looks_secret("Authorization: Bearer abc.def.ghi"));
        assert!(!looks_secret("ask-me anything"));
        assert!(!looks_secret("task-1"));
        assert!(!looks_secret("sk-short"));
        assert!(!looks_secret("plain dictated text about a desk"));
    }
}
