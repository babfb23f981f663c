//! The entry index a scan produces: ids, offsets, kinds and tree links, no bodies.
//!
//! Invariants:
//! - `entries` is in file order and only holds entries whose envelope was readable and whose
//!   id was new; `ids` maps each of those ids to its position.
//! - A parent always has a smaller position than its child (parents are on earlier lines), so
//!   the tree is acyclic by construction.
//! - Ancestor queries use skip pointers (`jump`), O(log depth) per query, so a long dictation
//!   chain with many removals never turns validation quadratic.
//! - Memory per entry is 32 bytes ([`IndexEntry`]: offset and length packed in one word, id
//!   location and kind in another, tree links) plus its id and ≈ 9 bytes of hash table. Ids
//!   of lowercase hex digits and dashes (UUIDs) are stored packed, two digits a byte (a UUID
//!   in 21 bytes); the packed form is canonical, so a lookup compares lengths and stored
//!   forms. Line numbers are kept only where they stop following
//!   positions (after the header and each line that adds no entry).
//! - A *lean* index (`persyk context`, `persyk check`: [`crate::session::scan_file_lean`])
//!   keeps no id bytes at all: an entry's id word holds a 28-bit fingerprint, the id's length
//!   and its offset in the line, and every fingerprint match is confirmed against the exact
//!   id (a ring of the last 32 ids, else read back from the file). Answers are exactly a
//!   kept index's; a collision costs a read. About 41 bytes per entry instead of ≈ 63.
//! - Limits: 2^32 − 1 entries, offsets below 8 TiB. Past about 2^27 entries a lean index's
//!   fingerprints collide often enough to slow lookups (each collision is a read); answers
//!   stay exact. Fingerprints come from the per-process seeded hasher, so a file cannot be
//!   crafted to collide.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::hash::BuildHasher;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use hashbrown::HashTable;
use std::sync::Arc;

use super::diag::{Diagnostic, MAX_KEPT_DIAGNOSTICS};

/// The `type` of an entry line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryKind {
    Message,
    Custom,
    CustomMessage,
    SessionInfo,
    Label,
    ModelChange,
    ApiConnection,
    RealtimeEvent,
    RecordingStarted,
    RecordingFinished,
    RecordingInterrupted,
    MessageRemoved,
    /// A type outside format v1; it blocks authoritative projection.
    Unknown,
}

impl EntryKind {
    /// Every kind, in declaration order (`ALL[k as usize] == k`).
    const ALL: [EntryKind; 13] = [
        EntryKind::Message,
        EntryKind::Custom,
        EntryKind::CustomMessage,
        EntryKind::SessionInfo,
        EntryKind::Label,
        EntryKind::ModelChange,
        EntryKind::ApiConnection,
        EntryKind::RealtimeEvent,
        EntryKind::RecordingStarted,
        EntryKind::RecordingFinished,
        EntryKind::RecordingInterrupted,
        EntryKind::MessageRemoved,
        EntryKind::Unknown,
    ];

    pub fn from_type(t: &str) -> Option<EntryKind> {
        Some(match t {
            "message" => EntryKind::Message,
            "custom" => EntryKind::Custom,
            "custom_message" => EntryKind::CustomMessage,
            "session_info" => EntryKind::SessionInfo,
            "label" => EntryKind::Label,
            "model_change" => EntryKind::ModelChange,
            "api_connection" => EntryKind::ApiConnection,
            "realtime_event" => EntryKind::RealtimeEvent,
            "recording.started" => EntryKind::RecordingStarted,
            "recording.finished" => EntryKind::RecordingFinished,
            "recording.interrupted" => EntryKind::RecordingInterrupted,
            "message.removed" => EntryKind::MessageRemoved,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Message => "message",
            EntryKind::Custom => "custom",
            EntryKind::CustomMessage => "custom_message",
            EntryKind::SessionInfo => "session_info",
            EntryKind::Label => "label",
            EntryKind::ModelChange => "model_change",
            EntryKind::ApiConnection => "api_connection",
            EntryKind::RealtimeEvent => "realtime_event",
            EntryKind::RecordingStarted => "recording.started",
            EntryKind::RecordingFinished => "recording.finished",
            EntryKind::RecordingInterrupted => "recording.interrupted",
            EntryKind::MessageRemoved => "message.removed",
            EntryKind::Unknown => "unknown",
        }
    }
}

/// The committed header's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderInfo {
    pub id: String,
    pub timestamp: String,
}

/// Bytes after the last "\n": not committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailInfo {
    pub line: u64,
    pub offset: u64,
    pub len: u64,
}

const NONE: u32 = u32::MAX;

/// Bits of [`IndexEntry`]'s span that hold the line length (a line is at most
/// `MAX_RECORD_BYTES` = 2^20 bytes); the other 43 hold its offset, so a session file may be
/// up to 8 TiB.
const LEN_BITS: u32 = 21;
/// The largest offset an entry can record.
pub const MAX_INDEXED_OFFSET: u64 = (1 << (64 - LEN_BITS)) - 1;
/// Bits of the stored id's arena offset.
const ID_START_BITS: u32 = 47;
/// Longest id the grammar allows (`is_id`).
const MAX_ID_LEN: usize = 128;

/// One indexed entry: 32 bytes, no pointers. Its id lives in one of the index's id arenas
/// ([`SessionIndex::id`]); its line number in a short list of breaks ([`SessionIndex::line`]).
#[derive(Debug, Clone)]
pub struct IndexEntry {
    /// Offset << LEN_BITS | length of the line without its "\n".
    span: u64,
    /// Arena offset (47 bits) | packed flag (1 bit) | id length (8 bits) | kind (8 bits).
    id: u64,
    parent: u32,
    depth: u32,
    jump: u32,
    /// `message.removed`: target position; `custom`: interned customType; else `NONE`.
    aux: u32,
}

/// Bits of a lean index's fingerprint (see [`LeanIds`]); the rest of the id word holds the
/// kind, the id's length and where it sits in its line.
pub(crate) const FP_BITS: u32 = 28;
/// Bits of the id's byte offset in its line (a line is at most 2^20 bytes).
const ID_AT_BITS: u32 = 20;
/// Flag (in a lean index's id word): the id is kept in [`LeanIds::escaped`].
const ESCAPED_BIT: u32 = 55;
/// Ids of the last entries a lean scan added, kept exactly: a parent is almost always one
/// of them, so lookups during a scan seldom read the file.
const RECENT_IDS: usize = 32;

/// Where a lean index finds its ids: in the file it was scanned from.
///
/// A lean index keeps no id bytes: each entry's id word holds a 28-bit fingerprint of the id,
/// its length and its byte offset inside the entry's line (ids are plain ASCII there unless
/// written with JSON escapes; such rare ids are kept exactly in `escaped`). A lookup compares
/// fingerprints first and confirms every match against the exact id: from `recent` during
/// the scan, else read back from the file (`pread`, the file's position untouched). So
/// answers are exact; a fingerprint collision only costs a read.
struct LeanIds {
    file: File,
    escaped: FastMap<u32, Box<str>>,
    /// Ring of (position, id) for the last [`RECENT_IDS`] entries.
    recent: Vec<(u32, Box<str>)>,
    /// A read that confirms an id failed: the scan reports it as an I/O error.
    failed: AtomicBool,
    /// The fingerprint's bits: `(1 << FP_BITS) - 1`, fewer in tests that force collisions.
    fp_mask: u64,
}

impl LeanIds {
    /// Whether the entry at `pos` has exactly the id `wanted` (whose length and fingerprint
    /// already match). A failed read counts as "no" and marks the index failed.
    fn confirms(&self, pos: u32, e: &IndexEntry, wanted: &[u8]) -> bool {
        if e.lean_escaped() {
            return self
                .escaped
                .get(&pos)
                .is_some_and(|id| id.as_bytes() == wanted);
        }
        if let Some((p, id)) = self.recent.get(pos as usize % RECENT_IDS)
            && *p == pos
        {
            return id.as_bytes() == wanted;
        }
        let (len, at) = e.lean_span();
        let mut buf = [0u8; MAX_ID_LEN];
        match self
            .file
            .read_exact_at(&mut buf[..len], e.offset() + at as u64)
        {
            Ok(()) => buf[..len] == *wanted,
            Err(_) => {
                self.failed.store(true, Ordering::Relaxed);
                false
            }
        }
    }
}

/// Hash map with a fast, DoS-resistant (per-process seeded) hasher.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// What a scan knows about a file: header, entry index, global metadata and diagnostics.
#[derive(Default)]
pub struct SessionIndex {
    pub(crate) header: Option<HeaderInfo>,
    entries: Vec<IndexEntry>,
    /// Ids that do not pack, back to back.
    id_arena: String,
    /// Packed ids (see [`pack_id`]), back to back.
    packed_arena: Vec<u8>,
    /// Positions, hashed by their stored id.
    by_id: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    /// (position, line − position) wherever that difference changes: lines that add no
    /// entry (the header, rejected lines) are rare, so this stays short.
    line_breaks: Vec<(u32, u64)>,
    custom_types: Vec<Arc<str>>,
    custom_type_ids: FastMap<Arc<str>, u32>,
    pub(crate) name: Option<String>,
    pub(crate) archived: Option<bool>,
    pub(crate) labels: FastMap<u32, Option<String>>,
    pub(crate) committed_len: u64,
    pub(crate) committed_lines: u64,
    pub(crate) tail: Option<TailInfo>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) diagnostics_total: u64,
    /// Set for a lean index (ids read back from the file); `None`: ids kept in the arenas.
    lean: Option<Box<LeanIds>>,
}

impl std::fmt::Debug for SessionIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionIndex")
            .field("header", &self.header)
            .field("entries", &self.entries.len())
            .field("committed_len", &self.committed_len)
            .field("tail", &self.tail)
            .field("diagnostics", &self.diagnostics)
            .finish_non_exhaustive()
    }
}

/// An id in the stored form of one index, hashed with that index's hasher: made once per
/// line by the scanner ([`SessionIndex::key`]) and used for the duplicate check, the insert
/// and nothing else, so an id is packed and hashed once, not once per lookup.
#[derive(Debug, Clone)]
pub(crate) struct IdKey {
    /// Lean index: the id's fingerprint (0 otherwise).
    fp: u64,
    packed: bool,
    /// Length of the id in characters.
    id_len: u8,
    /// Length of the stored form in `buf`.
    stored_len: u8,
    buf: [u8; MAX_ID_LEN],
    hash: u64,
}

impl IdKey {
    fn stored(&self) -> StoredId<'_> {
        (self.packed, &self.buf[..usize::from(self.stored_len)])
    }
}

/// What the scanner knows about an entry it is adding.
pub(crate) struct NewEntry<'a> {
    pub id: &'a str,
    pub key: &'a IdKey,
    /// Byte offset of the id's text in the line, when the line holds it without escapes.
    pub id_at: Option<usize>,
    pub kind: EntryKind,
    pub parent: Option<u32>,
    pub line: u64,
    pub offset: u64,
    pub len: usize,
    pub removal_target: Option<u32>,
    pub custom_type: Option<&'a str>,
}

impl IndexEntry {
    /// Byte offset of the line in the file.
    pub fn offset(&self) -> u64 {
        self.span >> LEN_BITS
    }

    /// Length of the line in bytes, without its "\n".
    pub fn len_bytes(&self) -> u32 {
        (self.span & ((1 << LEN_BITS) - 1)) as u32
    }

    /// The entry's `type`.
    pub fn kind(&self) -> EntryKind {
        EntryKind::ALL[(self.id >> 56) as usize]
    }

    /// Position of the parent entry in the index.
    pub fn parent(&self) -> Option<u32> {
        (self.parent != NONE).then_some(self.parent)
    }

    /// The removed entry's position, for a `message.removed` entry.
    pub fn removal_target(&self) -> Option<u32> {
        (self.kind() == EntryKind::MessageRemoved && self.aux != NONE).then_some(self.aux)
    }

    fn id_start(&self) -> usize {
        (self.id & ((1 << ID_START_BITS) - 1)) as usize
    }

    fn id_packed(&self) -> bool {
        self.id >> ID_START_BITS & 1 == 1
    }

    fn id_len(&self) -> usize {
        (self.id >> 48 & 0xFF) as usize
    }

    /// Lean index: the id's fingerprint.
    fn lean_fp(&self) -> u64 {
        self.id & ((1 << FP_BITS) - 1)
    }

    /// Lean index: whether the id is kept in [`LeanIds::escaped`].
    fn lean_escaped(&self) -> bool {
        self.id >> ESCAPED_BIT & 1 == 1
    }

    /// Lean index: the id's length and its byte offset in the line.
    fn lean_span(&self) -> (usize, usize) {
        let len = (self.id >> (FP_BITS + ID_AT_BITS) & 0x7F) as usize + 1;
        let at = (self.id >> FP_BITS & ((1 << ID_AT_BITS) - 1)) as usize;
        (len, at)
    }
}

/// The table hash of a lean index's fingerprint (spread over all 64 bits, so the table's
/// bucket and tag bits both vary).
fn lean_hash(fp: u64) -> u64 {
    fp.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ fp
}

/// An id in its stored form: packed or not, and its bytes.
type StoredId<'a> = (bool, &'a [u8]);

/// The packed form of an id made of lowercase hex digits and dashes (UUIDs, as Persyk's
/// writers make them): the number of dashes, the digits two to a byte, then the dashes'
/// positions. A 36-character UUID takes 21 bytes. `None` when the id has other characters
/// or packing would not make it shorter. The form is canonical: two ids are equal exactly when
/// their lengths and stored forms are (an odd digit count pads the last byte with a zero, so
/// `abc0f` and `abc0f0` differ only by length).
fn pack_id(id: &str, out: &mut [u8; MAX_ID_LEN]) -> Option<usize> {
    let b = id.as_bytes();
    if b.len() > MAX_ID_LEN {
        return None;
    }
    let mut dashes = [0u8; MAX_ID_LEN];
    let mut k = 0;
    let mut n = 1;
    let mut half = false;
    for (i, &c) in b.iter().enumerate() {
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'-' => {
                dashes[k] = i as u8;
                k += 1;
                continue;
            }
            _ => return None,
        };
        if half {
            out[n] |= v;
            n += 1;
        } else {
            if n + 1 + k >= b.len() {
                return None; // Would not be shorter.
            }
            out[n] = v << 4;
        }
        half = !half;
    }
    if half {
        n += 1;
    }
    let packed_len = n + k;
    if packed_len >= b.len() {
        return None;
    }
    out[0] = k as u8;
    out[n..packed_len].copy_from_slice(&dashes[..k]);
    Some(packed_len)
}

/// The id `len` characters long whose packed form starts `packed`.
fn unpack_id(packed: &[u8], len: usize) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let dashes = usize::from(packed[0]);
    let digit_bytes = (len - dashes).div_ceil(2);
    let digits = &packed[1..1 + digit_bytes];
    let positions = &packed[1 + digit_bytes..1 + digit_bytes + dashes];
    let mut out = String::with_capacity(len);
    let mut next_dash = positions.iter().peekable();
    let mut k = 0;
    for i in 0..len {
        if next_dash.peek().is_some_and(|&&p| usize::from(p) == i) {
            next_dash.next();
            out.push('-');
        } else {
            let byte = digits[k / 2];
            let v = if k % 2 == 0 { byte >> 4 } else { byte & 0xF };
            out.push(char::from(HEX[usize::from(v)]));
            k += 1;
        }
    }
    out
}

fn stored_id<'a>(e: &IndexEntry, arena: &'a str, packed_arena: &'a [u8]) -> StoredId<'a> {
    let start = e.id_start();
    if e.id_packed() {
        let dashes = usize::from(packed_arena[start]);
        let n = 1 + dashes + (e.id_len() - dashes).div_ceil(2);
        (true, &packed_arena[start..start + n])
    } else {
        (false, &arena.as_bytes()[start..start + e.id_len()])
    }
}

fn hash_stored(hasher: &foldhash::fast::RandomState, (packed, bytes): StoredId<'_>) -> u64 {
    hasher.hash_one((packed, bytes))
}

impl SessionIndex {
    /// A copy of a kept index (ids in its own arenas); `None` for a lean one, whose ids live
    /// in the file it was scanned from. For the merge, which validates a copy's lines against
    /// the session without touching the store's own index.
    pub(crate) fn try_clone(&self) -> Option<SessionIndex> {
        if self.lean.is_some() {
            return None;
        }
        Some(SessionIndex {
            header: self.header.clone(),
            entries: self.entries.clone(),
            id_arena: self.id_arena.clone(),
            packed_arena: self.packed_arena.clone(),
            by_id: self.by_id.clone(),
            hasher: self.hasher.clone(),
            line_breaks: self.line_breaks.clone(),
            custom_types: self.custom_types.clone(),
            custom_type_ids: self.custom_type_ids.clone(),
            name: self.name.clone(),
            archived: self.archived,
            labels: self.labels.clone(),
            committed_len: self.committed_len,
            committed_lines: self.committed_lines,
            tail: self.tail,
            diagnostics: self.diagnostics.clone(),
            diagnostics_total: self.diagnostics_total,
            lean: None,
        })
    }

    pub(crate) fn push_diagnostic(&mut self, d: Diagnostic) {
        self.diagnostics_total += 1;
        if self.diagnostics.len() < MAX_KEPT_DIAGNOSTICS {
            self.diagnostics.push(d);
        }
    }

    pub(crate) fn push_entry(&mut self, e: NewEntry<'_>) -> u32 {
        let me = self.entries.len() as u32;
        let (depth, jump) = match e.parent {
            None => (0, me),
            Some(p) => {
                let pe = &self.entries[p as usize];
                let j = &self.entries[pe.jump as usize];
                let jj = &self.entries[j.jump as usize];
                let jump = if pe.depth - j.depth == j.depth - jj.depth {
                    j.jump
                } else {
                    p
                };
                (pe.depth + 1, jump)
            }
        };
        let aux = match (e.removal_target, e.custom_type) {
            (Some(t), _) => t,
            (None, Some(ct)) => match self.custom_type_ids.get(ct) {
                Some(&i) => i,
                None => {
                    let i = self.custom_types.len() as u32;
                    let interned: Arc<str> = Arc::from(ct);
                    self.custom_types.push(interned.clone());
                    self.custom_type_ids.insert(interned, i);
                    i
                }
            },
            (None, None) => NONE,
        };
        let line_delta = e.line - u64::from(me);
        if self.line_breaks.last().map(|&(_, d)| d) != Some(line_delta) {
            self.line_breaks.push((me, line_delta));
        }
        // The scanner only indexes ids that match the grammar (at most 128 characters).
        debug_assert!(!e.id.is_empty() && e.id.len() <= MAX_ID_LEN);
        debug_assert!(usize::from(e.key.id_len) == e.id.len());
        debug_assert!(e.offset <= MAX_INDEXED_OFFSET);
        let word = match self.lean.as_deref_mut() {
            Some(lean) => {
                let at = e.id_at.filter(|&at| at < 1 << ID_AT_BITS);
                if at.is_none() {
                    lean.escaped.insert(me, Box::from(e.id));
                }
                let recent = (me, Box::from(e.id));
                match lean.recent.get_mut(me as usize % RECENT_IDS) {
                    Some(slot) => *slot = recent,
                    None => lean.recent.push(recent),
                }
                e.key.fp
                    | (at.unwrap_or(0) as u64) << FP_BITS
                    | (e.id.len() as u64 - 1) << (FP_BITS + ID_AT_BITS)
                    | u64::from(at.is_none()) << ESCAPED_BIT
                    | (e.kind as u64) << 56
            }
            None => {
                let (packed, bytes) = e.key.stored();
                let start = if packed {
                    let start = self.packed_arena.len();
                    self.packed_arena.extend_from_slice(bytes);
                    start
                } else {
                    let start = self.id_arena.len();
                    self.id_arena.push_str(e.id);
                    start
                };
                start as u64
                    | u64::from(packed) << ID_START_BITS
                    | (e.id.len() as u64) << 48
                    | (e.kind as u64) << 56
            }
        };
        self.entries.push(IndexEntry {
            span: e.offset << LEN_BITS | e.len as u64,
            id: word,
            parent: e.parent.unwrap_or(NONE),
            depth,
            jump,
            aux,
        });
        let (entries, arena, packed_arena, hasher) = (
            &self.entries,
            &self.id_arena,
            &self.packed_arena,
            &self.hasher,
        );
        if self.lean.is_some() {
            self.by_id.insert_unique(e.key.hash, me, |&p| {
                lean_hash(entries[p as usize].lean_fp())
            });
        } else {
            self.by_id.insert_unique(e.key.hash, me, |&p| {
                hash_stored(hasher, stored_id(&entries[p as usize], arena, packed_arena))
            });
        }
        me
    }

    pub fn header(&self) -> Option<&HeaderInfo> {
        self.header.as_ref()
    }
    /// Number of indexed entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }
    pub fn entry(&self, pos: u32) -> &IndexEntry {
        &self.entries[pos as usize]
    }
    /// The id of the entry at `pos` (borrowed unless it was stored packed).
    ///
    /// A lean index ([`Self::is_lean`]) reads it back from its file and gives an empty id if
    /// that read fails: callers of a lean index use [`Self::try_id`] or
    /// [`Self::id_in_line`].
    pub fn id(&self, pos: u32) -> Cow<'_, str> {
        match self.lean {
            None => self.kept_id(pos),
            Some(_) => self.try_id(pos).unwrap_or(Cow::Borrowed("")),
        }
    }
    /// The id of the entry at `pos`; only a lean index can fail (reading its file).
    pub fn try_id(&self, pos: u32) -> io::Result<Cow<'_, str>> {
        let Some(lean) = self.lean.as_deref() else {
            return Ok(self.kept_id(pos));
        };
        let e = self.entry(pos);
        if e.lean_escaped() {
            return lean
                .escaped
                .get(&pos)
                .map(|id| Cow::Borrowed(&**id))
                .ok_or_else(|| io::Error::other("lean index: escaped id missing"));
        }
        let (len, at) = e.lean_span();
        let mut buf = vec![0u8; len];
        lean.file.read_exact_at(&mut buf, e.offset() + at as u64)?;
        // What was read must still be the id the scan saw (else the file changed).
        if self.lean_fp_of(&buf) != e.lean_fp() {
            return Err(io::Error::from(io::ErrorKind::InvalidData));
        }
        String::from_utf8(buf)
            .map(Cow::Owned)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
    }
    /// The id of the entry at `pos`, given its `line` as read back from the file: a lean
    /// index takes it from where the scan saw it in the line (`None` if the line is too
    /// short for that), any other index gives [`Self::id`]. Callers still compare it with
    /// the line's parsed id when the file may have changed.
    pub fn id_in_line<'a>(&'a self, pos: u32, line: &'a [u8]) -> Option<Cow<'a, str>> {
        let Some(lean) = self.lean.as_deref() else {
            return Some(self.kept_id(pos));
        };
        let e = self.entry(pos);
        if e.lean_escaped() {
            return lean.escaped.get(&pos).map(|id| Cow::Borrowed(&**id));
        }
        let (len, at) = e.lean_span();
        let bytes = line.get(at..at + len)?;
        std::str::from_utf8(bytes).ok().map(Cow::Borrowed)
    }
    /// Whether `id`, parsed from `line` (the line read back for `pos`), is the entry's id:
    /// for a lean index, it must also be the text where the scan saw the id in the line
    /// (so [`Self::id_in_line`] gives it) and have the entry's fingerprint.
    pub fn is_id_of(&self, pos: u32, id: &str, line: &[u8]) -> bool {
        if self.lean.is_none() {
            return *self.kept_id(pos) == *id;
        }
        let e = self.entry(pos);
        id.len() <= MAX_ID_LEN
            && e.lean_span().0 == id.len()
            && self.lean_fp_of(id.as_bytes()) == e.lean_fp()
            && self.id_in_line(pos, line).is_some_and(|at| *at == *id)
    }
    /// Whether this index keeps no ids and reads them back from its file
    /// ([`crate::session::validate::scan_file_lean`]).
    pub fn is_lean(&self) -> bool {
        self.lean.is_some()
    }
    /// A lean index's reads that confirm ids all succeeded.
    pub(crate) fn lean_failed(&self) -> bool {
        self.lean
            .as_deref()
            .is_some_and(|l| l.failed.load(Ordering::Relaxed))
    }
    /// An empty lean index whose ids are read back from `file`, with fingerprints of
    /// `fp_bits` bits (at most [`FP_BITS`]; fewer only to force collisions in tests).
    pub(crate) fn lean(file: File, fp_bits: u32) -> SessionIndex {
        SessionIndex {
            lean: Some(Box::new(LeanIds {
                file,
                escaped: FastMap::default(),
                recent: Vec::with_capacity(RECENT_IDS),
                failed: AtomicBool::new(false),
                fp_mask: (1 << fp_bits.min(FP_BITS)) - 1,
            })),
            ..SessionIndex::default()
        }
    }
    /// A lean index's fingerprint of an id.
    fn lean_fp_of(&self, id: &[u8]) -> u64 {
        let mask = self.lean.as_deref().map_or(0, |l| l.fp_mask);
        self.hasher.hash_one(id) & mask
    }
    /// Bytes held for ids: the arenas and, in a lean index, the escaped ids.
    #[cfg(test)]
    pub(crate) fn id_bytes(&self) -> usize {
        self.id_arena.len()
            + self.packed_arena.len()
            + self
                .lean
                .as_deref()
                .map_or(0, |l| l.escaped.values().map(|id| id.len()).sum())
    }
    fn kept_id(&self, pos: u32) -> Cow<'_, str> {
        let e = self.entry(pos);
        let start = e.id_start();
        if e.id_packed() {
            Cow::Owned(unpack_id(&self.packed_arena[start..], e.id_len()))
        } else {
            Cow::Borrowed(&self.id_arena[start..start + e.id_len()])
        }
    }
    /// The 1-based line number of the entry at `pos`.
    pub fn line(&self, pos: u32) -> u64 {
        let i = self.line_breaks.partition_point(|&(p, _)| p <= pos);
        u64::from(pos) + self.line_breaks[i.saturating_sub(1)].1
    }
    /// The position of the entry with this id.
    pub fn position(&self, id: &str) -> Option<u32> {
        self.position_of(&self.key(id)?)
    }
    /// `id` in this index's stored form, hashed; `None` for an id no entry can have (empty
    /// or longer than the grammar allows).
    pub(crate) fn key(&self, id: &str) -> Option<IdKey> {
        if id.is_empty() || id.len() > MAX_ID_LEN {
            return None;
        }
        let mut key = IdKey {
            fp: 0,
            packed: false,
            id_len: id.len() as u8,
            stored_len: id.len() as u8,
            buf: [0u8; MAX_ID_LEN],
            hash: 0,
        };
        if self.lean.is_some() {
            // Not packed: a lean index compares with the id's text in the file.
            key.buf[..id.len()].copy_from_slice(id.as_bytes());
            key.fp = self.lean_fp_of(id.as_bytes());
            key.hash = lean_hash(key.fp);
            return Some(key);
        }
        match pack_id(id, &mut key.buf) {
            Some(n) => {
                key.packed = true;
                key.stored_len = n as u8;
            }
            None => key.buf[..id.len()].copy_from_slice(id.as_bytes()),
        }
        key.hash = hash_stored(&self.hasher, key.stored());
        Some(key)
    }
    /// The position of the entry whose id `key` holds (made by this index's [`Self::key`]).
    pub(crate) fn position_of(&self, key: &IdKey) -> Option<u32> {
        let wanted = key.stored();
        if let Some(lean) = self.lean.as_deref() {
            return self
                .by_id
                .find(key.hash, |&p| {
                    let e = &self.entries[p as usize];
                    e.lean_fp() == key.fp
                        && e.lean_span().0 == usize::from(key.id_len)
                        && lean.confirms(p, e, wanted.1)
                })
                .copied();
        }
        self.by_id
            .find(key.hash, |&p| {
                let e = &self.entries[p as usize];
                e.id_len() == usize::from(key.id_len)
                    && stored_id(e, &self.id_arena, &self.packed_arena) == wanted
            })
            .copied()
    }
    /// The `customType`, for a `custom` entry.
    pub fn custom_type(&self, pos: u32) -> Option<&Arc<str>> {
        let e = self.entry(pos);
        if e.kind() == EntryKind::Custom && e.aux != NONE {
            self.custom_types.get(e.aux as usize)
        } else {
            None
        }
    }
    /// Latest `session_info.name` in file order (global).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// Latest `session_info.archived` in file order (global).
    pub fn archived(&self) -> Option<bool> {
        self.archived
    }
    /// Current labels: target position → label (cleared labels are absent).
    pub fn labels(&self) -> impl Iterator<Item = (u32, &str)> {
        self.labels
            .iter()
            .filter_map(|(&t, l)| l.as_deref().map(|l| (t, l)))
    }
    /// Diagnostics in line order (at most [`MAX_KEPT_DIAGNOSTICS`]).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
    /// How many diagnostics the scan found, kept or not.
    pub fn diagnostics_total(&self) -> u64 {
        self.diagnostics_total
    }
    /// Bytes up to and including the last "\n".
    pub fn committed_len(&self) -> u64 {
        self.committed_len
    }
    pub fn committed_lines(&self) -> u64 {
        self.committed_lines
    }
    pub fn tail(&self) -> Option<TailInfo> {
        self.tail
    }
    /// Whether the committed records allow authoritative projection and mutation.
    pub fn is_authoritative(&self) -> bool {
        self.header.is_some() && !self.diagnostics.iter().any(|d| d.code.blocks_projection())
    }
    /// Whether the file is fully valid: authoritative and without an incomplete tail.
    pub fn is_valid(&self) -> bool {
        self.diagnostics_total == 0
    }

    /// Whether `ancestor` is `node` or one of its ancestors.
    pub fn is_ancestor_or_self(&self, ancestor: u32, node: u32) -> bool {
        let target_depth = self.entries[ancestor as usize].depth;
        let mut x = node;
        loop {
            let e = &self.entries[x as usize];
            if e.depth < target_depth {
                return false;
            }
            if e.depth == target_depth {
                return x == ancestor;
            }
            let j = &self.entries[e.jump as usize];
            // depth > target_depth >= 0, so a parent exists.
            x = if j.depth >= target_depth {
                e.jump
            } else {
                e.parent
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(id: &str) -> (bool, Vec<u8>) {
        let mut buf = [0u8; MAX_ID_LEN];
        match pack_id(id, &mut buf) {
            Some(n) => (true, buf[..n].to_vec()),
            None => (false, id.as_bytes().to_vec()),
        }
    }

    #[test]
    fn packed_ids_unpack_to_themselves() {
        let long = "0123456789abcdef".repeat(8);
        for id in [
            "019ad6c1-5b2e-7c3a-9f00-1234567890ab",
            "abc0",
            "abc0f",
            "abc0f0",
            "0-0-0-0",
            "ffffffffffffffff",
            long.as_str(),
        ] {
            let (packed, bytes) = stored(id);
            assert!(packed, "{id} packs");
            assert!(bytes.len() < id.len());
            assert_eq!(unpack_id(&bytes, id.len()), id);
        }
        // UUIDs take 21 bytes.
        assert_eq!(stored("019ad6c1-5b2e-7c3a-9f00-1234567890ab").1.len(), 21);
    }

    #[test]
    fn ids_that_do_not_pack_are_kept_as_they_are() {
        for id in ["a", "ab", "abc", "ABCD-EF01", "a.b_c", "0-", "g000000000"] {
            assert_eq!(stored(id), (false, id.as_bytes().to_vec()), "{id}");
        }
    }

    #[test]
    fn an_entry_is_32_bytes() {
        assert_eq!(std::mem::size_of::<IndexEntry>(), 32);
    }
}
