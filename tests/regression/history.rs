//! Regressions in reading long histories (issue #15): streamed context, bounded pages.

use std::fs;
use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;

use persyk::session::format::{EntryBody, Role, display_text};
use persyk::session::history::{self, EntryReader, MAX_PAGE};
use persyk::session::{self, LeafSelector};
use serde_json::value::RawValue;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden")
}

/// A valid session of `n` chained messages, each about `text_bytes` long.
fn session_bytes(n: usize, text_bytes: usize) -> Vec<u8> {
    let mut out = String::from(
        r#"{"type":"session","version":1,"id":"sess-long","timestamp":"2026-03-18T17:20:00.000Z"}"#,
    );
    out.push('\n');
    let text = "word ".repeat(text_bytes / 5);
    for i in 0..n {
        let parent = if i == 0 {
            "null".to_owned()
        } else {
            format!("\"m{}\"", i - 1)
        };
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        out.push_str(&format!(
            r#"{{"type":"message","id":"m{i}","parentId":{parent},"timestamp":"2026-03-18T17:20:04.000Z","message":{{"role":"{role}","content":[{{"type":"text","text":"{text}{i}"}}],"timestamp":1773854404000}}}}"#
        ));
        out.push('\n');
    }
    out.into_bytes()
}

/// What `persyk context --json` printed before it streamed: the whole document at once.
fn whole_document(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Serialize)]
    struct Output<'a> {
        leaf: Option<&'a str>,
        name: Option<&'a str>,
        messages: Vec<Item<'a>>,
    }
    #[derive(serde::Serialize)]
    struct Item<'a> {
        id: &'a str,
        entry: &'a RawValue,
    }
    let index = session::scan_bytes(bytes);
    let projection = session::project(&index, &LeafSelector::Default).ok()?;
    let items: Vec<_> = history::effective_history(Cursor::new(bytes), &index, &projection)
        .collect::<Result<_, _>>()
        .expect("history");
    let leaf = projection.leaf.map(|p| index.id(p));
    let output = Output {
        leaf: leaf.as_deref(),
        name: index.name(),
        messages: items
            .iter()
            .map(|i| Item {
                id: &i.id,
                entry: &i.raw,
            })
            .collect(),
    };
    let human: String = items
        .iter()
        .map(|i| {
            let (role, text) = match &i.entry.body {
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
            // The human output shows controls and direction overrides as escapes (issue #39
            // item 5), written out here independently of the CLI's own code.
            let shown: String = text
                .chars()
                .map(|c| {
                    let hidden = matches!(c, '\u{0}'..='\u{8}' | '\u{B}'..='\u{1F}'
                        | '\u{7F}'..='\u{9F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
                    if hidden {
                        format!("\\u{{{:X}}}", u32::from(c))
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            format!("{} {role}: {shown}\n", i.id)
        })
        .collect();
    Some(format!(
        "{}\n\u{0}{human}",
        serde_json::to_string(&output).expect("serialize")
    ))
}

/// `persyk context` writes each message as it reads it back; the output is still exactly the
/// document the whole-history version printed, JSON and human, on every golden fixture.
#[test]
fn issue15_01_streamed_context_equals_the_whole_document_on_golden_fixtures() {
    let mut compared = 0;
    for entry in fs::read_dir(golden_dir()).expect("golden dir") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let bytes = fs::read(&path).expect("read");
        let Some(expected) = whole_document(&bytes) else {
            continue;
        };
        let run = |json: bool| {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_persyk"));
            cmd.arg("context").arg(&path);
            if json {
                cmd.arg("--json");
            }
            let out = cmd.output().expect("run persyk");
            assert!(out.status.success(), "{}: {:?}", path.display(), out);
            String::from_utf8(out.stdout).expect("utf-8")
        };
        let got = format!("{}\u{0}{}", run(true), run(false));
        assert_eq!(got, expected, "{}", path.display());
        compared += 1;
    }
    assert!(compared >= 20, "only {compared} golden fixtures projected");
}

/// A page holds at most `MAX_PAGE` (256) entries; pages in turn give the whole conversation.
#[test]
fn issue15_02_history_pages_hold_at_most_256_entries() {
    assert_eq!(MAX_PAGE, 256);
    let bytes = session_bytes(600, 40);
    let index = session::scan_bytes(&bytes);
    let projection = session::project(&index, &LeafSelector::Default).expect("project");
    assert_eq!(projection.conversation.len(), 600);
    let mut file = Cursor::new(&bytes);
    let mut ids = Vec::new();
    let mut sizes = Vec::new();
    let mut start = 0;
    loop {
        let page =
            history::read_page(&mut file, &index, &projection.conversation, start).expect("page");
        if page.is_empty() {
            break;
        }
        sizes.push(page.len());
        start += page.len();
        ids.extend(page.into_iter().map(|i| i.id.to_string()));
    }
    assert_eq!(sizes, [256, 256, 88]);
    let expected: Vec<String> = (0..600).map(|i| format!("m{i}")).collect();
    assert_eq!(ids, expected);
    // Past the end: nothing, not a panic.
    let past = history::read_page(&mut file, &index, &projection.conversation, 10_000);
    assert!(past.expect("past the end").is_empty());
}

/// Counts the bytes read through it.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

/// The history reader is an iterator that reads as it goes: taking the first messages of a
/// long session reads a buffer's worth of the file, not the file.
#[test]
fn issue15_03_effective_history_reads_lazily() {
    let bytes = session_bytes(2_000, 1_000);
    assert!(bytes.len() > 2_000_000);
    let index = session::scan_bytes(&bytes);
    let projection = session::project(&index, &LeafSelector::Default).expect("project");
    let mut file = Counting {
        inner: Cursor::new(&bytes),
        read: 0,
    };
    let first: Vec<String> = history::effective_history(&mut file, &index, &projection)
        .take(3)
        .map(|i| i.expect("item").id.to_string())
        .collect();
    assert_eq!(first, ["m0", "m1", "m2"]);
    assert!(
        file.read <= 128 * 1024,
        "read {} bytes for three messages",
        file.read
    );
    // And all of it, in order, when asked for everything.
    let all: Vec<_> = EntryReader::new(Cursor::new(&bytes), &index, &projection.conversation)
        .collect::<Result<_, _>>()
        .expect("items");
    assert_eq!(all.len(), 2_000);
    assert_eq!(&*all[1_999].id, "m1999");
}

/// A line rewritten after the scan ends the stream with `history.changed`, and nothing after
/// it is read.
#[test]
fn issue15_04_a_changed_line_ends_the_stream() {
    let mut bytes = session_bytes(10, 40);
    let index = session::scan_bytes(&bytes);
    let projection = session::project(&index, &LeafSelector::Default).expect("project");
    let at = index.entry(projection.conversation[4]).offset() as usize;
    // Same length, another id: `m4` becomes `x4`.
    let id_at = at
        + bytes[at..]
            .windows(5)
            .position(|w| w == b"\"m4\",")
            .expect("id")
        + 1;
    bytes[id_at] = b'x';
    let results: Vec<_> =
        history::effective_history(Cursor::new(&bytes), &index, &projection).collect();
    assert_eq!(results.len(), 5);
    assert!(results[..4].iter().all(Result::is_ok));
    let err = results[4].as_ref().expect_err("changed");
    assert_eq!(err.code(), "history.changed");
}

// ---------------------------------------------------------------------------------------------
// Search-as-you-type: the per-file cache
// ---------------------------------------------------------------------------------------------

use persyk::session::discover::{Discovery, RootSpec, discover};
use persyk::session::search::{self as search_mod, PageRequest, Query, SessionRow};
use persyk::session::search_cache::{self, RACY_WINDOW, SearchCache};

/// One session file: a name, then `texts` as user messages; the lines end in "\n".
fn named_session(id: &str, name: &str, texts: &[&str]) -> String {
    let mut out = format!(
        r#"{{"type":"session","version":1,"id":"{id}","timestamp":"2026-03-18T17:20:00.000Z"}}"#
    );
    out.push('\n');
    out.push_str(&format!(
        r#"{{"type":"session_info","id":"n0","parentId":null,"timestamp":"2026-03-18T17:20:00.010Z","name":"{name}"}}"#
    ));
    out.push('\n');
    let mut parent = "n0".to_owned();
    for (i, t) in texts.iter().enumerate() {
        out.push_str(&format!(
            r#"{{"type":"message","id":"m{i}","parentId":"{parent}","timestamp":"2026-03-18T17:20:04.000Z","message":{{"role":"user","content":[{{"type":"text","text":"{t}"}}],"timestamp":1773854404000}}}}"#
        ));
        out.push('\n');
        parent = format!("m{i}");
    }
    out
}

/// A root with three settled sessions (older than the racy window), and a warm cache.
fn settled_corpus() -> (tempfile::TempDir, PathBuf, SearchCache) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    for (folder, id, name, texts) in [
        ("a", "sess-a", "alpha name", ["alpha one", "common words"]),
        ("b", "sess-b", "bravo name", ["bravo one", "common words"]),
        ("c", "sess-c", "charlie nm", ["charlie one", "common words"]),
    ] {
        fs::create_dir(root.join(folder)).expect("mkdir");
        fs::write(
            root.join(folder).join("session.jsonl"),
            named_session(id, name, &texts),
        )
        .expect("write");
    }
    std::thread::sleep(RACY_WINDOW + std::time::Duration::from_millis(200));
    let cache = SearchCache::new();
    let hits = cached(&root, &cache, "common");
    assert_eq!(hits.len(), 3);
    assert_eq!(cache.len(), 3, "settled files are cached");
    let before = cache.stats();
    let again = cached(&root, &cache, "common");
    assert_eq!(again, hits);
    assert_eq!(
        cache.stats().scans,
        before.scans,
        "the second query scans nothing"
    );
    assert_eq!(cache.stats().hits, before.hits + 3);
    (dir, root, cache)
}

fn discovery(root: &Path) -> Discovery {
    discover(&[RootSpec::explicit(root)])
}

fn cached(root: &Path, cache: &SearchCache, q: &str) -> Vec<SessionRow> {
    let d = discovery(root);
    let page = search_cache::search(
        &d,
        &Query::new(q).expect("query"),
        &PageRequest::default(),
        cache,
    );
    assert!(page.skipped.is_empty(), "{:?}", page.skipped);
    page.rows
}

fn uncached(root: &Path, q: &str) -> Vec<SessionRow> {
    let d = discovery(root);
    search_mod::search(&d, &Query::new(q).expect("query"), &PageRequest::default()).rows
}

fn folders(rows: &[SessionRow]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            r.location
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// The cache answers exactly what the cache-free search answers, listing included.
#[test]
fn issue15_10_cached_search_equals_the_uncached_search() {
    let (_d, root, cache) = settled_corpus();
    // A file that is not authoritative: skipped by both when the prefilter cannot rule it
    // out, absent from both when it can.
    fs::create_dir(root.join("d")).expect("mkdir");
    fs::write(
        root.join("d/session.jsonl"),
        "{\"type\":\"session\",\"version\":1,\"id\":\"sess-d\",\"timestamp\":\"2026-03-18T17:20:00.000Z\"}\n{\"type\":\"nonsense\",\"id\":\"x\",\"parentId\":null,\"timestamp\":\"2026-03-18T17:20:00.000Z\",\"text\":\"common\"}\n",
    )
    .expect("write");
    for q in [
        "common",
        "ALPHA",
        "name",
        "bravo one",
        "nothing at all",
        "m1",
    ] {
        for _ in 0..2 {
            let d = discovery(&root);
            let query = Query::new(q).expect("query");
            let a = search_cache::search(&d, &query, &PageRequest::default(), &cache);
            let b = search_mod::search(&d, &query, &PageRequest::default());
            assert_eq!(a.rows, b.rows, "{q}");
            assert_eq!(a.skipped, b.skipped, "{q}");
        }
    }
    let d = discovery(&root);
    assert_eq!(
        search_cache::list(&d, &PageRequest::default(), &cache).rows,
        search_mod::list(&d, &PageRequest::default()).rows
    );
}

/// An append invalidates the summary: the new message is found at once.
#[test]
fn issue15_11_search_cache_sees_an_append() {
    let (_d, root, cache) = settled_corpus();
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(root.join("a/session.jsonl"))
        .expect("open");
    std::io::Write::write_all(
        &mut f,
        br#"{"type":"message","id":"m9","parentId":"m1","timestamp":"2026-03-18T17:21:04.000Z","message":{"role":"user","content":[{"type":"text","text":"zulu appended"}],"timestamp":1773854464000}}
"#,
    )
    .expect("append");
    drop(f);
    assert_eq!(folders(&cached(&root, &cache, "zulu")), ["a"]);
    assert_eq!(cached(&root, &cache, "zulu"), uncached(&root, "zulu"));
}

/// A truncate-and-rewrite in place to the same size, with the modification time set back,
/// still invalidates (the status-change time moved).
#[test]
fn issue15_12_search_cache_sees_a_rewrite_in_place() {
    let (_d, root, cache) = settled_corpus();
    let path = root.join("b/session.jsonl");
    let old = fs::metadata(&path).expect("stat");
    let rewritten = named_session("sess-b", "yankee nam", &["bravo one", "common words"]);
    assert_eq!(rewritten.len() as u64, old.len());
    let f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .expect("open");
    std::io::Write::write_all(&mut &f, rewritten.as_bytes()).expect("rewrite");
    f.set_modified(old.modified().expect("mtime"))
        .expect("set mtime");
    drop(f);
    let now = fs::metadata(&path).expect("stat");
    assert_eq!(
        (now.len(), now.modified().unwrap()),
        (old.len(), old.modified().unwrap())
    );
    assert_eq!(folders(&cached(&root, &cache, "yankee")), ["b"]);
    assert!(cached(&root, &cache, "bravo name").is_empty());
}

/// A file replaced by rename (a new inode) invalidates.
#[test]
fn issue15_13_search_cache_sees_a_replace_by_rename() {
    let (_d, root, cache) = settled_corpus();
    let path = root.join("c/session.jsonl");
    let old = fs::metadata(&path).expect("stat");
    let tmp = root.join("c/session.jsonl.tmp");
    let replaced = named_session("sess-c", "romeo name", &["charlie one", "common words"]);
    assert_eq!(replaced.len() as u64, old.len());
    fs::write(&tmp, replaced).expect("write");
    fs::File::options()
        .write(true)
        .open(&tmp)
        .and_then(|f| f.set_modified(old.modified()?))
        .expect("set mtime");
    fs::rename(&tmp, &path).expect("rename");
    assert_eq!(folders(&cached(&root, &cache, "romeo")), ["c"]);
    assert!(cached(&root, &cache, "charlie nm").is_empty());
}

/// A deleted session leaves the results and the cache.
#[test]
fn issue15_14_search_cache_forgets_a_deleted_session() {
    let (_d, root, cache) = settled_corpus();
    fs::remove_file(root.join("a/session.jsonl")).expect("delete");
    assert_eq!(folders(&cached(&root, &cache, "common")), ["b", "c"]);
    assert_eq!(cache.len(), 2);
}

/// Opening a session in the app reads one page (≤ 256 messages); the rest are read by offset,
/// a page at a time, when asked for.
#[cfg(feature = "app")]
#[test]
fn issue15_05_opening_a_session_reads_the_first_page_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("session.jsonl"), session_bytes(600, 40)).expect("write");
    let opened = persyk::app::backend::open_session(dir.path(), None).expect("open");
    assert_eq!(opened.messages.len(), MAX_PAGE);
    assert!(opened.messages[0].text.ends_with('0'));
    let pages = opened.pages.expect("pages");
    assert_eq!(pages.total, 600);
    let second = pages.read(256).expect("page");
    assert_eq!(second.len(), 256);
    assert!(second[0].text.ends_with("256"));
    let last = pages.read(512).expect("page");
    assert_eq!(last.len(), 88);
    assert!(last[87].text.ends_with("599"));
    assert_eq!(last[87].role, "assistant");
}

/// The raw read `persyk context --json` uses checks each line's envelope: a line whose id or
/// type changed after the scan is `history.changed`, never copied out.
#[test]
fn issue15_06_raw_reads_check_the_envelope() {
    let bytes = session_bytes(10, 40);
    let index = session::scan_bytes(&bytes);
    let projection = session::project(&index, &LeafSelector::Default).expect("project");
    let raw: Vec<_> = history::effective_history(Cursor::new(&bytes), &index, &projection)
        .raw()
        .collect::<Result<_, _>>()
        .expect("raw");
    assert_eq!(raw.len(), 10);
    assert_eq!(&*raw[3].id, "m3");
    let at = index.entry(projection.conversation[4]).offset() as usize;
    for (from, to) in [
        (&b"\"m4\","[..], &b"\"x4\","[..]),
        (b"\"message\"", b"\"massage\""),
    ] {
        let mut changed = bytes.clone();
        let p = at
            + changed[at..]
                .windows(from.len())
                .position(|w| w == from)
                .expect("found");
        changed[p..p + to.len()].copy_from_slice(to);
        let results: Vec<_> =
            history::effective_history(Cursor::new(&changed), &index, &projection)
                .raw()
                .collect();
        assert_eq!(results.len(), 5);
        assert!(results[..4].iter().all(Result::is_ok));
        let err = results[4].as_ref().expect_err("changed");
        assert_eq!(err.code(), "history.changed");
    }
}

/// The index keeps ≤ 32 bytes per entry beside its id, and ids of lowercase hex and dashes
/// (the UUIDs Persyk writes) are stored packed: a 150,000-entry session's index was ≈ 100
/// bytes an entry, 8 % of the file, over the 5 % the issue allows. Packed or not, every id
/// reads back exactly and finds its entry; ids that pack to the same nibbles do not alias.
#[test]
fn issue15_07_index_entries_are_compact_and_ids_read_back_exactly() {
    assert!(
        std::mem::size_of::<persyk::session::index::IndexEntry>() <= 32,
        "IndexEntry is {} bytes",
        std::mem::size_of::<persyk::session::index::IndexEntry>()
    );
    let long_hex = "0123456789abcdef".repeat(8);
    let ids = [
        "019ad6c1-5b2e-7c3a-9f00-1234567890ab",
        "a",
        "ab",
        "abc",
        "abc0",
        "abc00",
        "0-0",
        "0-",
        "ABC-def",
        "a.b_c-d",
        "f-f-f-f-f-f-f-f-f-f",
        &long_hex,
        "0000000000000000000000000000000000000000000000000000000000000001",
    ];
    let mut text = String::from(
        r#"{"type":"session","version":1,"id":"sess-ids","timestamp":"2026-03-18T17:20:00.000Z"}"#,
    );
    text.push('\n');
    // A rejected line in the middle: line numbers stop following positions.
    let mut parent = "null".to_owned();
    for (i, id) in ids.iter().enumerate() {
        if i == 5 {
            text.push_str("{\"type\":\"message\"}\n");
        }
        text.push_str(&format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-03-18T17:20:04.000Z","message":{{"role":"user","content":[{{"type":"text","text":"t{i}"}}],"timestamp":1773854404000}}}}"#
        ));
        text.push('\n');
        parent = format!("\"{id}\"");
    }
    let index = session::scan_bytes(text.as_bytes());
    assert_eq!(index.len(), ids.len());
    for (i, id) in ids.iter().enumerate() {
        let pos = i as u32;
        assert_eq!(index.id(pos), *id, "id {i}");
        assert_eq!(index.position(id), Some(pos), "position of {id}");
        let line = if i < 5 { i + 2 } else { i + 3 };
        assert_eq!(index.line(pos), line as u64, "line of {id}");
        assert_eq!(
            index.entry(pos).parent(),
            i.checked_sub(1).map(|p| p as u32)
        );
    }
    for missing in [
        "",
        "abc000",
        "0--",
        "ABC-DEF",
        "b",
        "019ad6c1-5b2e-7c3a-9f00-1234567890aa",
    ] {
        assert_eq!(index.position(missing), None, "{missing:?}");
    }
}

/// Opening a session the search panel listed scanned the whole file again: on a 150,000-
/// message session that is a second of reading before the first paint and a second index in
/// memory. It now reads the cached summary's spans, with no scan, as long as the file is the
/// one the summary describes; after an append, pages come from a scan at the pinned leaf; after
/// a rewrite in place, a page is `history.changed`.
#[cfg(feature = "app")]
#[test]
fn issue15_08_opening_a_listed_session_reuses_the_search_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let location = root.join("long");
    fs::create_dir(&location).expect("mkdir");
    let file = location.join("session.jsonl");
    fs::write(&file, session_bytes(600, 40)).expect("write");
    std::thread::sleep(RACY_WINDOW + std::time::Duration::from_millis(200));
    let cache = SearchCache::new();
    let listed = search_cache::list(&discovery(&root), &PageRequest::default(), &cache);
    assert_eq!(listed.rows.len(), 1);
    let leaf = listed.rows[0].leaf_id.clone();
    assert_eq!(leaf.as_deref(), Some("m599"));
    let scans = cache.stats().scans;

    let opened =
        persyk::app::backend::open_session_with(&location, leaf.clone(), &cache).expect("open");
    assert_eq!(cache.stats().scans, scans, "opening scanned the file again");
    assert_eq!(opened.leaf.as_deref(), Some("m599"));
    assert_eq!(opened.messages.len(), MAX_PAGE);
    assert!(opened.messages[0].text.ends_with("word 0"));
    let pages = opened.pages.expect("pages");
    assert_eq!(pages.total, 600);
    let second = pages.read(256).expect("page");
    assert_eq!(second.len(), 256);
    assert!(second[0].text.ends_with("256"));
    assert_eq!(cache.stats().scans, scans);

    // An append: the pinned conversation is unchanged, read from a scan.
    {
        use std::io::Write;
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .expect("open");
        f.write_all(
            b"{\"type\":\"message\",\"id\":\"late\",\"parentId\":\"m599\",\"timestamp\":\"2026-03-18T17:20:04.000Z\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"late\"}],\"timestamp\":1773854404000}}\n",
        )
        .expect("append");
    }
    let last = pages.read(512).expect("page after an append");
    assert_eq!(last.len(), 88);
    assert!(last[87].text.ends_with("599"));

    // A rewrite in place of the same length: another id at m300's offset.
    let mut bytes = fs::read(&file).expect("read");
    let at = bytes
        .windows(7)
        .position(|w| w == b"\"m300\",")
        .expect("m300")
        + 1;
    bytes[at] = b'x';
    fs::write(&file, &bytes).expect("rewrite");
    let err = pages.read(256).expect_err("changed");
    assert_eq!(err, "history.changed");

    // Without a summary for the file as it is now, opening scans and validates, as before
    // (`m301`'s parent is gone).
    let err = persyk::app::backend::open_session_with(&location, Some("late".into()), &cache)
        .expect_err("a rewritten file");
    assert_eq!(err, "project.not-authoritative");
}
