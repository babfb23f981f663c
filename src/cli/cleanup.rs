//! `persyk cleanup [--session DIR] [--mode M] [--server URL] [--model NAME] [--json]`: dictated
//! text (stdin, or a session's spoken words at its default leaf) through the clean-up the
//! settings describe, printing what a dictation would paste. For scripts and launchers
//! (Raycast, Shortcuts, shell pipelines) as well as tests.
//!
//! Invariants:
//! - Nothing is stored: no session is written, not even with `--session` (a preview).
//! - The key comes from the secret store, kept per server origin: a `--server` gets its own
//!   origin's key, never another's.
//! - Human output is the text alone on stdout; why the words went out as spoken goes to
//!   stderr as a sentence and its code. `--json` adds the verdict, the model's text (refused
//!   or not), the edits the guard found (quoted: this is the user's own terminal) and the
//!   figures.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use persyk::cleanup::guard::{Rejection, Strictness};
use persyk::cleanup::prompt::ModelMode;
use persyk::cleanup::settings::{CleanupMode, CleanupSettings};
use persyk::cleanup::{Chosen, Preview};
use persyk::session::format::{Block, EntryBody, Role};
use persyk::session::{self, LeafSelector, history};
use persyk::settings::{self, Settings as UserSettings};
use serde_json::json;

use super::EXIT_CANNOT_RUN;

/// The most text read from stdin (a dictation of hours is far less).
const MAX_INPUT_BYTES: u64 = 1 << 20;

pub struct Args<'a> {
    pub session: Option<&'a Path>,
    pub mode: Option<&'a str>,
    pub language: Option<&'a str>,
    pub instruction: Option<&'a str>,
    pub server: Option<&'a str>,
    pub model: Option<&'a str>,
    pub deadline_ms: Option<u32>,
    pub json: bool,
}

pub fn run(args: Args<'_>) -> u8 {
    match prepare(&args) {
        Ok((settings, spoken)) => deliver(&args, &settings, &spoken),
        Err(code) => {
            eprintln!("persyk: {code}");
            EXIT_CANNOT_RUN
        }
    }
}

/// The settings with the flags applied, and the spoken words.
fn prepare(args: &Args<'_>) -> Result<(CleanupSettings, String), String> {
    let user = match settings::settings_path() {
        Some(p) => UserSettings::load(&p).map_err(|e| e.to_string())?,
        None => UserSettings::default(),
    };
    let user = persyk::sync::shared::with_shared(user, settings::is_dev());
    let mut s = user.cleanup;
    if let Some(mode) = args.mode {
        s.mode = match mode {
            "spoken" | "as-spoken" => CleanupMode::AsSpoken,
            "tidy" => CleanupMode::Tidy,
            "polish" => CleanupMode::Polish,
            "email" => CleanupMode::Email,
            "translate" => CleanupMode::Translate,
            "custom" => CleanupMode::Custom,
            _ => {
                return Err(
                    "cli.invalid-argument: --mode is spoken, tidy, polish, email, translate or custom"
                        .into(),
                );
            }
        };
    }
    if let Some(l) = args.language {
        s.language = l.to_owned();
    }
    if let Some(i) = args.instruction {
        s.instruction = i.to_owned();
    }
    if let Some(url) = args.server {
        s.base_url = url.to_owned();
    }
    if let Some(m) = args.model {
        s.model = m.to_owned();
    }
    if let Some(ms) = args.deadline_ms {
        if !(500..=30_000).contains(&ms) {
            return Err("cli.invalid-argument: --deadline-ms is 500 to 30000".into());
        }
        s.deadline_ms = Some(ms);
    }
    let spoken = match args.session {
        Some(dir) => session_words(dir)?,
        None => {
            let mut text = String::new();
            std::io::stdin()
                .take(MAX_INPUT_BYTES + 1)
                .read_to_string(&mut text)
                .map_err(|_| "cli.invalid-input: stdin is not UTF-8 text".to_owned())?;
            if text.len() as u64 > MAX_INPUT_BYTES {
                return Err("cli.invalid-input: more than 1 MiB of text on stdin".into());
            }
            text
        }
    };
    if spoken.trim().is_empty() {
        return Err("cli.invalid-input: no text to clean up".into());
    }
    Ok((s, spoken))
}

/// The surviving spoken (user) messages at the session's default leaf, joined.
fn session_words(dir: &Path) -> Result<String, String> {
    let path = session::session_file(dir);
    let index = session::scan_path(&path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), e.kind()))?;
    let projection = session::project(&index, &LeafSelector::Default).map_err(|e| e.to_string())?;
    let file = std::fs::File::open(&path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), e.kind()))?;
    let mut words: Vec<String> = Vec::new();
    for item in history::effective_history(file, &index, &projection) {
        let item = item.map_err(|e| e.code().to_owned())?;
        if let EntryBody::Message(m) = &item.entry.body
            && m.role == Role::User
        {
            let text: Vec<&str> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            let text = text.join(" ");
            if !text.trim().is_empty() {
                words.push(text.trim().to_owned());
            }
        }
    }
    if words.is_empty() {
        return Err("cleanup.no-words: the session has no spoken words".into());
    }
    Ok(words.join(" "))
}

fn deliver(args: &Args<'_>, s: &CleanupSettings, spoken: &str) -> u8 {
    // Keys are kept per server origin: the one for the server asked, and no other's.
    let key = persyk::endpoint::origin(&s.base_url).and_then(|origin| {
        persyk::credentials::KeyEntry::cleanup_for(&origin)
            .stored_key()
            .ok()
            .flatten()
    });
    let cleaner = match s.cleaner(None, key) {
        Ok(Some(c)) => c,
        Ok(None) => persyk::cleanup::Cleaner {
            deadline: Duration::from_secs(3),
            ..Default::default()
        },
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let preview = cleaner.preview(spoken);
    let mode = s.model_mode();
    if args.json {
        println!("{}", as_json(&preview, mode.as_ref(), s));
    } else {
        println!("{}", preview.text);
        if let Some(code) = preview.reason {
            let sentence =
                Rejection::from_code(code).map_or("the clean-up did not work.", |r| r.sentence());
            eprintln!("persyk: pasted as spoken: {sentence} ({code})");
        } else if preview.chosen == Chosen::Model
            && mode
                .as_ref()
                .is_some_and(|m| m.strictness() == Strictness::Translate)
        {
            eprintln!(
                "persyk: translated; not checked for meaning (numbers, names and questions were)"
            );
        }
    }
    0
}

fn as_json(p: &Preview, mode: Option<&ModelMode>, s: &CleanupSettings) -> serde_json::Value {
    let chosen = match p.chosen {
        Chosen::Spoken => "spoken",
        Chosen::Replaced => "replaced",
        Chosen::Model => "model",
    };
    let edits: Vec<serde_json::Value> = p
        .report
        .iter()
        .flat_map(|r| r.edits.iter())
        .map(|e| json!({"kind": e.kind, "spoken": e.spoken, "output": e.output}))
        .collect();
    json!({
        "text": p.text,
        "chosen": chosen,
        "mode": mode.map(ModelMode::name).unwrap_or_else(|| "as-spoken".into()),
        "model": if mode.is_some() { Some(s.model.trim()) } else { None },
        "reason": p.reason,
        "sentence": p.reason.and_then(Rejection::from_code).map(Rejection::sentence),
        "checked": p.report.as_ref().map(|r| r.fidelity.checked),
        "fidelity": p.report.as_ref().map(|r| r.fidelity),
        "modelText": p.model_text,
        "edits": edits,
        "latencyMs": p.latency.as_millis() as u64,
    })
}
