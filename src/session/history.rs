//! Effective history: the entries a [`Projection`] names, read back from the file by offset.
//!
//! Invariants:
//! - Reads only committed bytes at the offsets the index recorded; never writes.
//! - If the bytes at an offset no longer parse as the entry the index expects (the file was
//!   replaced or rewritten behind our back), the read fails with a named error instead of
//!   returning something else.
//! - A line read back is re-checked against the record limits before anything parses it
//!   (`Entry::from_line` runs `record::prescan`): a line replaced after the scan by one
//!   nested too deep is `history.changed`, never a deep recursion.
//! - Reads stream: [`EntryReader`] yields one entry at a time through one buffered reader
//!   (a forward jump within the buffer costs no system call), and [`read_page`] reads at most
//!   [`MAX_PAGE`] entries. Memory follows the largest entry, never the history; only
//!   [`read_entries`] (for callers that already hold a bounded list of positions) collects.
//! - [`RawEntries`] checks each line's envelope ([`check_raw_line`]) unless its caller
//!   switched that off with [`RawEntries::trust`], which is only for a caller that proves the
//!   file unchanged since the scan another way and checks the lines itself otherwise
//!   (`persyk context --json`).

use std::borrow::Cow;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::sync::Arc;

use serde_json::value::RawValue;

use super::format::Entry;
use super::index::SessionIndex;
use super::project::Projection;

/// Why an entry could not be read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    #[error("history.io: reading the session file failed")]
    Io(#[from] io::Error),
    /// The bytes at an indexed offset are not the indexed entry any more.
    #[error("history.changed: the session file changed since it was scanned")]
    Changed,
}

impl HistoryError {
    pub fn code(&self) -> &'static str {
        match self {
            HistoryError::Io(_) => "history.io",
            HistoryError::Changed => "history.changed",
        }
    }
}

/// One entry read back: its id, the typed entry and the exact JSON text of its line.
#[derive(Debug, Clone)]
pub struct HistoryItem {
    pub id: Arc<str>,
    pub entry: Entry,
    pub raw: Box<RawValue>,
}

/// The most entries one [`read_page`] returns.
pub const MAX_PAGE: usize = 256;

/// Buffer of an [`EntryReader`]: conversation entries mostly follow each other in the file.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Reads the entries at `positions`, in that order, one at a time.
///
/// Each item is checked like [`read_entries`] checks it; after the first error the iterator
/// ends. The underlying reader's position is unspecified afterwards.
pub struct EntryReader<'a, R: Read + Seek> {
    reader: BufReader<R>,
    index: &'a SessionIndex,
    positions: Box<dyn ExactSizeIterator<Item = u32> + 'a>,
    /// The reader's logical position, when known.
    at: Option<u64>,
    buf: Vec<u8>,
    failed: bool,
}

impl<'a, R: Read + Seek> EntryReader<'a, R> {
    pub fn new(file: R, index: &'a SessionIndex, positions: &'a [u32]) -> EntryReader<'a, R> {
        Self::over(file, index, positions.iter().copied())
    }

    /// Like [`Self::new`] for positions given one at a time (a conversation kept as a
    /// [`crate::session::PositionSet`]).
    pub fn over(
        file: R,
        index: &'a SessionIndex,
        positions: impl ExactSizeIterator<Item = u32> + 'a,
    ) -> EntryReader<'a, R> {
        EntryReader {
            reader: BufReader::with_capacity(READ_BUFFER_BYTES, file),
            index,
            positions: Box::new(positions),
            at: None,
            buf: Vec::new(),
            failed: false,
        }
    }

    /// The exact line of each entry, without the typed parse: for callers that only copy
    /// the JSON out (`persyk context --json`). Each line is still re-checked against the
    /// record limits, must be a JSON object and carry the indexed id and type, or the read
    /// is `history.changed`.
    pub fn raw(self) -> RawEntries<'a, R> {
        RawEntries {
            inner: self,
            trusted: false,
        }
    }

    /// Reads the line of `pos` into `self.buf`.
    fn read_line(&mut self, pos: u32) -> Result<(), HistoryError> {
        let ie = self.index.entry(pos);
        let (offset, len) = (ie.offset(), ie.len_bytes());
        match self.at {
            Some(at) if offset >= at && offset - at <= READ_BUFFER_BYTES as u64 => {
                // Within (or just past) the buffer: no system call for the jump.
                self.reader.seek_relative((offset - at) as i64)?;
            }
            _ => {
                self.at = None;
                self.reader.seek(SeekFrom::Start(offset))?;
            }
        }
        self.buf.resize(len as usize, 0);
        self.reader.read_exact(&mut self.buf)?;
        self.at = Some(offset + u64::from(len));
        Ok(())
    }

    fn read_one(&mut self, pos: u32) -> Result<HistoryItem, HistoryError> {
        self.read_line(pos)?;
        let text = simdutf8::basic::from_utf8(&self.buf).map_err(|_| HistoryError::Changed)?;
        let entry = Entry::from_line(text).map_err(|_| HistoryError::Changed)?;
        if !self.index.is_id_of(pos, &entry.id, &self.buf) {
            return Err(HistoryError::Changed);
        }
        let id: Arc<str> = Arc::from(entry.id.as_str());
        let raw = RawValue::from_string(text.to_owned()).map_err(|_| HistoryError::Changed)?;
        Ok(HistoryItem { id, entry, raw })
    }
}

impl<R: Read + Seek> Iterator for EntryReader<'_, R> {
    type Item = Result<HistoryItem, HistoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let pos = self.positions.next()?;
        let item = self.read_one(pos);
        if item.is_err() {
            self.at = None;
            self.failed = true;
        }
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.failed {
            (0, Some(0))
        } else {
            self.positions.size_hint()
        }
    }
}

/// One entry's id and the exact JSON text of its line.
#[derive(Debug, Clone)]
pub struct RawItem {
    pub id: Arc<str>,
    pub raw: Box<RawValue>,
}

/// One entry's id and the exact JSON text of its line, borrowed from the reader until the
/// next read ([`RawEntries::next_line`]).
#[derive(Debug)]
pub struct RawLine<'r> {
    /// The entry's position in the index.
    pub pos: u32,
    pub id: Cow<'r, str>,
    pub json: &'r str,
}

/// What [`EntryReader::raw`] checks of a line read back: its envelope, while the parse
/// checks that the whole line is one JSON object.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    id: Cow<'a, str>,
}

/// See [`EntryReader::raw`].
pub struct RawEntries<'a, R: Read + Seek> {
    inner: EntryReader<'a, R>,
    trusted: bool,
}

/// The check [`EntryReader::raw`] makes of the line read back for `pos`: within the record
/// limits, UTF-8, one JSON object whose `type` and `id` are the indexed ones. Returns the line
/// as text.
pub fn check_raw_line<'l>(
    index: &SessionIndex,
    pos: u32,
    line: &'l [u8],
) -> Result<&'l str, HistoryError> {
    super::record::prescan(line).map_err(|_| HistoryError::Changed)?;
    let text = simdutf8::basic::from_utf8(line).map_err(|_| HistoryError::Changed)?;
    // The depth is bounded by the prescan; the parse may use all of it. It reads the whole
    // line, so what passes is one well-formed JSON object.
    let envelope: Envelope<'_> =
        super::format::from_str_deep(text).map_err(|_| HistoryError::Changed)?;
    if !index.is_id_of(pos, &envelope.id, line) || envelope.kind != index.entry(pos).kind().as_str()
    {
        return Err(HistoryError::Changed);
    }
    Ok(text)
}

impl<R: Read + Seek> RawEntries<'_, R> {
    /// While `trusted`, lines are handed out as read, without [`check_raw_line`]: only for a
    /// caller that proves by other means, before it uses a line, that the file has not
    /// changed since the scan (`persyk context` compares the file's identity, settled since
    /// before the scan, and checks the lines itself when it changed).
    pub fn trust(&mut self, trusted: bool) {
        self.trusted = trusted;
    }

    /// The next line, checked like the iterator checks it (unless trusted) and borrowed from
    /// the reader's buffer: nothing is copied or parsed twice. `None` at the end and after an
    /// error.
    pub fn next_line(&mut self) -> Option<Result<RawLine<'_>, HistoryError>> {
        if self.inner.failed {
            return None;
        }
        let pos = self.inner.positions.next()?;
        let read = self.inner.read_line(pos);
        let r = &mut self.inner;
        let line = read.and_then(|()| {
            if self.trusted {
                // Bytes the scan validated, if the caller's proof holds; it checks them
                // otherwise, so they need only be text here.
                simdutf8::basic::from_utf8(&r.buf).map_err(|_| HistoryError::Changed)
            } else {
                check_raw_line(r.index, pos, &r.buf)
            }
        });
        match line {
            // Checked or trusted, the line holds the entry's id where the scan saw it.
            Ok(json) => match r.index.id_in_line(pos, json.as_bytes()) {
                Some(id) => Some(Ok(RawLine { pos, id, json })),
                None => {
                    r.at = None;
                    r.failed = true;
                    Some(Err(HistoryError::Changed))
                }
            },
            Err(e) => {
                r.at = None;
                r.failed = true;
                Some(Err(e))
            }
        }
    }
}

impl<R: Read + Seek> Iterator for RawEntries<'_, R> {
    type Item = Result<RawItem, HistoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.next_line()?.and_then(|line| {
            let raw =
                RawValue::from_string(line.json.to_owned()).map_err(|_| HistoryError::Changed)?;
            Ok(RawItem {
                id: Arc::from(&*line.id),
                raw,
            })
        });
        Some(item)
    }
}

/// Reads the entries at `positions` (in that order) from `file`, all at once: for a list of
/// positions the caller already bounded. Use [`EntryReader`] or [`read_page`] for a history.
pub fn read_entries<R: Read + Seek>(
    file: &mut R,
    index: &SessionIndex,
    positions: &[u32],
) -> Result<Vec<HistoryItem>, HistoryError> {
    EntryReader::new(file, index, positions).collect()
}

/// The page of `positions` that starts at `start`: at most [`MAX_PAGE`] entries (fewer at
/// the end, none past it).
pub fn read_page<R: Read + Seek>(
    file: &mut R,
    index: &SessionIndex,
    positions: &[u32],
    start: usize,
) -> Result<Vec<HistoryItem>, HistoryError> {
    let start = start.min(positions.len());
    let end = start.saturating_add(MAX_PAGE).min(positions.len());
    read_entries(file, index, &positions[start..end])
}

/// The surviving conversation of a projection, in path order, streamed.
pub fn effective_history<'a, R: Read + Seek>(
    file: R,
    index: &'a SessionIndex,
    projection: &'a Projection,
) -> EntryReader<'a, R> {
    EntryReader::new(file, index, &projection.conversation)
}
