//! `persyk new`, `persyk append`, `persyk recover`, `persyk rm`, `persyk status`.
//!
//! What `recover` and `status` print from a session (ids, reasons, file names) goes through
//! [`super::shown::line`]: controls are shown as escapes.
//!
//! Naming a session on the command line is the user's explicit authorization for it: these
//! commands open it through a store whose only root is the folder that contains it.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};

use std::path::{Path, PathBuf};

use persyk::session::recover::{MergeOutcome, RecordingOutcome, TailOutcome};
use persyk::session::store::{
    AppendReport, MAX_BATCH_BYTES, MAX_BATCH_RECORDS, Roots, new_id, now_iso,
};
use persyk::session::{SessionHandle, Store, StoreError};
use persyk::settings::{self, Settings};
use serde_json::{Map, Value};

use super::shown::line as shown;
use super::{EXIT_CANNOT_RUN, EXIT_LEAF_NOT_FOUND, EXIT_VIOLATION};

fn absolute(p: &Path) -> io::Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir()?.join(p))
    }
}

/// A store whose single root is the folder holding `session`, and the session's folder name.
fn explicit_store(session: &Path) -> Result<(Store, String), String> {
    let dir = if session
        .file_name()
        .is_some_and(|n| n == persyk::session::SESSION_FILE)
    {
        session.parent().unwrap_or(session)
    } else {
        session
    };
    let dir =
        absolute(dir).map_err(|e| format!("cannot resolve {}: {}", dir.display(), e.kind()))?;
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: not a session folder", dir.display()))?
        .to_owned();
    let parent = dir.parent().unwrap_or(Path::new("/")).to_path_buf();
    let roots = Roots::new(parent, Vec::new()).map_err(|e| e.to_string())?;
    let mut store = Store::new(roots);
    persyk::sync::identify(&mut store);
    Ok((store, name))
}

fn exit_for(e: &StoreError) -> u8 {
    match e {
        StoreError::Io { .. }
        | StoreError::NotASession
        | StoreError::InvalidName
        | StoreError::RootMissing
        | StoreError::RecordingElsewhere { .. } => EXIT_CANNOT_RUN,
        StoreError::LeafNotFound => EXIT_LEAF_NOT_FOUND,
        _ => EXIT_VIOLATION,
    }
}

fn report_store_error(e: &StoreError) {
    report_record_error(e, None);
}

fn report_record_error(e: &StoreError, record: Option<usize>) {
    match record {
        Some(n) => eprintln!("persyk: record {n}: {e}"),
        None => eprintln!("persyk: {e}"),
    }
    if let StoreError::RecordingElsewhere { device_name } = e {
        eprintln!(
            "persyk:   {} is recording it; try again when it stops",
            super::shown::line(device_name)
        );
    }
    if let StoreError::InvalidRecord { diagnostics, .. }
    | StoreError::NotAuthoritative { diagnostics } = e
    {
        for d in diagnostics {
            eprintln!("persyk:   {}: {}", d.code, d.message);
        }
    }
}

pub fn new(root: Option<&Path>) -> u8 {
    let roots = match root {
        // A root named on the command line is explicit: a missing one is refused
        // (`store.root-missing`), never created with its parents.
        Some(r) => match absolute(r)
            .map_err(|e| e.to_string())
            .and_then(|r| Roots::explicit(r, Vec::new()).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("persyk: {e}");
                return EXIT_CANNOT_RUN;
            }
        },
        None => {
            let loaded = settings::settings_path()
                .map(|p| Settings::load(&p))
                .unwrap_or_else(|| Ok(Settings::default()))
                .and_then(|s| s.roots(settings::is_dev()));
            match loaded {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("persyk: {e}");
                    return EXIT_CANNOT_RUN;
                }
            }
        }
    };
    let mut store = Store::new(roots);
    persyk::sync::identify(&mut store);
    match store.create_session() {
        Ok(h) => {
            println!("{}", h.dir().display());
            0
        }
        Err(e) => {
            report_store_error(&e);
            exit_for(&e)
        }
    }
}

/// Fills in what a record may leave out: `id` (a new UUIDv7), `timestamp` (now) and
/// `parentId` (the command's continuation leaf). Records that name all three are passed on
/// byte for byte, and so are records that are not within the record limits (the store then
/// refuses them with the validator's code).
///
/// A retry must not conflict with itself: when a record with a stable `id` leaves out
/// `timestamp` or `parentId` and that id is already committed (`committed` finds it) or was
/// completed earlier in this batch (`memo`), the values filled in then are filled in again,
/// so an identical input line is acknowledged as already committed, while a line that
/// differs in anything it does say still conflicts.
fn complete_record(
    line: &str,
    leaf: &Option<String>,
    committed: &dyn Fn(&str) -> Option<Map<String, Value>>,
    memo: &mut HashMap<String, String>,
) -> Result<(String, String), ()> {
    if persyk::session::record::prescan(line.as_bytes()).is_err() {
        let id = serde_json::from_str::<Map<String, Value>>(line)
            .ok()
            .and_then(|o| o.get("id").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        return Ok((id, line.to_owned()));
    }
    let obj = match persyk::session::record::parse_value(line.as_bytes()) {
        Ok(Value::Object(obj)) => obj,
        _ => return Err(()),
    };
    let stable_id = obj
        .get("id")
        .map(|v| v.as_str().unwrap_or_default().to_owned());
    let id = stable_id.clone().unwrap_or_else(new_id);
    if ["id", "timestamp", "parentId"]
        .iter()
        .all(|k| obj.contains_key(*k))
    {
        return Ok((id, line.to_owned()));
    }
    if stable_id.is_some()
        && let Some(done) = memo.get(line)
    {
        return Ok((id, done.clone()));
    }
    let earlier = stable_id.as_deref().and_then(committed);
    let from_earlier = |key: &str| earlier.as_ref().and_then(|e| e.get(key)).cloned();
    // Envelope first, in the order the format documents, then the record's own fields.
    let mut out = Map::new();
    if let Some(t) = obj.get("type") {
        out.insert("type".into(), t.clone());
    }
    out.insert("id".into(), Value::String(id.clone()));
    let parent = obj
        .get("parentId")
        .cloned()
        .or_else(|| from_earlier("parentId"))
        .unwrap_or_else(|| leaf.clone().map_or(Value::Null, Value::String));
    out.insert("parentId".into(), parent);
    let ts = obj
        .get("timestamp")
        .cloned()
        .or_else(|| from_earlier("timestamp"))
        .unwrap_or_else(|| Value::String(now_iso()));
    out.insert("timestamp".into(), ts);
    for (k, v) in obj {
        if !out.contains_key(&k) {
            out.insert(k, v);
        }
    }
    let text = serde_json::to_string(&out).map_err(|_| ())?;
    if stable_id.is_some() {
        memo.insert(line.to_owned(), text.clone());
    }
    Ok((id, text))
}

/// The committed record with `id`, as a JSON object, catching up with other writers first
/// if this handle has not seen it yet.
fn committed_record(handle: &SessionHandle, id: &str) -> Option<Map<String, Value>> {
    let position = |h: &SessionHandle| h.with_index(|i| i.position(id));
    let pos = match position(handle) {
        Some(p) => p,
        None => {
            handle.refresh().ok()?;
            position(handle)?
        }
    };
    let item = handle.read_positions(&[pos]).ok()?.pop()?;
    match persyk::session::record::parse_value(item.raw.get().as_bytes()) {
        Ok(Value::Object(obj)) => Some(obj),
        _ => None,
    }
}

pub fn append(session: &Path, leaf: Option<&str>) -> u8 {
    let (store, name) = match explicit_store(session) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let handle = match store.open_session(0, &name) {
        Ok(h) => h,
        Err(e) => {
            report_store_error(&e);
            return exit_for(&e);
        }
    };
    let mut leaf: Option<String> = match leaf {
        Some("null") => None,
        Some(id) => {
            if handle.with_index(|i| i.position(id).is_none()) {
                eprintln!("persyk: {}", StoreError::LeafNotFound);
                return EXIT_LEAF_NOT_FOUND;
            }
            Some(id.to_owned())
        }
        None => handle.with_index(|i| i.len().checked_sub(1).map(|p| i.id(p as u32).into_owned())),
    };
    // Our own buffer, so we can tell "more input is already here" from "waiting for input".
    let mut input = io::BufReader::with_capacity(1 << 16, io::stdin().lock());
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut batch: Vec<String> = Vec::new();
    let mut batch_bytes = 0usize;
    let mut pending_leaf = leaf.clone();
    let mut line = String::new();
    let mut record_no = 0usize;
    let mut batch_first = 1usize;
    // Completions of stable-id records in the batch being built (see `complete_record`).
    let mut memo: HashMap<String, String> = HashMap::new();
    let committed = |id: &str| committed_record(&handle, id);
    loop {
        line.clear();
        let eof = match input.read_line(&mut line) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => {
                eprintln!("persyk: reading stdin failed: {}", e.kind());
                return EXIT_CANNOT_RUN;
            }
        };
        let text = line.trim_end_matches(['\n', '\r']);
        if !eof && !text.trim().is_empty() {
            record_no += 1;
            if batch.is_empty() {
                batch_first = record_no;
            }
            match complete_record(text, &pending_leaf, &committed, &mut memo) {
                Ok((id, rec)) => {
                    pending_leaf = Some(id);
                    batch_bytes += rec.len() + 1;
                    batch.push(rec);
                }
                Err(()) => {
                    // Commit what came before, then refuse this record.
                    let code = flush(&handle, &mut batch, &mut out, &mut leaf, batch_first);
                    if code != 0 {
                        return code;
                    }
                    eprintln!(
                        "persyk: record {record_no}: store.invalid-record: not a JSON object"
                    );
                    return EXIT_VIOLATION;
                }
            }
        }
        let full = batch.len() >= MAX_BATCH_RECORDS || batch_bytes >= MAX_BATCH_BYTES / 2;
        if !batch.is_empty() && (eof || full || memchr::memchr(b'\n', input.buffer()).is_none()) {
            let code = flush(&handle, &mut batch, &mut out, &mut leaf, batch_first);
            batch_bytes = 0;
            memo.clear();
            pending_leaf = leaf.clone();
            if code != 0 {
                return code;
            }
        }
        if eof {
            return 0;
        }
    }
}

fn flush(
    handle: &SessionHandle,
    batch: &mut Vec<String>,
    out: &mut impl Write,
    leaf: &mut Option<String>,
    first_no: usize,
) -> u8 {
    if batch.is_empty() {
        return 0;
    }
    let AppendReport { acks, error } = handle.append(batch);
    batch.clear();
    for ack in &acks {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({"id": ack.id, "status": ack.status.as_str()})
        );
    }
    let _ = out.flush();
    if let Some(last) = acks.last() {
        *leaf = Some(last.id.clone());
    }
    match error {
        None => 0,
        Some(e) => {
            let record = match &e {
                StoreError::InvalidRecord { index, .. }
                | StoreError::ConflictingRetry { index } => Some(first_no + index),
                _ => None,
            };
            report_record_error(&e, record);
            exit_for(&e)
        }
    }
}

pub fn recover(session: &Path) -> u8 {
    let (store, name) = match explicit_store(session) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    match store.recover(0, &name) {
        Ok(report) => {
            let intents = store
                .open_session(0, &name)
                .and_then(|h| persyk::realtime::removal::reconcile(&h));
            match report.tail {
                TailOutcome::Clean => println!("tail: clean"),
                TailOutcome::AddedNewline => {
                    println!("tail: added the missing newline to the final record")
                }
                TailOutcome::PreservedFragment { file_name, bytes } => {
                    let file_name = shown(&file_name);
                    println!(
                        "tail: preserved an incomplete {bytes}-byte fragment in {file_name} and truncated it"
                    )
                }
            }
            let mut refused = false;
            for m in &report.merges {
                match m {
                    MergeOutcome::Merged(r) => {
                        println!(
                            "copy {} ({}): merged; {} entries appended as they were, {} carried onto the default path, {} annotations restated{}",
                            shown(&r.copy),
                            r.engine.name(),
                            r.appended,
                            r.carried,
                            r.restated,
                            match &r.fragment {
                                Some(f) =>
                                    format!("; its incomplete last line kept in {}", shown(f)),
                                None => String::new(),
                            }
                        )
                    }
                    MergeOutcome::Refused { copy, code } => {
                        refused = true;
                        println!("copy {}: left as it is ({code})", shown(copy))
                    }
                }
            }
            for r in report.recordings {
                match r {
                    RecordingOutcome::Recovered {
                        recording_id,
                        duration_ms,
                        data_bytes,
                        dropped_bytes,
                        header_rewritten,
                    } => println!(
                        "recording {recording_id}: interrupted; kept {data_bytes} bytes of audio ({duration_ms} ms), dropped {dropped_bytes} trailing bytes, header {}",
                        if header_rewritten {
                            "fixed"
                        } else {
                            "already correct"
                        },
                        recording_id = shown(&recording_id),
                    ),
                    RecordingOutcome::Live { recording_id } => {
                        println!(
                            "recording {}: live capture, left alone",
                            shown(&recording_id)
                        )
                    }
                    RecordingOutcome::NoAudio { recording_id } => {
                        println!(
                            "recording {}: interrupted; no usable audio",
                            shown(&recording_id)
                        )
                    }
                }
            }
            match intents {
                Ok(list) => {
                    for r in list {
                        use persyk::realtime::removal::Reconciled;
                        match r {
                            Reconciled::Applied { target_id } => {
                                let target_id = shown(&target_id);
                                println!(
                                    "removal of {target_id}: confirmed by the provider, applied locally"
                                )
                            }
                            Reconciled::Unconfirmed { target_id } => {
                                let target_id = shown(&target_id);
                                println!(
                                    "removal of {target_id}: requested, never confirmed; left as it was"
                                )
                            }
                            Reconciled::NotOnBranch { target_id } => {
                                let target_id = shown(&target_id);
                                println!(
                                    "removal of {target_id}: confirmed, but the message is not on the current branch"
                                )
                            }
                        }
                    }
                }
                Err(e) => {
                    eprintln!("persyk: {e}");
                    return exit_for(&e);
                }
            }
            if refused { EXIT_VIOLATION } else { 0 }
        }
        Err(e) => {
            eprintln!("persyk: {e}");
            match e {
                persyk::session::recover::RecoverError::Store(ref s) => exit_for(s),
                _ => EXIT_VIOLATION,
            }
        }
    }
}

pub fn rm(session: &Path, yes: bool) -> u8 {
    if !yes {
        eprintln!("persyk: rm deletes the whole session folder; pass --yes to confirm");
        return EXIT_CANNOT_RUN;
    }
    let (store, name) = match explicit_store(session) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let result = store
        .open_session(0, &name)
        .and_then(|h| store.delete(&h).map(|()| h));
    match result {
        Ok(h) => {
            println!("deleted {}", h.dir().display());
            0
        }
        Err(e) => {
            report_store_error(&e);
            exit_for(&e)
        }
    }
}

pub fn status(session: &Path) -> u8 {
    let (store, name) = match explicit_store(session) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let handle = match store.open_session(0, &name) {
        Ok(h) => h,
        Err(e) => {
            report_store_error(&e);
            return exit_for(&e);
        }
    };
    let (valid, tail) = handle.with_index(|i| (i.is_authoritative(), i.tail().is_some()));
    println!("session {}", shown(handle.session_id()));
    println!(
        "records: {}",
        if valid {
            "valid"
        } else {
            "contract violations (see persyk check)"
        }
    );
    if tail {
        println!("tail: incomplete final record (persyk recover)");
    }
    match persyk::realtime::restart::unfinished_work(&handle) {
        Ok(w) if w.is_empty() => println!("unfinished work: none"),
        Ok(w) => {
            for r in &w.recordings {
                println!("unfinished recording: {}", shown(r));
            }
            for (r, reasons) in &w.incomplete_recordings {
                println!(
                    "incomplete recording: {} (not all recognized: {}; transcribe its WAV again)",
                    shown(r),
                    if reasons.is_empty() {
                        "no gap recorded".to_owned()
                    } else {
                        shown(&reasons.join(", ")).into_owned()
                    }
                );
            }
            for (conn, item) in &w.pending_items {
                println!(
                    "provider item never transcribed: {} (connection {})",
                    shown(item),
                    shown(conn)
                );
            }
            for (conn, response) in &w.pending_responses {
                println!(
                    "requested response never finished: {} (connection {})",
                    shown(response),
                    shown(conn)
                );
            }
            for i in &w.removal_intents {
                println!(
                    "removal requested for {}: {}",
                    shown(&i.target_id),
                    if i.remote_deleted {
                        "confirmed by the provider, not applied (persyk recover)"
                    } else {
                        "never confirmed"
                    }
                );
            }
        }
        Err(e) => {
            report_store_error(&e);
            return exit_for(&e);
        }
    }
    0
}
