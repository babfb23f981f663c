//! `persyk context SESSION [--leaf ID|null] [--json]`.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use persyk::session::format::{EntryBody, Role, display_text};
use persyk::session::history::{self, HistoryItem};
use persyk::session::{self, LeafSelector, ProjectError};
use serde::Serialize;
use serde_json::value::RawValue;

use super::{EXIT_CANNOT_RUN, EXIT_LEAF_NOT_FOUND, EXIT_VIOLATION};

#[derive(Serialize)]
struct Output<'a> {
    leaf: Option<&'a str>,
    name: Option<&'a str>,
    messages: Vec<Item<'a>>,
}

#[derive(Serialize)]
struct Item<'a> {
    id: &'a str,
    entry: &'a RawValue,
}

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
    let items = match history::effective_history(&mut file, &index, &projection) {
        Ok(items) => items,
        Err(e) => {
            eprintln!("persyk: {}: {e}", path.display());
            return EXIT_CANNOT_RUN;
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json {
        let leaf = projection.leaf.map(|p| index.id(p));
        let output = Output {
            leaf,
            name: index.name(),
            messages: items
                .iter()
                .map(|i| Item {
                    id: &i.id,
                    entry: &i.raw,
                })
                .collect(),
        };
        match serde_json::to_string(&output) {
            Ok(s) => {
                let _ = writeln!(out, "{s}");
            }
            Err(_) => return EXIT_CANNOT_RUN,
        }
    } else {
        for item in &items {
            let _ = writeln!(out, "{}", human_line(item));
        }
    }
    0
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
