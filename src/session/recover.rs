//! Explicit recovery (`persyk recover`): the only code that touches a damaged tail or a WAV
//! header. Nothing here runs on open or read.
//!
//! Tail rules:
//! - A final record that is complete, valid JSON and a valid entry but lacks its "\n" gets the
//!   newline (written and fsynced).
//! - A genuinely incomplete fragment (JSON cut short: the parser ran out of input, within the
//!   size and depth limits) is first copied to `session.jsonl.fragment-<timestamp>` (created
//!   exclusively, fsynced, directory fsynced) and only then truncated away.
//! - Anything else — a definite syntax error, a limit violation, a complete record that is
//!   invalid, or damage before the tail — is refused with a named code and nothing changes.
//!
//! Recording rules: a `recording.started` with no `recording.finished`/`recording.interrupted`
//! whose asset lock is free gets its WAV's RIFF and data sizes fixed in place, keeping every
//! complete sample (a trailing partial sample is dropped), and then a `recording.interrupted`
//! entry with the recovered `durationMs`. The asset lock is taken before the session lock and
//! held until the entry is committed. Messages are never reconstructed from events.
//!
//! Recovery writes only inside the session: a symlinked `assets/` (or a swapped WAV) is
//! refused with `store.escapes-root` before any recording is touched, and a WAV is repaired
//! only if its `fmt ` chunk is exactly what Persyk writes (PCM, mono, 24 kHz, 16-bit); any
//! other header is left as it is and the recording is reported without usable audio.

use std::collections::HashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;

use serde::de::IgnoredAny;

use super::assets::{assets_dir_of, open_existing_asset};
use super::conflict::scan_folder;
use super::diag::{Code, Diagnostic};
use super::format::{Entry, EntryBody, Outcome, RecordingInterrupted};
use super::fsio::Storage;
use super::index::{EntryKind, SessionIndex};
use super::merge::{MergeError, MergeReport, merge_copy};
use super::record::{self, MAX_RECORD_BYTES};
use super::store::{
    SessionHandle, Store, StoreError, fragment_stamp, new_id, now_iso, write_new_file,
};
use super::validate::Scanner;
use super::{ASSETS_DIR, SESSION_FILE};

/// Why recovery refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecoverError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "recover.interior-damage: records before the tail violate the contract; nothing was changed"
    )]
    InteriorDamage { diagnostics: Vec<Diagnostic> },
    #[error(
        "recover.tail-too-large: the trailing fragment exceeds the 1 MiB record limit; nothing was changed"
    )]
    TailTooLarge,
    #[error(
        "recover.tail-malformed: the trailing fragment is not a cut-short record ({code}); nothing was changed"
    )]
    TailMalformed { code: Code },
    #[error(
        "recover.tail-invalid-record: the final record is complete but invalid; nothing was changed"
    )]
    TailInvalidRecord { diagnostics: Vec<Diagnostic> },
}

impl RecoverError {
    pub fn code(&self) -> &'static str {
        match self {
            RecoverError::Store(e) => e.code(),
            RecoverError::InteriorDamage { .. } => "recover.interior-damage",
            RecoverError::TailTooLarge => "recover.tail-too-large",
            RecoverError::TailMalformed { .. } => "recover.tail-malformed",
            RecoverError::TailInvalidRecord { .. } => "recover.tail-invalid-record",
        }
    }
}

/// What happened to the tail of `session.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailOutcome {
    /// The file ended in "\n"; nothing to do.
    Clean,
    /// A complete final record got its missing "\n".
    AddedNewline,
    /// An incomplete fragment was preserved in `file_name` and truncated away.
    PreservedFragment { file_name: String, bytes: u64 },
}

/// What happened to one unfinished recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordingOutcome {
    /// WAV sizes fixed (if needed) and `recording.interrupted` appended.
    Recovered {
        recording_id: String,
        duration_ms: u64,
        data_bytes: u64,
        dropped_bytes: u64,
        header_rewritten: bool,
    },
    /// A capture holds the asset: it is live and left alone.
    Live { recording_id: String },
    /// No usable WAV: `recording.interrupted` records that, without a duration.
    NoAudio { recording_id: String },
}

/// What happened to one conflict copy beside the session ([`super::merge`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    /// Merged and removed.
    Merged(MergeReport),
    /// Left as it is, with the code that says why.
    Refused { copy: String, code: &'static str },
}

/// Everything recovery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    pub tail: TailOutcome,
    /// Conflict copies from a sync engine, merged in name order.
    pub merges: Vec<MergeOutcome>,
    pub recordings: Vec<RecordingOutcome>,
}

impl Store {
    /// Explicit recovery of the session folder `name` under root `root`: the torn tail, then
    /// every conflict copy beside the file (merged, [`super::merge`]), then unfinished
    /// recordings.
    pub fn recover(&self, root: usize, name: &str) -> Result<RecoveryReport, RecoverError> {
        let handle = self.open_session(root, name)?;
        let tail = handle
            .locked(|file, scanner, storage| recover_tail(&handle, file, scanner, storage))?;
        let merges = merge_copies(&handle)?;
        let recordings = recover_recordings(&handle)?;
        Ok(RecoveryReport {
            tail,
            merges,
            recordings,
        })
    }
}

/// Merges every conflict copy of the session's file, one at a time in name order. A copy
/// that cannot be merged is reported and left where it is; the others still merge.
pub fn merge_copies(handle: &SessionHandle) -> Result<Vec<MergeOutcome>, RecoverError> {
    let copies = scan_folder(handle.dir())
        .map_err(StoreError::io("list session folder"))?
        .copies;
    let mut out = Vec::with_capacity(copies.len());
    for (copy, _) in copies {
        out.push(match merge_copy(handle, &copy) {
            Ok(report) => MergeOutcome::Merged(report),
            // The session itself cannot take appends: nothing else can happen now.
            Err(MergeError::Store(e)) => return Err(e.into()),
            Err(e) => MergeOutcome::Refused {
                copy,
                code: e.code(),
            },
        });
    }
    Ok(out)
}

fn recover_tail(
    handle: &SessionHandle,
    file: &mut File,
    scanner: &mut Scanner,
    storage: &dyn Storage,
) -> Result<TailOutcome, RecoverError> {
    let index = scanner.index();
    let interior: Vec<Diagnostic> = index
        .diagnostics()
        .iter()
        .filter(|d| !matches!(d.code, Code::FileIncompleteTail | Code::FileEmpty))
        .cloned()
        .collect();
    if !interior.is_empty() {
        return Err(RecoverError::InteriorDamage {
            diagnostics: interior,
        });
    }
    let Some(tail) = index.tail() else {
        return Ok(TailOutcome::Clean);
    };
    if tail.len > MAX_RECORD_BYTES as u64 {
        return Err(RecoverError::TailTooLarge);
    }
    let mut bytes = vec![0u8; tail.len as usize];
    file.read_exact_at(&mut bytes, tail.offset)
        .map_err(StoreError::io("read tail"))?;
    match record::parse_record(&bytes) {
        Ok(_) => {
            let analysis = scanner.analyze_line(&bytes);
            if !analysis.is_valid() {
                return Err(RecoverError::TailInvalidRecord {
                    diagnostics: analysis.diagnostics,
                });
            }
            storage
                .append(file, b"\n")
                .and_then(|()| storage.sync_data(file))
                .map_err(StoreError::io("complete final record"))?;
            Ok(TailOutcome::AddedNewline)
        }
        Err(code) => {
            // Invalid UTF-8 is only a cut if it is a multi-byte character cut at the very end.
            let utf8_ok = std::str::from_utf8(&bytes)
                .err()
                .is_none_or(|e| e.error_len().is_none());
            let cut_short = utf8_ok
                && matches!(
                    code,
                    Code::RecordSyntax | Code::RecordLoneSurrogate | Code::RecordInvalidUtf8
                )
                && serde_json::from_slice::<IgnoredAny>(&bytes)
                    .is_err_and(|e| e.classify() == serde_json::error::Category::Eof);
            if !cut_short {
                return Err(RecoverError::TailMalformed { code });
            }
            let dir = handle.dir();
            let stamp = fragment_stamp();
            let mut file_name = format!("{SESSION_FILE}.fragment-{stamp}");
            let mut n = 1;
            while dir.join(&file_name).exists() {
                n += 1;
                file_name = format!("{SESSION_FILE}.fragment-{stamp}-{n}");
            }
            write_new_file(storage, dir, &file_name, &bytes)?;
            storage
                .set_len(file, tail.offset)
                .and_then(|()| storage.sync_data(file))
                .map_err(StoreError::io("truncate fragment"))?;
            Ok(TailOutcome::PreservedFragment {
                file_name,
                bytes: tail.len,
            })
        }
    }
}

/// How a recording ended, as its latest lifecycle entry says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordingEnd {
    Complete,
    Incomplete,
    Interrupted,
}

/// One recording of a session, from its lifecycle entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingState {
    pub recording_id: String,
    /// The capture WAV's name inside `assets/`.
    pub asset: String,
    /// `None`: started and never finished or interrupted.
    pub end: Option<RecordingEnd>,
}

/// Positions of every `recording.*` lifecycle entry, in file order.
pub fn recording_positions(index: &SessionIndex) -> Vec<u32> {
    (0..index.len() as u32)
        .filter(|&p| {
            matches!(
                index.entry(p).kind(),
                EntryKind::RecordingStarted
                    | EntryKind::RecordingFinished
                    | EntryKind::RecordingInterrupted
            )
        })
        .collect()
}

/// Folds lifecycle entries (in file order) into one state per recording, in the order the
/// recordings started; the latest finished/interrupted entry of a recording decides its end.
pub fn recording_states<'a>(
    bodies: impl IntoIterator<Item = &'a EntryBody>,
) -> Vec<RecordingState> {
    let mut states: Vec<RecordingState> = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut ends: Vec<(&str, RecordingEnd)> = Vec::new();
    for body in bodies {
        match body {
            EntryBody::RecordingStarted(s) => {
                if let MapEntry::Vacant(slot) = by_id.entry(&s.recording_id) {
                    slot.insert(states.len());
                    let name = s
                        .asset
                        .strip_prefix(&format!("{ASSETS_DIR}/"))
                        .unwrap_or(&s.asset);
                    states.push(RecordingState {
                        recording_id: s.recording_id.clone(),
                        asset: name.to_owned(),
                        end: None,
                    });
                }
            }
            EntryBody::RecordingFinished(f) => ends.push((
                &f.recording_id,
                match f.outcome {
                    Outcome::Complete => RecordingEnd::Complete,
                    Outcome::Incomplete => RecordingEnd::Incomplete,
                },
            )),
            EntryBody::RecordingInterrupted(i) => {
                ends.push((&i.recording_id, RecordingEnd::Interrupted));
            }
            _ => {}
        }
    }
    for (id, end) in ends {
        if let Some(&at) = by_id.get(id) {
            states[at].end = Some(end);
        }
    }
    states
}

/// `(recordingId, asset name)` of every recording that has started but not finished or been
/// interrupted, in file order.
pub fn unfinished_recordings(handle: &SessionHandle) -> Result<Vec<(String, String)>, StoreError> {
    let positions = handle.with_index(recording_positions);
    let mut bodies = Vec::with_capacity(positions.len());
    for chunk in positions.chunks(256) {
        bodies.extend(
            handle
                .read_positions(chunk)?
                .into_iter()
                .map(|e| e.entry.body),
        );
    }
    Ok(recording_states(&bodies)
        .into_iter()
        .filter(|r| r.end.is_none())
        .map(|r| (r.recording_id, r.asset))
        .collect())
}

fn recover_recordings(handle: &SessionHandle) -> Result<Vec<RecordingOutcome>, RecoverError> {
    let mut out = Vec::new();
    let unfinished = unfinished_recordings(handle)?;
    if !unfinished.is_empty() {
        // Refuse before touching any recording: a symlinked `assets/` leads outside.
        assets_dir_of(handle.dir())?;
    }
    for (recording_id, asset) in unfinished {
        // Asset lock first, then (inside append) the session lock. An asset name outside
        // the grammar cannot be a Persyk capture: there is no audio to touch.
        let wav = match open_existing_asset(handle.dir(), &asset, true) {
            Ok(f) => f,
            Err(StoreError::InvalidName) => None,
            Err(e) => return Err(e.into()),
        };
        if let Some(f) = &wav {
            match f.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => {
                    out.push(RecordingOutcome::Live { recording_id });
                    continue;
                }
                Err(fs::TryLockError::Error(e)) => {
                    return Err(StoreError::io("lock recording")(e).into());
                }
            }
        }
        let fixed = match &wav {
            Some(f) => fix_wav(f, handle.storage().as_ref()).map_err(StoreError::io("fix wav"))?,
            None => None,
        };
        let (reason, duration_ms) = match &fixed {
            Some(fix) => ("capture ended without finishing", Some(fix.duration_ms)),
            None => ("capture ended without usable audio", None),
        };
        let leaf =
            handle.with_index(|i| i.len().checked_sub(1).map(|p| i.id(p as u32).into_owned()));
        let entry = Entry {
            id: new_id(),
            parent_id: leaf,
            timestamp: now_iso(),
            body: EntryBody::RecordingInterrupted(RecordingInterrupted {
                recording_id: recording_id.clone(),
                reason: reason.to_owned(),
                duration_ms,
            }),
        };
        handle.append_entries(&[entry]).into_result()?;
        if let Some(f) = &wav {
            let _ = f.unlock();
        }
        out.push(match fixed {
            Some(fix) => RecordingOutcome::Recovered {
                recording_id,
                duration_ms: fix.duration_ms,
                data_bytes: fix.data_bytes,
                dropped_bytes: fix.dropped_bytes,
                header_rewritten: fix.header_rewritten,
            },
            None => RecordingOutcome::NoAudio { recording_id },
        });
    }
    Ok(out)
}

/// The result of fixing a WAV file's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WavFix {
    pub data_bytes: u64,
    pub dropped_bytes: u64,
    pub duration_ms: u64,
    pub header_rewritten: bool,
}

/// The only `fmt ` chunk recovery repairs: what Persyk's capture writes (PCM, mono, 24 kHz,
/// 16-bit; so 48,000 bytes per second and 2-byte frames).
const PERSYK_WAV_FMT: [u8; 16] = [
    1, 0, // format tag: PCM
    1, 0, // channels: 1
    0xC0, 0x5D, 0, 0, // sample rate: 24,000 Hz
    0x80, 0xBB, 0, 0, // byte rate: 48,000
    2, 0, // block align: 2 bytes
    16, 0, // bits per sample: 16
];
const PERSYK_WAV_BLOCK_ALIGN: u64 = 2;
const PERSYK_WAV_BYTE_RATE: u64 = 48_000;

/// Fixes the RIFF and `data` chunk sizes of a WAV whose writer stopped mid-stream. Keeps every
/// complete sample frame, drops a trailing partial one. `None` when the file has no complete
/// `fmt ` chunk or `data` chunk header (there is no audio to keep), or when its format is not
/// exactly the one Persyk writes (frame size and rate are never taken from the file); the
/// file is then untouched.
pub fn fix_wav(file: &File, storage: &dyn Storage) -> io::Result<Option<WavFix>> {
    let len = file.metadata()?.len();
    if len < 12 {
        return Ok(None);
    }
    let mut head = [0u8; 12];
    file.read_exact_at(&mut head, 0)?;
    if &head[0..4] != b"RIFF" || &head[8..12] != b"WAVE" {
        return Ok(None);
    }
    let mut pos = 12u64;
    let mut format_ok = false;
    while pos + 8 <= len {
        let mut ch = [0u8; 8];
        file.read_exact_at(&mut ch, pos)?;
        let size = u64::from(u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]));
        let body = pos + 8;
        if &ch[0..4] == b"fmt " {
            if body + 16 > len {
                return Ok(None);
            }
            let mut fmt = [0u8; 16];
            file.read_exact_at(&mut fmt, body)?;
            format_ok = size == 16 && fmt == PERSYK_WAV_FMT;
        } else if &ch[0..4] == b"data" {
            if !format_ok {
                return Ok(None);
            }
            let (block_align, byte_rate) = (PERSYK_WAV_BLOCK_ALIGN, PERSYK_WAV_BYTE_RATE);
            let available = len - body;
            let keep = available - available % block_align;
            let dropped = available - keep;
            let data_size =
                u32::try_from(keep).unwrap_or(u32::MAX - (u32::MAX % block_align as u32));
            let keep = u64::from(data_size);
            let riff_size = (body + keep - 8) as u32;
            let header_rewritten = size != keep
                || u64::from(u32::from_le_bytes([head[4], head[5], head[6], head[7]]))
                    != u64::from(riff_size);
            if dropped > 0 || body + keep < len {
                storage.set_len(file, body + keep)?;
            }
            if header_rewritten {
                file.write_all_at(&riff_size.to_le_bytes(), 4)?;
                file.write_all_at(&data_size.to_le_bytes(), pos + 4)?;
            }
            storage.sync_data(file)?;
            return Ok(Some(WavFix {
                data_bytes: keep,
                dropped_bytes: len - (body + keep),
                duration_ms: keep * 1000 / byte_rate,
                header_rewritten,
            }));
        }
        pos = body + size + (size & 1);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::format::{RecordingFinished, RecordingStarted};

    fn started(id: &str) -> EntryBody {
        EntryBody::RecordingStarted(RecordingStarted {
            recording_id: id.into(),
            asset: format!("assets/{id}.wav"),
        })
    }

    fn finished(id: &str, outcome: Outcome) -> EntryBody {
        EntryBody::RecordingFinished(RecordingFinished {
            recording_id: id.into(),
            duration_ms: 1,
            outcome,
            gaps: None,
        })
    }

    #[test]
    fn recording_states_fold_lifecycle_entries() {
        let bodies = [
            started("a"),
            started("b"),
            started("c"),
            started("d"),
            finished("a", Outcome::Complete),
            finished("b", Outcome::Incomplete),
            EntryBody::RecordingInterrupted(RecordingInterrupted {
                recording_id: "c".into(),
                reason: "crash".into(),
                duration_ms: None,
            }),
            // A later entry for the same recording decides; a repeated start changes nothing.
            finished("b", Outcome::Complete),
            started("a"),
        ];
        let states = recording_states(&bodies);
        let summary: Vec<(&str, &str, Option<RecordingEnd>)> = states
            .iter()
            .map(|r| (r.recording_id.as_str(), r.asset.as_str(), r.end))
            .collect();
        assert_eq!(
            summary,
            [
                ("a", "a.wav", Some(RecordingEnd::Complete)),
                ("b", "b.wav", Some(RecordingEnd::Complete)),
                ("c", "c.wav", Some(RecordingEnd::Interrupted)),
                ("d", "d.wav", None),
            ]
        );
    }
}
