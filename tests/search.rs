//! Discovery, listing and search (issue #4), through the library and the `persyk` binary.
//!
//! The centrepiece is `differential_search_matches_the_naive_reference`: a generated corpus
//! of sessions — branches, removals, renamed sessions, relabelled entries, custom state,
//! realtime payloads, thinking and tool arguments carrying the same words, three JSON string
//! encodings (plain UTF-8, ASCII-only `\u` escapes, gratuitous escapes of plain letters),
//! Unicode case variants, invalid files — is searched for every query of a generated list,
//! and every answer is compared with a naive reference that validates, projects and reads
//! every file in full. The same loop checks that the byte prefilter never rules out a file
//! the reference matches.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use persyk::session::discover::{self, Discovery, RootSpec};
use persyk::session::format::{Block, CustomContent, EntryBody};
use persyk::session::history;
use persyk::session::search::{self, Cursor, EXCERPT_CHARS, PageRequest, Query, SessionRow};
use persyk::session::{self as session, LeafSelector};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Building session files
// ---------------------------------------------------------------------------------------------

fn ts(second: u64) -> String {
    format!(
        "2026-01-{:02}T{:02}:{:02}:{:02}Z",
        1 + second / 86_400 % 28,
        second / 3600 % 24,
        second / 60 % 60,
        second % 60
    )
}

fn header(id: &str, created: &str) -> String {
    json!({"type":"session","version":1,"id":id,"timestamp":created}).to_string()
}

/// One entry line: the envelope, then `body`'s members.
fn rec(ty: &str, id: &str, parent: Option<&str>, body: Value) -> String {
    let mut obj = serde_json::Map::new();
    obj.insert("type".into(), json!(ty));
    obj.insert("id".into(), json!(id));
    obj.insert("parentId".into(), json!(parent));
    obj.insert("timestamp".into(), json!("2026-01-01T00:00:01Z"));
    if let Value::Object(m) = body {
        obj.extend(m);
    }
    Value::Object(obj).to_string()
}

fn msg(id: &str, parent: Option<&str>, role: &str, text: &str) -> String {
    rec(
        "message",
        id,
        parent,
        json!({"message":{"role":role,"content":[{"type":"text","text":text}],"timestamp":1}}),
    )
}

fn write_session(root: &Path, name: &str, lines: &[String]) -> PathBuf {
    let dir = root.join(name);
    fs::create_dir_all(dir.join("assets")).expect("session dir");
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(dir.join("session.jsonl"), text).expect("write session");
    dir.canonicalize().expect("canonical")
}

fn discover_roots(roots: &[&Path]) -> Discovery {
    let specs: Vec<RootSpec> = roots.iter().map(|r| RootSpec::explicit(*r)).collect();
    discover::discover(&specs)
}

fn all_pages(limit: usize, mut f: impl FnMut(&PageRequest) -> search::Page) -> Vec<SessionRow> {
    let mut rows = Vec::new();
    let mut req = PageRequest {
        limit,
        cursor: None,
    };
    for _ in 0..10_000 {
        let page = f(&req);
        assert!(page.rows.len() <= limit);
        rows.extend(page.rows);
        match page.next {
            Some(c) => req.cursor = Some(c),
            None => return rows,
        }
    }
    panic!("pagination does not end");
}

fn hits(roots: &[&Path], q: &str) -> Vec<SessionRow> {
    let d = discover_roots(roots);
    let query = Query::new(q).expect("query");
    all_pages(500, |p| search::search(&d, &query, p))
}

fn hit_locations(roots: &[&Path], q: &str) -> Vec<PathBuf> {
    hits(roots, q).into_iter().map(|r| r.location).collect()
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

// ---------------------------------------------------------------------------------------------
// What matches
// ---------------------------------------------------------------------------------------------

#[test]
fn branches_and_removals_do_not_match() {
    let t = tmp();
    let root = t.path();
    let loc = write_session(
        root,
        "s",
        &[
            header("s1", "2026-01-01T00:00:00Z"),
            msg("a", None, "user", "alpha words"),
            msg("b", Some("a"), "user", "bravo on a sibling branch"),
            msg("c", Some("a"), "user", "charlie on the default path"),
            rec("message.removed", "r", Some("c"), json!({"targetId":"a"})),
        ],
    );
    assert!(
        hit_locations(&[root], "alpha").is_empty(),
        "removed content"
    );
    assert!(hit_locations(&[root], "bravo").is_empty(), "sibling branch");
    let h = hits(&[root], "CHARLIE");
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].location, loc);
    assert_eq!(h[0].leaf_id.as_deref(), Some("r"));
    assert_eq!(h[0].session_id.as_deref(), Some("s1"));
    assert_eq!(h[0].excerpt.as_deref(), Some("charlie on the default path"));
    assert_eq!(h[0].message_count, Some(1));
}

#[test]
fn names_and_labels_changed_later_match_only_their_current_value() {
    let t = tmp();
    let root = t.path();
    write_session(
        root,
        "s",
        &[
            header("s1", "2026-01-01T00:00:00Z"),
            rec("session_info", "n1", None, json!({"name":"First title"})),
            msg("m", Some("n1"), "user", "plain words"),
            rec(
                "label",
                "l1",
                Some("m"),
                json!({"targetId":"m","label":"old tag"}),
            ),
            rec(
                "label",
                "l2",
                Some("l1"),
                json!({"targetId":"m","label":"new tag"}),
            ),
            rec(
                "label",
                "l3",
                Some("l2"),
                json!({"targetId":"n1","label":"cleared tag"}),
            ),
            rec(
                "label",
                "l4",
                Some("l3"),
                json!({"targetId":"n1","label":null}),
            ),
            rec(
                "session_info",
                "n2",
                Some("l4"),
                json!({"name":"Second title"}),
            ),
            // Archiving does not clear the name.
            rec("session_info", "n3", Some("n2"), json!({"archived":true})),
        ],
    );
    assert!(hit_locations(&[root], "first").is_empty());
    assert!(hit_locations(&[root], "old tag").is_empty());
    assert!(hit_locations(&[root], "cleared").is_empty());
    let h = hits(&[root], "second");
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].excerpt.as_deref(), Some("Second title"));
    assert_eq!(h[0].label, "Second title");
    assert!(h[0].archived);
    let h = hits(&[root], "NEW TAG");
    assert_eq!(h[0].excerpt.as_deref(), Some("new tag"));
    // Conversation text comes first when several fields match.
    let h = hits(&[root], "i");
    assert_eq!(h[0].excerpt.as_deref(), Some("plain words"));
}

#[test]
fn protocol_custom_state_and_hidden_fields_do_not_match() {
    let t = tmp();
    let root = t.path();
    let lines = vec![
        header("s1", "2026-01-01T00:00:00Z"),
        rec(
            "realtime_event",
            "e1",
            None,
            json!({"connectionId":"c1","direction":"incoming","observation":"received",
                   "observedAt":"2026-01-01T00:00:01Z","sequence":1,
                   "payload":{"type":"conversation.item.input_audio_transcription.delta","delta":"zebra"}}),
        ),
        rec(
            "custom",
            "c1",
            Some("e1"),
            json!({"customType":"persyk.ui","data":{"note":"yak"}}),
        ),
        rec(
            "custom_message",
            "cm1",
            Some("c1"),
            json!({"customType":"x","content":"koala","display":true,"details":{"d":"walrus"}}),
        ),
        rec(
            "custom_message",
            "cm2",
            Some("cm1"),
            json!({"customType":"x","content":[{"type":"text","text":"panda"}],"display":false}),
        ),
        rec(
            "message",
            "m1",
            Some("cm2"),
            json!({"message":{"role":"assistant","content":[
                {"type":"thinking","thinking":"otter"},
                {"type":"toolCall","id":"t1","name":"lookup","arguments":{"q":"lemur"}},
                {"type":"text","text":"visible"}],"timestamp":1}}),
        ),
        rec(
            "model_change",
            "mc",
            Some("m1"),
            json!({"provider":"gibbon","modelId":"gibbon-1"}),
        ),
    ];
    write_session(root, "s", &lines);
    for hidden in ["zebra", "yak", "walrus", "otter", "lemur", "gibbon", "s1"] {
        assert!(hit_locations(&[root], hidden).is_empty(), "{hidden}");
    }
    for shown in ["koala", "panda", "visible"] {
        assert_eq!(hit_locations(&[root], shown).len(), 1, "{shown}");
    }
    // A realtime payload that holds the query does not make a later message less findable.
    assert_eq!(hits(&[root], "KOALA")[0].leaf_id.as_deref(), Some("mc"));
}

#[test]
fn unicode_case_folding() {
    let t = tmp();
    let root = t.path();
    let cases = [
        ("a", "Nous allons à l'école demain"),
        ("b", "GROSSE ÉCOLE"),
        ("c", "ΟΔΟΣ and οδος"),
        ("d", "temperature in \u{212A}elvin"),
        ("e", "İstanbul trip"),
        ("f", "Straße"),
    ];
    for (i, (name, text)) in cases.iter().enumerate() {
        write_session(
            root,
            name,
            &[header(name, &ts(i as u64)), msg("m", None, "user", text)],
        );
    }
    let names = |q: &str| -> BTreeSet<String> {
        hits(&[root], q)
            .into_iter()
            .map(|r| r.session_id.unwrap_or_default())
            .collect()
    };
    let set = |v: &[&str]| -> BTreeSet<String> { v.iter().map(|s| s.to_string()).collect() };
    assert_eq!(names("ÉCOLE"), set(&["a", "b"]));
    assert_eq!(names("école"), set(&["a", "b"]));
    assert_eq!(names("Écolé"), set(&[]));
    assert_eq!(names("οδοσ"), set(&["c"]));
    assert_eq!(names("ΟΔΟΣ AND"), set(&["c"]));
    assert_eq!(names("KELVIN"), set(&["d"]), "the Kelvin sign folds to k");
    assert_eq!(names("İSTANBUL"), set(&["e"]));
    assert_eq!(names("STRAßE"), set(&["f"]));
    // Lowercase, not full case folding: ß is not ss, İ keeps its dot.
    assert_eq!(names("strasse"), set(&[]));
    assert_eq!(names("istanbul"), set(&[]));
}

#[test]
fn json_escapes_in_stored_text() {
    let t = tmp();
    let root = t.path();
    // Written by hand: every kind of escape the format allows, inside one text block.
    let text = r#"say \"hi\" line1\nline2 tab\there caf\u00e9 \u00C9COLE smile \ud83d\ude00 back\\slash a\/b \u0062udget"#;
    let line = format!(
        r#"{{"type":"message","id":"m","parentId":null,"timestamp":"2026-01-01T00:00:01Z","message":{{"role":"user","content":[{{"type":"text","text":"{text}"}}],"timestamp":1}}}}"#
    );
    let loc = write_session(root, "s", &[header("s1", "2026-01-01T00:00:00Z"), line]);
    assert!(
        session::scan_path(&loc.join("session.jsonl"))
            .unwrap()
            .is_valid()
    );
    for q in [
        "say \"hi\"",
        "\"",
        "line1\nline2",
        "\n",
        "tab\there",
        "café",
        "CAFÉ",
        "école",
        "😀",
        "smile 😀",
        "back\\slash",
        "\\",
        "a/b",
        "budget",
        "BUDGET",
    ] {
        let h = hits(&[root], q);
        assert_eq!(h.len(), 1, "query {q:?}");
        let ex = h[0].excerpt.as_deref().unwrap();
        assert!(
            ex.starts_with("say \"hi\" line1 line2 tab here café ÉCOLE"),
            "{ex}"
        );
    }
    for q in ["\\n", "u00e9", "\\u0062", "line1 line2", "nline2"] {
        assert!(hit_locations(&[root], q).is_empty(), "query {q:?}");
    }
}

#[test]
fn excerpts_are_bounded_and_surround_the_first_match() {
    let t = tmp();
    let root = t.path();
    let before = "word ".repeat(100);
    let after = " ünïcödé".repeat(100);
    write_session(
        root,
        "s",
        &[
            header("s1", "2026-01-01T00:00:00Z"),
            msg("m1", None, "assistant", "nothing here"),
            msg("m2", Some("m1"), "user", &format!("{before}NEEDLE{after}")),
            msg("m3", Some("m2"), "user", "needle again, later"),
        ],
    );
    let h = hits(&[root], "needle");
    let ex = h[0].excerpt.as_deref().unwrap();
    assert_eq!(ex.chars().count(), EXCERPT_CHARS);
    assert!(ex.contains("word NEEDLE ünï"), "{ex}");
    // The fallback label is the first user text, trimmed and bounded.
    assert!(h[0].label.starts_with("word word"));
    assert_eq!(h[0].label.chars().count(), search::LABEL_CHARS);
}

// ---------------------------------------------------------------------------------------------
// Discovery
// ---------------------------------------------------------------------------------------------

#[test]
fn duplicate_ids_in_two_roots_are_both_listed_and_flagged() {
    let t = tmp();
    let (r1, r2) = (t.path().join("one"), t.path().join("two"));
    let a = write_session(
        &r1,
        "a",
        &[
            header("same", "2026-01-01T00:00:00Z"),
            msg("m", None, "user", "copy"),
        ],
    );
    let b = write_session(
        &r2,
        "b",
        &[
            header("same", "2026-01-01T00:00:00Z"),
            msg("m", None, "user", "copy"),
        ],
    );
    let c = write_session(&r2, "c", &[header("other", "2026-01-02T00:00:00Z")]);
    let d = discover_roots(&[&r1, &r2]);
    assert!(d.root_diagnostics.is_empty());
    let page = search::list(&d, &PageRequest::default());
    let rows: Vec<(PathBuf, Option<PathBuf>)> = page
        .rows
        .iter()
        .map(|r| (r.location.clone(), r.duplicate_of.clone()))
        .collect();
    assert_eq!(
        rows,
        vec![
            (c, None),
            (a.clone(), Some(b.clone())),
            (b.clone(), Some(a.clone()))
        ]
    );
    let h = hits(&[&r1, &r2], "copy");
    assert_eq!(h.len(), 2);
    assert!(h.iter().all(|r| r.duplicate_of.is_some()));
}

#[test]
fn symlinked_session_directories_are_listed_once_at_their_canonical_location() {
    let t = tmp();
    let root = t.path().join("root");
    let other_root = t.path().join("root2");
    fs::create_dir_all(&other_root).unwrap();
    let real = write_session(
        &root,
        "real",
        &[
            header("in", "2026-01-01T00:00:00Z"),
            msg("m", None, "user", "inside"),
        ],
    );
    symlink(&real, root.join("alias")).unwrap();
    let outside = write_session(
        &t.path().join("elsewhere"),
        "ext",
        &[
            header("out", "2026-01-02T00:00:00Z"),
            msg("m", None, "user", "outside"),
        ],
    );
    symlink(&outside, root.join("ext-link")).unwrap();
    symlink(&outside, other_root.join("ext-link-2")).unwrap();
    // A link to something that is not a session, and a dangling link: not sessions.
    fs::create_dir_all(t.path().join("plain")).unwrap();
    symlink(t.path().join("plain"), root.join("plain-link")).unwrap();
    symlink(t.path().join("gone"), root.join("dangling")).unwrap();

    let d = discover_roots(&[&root, &other_root]);
    let locations: Vec<&Path> = d.sessions.iter().map(|s| s.location.as_path()).collect();
    assert_eq!(locations, vec![outside.as_path(), real.as_path()]);
    assert!(d.sessions.iter().all(|s| s.duplicate_of.is_none()));
    assert_eq!(
        hit_locations(&[&root, &other_root], "side"),
        vec![outside, real]
    );
}

#[test]
fn missing_and_unreadable_roots_are_diagnostics() {
    let t = tmp();
    let good = t.path().join("good");
    write_session(&good, "s", &[header("s1", "2026-01-01T00:00:00Z")]);
    let file_root = t.path().join("a-file");
    fs::write(&file_root, "x").unwrap();
    let under_file = file_root.join("sub");
    let too_long = t.path().join("x".repeat(300));
    let specs = vec![
        RootSpec::explicit(t.path().join("missing")),
        RootSpec {
            path: t.path().join("missing-default"),
            explicit: false,
        },
        RootSpec::explicit(&file_root),
        RootSpec::explicit(&under_file),
        RootSpec::explicit(&too_long),
        RootSpec::explicit(&good),
    ];
    let d = discover::discover(&specs);
    let codes: Vec<&str> = d.root_diagnostics.iter().map(|e| e.code()).collect();
    assert_eq!(
        codes,
        vec![
            "discover.root-missing",
            "discover.root-not-directory",
            "discover.root-unreadable",
            "discover.root-unreadable",
        ]
    );
    assert_eq!(d.sessions.len(), 1);
    // A missing default root alone: an empty list, nothing to report.
    let d = discover::discover(&specs[1..2]);
    assert!(d.sessions.is_empty() && d.root_diagnostics.is_empty());
    // Permission bits mean nothing to root, so this part only runs for other users.
    let euid = fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
    if euid != 0 {
        let locked = t.path().join("locked");
        fs::create_dir_all(&locked).unwrap();
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
        let d = discover_roots(&[&locked]);
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(d.root_diagnostics[0].code(), "discover.root-unreadable");
    }
}

#[test]
fn invalid_and_odd_sessions_are_listed_not_hidden() {
    let t = tmp();
    let root = t.path();
    write_session(root, "no-header", &[msg("m", None, "user", "hello")]);
    write_session(
        root,
        "bad-parent",
        &[
            header("bad", "2026-01-03T00:00:00Z"),
            msg("m", Some("nope"), "user", "orphan hello"),
        ],
    );
    let tail = write_session(
        root,
        "tail",
        &[
            header("tail", "2026-01-02T00:00:00Z"),
            msg("m", None, "user", "hello tail"),
        ],
    );
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(tail.join("session.jsonl"))
        .unwrap();
    f.write_all(br#"{"type":"message","id":"half"#).unwrap();
    let linked = root.join("linked-file");
    fs::create_dir_all(&linked).unwrap();
    symlink(tail.join("session.jsonl"), linked.join("session.jsonl")).unwrap();
    // Not sessions: folders without session.jsonl, dot folders (staging and trash).
    fs::create_dir_all(root.join("empty-folder")).unwrap();
    write_session(
        root,
        ".persyk-new-x",
        &[header("new", "2026-01-05T00:00:00Z")],
    );
    write_session(
        &root.join(".persyk-trash"),
        "gone",
        &[header("gone", "2026-01-05T00:00:00Z")],
    );
    write_session(root, ".hidden", &[header("hidden", "2026-01-05T00:00:00Z")]);

    let d = discover_roots(&[root]);
    let page = search::list(&d, &PageRequest::default());
    let rows: Vec<(String, Option<&str>)> = page
        .rows
        .iter()
        .map(|r| {
            let name = r
                .location
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (name, r.diagnostic)
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("bad-parent".into(), Some("entry.parent-missing")),
            ("tail".into(), Some("file.incomplete-tail")),
            (
                "linked-file".into(),
                Some("discover.session-file-not-regular")
            ),
            ("no-header".into(), Some("header.missing")),
        ]
    );
    let bad = &page.rows[0];
    assert_eq!(bad.session_id.as_deref(), Some("bad"));
    assert_eq!((bad.leaf_id.as_deref(), bad.message_count), (None, None));
    assert_eq!(bad.label, search::UNTITLED);
    // The committed part of a file with an incomplete tail stays searchable.
    let q = Query::new("hello").unwrap();
    let found = search::search(&d, &q, &PageRequest::default());
    let names: Vec<_> = found
        .rows
        .iter()
        .map(|r| r.session_id.clone().unwrap())
        .collect();
    assert_eq!(names, vec!["tail"]);
    assert_eq!(found.rows[0].diagnostic, Some("file.incomplete-tail"));
    let mut skipped: Vec<&str> = found.skipped.iter().map(|s| s.code).collect();
    skipped.sort_unstable();
    assert_eq!(
        skipped,
        vec![
            "discover.session-file-not-regular",
            "entry.parent-missing",
            "header.missing"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Listing
// ---------------------------------------------------------------------------------------------

#[test]
fn listing_rows_labels_counts_and_durations() {
    let t = tmp();
    let root = t.path();
    let named = write_session(
        root,
        "named",
        &[
            header("named", "2026-01-03T00:00:00+02:00"),
            rec(
                "session_info",
                "i",
                None,
                json!({"name":"  Groceries\nlist "}),
            ),
            rec(
                "recording.started",
                "r1",
                Some("i"),
                json!({"recordingId":"rec1","asset":"assets/rec1.wav"}),
            ),
            rec(
                "recording.finished",
                "r2",
                Some("r1"),
                json!({"recordingId":"rec1","durationMs":1500,"outcome":"complete"}),
            ),
            rec(
                "recording.interrupted",
                "r3",
                Some("r2"),
                json!({"recordingId":"rec2","reason":"crash","durationMs":250}),
            ),
            rec(
                "recording.interrupted",
                "r4",
                Some("r3"),
                json!({"recordingId":"rec3","reason":"crash"}),
            ),
            msg("m", Some("r4"), "user", "milk"),
        ],
    );
    let fallback = write_session(
        root,
        "fallback",
        &[
            header("fallback", "2026-01-02T00:00:00Z"),
            msg("a", None, "assistant", "assistant text first"),
            msg("b", Some("a"), "user", "   "),
            msg("c", Some("b"), "user", "\tFirst user words\nmore"),
        ],
    );
    let untitled = write_session(
        root,
        "untitled",
        &[
            header("untitled", "2026-01-01T00:00:00Z"),
            msg("a", None, "assistant", "only the assistant"),
        ],
    );
    let header_only = write_session(root, "header-only", &[header("h", "2025-12-31T00:00:00Z")]);
    let d = discover_roots(&[root]);
    let rows = search::list(&d, &PageRequest::default()).rows;
    let locations: Vec<&Path> = rows.iter().map(|r| r.location.as_path()).collect();
    // 2026-01-03T00:00+02:00 is 2026-01-02T22:00Z: still the newest.
    assert_eq!(
        locations,
        vec![&*named, &*fallback, &*untitled, &*header_only]
    );
    assert_eq!(rows[0].label, "Groceries list");
    assert_eq!(rows[0].duration_ms, Some(1750));
    assert_eq!(rows[0].message_count, Some(1));
    assert_eq!(
        rows[0].created.as_deref(),
        Some("2026-01-03T00:00:00+02:00")
    );
    assert_eq!(rows[0].leaf_id.as_deref(), Some("m"));
    assert_eq!(rows[1].label, "First user words more");
    assert_eq!(rows[1].duration_ms, None);
    assert_eq!(rows[1].message_count, Some(3));
    assert_eq!(rows[2].label, search::UNTITLED);
    assert_eq!(rows[3].label, search::UNTITLED);
    assert_eq!(
        (rows[3].leaf_id.as_deref(), rows[3].message_count),
        (None, Some(0))
    );
    assert!(
        rows.iter()
            .all(|r| r.diagnostic.is_none() && r.excerpt.is_none())
    );
    // The placeholder is not search text.
    assert!(hit_locations(&[root], "untitled").is_empty());
}

#[test]
fn pages_follow_the_cursor_and_concatenate_to_the_whole() {
    let t = tmp();
    let (r1, r2) = (t.path().join("a"), t.path().join("b"));
    for i in 0..23u64 {
        let root = if i % 3 == 0 { &r2 } else { &r1 };
        // Pairs of equal created times: ties are broken by location.
        write_session(
            root,
            &format!("s{i:02}"),
            &[
                header(&format!("id{i}"), &ts(i / 2)),
                msg(
                    "m",
                    None,
                    "user",
                    if i % 2 == 0 {
                        "even words"
                    } else {
                        "odd words"
                    },
                ),
            ],
        );
    }
    let d = discover_roots(&[&r1, &r2]);
    let whole = search::list(
        &d,
        &PageRequest {
            limit: 500,
            cursor: None,
        },
    )
    .rows;
    assert_eq!(whole.len(), 23);
    for w in whole.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(
            a.created > b.created || (a.created == b.created && a.location < b.location),
            "order"
        );
    }
    for limit in [1, 4, 23, 50] {
        let paged = all_pages(limit, |p| search::list(&d, p));
        assert_eq!(paged, whole, "limit {limit}");
    }
    let q = Query::new("EVEN").unwrap();
    let every = search::search(
        &d,
        &q,
        &PageRequest {
            limit: 500,
            cursor: None,
        },
    )
    .rows;
    assert_eq!(every.len(), 12);
    for limit in [1, 5, 12] {
        let paged = all_pages(limit, |p| search::search(&d, &q, p));
        assert_eq!(paged, every, "limit {limit}");
    }
    // Limits are clamped to 1..=500; cursors are opaque but checked.
    assert_eq!(
        search::list(
            &d,
            &PageRequest {
                limit: 0,
                cursor: None
            }
        )
        .rows
        .len(),
        1
    );
    assert!(Cursor::decode("not a cursor").is_err());
    let c = whole[5].cursor.encode();
    let rest = search::list(
        &d,
        &PageRequest {
            limit: 500,
            cursor: Some(Cursor::decode(&c).unwrap()),
        },
    )
    .rows;
    assert_eq!(rest, whole[6..].to_vec());
}

// ---------------------------------------------------------------------------------------------
// The differential test
// ---------------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Words the corpus is made of: case variants, escapes-to-be, multi-byte and astral text.
const VOCAB: &[&str] = &[
    "budget",
    "Budget",
    "BUDGET",
    "meeting",
    "école",
    "École",
    "ÉCOLE",
    "straße",
    "STRAßE",
    "naïve",
    "Zoë",
    "日本語",
    "🙂",
    "😀",
    "ΟΔΟΣ",
    "οδος",
    "\u{212A}elvin",
    "kelvin",
    "İstanbul",
    "istanbul",
    "say \"hi\"",
    "tab\there",
    "line\nbreak",
    "back\\slash",
    "a/b",
    "x-ray",
    "50%",
    "the",
    "and",
    "milk",
    "eggs",
    "Ünïcödé",
    "ﬁne",
    "ǅemal",
    "ΣΊΣΥΦΟΣ",
    "kiss",
    "NAİVE",
    "Ö\u{212A}ELVIN",
];

/// Words that only ever appear where search must not look.
const HIDDEN: &[&str] = &[
    "payloadonly",
    "customonly",
    "detailsonly",
    "thinkingonly",
    "toolargonly",
];

fn sentence(rng: &mut Rng) -> String {
    let n = 1 + rng.below(6);
    (0..n)
        .map(|_| *rng.pick(VOCAB))
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Clone, Copy, PartialEq)]
enum Style {
    /// UTF-8 as is, only the escapes JSON requires.
    Plain,
    /// Everything outside ASCII as `\u` escapes (surrogate pairs for astral characters).
    AsciiOnly,
    /// Gratuitous escapes: plain letters as `\u00XX`, `\/`, mixed-case hex.
    Wild,
}

fn push_u(out: &mut String, unit: u32, rng: &mut Rng) {
    let hex = format!("{unit:04x}");
    out.push_str("\\u");
    out.push_str(&if rng.chance(50) {
        hex.to_uppercase()
    } else {
        hex
    });
}

fn enc_str(s: &str, style: Style, rng: &mut Rng) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => push_u(&mut out, c as u32, rng),
            '/' if style == Style::Wild && rng.chance(50) => out.push_str("\\/"),
            c if !c.is_ascii()
                && (style == Style::AsciiOnly || (style == Style::Wild && rng.chance(50))) =>
            {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    push_u(&mut out, u32::from(*unit), rng);
                }
            }
            c if style == Style::Wild && rng.chance(20) => push_u(&mut out, c as u32, rng),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Serializes `v` with every string in `style`.
fn enc(v: &Value, style: Style, rng: &mut Rng) -> String {
    match v {
        Value::String(s) => enc_str(s, style, rng),
        Value::Array(a) => format!(
            "[{}]",
            a.iter()
                .map(|x| enc(x, style, rng))
                .collect::<Vec<_>>()
                .join(",")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, x)| format!("{}:{}", enc_str(k, Style::Plain, rng), enc(x, style, rng)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

/// A generated session file: lines, plus which ids are conversation entries.
fn generated_session(rng: &mut Rng, n: usize) -> String {
    let style = *rng.pick(&[Style::Plain, Style::AsciiOnly, Style::Wild]);
    let mut lines = vec![header(&format!("g{n}"), &ts(rng.below(5000) as u64))];
    let mut ids: Vec<String> = Vec::new();
    let mut parents: Vec<Option<usize>> = Vec::new();
    let mut conversation: Vec<bool> = Vec::new();
    let mut seq = 0u64;
    let count = rng.below(14);
    for i in 0..count {
        let id = format!("e{i}");
        // Mostly a chain; sometimes a branch from an earlier entry or a new root.
        let parent = if ids.is_empty() || rng.chance(8) {
            None
        } else if rng.chance(20) {
            Some(rng.below(ids.len()))
        } else {
            Some(ids.len() - 1)
        };
        let mut is_conv = false;
        let body: (&str, Value) = match rng.below(12) {
            0..=3 => {
                is_conv = true;
                let mut content = vec![json!({"type":"text","text":sentence(rng)})];
                if rng.chance(30) {
                    content.push(json!({"type":"text","text":sentence(rng)}));
                }
                if rng.chance(20) {
                    content.push(json!({"type":"thinking","thinking":"thinkingonly"}));
                }
                if rng.chance(20) {
                    content.push(json!({"type":"toolCall","id":"t","name":"f","arguments":{"a":"toolargonly"}}));
                }
                let role = *rng.pick(&["user", "assistant"]);
                (
                    "message",
                    json!({"message":{"role":role,"content":content,"timestamp":1}}),
                )
            }
            4 => {
                is_conv = true;
                let content = if rng.chance(50) {
                    json!(sentence(rng))
                } else {
                    json!([{"type":"text","text":sentence(rng)}])
                };
                (
                    "custom_message",
                    json!({"customType":"note","content":content,"display":true,"details":{"d":"detailsonly"}}),
                )
            }
            5 => (
                "custom",
                json!({"customType":"ui","data":{"state":"customonly","also":sentence(rng)}}),
            ),
            6 | 7 => {
                seq += 1;
                (
                    "realtime_event",
                    json!({"connectionId":"c","direction":"incoming","observation":"received",
                           "observedAt":"2026-01-01T00:00:01Z","sequence":seq,
                           "payload":{"type":"delta","delta":"payloadonly","transcript":sentence(rng)}}),
                )
            }
            8 => ("session_info", json!({"name":sentence(rng)})),
            9 if !ids.is_empty() => {
                let target = rng.below(ids.len());
                let label = if rng.chance(25) {
                    Value::Null
                } else {
                    json!(sentence(rng))
                };
                ("label", json!({"targetId":ids[target],"label":label}))
            }
            10 => {
                // A removal of a conversation ancestor of the parent, when there is one.
                let mut ancestors = Vec::new();
                let mut cur = parent;
                while let Some(p) = cur {
                    if conversation[p] {
                        ancestors.push(p);
                    }
                    cur = parents[p];
                }
                if ancestors.is_empty() {
                    ("session_info", json!({"archived":rng.chance(50)}))
                } else {
                    let t = *rng.pick(&ancestors);
                    ("message.removed", json!({"targetId":ids[t]}))
                }
            }
            _ => (
                "recording.finished",
                json!({"recordingId":"r","durationMs":10,"outcome":"complete"}),
            ),
        };
        let mut obj = serde_json::Map::new();
        obj.insert("type".into(), json!(body.0));
        obj.insert("id".into(), json!(id));
        obj.insert("parentId".into(), json!(parent.map(|p| ids[p].clone())));
        obj.insert("timestamp".into(), json!("2026-01-01T00:00:01Z"));
        if let Value::Object(m) = body.1 {
            obj.extend(m);
        }
        let mut line = enc(&Value::Object(obj.clone()), style, rng);
        if rng.chance(10) {
            // The same record with `type` last: the prefilter must not rely on key order.
            let ty = obj.shift_remove("type").unwrap_or_default();
            obj.insert("type".into(), ty);
            line = enc(&Value::Object(obj), style, rng);
        }
        lines.push(line);
        ids.push(id);
        parents.push(parent);
        conversation.push(is_conv);
    }
    if rng.chance(5) {
        // An invalid record: the session is listed but not searched.
        lines.push(r#"{"type":"message","id":"bad"}"#.into());
    }
    let mut text = lines.join("\n");
    text.push('\n');
    if rng.chance(5) {
        text.push_str(&enc(
            &json!({"type":"message","tail":sentence(rng)}),
            style,
            rng,
        ));
    }
    text
}

/// The naive reference fold: lowercase each character, final sigma as sigma.
fn reference_fold(s: &str) -> String {
    s.chars()
        .flat_map(|c| if c == 'ς' { 'σ' } else { c }.to_lowercase())
        .collect()
}

/// The default leaf and every search field of an authoritative session.
type Fields = Option<(String, Vec<String>)>;

/// Every search field of an authoritative session, in full: the slow, obvious way.
fn reference_fields(file: &Path) -> Fields {
    let index = session::scan_path(file).expect("scan");
    let projection = session::project(&index, &LeafSelector::Default).ok()?;
    let mut f = File::open(file).expect("open");
    let items = history::effective_history(&mut f, &index, &projection)
        .collect::<Result<Vec<_>, _>>()
        .expect("history");
    let mut fields = Vec::new();
    let texts = |blocks: &[Block], fields: &mut Vec<String>| {
        for b in blocks {
            if let Block::Text { text } = b {
                fields.push(text.clone());
            }
        }
    };
    for item in items {
        match item.entry.body {
            EntryBody::Message(m) => texts(&m.content, &mut fields),
            EntryBody::CustomMessage(cm) => match cm.content {
                CustomContent::Text(t) => fields.push(t),
                CustomContent::Blocks(b) => texts(&b, &mut fields),
            },
            _ => {}
        }
    }
    fields.extend(index.name().map(str::to_owned));
    fields.extend(index.labels().map(|(_, l)| l.to_owned()));
    let leaf = projection
        .leaf
        .map(|p| index.id(p).into_owned())
        .unwrap_or_default();
    Some((leaf, fields))
}

#[test]
fn differential_search_matches_the_naive_reference() {
    let t = tmp();
    let roots = [t.path().join("r1"), t.path().join("r2")];
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut queries: BTreeSet<String> = BTreeSet::new();
    for n in 0..160 {
        let text = generated_session(&mut rng, n);
        let root = &roots[n % 2];
        let dir = root.join(format!("s{n:03}"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("session.jsonl"), &text).unwrap();
    }
    // Queries: every word in several spellings, pieces of words, phrases, hidden and absent
    // words, and every character that has an escape.
    for w in VOCAB.iter().chain(HIDDEN) {
        queries.insert(w.to_string());
        queries.insert(w.to_uppercase());
        queries.insert(w.to_lowercase());
        let chars: Vec<char> = w.chars().collect();
        if chars.len() > 2 {
            queries.insert(chars[1..chars.len() - 1].iter().collect());
        }
    }
    for _ in 0..40 {
        let s = sentence(&mut rng);
        let chars: Vec<char> = s.chars().collect();
        let a = rng.below(chars.len());
        let b = (a + 1 + rng.below(12)).min(chars.len());
        queries.insert(chars[a..b].iter().collect());
    }
    for q in [
        "\"",
        "\\",
        "/",
        "\n",
        "\t",
        "i",
        "k",
        "K",
        "I",
        "ı",
        "σ",
        "ς",
        "Σ",
        "é",
        "e",
        "🙂 ",
        "absentword",
        "ß",
        "ss",
        "u00",
        "\\u",
        "e0",
        "e1\"",
    ] {
        queries.insert(q.to_string());
    }
    let root_refs: Vec<&Path> = roots.iter().map(PathBuf::as_path).collect();
    let d = discover_roots(&root_refs);
    assert_eq!(d.sessions.len(), 160);
    let reference: Vec<(PathBuf, Fields)> = d
        .sessions
        .iter()
        .map(|s| (s.location.clone(), reference_fields(&s.file())))
        .collect();
    let authoritative = reference.iter().filter(|r| r.1.is_some()).count();
    assert!(
        authoritative > 120,
        "the corpus is mostly valid: {authoritative}"
    );

    let mut skipped_by_prefilter = 0usize;
    let mut total_matches = 0usize;
    for (qi, q) in queries.iter().enumerate() {
        let query = Query::new(q).unwrap();
        let needle = reference_fold(q);
        let expected: Vec<(PathBuf, String)> = reference
            .iter()
            .filter_map(|(loc, r)| {
                let (leaf, fields) = r.as_ref()?;
                fields
                    .iter()
                    .any(|f| reference_fold(f).contains(&needle))
                    .then(|| (loc.clone(), leaf.clone()))
            })
            .collect();
        // Prefilter soundness, file by file, reading whole files and in ragged pieces.
        for (loc, r) in &reference {
            let path = loc.join("session.jsonl");
            let may = query.may_match(File::open(&path).unwrap()).unwrap();
            let is_match = expected.iter().any(|(l, _)| l == loc);
            assert!(
                may || !is_match,
                "prefilter ruled out a match: {q:?} in {loc:?}"
            );
            if !may && r.is_some() {
                skipped_by_prefilter += 1;
            }
            if is_match {
                let bytes = fs::read(&path).unwrap();
                let choppy = Choppy::new(&bytes, rng.next());
                assert!(
                    query.may_match(choppy).unwrap(),
                    "ragged reads: {q:?} in {loc:?}"
                );
            }
        }
        let limits: &[usize] = if qi % 4 == 0 { &[500, 7] } else { &[500] };
        for &limit in limits {
            let got: Vec<(PathBuf, String)> = all_pages(limit, |p| search::search(&d, &query, p))
                .into_iter()
                .map(|row| {
                    let ex = row.excerpt.clone().expect("hits carry an excerpt");
                    assert!(ex.chars().count() <= EXCERPT_CHARS);
                    if !q.chars().any(char::is_control) && q.chars().count() < EXCERPT_CHARS {
                        assert!(
                            reference_fold(&ex).contains(&needle),
                            "excerpt {ex:?} lacks {q:?}"
                        );
                    }
                    (row.location, row.leaf_id.unwrap_or_default())
                })
                .collect();
            assert_eq!(got, expected, "query {q:?}, limit {limit}");
        }
        total_matches += expected.len();
    }
    eprintln!(
        "differential: {} queries, {total_matches} matches, {skipped_by_prefilter} files ruled out by the prefilter",
        queries.len()
    );
    // The corpus exercises both sides: many matches, and files the prefilter rules out.
    assert!(total_matches > 500, "{total_matches}");
    assert!(
        skipped_by_prefilter > queries.len() * 20,
        "the prefilter skips too little: {skipped_by_prefilter}"
    );
}

/// A reader that hands out its bytes in small pieces of random size.
struct Choppy<'a> {
    data: &'a [u8],
    rng: Rng,
}

impl<'a> Choppy<'a> {
    fn new(data: &'a [u8], seed: u64) -> Choppy<'a> {
        Choppy {
            data,
            rng: Rng(seed | 1),
        }
    }
}

impl Read for Choppy<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (1 + self.rng.below(700))
            .min(buf.len())
            .min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn prefilter_and_search_across_read_boundaries_and_long_lines() {
    let t = tmp();
    let root = t.path();
    let filler = |i: usize| {
        rec(
            "realtime_event",
            &format!("e{i}"),
            Some(&format!("e{}", i.saturating_sub(1)))
                .filter(|_| i > 0)
                .map(String::as_str),
            json!({"connectionId":"c","direction":"incoming","observation":"received",
                   "observedAt":"2026-01-01T00:00:01Z","sequence":i + 1,
                   "payload":{"type":"delta","delta":"needle in a payload ".repeat(5)}}),
        )
    };
    // Sessions whose one matching message starts at many offsets around the 256 KiB reads.
    let mut expected = Vec::new();
    for (k, shift) in [0usize, 1, 7, 100, 333, 1000].into_iter().enumerate() {
        let mut lines = vec![header(&format!("s{k}"), &ts(k as u64))];
        let mut size = lines[0].len() + 1;
        let mut i = 0;
        while size < 256 * 1024 - 40 + shift * 13 {
            lines.push(filler(i));
            size += lines.last().unwrap().len() + 1;
            i += 1;
        }
        let parent = format!("e{}", i - 1);
        lines.push(msg(
            "m",
            Some(&parent),
            "user",
            &format!("{} NEEDLE néedle", "é".repeat(k * 50)),
        ));
        expected.push(write_session(root, &format!("s{k}"), &lines));
    }
    // A record just under 1 MiB with the match at its end, and one over the limit.
    let big = "x".repeat((1 << 20) - 200);
    let near = write_session(
        root,
        "near-limit",
        &[
            header("near", &ts(100)),
            msg("m", None, "user", &format!("{big} needle")),
        ],
    );
    let over = write_session(
        root,
        "over-limit",
        &[
            header("over", &ts(101)),
            msg("m", None, "user", &format!("{big}{big} needle")),
        ],
    );
    // Only payloads mention it: nothing to find, and the prefilter knows without a scan.
    let payload_only = write_session(
        root,
        "payload-only",
        &(0..4000)
            .map(filler)
            .fold(vec![header("p", &ts(102))], |mut v, l| {
                v.push(l);
                v
            }),
    );
    for q in ["needle", "NÉEDLE", "éeDLE"] {
        let query = Query::new(q).unwrap();
        let file = |l: &Path| File::open(l.join("session.jsonl")).unwrap();
        let long = if q == "needle" {
            vec![&near, &over]
        } else {
            vec![]
        };
        for loc in expected.iter().chain(long) {
            assert!(query.may_match(file(loc)).unwrap(), "{q} {loc:?}");
            let bytes = fs::read(loc.join("session.jsonl")).unwrap();
            assert!(
                query.may_match(Choppy::new(&bytes, 7)).unwrap(),
                "{q} {loc:?}"
            );
        }
        assert!(!query.may_match(file(&payload_only)).unwrap());
    }
    let d = discover_roots(&[root]);
    let q = Query::new("needle").unwrap();
    let page = search::search(&d, &q, &PageRequest::default());
    let mut want: Vec<PathBuf> = expected.clone();
    want.reverse();
    want.insert(0, near.clone());
    let got: Vec<PathBuf> = page.rows.iter().map(|r| r.location.clone()).collect();
    assert_eq!(got, want);
    assert_eq!(
        page.rows[0]
            .excerpt
            .as_deref()
            .map(|e| e.ends_with("x needle")),
        Some(true)
    );
    assert_eq!(page.skipped.len(), 1);
    assert_eq!(page.skipped[0].location, over);
    assert_eq!(page.skipped[0].code, "record.too-large");
}

// ---------------------------------------------------------------------------------------------
// The binary
// ---------------------------------------------------------------------------------------------

fn persyk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_persyk"))
        .args(args)
        .env("PERSYK_CONFIG", "/nonexistent/persyk-test-settings.json")
        .output()
        .expect("run the persyk binary")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 test path")
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "invalid JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn cli_pinned_leaf_opens_the_old_leaf_after_an_append() {
    let t = tmp();
    let root = t.path().join("root");
    let loc = write_session(
        &root,
        "s",
        &[
            header("s1", "2026-01-01T00:00:00Z"),
            msg("m1", None, "user", "remember the quarterly numbers"),
            msg("m2", Some("m1"), "assistant", "noted"),
        ],
    );
    let out = persyk(&["search", "QUARTERLY", "--root", s(&root), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let rows = stdout_json(&out);
    let row = &rows[0];
    assert_eq!(row["location"], json!(s(&loc)));
    assert_eq!(row["sessionId"], json!("s1"));
    assert_eq!(row["leafId"], json!("m2"));
    assert_eq!(row["excerpt"], json!("remember the quarterly numbers"));
    assert!(row.get("duplicateOf").is_none());

    // The file grows after the result was shown.
    let append = Command::new(env!("CARGO_BIN_EXE_persyk"))
        .args(["append", s(&loc)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(br#"{"type":"message","id":"m3","message":{"role":"user","content":[{"type":"text","text":"quarterly again"}],"timestamp":2}}"#)?;
            child.wait_with_output()
        })
        .expect("append");
    assert!(append.status.success());

    let leaf = row["leafId"].as_str().unwrap();
    let out = persyk(&[
        "context",
        row["location"].as_str().unwrap(),
        "--leaf",
        leaf,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let ids: Vec<Value> = stdout_json(&out)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("m1"), json!("m2")]);
    // A new search sees the new default leaf.
    let rows = stdout_json(&persyk(&[
        "search",
        "quarterly",
        "--root",
        s(&root),
        "--json",
    ]));
    assert_eq!(rows[0]["leafId"], json!("m3"));
}

#[test]
fn cli_sessions_and_search_output() {
    let t = tmp();
    let (r1, r2) = (t.path().join("one"), t.path().join("two"));
    write_session(
        &r1,
        "a",
        &[
            header("dup", "2026-01-02T00:00:00Z"),
            msg("m", None, "user", "Hello there"),
            rec(
                "recording.finished",
                "r",
                Some("m"),
                json!({"recordingId":"x","durationMs":65000,"outcome":"complete"}),
            ),
        ],
    );
    write_session(&r2, "b", &[header("dup", "2026-01-01T00:00:00Z")]);
    write_session(
        &r2,
        "bad",
        &[
            header("bad", "2026-01-03T00:00:00Z"),
            r#"{"type":"message","text":"hello"}"#.into(),
        ],
    );
    let missing = t.path().join("missing");
    let args = ["--root", s(&r1), "--root", s(&r2), "--root", s(&missing)];

    let out = persyk(&[&["sessions", "--json"][..], &args].concat());
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("discover.root-missing"), "{stderr}");
    let rows = stdout_json(&out);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let keys: BTreeSet<&str> = rows[1]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = [
        "location",
        "sessionId",
        "leafId",
        "created",
        "label",
        "excerpt",
        "duplicateOf",
        "archived",
        "messageCount",
        "durationMs",
        "diagnostic",
        "cursor",
    ]
    .into_iter()
    .collect();
    assert_eq!(keys, expected);
    assert_eq!(rows[0]["diagnostic"], json!("entry.missing-field"));
    assert_eq!(rows[1]["label"], json!("Hello there"));
    assert_eq!(rows[1]["durationMs"], json!(65000));
    assert_eq!(rows[1]["excerpt"], Value::Null);
    assert!(rows[1]["duplicateOf"].as_str().unwrap().ends_with("/two/b"));
    assert!(rows[2]["duplicateOf"].as_str().unwrap().ends_with("/one/a"));

    // Human output: one line per row.
    let out = persyk(&[&["sessions", "--limit", "2"][..], &args].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains("[entry.missing-field]"));
    assert!(
        text.contains("Hello there  [1 messages]  [1:05]  [duplicate of "),
        "{text}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cursor = stderr
        .lines()
        .find_map(|l| l.strip_prefix("persyk: more results: --cursor "))
        .expect("a cursor for the next page");
    let out = persyk(&[&["sessions", "--cursor", cursor, "--json"][..], &args].concat());
    assert_eq!(stdout_json(&out).as_array().unwrap().len(), 1);

    let out = persyk(&[&["search", "hello"][..], &args].concat());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("{} --leaf r  ", s(&r1.join("a")))),
        "{text}"
    );
    assert!(
        text.contains("  Hello there: Hello there  [duplicate of "),
        "{text}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("entry.missing-field: not searched"),
        "{stderr}"
    );

    // Zero results are a normal, successful answer.
    let out = persyk(&[&["search", "absent", "--json"][..], &args].concat());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout_json(&out), json!([]));
    // Requests that cannot run.
    for bad in [
        &["search", "", "--root", "/tmp"][..],
        &["sessions", "--cursor", "zzz", "--root", "/tmp"],
        &["sessions", "--limit", "0", "--root", "/tmp"],
        &["sessions", "--limit", "501", "--root", "/tmp"],
    ] {
        assert_eq!(persyk(bad).status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn cli_settings_roots_and_the_missing_default_root() {
    let t = tmp();
    let home = t.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let run = |config: &Path, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_persyk"))
            .args(args)
            .env("PERSYK_CONFIG", config)
            .env("HOME", &home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DOCUMENTS_DIR")
            .output()
            .expect("run persyk")
    };
    // No settings file: the default root, which does not exist yet. Empty and quiet.
    let none = t.path().join("absent.json");
    let out = run(&none, &["sessions", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout_json(&out), json!([]));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");

    // Configured roots: a missing write root is reported; additional roots are searched.
    let extra = t.path().join("extra");
    write_session(
        &extra,
        "s",
        &[
            header("s1", "2026-01-01T00:00:00Z"),
            msg("m", None, "user", "from settings"),
        ],
    );
    let config = t.path().join("settings.json");
    fs::write(
        &config,
        json!({"sessions":{"directory":t.path().join("gone"),"additionalDirectories":[extra]}})
            .to_string(),
    )
    .unwrap();
    let out = run(&config, &["search", "SETTINGS", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout_json(&out)[0]["sessionId"], json!("s1"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("discover.root-missing"));

    fs::write(&config, "not json").unwrap();
    assert_eq!(run(&config, &["sessions"]).status.code(), Some(2));
}
