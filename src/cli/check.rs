//! `persyk check PATH... [--json]`.

use std::io::Write;
use std::path::PathBuf;

use persyk::session;
use serde::Serialize;

use super::{EXIT_CANNOT_RUN, EXIT_VIOLATION};

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
