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

/// Small per-entry facts projection needs without re-reading the line.
#[derive(Debug, Clone)]
pub(crate) enum Aux {
    None,
    /// `message.removed`: the position of the removed entry.
    Target(u32),
    /// `custom`: its interned `customType`.
    CustomType(Arc<str>),
}

/// One indexed entry.
#[derive(Debug, Clone)]
pub struct IndexEntry {
    pub id: Arc<str>,
    pub kind: EntryKind,
    /// Position of the parent entry in the index.
    pub parent: Option<u32>,
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line in the file.
    pub offset: u64,
    /// Length of the line without its "\n".
    pub len: u32,
    depth: u32,
    jump: u32,
    pub(crate) aux: Aux,
}

impl IndexEntry {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: Arc<str>,
        kind: EntryKind,
        parent: Option<u32>,
        line: u64,
        offset: u64,
        len: u32,
        aux: Aux,
        earlier: &[IndexEntry],
        me: u32,
    ) -> IndexEntry {
        let (depth, jump) = match parent {
            None => (0, me),
            Some(p) => {
                let pe = &earlier[p as usize];
                let j = &earlier[pe.jump as usize];
                let jj = &earlier[j.jump as usize];
                let jump = if pe.depth - j.depth == j.depth - jj.depth {
                    j.jump
                } else {
                    p
                };
                (pe.depth + 1, jump)
            }
        };
        IndexEntry {
            id,
            kind,
            parent,
            line,
            offset,
            len,
            depth,
            jump,
            aux,
        }
    }

    /// The removed entry's position, for a `message.removed` entry.
    pub fn removal_target(&self) -> Option<u32> {
        match self.aux {
            Aux::Target(t) => Some(t),
            _ => None,
        }
    }

    /// The `customType`, for a `custom` entry.
    pub fn custom_type(&self) -> Option<&Arc<str>> {
        match &self.aux {
            Aux::CustomType(t) => Some(t),
            _ => None,
        }
    }
}

/// What a scan knows about a file: header, entry index, global metadata and diagnostics.
#[derive(Debug, Default)]
pub struct SessionIndex {
    pub(crate) header: Option<HeaderInfo>,
    pub(crate) entries: Vec<IndexEntry>,
    pub(crate) ids: HashMap<Arc<str>, u32>,
    pub(crate) name: Option<String>,
    pub(crate) archived: Option<bool>,
    pub(crate) labels: HashMap<u32, Option<String>>,
    pub(crate) committed_len: u64,
    pub(crate) committed_lines: u64,
    pub(crate) tail: Option<TailInfo>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) diagnostics_total: u64,
}

impl SessionIndex {
    pub(crate) fn push_diagnostic(&mut self, d: Diagnostic) {
        self.diagnostics_total += 1;
        if self.diagnostics.len() < MAX_KEPT_DIAGNOSTICS {
            self.diagnostics.push(d);
        }
    }

    pub fn header(&self) -> Option<&HeaderInfo> {
        self.header.as_ref()
    }
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }
    pub fn entry(&self, pos: u32) -> &IndexEntry {
        &self.entries[pos as usize]
    }
    pub fn position(&self, id: &str) -> Option<u32> {
        self.ids.get(id).copied()
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
            x = if j.depth >= target_depth {
                e.jump
            } else {
                // depth > target_depth >= 0, so a parent exists.
                e.parent.unwrap_or(x)
            };
        }
    }
}
