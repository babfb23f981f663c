//! `persyk context SESSION [--leaf ID|null] [--json]`.
//!
//! Output streams: each entry is read back by offset and written before the next is read, so
//! memory follows the index and the largest entry, never the conversation. The JSON document
//! is byte for byte what serializing the whole `{leaf, name, messages}` object gives. An entry
//! that cannot be read back (`history.changed`, `history.io`) ends the output where it is and
//! exits 2: the truncated document is never valid JSON.
//!
//! `--json` copies each line as read. It parses a line again only when the file may have
//! changed since the scan: its identity (device, inode, size, times) was taken before the
//! scan and is compared before each batch of output; a file modified within
//! `RACY_WINDOW` of the scan, or changed since, has every line checked
//! (`history::check_raw_line`) before it is written.

use std::fs::File;
use std::io::{BufWriter, ErrorKind, Read, Seek, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::time::SystemTime;

use persyk::session::SessionIndex;
use persyk::session::format::{EntryBody, Role, display_text};
use persyk::session::history::{self, HistoryError, HistoryItem, RawEntries};
use persyk::session::search_cache::FileIdentity;
use persyk::session::{self, LeafSelector, ProjectError};

use super::{EXIT_CANNOT_RUN, EXIT_LEAF_NOT_FOUND, EXIT_VIOLATION};

/// Output buffer (the JSON output writes batches of [`BATCH_BYTES`] through it).
const OUT_BUFFER_BYTES: usize = 64 * 1024;

pub fn run(session_path: &Path, leaf: Option<&str>, json: bool) -> u8 {
    let path = session::session_file(session_path);
    let selector = match leaf {
        None => LeafSelector::Default,
        Some("null") => LeafSelector::Null,
        Some(id) => LeafSelector::Id(id.to_owned()),
    };
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("persyk: cannot read {}: {}", path.display(), e.kind());
            return EXIT_CANNOT_RUN;
        }
    };
    // The file's identity before the scan: if it had settled by then and is the same after,
    // no byte changed in between (see `FileIdentity`).
    let began = SystemTime::now();
    let before = file.metadata().ok().map(|m| FileIdentity::of(&m));
    // A lean index: ids are confirmed and read back from the file, which this command
    // reads again anyway, under the identity check below.
    let index = match session::scan_file_lean(&file) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("persyk: cannot read {}: {}", path.display(), e.kind());
            return EXIT_CANNOT_RUN;
        }
    };
    let (leaf, conversation) = match session::project_conversation(&index, &selector) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("persyk: {}: {e}", path.display());
            if e == ProjectError::NotAuthoritative {
                for d in index.diagnostics() {
                    eprintln!("{}:{}: {}: {}", path.display(), d.line, d.code, d.message);
                }
                return EXIT_VIOLATION;
            }
            return EXIT_LEAF_NOT_FOUND;
        }
    };
    let stdout = std::io::stdout();
    let stdout = stdout.lock();
    // Our own handle on stdout, so large writes skip `Stdout`'s line buffering (which looks
    // for the last newline of every write); `Stdout` when it cannot be had.
    let sink: Box<dyn Write> = match stdout.as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(File::from(fd)),
        Err(_) => Box::new(stdout),
    };
    let mut out = BufWriter::with_capacity(OUT_BUFFER_BYTES, sink);
    let second = file.try_clone().ok();
    let items = history::EntryReader::over(&mut file, &index, conversation.iter());
    let written = if json {
        // Read back from the file (a lean index) and checked against the index.
        let leaf = match leaf.map(|p| index.try_id(p)).transpose() {
            Ok(leaf) => leaf,
            Err(_) => {
                eprintln!("persyk: {}: {}", path.display(), HistoryError::Changed);
                return EXIT_CANNOT_RUN;
            }
        };
        let proof = Proof {
            file: second.as_ref(),
            settled: before.filter(|b| b.settled_before(began)),
        };
        let head = (leaf.as_deref(), index.name());
        write_json(&mut out, &index, head, items.raw(), &proof)
    } else {
        write_human(&mut out, items)
    };
    let flushed = out.flush();
    match written {
        Ok(()) => {}
        Err(Failure::History(e)) => {
            eprintln!("persyk: {}: {e}", path.display());
            return EXIT_CANNOT_RUN;
        }
        // A closed stdout (`| head`) is not an error worth a message; any other write
        // failure leaves the output incomplete.
        Err(Failure::Write(e)) if e.kind() == ErrorKind::BrokenPipe => return 0,
        Err(Failure::Write(_)) => return EXIT_CANNOT_RUN,
    }
    match flushed {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => EXIT_CANNOT_RUN,
        _ => 0,
    }
}

enum Failure {
    History(HistoryError),
    Write(std::io::Error),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::Write(e)
    }
}

fn json_string<W: Write>(out: &mut W, value: Option<&str>) -> Result<(), Failure> {
    serde_json::to_writer(&mut *out, &value).map_err(|e| Failure::Write(e.into()))
}

/// Output is written in batches of about this many bytes; before each, the file's identity
/// is compared with the one taken before the scan.
const BATCH_BYTES: usize = 128 * 1024;

/// How [`write_json`] knows the lines it copies are the ones the scan validated.
struct Proof<'f> {
    /// A second handle on the open session file, for `fstat`.
    file: Option<&'f File>,
    /// The file's identity before the scan, when it had settled (see `FileIdentity`).
    settled: Option<FileIdentity>,
}

impl Proof<'_> {
    /// Whether the file is still the settled one: then no byte of it changed since before
    /// the scan began (any write gives it a newer status-change time).
    fn holds(&self) -> bool {
        match (self.file, self.settled) {
            (Some(file), Some(before)) => file
                .metadata()
                .is_ok_and(|m| FileIdentity::of(&m) == before),
            _ => false,
        }
    }
}

/// `{"leaf":…,"name":…,"messages":[{"id":…,"entry":<the line>},…]}` and a newline, one
/// batch of messages at a time: each line is copied as it was read. While the file provably
/// has not changed since before the scan, the lines are not parsed again; once it may have,
/// every line not yet written is checked ([`history::check_raw_line`]) before it is.
fn write_json<W: Write, R: Read + Seek>(
    out: &mut W,
    index: &SessionIndex,
    (leaf, name): (Option<&str>, Option<&str>),
    mut items: RawEntries<'_, R>,
    proof: &Proof<'_>,
) -> Result<(), Failure> {
    let mut batch: Vec<u8> = Vec::with_capacity(BATCH_BYTES + 4096);
    // (position, start, end) of each line in `batch`.
    let mut lines: Vec<(u32, usize, usize)> = Vec::new();
    let mut trusted = proof.holds();
    items.trust(trusted);
    batch.extend_from_slice(b"{\"leaf\":");
    json_string(&mut batch, leaf)?;
    batch.extend_from_slice(b",\"name\":");
    json_string(&mut batch, name)?;
    batch.extend_from_slice(b",\"messages\":[");
    let mut first = true;
    let mut flush = |batch: &mut Vec<u8>,
                     lines: &mut Vec<(u32, usize, usize)>,
                     trusted: &mut bool,
                     items: &mut RawEntries<'_, R>|
     -> Result<(), Failure> {
        if *trusted && !proof.holds() {
            *trusted = false;
            items.trust(false);
        }
        if !*trusted {
            for &(pos, start, end) in lines.iter() {
                // A changed line ends the output before its batch.
                history::check_raw_line(index, pos, &batch[start..end])
                    .map_err(Failure::History)?;
            }
        }
        out.write_all(batch)?;
        batch.clear();
        lines.clear();
        Ok(())
    };
    while let Some(line) = items.next_line() {
        let line = line.map_err(Failure::History)?;
        if !first {
            batch.push(b',');
        }
        first = false;
        batch.extend_from_slice(b"{\"id\":");
        json_string(&mut batch, Some(&line.id))?;
        batch.extend_from_slice(b",\"entry\":");
        let start = batch.len();
        batch.extend_from_slice(line.json.as_bytes());
        lines.push((line.pos, start, batch.len()));
        batch.push(b'}');
        if batch.len() >= BATCH_BYTES {
            flush(&mut batch, &mut lines, &mut trusted, &mut items)?;
        }
    }
    batch.extend_from_slice(b"]}\n");
    flush(&mut batch, &mut lines, &mut trusted, &mut items)
}

fn write_human<W: Write, I>(out: &mut W, items: I) -> Result<(), Failure>
where
    I: Iterator<Item = Result<HistoryItem, HistoryError>>,
{
    for item in items {
        let item = item.map_err(Failure::History)?;
        writeln!(out, "{}", human_line(&item))?;
    }
    Ok(())
}

fn human_line(item: &HistoryItem) -> String {
    let (role, text) = match &item.entry.body {
        EntryBody::Message(m) => (
            match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::ToolResult => "toolResult",
            },
            display_text(&m.content),
        ),
        EntryBody::CustomMessage(cm) => ("custom", display_text(&cm.content.to_blocks())),
        _ => ("other", String::new()),
    };
    // Stored text: controls and direction overrides are shown as escapes.
    format!(
        "{} {role}: {}",
        super::shown::line(&item.id),
        super::shown::text(&text)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: usize = 3_000;

    /// A settled session file (times set 10 s back) of `LINES` messages.
    fn session() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
        let mut text = String::from(
            r#"{"type":"session","version":1,"id":"s","timestamp":"2026-03-18T17:20:00.000Z"}"#,
        );
        text.push('\n');
        for i in 0..LINES {
            let parent = if i == 0 {
                "null".to_owned()
            } else {
                format!("\"m{}\"", i - 1)
            };
            text.push_str(&format!(
                r#"{{"type":"message","id":"m{i}","parentId":{parent},"timestamp":"2026-03-18T17:20:04.000Z","message":{{"role":"user","content":[{{"type":"text","text":"{}"}}],"timestamp":1}}}}"#,
                "x".repeat(100)
            ));
            text.push('\n');
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("session.jsonl");
        std::fs::write(&path, &text).expect("write");
        let past = SystemTime::now() - std::time::Duration::from_secs(10);
        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(past))
            .expect("set mtime");
        (dir, path, text.into_bytes())
    }

    /// Runs `write_json` the way `run` does, with `change` applied to the file after the scan.
    fn output(change: impl FnOnce(&std::path::Path)) -> (Result<(), String>, Vec<u8>, Vec<u8>) {
        let (_dir, path, bytes) = session();
        let mut file = File::open(&path).expect("open");
        // The status-change time cannot be set back: pretend the scan began later instead.
        let began = SystemTime::now() + RACY_WINDOW_PLUS;
        let before = file.metadata().ok().map(|m| FileIdentity::of(&m));
        let index = session::scan_file_lean(&file).expect("scan");
        let (leaf, conversation) =
            session::project_conversation(&index, &LeafSelector::Default).expect("project");
        change(&path);
        let second = file.try_clone().expect("clone");
        let proof = Proof {
            file: Some(&second),
            settled: before.filter(|b| b.settled_before(began)),
        };
        assert!(proof.settled.is_some());
        let mut out = Vec::new();
        let leaf = leaf.map(|p| index.id(p));
        let items = history::EntryReader::over(&mut file, &index, conversation.iter()).raw();
        let result = write_json(&mut out, &index, (leaf.as_deref(), None), items, &proof).map_err(
            |e| match e {
                Failure::History(e) => e.code().to_owned(),
                Failure::Write(e) => format!("write: {e}"),
            },
        );
        (result, out, bytes)
    }

    const RACY_WINDOW_PLUS: std::time::Duration = std::time::Duration::from_secs(3);

    #[test]
    fn an_unchanged_file_is_copied_and_parses_back() {
        let (result, out, _) = output(|_| {});
        assert_eq!(result, Ok(()));
        let doc: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(doc["messages"].as_array().map(Vec::len), Some(LINES));
        assert_eq!(doc["leaf"], "m2999");
    }

    /// Rewritten in place after the scan (same length, another id): the identity changed, so
    /// the lines are checked and the changed one is `history.changed`, never copied out.
    #[test]
    fn a_file_rewritten_after_the_scan_has_its_lines_checked() {
        let (result, out, _) = output(|path| {
            let mut bytes = std::fs::read(path).expect("read");
            let at = bytes
                .windows(8)
                .position(|w| w == b"\"m2500\",")
                .expect("m2500")
                + 1;
            bytes[at] = b'x';
            std::fs::write(path, &bytes).expect("rewrite");
        });
        assert_eq!(result, Err("history.changed".to_owned()));
        assert!(!out.windows(7).any(|w| w == b"\"x2500\""));
    }
}
