//! `persyk context SESSION [--leaf ID|null] [--json]`.
//!
//! Output streams: each entry is read back by offset and written before the next is read, so
//! memory follows the index and the largest entry, never the conversation. The JSON document
//! is byte for byte what serializing the whole `{leaf, name, messages}` object gives. An entry
//! that cannot be read back (`history.changed`, `history.io`) ends the output where it is and
//! exits 2: the truncated document is never valid JSON.

use std::fs::File;
use std::io::{BufWriter, ErrorKind, Write};
use std::path::Path;

use persyk::session::format::{EntryBody, Role, display_text};
use persyk::session::history::{self, HistoryError, HistoryItem, RawItem};
use persyk::session::{self, LeafSelector, ProjectError};

use super::{EXIT_CANNOT_RUN, EXIT_LEAF_NOT_FOUND, EXIT_VIOLATION};

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
    let index = match session::scan_reader(&mut file) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("persyk: cannot read {}: {}", path.display(), e.kind());
            return EXIT_CANNOT_RUN;
        }
    };
    let projection = match session::project(&index, &selector) {
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
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let items = history::effective_history(&mut file, &index, &projection);
    let written = if json {
        let leaf = projection.leaf.map(|p| index.id(p));
        write_json(&mut out, leaf, index.name(), items.raw())
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

/// `{"leaf":…,"name":…,"messages":[{"id":…,"entry":<the line>},…]}` and a newline, one
/// message at a time.
fn write_json<W: Write, I>(
    out: &mut W,
    leaf: Option<&str>,
    name: Option<&str>,
    items: I,
) -> Result<(), Failure>
where
    I: Iterator<Item = Result<RawItem, HistoryError>>,
{
    out.write_all(b"{\"leaf\":")?;
    json_string(out, leaf)?;
    out.write_all(b",\"name\":")?;
    json_string(out, name)?;
    out.write_all(b",\"messages\":[")?;
    for (n, item) in items.enumerate() {
        let item = item.map_err(Failure::History)?;
        if n > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"{\"id\":")?;
        json_string(out, Some(&item.id))?;
        out.write_all(b",\"entry\":")?;
        out.write_all(item.raw.get().as_bytes())?;
        out.write_all(b"}")?;
    }
    out.write_all(b"]}\n")?;
    Ok(())
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
    format!("{} {role}: {text}", item.id)
}
