//! Discovery: which session folders the configured roots hold right now, read from the
//! file system on every call (there is no catalog to go stale).
//!
//! A session is a direct child folder of a root that holds a `session.jsonl`. For each one
//! discovery reads only the header line — identity and created time — so it costs one small
//! read per session however large the files are. Bodies are read later, by [`super::search`],
//! one page at a time.
//!
//! Invariants:
//! - Every location is canonical (symlinks and `..` resolved) and reported once. A symlinked
//!   session folder is listed at its target's canonical location, whether the target lies in
//!   the same root, in another root or outside every root; two links to one folder give one
//!   session. Read-only listing authorizes nothing: writes still go through
//!   [`super::Store`], which refuses a folder that leaves its root.
//! - Names starting with `.` are never sessions (`.persyk-trash`, `.persyk-new-*` staging
//!   folders, editor and OS litter); neither are names that are not UTF-8 or not one plain
//!   path component ([`is_plain_name`]).
//! - Two distinct locations whose headers carry the same id are both listed, each pointing at
//!   the other through `duplicate_of`.
//! - A missing *default* root is an empty list (the first recording creates it). A missing
//!   *explicit* root, an unreadable root and a root that is not a folder are root
//!   diagnostics; nothing here panics or stops at the first problem.
//! - A session that cannot be read, or whose `session.jsonl` is not a regular file (the store
//!   refuses those too), is listed with its problem instead of being hidden.
//! - Diagnostics carry codes and paths only, never file content.
//! - A sync engine's files are never read as sessions ([`super::conflict`]): temporary files
//!   and iCloud placeholders have other names than `session.jsonl`. A folder whose
//!   `session.jsonl` has not arrived yet (only its iCloud placeholder is there, or on macOS a
//!   *dataless* file iCloud would download first) is listed as syncing and not read at all,
//!   so nothing waits on a download. Each session's folder is listed once for conflict copies
//!   and files still arriving ([`DiscoveredSession::sync`]).

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::SESSION_FILE;
use super::conflict::{FolderSync, icloud_placeholder, scan_folder};
use super::record::MAX_RECORD_BYTES;
use super::store::{Roots, is_plain_name};
use super::validate::Scanner;

/// Why a root or a session could not be discovered. Each variant has a stable
/// [`DiscoverError::code`]; none carries file content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    /// An explicitly configured root does not exist.
    #[error("discover.root-missing: the session root {} does not exist", root.display())]
    RootMissing { root: PathBuf },
    /// A root exists but cannot be resolved or listed (permissions, I/O).
    #[error("discover.root-unreadable: the session root {} cannot be read: {source}", root.display())]
    RootUnreadable {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A root is not a folder.
    #[error("discover.root-not-directory: the session root {} is not a folder", root.display())]
    RootNotDirectory { root: PathBuf },
    /// A session folder's `session.jsonl` is a symlink, a folder or another non-regular file.
    #[error("discover.session-file-not-regular: session.jsonl is not a regular file")]
    SessionFileNotRegular,
    /// A session folder or its file could not be resolved, opened or read.
    #[error("discover.session-unreadable: the session cannot be read: {source}")]
    SessionUnreadable {
        #[source]
        source: io::Error,
    },
}

impl DiscoverError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            DiscoverError::RootMissing { .. } => "discover.root-missing",
            DiscoverError::RootUnreadable { .. } => "discover.root-unreadable",
            DiscoverError::RootNotDirectory { .. } => "discover.root-not-directory",
            DiscoverError::SessionFileNotRegular => "discover.session-file-not-regular",
            DiscoverError::SessionUnreadable { .. } => "discover.session-unreadable",
        }
    }
}

/// One root to discover, and whether the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootSpec {
    pub path: PathBuf,
    /// Configured or given on the command line. A missing explicit root is a diagnostic; a
    /// missing default root is simply empty.
    pub explicit: bool,
}

impl RootSpec {
    /// A root the user named (settings, `--root`).
    pub fn explicit(path: impl Into<PathBuf>) -> RootSpec {
        RootSpec {
            path: path.into(),
            explicit: true,
        }
    }

    /// The configured roots in order; the write root counts as explicit unless it is the
    /// built-in default (`sessions.directory` unset).
    pub fn from_roots(roots: &Roots, write_root_is_default: bool) -> Vec<RootSpec> {
        roots
            .all()
            .iter()
            .enumerate()
            .map(|(i, p)| RootSpec {
                path: p.clone(),
                explicit: i > 0 || !write_root_is_default,
            })
            .collect()
    }
}

/// A session's identity as its header line states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderSummary {
    pub id: String,
    /// The header timestamp as written.
    pub created: String,
    /// The same instant as nanoseconds since the Unix epoch (the sort key).
    pub created_ns: i128,
}

/// One discovered session folder.
#[derive(Debug)]
pub struct DiscoveredSession {
    /// Canonical session folder.
    pub location: PathBuf,
    /// Index of the first root (in configured order) it was found under.
    pub root: usize,
    /// `None` when the first line is not a valid header (the full scan names the problem).
    pub header: Option<HeaderSummary>,
    /// Another location whose header carries the same id.
    pub duplicate_of: Option<PathBuf>,
    /// Why the session could not be read at all.
    pub problem: Option<DiscoverError>,
    /// Conflict copies beside the file, and whether files of the folder are still arriving.
    pub sync: FolderSync,
}

impl DiscoveredSession {
    /// The `session.jsonl` inside the location.
    pub fn file(&self) -> PathBuf {
        self.location.join(SESSION_FILE)
    }

    /// Created time in ns, when the header is valid.
    pub fn created_ns(&self) -> Option<i128> {
        self.header.as_ref().map(|h| h.created_ns)
    }
}

/// The sessions under a set of roots, newest first, plus the roots' own diagnostics.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Sorted by [`order`]: created time descending (no valid header last), then location.
    pub sessions: Vec<DiscoveredSession>,
    pub root_diagnostics: Vec<DiscoverError>,
}

/// The listing order: created time descending, sessions without a valid header last, ties
/// broken by the location's bytes ascending. Cursors ([`super::search::Cursor`]) rely on it
/// being total.
pub fn order(a: (Option<i128>, &Path), b: (Option<i128>, &Path)) -> Ordering {
    let created = match (a.0, b.0) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    created.then_with(|| a.1.as_os_str().as_bytes().cmp(b.1.as_os_str().as_bytes()))
}

/// A candidate session folder found while listing a root.
struct Candidate {
    location: PathBuf,
    root: usize,
    problem: Option<DiscoverError>,
    /// `session.jsonl` is not on this Mac yet (an iCloud placeholder or a dataless file).
    not_downloaded: bool,
}

/// Lists the sessions of `roots`. Never fails as a whole: root problems become
/// [`Discovery::root_diagnostics`], session problems [`DiscoveredSession::problem`].
pub fn discover(roots: &[RootSpec]) -> Discovery {
    let mut root_diagnostics = Vec::new();
    let mut candidates = Vec::new();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    for (i, spec) in roots.iter().enumerate() {
        list_root(i, spec, &mut candidates, &mut seen, &mut root_diagnostics);
    }
    let mut sessions: Vec<DiscoveredSession> = candidates
        .into_par_iter()
        .map(|c| {
            let mut sync = scan_folder(&c.location).unwrap_or_default();
            sync.placeholder |= c.not_downloaded;
            let (header, problem) = match c.problem {
                Some(p) => (None, Some(p)),
                None if sync.placeholder => (None, None),
                None => match read_header(&c.location.join(SESSION_FILE)) {
                    Ok(h) => (h, None),
                    Err(source) => (None, Some(DiscoverError::SessionUnreadable { source })),
                },
            };
            DiscoveredSession {
                location: c.location,
                root: c.root,
                header,
                duplicate_of: None,
                problem,
                sync,
            }
        })
        .collect();
    mark_duplicates(&mut sessions);
    sessions.sort_by(|a, b| order((a.created_ns(), &a.location), (b.created_ns(), &b.location)));
    Discovery {
        sessions,
        root_diagnostics,
    }
}

fn list_root(
    index: usize,
    spec: &RootSpec,
    out: &mut Vec<Candidate>,
    seen: &mut HashSet<PathBuf>,
    diags: &mut Vec<DiscoverError>,
) {
    let root = &spec.path;
    let unreadable = |source| DiscoverError::RootUnreadable {
        root: root.clone(),
        source,
    };
    let meta = match fs::metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if spec.explicit {
                diags.push(DiscoverError::RootMissing { root: root.clone() });
            }
            return;
        }
        Err(e) => return diags.push(unreadable(e)),
    };
    if !meta.is_dir() {
        return diags.push(DiscoverError::RootNotDirectory { root: root.clone() });
    }
    let canon = match root.canonicalize() {
        Ok(c) => c,
        Err(e) => return diags.push(unreadable(e)),
    };
    let entries = match fs::read_dir(&canon) {
        Ok(r) => r,
        Err(e) => return diags.push(unreadable(e)),
    };
    let mut reported_entry_error = false;
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                // Report a failing listing once per root, keep what could be read.
                if !reported_entry_error {
                    reported_entry_error = true;
                    diags.push(unreadable(e));
                }
                continue;
            }
        };
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_plain_name(name) {
            continue;
        }
        if let Some(c) = candidate(index, &canon.join(name))
            && seen.insert(c.location.clone())
        {
            out.push(c);
        }
    }
}

/// Whether `path` (a direct child of a root) is a session folder, and where it really is.
fn candidate(root: usize, path: &Path) -> Option<Candidate> {
    // Follows a symlinked folder: it is listed at its canonical location.
    if !fs::metadata(path).ok()?.is_dir() {
        return None;
    }
    let mut not_downloaded = false;
    let problem = match fs::symlink_metadata(path.join(SESSION_FILE)) {
        Ok(m) if m.file_type().is_file() => {
            not_downloaded = is_dataless(&m);
            None
        }
        Ok(_) => Some(DiscoverError::SessionFileNotRegular),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // Only iCloud's placeholder of it: a session still on its way to this Mac.
            if !path.join(icloud_placeholder(SESSION_FILE)).exists() {
                return None;
            }
            not_downloaded = true;
            None
        }
        Err(source) => Some(DiscoverError::SessionUnreadable { source }),
    };
    Some(match path.canonicalize() {
        Ok(location) => Candidate {
            location,
            root,
            problem,
            not_downloaded,
        },
        Err(source) => Candidate {
            location: path.to_path_buf(),
            root,
            problem: Some(DiscoverError::SessionUnreadable { source }),
            not_downloaded,
        },
    })
}

/// Whether a file's data is not on this Mac: macOS marks a file iCloud evicted (or has not
/// downloaded yet) `SF_DATALESS`, and reading it waits for the download.
#[cfg(target_os = "macos")]
pub fn is_dataless(meta: &fs::Metadata) -> bool {
    use std::os::macos::fs::MetadataExt;
    /// `SF_DATALESS` of `<sys/stat.h>`.
    const SF_DATALESS: u32 = 0x4000_0000;
    meta.st_flags() & SF_DATALESS != 0
}

/// Whether a file's data is not on this machine (only macOS has dataless files).
#[cfg(not(target_os = "macos"))]
pub fn is_dataless(_meta: &fs::Metadata) -> bool {
    false
}

/// Reads and validates the first line only. `Ok(None)` when it is not a valid header.
fn read_header(file: &Path) -> io::Result<Option<HeaderSummary>> {
    let f = File::open(file)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("session.jsonl is not a regular file"));
    }
    let mut r = BufReader::with_capacity(4096, f.take(MAX_RECORD_BYTES as u64 + 1));
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.pop() != Some(b'\n') {
        return Ok(None); // No complete first line: not committed.
    }
    let mut scanner = Scanner::new();
    if !scanner.push_line(&line) {
        return Ok(None);
    }
    Ok(scanner.index().header().and_then(|h| {
        let created_ns = OffsetDateTime::parse(&h.timestamp, &Rfc3339)
            .ok()?
            .unix_timestamp_nanos();
        Some(HeaderSummary {
            id: h.id.clone(),
            created: h.timestamp.clone(),
            created_ns,
        })
    }))
}

/// Points each session whose header id another location shares at one of the others: the
/// group's first location (root order, then location) points at the second, every other
/// location at the first.
fn mark_duplicates(sessions: &mut [DiscoveredSession]) {
    let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, s) in sessions.iter().enumerate() {
        if let Some(h) = &s.header {
            groups.entry(h.id.as_str()).or_default().push(i);
        }
    }
    let mut marks = Vec::new();
    for (_, mut members) in groups {
        if members.len() < 2 {
            continue;
        }
        members.sort_by(|&a, &b| {
            let (a, b) = (&sessions[a], &sessions[b]);
            a.root.cmp(&b.root).then_with(|| {
                a.location
                    .as_os_str()
                    .as_bytes()
                    .cmp(b.location.as_os_str().as_bytes())
            })
        });
        marks.push((members[0], members[1]));
        for &m in &members[1..] {
            marks.push((m, members[0]));
        }
    }
    for (who, other) in marks {
        sessions[who].duplicate_of = Some(sessions[other].location.clone());
    }
}
