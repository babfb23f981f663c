//! Validation: the v1 schema and file-level rules, checked line by line into a [`SessionIndex`].
//!
//! The [`Scanner`] consumes complete lines in file order. For each line it first *analyzes*
//! (pure: reads the committed state, writes nothing) and then *applies* the result. The store
//! uses the same two steps to refuse a bad append without touching its state.
//!
//! Invariants:
//! - The index keeps ids, offsets, kinds and tree links — never message bodies, custom data or
//!   protocol payloads — so memory follows the number of entries, not the size of the file.
//! - Every problem is a [`Diagnostic`]; scanning never stops early and never panics on input.
//! - Field names in diagnostics come from the static schema tables below, never from the file.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::diag::{Code, Diagnostic};
use super::index::{EntryKind, FastMap, HeaderInfo, IdKey, NewEntry, SessionIndex, TailInfo};
use super::record::{self, Json, MAX_RECORD_BYTES, Obj, get};

const ENVELOPE: &[&str] = &["type", "id", "parentId", "timestamp"];

/// Whether `s` matches `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$` (IDs and asset NAMEs).
pub fn is_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// Whether `s` is an RFC 3339 date-time with a zone that is also ISO 8601: the date and
/// time are separated by an uppercase `T` and UTC is an uppercase `Z` (RFC 3339 would also
/// allow a space and lowercase letters; ISO 8601 does not, and the contract names both).
pub fn is_iso(s: &str) -> bool {
    s.as_bytes().get(10) == Some(&b'T')
        && !s.ends_with('z')
        && OffsetDateTime::parse(s, &Rfc3339).is_ok()
}

/// Whether `s` is exactly `assets/` followed by one NAME.
pub fn is_asset_path(s: &str) -> bool {
    s.strip_prefix("assets/").is_some_and(is_id)
}

fn is_ms(v: &Json<'_>) -> bool {
    v.as_u64().is_some()
}

fn is_pointer(s: &str) -> bool {
    s.is_empty() || s.starts_with('/')
}

/// The outcome of analyzing one line against the committed state.
#[derive(Debug)]
pub struct LineAnalysis {
    pub diagnostics: Vec<Diagnostic>,
    effect: Effect,
}

impl LineAnalysis {
    /// Whether the line is valid in the context of the records before it.
    pub fn is_valid(&self) -> bool {
        self.diagnostics.is_empty()
    }
    /// The entry id this line would add, if its envelope was readable.
    pub fn entry_id(&self) -> Option<&str> {
        match &self.effect {
            Effect::Entry(p) => Some(&p.0.id),
            _ => None,
        }
    }
}

#[derive(Debug)]
enum Effect {
    None,
    Header(HeaderInfo),
    /// The entry and its id's key (for the index the line was analyzed against).
    Entry(Box<(PendingEntry, IdKey)>),
}

#[derive(Debug)]
struct PendingEntry {
    id: String,
    /// Where the id's text starts in the line, when written without escapes.
    id_at: Option<usize>,
    kind: EntryKind,
    parent: Option<u32>,
    aux: PendingAux,
    sequence: Option<(String, u64)>,
    name: Option<String>,
    archived: Option<bool>,
    label: Option<(u32, Option<String>)>,
}

#[derive(Debug)]
enum PendingAux {
    None,
    Target(u32),
    CustomType(String),
}

/// Incremental validator: feed it lines in file order, then [`Scanner::finish`].
#[derive(Debug, Default)]
pub struct Scanner {
    index: SessionIndex,
    next_line: u64,
    next_offset: u64,
    last_sequence: FastMap<String, u64>,
}

struct Ctx {
    line: u64,
    diags: Vec<Diagnostic>,
    /// Address range of the line's bytes: a string the parse borrowed lies inside it.
    bytes: std::ops::Range<usize>,
}

impl Ctx {
    /// Byte offset in the line of `s`, if `s` was borrowed from it (written without escapes).
    fn offset_in_line(&self, s: &str) -> Option<usize> {
        let start = s.as_ptr() as usize;
        (start >= self.bytes.start && start + s.len() <= self.bytes.end)
            .then(|| start - self.bytes.start)
    }
}

impl Ctx {
    fn push(&mut self, code: Code) {
        self.diags.push(Diagnostic::new(self.line, code));
    }
    fn field(&mut self, code: Code, field: &'static str) {
        self.diags.push(Diagnostic::field(self.line, code, field));
    }
}

/// Which code family a field check reports into.
#[derive(Clone, Copy)]
struct Family {
    missing: Code,
    wrong_type: Code,
}

const ENTRY: Family = Family {
    missing: Code::EntryMissingField,
    wrong_type: Code::EntryFieldType,
};
const MESSAGE: Family = Family {
    missing: Code::MessageMissingField,
    wrong_type: Code::MessageFieldType,
};
const BLOCK: Family = Family {
    missing: Code::BlockMissingField,
    wrong_type: Code::BlockFieldType,
};
const ASSET: Family = Family {
    missing: Code::AssetMissingField,
    wrong_type: Code::AssetFieldType,
};

impl Ctx {
    fn req<'v>(&mut self, m: &'v Obj<'v>, k: &'static str, f: Family) -> Option<&'v Json<'v>> {
        let v = get(m, k);
        if v.is_none() {
            self.field(f.missing, k);
        }
        v
    }
    fn req_str<'v>(&mut self, m: &'v Obj<'v>, k: &'static str, f: Family) -> Option<&'v str> {
        let v = self.req(m, k, f)?;
        self.as_str(v, k, f)
    }
    fn opt_str<'v>(&mut self, m: &'v Obj<'v>, k: &'static str, f: Family) -> Option<&'v str> {
        let v = get(m, k)?;
        self.as_str(v, k, f)
    }
    fn as_str<'v>(&mut self, v: &'v Json<'v>, k: &'static str, f: Family) -> Option<&'v str> {
        let s = v.as_str();
        if s.is_none() {
            self.field(f.wrong_type, k);
        }
        s
    }
    fn req_bool(&mut self, m: &Obj<'_>, k: &'static str, f: Family) {
        if let Some(v) = self.req(m, k, f) {
            self.check_bool(v, k, f);
        }
    }
    fn opt_bool(&mut self, m: &Obj<'_>, k: &'static str, f: Family) -> Option<bool> {
        let v = get(m, k)?;
        self.check_bool(v, k, f)
    }
    fn check_bool(&mut self, v: &Json<'_>, k: &'static str, f: Family) -> Option<bool> {
        let b = v.as_bool();
        if b.is_none() {
            self.field(f.wrong_type, k);
        }
        b
    }
    fn req_id<'v>(
        &mut self,
        m: &'v Obj<'v>,
        k: &'static str,
        f: Family,
        bad: Code,
    ) -> Option<&'v str> {
        let s = self.req_str(m, k, f)?;
        if !is_id(s) {
            self.field(bad, k);
            return None;
        }
        Some(s)
    }
    fn req_ms(&mut self, m: &Obj<'_>, k: &'static str, bad: Code) -> Option<u64> {
        let v = self.req(m, k, ENTRY)?;
        self.ms(v, k, bad)
    }
    fn opt_ms(&mut self, m: &Obj<'_>, k: &'static str, bad: Code) -> Option<u64> {
        let v = get(m, k)?;
        self.ms(v, k, bad)
    }
    fn ms(&mut self, v: &Json<'_>, k: &'static str, bad: Code) -> Option<u64> {
        if !v.is_number() {
            self.field(Code::EntryFieldType, k);
            return None;
        }
        let n = v.as_u64();
        if n.is_none() {
            self.field(bad, k);
        }
        n
    }
    fn req_iso(&mut self, m: &Obj<'_>, k: &'static str, bad: Code) {
        if let Some(s) = self.req_str(m, k, ENTRY)
            && !is_iso(s)
        {
            self.field(bad, k);
        }
    }
    fn only_keys(&mut self, m: &Obj<'_>, allowed: &[&str], extra: &[&str], code: Code) {
        if m.iter()
            .map(|(k, _)| k)
            .any(|k| !allowed.contains(&k.as_ref()) && !extra.contains(&k.as_ref()))
        {
            self.push(code);
        }
    }
}

impl Scanner {
    pub fn new() -> Scanner {
        Scanner::default()
    }

    /// A copy of this scanner's state, to validate lines without committing them here;
    /// `None` for a lean scan.
    pub(crate) fn try_clone(&self) -> Option<Scanner> {
        Some(Scanner {
            index: self.index.try_clone()?,
            next_line: self.next_line,
            next_offset: self.next_offset,
            last_sequence: self.last_sequence.clone(),
        })
    }

    /// The state built so far.
    pub fn index(&self) -> &SessionIndex {
        &self.index
    }

    /// Analyzes one complete line (without its "\n") against the records before it. Pure:
    /// the scanner does not change until [`Scanner::apply`].
    pub fn analyze_line(&self, bytes: &[u8]) -> LineAnalysis {
        let mut cx = Ctx {
            line: self.next_line + 1,
            diags: Vec::new(),
            bytes: bytes.as_ptr_range().start as usize..bytes.as_ptr_range().end as usize,
        };
        let effect = self.analyze_inner(bytes, &mut cx);
        LineAnalysis {
            diagnostics: cx.diags,
            effect,
        }
    }

    /// Commits an analyzed line of `len` bytes (without its "\n") to the state.
    pub fn apply(&mut self, analysis: LineAnalysis, len: usize) {
        let line = self.next_line + 1;
        let offset = self.next_offset;
        self.next_line += 1;
        self.next_offset += len as u64 + 1;
        self.index.committed_len = self.next_offset;
        self.index.committed_lines = self.next_line;
        for d in analysis.diagnostics {
            self.index.push_diagnostic(d);
        }
        match analysis.effect {
            Effect::None => {}
            Effect::Header(h) => {
                if self.index.header.is_none() {
                    self.index.header = Some(h);
                }
            }
            Effect::Entry(p) => {
                let (p, key) = *p;
                self.apply_entry(p, &key, line, offset, len)
            }
        }
    }

    /// Analyzes and applies one complete line; returns whether it was valid.
    pub fn push_line(&mut self, bytes: &[u8]) -> bool {
        let analysis = self.analyze_line(bytes);
        let valid = analysis.is_valid();
        self.apply(analysis, bytes.len());
        valid
    }

    /// Records a complete line longer than [`MAX_RECORD_BYTES`] without looking at it.
    pub fn push_oversized(&mut self, len: u64) {
        let line = self.next_line + 1;
        self.next_line += 1;
        self.next_offset += len + 1;
        self.index.committed_len = self.next_offset;
        self.index.committed_lines = self.next_line;
        self.index
            .push_diagnostic(Diagnostic::new(line, Code::RecordTooLarge));
    }

    /// Records the final bytes of a file that have no "\n": an incomplete tail.
    pub fn push_tail(&mut self, len: u64) {
        self.index.tail = Some(TailInfo {
            line: self.next_line + 1,
            offset: self.next_offset,
            len,
        });
    }

    /// Ends the scan.
    pub fn finish(mut self) -> SessionIndex {
        if self.index.committed_lines == 0 {
            self.index
                .push_diagnostic(Diagnostic::new(0, Code::FileEmpty));
        }
        if let Some(t) = self.index.tail {
            self.index
                .push_diagnostic(Diagnostic::new(t.line, Code::FileIncompleteTail));
        }
        self.index.diagnostics.sort_by_key(|d| d.line);
        self.index
    }

    fn apply_entry(&mut self, p: PendingEntry, key: &IdKey, line: u64, offset: u64, len: usize) {
        if self.index.position_of(key).is_some() {
            return; // Duplicate id: reported, not indexed.
        }
        if let Some((conn, seq)) = p.sequence {
            self.last_sequence.insert(conn, seq);
        }
        if let Some(name) = p.name {
            self.index.name = Some(name);
        }
        if let Some(archived) = p.archived {
            self.index.archived = Some(archived);
        }
        if let Some((target, label)) = p.label {
            self.index.labels.insert(target, label);
        }
        let (removal_target, custom_type) = match &p.aux {
            PendingAux::None => (None, None),
            PendingAux::Target(t) => (Some(*t), None),
            PendingAux::CustomType(t) => (None, Some(t.as_str())),
        };
        self.index.push_entry(NewEntry {
            id: &p.id,
            key,
            id_at: p.id_at,
            kind: p.kind,
            parent: p.parent,
            line,
            offset,
            len,
            removal_target,
            custom_type,
        });
    }

    fn analyze_inner(&self, bytes: &[u8], cx: &mut Ctx) -> Effect {
        let first = cx.line == 1;
        if first && bytes.starts_with(b"\xEF\xBB\xBF") {
            cx.push(Code::RecordBom);
            return Effect::None;
        }
        if bytes.len() > MAX_RECORD_BYTES {
            cx.push(Code::RecordTooLarge);
            return Effect::None;
        }
        let map = match record::parse_record(bytes) {
            Ok(m) => m,
            Err(code) => {
                cx.push(code);
                return Effect::None;
            }
        };
        let is_header = get(&map, "type").and_then(Json::as_str) == Some("session");
        if first {
            if !is_header {
                cx.push(Code::HeaderMissing);
                return Effect::None;
            }
            return check_header(&map, cx);
        }
        if is_header {
            cx.push(Code::HeaderDuplicate);
            return Effect::None;
        }
        self.check_entry(&map, cx)
    }

    fn check_entry(&self, m: &Obj<'_>, cx: &mut Ctx) -> Effect {
        let ty = cx.req_str(m, "type", ENTRY);
        let kind = ty.map(|t| EntryKind::from_type(t).unwrap_or(EntryKind::Unknown));
        if kind == Some(EntryKind::Unknown) {
            cx.push(Code::EntryUnknownType);
        }
        let id = cx.req_id(m, "id", ENTRY, Code::EntryInvalidId);
        // The grammar bounds an id's length, so every valid id has a key.
        let key = id.and_then(|id| self.index.key(id));
        if let Some(key) = &key
            && self.index.position_of(key).is_some()
        {
            cx.push(Code::EntryDuplicateId);
        }
        let mut parent = None;
        match get(m, "parentId") {
            None => cx.field(Code::EntryMissingField, "parentId"),
            Some(Json::Null) => {}
            Some(Json::Str(p)) => {
                if !is_id(p) {
                    cx.field(Code::EntryInvalidId, "parentId");
                } else if let Some(i) = self.index.position(p) {
                    parent = Some(i);
                } else {
                    cx.push(Code::EntryParentMissing);
                }
            }
            Some(_) => cx.field(Code::EntryFieldType, "parentId"),
        }
        cx.req_iso(m, "timestamp", Code::EntryInvalidTimestamp);

        let mut pending = PendingEntry {
            id: id.unwrap_or_default().to_owned(),
            id_at: id.and_then(|id| cx.offset_in_line(id)),
            kind: kind.unwrap_or(EntryKind::Unknown),
            parent,
            aux: PendingAux::None,
            sequence: None,
            name: None,
            archived: None,
            label: None,
        };
        if let Some(kind) = kind {
            self.check_body(kind, m, cx, &mut pending);
        }
        match key {
            Some(key) => Effect::Entry(Box::new((pending, key))),
            None => Effect::None,
        }
    }

    fn check_body(&self, kind: EntryKind, m: &Obj<'_>, cx: &mut Ctx, p: &mut PendingEntry) {
        let fields: &[&str] = match kind {
            EntryKind::Message => &["message"],
            EntryKind::Custom => &["customType", "data"],
            EntryKind::CustomMessage => &["customType", "content", "display", "details"],
            EntryKind::SessionInfo => &["name", "archived"],
            EntryKind::Label => &["targetId", "label"],
            EntryKind::ModelChange => &["provider", "modelId", "api"],
            EntryKind::ApiConnection => &[
                "connectionId",
                "provider",
                "endpoint",
                "requestedModel",
                "api",
                "originId",
            ],
            EntryKind::RealtimeEvent => &[
                "connectionId",
                "direction",
                "observation",
                "observedAt",
                "sequence",
                "payload",
                "remoteEventId",
                "redactions",
                "media",
            ],
            EntryKind::RecordingStarted => &["recordingId", "asset"],
            EntryKind::RecordingFinished => &["recordingId", "durationMs", "outcome", "gaps"],
            EntryKind::RecordingInterrupted => &["recordingId", "reason", "durationMs"],
            EntryKind::MessageRemoved => &["targetId"],
            EntryKind::Unknown => return,
        };
        cx.only_keys(m, ENVELOPE, fields, Code::EntryUnknownField);
        match kind {
            EntryKind::Message => {
                if let Some(v) = cx.req(m, "message", ENTRY) {
                    match v.as_object() {
                        Some(msg) => check_message(msg, cx),
                        None => cx.field(Code::EntryFieldType, "message"),
                    }
                }
            }
            EntryKind::Custom => {
                if let Some(t) = cx.req_str(m, "customType", ENTRY) {
                    if t.is_empty() {
                        cx.push(Code::CustomEmptyType);
                    } else {
                        p.aux = PendingAux::CustomType(t.to_owned());
                    }
                }
                cx.req(m, "data", ENTRY);
            }
            EntryKind::CustomMessage => {
                if let Some(t) = cx.req_str(m, "customType", ENTRY)
                    && t.is_empty()
                {
                    cx.push(Code::CustomEmptyType);
                }
                match cx.req(m, "content", ENTRY) {
                    Some(Json::Str(_)) | None => {}
                    Some(Json::Array(blocks)) => {
                        for b in blocks {
                            let ty = b.get("type").and_then(Json::as_str);
                            if b.is_object() && !matches!(ty, Some("text" | "image")) {
                                cx.push(Code::BlockNotAllowed);
                            } else {
                                check_block(b, cx);
                            }
                        }
                    }
                    Some(_) => cx.field(Code::EntryFieldType, "content"),
                }
                cx.req_bool(m, "display", ENTRY);
            }
            EntryKind::SessionInfo => {
                p.name = cx.opt_str(m, "name", ENTRY).map(str::to_owned);
                p.archived = cx.opt_bool(m, "archived", ENTRY);
            }
            EntryKind::Label => {
                let target = cx.req_id(m, "targetId", ENTRY, Code::EntryInvalidId);
                let label = match cx.req(m, "label", ENTRY) {
                    Some(Json::Null) => Some(None),
                    Some(Json::Str(s)) => Some(Some(s.clone())),
                    Some(_) => {
                        cx.field(Code::EntryFieldType, "label");
                        None
                    }
                    None => None,
                };
                if let Some(target) = target {
                    match self.index.position(target) {
                        Some(t) => p.label = label.map(|l| (t, l.map(|l| l.into_owned()))),
                        None => cx.push(Code::LabelTargetMissing),
                    }
                }
            }
            EntryKind::ModelChange => {
                cx.req_str(m, "provider", ENTRY);
                cx.req_str(m, "modelId", ENTRY);
                cx.opt_str(m, "api", ENTRY);
            }
            EntryKind::ApiConnection => {
                cx.req_id(m, "connectionId", ENTRY, Code::EntryInvalidId);
                cx.req_str(m, "provider", ENTRY);
                if let Some(endpoint) = cx.req_str(m, "endpoint", ENTRY)
                    && !is_credential_free_url(endpoint)
                {
                    cx.field(Code::EntryInvalidValue, "endpoint");
                }
                cx.req_str(m, "requestedModel", ENTRY);
                cx.req_str(m, "api", ENTRY);
                cx.req_id(m, "originId", ENTRY, Code::EntryInvalidId);
            }
            EntryKind::RealtimeEvent => self.check_realtime(m, cx, p),
            EntryKind::RecordingStarted => {
                cx.req_id(m, "recordingId", ENTRY, Code::EntryInvalidId);
                if let Some(a) = cx.req_str(m, "asset", ENTRY)
                    && !is_asset_path(a)
                {
                    cx.push(Code::AssetInvalidPath);
                }
            }
            EntryKind::RecordingFinished => {
                cx.req_id(m, "recordingId", ENTRY, Code::EntryInvalidId);
                cx.req_ms(m, "durationMs", Code::EntryInvalidValue);
                if let Some(o) = cx.req_str(m, "outcome", ENTRY)
                    && !matches!(o, "complete" | "incomplete")
                {
                    cx.field(Code::EntryInvalidValue, "outcome");
                }
                match get(m, "gaps") {
                    None => {}
                    Some(Json::Array(gaps)) => gaps.iter().for_each(|g| check_gap(g, cx)),
                    Some(_) => cx.field(Code::EntryFieldType, "gaps"),
                }
            }
            EntryKind::RecordingInterrupted => {
                cx.req_id(m, "recordingId", ENTRY, Code::EntryInvalidId);
                cx.req_str(m, "reason", ENTRY);
                cx.opt_ms(m, "durationMs", Code::EntryInvalidValue);
            }
            EntryKind::MessageRemoved => {
                let Some(target) = cx.req_id(m, "targetId", ENTRY, Code::EntryInvalidId) else {
                    return;
                };
                let Some(t) = self.index.position(target) else {
                    cx.push(Code::RemovalTargetMissing);
                    return;
                };
                let te = self.index.entry(t);
                if !matches!(te.kind(), EntryKind::Message | EntryKind::CustomMessage) {
                    cx.push(Code::RemovalTargetNotMessage);
                } else if !p
                    .parent
                    .is_some_and(|parent| self.index.is_ancestor_or_self(t, parent))
                {
                    cx.push(Code::RemovalTargetNotAncestor);
                } else {
                    p.aux = PendingAux::Target(t);
                }
            }
            EntryKind::Unknown => {}
        }
    }

    fn check_realtime(&self, m: &Obj<'_>, cx: &mut Ctx, p: &mut PendingEntry) {
        let conn = cx.req_id(m, "connectionId", ENTRY, Code::EntryInvalidId);
        let direction = cx.req_str(m, "direction", ENTRY);
        let observation = cx.req_str(m, "observation", ENTRY);
        if let Some(d) = direction
            && !matches!(d, "outgoing" | "incoming")
        {
            cx.field(Code::EntryInvalidValue, "direction");
        }
        if let Some(o) = observation
            && !matches!(o, "send_attempt" | "send_failed" | "received")
        {
            cx.field(Code::EntryInvalidValue, "observation");
        }
        match (direction, observation) {
            (Some("outgoing"), Some("received"))
            | (Some("incoming"), Some("send_attempt" | "send_failed")) => {
                cx.push(Code::RealtimeObservationMismatch)
            }
            _ => {}
        }
        cx.req_iso(m, "observedAt", Code::EntryInvalidTimestamp);
        if let Some(seq) = cx.req_ms(m, "sequence", Code::EntryInvalidValue)
            && let Some(conn) = conn
        {
            if self
                .last_sequence
                .get(conn)
                .is_some_and(|&last| seq <= last)
            {
                cx.push(Code::RealtimeSequenceOrder);
            } else {
                p.sequence = Some((conn.to_owned(), seq));
            }
        }
        let payload = cx.req(m, "payload", ENTRY);
        if payload.is_some_and(|v| !v.is_object()) {
            cx.field(Code::EntryFieldType, "payload");
        }
        cx.opt_str(m, "remoteEventId", ENTRY);
        match get(m, "redactions") {
            None => {}
            Some(Json::Array(ptrs)) if !ptrs.iter().all(|v| v.as_str().is_some_and(is_pointer)) => {
                cx.field(Code::EntryInvalidValue, "redactions");
            }
            Some(Json::Array(_)) => {}
            Some(_) => cx.field(Code::EntryFieldType, "redactions"),
        }
        match get(m, "media") {
            None => {}
            Some(Json::Array(refs)) => {
                for r in refs {
                    check_media(r, payload, cx);
                }
            }
            Some(_) => cx.field(Code::EntryFieldType, "media"),
        }
    }
}

fn check_header(m: &Obj<'_>, cx: &mut Ctx) -> Effect {
    const KEYS: &[&str] = &["type", "version", "id", "timestamp"];
    cx.only_keys(m, KEYS, &[], Code::HeaderUnknownField);
    let fam = Family {
        missing: Code::HeaderMissingField,
        wrong_type: Code::HeaderFieldType,
    };
    match cx.req(m, "version", fam) {
        Some(Json::UInt(1)) => {}
        Some(v) if v.is_number() => cx.push(Code::HeaderUnsupportedVersion),
        Some(_) => cx.field(Code::HeaderFieldType, "version"),
        None => {}
    }
    let id = cx.req_id(m, "id", fam, Code::HeaderInvalidId);
    let ts = cx.req_str(m, "timestamp", fam);
    if let Some(t) = ts
        && !is_iso(t)
    {
        cx.push(Code::HeaderInvalidTimestamp);
    }
    match (id, ts) {
        (Some(id), Some(ts)) => Effect::Header(HeaderInfo {
            id: id.to_owned(),
            timestamp: ts.to_owned(),
        }),
        _ => Effect::None,
    }
}

fn check_message(m: &Obj<'_>, cx: &mut Ctx) {
    let role = cx.req_str(m, "role", MESSAGE);
    if let Some(r) = role
        && !matches!(r, "user" | "assistant" | "toolResult")
    {
        cx.push(Code::MessageInvalidRole);
    }
    match cx.req(m, "content", MESSAGE) {
        Some(Json::Array(blocks)) => blocks.iter().for_each(|b| check_block(b, cx)),
        Some(_) => cx.field(Code::MessageFieldType, "content"),
        None => {}
    }
    if let Some(ts) = cx.req(m, "timestamp", MESSAGE)
        && !is_ms(ts)
    {
        if ts.is_number() {
            cx.push(Code::MessageInvalidTimestamp);
        } else {
            cx.field(Code::MessageFieldType, "timestamp");
        }
    }
    for k in ["api", "provider", "model", "responseId", "errorMessage"] {
        cx.opt_str(m, k, MESSAGE);
    }
    for k in ["usage", "replay"] {
        if get(m, k).is_some_and(|v| !v.is_object()) {
            cx.field(Code::MessageFieldType, k);
        }
    }
    if let Some(sr) = cx.opt_str(m, "stopReason", MESSAGE)
        && !matches!(sr, "stop" | "length" | "toolUse" | "error" | "aborted")
    {
        cx.push(Code::MessageInvalidStopReason);
    }
    if role == Some("toolResult") {
        cx.req_str(m, "toolCallId", MESSAGE);
        cx.req_str(m, "toolName", MESSAGE);
        cx.req_bool(m, "isError", MESSAGE);
    }
}

fn check_block(b: &Json<'_>, cx: &mut Ctx) {
    let Some(m) = b.as_object() else {
        cx.push(Code::BlockNotObject);
        return;
    };
    let Some(ty) = cx.req_str(m, "type", BLOCK) else {
        return;
    };
    let keys: &[&str] = match ty {
        "text" => &["text"],
        "thinking" => &["thinking", "signature"],
        "toolCall" => &["id", "name", "arguments"],
        "image" => &["asset"],
        "audio" => &["asset", "recordingId", "range"],
        _ => return, // Unknown block: kept as is, skipped by context conversion.
    };
    cx.only_keys(m, &["type"], keys, Code::BlockUnknownField);
    match ty {
        "text" => {
            cx.req_str(m, "text", BLOCK);
        }
        "thinking" => {
            cx.req_str(m, "thinking", BLOCK);
            cx.opt_str(m, "signature", BLOCK);
        }
        "toolCall" => {
            cx.req_str(m, "id", BLOCK);
            cx.req_str(m, "name", BLOCK);
            if let Some(a) = cx.req(m, "arguments", BLOCK)
                && !a.is_object()
            {
                cx.field(Code::BlockFieldType, "arguments");
            }
        }
        "image" => {
            if let Some(a) = cx.req(m, "asset", BLOCK) {
                check_asset(a, false, cx);
            }
        }
        _ => {
            // audio
            if let Some(a) = cx.req(m, "asset", BLOCK) {
                check_asset(a, false, cx);
            }
            if let Some(r) = cx.opt_str(m, "recordingId", BLOCK)
                && !is_id(r)
            {
                cx.field(Code::EntryInvalidId, "recordingId");
            }
            if let Some(r) = get(m, "range") {
                let ok = r.as_object().is_some_and(|r| {
                    r.len() == 2
                        && match (
                            get(r, "startMs").and_then(Json::as_u64),
                            get(r, "endMs").and_then(Json::as_u64),
                        ) {
                            (Some(s), Some(e)) => s < e,
                            _ => false,
                        }
                });
                if !ok {
                    cx.push(Code::BlockInvalidRange);
                }
            }
        }
    }
}

/// Checks an AssetRef. `media` requires an available asset with `byteRange` and `encoding`.
fn check_asset(v: &Json<'_>, media: bool, cx: &mut Ctx) {
    let Some(m) = v.as_object() else {
        cx.field(Code::AssetFieldType, "asset");
        return;
    };
    match cx.req_str(m, "status", ASSET) {
        Some("available") => {
            cx.only_keys(
                m,
                &["status", "path", "mimeType"],
                &["byteRange", "encoding", "sha256"],
                Code::AssetUnknownField,
            );
            if let Some(p) = cx.req_str(m, "path", ASSET)
                && !is_asset_path(p)
            {
                cx.push(Code::AssetInvalidPath);
            }
            cx.req_str(m, "mimeType", ASSET);
            match get(m, "byteRange") {
                None => {
                    if media {
                        cx.push(Code::RealtimeMediaInvalid);
                    }
                }
                Some(r) => {
                    let ok = r.as_object().is_some_and(|r| {
                        r.len() == 2
                            && match (
                                get(r, "start").and_then(Json::as_u64),
                                get(r, "end").and_then(Json::as_u64),
                            ) {
                                (Some(s), Some(e)) => s < e,
                                _ => false,
                            }
                    });
                    if !ok {
                        cx.push(Code::AssetInvalidByteRange);
                    }
                }
            }
            if cx.opt_str(m, "encoding", ASSET).is_none() && media {
                cx.push(Code::RealtimeMediaInvalid);
            }
            if let Some(h) = cx.opt_str(m, "sha256", ASSET)
                && !(h.len() == 64 && h.bytes().all(|c| c.is_ascii_hexdigit()))
            {
                cx.push(Code::AssetInvalidSha256);
            }
        }
        Some("missing") => {
            if media {
                cx.push(Code::RealtimeMediaInvalid);
            }
            cx.only_keys(
                m,
                &["status", "reason"],
                &["source"],
                Code::AssetUnknownField,
            );
            cx.req_str(m, "reason", ASSET);
        }
        Some(_) => cx.push(Code::AssetInvalidStatus),
        None => {}
    }
}

fn check_media(r: &Json<'_>, payload: Option<&Json<'_>>, cx: &mut Ctx) {
    let Some(m) = r.as_object() else {
        cx.push(Code::RealtimeMediaInvalid);
        return;
    };
    if m.iter()
        .map(|(k, _)| k)
        .any(|k| k != "pointer" && k != "asset")
    {
        cx.push(Code::RealtimeMediaInvalid);
    }
    match get(m, "pointer").and_then(Json::as_str) {
        Some(p) if is_pointer(p) => {
            // The externalized field is removed or null in the payload.
            if payload
                .and_then(|pl| pl.pointer(p))
                .is_some_and(|v| !v.is_null())
            {
                cx.push(Code::RealtimeMediaInvalid);
            }
        }
        _ => cx.push(Code::RealtimeMediaInvalid),
    }
    match get(m, "asset") {
        Some(a) => check_asset(a, true, cx),
        None => cx.push(Code::RealtimeMediaInvalid),
    }
}

fn check_gap(g: &Json<'_>, cx: &mut Ctx) {
    let ok = g.as_object().is_some_and(|m| {
        m.iter()
            .map(|(k, _)| k)
            .all(|k| matches!(k.as_ref(), "reason" | "itemId" | "startMs" | "endMs"))
            && get(m, "reason").is_some_and(Json::is_string)
            && get(m, "itemId").is_none_or(Json::is_string)
            && get(m, "startMs").is_none_or(is_ms)
            && get(m, "endMs").is_none_or(is_ms)
            && match (
                get(m, "startMs").and_then(Json::as_u64),
                get(m, "endMs").and_then(Json::as_u64),
            ) {
                (Some(s), Some(e)) => s <= e,
                _ => true,
            }
    });
    if !ok {
        cx.push(Code::GapInvalid);
    }
}

/// An endpoint is credential-free when it has no user-info part and no query parameter whose
/// name suggests a credential, and carries nothing that looks like an API key.
pub fn is_credential_free_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    let after_scheme = lower.split_once("://").map_or(lower.as_str(), |(_, r)| r);
    let authority = after_scheme
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    if authority.contains('@') {
        return false;
    }
    if super::secrets::looks_secret(url) {
        return false;
    }
    if let Some((_, query)) = lower.split_once('?') {
        for pair in query.split(['&', '#']) {
            let name = pair.split('=').next().unwrap_or_default();
            if super::secrets::is_credential_param(name) {
                return false;
            }
        }
    }
    true
}

/// Scans a whole stream. I/O errors are returned; content problems become diagnostics.
pub fn scan_reader<R: Read>(reader: R) -> io::Result<SessionIndex> {
    scan_into(Scanner::new(), reader)
}

/// Feeds all of `reader` to `scanner`, records the incomplete tail and ends the scan.
fn scan_into<R: Read>(mut scanner: Scanner, mut reader: R) -> io::Result<SessionIndex> {
    let tail = feed_lines(&mut scanner, &mut reader)?;
    if tail > 0 {
        scanner.push_tail(tail);
    }
    Ok(scanner.finish())
}

/// Feeds every complete line readable from `reader` to `scanner`, never buffering more than
/// one record (a longer line is counted, not kept). Returns the length of the trailing bytes
/// that have no "\n" (0 when the data ends in a newline); the caller decides what they are.
pub fn feed_lines<R: Read>(scanner: &mut Scanner, reader: &mut R) -> io::Result<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut pending_len: u64 = 0; // bytes of the current, unterminated line
    let mut oversized = false;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let mut chunk = &buf[..n];
        while !chunk.is_empty() {
            let (part, complete) = match memchr::memchr(b'\n', chunk) {
                Some(pos) => (&chunk[..pos], true),
                None => (chunk, false),
            };
            chunk = &chunk[part.len() + usize::from(complete)..];
            pending_len += part.len() as u64;
            if !oversized {
                if pending_len > MAX_RECORD_BYTES as u64 {
                    oversized = true;
                    pending = Vec::new();
                } else if complete && pending.is_empty() {
                    // Fast path: the line lies whole inside the buffer.
                    scanner.push_line(part);
                    pending_len = 0;
                    continue;
                } else {
                    pending.extend_from_slice(part);
                }
            }
            if complete {
                if oversized {
                    scanner.push_oversized(pending_len);
                } else {
                    scanner.push_line(&pending);
                }
                pending.clear();
                pending_len = 0;
                oversized = false;
            }
        }
    }
    Ok(pending_len)
}

/// Scans an open session file from its current position into a *lean* index: one that
/// keeps no id bytes and confirms and reads ids back from `file` (see
/// [`SessionIndex::is_lean`]; about a third less memory per entry). Diagnostics and answers
/// are the same as [`scan_reader`]'s; a read that confirms an id failing is an I/O error.
/// For a caller that reads the file again afterwards anyway (`persyk context`): a lean
/// index answers with what the file holds when asked, so the caller must check that the
/// file has not changed, as it must for any read back by offset.
pub fn scan_file_lean(file: &File) -> io::Result<SessionIndex> {
    scan_lean(file, super::index::FP_BITS)
}

fn scan_lean(file: &File, fp_bits: u32) -> io::Result<SessionIndex> {
    let scanner = Scanner {
        index: SessionIndex::lean(file.try_clone()?, fp_bits),
        ..Scanner::default()
    };
    let index = scan_into(scanner, file)?;
    if index.lean_failed() {
        return Err(io::Error::other("an id could not be read back"));
    }
    Ok(index)
}

/// Scans a file by path; never writes or repairs anything.
pub fn scan_path(path: &Path) -> io::Result<SessionIndex> {
    scan_reader(File::open(path)?)
}

/// Scans bytes held in memory (tests, fuzzing).
pub fn scan_bytes(bytes: &[u8]) -> SessionIndex {
    match scan_reader(bytes) {
        Ok(index) => index,
        // Reading from a slice cannot fail.
        Err(_) => unreachable!("reading from memory failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        r#"{"type":"session","version":1,"id":"s1","timestamp":"2026-01-01T00:00:00Z"}"#;

    fn codes(text: &str) -> Vec<&'static str> {
        scan_bytes(text.as_bytes())
            .diagnostics()
            .iter()
            .map(|d| d.code.as_str())
            .collect()
    }

    #[test]
    fn ids() {
        assert!(is_id("a"));
        assert!(is_id("A.b_c-9"));
        assert!(!is_id(""));
        assert!(!is_id("-a"));
        assert!(!is_id("a/b"));
        assert!(is_id(&"a".repeat(128)));
        assert!(!is_id(&"a".repeat(129)));
    }

    #[test]
    fn header_only_is_valid() {
        assert!(codes(&format!("{HEADER}\n")).is_empty());
        assert_eq!(codes(""), vec!["file.empty"]);
        assert_eq!(codes(HEADER), vec!["file.empty", "file.incomplete-tail"]);
    }

    #[test]
    fn ancestor_removal() {
        let text = format!(
            "{HEADER}\n{}\n{}\n{}\n",
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01Z","message":{"role":"user","content":[],"timestamp":1}}"#,
            r#"{"type":"message","id":"b","parentId":null,"timestamp":"2026-01-01T00:00:01Z","message":{"role":"user","content":[],"timestamp":1}}"#,
            r#"{"type":"message.removed","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:01Z","targetId":"a"}"#,
        );
        assert_eq!(codes(&text), vec!["removal.target-not-ancestor"]);
    }

    #[test]
    fn endpoints() {
        assert!(is_credential_free_url(
            "wss://api.openai.com/v1/realtime?intent=transcription"
        ));
        assert!(!is_credential_free_url("wss://user:pw@example.com/"));
        assert!(!is_credential_free_url("wss://example.com/?api_key=abc"));
        assert!(!is_credential_free_url(
            "wss://example.com/?access_token=abc"
        ));
        assert!(!is_credential_free_url("wss://example.com/?sig=abc"));
        assert!(is_credential_free_url(
            "wss://example.com/?design=a&model=gpt-realtime"
        ));
        assert!(!is_credential_free_url(
            "wss://example.com/sk-abcdefghijklmnopqrstuvwx"
        ));
    }

    /// Every fixture, plus a file whose references reach far back (past the lean index's
    /// ring of recent ids), escaped ids, duplicates and a missing parent.
    fn lean_cases() -> Vec<(String, Vec<u8>)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        let mut cases = Vec::new();
        for dir in [root.join("golden"), root.join("reject"), root.clone()] {
            let mut paths: Vec<_> = std::fs::read_dir(&dir)
                .expect("fixtures")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect();
            paths.sort();
            for p in paths {
                let bytes = std::fs::read(&p).expect("read fixture");
                cases.push((p.display().to_string(), bytes));
            }
        }
        let mut far = String::from(HEADER);
        far.push('\n');
        let line = |id: &str, parent: Option<&str>| {
            let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
            format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01Z","message":{{"role":"user","content":[{{"type":"text","text":"x"}}],"timestamp":1}}}}"#
            ) + "\n"
        };
        for i in 0..200 {
            let parent = (i > 0).then(|| format!("019a-{:04}", i - 1));
            far.push_str(&line(&format!("019a-{i:04}"), parent.as_deref()));
        }
        // Branches from old entries, an id written with escapes, its child, a duplicate of
        // an old id, a missing parent, a removal and a label of old targets.
        far.push_str(&line("b1", Some("019a-0003")));
        far.push_str(&line("\\u0065sc", Some("019a-0100")));
        far.push_str(&line("c1", Some("esc")));
        far.push_str(&line("019a-0007", Some("c1")));
        far.push_str(&line("orphan", Some("019a-9999")));
        far.push_str(r#"{"type":"message.removed","id":"rm","parentId":"c1","timestamp":"2026-01-01T00:00:02Z","targetId":"019a-0100"}"#);
        far.push('\n');
        far.push_str(r#"{"type":"label","id":"lb","parentId":"rm","timestamp":"2026-01-01T00:00:03Z","targetId":"019a-0002","label":"x"}"#);
        far.push('\n');
        cases.push(("far references".to_owned(), far.into_bytes()));
        cases
    }

    fn lean_scan(bytes: &[u8], fp_bits: u32) -> SessionIndex {
        let mut file = tempfile::tempfile().expect("temp file");
        std::io::Write::write_all(&mut file, bytes).expect("write");
        std::io::Seek::rewind(&mut file).expect("rewind");
        scan_lean(&file, fp_bits).expect("lean scan")
    }

    #[test]
    fn issue15_18_a_lean_index_answers_like_one_that_keeps_its_ids() {
        // 28 bits as `persyk context` uses them; 1 and 0 bits make every lookup collide, so
        // each answer rests on the confirming read.
        for (name, bytes) in lean_cases() {
            let kept = scan_bytes(&bytes);
            for fp_bits in [super::super::index::FP_BITS, 1, 0] {
                let lean = lean_scan(&bytes, fp_bits);
                let what = format!("{name} with {fp_bits}-bit fingerprints");
                let diags = |i: &SessionIndex| {
                    i.diagnostics()
                        .iter()
                        .map(|d| (d.line, d.code))
                        .collect::<Vec<_>>()
                };
                assert_eq!(diags(&lean), diags(&kept), "{what}");
                assert_eq!(lean.len(), kept.len(), "{what}");
                assert_eq!(lean.is_authoritative(), kept.is_authoritative(), "{what}");
                assert_eq!(lean.name(), kept.name(), "{what}");
                let labels = |i: &SessionIndex| {
                    let mut l: Vec<_> = i.labels().map(|(t, l)| (t, l.to_owned())).collect();
                    l.sort();
                    l
                };
                assert_eq!(labels(&lean), labels(&kept), "{what}");
                assert!(lean.is_lean() && !kept.is_lean());
                assert_eq!(lean.id_bytes(), usize::from(name == "far references") * 3);
                for pos in 0..kept.len() as u32 {
                    let (a, b) = (lean.entry(pos), kept.entry(pos));
                    assert_eq!(
                        (a.offset(), a.len_bytes(), a.kind(), a.parent()),
                        (b.offset(), b.len_bytes(), b.kind(), b.parent()),
                        "{what}: entry {pos}"
                    );
                    let id = kept.id(pos);
                    assert_eq!(lean.try_id(pos).expect("read id"), id, "{what}: {pos}");
                    assert_eq!(lean.position(&id), Some(pos), "{what}: {id}");
                    let start = a.offset() as usize;
                    let line = &bytes[start..start + a.len_bytes() as usize];
                    assert_eq!(lean.id_in_line(pos, line).as_deref(), Some(&*id));
                    assert!(lean.is_id_of(pos, &id, line), "{what}: {id}");
                    assert!(!lean.is_id_of(pos, "no-such-id", line), "{what}: {id}");
                }
                assert_eq!(lean.position("no-such-id"), None, "{what}");
            }
        }
    }

    #[test]
    fn a_lean_index_notices_a_file_changed_under_it() {
        let (_, bytes) = lean_cases().pop().expect("far references");
        let mut file = tempfile::tempfile().expect("temp file");
        std::io::Write::write_all(&mut file, &bytes).expect("write");
        std::io::Seek::rewind(&mut file).expect("rewind");
        let lean = scan_lean(&file, super::super::index::FP_BITS).expect("lean scan");
        let pos = lean.position("019a-0042").expect("indexed");
        // The same bytes elsewhere: the id read back no longer has the indexed fingerprint.
        let at = lean.entry(pos).offset() + 30;
        std::os::unix::fs::FileExt::write_all_at(&file, b"zzzzzzzzz", at).expect("rewrite");
        assert!(lean.try_id(pos).is_err());
        assert_eq!(lean.position("019a-0042"), None);
    }

    #[test]
    fn the_parse_refuses_nesting_far_too_deep_without_running_out_of_stack() {
        let mut line = String::from("{\"a\":");
        line.push_str(&"[".repeat(200_000));
        line.push_str(&"]".repeat(200_000));
        line.push('}');
        assert_eq!(
            record::parse_record(line.as_bytes()),
            Err(Code::RecordTooDeep)
        );
    }
}
