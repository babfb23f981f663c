//! Settings worth sharing between Macs, kept beside the history (issue #37 item 6).
//!
//! With `sync.shareSettings` on, the settings that describe *how a person writes* live in
//! one file in the sessions folder, [`SHARED_FILE`], which the sync engine carries to every
//! Mac like the sessions: "Words Persyk should know" (`provider.keywords`) and the clean-up's
//! mode, per-app rules, "Dictate + clean" mode, translation language, own instruction and
//! replacements. Everything about *this Mac* never goes there: the shortcut, the
//! microphone, start at login, the engine and model, the clean-up server and its key.
//!
//! Invariants:
//! - The file is written atomically (a temporary file in the same folder, fsynced, renamed
//!   over it, the folder fsynced), and only when what it says changes: an unchanged save
//!   writes nothing, so two Macs saving other settings never make a conflict.
//! - A save changes only the fields this Mac's user changed ([`merge3`] against what this
//!   Mac last read): a word another Mac added meanwhile is never written away.
//! - Nothing is lost in a conflict. The engine's conflict copy of the file (the three shapes
//!   of `session::conflict`) is listed, never read as the file; it goes only when the user
//!   chose ([`resolve`]: keep both lists, or use the other Mac's), after the result is
//!   durable. A file that does not parse is set aside (`persyk-settings.json.damaged-<time>`)
//!   before a save writes a new one, never overwritten.
//! - A file iCloud has not downloaded (its placeholder, or a dataless file) is not read:
//!   this Mac goes on with its own copy of the settings ([`SharedRead::NotHere`]).
//! - Keys a newer Persyk wrote are kept as they were.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::cleanup::replace::Rule;
use crate::cleanup::settings::{AppRule, CleanupMode};
use crate::session::conflict::{self, SyncEngine};
use crate::session::fsio::{replace_file, sync_dir};
use crate::settings::Settings;

use super::SyncError;

/// The shared settings' file, in the sessions folder (the write root).
pub const SHARED_FILE: &str = "persyk-settings.json";
const STEM: &str = "persyk-settings";
const EXT: &str = ".json";
/// The largest shared settings file read (the lists' own limits keep it far smaller).
const MAX_BYTES: u64 = 4 << 20;

/// What the shared file holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedSettings {
    /// "Words Persyk should know".
    #[serde(default)]
    pub keywords: Vec<String>,
    /// The clean-up mode for every app without a rule.
    #[serde(default)]
    pub cleanup_mode: CleanupMode,
    #[serde(default)]
    pub per_app: Vec<AppRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shortcut_mode: Option<CleanupMode>,
    /// Translate's target language.
    #[serde(default)]
    pub language: String,
    /// My instruction's text.
    #[serde(default)]
    pub instruction: String,
    #[serde(default)]
    pub replacements: Vec<Rule>,
    /// Keys this version does not know, kept as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl SharedSettings {
    /// The shared part of `settings`.
    pub fn of(settings: &Settings) -> SharedSettings {
        let c = &settings.cleanup;
        SharedSettings {
            keywords: settings.provider.keywords.clone(),
            cleanup_mode: c.mode,
            per_app: c.per_app.clone(),
            shortcut_mode: c.shortcut_mode,
            language: c.language.clone(),
            instruction: c.instruction.clone(),
            replacements: c.replacements.clone(),
            other: Map::new(),
        }
    }

    /// `settings` with its shared part replaced by this.
    pub fn apply(&self, settings: &mut Settings) {
        settings.provider.keywords = self.keywords.clone();
        let c = &mut settings.cleanup;
        c.mode = self.cleanup_mode;
        c.per_app = self.per_app.clone();
        c.shortcut_mode = self.shortcut_mode;
        c.language = self.language.clone();
        c.instruction = self.instruction.clone();
        c.replacements = self.replacements.clone();
    }
}

/// A three-way merge, field by field: the field as `mine` has it where this Mac's user
/// changed it since `base` (what this Mac last read), else as `disk` has it now.
pub fn merge3(
    base: &SharedSettings,
    mine: &SharedSettings,
    disk: &SharedSettings,
) -> SharedSettings {
    fn pick<T: PartialEq + Clone>(base: &T, mine: &T, disk: &T) -> T {
        if mine == base {
            disk.clone()
        } else {
            mine.clone()
        }
    }
    SharedSettings {
        keywords: pick(&base.keywords, &mine.keywords, &disk.keywords),
        cleanup_mode: pick(&base.cleanup_mode, &mine.cleanup_mode, &disk.cleanup_mode),
        per_app: pick(&base.per_app, &mine.per_app, &disk.per_app),
        shortcut_mode: pick(
            &base.shortcut_mode,
            &mine.shortcut_mode,
            &disk.shortcut_mode,
        ),
        language: pick(&base.language, &mine.language, &disk.language),
        instruction: pick(&base.instruction, &mine.instruction, &disk.instruction),
        replacements: pick(&base.replacements, &mine.replacements, &disk.replacements),
        other: disk.other.clone(),
    }
}

/// What reading the shared file found.
#[derive(Debug, Clone, PartialEq)]
pub enum SharedRead {
    /// No shared file yet (the first Mac to share writes it).
    Missing,
    Found(SharedSettings),
    /// The engine has not brought it to this Mac yet (an iCloud placeholder or a dataless
    /// file): not read, nothing waits for it.
    NotHere,
}

/// The shared file in the sessions folder `dir`.
pub fn read(dir: &Path) -> Result<SharedRead, SyncError> {
    let path = dir.join(SHARED_FILE);
    let meta = match fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(
                if dir.join(conflict::icloud_placeholder(SHARED_FILE)).exists() {
                    SharedRead::NotHere
                } else {
                    SharedRead::Missing
                },
            );
        }
        Err(e) => return Err(SyncError::io("read shared settings")(e)),
    };
    if crate::session::discover::is_dataless(&meta) {
        return Ok(SharedRead::NotHere);
    }
    parse_file(&path).map(SharedRead::Found)
}

fn parse_file(path: &Path) -> Result<SharedSettings, SyncError> {
    let mut bytes = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes))
        .map_err(SyncError::io("read shared settings"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(SyncError::SharedInvalid);
    }
    serde_json::from_slice(&bytes).map_err(|_| SyncError::SharedInvalid)
}

/// Writes `shared` as the shared file of `dir` unless it already says the same (then
/// nothing is written: `Ok(false)`). A file there that does not parse is set aside first.
pub fn write(dir: &Path, shared: &SharedSettings) -> Result<bool, SyncError> {
    let path = dir.join(SHARED_FILE);
    match parse_file(&path) {
        Ok(now) if now == *shared => return Ok(false),
        Ok(_) => {}
        Err(SyncError::SharedInvalid) => {
            let aside = dir.join(format!(
                "{SHARED_FILE}.damaged-{}",
                crate::session::store::now_iso().replace(':', "")
            ));
            fs::rename(&path, aside).map_err(SyncError::io("set damaged shared settings aside"))?;
        }
        Err(SyncError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut text = serde_json::to_vec_pretty(shared).map_err(|_| SyncError::SharedInvalid)?;
    text.push(b'\n');
    replace_file(dir, SHARED_FILE, &text)
        .and_then(|()| sync_dir(dir))
        .map_err(SyncError::io("write shared settings"))?;
    Ok(true)
}

/// The engines' conflict copies of the shared file in `dir`, sorted by name.
pub fn conflicts(dir: &Path) -> Vec<(String, SyncEngine)> {
    let mut out: Vec<(String, SyncEngine)> = fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_str()?.to_owned();
                    let engine = conflict::conflict_copy_of(&name, STEM, EXT)?;
                    Some((name, engine))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// How the user settles a conflict copy of the shared file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolve {
    /// This Mac's settings, with every word, replacement and app rule the other Mac had
    /// that this one lacks added after its own.
    KeepBoth,
    /// The other Mac's settings as they are in the copy.
    UseTheirs,
}

/// Settles the conflict copy `copy` (a name [`conflicts`] listed) of `dir`'s shared file:
/// the result is written durably, then the copy is removed. Returns what the file says now.
pub fn resolve(dir: &Path, copy: &str, how: Resolve) -> Result<SharedSettings, SyncError> {
    if conflict::conflict_copy_of(copy, STEM, EXT).is_none() {
        return Err(SyncError::NotAConflictCopy);
    }
    let theirs = parse_file(&dir.join(copy))?;
    let mine = match read(dir)? {
        SharedRead::Found(s) => s,
        SharedRead::Missing => SharedSettings::default(),
        SharedRead::NotHere => return Err(SyncError::NotDownloaded),
    };
    let result = match how {
        Resolve::UseTheirs => theirs,
        Resolve::KeepBoth => keep_both(mine, &theirs),
    };
    write(dir, &result)?;
    fs::remove_file(dir.join(copy)).map_err(SyncError::io("remove the conflict copy"))?;
    sync_dir(dir).map_err(SyncError::io("sync sessions folder"))?;
    Ok(result)
}

/// `mine`, with what only `theirs` has appended to each list: words (compared without
/// case), replacements (by what they replace), app rules (by app).
fn keep_both(mut mine: SharedSettings, theirs: &SharedSettings) -> SharedSettings {
    for word in &theirs.keywords {
        if !mine.keywords.iter().any(|w| w.eq_ignore_ascii_case(word)) {
            mine.keywords.push(word.clone());
        }
    }
    for rule in &theirs.replacements {
        if !mine.replacements.iter().any(|r| r.from == rule.from) {
            mine.replacements.push(rule.clone());
        }
    }
    for rule in &theirs.per_app {
        if !mine
            .per_app
            .iter()
            .any(|r| r.app.eq_ignore_ascii_case(&rule.app))
        {
            mine.per_app.push(rule.clone());
        }
    }
    for (k, v) in &theirs.other {
        mine.other.entry(k.clone()).or_insert_with(|| v.clone());
    }
    mine
}

/// Where the shared file of `settings` is: the write root, when sharing is on.
pub fn location(settings: &Settings, dev: bool) -> Option<PathBuf> {
    if !settings.sync.share_settings {
        return None;
    }
    settings
        .roots(dev)
        .ok()
        .map(|r| r.write_root().to_path_buf())
}

/// What loading found, for the settings window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SharedState {
    /// The shared part as read from the file (the base of the next save's [`merge3`]);
    /// `None` when sharing is off or nothing was read.
    pub base: Option<SharedSettings>,
    /// Conflict copies waiting for the user.
    pub conflicts: Vec<(String, SyncEngine)>,
    /// Why the file could not be used (a stable code), if it could not.
    pub problem: Option<&'static str>,
}

/// Applies the shared file to `settings` when sharing is on: its fields replace this Mac's
/// copy of them. A missing file is written from this Mac's settings (the first Mac to share
/// starts it).
pub fn load_into(settings: &mut Settings, dev: bool) -> SharedState {
    let Some(dir) = location(settings, dev) else {
        return SharedState::default();
    };
    let mut state = SharedState {
        conflicts: conflicts(&dir),
        ..SharedState::default()
    };
    match read(&dir) {
        Ok(SharedRead::Found(shared)) => {
            shared.apply(settings);
            state.base = Some(shared);
        }
        Ok(SharedRead::Missing) => {
            let mine = SharedSettings::of(settings);
            match dir.is_dir().then(|| write(&dir, &mine)) {
                Some(Ok(_)) => state.base = Some(mine),
                Some(Err(e)) => state.problem = Some(e.code()),
                // The sessions folder is made by the first recording; nothing to share yet.
                None => {}
            }
        }
        Ok(SharedRead::NotHere) => state.problem = Some("sync.not-downloaded"),
        Err(e) => state.problem = Some(e.code()),
    }
    state
}

/// `settings` with the shared file's fields when sharing is on and the file is here; reads
/// only (the command line never writes the shared file).
pub fn with_shared(mut settings: Settings, dev: bool) -> Settings {
    if let Some(dir) = location(&settings, dev)
        && let Ok(SharedRead::Found(shared)) = read(&dir)
    {
        shared.apply(&mut settings);
    }
    settings
}

/// Saves the shared part of `settings` when sharing is on: each field this Mac's user
/// changed since `base` is written, every other as the file says now ([`merge3`]), and
/// `settings` takes the result. Returns what the file says after the save.
pub fn save_from(
    settings: &mut Settings,
    base: Option<&SharedSettings>,
    dev: bool,
) -> Result<Option<SharedSettings>, SyncError> {
    let Some(dir) = location(settings, dev) else {
        return Ok(None);
    };
    if !dir.is_dir() {
        crate::session::fsio::create_private_dir_all(&dir)
            .map_err(SyncError::io("create sessions folder"))?;
    }
    let mine = SharedSettings::of(settings);
    let result = match (read(&dir), base) {
        (Ok(SharedRead::Found(disk)), Some(base)) => merge3(base, &mine, &disk),
        // Sharing just turned on here while another Mac already shares: its settings, with
        // what only this Mac's lists hold added.
        (Ok(SharedRead::Found(disk)), None) => keep_both(disk, &mine),
        (Ok(SharedRead::NotHere), _) => return Err(SyncError::NotDownloaded),
        (Ok(SharedRead::Missing), _) | (Err(SyncError::SharedInvalid), _) => mine,
        (Err(e), _) => return Err(e),
    };
    result.apply(settings);
    write(&dir, &result)?;
    Ok(Some(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> SharedSettings {
        SharedSettings {
            keywords: list.iter().map(|w| (*w).to_owned()).collect(),
            ..SharedSettings::default()
        }
    }

    #[test]
    fn a_save_writes_only_what_this_mac_changed() {
        let base = words(&["Persyk"]);
        // The other Mac added a word; this one changed the mode only.
        let disk = words(&["Persyk", "Kubernetes"]);
        let mut mine = base.clone();
        mine.cleanup_mode = CleanupMode::Tidy;
        let merged = merge3(&base, &mine, &disk);
        assert_eq!(merged.keywords, disk.keywords);
        assert_eq!(merged.cleanup_mode, CleanupMode::Tidy);
        // This Mac removed a word: its list wins that field.
        let mine = words(&[]);
        assert!(merge3(&base, &mine, &disk).keywords.is_empty());
    }

    #[test]
    fn an_unchanged_save_writes_nothing_and_a_damaged_file_is_set_aside() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = words(&["Persyk"]);
        assert!(write(dir.path(), &s).expect("write"));
        let before = fs::metadata(dir.path().join(SHARED_FILE))
            .expect("meta")
            .modified()
            .expect("mtime");
        assert!(!write(dir.path(), &s).expect("same"));
        assert_eq!(
            fs::metadata(dir.path().join(SHARED_FILE))
                .expect("meta")
                .modified()
                .expect("mtime"),
            before
        );
        fs::write(dir.path().join(SHARED_FILE), "{\"keywords\": [").expect("damage");
        assert!(matches!(read(dir.path()), Err(SyncError::SharedInvalid)));
        assert!(write(dir.path(), &s).expect("write over"));
        let aside: Vec<String> = fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("persyk-settings.json.damaged-"))
            .collect();
        assert_eq!(aside.len(), 1);
        assert_eq!(
            fs::read_to_string(dir.path().join(&aside[0])).expect("kept"),
            "{\"keywords\": ["
        );
    }

    #[test]
    fn a_conflict_copy_is_kept_until_the_user_settles_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut mine = words(&["Persyk", "Siobhan"]);
        mine.replacements.push(Rule {
            from: "pers ik".into(),
            to: "Persyk".into(),
        });
        write(dir.path(), &mine).expect("mine");
        let mut theirs = words(&["persyk", "Kowalczyk"]);
        theirs.replacements.push(Rule {
            from: "cube ernetes".into(),
            to: "Kubernetes".into(),
        });
        for (copy, engine) in [
            (
                "persyk-settings.sync-conflict-20261205-120000-ABCDEFG.json",
                SyncEngine::Syncthing,
            ),
            (
                "persyk-settings (Anna's conflicted copy 2026-12-05).json",
                SyncEngine::Dropbox,
            ),
            ("persyk-settings 2.json", SyncEngine::ICloud),
        ] {
            write(dir.path(), &mine).expect("mine");
            fs::write(
                dir.path().join(copy),
                serde_json::to_vec(&theirs).expect("json"),
            )
            .expect("copy");
            assert_eq!(conflicts(dir.path()), vec![(copy.to_owned(), engine)]);
            // Reading the settings never takes the copy for the file.
            assert_eq!(
                read(dir.path()).expect("read"),
                SharedRead::Found(mine.clone())
            );
            let both = resolve(dir.path(), copy, Resolve::KeepBoth).expect("settle");
            assert_eq!(both.keywords, ["Persyk", "Siobhan", "Kowalczyk"]);
            assert_eq!(both.replacements.len(), 2);
            assert!(conflicts(dir.path()).is_empty());
            assert_eq!(read(dir.path()).expect("read"), SharedRead::Found(both));
        }
        fs::write(
            dir.path().join("persyk-settings 2.json"),
            serde_json::to_vec(&theirs).expect("json"),
        )
        .expect("copy");
        let used = resolve(dir.path(), "persyk-settings 2.json", Resolve::UseTheirs).expect("use");
        assert_eq!(used.keywords, theirs.keywords);
        assert!(matches!(
            resolve(dir.path(), "persyk-settings.json", Resolve::UseTheirs),
            Err(SyncError::NotAConflictCopy)
        ));
    }

    #[test]
    fn only_the_shared_part_travels() {
        let mut s = Settings::default();
        s.provider.keywords = vec!["Persyk".into()];
        s.cleanup.mode = CleanupMode::Tidy;
        s.cleanup.base_url = "http://127.0.0.1:11434/v1".into();
        s.cleanup.model = "llama3.2".into();
        s.capture.device = Some("USB Mic".into());
        let shared = SharedSettings::of(&s);
        let text = serde_json::to_string(&shared).expect("json");
        for private in ["11434", "llama3.2", "USB Mic"] {
            assert!(!text.contains(private), "{private} is this Mac's");
        }
        let mut other = Settings::default();
        other.cleanup.base_url = "http://127.0.0.1:8080/v1".into();
        shared.apply(&mut other);
        assert_eq!(other.provider.keywords, ["Persyk"]);
        assert_eq!(other.cleanup.mode, CleanupMode::Tidy);
        assert_eq!(other.cleanup.base_url, "http://127.0.0.1:8080/v1");
    }
}
