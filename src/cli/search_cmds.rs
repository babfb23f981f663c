//! `persyk sessions` and `persyk search QUERY`: discovery, listing and search from the CLI.
//!
//! Roots: every `--root` given replaces the configured roots (the first is the write root,
//! all count as explicit); without `--root` the settings decide (`sessions.directory`,
//! `sessions.additionalDirectories`, the development or production default).
//!
//! Output: with `--json`, stdout is one JSON array of rows
//! `{"location","sessionId","leafId","created","label","excerpt","duplicateOf"?,"archived",
//! "messageCount","durationMs","diagnostic","recordedOn"?,"copies"?,"syncing"?,"cursor"}`
//! (`recordedOn`: the device it was recorded on; `copies`: conflict copies waiting to be
//! merged; `syncing`: files still arriving); otherwise one line per row. Root
//! diagnostics and sessions a search could not read go to stderr as `persyk: CODE: …`, never
//! with message text. When a page is full and more may follow, stderr says which `--cursor`
//! continues (every row also carries its own `cursor`). Zero results exit 0; root diagnostics
//! do not change the exit code; a bad cursor, query or settings file exits 2.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use persyk::session::discover::{self, Discovery, RootSpec};
use persyk::session::search::{self, Cursor, Page, PageRequest, Query, SessionRow};
use persyk::settings::{self, Settings};
use serde::Serialize;

use super::EXIT_CANNOT_RUN;

/// Arguments both commands share.
pub struct Request<'a> {
    pub roots: &'a [PathBuf],
    pub limit: usize,
    pub cursor: Option<&'a str>,
    pub json: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonRow<'a> {
    location: String,
    session_id: Option<&'a str>,
    leaf_id: Option<&'a str>,
    created: Option<&'a str>,
    label: &'a str,
    excerpt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicate_of: Option<String>,
    archived: bool,
    message_count: Option<usize>,
    duration_ms: Option<u64>,
    diagnostic: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded_on: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from_file: Option<&'a str>,
    #[serde(skip_serializing_if = "is_zero")]
    copies: usize,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    syncing: bool,
    cursor: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

fn json_row(r: &SessionRow) -> JsonRow<'_> {
    JsonRow {
        location: shown(&r.location),
        session_id: r.session_id.as_deref(),
        leaf_id: r.leaf_id.as_deref(),
        created: r.created.as_deref(),
        label: &r.label,
        excerpt: r.excerpt.as_deref(),
        duplicate_of: r.duplicate_of.as_deref().map(shown),
        archived: r.archived,
        message_count: r.message_count,
        duration_ms: r.duration_ms,
        diagnostic: r.diagnostic,
        recorded_on: r.recorded_on.as_deref(),
        from_file: r.from_file.as_deref(),
        copies: r.copies,
        syncing: r.syncing,
        cursor: r.cursor.encode(),
    }
}

fn root_specs(roots: &[PathBuf]) -> Result<Vec<RootSpec>, String> {
    if !roots.is_empty() {
        let cwd = std::env::current_dir();
        return roots
            .iter()
            .map(|r| {
                if r.is_absolute() {
                    Ok(RootSpec::explicit(r.clone()))
                } else {
                    cwd.as_ref()
                        .map(|d| RootSpec::explicit(d.join(r)))
                        .map_err(|e| format!("cannot resolve {}: {}", r.display(), e.kind()))
                }
            })
            .collect();
    }
    let loaded = match settings::settings_path() {
        Some(p) => Settings::load(&p),
        None => Ok(Settings::default()),
    };
    let settings = loaded.map_err(|e| e.to_string())?;
    let roots = settings
        .roots(settings::is_dev())
        .map_err(|e| e.to_string())?;
    Ok(RootSpec::from_roots(
        &roots,
        settings.sessions.directory.is_none(),
    ))
}

/// Discovery plus the page request, or the exit code of a command that cannot run.
fn prepare(req: &Request<'_>) -> Result<(Discovery, PageRequest), u8> {
    let cursor = match req.cursor.map(Cursor::decode).transpose() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("persyk: {e}");
            return Err(EXIT_CANNOT_RUN);
        }
    };
    let specs = root_specs(req.roots).map_err(|e| {
        eprintln!("persyk: {e}");
        EXIT_CANNOT_RUN
    })?;
    let discovery = discover::discover(&specs);
    for d in &discovery.root_diagnostics {
        eprintln!("persyk: {d}");
    }
    let page = PageRequest {
        limit: req.limit,
        cursor,
    };
    Ok((discovery, page))
}

pub fn sessions(req: &Request<'_>) -> u8 {
    let (discovery, page) = match prepare(req) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let page = search::list(&discovery, &page);
    print_page(&page, req.json, false)
}

pub fn search(query: &str, req: &Request<'_>) -> u8 {
    let query = match Query::new(query) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("persyk: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    let (discovery, page) = match prepare(req) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let page = search::search(&discovery, &query, &page);
    for s in &page.skipped {
        eprintln!(
            "persyk: {}: {}: not searched (see `persyk check`)",
            s.location.display(),
            s.code
        );
    }
    print_page(&page, req.json, true)
}

fn print_page(page: &Page, json: bool, hits: bool) -> u8 {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let written = if json {
        let rows: Vec<JsonRow<'_>> = page.rows.iter().map(json_row).collect();
        match serde_json::to_string(&rows) {
            Ok(s) => writeln!(out, "{s}"),
            Err(_) => return EXIT_CANNOT_RUN,
        }
    } else {
        page.rows
            .iter()
            .try_for_each(|r| writeln!(out, "{}", human_line(r, hits)))
    };
    if written.is_err() {
        return EXIT_CANNOT_RUN;
    }
    if let Some(next) = &page.next {
        eprintln!("persyk: more results: --cursor {}", next.encode());
    }
    0
}

fn duration(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// One line: search hits start with the arguments `persyk context` takes to open them.
/// Every value read from a session file or a folder name goes through [`shown::line`]: one
/// row each, controls shown as escapes.
fn human_line(r: &SessionRow, hit: bool) -> String {
    use super::shown::line as shown;
    let created = shown(r.created.as_deref().unwrap_or("-")).into_owned();
    let location = r.location.display().to_string();
    let location = shown(&location);
    let mut line = if hit {
        format!(
            "{location} --leaf {}  {created}  {}: {}",
            shown(r.leaf_id.as_deref().unwrap_or("null")),
            shown(&r.label),
            shown(r.excerpt.as_deref().unwrap_or_default())
        )
    } else {
        let mut l = format!("{location}  {created}  {}", shown(&r.label));
        if let Some(n) = r.message_count {
            l.push_str(&format!("  [{n} messages]"));
        }
        if let Some(ms) = r.duration_ms {
            l.push_str(&format!("  [{}]", duration(ms)));
        }
        if r.archived {
            l.push_str("  [archived]");
        }
        l
    };
    if let Some(code) = r.diagnostic {
        line.push_str(&format!("  [{code}]"));
    }
    if let Some(d) = &r.duplicate_of {
        let d = d.display().to_string();
        line.push_str(&format!("  [duplicate of {}]", shown(&d)));
    }
    if let Some(device) = &r.recorded_on {
        line.push_str(&format!("  [recorded on {}]", shown(device)));
    }
    if let Some(name) = &r.from_file {
        line.push_str(&format!("  [from the file {}]", shown(name)));
    }
    if r.copies > 0 {
        line.push_str(&format!(
            "  [{} cop{} from another device to merge: persyk recover]",
            r.copies,
            if r.copies == 1 { "y" } else { "ies" }
        ));
    }
    if r.syncing {
        line.push_str("  [syncing]");
    }
    line
}
