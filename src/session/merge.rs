//! Merging a sync engine's conflict copy back into its session, by explicit recovery.
//!
//! Two Macs that append to one session before they see each other's lines leave two files:
//! `session.jsonl` and a conflict copy beside it ([`super::conflict`]). Both start with the
//! same committed lines; each then holds entries the other lacks. This module merges the
//! copy into the session above the format, without changing it: no new record kind, no
//! committed line rewritten, nothing but ordinary appends through the store's append path
//! (the same validator, one fsync per batch), and the copy is removed only once those appends
//! are durable. `docs/format.md` §22 is the reference; in brief:
//!
//! 1. **Every entry kept.** Each entry of the copy that the session lacks is appended as it
//!    is, byte for byte, with its own id and parent, in the copy's order. An entry whose id
//!    the session already holds must be the same JSON value, else nothing is merged.
//! 2. **One view with both Macs' words.** A tree has one default leaf, so after step 1 one
//!    Mac's additions would sit on a side branch. The two default paths (the session's and
//!    the copy's) part at their last common entry, the *fork*; the side whose first entry
//!    after the fork is earlier (timestamp, then id) is the *base*, and every entry of the
//!    other side that the view is made of (messages, custom messages, removals, custom state)
//!    is *carried*: appended again, in path order, as a chain below the base's tip. The
//!    chain opens with a `custom` entry of type [`MERGE_TYPE`] (`"step":"carry"`) that names
//!    the carried originals in order; carried entry *n* has the id `<that entry's id>.<n>`,
//!    the original's timestamp and content, its parent the entry before it, and a removal's
//!    target (or a Persyk clean-up's source ids, a removal intent's target) renamed to the
//!    entry on the new path that carries the same original. Labels and the session's name
//!    and archived flag are global; where the two files resolve one differently, the later
//!    of the two (timestamp, then id) is stated again at the end of the chain, so both
//!    orders of merging agree. The chain's last entry is the file's last: the default leaf.
//! 3. **Restartable and idempotent.** Before anything else a `custom` [`MERGE_TYPE`] entry
//!    with `"step":"start"` records the copy's name, the session's leaf and the copy's leaf.
//!    Every id the merge writes is derived from what it merges (SHA-256), and every
//!    timestamp is taken from the entries involved, so a merge killed at any point and run
//!    again appends exactly what is missing, and a merge run twice appends nothing. Merging A
//!    into B or B into A yields the same view (same entries, same ids).
//!
//! Invariants:
//! - Never while this Mac records the session (a live capture's asset lock): `merge.recording`.
//! - The copy is validated line by line against the session plus the lines before it before
//!   anything is appended: a damaged copy, a copy of another session or an id reused with
//!   other content is refused with its code, and nothing is written.
//! - An incomplete final line of the copy is kept in a `session.jsonl.fragment-<time>` file
//!   before the copy goes; the copy is removed only after every append was acknowledged.
//! - Memory follows the number of entries: lines are read back by offset when needed.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

use indexmap::IndexMap;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::SESSION_FILE;
use super::conflict::{SyncEngine, conflict_copy_engine};
use super::diag::{Code, Diagnostic};
use super::format::{Entry, EntryBody, from_str_deep};
use super::index::{EntryKind, SessionIndex};
use super::record::MAX_RECORD_BYTES;
use super::store::{
    MAX_BATCH_BYTES, MAX_BATCH_RECORDS, SessionHandle, StoreError, fragment_stamp, same_json,
    write_new_file,
};
use super::validate::Scanner;

/// `customType` of the merge's own bookkeeping entries (never part of the view).
pub const MERGE_TYPE: &str = "persyk.merge";

/// References to entry ids inside Persyk's own extension entries, renamed when the entry is
/// carried: `(customType, path to an id or to an array of objects holding "id")`. Data, not
/// knowledge of the clean-up or the realtime engine.
const ID_REFERENCES: &[(&str, &[&str])] = &[
    ("persyk.cleanup", &["sources", "*", "id"]),
    ("persyk.removal-intent", &["targetId"]),
];

/// Bytes of carried ids one chain head may list before the chain opens another head.
const HEAD_BUDGET: usize = 256 * 1024;

/// Why a merge was refused. Every variant has a stable [`MergeError::code`]; none carries
/// file content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("merge.not-a-copy: the file is not a sync engine's conflict copy of session.jsonl")]
    NotACopy,
    #[error("merge.copy-unreadable: the conflict copy cannot be read: {source}")]
    CopyUnreadable {
        #[source]
        source: io::Error,
    },
    #[error(
        "merge.copy-damaged: the conflict copy violates the contract ({}); it was left as it is",
        first_code(diagnostics)
    )]
    CopyDamaged { diagnostics: Vec<Diagnostic> },
    #[error("merge.other-session: the copy belongs to another session; it was left as it is")]
    OtherSession,
    #[error(
        "merge.conflicting-entry: an entry of the copy reuses the id of a different entry; nothing was merged"
    )]
    ConflictingEntry,
    #[error(
        "merge.recording: this Mac is recording the session; merge once the recording has stopped"
    )]
    Recording,
}

fn first_code(d: &[Diagnostic]) -> &'static str {
    d.first().map_or("unknown", |d| d.code.as_str())
}

impl MergeError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            MergeError::Store(e) => e.code(),
            MergeError::NotACopy => "merge.not-a-copy",
            MergeError::CopyUnreadable { .. } => "merge.copy-unreadable",
            MergeError::CopyDamaged { .. } => "merge.copy-damaged",
            MergeError::OtherSession => "merge.other-session",
            MergeError::ConflictingEntry => "merge.conflicting-entry",
            MergeError::Recording => "merge.recording",
        }
    }
}

/// What one merge did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeReport {
    /// The copy's file name.
    pub copy: String,
    pub engine: SyncEngine,
    /// Entries of the copy the session lacked, appended as they were.
    pub appended: usize,
    /// Entries carried onto the default path (see the module doc).
    pub carried: usize,
    /// Labels, names and archive flags stated again so both files' readings agree.
    pub restated: usize,
    /// Records this run wrote (a rerun after a crash writes only what was missing).
    pub written: usize,
    /// The copy's incomplete final line, kept in this file of the session folder.
    pub fragment: Option<String>,
}

/// Merges the conflict copy `copy_name` (a file beside `session.jsonl`) into the session of
/// `handle`, then removes the copy. See the module doc.
pub fn merge_copy(handle: &SessionHandle, copy_name: &str) -> Result<MergeReport, MergeError> {
    let engine = conflict_copy_engine(copy_name).ok_or(MergeError::NotACopy)?;
    if handle.capture_live()? {
        return Err(MergeError::Recording);
    }
    let dir = handle.dir().to_path_buf();
    let copy_path = dir.join(copy_name);
    let copy = open_regular(&copy_path).map_err(|source| MergeError::CopyUnreadable { source })?;
    let mut scanner = handle.scanner_snapshot()?;
    if !scanner.index().is_authoritative() {
        return Err(StoreError::NotAuthoritative {
            diagnostics: scanner.index().diagnostics().to_vec(),
        }
        .into());
    }
    let main = open_regular(&dir.join(SESSION_FILE)).map_err(StoreError::io("open session"))?;
    if handle.shared_file_id()
        != super::store::FileId::of(&main.metadata().map_err(StoreError::io("stat session"))?)
    {
        return Err(StoreError::StaleHandle.into());
    }
    let main_committed = scanner.index().committed_len();
    let main_len = scanner.index().len() as u32;
    let header_id = scanner
        .index()
        .header()
        .map(|h| h.id.clone())
        .unwrap_or_default();

    // The lines both files share, compared as bytes.
    let shared = common_lines(&main, main_committed, &copy)
        .map_err(|source| MergeError::CopyUnreadable { source })?;

    // The copy's lines after them, validated against the session plus the lines before.
    let mut reader = BufReader::with_capacity(256 * 1024, &copy);
    reader
        .seek(SeekFrom::Start(shared.bytes))
        .map_err(|source| MergeError::CopyUnreadable { source })?;
    let mut offset = shared.bytes;
    let mut line_no = shared.lines;
    let mut line = Vec::new();
    let mut missing: Vec<(u64, u32)> = Vec::new();
    let mut copy_order: Vec<u32> = Vec::new();
    let mut tail: Option<(u64, u64)> = None;
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_RECORD_BYTES as u64 + 2)
            .read_until(b'\n', &mut line)
            .map_err(|source| MergeError::CopyUnreadable { source })?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') {
            if n > MAX_RECORD_BYTES + 1 {
                return Err(damaged(line_no + 1, Code::RecordTooLarge));
            }
            tail = Some((offset, n as u64));
            break;
        }
        line.pop();
        line_no += 1;
        let at = offset;
        offset += n as u64;
        if line_no == 1 {
            // The headers differ as bytes: the copy must still be this session's.
            let mut own = Scanner::new();
            if !own.push_line(&line) {
                return Err(MergeError::CopyDamaged {
                    diagnostics: renumbered(own.index().diagnostics(), 1),
                });
            }
            if own.index().header().map(|h| h.id.as_str()) != Some(header_id.as_str()) {
                return Err(MergeError::OtherSession);
            }
            continue;
        }
        let analysis = scanner.analyze_line(&line);
        if let Some(id) = analysis.entry_id()
            && analysis
                .diagnostics
                .iter()
                .any(|d| d.code == Code::EntryDuplicateId)
        {
            let pos = scanner
                .index()
                .position(id)
                .ok_or(StoreError::StaleHandle)?;
            if pos >= main_len {
                return Err(damaged(line_no, Code::EntryDuplicateId));
            }
            let e = scanner.index().entry(pos);
            let mut theirs = vec![0u8; e.len_bytes() as usize];
            main.read_exact_at(&mut theirs, e.offset())
                .map_err(StoreError::io("read session"))?;
            if theirs != line && !same_json(&theirs, &line) {
                return Err(MergeError::ConflictingEntry);
            }
            copy_order.push(pos);
            continue;
        }
        if !analysis.is_valid() {
            return Err(MergeError::CopyDamaged {
                diagnostics: renumbered(&analysis.diagnostics, line_no),
            });
        }
        copy_order.push(scanner.index().len() as u32);
        scanner.apply(analysis, line.len());
        missing.push((at, line.len() as u32));
    }
    let v = scanner.index();
    let src = Lines {
        main: &main,
        copy: &copy,
        main_len,
        missing: &missing,
    };

    // The copy's leaf: its last entry.
    let b = match copy_order.last() {
        Some(&p) => Some(p),
        None => entry_ending_at(v, shared.bytes),
    };
    let shared_entries = v.entries().partition_point(|e| e.offset() < shared.bytes) as u32;
    let merges = merge_entries(v, &src)?;
    let sides = |a: Option<u32>, cut: u32| Sides {
        a,
        b,
        cut,
        shared_entries,
        copy_order: &copy_order,
    };
    // A merge of this copy that was cut short left its start entry; it is this merge only
    // if everything after it came from the copy or belongs to the chain it planned.
    let in_copy: HashSet<u32> = (0..shared_entries)
        .chain(copy_order.iter().copied())
        .collect();
    let mut resumed = None;
    for m in merges.iter().filter(|m| {
        m.pos < main_len
            && m.step == "start"
            && m.data["copy"] == copy_name
            && m.data["copyLeaf"] == json!(b.map(|p| v.id(p)))
    }) {
        let a = m.data["leaf"].as_str().and_then(|id| v.position(id));
        let plan = plan(v, &src, sides(a, m.pos), &merges)?;
        let ours: HashSet<&str> = plan.ids.iter().map(String::as_str).collect();
        let only_ours =
            (m.pos + 1..main_len).all(|p| in_copy.contains(&p) || ours.contains(&*v.id(p)));
        if only_ours {
            resumed = Some((a, plan));
            break;
        }
    }
    let (a, plan, start_written) = match resumed {
        Some((a, plan)) => (a, plan, true),
        None => {
            let a = main_len.checked_sub(1);
            (a, plan(v, &src, sides(a, main_len), &merges)?, false)
        }
    };

    let mut records: Vec<String> = Vec::new();
    if !missing.is_empty() || !plan.chain.is_empty() {
        if !start_written {
            records.push(start_line(v, &src, copy_name, a, b)?);
        }
        for &(at, len) in &missing {
            let mut buf = vec![0u8; len as usize];
            copy.read_exact_at(&mut buf, at)
                .map_err(|source| MergeError::CopyUnreadable { source })?;
            // Validated above as UTF-8 JSON.
            records.push(String::from_utf8(buf).map_err(|_| damaged(0, Code::RecordInvalidUtf8))?);
        }
        records.extend(plan.chain.iter().cloned());
    }
    let mut written = 0;
    let mut batch: Vec<String> = Vec::new();
    let mut batch_bytes = 0;
    for r in records {
        if batch.len() == MAX_BATCH_RECORDS || batch_bytes + r.len() + 1 > MAX_BATCH_BYTES {
            written += append_batch(handle, &batch)?;
            batch.clear();
            batch_bytes = 0;
        }
        batch_bytes += r.len() + 1;
        batch.push(r);
    }
    if !batch.is_empty() {
        written += append_batch(handle, &batch)?;
    }

    // Everything is durable: keep the copy's unfinished line, then let the copy go.
    let storage = handle.storage().clone();
    let fragment = match tail {
        Some((at, len)) => {
            let mut bytes = vec![0u8; len as usize];
            copy.read_exact_at(&mut bytes, at)
                .map_err(|source| MergeError::CopyUnreadable { source })?;
            let stamp = fragment_stamp();
            let mut name = format!("{SESSION_FILE}.fragment-{stamp}");
            let mut n = 1;
            while dir.join(&name).exists() {
                n += 1;
                name = format!("{SESSION_FILE}.fragment-{stamp}-{n}");
            }
            write_new_file(storage.as_ref(), &dir, &name, &bytes)?;
            Some(name)
        }
        None => None,
    };
    drop(reader);
    drop(copy);
    match fs::remove_file(&copy_path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io("remove merged copy")(e).into()),
    }
    storage
        .sync_dir(&dir)
        .map_err(StoreError::io("sync session dir"))?;
    Ok(MergeReport {
        copy: copy_name.to_owned(),
        engine,
        appended: missing.len(),
        carried: plan.carried,
        restated: plan.restated,
        written,
        fragment,
    })
}

fn damaged(line: u64, code: Code) -> MergeError {
    MergeError::CopyDamaged {
        diagnostics: vec![Diagnostic::new(line, code)],
    }
}

fn renumbered(d: &[Diagnostic], line: u64) -> Vec<Diagnostic> {
    d.iter().map(|d| Diagnostic { line, ..d.clone() }).collect()
}

fn append_batch(handle: &SessionHandle, batch: &[String]) -> Result<usize, MergeError> {
    let report = handle.append(batch);
    let written = report
        .acks
        .iter()
        .filter(|a| a.status == super::store::AckStatus::Committed)
        .count();
    report.into_result()?;
    Ok(written)
}

fn open_regular(path: &Path) -> io::Result<File> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.file_type().is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let f = File::open(path)?;
    let opened = f.metadata()?;
    if super::store::FileId::of(&opened) != super::store::FileId::of(&meta) {
        return Err(io::Error::other("the file changed while it was opened"));
    }
    Ok(f)
}

/// The whole lines two files begin with, byte for byte.
struct Shared {
    /// Bytes of those lines, their newlines included.
    bytes: u64,
    lines: u64,
}

/// Compares `main` (its first `main_len` bytes) with `copy` and returns the whole lines they
/// share at the start.
fn common_lines(main: &File, main_len: u64, copy: &File) -> io::Result<Shared> {
    const CHUNK: usize = 256 * 1024;
    let mut a = vec![0u8; CHUNK];
    let mut b = vec![0u8; CHUNK];
    let copy_len = copy.metadata()?.len();
    let end = main_len.min(copy_len);
    let mut at = 0u64;
    let mut shared = Shared { bytes: 0, lines: 0 };
    while at < end {
        let n = CHUNK.min((end - at) as usize);
        main.read_exact_at(&mut a[..n], at)?;
        copy.read_exact_at(&mut b[..n], at)?;
        let same = a[..n]
            .iter()
            .zip(&b[..n])
            .position(|(x, y)| x != y)
            .unwrap_or(n);
        let equal = &a[..same];
        if let Some(last) = memchr::memrchr(b'\n', equal) {
            shared.bytes = at + last as u64 + 1;
            shared.lines += memchr::memchr_iter(b'\n', equal).count() as u64;
        }
        if same < n {
            break;
        }
        at += n as u64;
    }
    Ok(shared)
}

/// The entry whose line ends exactly at byte `end` (its newline included), if any.
fn entry_ending_at(v: &SessionIndex, end: u64) -> Option<u32> {
    let i = v.entries().partition_point(|e| e.offset() < end);
    let p = i.checked_sub(1)?;
    let e = v.entry(p as u32);
    (e.offset() + u64::from(e.len_bytes()) + 1 == end).then_some(p as u32)
}

/// Where each line of the merged view lives: the session's positions in its file, the
/// copy's missing ones in the copy.
struct Lines<'a> {
    main: &'a File,
    copy: &'a File,
    main_len: u32,
    missing: &'a [(u64, u32)],
}

impl Lines<'_> {
    fn read(&self, v: &SessionIndex, p: u32) -> Result<Vec<u8>, MergeError> {
        if p < self.main_len {
            let e = v.entry(p);
            let mut buf = vec![0u8; e.len_bytes() as usize];
            self.main
                .read_exact_at(&mut buf, e.offset())
                .map_err(StoreError::io("read session"))?;
            Ok(buf)
        } else {
            let (at, len) = self.missing[(p - self.main_len) as usize];
            let mut buf = vec![0u8; len as usize];
            self.copy
                .read_exact_at(&mut buf, at)
                .map_err(|source| MergeError::CopyUnreadable { source })?;
            Ok(buf)
        }
    }

    fn entry(&self, v: &SessionIndex, p: u32) -> Result<Entry, MergeError> {
        let bytes = self.read(v, p)?;
        std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| Entry::from_line(s).ok())
            .ok_or(MergeError::Store(StoreError::StaleHandle))
    }

    fn timestamp(&self, v: &SessionIndex, p: u32) -> Result<String, MergeError> {
        Ok(self.entry(v, p)?.timestamp)
    }
}

/// One of the merge's own entries.
struct MergeEntry {
    pos: u32,
    id: String,
    step: String,
    data: Value,
}

fn merge_entries(v: &SessionIndex, src: &Lines<'_>) -> Result<Vec<MergeEntry>, MergeError> {
    let mut out = Vec::new();
    for p in 0..v.len() as u32 {
        if v.custom_type(p).map(|t| &**t) != Some(MERGE_TYPE) {
            continue;
        }
        if let EntryBody::Custom(c) = src.entry(v, p)?.body {
            out.push(MergeEntry {
                pos: p,
                id: v.id(p).into_owned(),
                step: c.data["step"].as_str().unwrap_or_default().to_owned(),
                data: c.data,
            });
        }
    }
    Ok(out)
}

/// The two leaves being merged and what each file held.
struct Sides<'a> {
    /// The session's leaf before the merge.
    a: Option<u32>,
    /// The copy's leaf.
    b: Option<u32>,
    /// Positions below this are the session as it was before the merge.
    cut: u32,
    /// Positions below this are lines both files share.
    shared_entries: u32,
    /// The copy's later lines' positions, in the copy's order.
    copy_order: &'a [u32],
}

/// The chain the merge appends below the base's tip.
#[derive(Default)]
struct Plan {
    chain: Vec<String>,
    /// The ids of the chain's entries.
    ids: Vec<String>,
    carried: usize,
    restated: usize,
}

fn is_content(v: &SessionIndex, p: u32) -> bool {
    match v.entry(p).kind() {
        EntryKind::Message | EntryKind::CustomMessage | EntryKind::MessageRemoved => true,
        EntryKind::Custom => v.custom_type(p).map(|t| &**t) != Some(MERGE_TYPE),
        _ => false,
    }
}

fn path_of(v: &SessionIndex, tip: Option<u32>) -> Vec<u32> {
    let mut path = Vec::new();
    let mut at = tip;
    while let Some(p) = at {
        path.push(p);
        at = v.entry(p).parent();
    }
    path.reverse();
    path
}

fn time_ns(ts: &str) -> i128 {
    OffsetDateTime::parse(ts, &Rfc3339).map_or(i128::MIN, |t| t.unix_timestamp_nanos())
}

fn hashed_id(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    let digest = h.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("merge-{hex}")
}

/// An annotation entry as one file reads it.
#[derive(Clone)]
struct Note {
    id: String,
    ts: String,
    body: EntryBody,
}

impl Note {
    fn key(&self) -> (i128, &str) {
        (time_ns(&self.ts), &self.id)
    }
}

/// The annotations (labels by target id, name, archived) one ordering of positions resolves.
#[derive(Default)]
struct Resolved {
    labels: HashMap<String, Note>,
    name: Option<Note>,
    archived: Option<Note>,
}

impl Resolved {
    fn take(&mut self, note: &Note) {
        match &note.body {
            EntryBody::Label(l) => {
                self.labels.insert(l.target_id.clone(), note.clone());
            }
            EntryBody::SessionInfo(s) => {
                if s.name.is_some() {
                    self.name = Some(note.clone());
                }
                if s.archived.is_some() {
                    self.archived = Some(note.clone());
                }
            }
            _ => {}
        }
    }
}

/// Of two readings of one annotation, the one both files must end with: `None` when they
/// agree (or only one file has one).
fn winner<'n>(x: Option<&'n Note>, y: Option<&'n Note>) -> Option<&'n Note> {
    match (x, y) {
        (Some(x), Some(y)) if x.id != y.id => Some(if x.key() >= y.key() { x } else { y }),
        _ => None,
    }
}

fn plan(
    v: &SessionIndex,
    src: &Lines<'_>,
    sides: Sides<'_>,
    merges: &[MergeEntry],
) -> Result<Plan, MergeError> {
    let id = |p: u32| v.id(p).into_owned();

    // Carried entries of earlier merges, back to what they carry.
    let mut carried_from: HashMap<String, String> = HashMap::new();
    for m in merges.iter().filter(|m| m.step == "carry") {
        if let Some(list) = m.data["carried"].as_array() {
            for (n, orig) in list.iter().enumerate() {
                if let Some(orig) = orig.as_str() {
                    carried_from.insert(format!("{}.{}", m.id, n + 1), orig.to_owned());
                }
            }
        }
    }
    let origin = |mut id: String| -> String {
        for _ in 0..64 {
            match carried_from.get(&id) {
                Some(o) => id = o.clone(),
                None => break,
            }
        }
        id
    };
    let origins_on = |path: &[u32]| -> HashSet<String> {
        path.iter()
            .filter(|&&p| is_content(v, p))
            .map(|&p| origin(id(p)))
            .collect()
    };

    let pa = path_of(v, sides.a);
    let pb = path_of(v, sides.b);
    let common = pa.iter().zip(&pb).take_while(|(x, y)| x == y).count();
    let fork = common.checked_sub(1).map(|i| pa[i]);
    let (xs, ys) = (&pa[common..], &pb[common..]);
    let (on_a, on_b) = (origins_on(&pa), origins_on(&pb));
    let new_on = |side: &[u32], other: &HashSet<String>| -> Vec<u32> {
        side.iter()
            .copied()
            .filter(|&p| is_content(v, p) && !other.contains(&origin(id(p))))
            .collect()
    };
    let (x_new, y_new) = (new_on(xs, &on_b), new_on(ys, &on_a));
    let (base, other, carry) = if y_new.is_empty() {
        (sides.a, sides.b, Vec::new())
    } else if x_new.is_empty() {
        (sides.b, sides.a, Vec::new())
    } else {
        // Both sides added to the view: the one that started first is the base.
        let (fx, fy) = (xs[0], ys[0]);
        let (tx, ty) = (src.timestamp(v, fx)?, src.timestamp(v, fy)?);
        let x_first = (time_ns(&tx), id(fx)) <= (time_ns(&ty), id(fy));
        if x_first {
            (sides.a, sides.b, y_new)
        } else {
            (sides.b, sides.a, x_new)
        }
    };

    // Annotations each file resolves, and where they disagree.
    let mut notes: HashMap<u32, Note> = HashMap::new();
    for p in 0..v.len() as u32 {
        if matches!(v.entry(p).kind(), EntryKind::Label | EntryKind::SessionInfo) {
            let e = src.entry(v, p)?;
            notes.insert(
                p,
                Note {
                    id: e.id,
                    ts: e.timestamp,
                    body: e.body,
                },
            );
        }
    }
    let mut in_session = Resolved::default();
    for p in 0..sides.cut {
        if let Some(n) = notes.get(&p) {
            in_session.take(n);
        }
    }
    let mut in_copy = Resolved::default();
    for p in (0..sides.shared_entries).chain(sides.copy_order.iter().copied()) {
        if let Some(n) = notes.get(&p) {
            in_copy.take(n);
        }
    }
    let mut restate: Vec<(String, EntryBody)> = Vec::new();
    let mut targets: Vec<&String> = in_session
        .labels
        .keys()
        .filter(|t| in_copy.labels.contains_key(*t))
        .collect();
    targets.sort();
    for t in targets {
        if let Some(w) = winner(in_session.labels.get(t), in_copy.labels.get(t)) {
            restate.push((w.ts.clone(), w.body.clone()));
        }
    }
    let field = |w: Option<&Note>, name: bool| -> Option<(String, EntryBody)> {
        let w = w?;
        let EntryBody::SessionInfo(s) = &w.body else {
            return None;
        };
        let mut info = super::format::SessionInfo::default();
        if name {
            info.name = s.name.clone();
        } else {
            info.archived = s.archived;
        }
        Some((w.ts.clone(), EntryBody::SessionInfo(info)))
    };
    restate.extend(field(
        winner(in_session.name.as_ref(), in_copy.name.as_ref()),
        true,
    ));
    restate.extend(field(
        winner(in_session.archived.as_ref(), in_copy.archived.as_ref()),
        false,
    ));

    // The labels of carried entries follow them (the latest label of each, in file order).
    let mut latest_label: HashMap<String, &Note> = HashMap::new();
    for p in 0..v.len() as u32 {
        if let Some(n) = notes.get(&p)
            && let EntryBody::Label(l) = &n.body
        {
            latest_label.insert(l.target_id.clone(), n);
        }
    }

    let last = (v.len() as u32).checked_sub(1);
    if carry.is_empty() && restate.is_empty() && last == base {
        return Ok(Plan::default());
    }
    let Some(base) = base else {
        // Nothing on either side: nothing to show.
        return Ok(Plan::default());
    };

    // The chain.
    let base_id = id(base);
    let other_id = other.map(id).unwrap_or_default();
    let stamp = {
        let tb = src.timestamp(v, base)?;
        match other {
            Some(o) => {
                let to = src.timestamp(v, o)?;
                if time_ns(&to) > time_ns(&tb) { to } else { tb }
            }
            None => tb,
        }
    };
    let base_path = path_of(v, Some(base));
    let on_path: HashSet<u32> = base_path.iter().copied().collect();
    let mut by_origin: HashMap<String, String> = HashMap::new();
    for &p in &base_path {
        if is_content(v, p) {
            by_origin.insert(origin(id(p)), id(p));
        }
    }
    let rename = |orig: &str, by_origin: &HashMap<String, String>| -> Option<String> {
        if let Some(p) = v.position(orig)
            && on_path.contains(&p)
        {
            return Some(orig.to_owned());
        }
        by_origin.get(&origin(orig.to_owned())).cloned()
    };

    let mut chain: Vec<String> = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    let mut parent = base_id.clone();
    let mut head: String;
    let mut n: usize;
    let mut chunk = 0usize;
    let mut carried = 0usize;
    let mut follow: Vec<(String, EntryBody)> = Vec::new();
    let mut i = 0;
    let open_head = |chunk: usize, list: &[String], parent: &str| -> (String, String) {
        let hid = hashed_id(&["carry", &base_id, &other_id, &chunk.to_string()]);
        let data = json!({
            "step": "carry",
            "base": base_id,
            "other": other.map(id),
            "fork": fork.map(id),
            "carried": list,
        });
        let line = Entry {
            id: hid.clone(),
            parent_id: Some(parent.to_owned()),
            timestamp: stamp.clone(),
            body: EntryBody::Custom(super::format::Custom {
                custom_type: MERGE_TYPE.to_owned(),
                data,
            }),
        }
        .to_line();
        (hid, line)
    };
    loop {
        // The next chunk of carried originals, within the head's budget.
        let mut list: Vec<String> = Vec::new();
        let mut bytes = 0;
        while i < carry.len()
            && (list.is_empty() || bytes + v.id(carry[i]).len() + 3 <= HEAD_BUDGET)
        {
            let orig = id(carry[i]);
            bytes += orig.len() + 3;
            list.push(orig);
            i += 1;
        }
        let (hid, line) = open_head(chunk, &list, &parent);
        chain.push(line);
        ids.push(hid.clone());
        parent = hid.clone();
        head = hid;
        n = 0;
        for orig in &list {
            let Some(p) = v.position(orig) else { continue };
            n += 1;
            let new_id = format!("{head}.{n}");
            let Some(line) = carried_line(v, src, p, &new_id, &parent, |t| rename(t, &by_origin))?
            else {
                // A removal whose target is nowhere on the new path: nothing to remove.
                continue;
            };
            chain.push(line);
            ids.push(new_id.clone());
            by_origin.insert(origin(orig.clone()), new_id.clone());
            if let Some(l) = latest_label.get(orig)
                && let EntryBody::Label(label) = &l.body
                && label.label.is_some()
            {
                follow.push((
                    l.ts.clone(),
                    EntryBody::Label(super::format::Label {
                        target_id: new_id.clone(),
                        label: label.label.clone(),
                    }),
                ));
            }
            parent = new_id;
            carried += 1;
        }
        chunk += 1;
        if i >= carry.len() {
            break;
        }
    }
    let restated = follow.len() + restate.len();
    for (ts, body) in follow.into_iter().chain(restate) {
        n += 1;
        let new_id = format!("{head}.{n}");
        chain.push(
            Entry {
                id: new_id.clone(),
                parent_id: Some(parent.clone()),
                timestamp: ts,
                body,
            }
            .to_line(),
        );
        ids.push(new_id.clone());
        parent = new_id;
    }
    Ok(Plan {
        chain,
        ids,
        carried,
        restated,
    })
}

/// The line of entry `p` carried as `new_id` below `parent`: the same type, timestamp and
/// fields, references to other entries renamed by `rename`. `None` for a removal whose
/// target `rename` cannot place.
fn carried_line(
    v: &SessionIndex,
    src: &Lines<'_>,
    p: u32,
    new_id: &str,
    parent: &str,
    rename: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, MergeError> {
    let bytes = src.read(v, p)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| StoreError::StaleHandle)?;
    let mut fields: IndexMap<String, Box<RawValue>> =
        from_str_deep(text).map_err(|_| StoreError::StaleHandle)?;
    let raw = |value: &Value| -> Result<Box<RawValue>, MergeError> {
        RawValue::from_string(value.to_string())
            .map_err(|_| MergeError::Store(StoreError::StaleHandle))
    };
    fields.insert("id".into(), raw(&json!(new_id))?);
    fields.insert("parentId".into(), raw(&json!(parent))?);
    match v.entry(p).kind() {
        EntryKind::MessageRemoved => {
            let target: Option<String> = fields
                .get("targetId")
                .and_then(|t| serde_json::from_str(t.get()).ok());
            match target.as_deref().and_then(&rename) {
                Some(t) => {
                    fields.insert("targetId".into(), raw(&json!(t))?);
                }
                None => return Ok(None),
            }
        }
        EntryKind::Custom | EntryKind::CustomMessage => {
            let custom_type = v.custom_type(p).map(|t| t.to_string()).or_else(|| {
                fields
                    .get("customType")
                    .and_then(|t| serde_json::from_str(t.get()).ok())
            });
            let field = if v.entry(p).kind() == EntryKind::Custom {
                "data"
            } else {
                "details"
            };
            if let Some(paths) = ID_REFERENCES
                .iter()
                .find(|(t, _)| Some(*t) == custom_type.as_deref())
                .map(|(_, path)| *path)
                && let Some(value) = fields.get(field)
                && let Ok(mut value) = from_str_deep::<Value>(value.get())
                && rename_refs(&mut value, paths, &rename)
            {
                fields.insert(field.into(), raw(&value)?);
            }
        }
        _ => {}
    }
    Ok(Some(
        serde_json::to_string(&fields).map_err(|_| StoreError::StaleHandle)?,
    ))
}

/// Renames the ids at `path` (`"*"` is every element of an array) inside `value`; whether
/// anything changed.
fn rename_refs(value: &mut Value, path: &[&str], rename: &impl Fn(&str) -> Option<String>) -> bool {
    match path.split_first() {
        None => match value.as_str().and_then(rename) {
            Some(new) if value.as_str() != Some(new.as_str()) => {
                *value = Value::String(new);
                true
            }
            _ => false,
        },
        Some((&"*", rest)) => match value.as_array_mut() {
            Some(items) => items.iter_mut().fold(false, |changed, item| {
                rename_refs(item, rest, rename) | changed
            }),
            None => false,
        },
        Some((key, rest)) => match value.get_mut(*key) {
            Some(inner) => rename_refs(inner, rest, rename),
            None => false,
        },
    }
}

/// The merge's first entry: which copy, and the two leaves it merges.
fn start_line(
    v: &SessionIndex,
    src: &Lines<'_>,
    copy_name: &str,
    a: Option<u32>,
    b: Option<u32>,
) -> Result<String, MergeError> {
    let a_id = a.map(|p| v.id(p).into_owned());
    let b_id = b.map(|p| v.id(p).into_owned());
    let mut stamp: Option<String> = None;
    for p in [a, b].into_iter().flatten() {
        let ts = src.timestamp(v, p)?;
        if stamp.as_ref().is_none_or(|s| time_ns(&ts) > time_ns(s)) {
            stamp = Some(ts);
        }
    }
    let stamp = match stamp {
        Some(s) => s,
        None => v
            .header()
            .map(|h| h.timestamp.clone())
            .unwrap_or_else(super::store::now_iso),
    };
    Ok(Entry {
        id: hashed_id(&[
            "start",
            copy_name,
            a_id.as_deref().unwrap_or_default(),
            b_id.as_deref().unwrap_or_default(),
        ]),
        parent_id: a_id.clone(),
        timestamp: stamp,
        body: EntryBody::Custom(super::format::Custom {
            custom_type: MERGE_TYPE.to_owned(),
            data: json!({"step": "start", "copy": copy_name, "leaf": a_id, "copyLeaf": b_id}),
        }),
    }
    .to_line())
}
