//! Listing and search over discovered sessions, computed from the files as they are now.
//!
//! [`list`] pages through a [`Discovery`] and describes each session: default leaf, display
//! label, archived flag, message count, recorded duration, first diagnostic. [`search`] finds
//! the sessions whose *search text* contains a query and pins each hit to
//! `{location, sessionId, leafId}`, so opening it (`persyk context LOCATION --leaf LEAF`)
//! shows that leaf even after the file grew.
//!
//! # What matches
//!
//! The search text of a session is, per field: every `text` block and string content of the
//! surviving conversation on the default leaf's path (message and `custom_message` entries,
//! removals applied, in path order), the session name, and every current label. Never
//! thinking, tool arguments, `custom_message.details`, custom state, realtime payloads,
//! provisional text, removed content or other branches. A field matches when
//! [`fold`]`(query)` is a substring of `fold(field)`: a case-insensitive literal match, one
//! field at a time (never across two blocks). `fold` is per-character Unicode lowercase with
//! final sigma `ς` folded to `σ`; there is no normalization (NFC `é` and NFD `e◌́` differ),
//! no regex and no fuzziness. The first match is looked for in conversation order, then in
//! the name, then in the labels (by target position); its excerpt is at most
//! [`EXCERPT_CHARS`] characters of the original text around it, control characters shown
//! as spaces. The "Untitled session" placeholder is not search text.
//!
//! # Cost and the prefilter
//!
//! Results are ordered like the listing (created time, newest first) and a page stops as soon
//! as it has `limit` hits, so a common word reads only the newest files. Every other file
//! first goes through [`Query::may_match`], a byte-level prefilter that reads the file once
//! and never parses JSON; only files it cannot rule out are validated and projected. Files are
//! processed in parallel (rayon), and nothing keeps a body: the scan keeps an index, the
//! conversation is read back [`READ_CHUNK`] entries at a time.
//!
//! The prefilter is *sound*: when it says no, the exact matcher would have said no. Proof
//! sketch (the differential test in `tests/search.rs` checks it on a generated corpus):
//!
//! 1. Only committed lines of an authoritative file contribute search text, and each field is
//!    one JSON string inside one line. A line whose raw bytes begin with
//!    `{"type":"realtime_event"` (or `custom`, `session`, `model_change`, `api_connection`,
//!    `recording.*`, `message.removed`, each with its closing quote) has exactly that
//!    top-level type — the prefix holds no escapes and an authoritative record has no
//!    duplicate keys — so it holds no search text and is ignored. Any other spelling is kept.
//!    The uncommitted tail is ignored too.
//! 2. `fold` works character by character, so `fold(a + b) = fold(a) + fold(b)`. Take a match
//!    of the needle `n` inside `fold(t)` for a field `t`. Each needle character comes from one
//!    source character of `t`, written in the line either raw (its UTF-8 bytes) or as an
//!    escape (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\uXXXX`, a surrogate pair).
//! 3. If an escaped source character `c` contributes to the match, `fold(c)` shares a
//!    character with `n`. The prefilter decodes every escape in a kept line (`\u` escapes
//!    and those simple escapes whose character occurs in `n`; a run of backslashes is read by
//!    parity, exactly as JSON does) and answers yes on any such "risky" escape, or on any
//!    escape it cannot decode.
//! 4. Otherwise every source character of the match is raw, so they are contiguous bytes of
//!    the line, and the fold of those bytes *is* the match: folding a kept line exactly and
//!    searching it for `n` finds it (the *exact path*).
//! 5. The *anchor path* avoids folding most lines. Its anchor `a` is `n` itself when `n` is
//!    ASCII, else the longest ASCII run of `n` (at least [`MIN_ANCHOR`] bytes; without one,
//!    every kept line takes the exact path). `a` is a substring of every match. The bytes
//!    are ASCII-lowercased, which is the exact fold of every character whose fold holds an
//!    ASCII character except `İ` (U+0130 → `i̇`) and the Kelvin sign (U+212A → `k`), the
//!    only two such non-ASCII characters (a unit test enumerates all of Unicode). So when
//!    the chunk holds neither (or `a` holds no `i`, resp. `k`), the raw source characters
//!    of `a` lowercase to `a`: every match lies in a kept line holding an anchor hit. Such a
//!    line answers yes when `a = n`, and otherwise goes through the exact path. A chunk that
//!    holds `İ` or `K` while `a` holds `i` or `k` takes the exact path for all its lines.
//!
//! Lines that are not UTF-8 or longer than a record make the prefilter say yes; the scan
//! then reports the file as unsearchable.
//!
//! Invariants:
//! - No catalog and no cache here: every call reads the files; a cursor is only a position in
//!   the listing order (`created`, `location`), so pages stay consistent while files change.
//!   The app keeps a per-file cache between keystrokes ([`super::search_cache`]); the CLI
//!   does not use it.
//! - Bounded work per request: `limit` ≤ [`MAX_LIMIT`] rows; memory per worker is a read
//!   buffer and its lowercased copy (≤ 1.3 MiB each: one record plus one read), one session
//!   index and [`READ_CHUNK`] entries.
//! - Diagnostics and skip codes never contain message text; labels and excerpts (the output
//!   the caller asked for) are the only text that leaves this module.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use memchr::memmem;
use rayon::prelude::*;

use super::discover::{DiscoveredSession, Discovery, order};
use super::format::{Block, CustomContent, Entry, EntryBody, Role};
use super::history::{self, HistoryError};
use super::index::{EntryKind, SessionIndex};
use super::project::{LeafSelector, Projection, project};
use super::record::MAX_RECORD_BYTES;
use super::validate::scan_reader;

/// Rows per page when the caller does not say.
pub const DEFAULT_LIMIT: usize = 50;
/// Most rows one request returns.
pub const MAX_LIMIT: usize = 500;
/// Longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;
/// Longest excerpt, in characters.
pub const EXCERPT_CHARS: usize = 160;
/// Longest fallback label (first user text), in characters.
pub const LABEL_CHARS: usize = 80;
/// The label of a session without a name and without user text.
pub const UNTITLED: &str = "Untitled session";
/// Entries read back from a file at a time.
pub const READ_CHUNK: usize = 16;

const PREFILTER_CHUNK: usize = 256 * 1024;
const FIRST_BATCH_MIN: usize = 32;
const BATCH_MAX: usize = 1024;

/// Why a request or one session's search failed. Each variant has a stable
/// [`SearchError::code`]; none carries file content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    #[error("search.empty-query: the query is empty")]
    EmptyQuery,
    #[error("search.query-too-long: the query is longer than 4096 bytes")]
    QueryTooLong,
    #[error("search.invalid-cursor: the cursor was not produced by this version of Persyk")]
    InvalidCursor,
    #[error("search.io: reading the session failed: {source}")]
    Io {
        #[source]
        source: io::Error,
    },
    #[error("search.changed: the session file was rewritten while it was read")]
    Changed,
}

impl SearchError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            SearchError::EmptyQuery => "search.empty-query",
            SearchError::QueryTooLong => "search.query-too-long",
            SearchError::InvalidCursor => "search.invalid-cursor",
            SearchError::Io { .. } => "search.io",
            SearchError::Changed => "search.changed",
        }
    }
}

impl From<io::Error> for SearchError {
    fn from(source: io::Error) -> SearchError {
        SearchError::Io { source }
    }
}

impl From<HistoryError> for SearchError {
    fn from(e: HistoryError) -> SearchError {
        match e {
            HistoryError::Io(source) => SearchError::Io { source },
            _ => SearchError::Changed,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Case folding
// ---------------------------------------------------------------------------------------------

/// Appends the fold of one character: its Unicode lowercase mapping; final sigma folds to σ.
#[inline]
fn fold_char_into(c: char, out: &mut String) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
    } else if c == 'ς' {
        out.push('σ');
    } else {
        out.extend(c.to_lowercase());
    }
}

/// Appends `fold(s)` to `out`.
pub fn fold_into(s: &str, out: &mut String) {
    for c in s.chars() {
        fold_char_into(c, out);
    }
}

/// The case fold search compares: per-character Unicode lowercase, `ς` → `σ`.
pub fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    fold_into(s, &mut out);
    out
}

/// Shows control characters (newlines, tabs) as spaces so a label or excerpt is one line.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Query: exact matching and the prefilter
// ---------------------------------------------------------------------------------------------

const I_DOT: &[u8] = "\u{130}".as_bytes();
const KELVIN: &[u8] = "\u{212A}".as_bytes();

/// Line prefixes whose top-level type never holds search text (see the module doc, step 1).
const SILENT_TYPES: &[&[u8]] = &[
    b"realtime_event\"",
    b"custom\"",
    b"session\"",
    b"recording.started\"",
    b"recording.finished\"",
    b"recording.interrupted\"",
    b"message.removed\"",
    b"model_change\"",
    b"api_connection\"",
];

/// Whether a raw line may hold search text.
fn line_is_searchable(line: &[u8]) -> bool {
    match line.strip_prefix(b"{\"type\":\"") {
        Some(rest) => !SILENT_TYPES.iter().any(|t| rest.starts_with(t)),
        None => true,
    }
}

/// The line around byte `p` of a region of whole lines: `(start, end)`, `end` at its "\n".
fn line_bounds(region: &[u8], p: usize) -> (usize, usize) {
    let start = memchr::memrchr(b'\n', &region[..p]).map_or(0, |i| i + 1);
    let end = memchr::memchr(b'\n', &region[p..]).map_or(region.len(), |i| p + i);
    (start, end)
}

/// Whether the backslash at `p` is itself escaped (an odd run of backslashes precedes it).
fn backslash_is_escaped(bytes: &[u8], p: usize) -> bool {
    let run = bytes[..p].iter().rev().take_while(|&&b| b == b'\\').count();
    run % 2 == 1
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let mut value = 0u32;
    for &d in digits {
        value = (value << 4) | char::from(d).to_digit(16)?;
    }
    Some(value)
}

enum UEscape {
    /// The character and the escape's length in bytes (6, or 12 for a surrogate pair).
    Char(char, usize),
    /// The low half of a pair whose high half starts 6 bytes earlier.
    PairTail,
    /// Not decodable: treated as risky.
    Invalid,
}

/// Decodes the `\u` escape at `p` (`bytes[p..p + 2] == b"\\u"`).
fn decode_u(bytes: &[u8], p: usize) -> UEscape {
    let Some(unit) = hex4(bytes, p + 2) else {
        return UEscape::Invalid;
    };
    if (0xD800..0xDC00).contains(&unit) {
        if bytes.get(p + 6..p + 8) == Some(b"\\u")
            && let Some(low) = hex4(bytes, p + 8)
            && (0xDC00..0xE000).contains(&low)
        {
            let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            return char::from_u32(c).map_or(UEscape::Invalid, |c| UEscape::Char(c, 12));
        }
        return UEscape::Invalid;
    }
    if (0xDC00..0xE000).contains(&unit) {
        let high = p >= 6 && bytes[p - 6..p - 4] == *b"\\u";
        return match hex4(bytes, p - 4).filter(|_| high) {
            Some(h) if (0xD800..0xDC00).contains(&h) => UEscape::PairTail,
            _ => UEscape::Invalid,
        };
    }
    char::from_u32(unit).map_or(UEscape::Invalid, |c| UEscape::Char(c, 6))
}

/// The character a simple (non-`\u`) escape letter stands for.
fn simple_escape(letter: u8) -> Option<char> {
    Some(match letter {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

/// Reusable buffers of one prefilter worker.
#[derive(Default)]
pub(super) struct Scratch {
    buf: Vec<u8>,
    pub(super) lower: Vec<u8>,
    pub(super) folded: Vec<u8>,
    /// Conversation lines read back by offset ([`super::search_cache`]).
    pub(super) lines: Vec<u8>,
}

/// Shortest ASCII run of a non-ASCII needle worth an anchor search.
const MIN_ANCHOR: usize = 3;

/// A search query: the folded needle, its matcher and what the prefilter needs to know.
#[derive(Debug, Clone)]
pub struct Query {
    folded: String,
    finder: memmem::Finder<'static>,
    /// What the prefilter looks for in ASCII-lowercased bytes: the whole needle when it is
    /// ASCII, else its longest ASCII run (when at least [`MIN_ANCHOR`] long).
    anchor: Option<memmem::Finder<'static>>,
    /// The anchor is the whole needle: a hit in a searchable line is enough.
    anchor_is_needle: bool,
    /// The anchor holds `i`: a raw `İ` (→ `i̇`) can supply it.
    anchor_has_i: bool,
    /// The anchor holds `k`: a raw Kelvin sign can supply it.
    anchor_has_k: bool,
    /// `\"`-style escapes whose character occurs in the needle, as raw two-byte patterns.
    simple_escapes: Vec<[u8; 2]>,
}

impl Query {
    /// A query for `text` (non-empty, at most [`MAX_QUERY_BYTES`]).
    pub fn new(text: &str) -> Result<Query, SearchError> {
        if text.is_empty() {
            return Err(SearchError::EmptyQuery);
        }
        if text.len() > MAX_QUERY_BYTES {
            return Err(SearchError::QueryTooLong);
        }
        let folded = fold(text);
        let finder = memmem::Finder::new(folded.as_bytes()).into_owned();
        let anchor_text = if folded.is_ascii() {
            Some(folded.as_str())
        } else {
            folded
                .split(|c: char| !c.is_ascii())
                .max_by_key(|run| run.len())
                .filter(|run| run.len() >= MIN_ANCHOR)
        };
        let simple_escapes = b"\"\\/bfnrt"
            .iter()
            .filter(|&&l| simple_escape(l).is_some_and(|c| folded.contains(c)))
            .map(|&l| [b'\\', l])
            .collect();
        Ok(Query {
            anchor: anchor_text.map(|a| memmem::Finder::new(a.as_bytes()).into_owned()),
            anchor_is_needle: folded.is_ascii(),
            anchor_has_i: anchor_text.is_some_and(|a| a.contains('i')),
            anchor_has_k: anchor_text.is_some_and(|a| a.contains('k')),
            simple_escapes,
            finder,
            folded,
        })
    }

    /// The folded needle.
    pub fn folded(&self) -> &str {
        &self.folded
    }

    /// Whether `text` contains the query.
    pub fn matches(&self, text: &str) -> bool {
        self.finder.find(fold(text).as_bytes()).is_some()
    }

    /// The excerpt of `text` around its first match: at most [`EXCERPT_CHARS`] characters of
    /// the original text, control characters shown as spaces.
    pub fn excerpt(&self, text: &str) -> Option<String> {
        let mut folded = String::with_capacity(text.len());
        // For each character of `text`: where its fold starts, and where it starts in `text`.
        let mut starts: Vec<(usize, usize)> = Vec::with_capacity(text.len());
        for (byte, c) in text.char_indices() {
            starts.push((folded.len(), byte));
            fold_char_into(c, &mut folded);
        }
        let pos = self.finder.find(folded.as_bytes())?;
        let end = pos + self.folded.len();
        let first = starts.partition_point(|&(f, _)| f <= pos).saturating_sub(1);
        let last = starts.partition_point(|&(f, _)| f < end); // exclusive
        let total = starts.len();
        let matched = last - first;
        let (from, to) = if matched >= EXCERPT_CHARS {
            (first, first + EXCERPT_CHARS)
        } else {
            let room = EXCERPT_CHARS - matched;
            let after = (total - last).min(room - room / 2);
            let before = first.min(room - after);
            let after = (total - last).min(room - before);
            (first - before, last + after)
        };
        let byte = |i: usize| starts.get(i).map_or(text.len(), |&(_, b)| b);
        Some(one_line(&text[byte(from)..byte(to)]))
    }

    /// Whether the fold of `c` shares a character with the needle.
    fn shares_char(&self, c: char) -> bool {
        let mut s = String::new();
        fold_char_into(c, &mut s);
        s.chars().any(|x| self.folded.contains(x))
    }

    /// The prefilter: `false` only when the session file read from `reader` cannot contain a
    /// match (see the module doc for why that is sound). Reads the file once, parses nothing.
    pub fn may_match<R: Read>(&self, reader: R) -> io::Result<bool> {
        self.may_match_with(reader, &mut Scratch::default())
    }

    pub(super) fn may_match_with<R: Read>(
        &self,
        mut reader: R,
        s: &mut Scratch,
    ) -> io::Result<bool> {
        // Room for the longest record, its "\n" and one more read.
        const CAP: usize = MAX_RECORD_BYTES + 1 + PREFILTER_CHUNK;
        if s.buf.len() < CAP {
            s.buf = vec![0; CAP];
        }
        let mut filled = 0;
        loop {
            if filled > MAX_RECORD_BYTES + 1 {
                // A line longer than any record: the file is not authoritative; let the scan
                // say why.
                return Ok(true);
            }
            let room = (filled + PREFILTER_CHUNK).min(CAP);
            let n = loop {
                match reader.read(&mut s.buf[filled..room]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            if n == 0 {
                // What is left has no "\n": an uncommitted tail, never search text.
                return Ok(false);
            }
            let old = filled;
            filled += n;
            if let Some(off) = memchr::memrchr(b'\n', &s.buf[old..filled]) {
                let end = old + off + 1;
                if self.region_may_match(&s.buf[..end], &mut s.lower, &mut s.folded) {
                    return Ok(true);
                }
                s.buf.copy_within(end..filled, 0);
                filled -= end;
            }
        }
    }

    /// Whether a region of whole lines (ending in "\n") may hold a match.
    pub(super) fn region_may_match(
        &self,
        region: &[u8],
        lower: &mut Vec<u8>,
        folded: &mut Vec<u8>,
    ) -> bool {
        let anchor_may_miss = (self.anchor_has_i && memmem::find(region, I_DOT).is_some())
            || (self.anchor_has_k && memmem::find(region, KELVIN).is_some());
        let anchor = self.anchor.as_ref().filter(|_| !anchor_may_miss);
        let Some(anchor) = anchor else {
            // Exact path: fold every searchable line.
            return region
                .split(|&b| b == b'\n')
                .any(|line| line_is_searchable(line) && self.line_may_match_exact(line, folded));
        };
        if lower.len() < region.len() {
            lower.resize(region.len(), 0);
        }
        let lower = &mut lower[..region.len()];
        for (d, s) in lower.iter_mut().zip(region) {
            *d = s.to_ascii_lowercase();
        }
        let mut from = 0;
        while from < lower.len() {
            let Some(p) = anchor.find(&lower[from..]) else {
                break;
            };
            let (start, end) = line_bounds(region, from + p);
            let line = &region[start..end];
            if line_is_searchable(line)
                && (self.anchor_is_needle || self.line_may_match_exact(line, folded))
            {
                return true;
            }
            from = end + 1;
        }
        self.region_has_risky_escape(region)
    }

    /// ASCII path, step 3: a risky escape in a searchable line.
    fn region_has_risky_escape(&self, region: &[u8]) -> bool {
        let searchable_at = |p: usize| {
            let (start, end) = line_bounds(region, p);
            line_is_searchable(&region[start..end])
        };
        for p in memmem::find_iter(region, b"\\u") {
            if backslash_is_escaped(region, p) {
                continue;
            }
            let risky = match decode_u(region, p) {
                UEscape::Char(c, _) => self.shares_char(c),
                UEscape::PairTail => false, // decoded with its high half
                UEscape::Invalid => true,
            };
            if risky && searchable_at(p) {
                return true;
            }
        }
        for pattern in &self.simple_escapes {
            for p in memmem::find_iter(region, pattern) {
                // In a run of backslashes, `\\` always contains an escaped backslash; any
                // other escape counts only when its backslash is not itself escaped.
                if (pattern[1] == b'\\' || !backslash_is_escaped(region, p)) && searchable_at(p) {
                    return true;
                }
            }
        }
        false
    }

    /// Exact path for one searchable line: fold it whole, then decode its escapes in order.
    fn line_may_match_exact(&self, line: &[u8], folded: &mut Vec<u8>) -> bool {
        let Ok(text) = std::str::from_utf8(line) else {
            return true; // Not UTF-8: not authoritative; let the scan say why.
        };
        fold_bytes_into(text, folded);
        if self.finder.find(folded).is_some() {
            return true;
        }
        let mut i = 0;
        while let Some(off) = memchr::memchr(b'\\', &line[i..]) {
            let p = i + off;
            match line.get(p + 1) {
                Some(b'u') => match decode_u(line, p) {
                    UEscape::Char(c, len) => {
                        if self.shares_char(c) {
                            return true;
                        }
                        i = p + len;
                    }
                    _ => return true,
                },
                Some(&letter) => match simple_escape(letter) {
                    Some(c) if !self.folded.contains(c) => i = p + 2,
                    _ => return true,
                },
                None => return true,
            }
        }
        false
    }
}

/// `fold(text)` as bytes, replacing `out`: ASCII runs are lowercased byte-wise, other
/// characters go through [`fold_char_into`].
fn fold_bytes_into(text: &str, out: &mut Vec<u8>) {
    out.clear();
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut one = String::new();
    while i < bytes.len() {
        let run_end = bytes[i..]
            .iter()
            .position(|&b| !b.is_ascii())
            .map_or(bytes.len(), |p| i + p);
        out.extend(bytes[i..run_end].iter().map(u8::to_ascii_lowercase));
        let Some(c) = text[run_end..].chars().next() else {
            break;
        };
        one.clear();
        fold_char_into(c, &mut one);
        out.extend_from_slice(one.as_bytes());
        i = run_end + c.len_utf8();
    }
}

// ---------------------------------------------------------------------------------------------
// Pages and cursors
// ---------------------------------------------------------------------------------------------

/// An opaque position in the listing order: the key of the last row a page returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    created_ns: Option<i128>,
    location: PathBuf,
}

const CURSOR_TAG: &[u8] = b"c1";

impl Cursor {
    fn of(s: &DiscoveredSession) -> Cursor {
        Cursor {
            created_ns: s.created_ns(),
            location: s.location.clone(),
        }
    }

    /// The cursor as an opaque, URL-safe string.
    pub fn encode(&self) -> String {
        let mut raw = CURSOR_TAG.to_vec();
        raw.push(0);
        if let Some(ns) = self.created_ns {
            raw.extend_from_slice(ns.to_string().as_bytes());
        }
        raw.push(0);
        raw.extend_from_slice(self.location.as_os_str().as_bytes());
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Parses a string [`Cursor::encode`] produced.
    pub fn decode(s: &str) -> Result<Cursor, SearchError> {
        let raw = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| SearchError::InvalidCursor)?;
        let mut parts = raw.splitn(3, |&b| b == 0);
        let (Some(CURSOR_TAG), Some(created), Some(location)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(SearchError::InvalidCursor);
        };
        let created_ns = if created.is_empty() {
            None
        } else {
            Some(
                std::str::from_utf8(created)
                    .ok()
                    .and_then(|c| c.parse().ok())
                    .ok_or(SearchError::InvalidCursor)?,
            )
        };
        if location.first() != Some(&b'/') {
            return Err(SearchError::InvalidCursor);
        }
        Ok(Cursor {
            created_ns,
            location: PathBuf::from(std::ffi::OsString::from_vec(location.to_vec())),
        })
    }
}

/// A bounded request: at most `limit` rows (clamped to 1..=[`MAX_LIMIT`]) after `cursor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: usize,
    pub cursor: Option<Cursor>,
}

impl Default for PageRequest {
    fn default() -> PageRequest {
        PageRequest {
            limit: DEFAULT_LIMIT,
            cursor: None,
        }
    }
}

impl PageRequest {
    fn effective_limit(&self) -> usize {
        self.limit.clamp(1, MAX_LIMIT)
    }

    /// Index of the first session after the cursor.
    fn start(&self, sessions: &[DiscoveredSession]) -> usize {
        match &self.cursor {
            None => 0,
            Some(c) => sessions.partition_point(|s| {
                order((s.created_ns(), &s.location), (c.created_ns, &c.location)).is_le()
            }),
        }
    }
}

/// One listed session or search hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    /// Canonical session folder.
    pub location: PathBuf,
    pub session_id: Option<String>,
    /// The default leaf at the time of the request; `None` for a header-only or unreadable
    /// session.
    pub leaf_id: Option<String>,
    /// The header timestamp as written.
    pub created: Option<String>,
    /// Session name, else the first surviving user text, else [`UNTITLED`].
    pub label: String,
    /// Search hits: the text around the first match.
    pub excerpt: Option<String>,
    pub duplicate_of: Option<PathBuf>,
    pub archived: bool,
    /// Surviving conversation entries on the default path.
    pub message_count: Option<usize>,
    /// Sum of the latest `durationMs` of each recording's outcome, when there is one.
    pub duration_ms: Option<u64>,
    /// The first diagnostic of the file, or why it could not be read.
    pub diagnostic: Option<&'static str>,
    /// Conflict copies from a sync engine waiting to be merged ([`super::merge`]).
    pub copies: usize,
    /// A sync engine is still bringing files of the session (its `session.jsonl`, a WAV):
    /// not damage, and not read until it has arrived.
    pub syncing: bool,
    /// The name of the device the session was recorded on (its `persyk.device` entry).
    pub recorded_on: Option<String>,
    /// The name of the file it was transcribed from (its `persyk.source-file` entry; issue
    /// #38), never a folder.
    pub from_file: Option<String>,
    /// Pass as [`PageRequest::cursor`] to continue after this row.
    pub cursor: Cursor,
}

/// A session a search could not look into, and why (a stable code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub location: PathBuf,
    pub code: &'static str,
}

/// One page of rows.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub rows: Vec<SessionRow>,
    /// Set when the page is full and sessions remain after it; a following page may still be
    /// empty for a search.
    pub next: Option<Cursor>,
    /// Sessions in this page's range that a search could not read (listing reports these
    /// as row diagnostics instead).
    pub skipped: Vec<Skipped>,
}

// ---------------------------------------------------------------------------------------------
// Listing
// ---------------------------------------------------------------------------------------------

/// One page of the listing, newest first. Reads each listed file in full (in parallel);
/// sessions outside the page cost nothing beyond discovery.
pub fn list(discovery: &Discovery, page: &PageRequest) -> Page {
    list_with(discovery, page, list_row)
}

/// The page driver of [`list`]: `row` describes each session.
pub(super) fn list_with<F>(discovery: &Discovery, page: &PageRequest, row: F) -> Page
where
    F: Fn(&DiscoveredSession) -> SessionRow + Sync + Send,
{
    let sessions = &discovery.sessions;
    let start = page.start(sessions);
    let end = (start + page.effective_limit()).min(sessions.len());
    let rows: Vec<SessionRow> = sessions[start..end].par_iter().map(row).collect();
    Page {
        next: (end < sessions.len())
            .then(|| rows.last().map(|r| r.cursor.clone()))
            .flatten(),
        rows,
        skipped: Vec::new(),
    }
}

pub(super) fn base_row(s: &DiscoveredSession) -> SessionRow {
    SessionRow {
        location: s.location.clone(),
        session_id: s.header.as_ref().map(|h| h.id.clone()),
        leaf_id: None,
        created: s.header.as_ref().map(|h| h.created.clone()),
        label: UNTITLED.to_owned(),
        excerpt: None,
        duplicate_of: s.duplicate_of.clone(),
        archived: false,
        message_count: None,
        duration_ms: None,
        diagnostic: s.problem.as_ref().map(|p| p.code()),
        copies: s.sync.copies.len(),
        syncing: s.sync.arriving
            || s.sync.placeholder
            || super::conflict::has_arriving(&s.location.join(super::ASSETS_DIR)),
        recorded_on: None,
        from_file: None,
        cursor: Cursor::of(s),
    }
}

fn list_row(s: &DiscoveredSession) -> SessionRow {
    let mut row = base_row(s);
    if s.problem.is_some() || s.sync.placeholder {
        return row;
    }
    let opened = open_scanned(&s.file()).map_err(SearchError::from);
    let result = opened.and_then(|(mut file, index)| {
        row.diagnostic = index.diagnostics().first().map(|d| d.code.as_str());
        match project(&index, &LeafSelector::Default) {
            Ok(p) => describe(&mut row, &mut file, &index, &p, None).map(|_| ()),
            Err(_) => Ok(()),
        }
    });
    if let Err(e) = result {
        row.diagnostic = Some(e.code());
    }
    row
}

fn open_scanned(path: &Path) -> io::Result<(File, SessionIndex)> {
    let mut file = File::open(path)?;
    let index = scan_reader(&mut file)?;
    Ok((file, index))
}

fn text_blocks(blocks: &[Block]) -> Vec<&str> {
    blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The searchable texts of a conversation entry, and whether it is a user message.
pub(super) fn texts_of(entry: &Entry) -> (bool, Vec<&str>) {
    match &entry.body {
        EntryBody::Message(m) => (m.role == Role::User, text_blocks(&m.content)),
        EntryBody::CustomMessage(cm) => match &cm.content {
            CustomContent::Text(t) => (false, vec![t.as_str()]),
            CustomContent::Blocks(b) => (false, text_blocks(b)),
        },
        _ => (false, Vec::new()),
    }
}

fn label_excerpt(text: &str) -> String {
    one_line(text.trim()).chars().take(LABEL_CHARS).collect()
}

/// Fills the row of an authoritative session: leaf, label, counts, duration; with a query,
/// also the excerpt of the first match. Returns whether the query matched.
pub(super) fn describe(
    row: &mut SessionRow,
    file: &mut File,
    index: &SessionIndex,
    projection: &Projection,
    query: Option<&Query>,
) -> Result<bool, SearchError> {
    row.leaf_id = projection.leaf.map(|p| index.id(p).into_owned());
    row.archived = index.archived().unwrap_or(false);
    row.message_count = Some(projection.conversation.len());
    let name = index.name().filter(|n| !n.trim().is_empty());
    let mut label = name.map(label_excerpt);
    let mut excerpt = None;
    for chunk in projection.conversation.chunks(READ_CHUNK) {
        let done = |label: &Option<String>, excerpt: &Option<String>| {
            label.is_some() && (query.is_none() || excerpt.is_some())
        };
        if done(&label, &excerpt) {
            break;
        }
        for item in history::read_entries(file, index, chunk)? {
            let (is_user, texts) = texts_of(&item.entry);
            for text in texts {
                if excerpt.is_none()
                    && let Some(q) = query
                {
                    excerpt = q.excerpt(text);
                }
                if label.is_none() && is_user && !text.trim().is_empty() {
                    label = Some(label_excerpt(text));
                }
            }
        }
    }
    if let Some(q) = query
        && excerpt.is_none()
    {
        excerpt = index.name().and_then(|n| q.excerpt(n));
        if excerpt.is_none() {
            let mut labels: Vec<(u32, &str)> = index.labels().collect();
            labels.sort_unstable_by_key(|&(target, _)| target);
            excerpt = labels.into_iter().find_map(|(_, l)| q.excerpt(l));
        }
        if excerpt.is_none() {
            return Ok(false);
        }
    }
    row.label = label.unwrap_or_else(|| UNTITLED.to_owned());
    row.excerpt = excerpt;
    row.duration_ms = duration_ms(file, index)?;
    row.recorded_on = custom_name(file, index, projection, super::DEVICE_TYPE)?;
    row.from_file = custom_name(file, index, projection, super::SOURCE_FILE_TYPE)?;
    Ok(true)
}

/// The `name` of the latest custom entry of `custom_type` on the default path (the device a
/// session was recorded on, the file it was transcribed from), on one line.
fn custom_name(
    file: &mut File,
    index: &SessionIndex,
    projection: &Projection,
    custom_type: &str,
) -> Result<Option<String>, SearchError> {
    let Some(&pos) = projection.custom_state.get(custom_type) else {
        return Ok(None);
    };
    let items = history::read_entries(file, index, &[pos])?;
    Ok(items
        .into_iter()
        .next()
        .and_then(|item| match item.entry.body {
            EntryBody::Custom(c) => c.data["name"]
                .as_str()
                .map(|n| one_line(n.trim()).chars().take(LABEL_CHARS).collect()),
            _ => None,
        }))
}

/// Per recording, the latest outcome that states a duration; their sum.
fn duration_ms(file: &mut File, index: &SessionIndex) -> Result<Option<u64>, SearchError> {
    let positions: Vec<u32> = index
        .entries()
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.kind(),
                EntryKind::RecordingFinished | EntryKind::RecordingInterrupted
            )
        })
        .map(|(i, _)| i as u32)
        .collect();
    let mut per_recording: HashMap<String, u64> = HashMap::new();
    for chunk in positions.chunks(READ_CHUNK * 4) {
        for item in history::read_entries(file, index, chunk)? {
            match item.entry.body {
                EntryBody::RecordingFinished(f) => {
                    per_recording.insert(f.recording_id, f.duration_ms);
                }
                EntryBody::RecordingInterrupted(i) => {
                    if let Some(d) = i.duration_ms {
                        per_recording.insert(i.recording_id, d);
                    }
                }
                _ => {}
            }
        }
    }
    Ok((!per_recording.is_empty()).then(|| {
        per_recording
            .values()
            .fold(0u64, |a, &d| a.saturating_add(d))
    }))
}

// ---------------------------------------------------------------------------------------------
// Search
// ---------------------------------------------------------------------------------------------

pub(super) enum Outcome {
    NoMatch,
    Hit(Box<SessionRow>),
    Skipped(&'static str),
}

/// One page of search hits, newest first. Sessions are taken in listing order in growing
/// parallel batches; the page ends at the `limit`-th hit, so later sessions are not read.
pub fn search(discovery: &Discovery, query: &Query, page: &PageRequest) -> Page {
    search_with(discovery, page, |s, scratch| search_one(s, query, scratch))
}

/// The page driver of [`search`]: `one` decides each session.
pub(super) fn search_with<F>(discovery: &Discovery, page: &PageRequest, one: F) -> Page
where
    F: Fn(&DiscoveredSession, &mut Scratch) -> Outcome + Sync + Send,
{
    let sessions = &discovery.sessions;
    let limit = page.effective_limit();
    let mut i = page.start(sessions);
    let mut batch = (limit + 1).max(FIRST_BATCH_MIN);
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    'batches: while i < sessions.len() {
        let end = (i + batch).min(sessions.len());
        let outcomes: Vec<Outcome> = sessions[i..end]
            .par_iter()
            .map_init(Scratch::default, |scratch, s| one(s, scratch))
            .collect();
        for (k, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Outcome::NoMatch => {}
                Outcome::Hit(row) => {
                    rows.push(*row);
                    if rows.len() == limit {
                        i += k + 1;
                        break 'batches;
                    }
                }
                Outcome::Skipped(code) => skipped.push(Skipped {
                    location: sessions[i + k].location.clone(),
                    code,
                }),
            }
        }
        i = end;
        batch = (batch * 2).min(BATCH_MAX);
    }
    Page {
        next: (rows.len() == limit && i < sessions.len())
            .then(|| rows.last().map(|r| r.cursor.clone()))
            .flatten(),
        rows,
        skipped,
    }
}

/// Why a search skips a session whose file is not on this Mac yet.
pub const NOT_DOWNLOADED: &str = "sync.not-downloaded";

fn search_one(s: &DiscoveredSession, query: &Query, scratch: &mut Scratch) -> Outcome {
    if let Some(p) = &s.problem {
        return Outcome::Skipped(p.code());
    }
    if s.sync.placeholder {
        return Outcome::Skipped(NOT_DOWNLOADED);
    }
    match search_file(s, query, scratch) {
        Ok(o) => o,
        Err(e) => Outcome::Skipped(e.code()),
    }
}

fn search_file(
    s: &DiscoveredSession,
    query: &Query,
    scratch: &mut Scratch,
) -> Result<Outcome, SearchError> {
    let mut file = File::open(s.file())?;
    if !query.may_match_with(&mut file, scratch)? {
        return Ok(Outcome::NoMatch);
    }
    file.seek(SeekFrom::Start(0))?;
    let index = scan_reader(&mut file)?;
    let Ok(projection) = project(&index, &LeafSelector::Default) else {
        let code = index
            .diagnostics()
            .iter()
            .find(|d| d.code.blocks_projection())
            .map_or("file.empty", |d| d.code.as_str());
        return Ok(Outcome::Skipped(code));
    };
    let mut row = base_row(s);
    row.diagnostic = index.diagnostics().first().map(|d| d.code.as_str());
    if describe(&mut row, &mut file, &index, &projection, Some(query))? {
        Ok(Outcome::Hit(Box::new(row)))
    } else {
        Ok(Outcome::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Step 4 of the soundness argument: the only non-ASCII characters whose fold holds an
    /// ASCII character are `İ` and the Kelvin sign, and no fold produces a "\n".
    #[test]
    fn only_two_non_ascii_characters_fold_to_ascii() {
        let mut found = Vec::new();
        for c in (0x80..=0x10FFFFu32).filter_map(char::from_u32) {
            let f = fold(&c.to_string());
            assert!(!f.contains('\n'));
            if f.chars().any(|x| x.is_ascii()) {
                found.push(c);
            }
        }
        assert_eq!(found, vec!['\u{130}', '\u{212A}']);
    }

    #[test]
    fn fold_is_per_character() {
        assert_eq!(fold("ÉCOLE"), "école");
        assert_eq!(fold("ΟΔΟΣ"), fold("οδος"));
        assert_eq!(fold("İ"), "i\u{307}");
        assert_eq!(fold("\u{212A}elvin"), "kelvin");
    }

    #[test]
    fn excerpt_is_bounded_and_centred() {
        let q = Query::new("needle").unwrap();
        let text = format!("{}NEEDLE{}", "é".repeat(500), "ü".repeat(500));
        let ex = q.excerpt(&text).unwrap();
        assert_eq!(ex.chars().count(), EXCERPT_CHARS);
        assert!(ex.contains("NEEDLE"));
        let long = Query::new(&"ab".repeat(200)).unwrap();
        let ex = long.excerpt(&"AB".repeat(300)).unwrap();
        assert_eq!(ex.chars().count(), EXCERPT_CHARS);
        assert_eq!(q.excerpt("a\nneedle\tb").unwrap(), "a needle b");
        assert_eq!(q.excerpt("nothing here"), None);
    }

    #[test]
    fn cursor_round_trips() {
        for created_ns in [None, Some(-5), Some(1_772_000_000_000_000_000)] {
            let c = Cursor {
                created_ns,
                location: PathBuf::from("/tmp/a b/ü"),
            };
            assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        }
        for bad in ["", "!!", "YWJj", &URL_SAFE_NO_PAD.encode(b"c1\0x\0/a")] {
            assert!(Cursor::decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn escapes_are_decoded_by_parity() {
        let q = Query::new("a").unwrap();
        // `\\u0041` is a backslash and the letters u0041, not an `A`.
        let line = br#"{"type":"message","x":"\\u0041"}"#;
        let mut region = line.to_vec();
        region.push(b'\n');
        let q_u = Query::new("zzz").unwrap();
        assert!(!q_u.region_has_risky_escape(&region));
        let real = b"{\"type\":\"message\",\"x\":\"\\u0041\"}\n";
        assert!(q.region_has_risky_escape(real));
        assert!(!q_u.region_has_risky_escape(real));
    }
}
