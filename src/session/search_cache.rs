//! Search-as-you-type: a per-file cache of what one validation found, reused between queries
//! while the file is provably the same. Used by the app; the CLI stays cache-free
//! ([`super::search`]).
//!
//! For each session file the cache keeps a [`Summary`]: the file's identity when it was
//! scanned, its committed length, the row fields a listing shows (default leaf, label, message
//! count, duration, first diagnostic) and the byte spans of the surviving conversation's lines
//! on the default path, plus the session name and labels. It keeps no index and no text: a
//! query reads the conversation lines back by offset (contiguous lines in one read), runs the
//! same sound prefilter as [`super::search`] over them, and parses entries only when the
//! prefilter cannot rule a match out. Results are the ones [`super::search::search`] gives.
//!
//! Invariants:
//! - A summary is used only when the file's identity — device, inode, size, modification and
//!   status-change times ([`FileIdentity`]) — is the one recorded when it was built. An
//!   append changes the size and times, a truncate-and-rewrite the times (the status-change
//!   time even when the modification time is set back), a replace by rename the inode, a
//!   deletion removes the file: each makes the next query rebuild the summary.
//! - Racy files are never cached: a summary is stored only when the file's times are at least
//!   [`RACY_WINDOW`] older than the moment its scan began (as git does for its index), so a
//!   change within one timestamp tick cannot hide; and only when the identity did not change
//!   during the scan.
//! - Bounded: one summary per discovered session (entries for sessions no longer discovered
//!   are dropped at each request); a summary is a few strings and 12 bytes per conversation
//!   entry.
//! - The app opens a session from its summary ([`SearchCache::conversation`]) only for the
//!   identity the summary was built from; the opener re-checks the identity before each page
//!   it reads by span.
//! - A line read back that is no longer the entry it was (`Entry::from_line` fails) drops the
//!   summary and answers `search.changed` for that session, like an uncached read.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::discover::{DiscoveredSession, Discovery};
use super::format::Entry;
use super::index::SessionIndex;
use super::project::{LeafSelector, project};
use super::recover;
use super::search::{
    self, Outcome, Page, PageRequest, Query, Scratch, SearchError, SessionRow, base_row, describe,
    texts_of,
};
use super::validate::scan_reader;

/// How much older than a scan a file's times must be for its summary to be kept.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// Bytes of conversation lines the prefilter looks at in one go.
const REGION_BYTES: usize = 256 * 1024;

/// What must not change for a cached summary to be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl FileIdentity {
    pub fn of(meta: &Metadata) -> FileIdentity {
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }

    /// Whether both times lie at least [`RACY_WINDOW`] before `scan_began`: then any write
    /// after `scan_began` gives the file other times, even with coarse file timestamps.
    pub fn settled_before(&self, scan_began: SystemTime) -> bool {
        let Ok(began) = scan_began.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let limit = began.as_nanos() as i128 - RACY_WINDOW.as_nanos() as i128;
        self.mtime_ns <= limit && self.ctime_ns <= limit
    }
}

/// What one validation of a session file found, for later queries.
#[derive(Debug)]
pub struct Summary {
    identity: FileIdentity,
    committed_len: u64,
    kind: SummaryKind,
}

#[derive(Debug)]
enum SummaryKind {
    /// Not authoritative: listed with its first diagnostic, skipped by search with `code`.
    Blocked {
        diagnostic: Option<&'static str>,
        code: &'static str,
    },
    Described(Box<Described>),
}

#[derive(Debug)]
struct Described {
    /// The row fields that come from the file (the rest comes from discovery).
    leaf_id: Option<String>,
    archived: bool,
    message_count: Option<usize>,
    label: String,
    duration_ms: Option<u64>,
    diagnostic: Option<&'static str>,
    recorded_on: Option<String>,
    from_file: Option<String>,
    name: Option<String>,
    /// Current labels, by target position.
    labels: Vec<String>,
    /// `(offset, length)` of each surviving conversation line, in path order.
    spans: Vec<(u64, u32)>,
    /// `(offset, length)` of each `recording.*` lifecycle line, in file order.
    recordings: Vec<(u64, u32)>,
}

impl Summary {
    /// The file's length up to its last complete line when it was scanned.
    pub fn committed_len(&self) -> u64 {
        self.committed_len
    }
}

/// A cached session's default conversation ([`SearchCache::conversation`]): valid for the
/// file while its identity is [`CachedConversation::identity`].
#[derive(Debug, Clone)]
pub struct CachedConversation {
    summary: Arc<Summary>,
}

impl CachedConversation {
    fn described(&self) -> Option<&Described> {
        match &self.summary.kind {
            SummaryKind::Described(d) => Some(d),
            SummaryKind::Blocked { .. } => None,
        }
    }

    /// The identity of the file the summary was built from.
    pub fn identity(&self) -> FileIdentity {
        self.summary.identity
    }

    /// The default leaf when the file was scanned.
    pub fn leaf_id(&self) -> Option<&str> {
        self.described().and_then(|d| d.leaf_id.as_deref())
    }

    /// `(offset, length)` of each surviving conversation line on the default path.
    pub fn spans(&self) -> &[(u64, u32)] {
        self.described().map_or(&[], |d| &d.spans)
    }

    /// `(offset, length)` of each `recording.*` lifecycle line, in file order.
    pub fn recordings(&self) -> &[(u64, u32)] {
        self.described().map_or(&[], |d| &d.recordings)
    }
}

/// Counters, for tests and benches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Sessions answered from a summary.
    pub hits: u64,
    /// Sessions that were scanned.
    pub scans: u64,
}

/// The per-file cache. Cheap to share (`Arc`); every method takes `&self`.
#[derive(Debug, Default)]
pub struct SearchCache {
    entries: Mutex<HashMap<PathBuf, Arc<Summary>>>,
    hits: AtomicU64,
    scans: AtomicU64,
}

impl SearchCache {
    pub fn new() -> SearchCache {
        SearchCache::default()
    }

    /// Summaries held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<Summary>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the summaries of sessions `discovery` no longer holds.
    fn retain(&self, discovery: &Discovery) {
        let mut entries = self.lock();
        if entries.is_empty() {
            return;
        }
        let live: std::collections::HashSet<&PathBuf> =
            discovery.sessions.iter().map(|s| &s.location).collect();
        entries.retain(|k, _| live.contains(k));
    }

    /// The summary of `s` for the open `file`: the cached one when the identity matches, else
    /// a new scan (kept when the file is settled).
    fn summary(&self, s: &DiscoveredSession, file: &mut File) -> Result<Arc<Summary>, SearchError> {
        let identity = FileIdentity::of(&file.metadata()?);
        if let Some(found) = self.lock().get(&s.location)
            && found.identity == identity
        {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(found.clone());
        }
        self.scans.fetch_add(1, Ordering::Relaxed);
        let scan_began = SystemTime::now();
        let summary = Arc::new(build(s, file, identity)?);
        let after = FileIdentity::of(&file.metadata()?);
        let mut entries = self.lock();
        if after == identity && identity.settled_before(scan_began) {
            entries.insert(s.location.clone(), summary.clone());
        } else {
            entries.remove(&s.location);
        }
        Ok(summary)
    }

    /// What the cache knows of the session at `location` (as discovery named it) for opening
    /// it without a scan: `Some` only when its summary was built from a file of exactly
    /// `identity` (the caller's `fstat` of the file it opened) and its default leaf is `leaf`
    /// (`None`: the caller wants the default leaf).
    pub fn conversation(
        &self,
        location: &Path,
        identity: FileIdentity,
        leaf: Option<&str>,
    ) -> Option<CachedConversation> {
        let summary = self.lock().get(location)?.clone();
        let SummaryKind::Described(d) = &summary.kind else {
            return None;
        };
        if summary.identity != identity || leaf.is_some_and(|l| d.leaf_id.as_deref() != Some(l)) {
            return None;
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(CachedConversation { summary })
    }

    fn forget(&self, s: &DiscoveredSession) {
        self.lock().remove(&s.location);
    }
}

fn build(
    s: &DiscoveredSession,
    file: &mut File,
    identity: FileIdentity,
) -> Result<Summary, SearchError> {
    file.seek(SeekFrom::Start(0))?;
    let index = scan_reader(&mut *file)?;
    let diagnostic = index.diagnostics().first().map(|d| d.code.as_str());
    let kind = match project(&index, &LeafSelector::Default) {
        Err(_) => SummaryKind::Blocked {
            diagnostic,
            code: index
                .diagnostics()
                .iter()
                .find(|d| d.code.blocks_projection())
                .map_or("file.empty", |d| d.code.as_str()),
        },
        Ok(projection) => {
            let mut row = base_row(s);
            row.diagnostic = diagnostic;
            describe(&mut row, file, &index, &projection, None)?;
            let mut labels: Vec<(u32, &str)> = index.labels().collect();
            labels.sort_unstable_by_key(|&(target, _)| target);
            SummaryKind::Described(Box::new(Described {
                leaf_id: row.leaf_id,
                archived: row.archived,
                message_count: row.message_count,
                label: row.label,
                duration_ms: row.duration_ms,
                diagnostic: row.diagnostic,
                recorded_on: row.recorded_on,
                from_file: row.from_file,
                name: index.name().map(str::to_owned),
                labels: labels.into_iter().map(|(_, l)| l.to_owned()).collect(),
                spans: projection
                    .conversation
                    .iter()
                    .map(|&p| span(&index, p))
                    .collect(),
                recordings: recover::recording_positions(&index)
                    .into_iter()
                    .map(|p| span(&index, p))
                    .collect(),
            }))
        }
    };
    Ok(Summary {
        identity,
        committed_len: index.committed_len(),
        kind,
    })
}

fn span(index: &SessionIndex, pos: u32) -> (u64, u32) {
    let e = index.entry(pos);
    (e.offset(), e.len_bytes())
}

fn row_of(s: &DiscoveredSession, d: &Described) -> SessionRow {
    let mut row = base_row(s);
    row.leaf_id = d.leaf_id.clone();
    row.archived = d.archived;
    row.message_count = d.message_count;
    row.label = d.label.clone();
    row.duration_ms = d.duration_ms;
    row.diagnostic = d.diagnostic;
    row.recorded_on = d.recorded_on.clone();
    row.from_file = d.from_file.clone();
    row
}

/// [`search::list`], with summaries from `cache`.
pub fn list(discovery: &Discovery, page: &PageRequest, cache: &SearchCache) -> Page {
    cache.retain(discovery);
    search::list_with(discovery, page, |s| {
        let mut row = base_row(s);
        if s.problem.is_some() || s.sync.placeholder {
            return row;
        }
        let summary = File::open(s.file())
            .map_err(SearchError::from)
            .and_then(|mut f| cache.summary(s, &mut f));
        match summary {
            Ok(summary) => match &summary.kind {
                SummaryKind::Blocked { diagnostic, .. } => row.diagnostic = *diagnostic,
                SummaryKind::Described(d) => row = row_of(s, d),
            },
            Err(e) => row.diagnostic = Some(e.code()),
        }
        row
    })
}

/// [`search::search`], with summaries from `cache`: the same rows, skips and cursors.
pub fn search(
    discovery: &Discovery,
    query: &Query,
    page: &PageRequest,
    cache: &SearchCache,
) -> Page {
    cache.retain(discovery);
    search::search_with(discovery, page, |s, scratch| {
        if let Some(p) = &s.problem {
            return Outcome::Skipped(p.code());
        }
        if s.sync.placeholder {
            return Outcome::Skipped(search::NOT_DOWNLOADED);
        }
        match search_one(s, query, scratch, cache) {
            Ok(o) => o,
            Err(e) => {
                cache.forget(s);
                Outcome::Skipped(e.code())
            }
        }
    })
}

fn search_one(
    s: &DiscoveredSession,
    query: &Query,
    scratch: &mut Scratch,
    cache: &SearchCache,
) -> Result<Outcome, SearchError> {
    let mut file = File::open(s.file())?;
    let summary = cache.summary(s, &mut file)?;
    let d = match &summary.kind {
        // Like the uncached search: skipped only when the prefilter cannot rule it out.
        SummaryKind::Blocked { code, .. } => {
            file.seek(SeekFrom::Start(0))?;
            return Ok(if query.may_match_with(&mut file, scratch)? {
                Outcome::Skipped(code)
            } else {
                Outcome::NoMatch
            });
        }
        SummaryKind::Described(d) => d,
    };
    let mut excerpt = None;
    if spans_may_match(&file, &d.spans, query, scratch)? {
        'lines: for &(offset, len) in &d.spans {
            let mut line = vec![0; len as usize];
            file.read_exact_at(&mut line, offset)?;
            let text = std::str::from_utf8(&line).map_err(|_| SearchError::Changed)?;
            let entry = Entry::from_line(text).map_err(|_| SearchError::Changed)?;
            for t in texts_of(&entry).1 {
                excerpt = query.excerpt(t);
                if excerpt.is_some() {
                    break 'lines;
                }
            }
        }
    }
    if excerpt.is_none() {
        excerpt = d.name.as_deref().and_then(|n| query.excerpt(n));
    }
    if excerpt.is_none() {
        excerpt = d.labels.iter().find_map(|l| query.excerpt(l));
    }
    let Some(excerpt) = excerpt else {
        return Ok(Outcome::NoMatch);
    };
    let mut row = row_of(s, d);
    row.excerpt = Some(excerpt);
    Ok(Outcome::Hit(Box::new(row)))
}

/// The prefilter over the conversation lines only: contiguous lines are read together, and
/// regions of whole lines (each with its "\n") go through [`Query::region_may_match`].
fn spans_may_match(
    file: &File,
    spans: &[(u64, u32)],
    query: &Query,
    s: &mut Scratch,
) -> Result<bool, SearchError> {
    s.lines.clear();
    let mut pending: Option<(u64, u64)> = None;
    let flush = |range: (u64, u64), s: &mut Scratch| -> Result<bool, SearchError> {
        let at = s.lines.len();
        s.lines.resize(at + (range.1 - range.0) as usize, 0);
        file.read_exact_at(&mut s.lines[at..], range.0)?;
        if s.lines.last() != Some(&b'\n') {
            return Err(SearchError::Changed);
        }
        if s.lines.len() >= REGION_BYTES {
            let hit = query.region_may_match(&s.lines, &mut s.lower, &mut s.folded);
            s.lines.clear();
            return Ok(hit);
        }
        Ok(false)
    };
    for &(offset, len) in spans {
        let end = offset + u64::from(len) + 1;
        match &mut pending {
            Some((start, e)) if *e == offset && (end - *start) as usize <= REGION_BYTES => {
                *e = end;
            }
            _ => {
                if let Some(range) = pending.take()
                    && flush(range, s)?
                {
                    return Ok(true);
                }
                pending = Some((offset, end));
            }
        }
    }
    if let Some(range) = pending
        && flush(range, s)?
    {
        return Ok(true);
    }
    Ok(!s.lines.is_empty() && query.region_may_match(&s.lines, &mut s.lower, &mut s.folded))
}
