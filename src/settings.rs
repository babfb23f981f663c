//! User settings: a JSON file in the platform config directory, and the session roots it
//! configures.
//!
//! Invariants:
//! - Unknown keys survive a load → save round trip (a newer Persyk's settings are not lost).
//! - Saving is atomic: write a temporary file, fsync, rename over, fsync the directory.
//! - Secrets (the API key) never live here; they go to the OS secret store.
//! - Changing roots moves nothing. Only the default root is created by the first
//!   recording; a configured `sessions.directory` that is missing stays missing
//!   ([`Roots::explicit`]: `store.root-missing`).
//! - The settings file is 0600 and a config folder it creates is 0700, whatever the umask.

use std::fs::{self, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::local::models::{DEFAULT_LOCAL_MODEL, LocalModelChoice};
use crate::session::fsio::{PRIVATE_FILE_MODE, create_private_dir_all};
use crate::session::store::{Roots, StoreError};

/// Why settings could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    #[error("settings.io: {op} failed: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("settings.invalid: the settings file is not valid settings JSON")]
    Invalid,
    #[error("settings.root-not-absolute: session roots must be absolute paths")]
    RootNotAbsolute,
    #[error("settings.no-documents-dir: no Documents folder to put the default root in")]
    NoDocumentsDir,
    #[error(
        "settings.bad-provider-url: the provider base URL must start with ws://, wss://, http:// or https://"
    )]
    BadProviderUrl,
    #[error(
        "settings.insecure-provider-url: ws:// and http:// provider URLs are allowed only for loopback hosts; use wss:// or https://"
    )]
    InsecureProviderUrl,
    #[error("settings.bad-mode: the mode must be \"dictation\" or \"conversation\"")]
    BadMode,
    #[error("settings.empty-model: the transcription model must not be empty")]
    EmptyModel,
    #[error(
        "settings.bad-language: the language must be an ISO-639-1 code such as \"en\" (or empty)"
    )]
    BadLanguage,
    #[error(
        "settings.bad-keyword: each word must be one line without '<' or '>' (at most 100 words of 100 characters)"
    )]
    BadKeyword,
    #[error("settings.bad-noise-reduction: noise reduction is near_field, far_field or off")]
    BadNoiseReduction,
    #[error("settings.bad-delay: the delay is minimal, low, medium, high or xhigh")]
    BadDelay,
    #[error("settings.pre-roll-too-long: the pre-roll is at most 500 ms")]
    PreRollTooLong,
    #[error(
        "settings.bad-local-model: the on-device model must be a catalog name such as \"base.en\" or an absolute path to a model file"
    )]
    BadLocalModel,
    #[error("settings.bad-local-threads: on-device recognition uses 1 to 64 threads")]
    BadLocalThreads,
    /// The clean-up section (its own code: `cleanup.*` or `replace.*`).
    #[error("{0}")]
    Cleanup(crate::cleanup::settings::CleanupSettingsError),
}

impl SettingsError {
    pub fn code(&self) -> &'static str {
        match self {
            SettingsError::Io { .. } => "settings.io",
            SettingsError::Invalid => "settings.invalid",
            SettingsError::RootNotAbsolute => "settings.root-not-absolute",
            SettingsError::NoDocumentsDir => "settings.no-documents-dir",
            SettingsError::BadProviderUrl => "settings.bad-provider-url",
            SettingsError::InsecureProviderUrl => "settings.insecure-provider-url",
            SettingsError::BadMode => "settings.bad-mode",
            SettingsError::EmptyModel => "settings.empty-model",
            SettingsError::BadLanguage => "settings.bad-language",
            SettingsError::PreRollTooLong => "settings.pre-roll-too-long",
            SettingsError::BadKeyword => "settings.bad-keyword",
            SettingsError::BadNoiseReduction => "settings.bad-noise-reduction",
            SettingsError::BadDelay => "settings.bad-delay",
            SettingsError::BadLocalModel => "settings.bad-local-model",
            SettingsError::BadLocalThreads => "settings.bad-local-threads",
            SettingsError::Cleanup(e) => e.code(),
        }
    }
}

/// The `sessions` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsSettings {
    /// Absolute write root; `None` uses the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<PathBuf>,
    /// Absolute discovery-only roots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_directories: Vec<PathBuf>,
}

/// The `capture` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureSettings {
    /// Keep the microphone warm and start each recording this many ms before the click
    /// (0 = off; at most 500).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pre_roll_ms: u32,
    /// Input device by name; `None` = the system default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// The `provider` section: where and how to transcribe. Missing keys take the defaults of
/// [`crate::realtime::protocol::Settings`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `"dictation"` (transcription only) or `"conversation"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcription_model: Option<String>,
    /// ISO-639-1 hint; several separated by commas (`"en, uk"`) become `languages`;
    /// `None` lets the provider detect the language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// "Words Persyk should know": `keywords` where the model takes them, else the prompt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// `"near_field"` (default, dictation into a close microphone), `"far_field"`, `"off"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_reduction: Option<String>,
    /// `gpt-realtime-whisper`'s `delay` (`minimal` … `xhigh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
}

/// Which engine turns speech into text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RecognitionEngine {
    /// The OpenAI Realtime API, configured in the `provider` section (needs a key and a
    /// network).
    #[default]
    Openai,
    /// Whisper on this device (whisper.cpp), offline.
    Local,
}

/// The `recognition` section: online or on this device.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecognitionSettings {
    #[serde(default)]
    pub engine: RecognitionEngine,
    /// The on-device model: a catalog name (`"base.en"`) or an absolute path to a ggml
    /// file; `None` = [`DEFAULT_LOCAL_MODEL`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_model: Option<String>,
    /// Inference threads; `None` = the available cores, at most 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_threads: Option<u32>,
    /// Apply "Words Persyk should know" (`provider.keywords`) to on-device recognition too:
    /// where the model wrote something that sounds like one, that window is decoded again
    /// with the words as Whisper's prompt and only the confirmed stretch changes
    /// ([`crate::local::vocabulary`]). `None` = on (the default); written only when turned
    /// off or already in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_vocabulary: Option<bool>,
    /// The language a multilingual on-device model listens for, as a Whisper code
    /// (`"de"`); `None` = detected in each utterance. English-only models always hear
    /// English.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_language: Option<String>,
    /// "Translate to English": a multilingual on-device model writes what was said in any
    /// language as English (Whisper's translate task); the message is the English text.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local_translate: bool,
}

impl RecognitionSettings {
    /// Whether the keywords apply on the device (on unless turned off).
    pub fn local_vocabulary_on(&self) -> bool {
        self.local_vocabulary.unwrap_or(true)
    }

    /// The words for on-device recognition: the keywords unless `local_vocabulary` is
    /// off.
    pub fn local_vocabulary_words(&self, keywords: &[String]) -> Vec<String> {
        if self.local_vocabulary_on() {
            keywords.to_vec()
        } else {
            Vec::new()
        }
    }
}

impl RecognitionSettings {
    /// The chosen on-device model (validated).
    pub fn local_model(&self) -> Result<LocalModelChoice, SettingsError> {
        let raw = self
            .local_model
            .as_deref()
            .map(str::trim)
            .unwrap_or(DEFAULT_LOCAL_MODEL);
        if raw.is_empty() || raw.chars().any(char::is_control) {
            return Err(SettingsError::BadLocalModel);
        }
        if raw.contains('/') || raw.contains('\\') {
            let path = PathBuf::from(raw);
            return if path.is_absolute() {
                Ok(LocalModelChoice::File(path))
            } else {
                Err(SettingsError::BadLocalModel)
            };
        }
        if raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        {
            Ok(LocalModelChoice::Catalog(raw.to_owned()))
        } else {
            Err(SettingsError::BadLocalModel)
        }
    }

    /// The inference threads (validated); `None` = the default.
    /// The on-device language (validated): `None` = detect.
    pub fn local_language(&self) -> Result<Option<String>, SettingsError> {
        match self.local_language.as_deref().map(str::trim) {
            None | Some("") | Some("auto") => Ok(None),
            Some(code) if crate::local::languages::name(code).is_some() => Ok(Some(code.into())),
            Some(_) => Err(SettingsError::BadLanguage),
        }
    }

    /// How an on-device model recognizes under these settings: threads, the vocabulary
    /// (`keywords`, when asked), and for a `multilingual` model the language and translation
    /// (an English-only model gets the `en` hint and never translates).
    pub fn local_options(
        &self,
        keywords: &[String],
        multilingual: bool,
    ) -> Result<crate::local::LocalOptions, SettingsError> {
        let mut options = crate::local::options_for(self.local_threads()?, !multilingual);
        // The on-device path checks the words as the provider's does: a hand-edited file
        // reaches here without Settings' save (`settings.bad-keyword`).
        options.vocabulary = checked_keywords(&self.local_vocabulary_words(keywords))?;
        if multilingual {
            options.language = self.local_language()?;
            options.translate = self.local_translate;
        }
        Ok(options)
    }

    pub fn local_threads(&self) -> Result<Option<usize>, SettingsError> {
        match self.local_threads {
            None => Ok(None),
            Some(n @ 1..=64) => Ok(Some(n as usize)),
            Some(_) => Err(SettingsError::BadLocalThreads),
        }
    }
}

/// The `feedback` section: what Persyk does around a dictation besides the transcript.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackSettings {
    /// Short start and stop sounds; `None` = on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sounds: Option<bool>,
    /// The recording indicator (a small always-on-top window while a recording runs);
    /// `None` = on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indicator: Option<bool>,
    /// Keys of this section this version does not know, kept as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl FeedbackSettings {
    /// Whether the start and stop sounds play (on unless turned off).
    pub fn sounds_enabled(&self) -> bool {
        self.sounds.unwrap_or(true)
    }

    /// Whether the recording indicator shows (on unless turned off).
    pub fn indicator_enabled(&self) -> bool {
        self.indicator.unwrap_or(true)
    }
}

/// The window's colours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ThemeChoice {
    /// Follow the system's appearance (light where the system says nothing).
    #[default]
    System,
    Light,
    Dark,
}

/// The `appearance` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppearanceSettings {
    #[serde(default)]
    pub theme: ThemeChoice,
    /// Keys of this section this version does not know, kept as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl AppearanceSettings {
    fn is_default(&self) -> bool {
        self.theme == ThemeChoice::System && self.other.is_empty()
    }
}

/// What happens to a finished recording's transcript besides being saved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AfterAction {
    /// Copy it to the clipboard (the default).
    #[default]
    Copy,
    /// Copy it, then paste it into the app that has keyboard focus (⌘V / Ctrl+V).
    Paste,
}

/// The `afterDictation` section.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AfterDictationSettings {
    #[serde(default)]
    pub action: AfterAction,
    /// After pasting, put the clipboard's previous text back (only with `paste`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub restore_clipboard: bool,
    /// Copy a transcribed file's text to the clipboard when it is done (off: an hour's
    /// transcript never replaces the clipboard unasked; issue #38 item 6).
    #[serde(default, skip_serializing_if = "is_false")]
    pub copy_file_transcripts: bool,
}

impl AfterDictationSettings {
    /// Whether the transcript is pasted after it is copied.
    pub fn pastes(&self) -> bool {
        self.action == AfterAction::Paste
    }

    /// Whether the previous clipboard text is put back after a paste.
    pub fn restores(&self) -> bool {
        self.pastes() && self.restore_clipboard
    }

    fn is_default(&self) -> bool {
        *self == AfterDictationSettings::default()
    }
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// How the global hotkey behaves.
///
/// **Choice:** `auto` is the default. Settings files written by earlier versions always
/// name their mode (`"toggle"` or `"pushToTalk"`), so they keep it; only a file without a
/// `hotkey.mode` (a new user's) gets `auto`. A tap in `auto` does what `toggle` did, so even
/// then a tap keeps its old meaning; only a hold (≥ [`TAP_MAX_MS`]) is new.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HotkeyMode {
    /// One key, both gestures: a tap (released within [`TAP_MAX_MS`]) starts hands-free
    /// dictation and the next tap stops it; a hold records until the key is released.
    #[default]
    Auto,
    /// Press once to start, again to stop.
    Toggle,
    /// Record while the keys are held.
    PushToTalk,
}

/// In [`HotkeyMode::Auto`], a press released sooner than this is a tap (hands-free);
/// one held this long or longer is push-to-talk. 300 ms: a deliberate tap is 60–200 ms
/// (key-down to key-up), and a hold meant to talk through lasts well over a second.
pub const TAP_MAX_MS: u64 = 300;

/// The `hotkey` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HotkeySettings {
    /// e.g. `"Alt+Space"`; `None` = the default ([`DEFAULT_HOTKEY`]: ⌃⌥D on a Mac, Alt+Space
    /// elsewhere); `""` = no hotkey.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<String>,
    #[serde(default)]
    pub mode: HotkeyMode,
    /// The "Paste last transcription" shortcut; `None` or `""`: none (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paste_last: Option<String>,
    /// The "Dictate + clean" shortcut: dictation whose words go through
    /// `cleanup.shortcutMode` (Tidy unless set), whatever the usual mode; `None` or `""`:
    /// none (the default). Same gestures as the dictation key (`mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dictate_clean: Option<String>,
}

/// The `updates` section: the update check (`crate::update`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSettings {
    /// Check the release feed once a day while Persyk runs; `None` = on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily: Option<bool>,
    /// Keys of this section this version does not know, kept as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl UpdateSettings {
    /// Whether the daily check runs (on unless turned off).
    pub fn daily_enabled(&self) -> bool {
        self.daily.unwrap_or(true)
    }

    fn is_default(&self) -> bool {
        *self == UpdateSettings::default()
    }
}

/// The `sync` section: history kept in a folder a sync engine copies between Macs
/// (`crate::sync`). Where that folder is stays `sessions.directory`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncSettings {
    /// This Mac's name in the sessions it records; `None` = the computer's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// Words Persyk should know, replacements, clean-up modes and per-app rules live beside
    /// the history (`persyk-settings.json` in the sessions folder), for every Mac.
    #[serde(default, skip_serializing_if = "is_false")]
    pub share_settings: bool,
    /// Keys of this section this version does not know, kept as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl SyncSettings {
    fn is_default(&self) -> bool {
        *self == SyncSettings::default()
    }
}

/// The default global hotkey on this system: [`default_hotkey`] for this platform.
pub const DEFAULT_HOTKEY: &str = default_hotkey(cfg!(target_os = "macos"));

/// The default global hotkey: ⌃⌥D (Control+Option+D) on a Mac, Alt+Space elsewhere.
///
/// Not ⌥Space on a Mac (issue #25 item 6): typing it produces a non-breaking space in many
/// European layouts, it is the default of the ChatGPT app, Alfred and Raycast, and macOS
/// registers a second app's Carbon hotkey without complaint, so a collision would go unseen.
/// The other usual candidates are taken too: ⌘Space (Spotlight), ⌥⌘Space (Finder search),
/// ⌃Space and ⌃⌥Space (input sources), ⇧⌘Space (1Password), ⌃⇧Space (JetBrains
/// completion). ⌃⌥D is no macOS or common app shortcut (only VoiceOver, while it runs, takes
/// ⌃⌥ for itself), types nothing, is easy to hold for push-to-talk, says D for dictation,
/// and sits beside ⌃⌥V, the paste-last shortcut people choose. Linux keeps Alt+Space, the
/// combination its desktops' tests and figures are measured with. A settings file that
/// names a hotkey keeps it; only one that names none gets this.
pub const fn default_hotkey(mac: bool) -> &'static str {
    if mac { "Ctrl+Alt+D" } else { "Alt+Space" }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// The whole settings file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    #[serde(default)]
    pub sessions: SessionsSettings,
    #[serde(default)]
    pub capture: CaptureSettings,
    #[serde(default)]
    pub provider: ProviderSettings,
    #[serde(default)]
    pub hotkey: HotkeySettings,
    #[serde(default)]
    pub recognition: RecognitionSettings,
    #[serde(default)]
    pub feedback: FeedbackSettings,
    /// Copy only, or copy and paste (absent from the file while it is the default).
    #[serde(
        default,
        rename = "afterDictation",
        skip_serializing_if = "AfterDictationSettings::is_default"
    )]
    pub after_dictation: AfterDictationSettings,
    /// Light, dark or the system's (absent from the file while it follows the system).
    #[serde(default, skip_serializing_if = "AppearanceSettings::is_default")]
    pub appearance: AppearanceSettings,
    /// Replacements and a model's clean-up after each dictation (absent while off).
    #[serde(
        default,
        skip_serializing_if = "crate::cleanup::settings::CleanupSettings::is_default"
    )]
    pub cleanup: crate::cleanup::settings::CleanupSettings,
    /// The daily update check (absent while on).
    #[serde(default, skip_serializing_if = "UpdateSettings::is_default")]
    pub updates: UpdateSettings,
    /// This Mac's name and shared settings for history kept in a synced folder (absent
    /// while unused).
    #[serde(default, skip_serializing_if = "SyncSettings::is_default")]
    pub sync: SyncSettings,
    /// Keys this version does not know, kept as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Whether this is a development run: a debug build, or `PERSYK_DEV=1`.
pub fn is_dev() -> bool {
    cfg!(debug_assertions) || std::env::var_os("PERSYK_DEV").is_some_and(|v| v == "1")
}

/// The settings file: `$PERSYK_CONFIG` if set, else `settings.json` in the platform config
/// directory (`~/Library/Application Support/app.persyk.Persyk` on macOS,
/// `~/.config/persyk` on Linux).
pub fn settings_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PERSYK_CONFIG") {
        return Some(PathBuf::from(p));
    }
    crate::dirs::project_dirs().map(|d| d.config_dir().join("settings.json"))
}

/// The default write root: `Documents/persyk/sessions`, or `Documents/persyk-dev/sessions`
/// for development runs.
pub fn default_root(dev: bool) -> Result<PathBuf, SettingsError> {
    let docs = directories::UserDirs::new()
        .and_then(|u| u.document_dir().map(Path::to_path_buf))
        .or_else(|| directories::BaseDirs::new().map(|b| b.home_dir().join("Documents")))
        .ok_or(SettingsError::NoDocumentsDir)?;
    Ok(docs
        .join(if dev { "persyk-dev" } else { "persyk" })
        .join("sessions"))
}

/// The non-blank words of "Words Persyk should know", trimmed, if they keep the limits the
/// provider's settings keep (at most `MAX_KEYWORDS` of them, each one line of at most
/// `MAX_KEYWORD_CHARS` characters without `<`, `>` or a control character).
fn checked_keywords(words: &[String]) -> Result<Vec<String>, SettingsError> {
    use crate::realtime::protocol::{MAX_KEYWORDS, check_keyword};
    let words: Vec<String> = words
        .iter()
        .map(|w| w.trim())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    if words.len() > MAX_KEYWORDS || words.iter().any(|w| check_keyword(w).is_err()) {
        return Err(SettingsError::BadKeyword);
    }
    Ok(words)
}

impl Settings {
    /// Loads `path`; a missing file gives the defaults.
    pub fn load(path: &Path) -> Result<Settings, SettingsError> {
        match fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|_| SettingsError::Invalid),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(source) => Err(SettingsError::Io {
                op: "read settings",
                source,
            }),
        }
    }

    /// Saves atomically to `path`.
    pub fn save(&self, path: &Path) -> Result<(), SettingsError> {
        let io = |op| move |source| SettingsError::Io { op, source };
        let dir = path.parent().unwrap_or(Path::new("."));
        create_private_dir_all(dir).map_err(io("create config dir"))?;
        let tmp = path.with_extension("json.tmp");
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(PRIVATE_FILE_MODE)
            .open(&tmp)
            .map_err(io("write settings"))?;
        // A temporary file left by an older version may be world-readable: narrow it
        // before anything is written into it.
        f.set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))
            .map_err(io("write settings"))?;
        let text = serde_json::to_vec_pretty(self).map_err(|_| SettingsError::Invalid)?;
        f.write_all(&text).map_err(io("write settings"))?;
        f.sync_all().map_err(io("sync settings"))?;
        fs::rename(&tmp, path).map_err(io("replace settings"))?;
        crate::session::fsio::sync_dir(dir).map_err(io("sync config dir"))
    }

    /// The realtime settings these settings select.
    pub fn provider(&self) -> Result<crate::realtime::protocol::Settings, SettingsError> {
        use crate::realtime::protocol::{
            Mode, NoiseReduction, ProtocolError, Settings as Provider,
        };
        let mut out = Provider::default();
        let p = &self.provider;
        if let Some(url) = p
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            let ok = ["ws://", "wss://", "http://", "https://"]
                .iter()
                .any(|scheme| url.len() > scheme.len() && url.starts_with(scheme));
            if !ok {
                return Err(SettingsError::BadProviderUrl);
            }
            out.base_url = url
                .replacen("https://", "wss://", 1)
                .replacen("http://", "ws://", 1);
            // The key goes in the upgrade request: never unencrypted to a remote host.
            crate::endpoint::check_provider_url(&out.base_url).map_err(|e| match e {
                crate::endpoint::EndpointError::Insecure => SettingsError::InsecureProviderUrl,
                _ => SettingsError::BadProviderUrl,
            })?;
        }
        match p.mode.as_deref() {
            None | Some("dictation") => out.mode = Mode::Transcription,
            Some("conversation") => out.mode = Mode::Conversation,
            Some(_) => return Err(SettingsError::BadMode),
        }
        if let Some(model) = &p.transcription_model {
            if model.trim().is_empty() {
                return Err(SettingsError::EmptyModel);
            }
            out.transcription_model = model.trim().to_owned();
        }
        if let Some(lang) = p
            .language
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            let langs: Vec<&str> = lang.split(',').map(str::trim).collect();
            for l in &langs {
                if l.len() != 2 || !l.bytes().all(|b| b.is_ascii_lowercase()) {
                    return Err(SettingsError::BadLanguage);
                }
            }
            // One language → `language`; several → `languages` (never both).
            match langs.as_slice() {
                [one] => out.language = Some((*one).to_owned()),
                many => out.languages = many.iter().map(|l| (*l).to_owned()).collect(),
            }
        }
        out.keywords = p
            .keywords
            .iter()
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
            .collect();
        out.noise_reduction = match p.noise_reduction.as_deref().map(str::trim) {
            None | Some("" | "near_field") => NoiseReduction::NearField,
            Some("far_field") => NoiseReduction::FarField,
            Some("off") => NoiseReduction::Off,
            Some(_) => return Err(SettingsError::BadNoiseReduction),
        };
        out.delay = p
            .delay
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        // Refused here, with a code, before anything is sent.
        out.check().map_err(|e| match e {
            ProtocolError::BadDelay => SettingsError::BadDelay,
            _ => SettingsError::BadKeyword,
        })?;
        Ok(out)
    }

    /// Checks every value a user can type: roots absolute, provider fields well formed,
    /// pre-roll in range. The hotkey is checked by the app (it knows the key names).
    pub fn validate(&self) -> Result<(), SettingsError> {
        let absolute = |p: &Path| p.is_absolute();
        if !self.sessions.directory.as_deref().is_none_or(absolute)
            || !self
                .sessions
                .additional_directories
                .iter()
                .all(|p| absolute(p))
        {
            return Err(SettingsError::RootNotAbsolute);
        }
        if self.capture.pre_roll_ms > 500 {
            return Err(SettingsError::PreRollTooLong);
        }
        self.recognition.local_model()?;
        self.recognition.local_threads()?;
        self.cleanup.validate().map_err(SettingsError::Cleanup)?;
        self.provider().map(drop)
    }

    /// The configured roots (write root first). `dev` picks the development default. Only
    /// the default write root is created by the first recording; a configured
    /// `sessions.directory` is [`Roots::explicit`].
    pub fn roots(&self, dev: bool) -> Result<Roots, SettingsError> {
        let additional = self.sessions.additional_directories.clone();
        let roots = match &self.sessions.directory {
            Some(d) => Roots::explicit(d.clone(), additional),
            None => Roots::new(default_root(dev)?, additional),
        };
        roots.map_err(|e| match e {
            StoreError::RootNotAbsolute => SettingsError::RootNotAbsolute,
            _ => SettingsError::Invalid,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::realtime::protocol::{Mode, NoiseReduction};

    fn with_provider(p: ProviderSettings) -> Settings {
        Settings {
            provider: p,
            ..Settings::default()
        }
    }

    #[test]
    fn the_device_gets_the_keywords_unless_turned_off() {
        let words = vec!["Siobhan Kowalczyk".to_owned()];
        let mut r = RecognitionSettings::default();
        assert_eq!(r.local_vocabulary_words(&words), words);
        assert!(
            !serde_json::to_string(&r)
                .expect("json")
                .contains("localVocabulary")
        );
        r.local_vocabulary = Some(false);
        assert!(r.local_vocabulary_words(&words).is_empty());
        let read: RecognitionSettings =
            serde_json::from_str(r#"{"localVocabulary":false}"#).expect("parse");
        assert!(!read.local_vocabulary_on());
        let read: RecognitionSettings =
            serde_json::from_str(r#"{"localVocabulary":true}"#).expect("parse");
        assert!(read.local_vocabulary_on());
    }

    #[test]
    fn every_catalog_model_name_is_a_catalog_choice() {
        for m in crate::local::models::CATALOG {
            let s = RecognitionSettings {
                local_model: Some(m.name.into()),
                ..Default::default()
            };
            assert_eq!(
                s.local_model().unwrap(),
                LocalModelChoice::Catalog(m.name.into())
            );
        }
    }

    #[test]
    fn recognition_section_round_trips_and_validates() {
        let s: Settings = serde_json::from_str(
            r#"{"recognition":{"engine":"local","localModel":"small.en","localThreads":4}}"#,
        )
        .unwrap();
        assert_eq!(s.recognition.engine, RecognitionEngine::Local);
        assert_eq!(
            s.recognition.local_model().unwrap(),
            LocalModelChoice::Catalog("small.en".into())
        );
        assert_eq!(s.recognition.local_threads().unwrap(), Some(4));
        s.validate().unwrap();
        let back = serde_json::to_value(&s).unwrap();
        assert_eq!(back["recognition"]["engine"], "local");

        let d = Settings::default();
        assert_eq!(d.recognition.engine, RecognitionEngine::Openai);
        assert_eq!(
            d.recognition.local_model().unwrap(),
            LocalModelChoice::Catalog(DEFAULT_LOCAL_MODEL.into())
        );
        assert!(serde_json::to_value(&d).unwrap()["recognition"]["localModel"].is_null());

        let path = RecognitionSettings {
            local_model: Some("/models/ggml-medium.bin".into()),
            ..RecognitionSettings::default()
        };
        assert_eq!(
            path.local_model().unwrap(),
            LocalModelChoice::File("/models/ggml-medium.bin".into())
        );
        for bad in ["", "models/x.bin", "base en", "a\nb"] {
            let r = RecognitionSettings {
                local_model: Some(bad.into()),
                ..RecognitionSettings::default()
            };
            assert_eq!(
                r.local_model().unwrap_err().code(),
                "settings.bad-local-model",
                "{bad:?}"
            );
        }
        for bad in [0, 65] {
            let r = RecognitionSettings {
                local_threads: Some(bad),
                ..RecognitionSettings::default()
            };
            assert_eq!(
                r.local_threads().unwrap_err().code(),
                "settings.bad-local-threads"
            );
        }
    }

    #[test]
    fn provider_defaults_and_overrides() {
        let d = Settings::default().provider().unwrap();
        assert_eq!(d, crate::realtime::protocol::Settings::default());
        let s = with_provider(ProviderSettings {
            base_url: Some(" https://proxy.example/v1 ".into()),
            mode: Some("conversation".into()),
            transcription_model: Some("gpt-4o-mini-transcribe".into()),
            language: Some("de".into()),
            ..Default::default()
        })
        .provider()
        .unwrap();
        assert_eq!(s.base_url, "wss://proxy.example/v1");
        assert_eq!(s.mode, Mode::Conversation);
        assert_eq!(s.transcription_model, "gpt-4o-mini-transcribe");
        assert_eq!(s.language.as_deref(), Some("de"));
    }

    #[test]
    fn vocabulary_languages_and_noise_reduction() {
        let d = Settings::default().provider().unwrap();
        assert_eq!(d.transcription_model, "gpt-live-transcribe");
        assert_eq!(d.noise_reduction, NoiseReduction::NearField);
        let s = with_provider(ProviderSettings {
            language: Some("en, uk".into()),
            keywords: vec![" Persyk ".into(), "".into(), "rubato".into()],
            noise_reduction: Some("far_field".into()),
            ..Default::default()
        })
        .provider()
        .unwrap();
        assert_eq!(s.language, None);
        assert_eq!(s.languages, ["en", "uk"]);
        assert_eq!(s.keywords, ["Persyk", "rubato"]);
        assert_eq!(s.noise_reduction, NoiseReduction::FarField);
        let code = |p: ProviderSettings| with_provider(p).validate().unwrap_err().code();
        for bad in ["<b>", "a>b", "two\nlines"] {
            let p = ProviderSettings {
                keywords: vec!["fine".into(), bad.into()],
                ..Default::default()
            };
            assert_eq!(code(p), "settings.bad-keyword", "{bad:?}");
        }
        let p = ProviderSettings {
            noise_reduction: Some("loud".into()),
            ..Default::default()
        };
        assert_eq!(code(p), "settings.bad-noise-reduction");
        let p = ProviderSettings {
            delay: Some("soon".into()),
            ..Default::default()
        };
        assert_eq!(code(p), "settings.bad-delay");
        let p = ProviderSettings {
            language: Some("en,xyz".into()),
            ..Default::default()
        };
        assert_eq!(code(p), "settings.bad-language");
    }

    #[test]
    fn validation_codes() {
        let bad = |p: ProviderSettings| with_provider(p).validate().unwrap_err().code();
        assert_eq!(
            bad(ProviderSettings {
                base_url: Some("ftp://x".into()),
                ..Default::default()
            }),
            "settings.bad-provider-url"
        );
        assert_eq!(
            bad(ProviderSettings {
                base_url: Some("wss://".into()),
                ..Default::default()
            }),
            "settings.bad-provider-url"
        );
        assert_eq!(
            bad(ProviderSettings {
                mode: Some("chat".into()),
                ..Default::default()
            }),
            "settings.bad-mode"
        );
        assert_eq!(
            bad(ProviderSettings {
                transcription_model: Some("  ".into()),
                ..Default::default()
            }),
            "settings.empty-model"
        );
        assert_eq!(
            bad(ProviderSettings {
                language: Some("EN".into()),
                ..Default::default()
            }),
            "settings.bad-language"
        );
        let mut s = Settings::default();
        s.sessions.additional_directories = vec![PathBuf::from("rel")];
        assert_eq!(
            s.validate().unwrap_err().code(),
            "settings.root-not-absolute"
        );
        let mut s = Settings::default();
        s.capture.pre_roll_ms = 501;
        assert_eq!(
            s.validate().unwrap_err().code(),
            "settings.pre-roll-too-long"
        );
    }

    #[test]
    fn new_sections_round_trip_with_unknown_keys() {
        let text = r#"{"hotkey":{"keys":"Ctrl+Shift+D","mode":"pushToTalk"},
                       "provider":{"language":"fr"},"future":{"a":[1,2]}}"#;
        let s: Settings = serde_json::from_str(text).unwrap();
        assert_eq!(s.hotkey.mode, HotkeyMode::PushToTalk);
        assert_eq!(s.provider.language.as_deref(), Some("fr"));
        let back: Settings = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert!(back.other.contains_key("future"));
    }

    #[test]
    fn hotkey_mode_defaults_to_auto_only_where_no_mode_was_written() {
        // A new user's file (or none): auto.
        let s: Settings = serde_json::from_str("{}").unwrap();
        assert_eq!(s.hotkey.mode, HotkeyMode::Auto);
        // Every earlier version wrote the mode it used: that mode stays.
        for (text, mode) in [
            (r#"{"hotkey":{"mode":"toggle"}}"#, HotkeyMode::Toggle),
            (
                r#"{"hotkey":{"keys":"Alt+Space","mode":"toggle"}}"#,
                HotkeyMode::Toggle,
            ),
            (
                r#"{"hotkey":{"mode":"pushToTalk"}}"#,
                HotkeyMode::PushToTalk,
            ),
            (r#"{"hotkey":{"mode":"auto"}}"#, HotkeyMode::Auto),
        ] {
            let s: Settings = serde_json::from_str(text).unwrap();
            assert_eq!(s.hotkey.mode, mode, "{text}");
            let json = serde_json::to_value(&s).unwrap();
            assert_eq!(json["hotkey"]["mode"], serde_json::to_value(mode).unwrap());
        }
        assert_eq!(serde_json::to_value(HotkeyMode::Auto).unwrap(), "auto");
        // What a default file says once saved: the mode, so it is kept from then on.
        let json = serde_json::to_value(Settings::default()).unwrap();
        assert_eq!(json["hotkey"], serde_json::json!({"mode": "auto"}));
    }

    #[test]
    fn the_daily_update_check_is_on_by_default_and_turns_off() {
        let s = Settings::default();
        assert!(s.updates.daily_enabled());
        assert!(!serde_json::to_string(&s).unwrap().contains("updates"));
        let s: Settings =
            serde_json::from_str(r#"{"updates": {"daily": false, "later": 1}}"#).unwrap();
        assert!(!s.updates.daily_enabled());
        let back = serde_json::to_value(&s).unwrap();
        assert_eq!(
            back["updates"],
            serde_json::json!({"daily": false, "later": 1})
        );
    }

    #[test]
    fn the_paste_last_shortcut_is_off_by_default_and_round_trips() {
        let s = Settings::default();
        assert_eq!(s.hotkey.paste_last, None);
        let text = r#"{"hotkey":{"mode":"auto","pasteLast":"Ctrl+Alt+V"}}"#;
        let s: Settings = serde_json::from_str(text).unwrap();
        assert_eq!(s.hotkey.paste_last.as_deref(), Some("Ctrl+Alt+V"));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["hotkey"]["pasteLast"], "Ctrl+Alt+V");
    }

    #[test]
    fn after_dictation_round_trips_and_defaults_to_copy() {
        let s: Settings = serde_json::from_str("{}").unwrap();
        assert_eq!(s.after_dictation.action, AfterAction::Copy);
        assert!(!s.after_dictation.pastes() && !s.after_dictation.restores());
        // The default is not written: files of earlier versions stay as they were.
        assert!(
            !serde_json::to_string(&s)
                .unwrap()
                .contains("afterDictation")
        );

        let text = r#"{"afterDictation":{"action":"paste","restoreClipboard":true}}"#;
        let s: Settings = serde_json::from_str(text).unwrap();
        assert!(s.after_dictation.pastes() && s.after_dictation.restores());
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json["afterDictation"],
            serde_json::json!({"action": "paste", "restoreClipboard": true})
        );
        // "Put back" means nothing without pasting.
        let copy_only = AfterDictationSettings {
            action: AfterAction::Copy,
            restore_clipboard: true,
            copy_file_transcripts: false,
        };
        assert!(!copy_only.restores());
        // An action this version does not know is refused like any bad value.
        let bad = r#"{"afterDictation":{"action":"type"}}"#;
        assert!(serde_json::from_str::<Settings>(bad).is_err());
    }
}
