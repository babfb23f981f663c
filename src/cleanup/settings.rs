//! The `cleanup` section of the settings file: the mode, the modes by app, the model server,
//! the replacements.
//!
//! Invariants:
//! - The default is "As spoken" with no replacements: nothing runs, nothing is written.
//! - A mode by app ([`AppRule`]) replaces the mode, and only the mode, for a dictation that
//!   starts while that app is in front ([`CleanupSettings::for_app`]); the server, the
//!   replacements and the deadline stay the same for every app.
//! - A misconfigured clean-up never blocks a recording: [`CleanupSettings::cleaner`] returns
//!   the problem as a code, and the app delivers the spoken words with that reason.
//! - The server's key is not in this file (it lives in the secret store).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::client::{Client, ClientError, ServerConfig, Timeouts};
use super::prompt::ModelMode;
use super::replace::{Replacements, Rule};
use super::{Cleaner, DEFAULT_DEADLINE, ModelSetup};

/// Which clean-up runs after a dictation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CleanupMode {
    /// The words as recognized (replacements still apply).
    #[default]
    AsSpoken,
    Tidy,
    Polish,
    Email,
    Translate,
    Custom,
}

impl CleanupMode {
    pub const ALL: [CleanupMode; 6] = [
        CleanupMode::AsSpoken,
        CleanupMode::Tidy,
        CleanupMode::Polish,
        CleanupMode::Email,
        CleanupMode::Translate,
        CleanupMode::Custom,
    ];

    /// The name the app shows.
    pub fn label(self) -> &'static str {
        match self {
            CleanupMode::AsSpoken => "As spoken",
            CleanupMode::Tidy => "Tidy",
            CleanupMode::Polish => "Polish",
            CleanupMode::Email => "Email or message",
            CleanupMode::Translate => "Translate",
            CleanupMode::Custom => "My instruction",
        }
    }

    /// One sentence on what the mode does.
    pub fn description(self) -> &'static str {
        match self {
            CleanupMode::AsSpoken => "Your words exactly as recognized; no model is asked.",
            CleanupMode::Tidy => {
                "Fillers, false starts and punctuation fixed; every other word stays."
            }
            CleanupMode::Polish => "Grammar and flow improved; the content stays.",
            CleanupMode::Email => "Formatted as a message with greeting and paragraphs.",
            CleanupMode::Translate => "Translated into the language you choose.",
            CleanupMode::Custom => "Your own instruction, inside the same checks.",
        }
    }

    pub fn uses_model(self) -> bool {
        self != CleanupMode::AsSpoken
    }
}

/// Why the clean-up settings cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CleanupSettingsError {
    #[error("cleanup.no-server: a clean-up mode needs a model server address")]
    NoServer,
    #[error("cleanup.no-model: a clean-up mode needs a model name")]
    NoModel,
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
    #[error("cleanup.no-language: Translate needs a language")]
    NoLanguage,
    #[error("cleanup.no-instruction: My instruction needs an instruction")]
    NoInstruction,
    #[error("cleanup.bad-deadline: the deadline is 0.5 to 30 seconds")]
    BadDeadline,
    #[error("cleanup.bad-app-rule: a mode by app needs the app's identifier")]
    BadAppRule,
    #[error("{0}")]
    Replacements(super::replace::ReplaceError),
}

impl CleanupSettingsError {
    pub fn code(&self) -> &'static str {
        match self {
            CleanupSettingsError::NoServer => "cleanup.no-server",
            CleanupSettingsError::NoModel => "cleanup.no-model",
            CleanupSettingsError::BadUrl => "cleanup.bad-url",
            CleanupSettingsError::InsecureUrl => "cleanup.insecure-url",
            CleanupSettingsError::CredentialsInUrl => "cleanup.credentials-in-url",
            CleanupSettingsError::Tls => "cleanup.tls",
            CleanupSettingsError::NoLanguage => "cleanup.no-language",
            CleanupSettingsError::NoInstruction => "cleanup.no-instruction",
            CleanupSettingsError::BadDeadline => "cleanup.bad-deadline",
            CleanupSettingsError::BadAppRule => "cleanup.bad-app-rule",
            CleanupSettingsError::Replacements(e) => e.code(),
        }
    }
}

/// A mode for dictations into one app: `app` is the app's identifier — its bundle identifier
/// on macOS (`com.apple.mail`), its `WM_CLASS` class or instance on X11 (`thunderbird`) —
/// compared without regard to case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppRule {
    pub app: String,
    pub mode: CleanupMode,
}

impl AppRule {
    /// Whether this rule is for the app known by `ids` (any of them).
    pub fn matches(&self, ids: &[String]) -> bool {
        let app = self.app.trim();
        !app.is_empty() && ids.iter().any(|id| id.trim().eq_ignore_ascii_case(app))
    }
}

/// The `cleanup` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupSettings {
    #[serde(default)]
    pub mode: CleanupMode,
    /// Modes by app, first match wins; every other app gets `mode`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_app: Vec<AppRule>,
    /// The mode of the "Dictate + clean" shortcut (`hotkey.dictateClean`); `None` = Tidy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shortcut_mode: Option<CleanupMode>,
    /// Translate's target language, e.g. "German".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub language: String,
    /// My instruction's text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instruction: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replacements: Vec<Rule>,
    /// The OpenAI-compatible server, e.g. `http://127.0.0.1:11434/v1` (Ollama).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// The delivery deadline; `None` = [`DEFAULT_DEADLINE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u32>,
}

impl CleanupSettings {
    pub fn is_default(&self) -> bool {
        *self == CleanupSettings::default()
    }

    /// These settings for a dictation into the app known by `ids` (its bundle identifier, or
    /// its `WM_CLASS` class and instance; empty when unknown): the first [`AppRule`] that
    /// matches sets the mode, and whether one did is returned beside.
    pub fn for_app(&self, ids: &[String]) -> (CleanupSettings, bool) {
        match self.per_app.iter().find(|r| r.matches(ids)) {
            Some(rule) => (
                CleanupSettings {
                    mode: rule.mode,
                    ..self.clone()
                },
                true,
            ),
            None => (self.clone(), false),
        }
    }

    /// The mode of the "Dictate + clean" shortcut.
    pub fn shortcut_mode(&self) -> CleanupMode {
        self.shortcut_mode.unwrap_or(CleanupMode::Tidy)
    }

    /// These settings with `mode` in place of every other choice (the "Dictate + clean"
    /// shortcut overrides the default and the app's mode).
    pub fn with_mode(&self, mode: CleanupMode) -> CleanupSettings {
        CleanupSettings {
            mode,
            ..self.clone()
        }
    }

    /// Whether any mode, the default's or an app's, asks a model.
    pub fn any_model(&self) -> bool {
        self.mode.uses_model() || self.per_app.iter().any(|r| r.mode.uses_model())
    }

    /// The model mode, when the mode uses a model.
    pub fn model_mode(&self) -> Option<ModelMode> {
        match self.mode {
            CleanupMode::AsSpoken => None,
            CleanupMode::Tidy => Some(ModelMode::Tidy),
            CleanupMode::Polish => Some(ModelMode::Polish),
            CleanupMode::Email => Some(ModelMode::Email),
            CleanupMode::Translate => Some(ModelMode::Translate {
                language: self.language.trim().to_owned(),
            }),
            CleanupMode::Custom => Some(ModelMode::Custom {
                name: "mine".to_owned(),
                instruction: self.instruction.trim().to_owned(),
            }),
        }
    }

    pub fn deadline(&self) -> Duration {
        self.deadline_ms
            .map_or(DEFAULT_DEADLINE, |ms| Duration::from_millis(ms.into()))
    }

    /// Checks what a user can type (no network, no key).
    pub fn validate(&self) -> Result<(), CleanupSettingsError> {
        Replacements::new(&self.replacements).map_err(CleanupSettingsError::Replacements)?;
        if self
            .deadline_ms
            .is_some_and(|ms| !(500..=30_000).contains(&ms))
        {
            return Err(CleanupSettingsError::BadDeadline);
        }
        if self.per_app.iter().any(|r| r.app.trim().is_empty()) {
            return Err(CleanupSettingsError::BadAppRule);
        }
        if !self.any_model() {
            return Ok(());
        }
        let modes = std::iter::once(self.mode).chain(self.per_app.iter().map(|r| r.mode));
        for mode in modes {
            match mode {
                CleanupMode::Translate if self.language.trim().is_empty() => {
                    return Err(CleanupSettingsError::NoLanguage);
                }
                CleanupMode::Custom if self.instruction.trim().is_empty() => {
                    return Err(CleanupSettingsError::NoInstruction);
                }
                _ => {}
            }
        }
        if self.base_url.trim().is_empty() {
            return Err(CleanupSettingsError::NoServer);
        }
        if self.model.trim().is_empty() {
            return Err(CleanupSettingsError::NoModel);
        }
        // The clean-up client's own rule: https anywhere, http on this machine, no ws://
        // or wss://, no user name or password (which the file would keep and the client
        // would send as Basic authentication).
        crate::endpoint::check_http_url(self.base_url.trim()).map_err(|e| match e {
            crate::endpoint::EndpointError::Insecure => CleanupSettingsError::InsecureUrl,
            crate::endpoint::EndpointError::Credentials => CleanupSettingsError::CredentialsInUrl,
            _ => CleanupSettingsError::BadUrl,
        })
    }

    /// Whether anything runs after a dictation.
    pub fn is_active(&self) -> bool {
        self.mode.uses_model() || !self.replacements.is_empty()
    }

    /// The server configuration for the model modes.
    pub fn server(&self, api_key: Option<String>) -> ServerConfig {
        ServerConfig {
            base_url: self.base_url.trim().to_owned(),
            model: self.model.trim().to_owned(),
            api_key: api_key.filter(|k| !k.trim().is_empty()),
        }
    }

    /// The cleaner these settings describe. `client` is reused when it was made for the same
    /// server (it remembers what the server refused); `None` when nothing runs.
    pub fn cleaner(
        &self,
        client: Option<Arc<Client>>,
        api_key: Option<String>,
    ) -> Result<Option<Cleaner>, CleanupSettingsError> {
        if !self.is_active() {
            return Ok(None);
        }
        self.validate()?;
        let replacements =
            Replacements::new(&self.replacements).map_err(CleanupSettingsError::Replacements)?;
        let model = match self.model_mode() {
            None => None,
            Some(mode) => {
                let config = self.server(api_key);
                let client = match client.filter(|c| *c.config() == config) {
                    Some(c) => c,
                    None => Arc::new(Client::new(config, Timeouts::default()).map_err(
                        |e| match e {
                            ClientError::InsecureUrl => CleanupSettingsError::InsecureUrl,
                            ClientError::CredentialsInUrl => CleanupSettingsError::CredentialsInUrl,
                            ClientError::Tls => CleanupSettingsError::Tls,
                            _ => CleanupSettingsError::BadUrl,
                        },
                    )?),
                };
                Some(ModelSetup { mode, client })
            }
        };
        Ok(Some(Cleaner {
            replacements,
            model,
            deadline: self.deadline(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_runs_nothing_and_is_not_written() {
        let s = CleanupSettings::default();
        assert!(s.is_default());
        assert!(!s.is_active());
        assert_eq!(s.cleaner(None, None).map(|c| c.is_none()), Ok(true));
        assert_eq!(
            serde_json::to_string(&s).expect("json"),
            r#"{"mode":"asSpoken"}"#
        );
    }

    #[test]
    fn a_model_mode_needs_a_server_and_a_model() {
        let mut s = CleanupSettings {
            mode: CleanupMode::Tidy,
            ..CleanupSettings::default()
        };
        let code = |s: &CleanupSettings| s.validate().map_err(|e| e.code());
        assert_eq!(code(&s), Err("cleanup.no-server"));
        s.base_url = "http://127.0.0.1:11434/v1".into();
        assert_eq!(code(&s), Err("cleanup.no-model"));
        s.model = "llama3.2".into();
        assert_eq!(code(&s), Ok(()));
        s.base_url = "http://example.com/v1".into();
        assert_eq!(code(&s), Err("cleanup.insecure-url"));
        s.base_url = "http://user:pw@127.0.0.1:11434/v1".into();
        assert_eq!(code(&s), Err("cleanup.credentials-in-url"));
        s.base_url = "ws://127.0.0.1:11434/v1".into();
        assert_eq!(code(&s), Err("cleanup.bad-url"));
        s.base_url = "http://127.0.0.1:11434/v1".into();
        s.mode = CleanupMode::Translate;
        assert_eq!(code(&s), Err("cleanup.no-language"));
        s.language = "German".into();
        assert_eq!(code(&s), Ok(()));
        s.deadline_ms = Some(100);
        assert_eq!(code(&s), Err("cleanup.bad-deadline"));
        s.deadline_ms = None;
        s.replacements = vec![Rule {
            from: "...".into(),
            to: "x".into(),
        }];
        assert_eq!(code(&s), Err("replace.no-words"));
    }

    #[test]
    fn the_client_is_kept_for_the_same_server() {
        let s = CleanupSettings {
            mode: CleanupMode::Tidy,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "m".into(),
            ..CleanupSettings::default()
        };
        let first = s.cleaner(None, None).expect("valid").expect("active");
        let client = first.model.expect("model").client;
        let again = s
            .cleaner(Some(client.clone()), None)
            .expect("valid")
            .expect("active");
        assert!(Arc::ptr_eq(&client, &again.model.expect("model").client));
        let other = CleanupSettings {
            model: "other".into(),
            ..s
        };
        let changed = other
            .cleaner(Some(client.clone()), None)
            .expect("valid")
            .expect("active");
        assert!(!Arc::ptr_eq(&client, &changed.model.expect("model").client));
    }

    fn rule(app: &str, mode: CleanupMode) -> AppRule {
        AppRule {
            app: app.into(),
            mode,
        }
    }

    #[test]
    fn a_mode_by_app_sets_only_the_mode_for_that_app() {
        let s = CleanupSettings {
            mode: CleanupMode::AsSpoken,
            per_app: vec![
                rule("com.apple.mail", CleanupMode::Email),
                rule("Thunderbird", CleanupMode::Polish),
                rule("thunderbird", CleanupMode::Tidy),
            ],
            base_url: "http://127.0.0.1:11434/v1".into(),
            model: "llama3.2".into(),
            replacements: vec![Rule {
                from: "persic".into(),
                to: "Persyk".into(),
            }],
            ..CleanupSettings::default()
        };
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // The bundle identifier; the X11 class or instance, any case; the first rule wins.
        let (mail, matched) = s.for_app(&ids(&["com.apple.mail"]));
        assert!(matched);
        assert_eq!(mail.mode, CleanupMode::Email);
        assert_eq!(mail.replacements, s.replacements);
        assert_eq!(mail.base_url, s.base_url);
        let (tb, _) = s.for_app(&ids(&["Mail", "thunderbird"]));
        assert_eq!(tb.mode, CleanupMode::Polish);
        // Any other app, or none known: the default mode.
        assert_eq!(s.for_app(&ids(&["org.gnome.Terminal"])), (s.clone(), false));
        assert_eq!(s.for_app(&[]), (s.clone(), false));
        // Not a substring match.
        assert!(!s.for_app(&ids(&["com.apple.mailx"])).1);
    }

    #[test]
    fn a_mode_by_app_is_checked_like_the_default_mode() {
        let code = |s: &CleanupSettings| s.validate().map_err(|e| e.code());
        let mut s = CleanupSettings {
            per_app: vec![rule("com.apple.mail", CleanupMode::Tidy)],
            ..CleanupSettings::default()
        };
        // A model mode for one app needs the server, even with As spoken as the default.
        assert!(s.any_model());
        assert_eq!(code(&s), Err("cleanup.no-server"));
        s.base_url = "http://127.0.0.1:11434/v1".into();
        s.model = "llama3.2".into();
        assert_eq!(code(&s), Ok(()));
        s.per_app.push(rule("notes", CleanupMode::Translate));
        assert_eq!(code(&s), Err("cleanup.no-language"));
        s.language = "German".into();
        assert_eq!(code(&s), Ok(()));
        s.per_app.push(rule("  ", CleanupMode::Tidy));
        assert_eq!(code(&s), Err("cleanup.bad-app-rule"));
        s.per_app.pop();
        // Written as `perApp`, read back the same; a file without it reads as before.
        let json = serde_json::to_string(&s).expect("json");
        assert!(
            json.contains(r#""perApp":[{"app":"com.apple.mail","mode":"tidy"}"#),
            "{json}"
        );
        let back: CleanupSettings = serde_json::from_str(&json).expect("read back");
        assert_eq!(back, s);
        let old: CleanupSettings = serde_json::from_str(r#"{"mode":"tidy"}"#).expect("old");
        assert!(old.per_app.is_empty());
        // The "Dictate + clean" shortcut's mode: Tidy unless set; it replaces every other.
        assert_eq!(old.shortcut_mode(), CleanupMode::Tidy);
        let polish: CleanupSettings =
            serde_json::from_str(r#"{"shortcutMode":"polish"}"#).expect("shortcut mode");
        assert_eq!(polish.shortcut_mode(), CleanupMode::Polish);
        assert_eq!(s.with_mode(CleanupMode::Email).mode, CleanupMode::Email);
        assert_eq!(s.with_mode(CleanupMode::Email).per_app, s.per_app);
    }
}
