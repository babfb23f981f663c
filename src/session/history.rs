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

use std::io::{self, Read, Seek, SeekFrom};
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

/// Reads the entries at `positions` (in that order) from `file`.
pub fn read_entries<R: Read + Seek>(
    file: &mut R,
    index: &SessionIndex,
    positions: &[u32],
) -> Result<Vec<HistoryItem>, HistoryError> {
    let mut out = Vec::with_capacity(positions.len());
    let mut buf = Vec::new();
    for &pos in positions {
        let ie = index.entry(pos);
        buf.resize(ie.len as usize, 0);
        file.seek(SeekFrom::Start(ie.offset))?;
        file.read_exact(&mut buf)?;
        let text = std::str::from_utf8(&buf).map_err(|_| HistoryError::Changed)?;
        let entry = Entry::from_line(text).map_err(|_| HistoryError::Changed)?;
        if entry.id != index.id(pos) {
            return Err(HistoryError::Changed);
        }
        let raw = RawValue::from_string(text.to_owned()).map_err(|_| HistoryError::Changed)?;
        out.push(HistoryItem {
            id: Arc::from(index.id(pos)),
            entry,
            raw,
        });
    }
    Ok(out)
}

/// The surviving conversation of a projection, in path order.
pub fn effective_history<R: Read + Seek>(
    file: &mut R,
    index: &SessionIndex,
    projection: &Projection,
) -> Result<Vec<HistoryItem>, HistoryError> {
    read_entries(file, index, &projection.conversation)
}
