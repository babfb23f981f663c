//! The entry index a scan produces: ids, offsets, kinds and tree links, no bodies.
//!
//! Invariants:
//! - `entries` is in file order and only holds entries whose envelope was readable and whose
//!   id was new; `ids` maps each of those ids to its position.
//! - A parent always has a smaller position than its child (parents are on earlier lines), so
//!   the tree is acyclic by construction.
//! - Ancestor queries use skip pointers (`jump`), O(log depth) per query, so a long dictation
//!   chain with many removals never turns validation quadratic.

use std::collections::HashMap;
use std::hash::BuildHasher;

use hashbrown::HashTable;
use std::sync::Arc;

use super::diag::Diagnostic;
use super::validate::MAX_KEPT_DIAGNOSTICS;

/// The `type` of an entry line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// One indexed entry: 48 bytes, no pointers. Its id lives in the index's id arena
/// ([`SessionIndex::id`]).
#[derive(Debug, Clone)]
pub struct IndexEntry {
    /// Byte offset of the line in the file.
    pub offset: u64,
    id_start: u64,
    /// Length of the line without its "\n".
    pub len: u32,
    /// 1-based line number.
    pub line: u32,
    parent: u32,
    depth: u32,
    jump: u32,
    /// `message.removed`: target position; `custom`: interned customType; else `NONE`.
    aux: u32,
    id_len: u8,
    pub kind: EntryKind,
}

/// Hash map with a fast, DoS-resistant (per-process seeded) hasher.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// What a scan knows about a file: header, entry index, global metadata and diagnostics.
#[derive(Default)]
pub struct SessionIndex {
    pub(crate) header: Option<HeaderInfo>,
    entries: Vec<IndexEntry>,
    /// Every indexed id, back to back.
    id_arena: String,
    /// Positions, hashed by their id.
    by_id: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
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

/// What the scanner knows about an entry it is adding.
pub(crate) struct NewEntry<'a> {
    pub id: &'a str,
    pub kind: EntryKind,
    pub parent: Option<u32>,
    pub line: u64,
    pub offset: u64,
    pub len: usize,
    pub removal_target: Option<u32>,
    pub custom_type: Option<&'a str>,
}

impl IndexEntry {
    /// Position of the parent entry in the index.
    pub fn parent(&self) -> Option<u32> {
        (self.parent != NONE).then_some(self.parent)
    }

    /// The removed entry's position, for a `message.removed` entry.
    pub fn removal_target(&self) -> Option<u32> {
        (self.kind == EntryKind::MessageRemoved && self.aux != NONE).then_some(self.aux)
    }
}

fn id_of<'a>(entries: &[IndexEntry], arena: &'a str, pos: u32) -> &'a str {
    let e = &entries[pos as usize];
    &arena[e.id_start as usize..e.id_start as usize + usize::from(e.id_len)]
}

impl SessionIndex {
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
        let id_start = self.id_arena.len() as u64;
        self.id_arena.push_str(e.id);
        self.entries.push(IndexEntry {
            offset: e.offset,
            id_start,
            len: e.len as u32,
            line: e.line as u32,
            parent: e.parent.unwrap_or(NONE),
            depth,
            jump,
            aux,
            id_len: e.id.len() as u8,
            kind: e.kind,
        });
        let hash = self.hasher.hash_one(e.id);
        let (entries, arena, hasher) = (&self.entries, &self.id_arena, &self.hasher);
        self.by_id
            .insert_unique(hash, me, |&p| hasher.hash_one(id_of(entries, arena, p)));
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
    /// The id of the entry at `pos`.
    pub fn id(&self, pos: u32) -> &str {
        id_of(&self.entries, &self.id_arena, pos)
    }
    /// The position of the entry with this id.
    pub fn position(&self, id: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(id);
        self.by_id.find(hash, |&p| self.id(p) == id).copied()
    }
    /// The `customType`, for a `custom` entry.
    pub fn custom_type(&self, pos: u32) -> Option<&Arc<str>> {
        let e = self.entry(pos);
        if e.kind == EntryKind::Custom && e.aux != NONE {
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
