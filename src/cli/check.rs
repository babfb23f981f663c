//! `persyk check PATH... [--json]`: each file's diagnostics, and a sync engine's conflict
//! copies beside it that wait to be merged (`sync.unmerged-copy`, line 0).

use std::io::Write;
use std::path::PathBuf;

use persyk::session;
use serde::Serialize;

use super::{EXIT_CANNOT_RUN, EXIT_VIOLATION};

/// The code `check` reports for a sync engine's conflict copy that is not merged yet.
const UNMERGED_COPY: &str = "sync.unmerged-copy";

#[derive(Serialize)]
struct Row<'a> {
    path: String,
    line: u64,
    code: &'a str,
    message: &'a str,
}

pub fn run(paths: &[PathBuf], json: bool) -> u8 {
    let mut exit = 0u8;
    let mut rows = Vec::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for path in paths {
        let file = session::session_file(path);
        // A regular file gets a lean index (ids confirmed by reading them back): `check`
        // needs only the diagnostics. Anything else (a pipe) is read once, as a stream.
        let scanned = std::fs::File::open(&file).and_then(|f| match f.metadata()?.is_file() {
            true => session::scan_file_lean(&f),
            false => session::scan_reader(f),
        });
        let index = match scanned {
            Ok(index) => index,
            Err(e) => {
                eprintln!("persyk: cannot read {}: {}", file.display(), e.kind());
                exit = EXIT_CANNOT_RUN;
                continue;
            }
        };
        if !index.is_valid() && exit == 0 {
            exit = EXIT_VIOLATION;
        }
        let shown = file.display().to_string();
        for d in index.diagnostics() {
            if json {
                rows.push(serde_json::json!(Row {
                    path: shown.clone(),
                    line: d.line,
                    code: d.code.as_str(),
                    message: &d.message,
                }));
            } else {
                let _ = writeln!(
                    out,
                    "{}:{}: {}: {}",
                    super::shown::line(&shown),
                    d.line,
                    d.code,
                    super::shown::line(&d.message)
                );
            }
        }
        // A sync engine's conflict copies beside the file: not damage, but waiting for
        // `persyk recover` to merge them.
        let folder = file
            .parent()
            .filter(|_| file.file_name().is_some_and(|n| n == session::SESSION_FILE));
        if let Some(copies) = folder.and_then(|d| session::conflict::scan_folder(d).ok()) {
            for (copy, engine) in copies.copies {
                if exit == 0 {
                    exit = EXIT_VIOLATION;
                }
                let message = format!(
                    "a conflict copy from another Mac ({}) is waiting to be merged: run `persyk recover`",
                    engine.name()
                );
                let shown_copy = folder
                    .map(|d| d.join(&copy).display().to_string())
                    .unwrap_or(copy);
                if json {
                    rows.push(serde_json::json!(Row {
                        path: shown_copy,
                        line: 0,
                        code: UNMERGED_COPY,
                        message: &message,
                    }));
                } else {
                    let _ = writeln!(
                        out,
                        "{}:0: {UNMERGED_COPY}: {message}",
                        super::shown::line(&shown_copy)
                    );
                }
            }
        }
        let hidden = index.diagnostics_total() - index.diagnostics().len() as u64;
        if hidden > 0 {
            eprintln!("persyk: {shown}: {hidden} more diagnostics not shown");
        }
    }
    if json {
        let _ = writeln!(out, "{}", serde_json::Value::Array(rows));
    }
    exit
}
