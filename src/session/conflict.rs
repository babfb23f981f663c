//! What a sync engine leaves beside a session: conflict copies of its `session.jsonl`, and
//! files that are still arriving.
//!
//! A session folder kept in a synced folder (iCloud Drive, Syncthing, Dropbox) is copied
//! between Macs by the engine, never by Persyk. When two Macs append to one session before
//! they see each other's lines, the engine keeps both versions: one stays `session.jsonl`,
//! the other becomes a *conflict copy* beside it, named the engine's way:
//!
//! | Engine | Conflict copy of `session.jsonl` |
//! |---|---|
//! | Syncthing | `session.sync-conflict-20260101-120000-ABCDEFG.jsonl` |
//! | Dropbox | `session (Anna's conflicted copy 2026-01-01).jsonl` |
//! | iCloud Drive | `session 2.jsonl` |
//!
//! [`super::merge`] merges such a copy by explicit recovery. While an engine is still
//! bringing a file, it keeps it under a temporary name (Syncthing `.syncthing.<name>.tmp`,
//! `~syncthing~<name>.tmp` on Windows; iCloud's `.<name>.icloud` placeholder of a file not
//! downloaded yet; Dropbox's `.dropbox.cache` folder): such names are never sessions, never
//! read, and make the session show as *syncing* rather than damaged.
//!
//! Invariants:
//! - Pure name rules plus one directory listing per folder; nothing here opens a file.
//! - A name is a conflict copy only in the exact shapes above (Syncthing's may repeat, for a
//!   copy of a copy; Dropbox's parenthesis must say "conflict" in one of the languages its
//!   clients use); every other file beside `session.jsonl` is left alone and never merged.

use std::fs;
use std::io;
use std::path::Path;

use super::SESSION_FILE;

/// The sync engine whose naming a file follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncEngine {
    Syncthing,
    Dropbox,
    ICloud,
}

impl SyncEngine {
    /// The engine's name as people know it.
    pub fn name(self) -> &'static str {
        match self {
            SyncEngine::Syncthing => "Syncthing",
            SyncEngine::Dropbox => "Dropbox",
            SyncEngine::ICloud => "iCloud Drive",
        }
    }
}

const STEM: &str = "session";
const EXT: &str = ".jsonl";

/// Which engine's conflict copy of `session.jsonl` the file `name` is, if it is one.
pub fn conflict_copy_engine(name: &str) -> Option<SyncEngine> {
    conflict_copy_of(name, STEM, EXT)
}

/// Which engine's conflict copy of the file `<stem><ext>` (`ext` with its dot) the file
/// `name` is, if it is one: the same three shapes as for `session.jsonl`.
pub fn conflict_copy_of(name: &str, stem: &str, ext: &str) -> Option<SyncEngine> {
    let middle = name.strip_prefix(stem)?.strip_suffix(ext)?;
    if is_syncthing_suffix(middle) {
        return Some(SyncEngine::Syncthing);
    }
    if is_dropbox_suffix(middle) {
        return Some(SyncEngine::Dropbox);
    }
    if is_icloud_suffix(middle) {
        return Some(SyncEngine::ICloud);
    }
    None
}

/// `.sync-conflict-YYYYMMDD-HHMMSS-DEVICE`, once or more (a conflict of a conflict copy).
fn is_syncthing_suffix(mut s: &str) -> bool {
    let mut seen = false;
    while let Some(rest) = s.strip_prefix(".sync-conflict-") {
        let b = rest.as_bytes();
        let digits =
            |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
        if !(digits(0..8) && b.get(8) == Some(&b'-') && digits(9..15) && b.get(15) == Some(&b'-')) {
            return false;
        }
        let device = &rest[16..];
        let end = device.find('.').unwrap_or(device.len());
        if end == 0 || !device[..end].bytes().all(|c| c.is_ascii_alphanumeric()) {
            return false;
        }
        s = &device[end..];
        seen = true;
    }
    seen && s.is_empty()
}

/// Words Dropbox's clients put in a conflicted copy's parenthesis, lowercased: English
/// ("conflicted copy", "Case Conflict"), German ("Konfliktkopie"), French ("copie en
/// conflit"), Spanish and Portuguese ("copia en conflicto", "cópia em conflito"), Italian
/// ("copia in conflitto"), Dutch ("conflicterende kopie").
const DROPBOX_WORDS: [&str; 3] = ["conflict", "konflikt", "conflit"];

/// ` (<… conflicted copy …>)`.
fn is_dropbox_suffix(s: &str) -> bool {
    let Some(inner) = s.strip_prefix(" (").and_then(|r| r.strip_suffix(')')) else {
        return false;
    };
    let lower = inner.to_lowercase();
    !inner.is_empty() && DROPBOX_WORDS.iter().any(|w| lower.contains(w))
}

/// ` N` with N ≥ 2 (iCloud Drive numbers the second copy 2).
fn is_icloud_suffix(s: &str) -> bool {
    let Some(n) = s.strip_prefix(' ') else {
        return false;
    };
    !n.is_empty()
        && n.len() <= 6
        && n.bytes().all(|c| c.is_ascii_digit())
        && !n.starts_with('0')
        && n != "1"
}

/// Whether `name` is a sync engine's file still arriving (or a placeholder of one not yet
/// downloaded): never read, and a sign that the folder is syncing.
pub fn is_arriving(name: &str) -> bool {
    (name.starts_with(".syncthing.") && name.ends_with(".tmp"))
        || (name.starts_with("~syncthing~") && name.ends_with(".tmp"))
        || (name.starts_with('.') && name.ends_with(".icloud") && name.len() > ".icloud".len() + 1)
}

/// The name of iCloud's placeholder for `name` (a file not downloaded to this Mac yet).
pub fn icloud_placeholder(name: &str) -> String {
    format!(".{name}.icloud")
}

/// What one listing of a session folder says about syncing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FolderSync {
    /// Conflict copies of `session.jsonl`, sorted by name.
    pub copies: Vec<(String, SyncEngine)>,
    /// A file of the folder is still arriving (a temporary file or a placeholder).
    pub arriving: bool,
    /// `session.jsonl` itself is only an iCloud placeholder here.
    pub placeholder: bool,
}

/// Lists `dir` once: its conflict copies and whether anything in it is still arriving.
pub fn scan_folder(dir: &Path) -> io::Result<FolderSync> {
    let mut out = FolderSync::default();
    let placeholder = icloud_placeholder(SESSION_FILE);
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(engine) = conflict_copy_engine(name) {
            out.copies.push((name.to_owned(), engine));
        } else if is_arriving(name) {
            out.arriving = true;
            out.placeholder |= name == placeholder;
        }
    }
    out.copies.sort();
    Ok(out)
}

/// Whether anything in `dir` (a session's `assets/`, say) is still arriving.
pub fn has_arriving(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|r| {
        r.flatten()
            .any(|e| e.file_name().to_str().is_some_and(is_arriving))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_engines_conflict_names() {
        for (name, engine) in [
            (
                "session.sync-conflict-20260101-120000-ABCDEFG.jsonl",
                SyncEngine::Syncthing,
            ),
            (
                "session.sync-conflict-20260101-120000-ABCDEFG.sync-conflict-20260102-000000-XYZ2345.jsonl",
                SyncEngine::Syncthing,
            ),
            (
                "session (Anna's conflicted copy 2026-01-01).jsonl",
                SyncEngine::Dropbox,
            ),
            (
                "session (Anna's conflicted copy 2026-01-01 (1)).jsonl",
                SyncEngine::Dropbox,
            ),
            (
                "session (Konfliktkopie von Anna 2026-01-01).jsonl",
                SyncEngine::Dropbox,
            ),
            ("session (Case Conflict).jsonl", SyncEngine::Dropbox),
            ("session 2.jsonl", SyncEngine::ICloud),
            ("session 13.jsonl", SyncEngine::ICloud),
        ] {
            assert_eq!(conflict_copy_engine(name), Some(engine), "{name}");
        }
    }

    #[test]
    fn other_names_are_not_copies() {
        for name in [
            "session.jsonl",
            "session.jsonl.fragment-20260101T000000.000Z",
            "session 1.jsonl",
            "session 02.jsonl",
            "session .jsonl",
            "session (backup).jsonl",
            "session.sync-conflict-2026-120000-ABCDEFG.jsonl",
            "session.sync-conflict-20260101-120000-.jsonl",
            "session.sync-conflict-20260101-120000-AB/C.jsonl",
            "notes (conflicted copy).jsonl",
            "session 2.json",
            ".syncthing.session.jsonl.tmp",
        ] {
            assert_eq!(conflict_copy_engine(name), None, "{name}");
        }
    }

    #[test]
    fn arriving_files() {
        assert!(is_arriving(".syncthing.session.jsonl.tmp"));
        assert!(is_arriving(".syncthing.rec-1.wav.tmp"));
        assert!(is_arriving("~syncthing~session.jsonl.tmp"));
        assert!(is_arriving(".session.jsonl.icloud"));
        assert!(!is_arriving("session.jsonl"));
        assert!(!is_arriving(".icloud"));
        assert!(!is_arriving("rec-1.wav"));
    }
}
