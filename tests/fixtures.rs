//! Data-driven tests over the shared fixtures in `fixtures/`.
//!
//! - `fixtures/user-only.jsonl` is the example quoted in the format contract, byte for byte.
//! - `fixtures/golden/<name>.jsonl` must validate with no diagnostic and project to the
//!   hand-written `fixtures/golden/<name>.expected.json`; every entry line must round-trip
//!   through the typed format.
//! - `fixtures/reject/<code>[--<variant>].jsonl` must produce `<code>`, and no diagnostic may
//!   echo file content (several fixtures plant a fake key and a marker phrase to prove it).
//!
//! Each test checks every fixture and reports all failures at once, so one broken fixture (or
//! one bug) does not hide the others.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use persyk::session::format::Entry;
use persyk::session::{
    Code, Diagnostic, LeafSelector, ProjectError, Projection, SessionIndex, project, scan_bytes,
    scan_path,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

/// The fake key and the marker phrase planted in message text and custom data of reject
/// fixtures.
const PLANTED_SECRET: &str = "sk-proj-PLANTEDSECRET0123456789abcdef";
const PLANTED_BODY: &str = "PLANTED-BODY-TEXT";
/// Substrings no diagnostic may contain.
const NEVER_IN_DIAGNOSTICS: &[&str] = &["PLANTED", "sk-"];
const KNOWN_BLOCK_TYPES: &[&str] = &["text", "thinking", "toolCall", "image", "audio"];
const KNOWN_MESSAGE_KEYS: &[&str] = &[
    "role",
    "content",
    "timestamp",
    "api",
    "provider",
    "model",
    "responseId",
    "usage",
    "stopReason",
    "errorMessage",
    "replay",
    "toolCallId",
    "toolName",
    "isError",
    "details",
];

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The `*.jsonl` files of a fixture directory, sorted by name.
fn jsonl_files(dir: &str) -> Vec<PathBuf> {
    let dir = fixtures_dir().join(dir);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

fn file_stem(path: &Path) -> &str {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".jsonl"))
        .expect("fixture names are UTF-8 and end in .jsonl")
}

/// Parses JSON without serde_json's default nesting limit: records may nest 128 containers,
/// and serde_json's default stops just short of that.
fn from_str_unbounded<T: DeserializeOwned>(s: &str) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(s);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Panics with every collected failure, if there are any.
fn report(what: &str, failures: &[String]) {
    if !failures.is_empty() {
        let mut msg = format!("{} {what} failure(s):\n", failures.len());
        for f in failures {
            let _ = writeln!(msg, "  - {f}");
        }
        panic!("{msg}");
    }
}

fn diag_list(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| format!("{}:{}", d.line, d.code))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// Expectations
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    default: Selection,
    name: Option<String>,
    archived: Option<bool>,
    labels: BTreeMap<String, String>,
    /// Extra leaf selections: an entry id, or the string "null" for explicit empty ancestry.
    #[serde(default)]
    leaves: BTreeMap<String, Selection>,
}

#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Selection {
    leaf: Option<String>,
    path: Vec<String>,
    messages: Vec<String>,
    custom_state: BTreeMap<String, String>,
}

impl Selection {
    fn of(index: &SessionIndex, p: &Projection) -> Selection {
        let id = |pos: u32| index.id(pos).to_string();
        Selection {
            leaf: p.leaf.map(id),
            path: p.path.iter().map(|&pos| id(pos)).collect(),
            messages: p.conversation.iter().map(|&pos| id(pos)).collect(),
            custom_state: p
                .custom_state
                .iter()
                .map(|(t, &pos)| (t.to_string(), id(pos)))
                .collect(),
        }
    }
}

fn load_expected(jsonl: &Path) -> Expected {
    let path = jsonl.with_file_name(format!("{}.expected.json", file_stem(jsonl)));
    let text = fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("missing expectation {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad {}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// user-only.jsonl
// ---------------------------------------------------------------------------------------------

#[test]
fn user_only_validates_and_projects_one_user_message() {
    let path = fixtures_dir().join("user-only.jsonl");
    let index = scan_path(&path).expect("user-only.jsonl is readable");
    assert_eq!(index.diagnostics(), &[] as &[Diagnostic]);
    assert!(index.is_valid());
    let projection = project(&index, &LeafSelector::Default).expect("authoritative");
    let ids: Vec<String> = projection
        .conversation
        .iter()
        .map(|&p| index.id(p).into_owned())
        .collect();
    assert_eq!(ids, ["user-message-1"]);

    let bytes = fs::read(&path).expect("read user-only.jsonl");
    let line = std::str::from_utf8(&bytes)
        .expect("UTF-8")
        .lines()
        .nth(1)
        .expect("second line");
    let entry = Entry::from_line(line).expect("typed parse");
    let message = entry.message().expect("a message entry");
    assert_eq!(message.role, persyk::session::format::Role::User);
    assert_eq!(message.text(), "User-only finalized transcription");
}

#[test]
fn user_only_is_the_example_quoted_in_the_format_contract() {
    let spec_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/spec/session-format.md");
    let Ok(spec) = fs::read_to_string(&spec_path) else {
        println!(
            "note: {} not found; skipping the byte-for-byte comparison with the spec example",
            spec_path.display()
        );
        return;
    };
    let lines: Vec<&str> = spec.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with(r#"{"type":"session""#))
        .expect("the spec quotes a header line");
    let quoted = format!("{}\n{}\n", lines[start], lines[start + 1]);
    let fixture = fs::read(fixtures_dir().join("user-only.jsonl")).expect("read user-only.jsonl");
    assert_eq!(
        String::from_utf8(fixture).expect("UTF-8"),
        quoted,
        "fixtures/user-only.jsonl must be the two example lines of session-format.md"
    );
}

// ---------------------------------------------------------------------------------------------
// Goldens
// ---------------------------------------------------------------------------------------------

#[test]
fn goldens_validate_and_project_to_their_expectation() {
    let mut failures = Vec::new();
    for path in jsonl_files("golden") {
        let name = file_stem(&path);
        let expected = load_expected(&path);
        let index = match scan_path(&path) {
            Ok(index) => index,
            Err(e) => {
                failures.push(format!("{name}: unreadable: {e}"));
                continue;
            }
        };
        if !index.diagnostics().is_empty() {
            failures.push(format!(
                "{name}: expected no diagnostics, got [{}]",
                diag_list(index.diagnostics())
            ));
            continue;
        }

        let mut selections = vec![(
            "<default>".to_owned(),
            LeafSelector::Default,
            &expected.default,
        )];
        for (leaf, sel) in &expected.leaves {
            let selector = match leaf.as_str() {
                "null" => LeafSelector::Null,
                id => LeafSelector::Id(id.to_owned()),
            };
            selections.push((leaf.clone(), selector, sel));
        }
        for (label, selector, want) in selections {
            match project(&index, &selector) {
                Ok(p) => {
                    let got = Selection::of(&index, &p);
                    if &got != want {
                        failures.push(format!(
                            "{name}: leaf {label}: projection differs\n      want {want:?}\n      got  {got:?}"
                        ));
                    }
                }
                Err(e) => failures.push(format!("{name}: leaf {label}: {e}")),
            }
        }

        if index.name() != expected.name.as_deref() {
            failures.push(format!(
                "{name}: name: want {:?}, got {:?}",
                expected.name,
                index.name()
            ));
        }
        if index.archived() != expected.archived {
            failures.push(format!(
                "{name}: archived: want {:?}, got {:?}",
                expected.archived,
                index.archived()
            ));
        }
        let labels: BTreeMap<String, String> = index
            .labels()
            .map(|(pos, label)| (index.id(pos).to_string(), label.to_owned()))
            .collect();
        if labels != expected.labels {
            failures.push(format!(
                "{name}: labels: want {:?}, got {labels:?}",
                expected.labels
            ));
        }
    }
    report("golden projection", &failures);
}

#[test]
fn explicit_leaf_that_does_not_exist_is_an_error_not_a_fallback() {
    let bytes = fs::read(fixtures_dir().join("golden/branch-siblings.jsonl")).expect("read");
    let index = scan_bytes(&bytes);
    assert_eq!(
        project(&index, &LeafSelector::Id("does-not-exist".into())),
        Err(ProjectError::LeafNotFound)
    );
}

/// Checks one golden entry line's typed round trip; returns a failure description.
fn round_trip_line(line: &str) -> Result<(), String> {
    let entry = Entry::from_line(line).map_err(|e| format!("Entry::from_line failed: {e}"))?;
    let out = entry.to_line();
    let original: Value = from_str_unbounded(line).map_err(|e| format!("original: {e}"))?;
    let written: Value =
        from_str_unbounded(&out).map_err(|e| format!("to_line is not JSON: {e}: {out}"))?;
    if original != written {
        return Err(format!(
            "re-serialized JSON differs\n      in:  {line}\n      out: {out}"
        ));
    }
    match Entry::from_line(&out) {
        Ok(again) if again == entry => {}
        Ok(_) => return Err("reparsed entry differs from the first parse".into()),
        Err(e) => return Err(format!("to_line output does not reparse: {e}")),
    }

    // Unknown blocks and unknown message keys are written back byte for byte.
    let envelope: BTreeMap<String, Box<RawValue>> =
        from_str_unbounded(line).map_err(|e| format!("raw envelope: {e}"))?;
    let Some(message) = envelope.get("message") else {
        return Ok(());
    };
    let message: BTreeMap<String, Box<RawValue>> =
        from_str_unbounded(message.get()).map_err(|e| format!("raw message: {e}"))?;
    for (key, raw) in &message {
        if !KNOWN_MESSAGE_KEYS.contains(&key.as_str()) {
            let written = format!("{}:{}", Value::String(key.clone()), raw.get());
            if !out.contains(&written) {
                return Err(format!("unknown message key not verbatim: {written}"));
            }
        }
    }
    if let Some(content) = message.get("content") {
        let blocks: Vec<Box<RawValue>> =
            from_str_unbounded(content.get()).map_err(|e| format!("raw content: {e}"))?;
        for raw in blocks {
            #[derive(Deserialize)]
            struct Peek {
                #[serde(rename = "type")]
                ty: String,
            }
            let peek: Peek = from_str_unbounded(raw.get()).map_err(|e| format!("block: {e}"))?;
            if !KNOWN_BLOCK_TYPES.contains(&peek.ty.as_str()) && !out.contains(raw.get()) {
                return Err(format!("unknown block not verbatim: {}", raw.get()));
            }
        }
    }
    Ok(())
}

#[test]
fn goldens_round_trip_through_the_typed_format() {
    let mut failures = Vec::new();
    let mut checked = 0usize;
    for path in jsonl_files("golden") {
        let name = file_stem(&path);
        let text = fs::read_to_string(&path).expect("goldens are UTF-8");
        for (i, line) in text.lines().enumerate().skip(1) {
            checked += 1;
            if let Err(e) = round_trip_line(line) {
                failures.push(format!("{name}:{}: {e}", i + 1));
            }
        }
    }
    assert!(checked > 0, "no golden entry lines were checked");
    report("golden round-trip", &failures);
}

// ---------------------------------------------------------------------------------------------
// Rejects
// ---------------------------------------------------------------------------------------------

/// The code a reject fixture is named after: the file name up to `--` or `.jsonl`.
fn named_code(path: &Path) -> Code {
    let stem = file_stem(path);
    let code = stem.split_once("--").map_or(stem, |(code, _)| code);
    Code::parse(code).unwrap_or_else(|| {
        panic!(
            "fixtures/reject/{}: `{code}` is not a diagnostic code in src/session/diag.rs",
            stem
        )
    })
}

#[test]
fn rejects_produce_their_named_code() {
    let mut failures = Vec::new();
    for path in jsonl_files("reject") {
        let name = file_stem(&path);
        let code = named_code(&path);
        let index = match scan_path(&path) {
            Ok(index) => index,
            Err(e) => {
                failures.push(format!("{name}: unreadable: {e}"));
                continue;
            }
        };
        if !index.diagnostics().iter().any(|d| d.code == code) {
            failures.push(format!(
                "{name}: expected {code}, got [{}]",
                diag_list(index.diagnostics())
            ));
        }
        if index.is_valid() {
            failures.push(format!("{name}: reported as valid"));
        }
        // Every code but an incomplete tail blocks authoritative projection.
        if code.blocks_projection()
            && project(&index, &LeafSelector::Default) != Err(ProjectError::NotAuthoritative)
        {
            failures.push(format!("{name}: {code} did not block projection"));
        }
    }
    report("reject", &failures);
}

/// Whether `message` is built only from static text: the code's description, optionally
/// followed by `` (field `name`)`` with a schema field name.
fn is_static_message(d: &Diagnostic) -> bool {
    let Some(rest) = d.message.strip_prefix(d.code.describe()) else {
        return false;
    };
    rest.is_empty()
        || rest
            .strip_prefix(" (field `")
            .and_then(|r| r.strip_suffix("`)"))
            .is_some_and(|field| {
                !field.is_empty() && field.bytes().all(|b| b.is_ascii_alphanumeric())
            })
}

#[test]
fn diagnostics_never_echo_file_content() {
    let mut failures = Vec::new();
    let mut planted_files = 0usize;
    let mut files = jsonl_files("reject");
    files.extend(jsonl_files("golden"));
    for path in files {
        let name = file_stem(&path);
        let bytes = fs::read(&path).expect("read fixture");
        if contains_bytes(&bytes, PLANTED_SECRET.as_bytes())
            && contains_bytes(&bytes, PLANTED_BODY.as_bytes())
        {
            planted_files += 1;
        }
        let index = scan_bytes(&bytes);
        for d in index.diagnostics() {
            let shown = d.to_string();
            if NEVER_IN_DIAGNOSTICS.iter().any(|m| shown.contains(m)) {
                failures.push(format!(
                    "{name}: diagnostic echoes planted content: {shown}"
                ));
            }
            if !is_static_message(d) {
                failures.push(format!("{name}: diagnostic message is not static: {shown}"));
            }
        }
    }
    assert!(
        planted_files >= 10,
        "only {planted_files} reject fixtures plant both the fake key and the marker phrase"
    );
    report("diagnostic content", &failures);
}

fn contains_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// Limits next to the checked-in fixtures (record.too-large / record.too-deep, depth-128)
// ---------------------------------------------------------------------------------------------

/// A `custom` entry line of exactly `len` bytes.
fn custom_line_of_len(len: usize) -> String {
    let head = r#"{"type":"custom","id":"c1","parentId":null,"timestamp":"2026-04-03T09:00:06.000Z","customType":"persyk.pad","data":""#;
    let tail = r#""}"#;
    let pad = len - head.len() - tail.len();
    format!("{head}{}{tail}", "x".repeat(pad))
}

#[test]
fn record_of_exactly_one_mebibyte_is_accepted_one_more_byte_is_not() {
    let header = r#"{"type":"session","version":1,"id":"s1","timestamp":"2026-04-03T09:00:00Z"}"#;
    let limit = 1 << 20;

    let at_limit = format!("{header}\n{}\n", custom_line_of_len(limit));
    let index = scan_bytes(at_limit.as_bytes());
    assert_eq!(index.diagnostics(), &[] as &[Diagnostic]);

    let over = format!("{header}\n{}\n", custom_line_of_len(limit + 1));
    let index = scan_bytes(over.as_bytes());
    let codes: Vec<Code> = index.diagnostics().iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::RecordTooLarge]);
    assert_eq!(index.diagnostics()[0].line, 2);
}

// ---------------------------------------------------------------------------------------------
// Coverage
// ---------------------------------------------------------------------------------------------

#[test]
fn fixture_counts_and_code_coverage() {
    let goldens = jsonl_files("golden");
    let rejects = jsonl_files("reject");
    assert!(
        goldens.len() >= 20,
        "{} golden fixtures, want >= 20",
        goldens.len()
    );
    assert!(
        rejects.len() >= 40,
        "{} reject fixtures, want >= 40",
        rejects.len()
    );
    for g in &goldens {
        let expected = g.with_file_name(format!("{}.expected.json", file_stem(g)));
        assert!(expected.exists(), "{} has no expectation", g.display());
    }
    let covered: std::collections::BTreeSet<Code> = rejects.iter().map(|p| named_code(p)).collect();
    let missing: Vec<&str> = Code::ALL
        .iter()
        .filter(|c| !covered.contains(c))
        .map(|c| c.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "codes without a reject fixture: {missing:?}"
    );
}

/// Effective history of a golden at its default leaf.
fn golden_history(name: &str) -> Vec<persyk::session::history::HistoryItem> {
    let bytes =
        fs::read(fixtures_dir().join("golden").join(format!("{name}.jsonl"))).expect("read golden");
    let index = persyk::session::scan_bytes(&bytes);
    let projection =
        persyk::session::project(&index, &persyk::session::LeafSelector::Default).expect("project");
    persyk::session::history::effective_history(
        &mut std::io::Cursor::new(&bytes),
        &index,
        &projection,
    )
    .collect::<Result<Vec<_>, _>>()
    .expect("history")
}

#[test]
fn generic_context_drops_orphan_tool_results_and_target_checks_only_report() {
    use persyk::session::context::to_context;
    use persyk::session::target::{TargetCaps, check_target};

    let history = golden_history("tool-result");
    let ids: Vec<&str> = history.iter().map(|h| &*h.id).collect();
    // History keeps the orphan tool result (tr2 answers a call nobody made).
    assert_eq!(ids, ["u1", "a1", "tr1", "a2", "tr2", "tr3"]);
    let ctx = to_context(&history);
    let sources: Vec<&str> = ctx.messages.iter().map(|m| &*m.source_id).collect();
    assert_eq!(sources, ["u1", "a1", "tr1", "a2", "tr3"]);
    assert_eq!(ctx.dropped_orphan_tool_results, 1);
    assert_eq!(ctx.skipped_unknown_blocks, 0);

    // A text-only API cannot carry reasoning, tool calls or tool results: reported, per
    // message, never an error.
    let issues = check_target(&ctx, &TargetCaps::TEXT_ONLY);
    let at = |i: usize| -> Vec<&str> {
        issues
            .iter()
            .filter(|x| x.message == i)
            .map(|x| x.block_type)
            .collect()
    };
    assert!(at(0).is_empty(), "plain user text is fine");
    assert!(at(1).contains(&"thinking") && at(1).contains(&"toolCall"));
    assert_eq!(at(2), ["toolResult"]);
    assert_eq!(at(4), ["toolResult"]);
    // The Realtime API carries tool calls but no reasoning blocks.
    let realtime = check_target(&ctx, &TargetCaps::OPENAI_REALTIME);
    assert!(realtime.iter().all(|x| x.block_type == "thinking"));
    assert!(!realtime.is_empty());
    // Checking changed nothing the history read produced.
    assert_eq!(golden_history("tool-result").len(), history.len());
}

#[test]
fn generic_context_skips_unknown_blocks_that_history_keeps() {
    let history = golden_history("unknown-blocks-and-keys");
    let ctx = persyk::session::context::to_context(&history);
    assert_eq!(ctx.messages.len(), history.len());
    // transcript_segment, hologram, citation, refusal, input_audio_transcript
    assert_eq!(ctx.skipped_unknown_blocks, 5);
    assert!(history.iter().any(|h| h.raw.get().contains("hologram")));
}
