//! Merging a sync engine's conflict copy (issue #37, `session::merge`).
//!
//! 1. `random_forks_merged_either_way_converge` (property): a random session is copied to two
//!    Macs, each appends a random history (dictations, clean-ups, labels, names, removals,
//!    custom state, recordings, a branch now and then); the second file becomes a conflict
//!    copy beside the first and is merged, and the same is done the other way round. Both
//!    results validate with no diagnostic, keep every entry of both files, show the same view
//!    (conversation at the default leaf, labels, name, archived flag, custom state), show
//!    exactly what either Mac's view showed minus what either removed, and a second merge of
//!    the same copy writes nothing. `PROPTEST_CASES` sets the number of cases (default 64;
//!    the 1,000: `PROPTEST_CASES=1000 cargo test --release --test sync_merge`).
//! 2. The example, a label on one Mac and a clean-up on the other, for the three
//!    engines' names of the copy; refusals that leave the copy as it is; a copy's torn last
//!    line kept; `persyk check` and `persyk recover` on a session with a copy.
//! 3. `kill9_during_merge_loses_nothing`: `persyk recover` killed with SIGKILL at random
//!    moments of a merge, then run again, ends with the same session as an uninterrupted
//!    merge (`PERSYK_CRASH_ITERATIONS`, default 12).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use persyk::session::format::{
    Custom, CustomContent, CustomMessage, Entry, EntryBody, Header, Label, Message, MessageRemoved,
    Outcome, RecordingFinished, RecordingStarted, Role, SessionInfo,
};
use persyk::session::merge::{MERGE_TYPE, merge_copy};
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store, project, scan_path};
use proptest::prelude::*;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const SYNCTHING_COPY: &str = "session.sync-conflict-20260101-120000-B4CKUP7.jsonl";
const DROPBOX_COPY: &str = "session (Anna's conflicted copy 2026-01-01).jsonl";
const ICLOUD_COPY: &str = "session 2.jsonl";
const SESSION_ID: &str = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
const T0_MS: i64 = 1_767_225_600_000;

// ---------------------------------------------------------------------------------------------
// A session file written the way Persyk's writers write it.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    CustomMessage,
    Other,
}

#[derive(Debug, Clone)]
struct Node {
    id: String,
    parent: Option<usize>,
    kind: Kind,
}

#[derive(Debug, Clone)]
struct Doc {
    lines: Vec<String>,
    nodes: Vec<Node>,
    clock_ms: i64,
    tag: String,
    counter: usize,
}

fn iso(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .expect("time")
        .format(&Rfc3339)
        .expect("format")
}

impl Doc {
    fn new() -> Doc {
        Doc {
            lines: vec![
                Header {
                    id: SESSION_ID.into(),
                    timestamp: iso(T0_MS),
                }
                .to_line(),
            ],
            nodes: Vec::new(),
            clock_ms: T0_MS,
            tag: "base".into(),
            counter: 0,
        }
    }

    /// The same file on another Mac, whose clock goes on from `offset_ms` later.
    fn fork(&self, tag: &str, offset_ms: i64) -> Doc {
        let mut d = self.clone();
        d.tag = tag.into();
        d.counter = 0;
        d.clock_ms += offset_ms;
        d
    }

    /// A file as another Mac continues it, `tag` naming what it adds.
    fn from_bytes(text: &str, tag: &str, clock_ms: i64) -> Doc {
        let mut lines = text.lines();
        let mut doc = Doc {
            lines: vec![lines.next().expect("header").to_owned()],
            nodes: Vec::new(),
            clock_ms,
            tag: tag.into(),
            counter: 0,
        };
        let mut at: HashMap<String, usize> = HashMap::new();
        for line in lines {
            let e: Value = serde_json::from_str(line).expect("json");
            let id = e["id"].as_str().expect("id").to_owned();
            let kind = match e["type"].as_str() {
                Some("message") => Kind::Message,
                Some("custom_message") => Kind::CustomMessage,
                _ => Kind::Other,
            };
            let parent = e["parentId"].as_str().map(|p| at[p]);
            at.insert(id.clone(), doc.nodes.len());
            doc.nodes.push(Node { id, parent, kind });
            doc.lines.push(line.to_owned());
        }
        doc
    }

    fn tip(&self) -> Option<usize> {
        self.nodes.len().checked_sub(1)
    }

    fn path(&self, tip: Option<usize>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut at = tip;
        while let Some(i) = at {
            out.push(i);
            at = self.nodes[i].parent;
        }
        out.reverse();
        out
    }

    fn push(&mut self, parent: Option<usize>, kind: Kind, body: EntryBody) -> usize {
        self.counter += 1;
        self.clock_ms += 1000;
        let id = format!("{}-{}", self.tag, self.counter);
        let entry = Entry {
            id: id.clone(),
            parent_id: parent.map(|p| self.nodes[p].id.clone()),
            timestamp: iso(self.clock_ms),
            body,
        };
        self.lines.push(entry.to_line());
        self.nodes.push(Node { id, parent, kind });
        self.nodes.len() - 1
    }

    fn apply(&mut self, op: &Op) {
        let tip = self.tip();
        match op {
            Op::Say(text) => {
                self.push(tip, Kind::Message, say(text));
            }
            Op::Clean(text, source) => {
                let sources: Vec<usize> = self
                    .path(tip)
                    .into_iter()
                    .filter(|&i| self.nodes[i].kind == Kind::Message)
                    .collect();
                let source = (!sources.is_empty()).then(|| sources[pick(*source, sources.len())]);
                let ids: Vec<Value> = source
                    .map(|s| json!({"id": self.nodes[s].id, "sha256": "0".repeat(64)}))
                    .into_iter()
                    .collect();
                self.push(tip, Kind::CustomMessage, cleanup(text, ids));
            }
            Op::Label(target, label) => {
                if self.nodes.is_empty() {
                    return;
                }
                let t = pick(*target, self.nodes.len());
                let target_id = self.nodes[t].id.clone();
                self.push(
                    tip,
                    Kind::Other,
                    EntryBody::Label(Label {
                        target_id,
                        label: label.clone(),
                    }),
                );
            }
            Op::Name(name) => {
                self.push(
                    tip,
                    Kind::Other,
                    EntryBody::SessionInfo(SessionInfo {
                        name: Some(name.clone()),
                        archived: None,
                    }),
                );
            }
            Op::Archive(on) => {
                self.push(
                    tip,
                    Kind::Other,
                    EntryBody::SessionInfo(SessionInfo {
                        name: None,
                        archived: Some(*on),
                    }),
                );
            }
            Op::Remove(which) => {
                let candidates: Vec<usize> = self
                    .path(tip)
                    .into_iter()
                    .filter(|&i| self.nodes[i].kind != Kind::Other)
                    .collect();
                if candidates.is_empty() {
                    return;
                }
                let target_id = self.nodes[candidates[pick(*which, candidates.len())]]
                    .id
                    .clone();
                self.push(
                    tip,
                    Kind::Other,
                    EntryBody::MessageRemoved(MessageRemoved { target_id }),
                );
            }
            Op::Attempt => {
                self.push(
                    tip,
                    Kind::Other,
                    EntryBody::Custom(Custom {
                        custom_type: "persyk.cleanup-attempt".into(),
                        data: json!({"reason": "cleanup.timeout", "at": self.counter}),
                    }),
                );
            }
            Op::Branch(at, text) => {
                let parent = (!self.nodes.is_empty()).then(|| pick(*at, self.nodes.len()));
                self.push(parent, Kind::Message, say(text));
            }
            Op::Record => {
                let rec = format!("{}-rec-{}", self.tag, self.counter + 1);
                let started = self.push(
                    tip,
                    Kind::Other,
                    EntryBody::RecordingStarted(RecordingStarted {
                        recording_id: rec.clone(),
                        asset: format!("assets/{rec}.wav"),
                    }),
                );
                self.push(
                    Some(started),
                    Kind::Other,
                    EntryBody::RecordingFinished(RecordingFinished {
                        recording_id: rec,
                        duration_ms: 1000,
                        outcome: Outcome::Complete,
                        gaps: None,
                    }),
                );
            }
        }
    }

    fn bytes(&self) -> String {
        let mut s = self.lines.join("\n");
        s.push('\n');
        s
    }
}

fn say(text: &str) -> EntryBody {
    EntryBody::Message(Message::new(
        Role::User,
        vec![persyk::session::format::Block::text(text)],
        1,
    ))
}

fn cleanup(text: &str, sources: Vec<Value>) -> EntryBody {
    EntryBody::CustomMessage(CustomMessage {
        custom_type: "persyk.cleanup".into(),
        content: CustomContent::Text(text.into()),
        display: true,
        details: Some(json!({"sources": sources, "mode": "tidy", "delivery": "delivered"})),
    })
}

#[derive(Debug, Clone)]
enum Op {
    Say(String),
    Clean(String, u32),
    Label(u32, Option<String>),
    Name(String),
    Archive(bool),
    Remove(u32),
    Attempt,
    Branch(u32, String),
    Record,
}

/// A choice among `n` things by a random seed.
fn pick(seed: u32, n: usize) -> usize {
    seed as usize % n
}

fn words() -> impl Strategy<Value = String> {
    "[a-z]{1,7}( [a-z]{1,7}){0,3}"
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => words().prop_map(Op::Say),
        2 => (words(), any::<u32>()).prop_map(|(t, i)| Op::Clean(t, i)),
        2 => (any::<u32>(), prop::option::weighted(0.8, words())).prop_map(|(i, l)| Op::Label(i, l)),
        1 => words().prop_map(Op::Name),
        1 => any::<bool>().prop_map(Op::Archive),
        2 => any::<u32>().prop_map(Op::Remove),
        1 => Just(Op::Attempt),
        1 => (any::<u32>(), words()).prop_map(|(i, t)| Op::Branch(i, t)),
        1 => Just(Op::Record),
    ]
}

// ---------------------------------------------------------------------------------------------
// Files, merging and what a reader sees.

/// Writes `main` as a session folder under a fresh root, with `copy` beside it as `copy_name`.
fn session_with_copy(root: &Path, main: &str, copy: Option<(&str, &str)>) -> (Store, PathBuf) {
    let dir = root.join("s");
    fs::create_dir_all(dir.join("assets")).expect("dir");
    fs::write(dir.join("session.jsonl"), main).expect("write");
    if let Some((name, bytes)) = copy {
        fs::write(dir.join(name), bytes).expect("write copy");
    }
    (
        Store::new(Roots::new(root.to_path_buf(), Vec::new()).expect("roots")),
        dir,
    )
}

fn merge(store: &Store, copy_name: &str) -> persyk::session::merge::MergeReport {
    let handle = store.open_session(0, "s").expect("open");
    merge_copy(&handle, copy_name).expect("merge")
}

/// What a reader sees of a session: its default view and the global annotations.
#[derive(Debug, PartialEq)]
struct View {
    conversation: Vec<Value>,
    labels: BTreeMap<String, String>,
    name: Option<String>,
    archived: Option<bool>,
    state: BTreeMap<String, Value>,
}

/// Every entry of a file by id, and its lines as JSON.
fn entries(file: &Path) -> Vec<Value> {
    fs::read_to_string(file)
        .expect("read")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

fn view(file: &Path) -> View {
    let index = scan_path(file).expect("scan");
    assert!(index.is_valid(), "{:?}", index.diagnostics());
    let by_id: HashMap<String, Value> = entries(file)
        .into_iter()
        .map(|e| (e["id"].as_str().unwrap_or_default().to_owned(), e))
        .collect();
    let p = project(&index, &LeafSelector::Default).expect("project");
    let at = |pos: u32| by_id[&*index.id(pos)].clone();
    View {
        conversation: p.conversation.iter().map(|&c| at(c)).collect(),
        labels: index
            .labels()
            .map(|(t, l)| (index.id(t).into_owned(), l.to_owned()))
            .collect(),
        name: index.name().map(str::to_owned),
        archived: index.archived(),
        state: p
            .custom_state
            .iter()
            .filter(|(t, _)| &***t != MERGE_TYPE)
            .map(|(t, &pos)| (t.to_string(), at(pos)["data"].clone()))
            .collect(),
    }
}

/// Carried entry → the entry it carries, from the merge's chain heads.
fn carried_from(file: &Path) -> HashMap<String, String> {
    let mut map = HashMap::new();
    for e in entries(file) {
        if e["customType"] == MERGE_TYPE && e["data"]["step"] == "carry" {
            let head = e["id"].as_str().unwrap_or_default();
            for (n, orig) in e["data"]["carried"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                map.insert(
                    format!("{head}.{}", n + 1),
                    orig.as_str().unwrap_or_default().to_owned(),
                );
            }
        }
    }
    map
}

fn origin(map: &HashMap<String, String>, id: &str) -> String {
    let mut id = id.to_owned();
    while let Some(o) = map.get(&id) {
        id = o.clone();
    }
    id
}

/// The ids a Mac's own file shows at its default leaf, and the ids its default path removes.
fn shown_and_removed(doc: &Doc) -> (HashSet<String>, HashSet<String>) {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("session.jsonl");
    fs::write(&file, doc.bytes()).expect("write");
    let index = scan_path(&file).expect("scan");
    let p = project(&index, &LeafSelector::Default).expect("project");
    let shown = p
        .conversation
        .iter()
        .map(|&c| index.id(c).into_owned())
        .collect();
    let removed = p
        .path
        .iter()
        .filter_map(|&q| index.entry(q).removal_target())
        .map(|t| index.id(t).into_owned())
        .collect();
    (shown, removed)
}

/// Per target, the label a file resolves: (timestamp, id, label) of its latest label entry.
fn resolved_labels(doc: &Doc) -> HashMap<String, (i128, String, Option<String>)> {
    let mut out = HashMap::new();
    for line in &doc.lines[1..] {
        let e: Value = serde_json::from_str(line).expect("json");
        if e["type"] == "label" {
            let ts = OffsetDateTime::parse(e["timestamp"].as_str().unwrap_or_default(), &Rfc3339)
                .expect("ts")
                .unix_timestamp_nanos();
            out.insert(
                e["targetId"].as_str().unwrap_or_default().to_owned(),
                (
                    ts,
                    e["id"].as_str().unwrap_or_default().to_owned(),
                    e["label"].as_str().map(str::to_owned),
                ),
            );
        }
    }
    out
}

/// Merges `copy` into `main` (as a Syncthing conflict copy) and returns the merged file.
fn merged(root: &Path, main: &Doc, copy: &Doc) -> PathBuf {
    let (store, dir) =
        session_with_copy(root, &main.bytes(), Some((SYNCTHING_COPY, &copy.bytes())));
    let report = merge(&store, SYNCTHING_COPY);
    assert!(
        !dir.join(SYNCTHING_COPY).exists(),
        "the copy is removed once merged"
    );
    // Merging the same copy again writes nothing and changes nothing.
    let before = fs::read(dir.join("session.jsonl")).expect("read");
    fs::write(dir.join(SYNCTHING_COPY), copy.bytes()).expect("copy again");
    let again = merge(&store, SYNCTHING_COPY);
    assert_eq!(
        again.written, 0,
        "a second merge writes nothing: {again:?} after {report:?}"
    );
    assert_eq!(fs::read(dir.join("session.jsonl")).expect("read"), before);
    dir.join("session.jsonl")
}

/// Merges `a` and `b` both ways, checks the results agree and show what either showed, and
/// returns the file `b` merged into `a` gave.
fn check_fork(base: &Doc, a: &Doc, b: &Doc) -> String {
    let tmp = tempfile::tempdir().expect("tmp");
    let ab = merged(&tmp.path().join("ab"), a, b);
    let ba = merged(&tmp.path().join("ba"), b, a);

    // Every entry of both files is kept, byte for byte.
    for file in [&ab, &ba] {
        let text = fs::read_to_string(file).expect("read");
        let lines: HashSet<&str> = text.lines().collect();
        for doc in [a, b] {
            for line in &doc.lines {
                assert!(lines.contains(line.as_str()), "lost: {line}");
            }
        }
    }

    // Both orders show the same.
    let (vab, vba) = (view(&ab), view(&ba));
    assert_eq!(vab, vba, "the two orders of merging disagree");

    // The view is what either Mac showed, minus what either removed, each once (entries an
    // earlier merge carried count as what they carry).
    let map = carried_from(&ab);
    let origins = |ids: HashSet<String>| -> HashSet<String> {
        ids.iter().map(|id| origin(&map, id)).collect()
    };
    let (shown_a, removed_a) = shown_and_removed(a);
    let (shown_b, removed_b) = shown_and_removed(b);
    let (shown_a, removed_a, shown_b, removed_b) = (
        origins(shown_a),
        origins(removed_a),
        origins(shown_b),
        origins(removed_b),
    );
    let expected: HashSet<String> = shown_a
        .union(&shown_b)
        .filter(|id| !removed_a.contains(*id) && !removed_b.contains(*id))
        .cloned()
        .collect();
    let got: Vec<String> = vab
        .conversation
        .iter()
        .map(|e| origin(&map, e["id"].as_str().unwrap_or_default()))
        .collect();
    let got_set: HashSet<String> = got.iter().cloned().collect();
    assert_eq!(got.len(), got_set.len(), "an entry shows twice: {got:?}");
    assert_eq!(got_set, expected, "base {} entries", base.nodes.len());

    // Labels: where the two Macs resolved one differently, the later label wins.
    let (la, lb) = (resolved_labels(a), resolved_labels(b));
    let targets: HashSet<&String> = la.keys().chain(lb.keys()).collect();
    for t in targets {
        let expected = match (la.get(t), lb.get(t)) {
            (Some(x), Some(y)) => {
                if (x.0, &x.1) >= (y.0, &y.1) {
                    x.2.clone()
                } else {
                    y.2.clone()
                }
            }
            (Some(x), None) | (None, Some(x)) => x.2.clone(),
            (None, None) => None,
        };
        assert_eq!(
            vab.labels.get(t.as_str()).cloned(),
            expected,
            "label of {t}"
        );
    }
    fs::read_to_string(&ab).expect("read")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64),
        .. ProptestConfig::default()
    })]

    #[test]
    fn random_forks_merged_either_way_converge(
        base_ops in prop::collection::vec(op(), 0..10),
        a_ops in prop::collection::vec(op(), 0..10),
        b_ops in prop::collection::vec(op(), 0..10),
        (offset_a, offset_b) in (0i64..3, 0i64..3),
    ) {
        let mut base = Doc::new();
        for o in &base_ops {
            base.apply(o);
        }
        let mut a = base.fork("a", offset_a * 1000);
        for o in &a_ops {
            a.apply(o);
        }
        let mut b = base.fork("b", offset_b * 1000);
        for o in &b_ops {
            b.apply(o);
        }
        check_fork(&base, &a, &b);
    }

    /// A second round: one Mac goes on from the merged file, the other from its own version
    /// (it never saw the merge), and the two conflict again. What the first merge carried
    /// is not carried twice.
    #[test]
    fn a_merged_file_that_diverges_again_merges_again(
        base_ops in prop::collection::vec(op(), 0..8),
        a_ops in prop::collection::vec(op(), 0..8),
        b_ops in prop::collection::vec(op(), 1..8),
        a2_ops in prop::collection::vec(op(), 0..8),
        b2_ops in prop::collection::vec(op(), 0..8),
        (offset_a, offset_b) in (0i64..3, 0i64..3),
    ) {
        let mut base = Doc::new();
        for o in &base_ops {
            base.apply(o);
        }
        let mut a = base.fork("a", offset_a * 1000);
        for o in &a_ops {
            a.apply(o);
        }
        let mut b = base.fork("b", offset_b * 1000);
        for o in &b_ops {
            b.apply(o);
        }
        let first = check_fork(&base, &a, &b);
        let mut a2 = Doc::from_bytes(&first, "a2", a.clock_ms.max(b.clock_ms) + 500);
        for o in &a2_ops {
            a2.apply(o);
        }
        let mut b2 = b.fork("b2", 700);
        for o in &b2_ops {
            b2.apply(o);
        }
        check_fork(&base, &a2, &b2);
    }
}

/// Found by the second property: a merged file carries the first merge's start entry; when it
/// comes back as the copy, that entry must not make the merge look like a resumed one (it is
/// not in the session), or the session's own additions after the fork were left off the view.
#[test]
fn a_start_entry_in_the_copy_does_not_resume_a_merge() {
    let base = Doc::new();
    let a = base.fork("a", 0);
    let mut b = base.fork("b", 0);
    b.apply(&Op::Say("a".into()));
    let first = check_fork(&base, &a, &b);
    let a2 = Doc::from_bytes(&first, "a2", a.clock_ms.max(b.clock_ms) + 500);
    let mut b2 = b.fork("b2", 700);
    b2.apply(&Op::Remove(0));
    check_fork(&base, &a2, &b2);
}

// ---------------------------------------------------------------------------------------------
// The example and the three engines' names.

/// A session dictated on one Mac, then labelled on it and cleaned up on the other before
/// either saw the other's line: `(the labelling Mac's file, the cleaning Mac's file)`.
fn label_here_cleanup_there() -> (Doc, Doc) {
    let mut base = Doc::new();
    base.apply(&Op::Say("buy milk and call the bank".into()));
    let mut a = base.fork("a", 0);
    a.apply(&Op::Label(0, Some("groceries".into())));
    let mut b = base.fork("b", 500);
    b.apply(&Op::Clean("Buy milk and call the bank.".into(), 0));
    (a, b)
}

fn search_hits(root: &Path, text: &str) -> usize {
    use persyk::session::discover::{RootSpec, discover};
    use persyk::session::search::{PageRequest, Query, search};
    let found = search(
        &discover(&[RootSpec::explicit(root)]),
        &Query::new(text).expect("query"),
        &PageRequest::default(),
    );
    found.rows.len()
}

#[test]
fn a_label_on_one_mac_and_a_cleanup_on_the_other_both_show_for_every_engine() {
    let (a, b) = label_here_cleanup_there();
    for copy in [SYNCTHING_COPY, DROPBOX_COPY, ICLOUD_COPY] {
        for (main, other) in [(&a, &b), (&b, &a)] {
            let tmp = tempfile::tempdir().expect("tmp");
            let (store, dir) =
                session_with_copy(tmp.path(), &main.bytes(), Some((copy, &other.bytes())));
            let report = merge(&store, copy);
            assert!(
                !dir.join(copy).exists(),
                "{copy}: the copy goes once merged"
            );
            let v = view(&dir.join("session.jsonl"));
            let texts: Vec<&str> = v
                .conversation
                .iter()
                .map(|e| {
                    e["content"]
                        .as_str()
                        .or_else(|| e["message"]["content"][0]["text"].as_str())
                        .unwrap_or_default()
                })
                .collect();
            assert_eq!(
                texts,
                ["buy milk and call the bank", "Buy milk and call the bank."],
                "{copy}: {report:?}"
            );
            assert_eq!(
                v.labels.get("base-1").map(String::as_str),
                Some("groceries")
            );
            // Search finds the label of one Mac and the clean-up of the other.
            assert_eq!(search_hits(tmp.path(), "groceries"), 1, "{copy}");
            assert_eq!(search_hits(tmp.path(), "bank."), 1, "{copy}");
        }
    }
}

#[test]
fn a_copy_that_cannot_be_merged_is_left_as_it_is_and_nothing_is_written() {
    let (a, b) = label_here_cleanup_there();
    let other_session = b
        .bytes()
        .replace(SESSION_ID, "0190a1b2-c3d4-7e5f-8a9b-000000000000");
    // A line of the copy that is no record at all, after the lines both share.
    let damaged = format!("{}{{\"type\":\"message\",\n", b.bytes());
    let damaged = damaged.trim_end_matches('\n').to_owned() + "\n";
    // The copy's clean-up under an id the session uses for its label.
    let reused = b.bytes().replace("\"b-1\"", "\"a-1\"");
    for (bytes, code) in [
        (other_session, "merge.other-session"),
        (damaged, "merge.copy-damaged"),
        (reused, "merge.conflicting-entry"),
    ] {
        let tmp = tempfile::tempdir().expect("tmp");
        let (store, dir) =
            session_with_copy(tmp.path(), &a.bytes(), Some((SYNCTHING_COPY, &bytes)));
        let handle = store.open_session(0, "s").expect("open");
        let err = merge_copy(&handle, SYNCTHING_COPY).expect_err(code);
        assert_eq!(err.code(), code);
        assert_eq!(
            fs::read_to_string(dir.join("session.jsonl")).expect("read"),
            a.bytes()
        );
        assert_eq!(
            fs::read_to_string(dir.join(SYNCTHING_COPY)).expect("copy kept"),
            bytes
        );
    }
}

#[test]
fn a_copys_unfinished_last_line_is_kept_beside_the_session() {
    let (a, b) = label_here_cleanup_there();
    let torn = format!("{}{{\"type\":\"label\",\"id\":\"b-9\",\"par", b.bytes());
    let tmp = tempfile::tempdir().expect("tmp");
    let (store, dir) = session_with_copy(tmp.path(), &a.bytes(), Some((ICLOUD_COPY, &torn)));
    let report = merge(&store, ICLOUD_COPY);
    let fragment = report.fragment.expect("fragment kept");
    assert_eq!(
        fs::read_to_string(dir.join(&fragment)).expect("fragment"),
        "{\"type\":\"label\",\"id\":\"b-9\",\"par"
    );
    assert!(!dir.join(ICLOUD_COPY).exists());
    let text = fs::read_to_string(dir.join("session.jsonl")).expect("read");
    assert!(b.lines.iter().all(|l| text.contains(l.as_str())));
}

#[test]
fn no_merge_while_this_mac_records_the_session() {
    let (a, b) = label_here_cleanup_there();
    let tmp = tempfile::tempdir().expect("tmp");
    let (store, dir) =
        session_with_copy(tmp.path(), &a.bytes(), Some((SYNCTHING_COPY, &b.bytes())));
    let handle = store.open_session(0, "s").expect("open");
    let capture = handle.start_capture("rec-live.wav").expect("capture");
    let err = merge_copy(&handle, SYNCTHING_COPY).expect_err("recording");
    assert_eq!(err.code(), "merge.recording");
    assert!(dir.join(SYNCTHING_COPY).exists());
    drop(capture);
    merge_copy(&handle, SYNCTHING_COPY).expect("merges once the capture ended");
}

fn persyk(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_persyk"))
        .args(args)
        .output()
        .expect("run persyk")
}

#[test]
fn check_reports_an_unmerged_copy_and_recover_merges_it() {
    let (a, b) = label_here_cleanup_there();
    let tmp = tempfile::tempdir().expect("tmp");
    let (_store, dir) = session_with_copy(tmp.path(), &a.bytes(), Some((DROPBOX_COPY, &b.bytes())));
    let d = dir.to_str().expect("utf-8");
    let out = persyk(&["check", d]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("sync.unmerged-copy"), "{stdout}");
    assert!(stdout.contains("Dropbox"), "{stdout}");
    let out = persyk(&["recover", d]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("(Dropbox): merged"), "{stdout}");
    let out = persyk(&["check", d]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

// ---------------------------------------------------------------------------------------------
// SIGKILL during a merge.

/// Two Macs that each added `n` entries of every kind to a session of `n` entries.
fn large_fork(n: usize) -> (Doc, Doc) {
    let mut base = Doc::new();
    for i in 0..n {
        base.apply(&Op::Say(format!("base dictation number {i}")));
    }
    let grow = |doc: &mut Doc, tag: &str| {
        for i in 0..n {
            match i % 5 {
                0 | 1 => doc.apply(&Op::Say(format!("{tag} says {i}"))),
                2 => doc.apply(&Op::Clean(format!("{tag} cleaned {i}"), i as u32)),
                3 => doc.apply(&Op::Label(i as u32, Some(format!("{tag} label {i}")))),
                _ => doc.apply(&Op::Remove(i as u32)),
            }
        }
    };
    let mut a = base.fork("a", 0);
    grow(&mut a, "a");
    let mut b = base.fork("b", 300);
    grow(&mut b, "b");
    (a, b)
}

#[test]
fn kill9_during_merge_loses_nothing() {
    let iterations: usize = std::env::var("PERSYK_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let (a, b) = large_fork(1000);
    let (main, copy) = (a.bytes(), b.bytes());

    // The reference: the same merge, uninterrupted, and how long it takes.
    let tmp = tempfile::tempdir().expect("tmp");
    let (_s, dir) = session_with_copy(
        &tmp.path().join("ref"),
        &main,
        Some((SYNCTHING_COPY, &copy)),
    );
    let started = Instant::now();
    let out = persyk(&["recover", dir.to_str().expect("utf-8")]);
    let took = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference = fs::read(dir.join("session.jsonl")).expect("read");

    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let (mut killed_mid, mut before_any, mut finished) = (0, 0, 0);
    for i in 0..iterations {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Most of the uninterrupted run is the process starting and reading: aim at the rest.
        let span = took.as_micros() as u64;
        let delay = Duration::from_micros(span / 3 + seed % (span - span / 3 + 1));
        let (_s, dir) = session_with_copy(
            &tmp.path().join(format!("run{i}")),
            &main,
            Some((SYNCTHING_COPY, &copy)),
        );
        let d = dir.to_str().expect("utf-8").to_owned();
        let mut child = Command::new(env!("CARGO_BIN_EXE_persyk"))
            .args(["recover", &d])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let status = child.wait().expect("wait");
        let after_kill = fs::read(dir.join("session.jsonl")).expect("read");
        match (status.success(), after_kill.len() == main.len()) {
            (true, _) => finished += 1,
            (false, true) => before_any += 1,
            (false, false) => killed_mid += 1,
        }
        // Whatever the kill left, every line of the session is still there.
        assert!(
            after_kill.starts_with(main.as_bytes()),
            "run {i}: a committed line changed"
        );
        let out = persyk(&["recover", &d]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "run {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            fs::read(dir.join("session.jsonl")).expect("read"),
            reference,
            "run {i}: the merge ended differently after a kill"
        );
        assert!(!dir.join(SYNCTHING_COPY).exists());
        let out = persyk(&["check", &d]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    println!(
        "kill -9 during a merge ({} ms uninterrupted): {killed_mid} killed mid-merge, {before_any} before the first append, {finished} finished",
        took.as_millis()
    );
}

// ---------------------------------------------------------------------------------------------
// pi's reader on a merged session.

/// pi 0.85.1 as `scripts/fetch-pi` installs it (fails with how to get it when missing).
fn pi_root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pi");
    assert!(
        root.join("node_modules/@earendil-works/pi-coding-agent/package.json")
            .exists(),
        "pi is missing: run scripts/fetch-pi (scripts/setup does)"
    );
    root
}

/// What pi's `SessionManager` reads from `file` (a copy with pi's version 3 in its header,
/// so pi migrates and rewrites nothing).
fn pi_reads(file: &Path) -> Value {
    let root = pi_root();
    let copy = file.with_extension("pi.jsonl");
    let text = fs::read_to_string(file).expect("read");
    fs::write(&copy, text.replacen("\"version\":1", "\"version\":3", 1)).expect("write");
    let out = Command::new("node")
        .arg(root.join("read.mjs"))
        .arg(&root)
        .arg(&copy)
        .output()
        .expect("node");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("pi's answer")
}

#[test]
fn pi_reads_what_the_merge_shows() {
    let (a, b) = label_here_cleanup_there();
    let (big_a, big_b) = large_fork(12);
    for (main, copy) in [(&a, &b), (&b, &a), (&big_a, &big_b), (&big_b, &big_a)] {
        let tmp = tempfile::tempdir().expect("tmp");
        let (store, dir) = session_with_copy(
            tmp.path(),
            &main.bytes(),
            Some((SYNCTHING_COPY, &copy.bytes())),
        );
        merge(&store, SYNCTHING_COPY);
        let file = dir.join("session.jsonl");
        let pi = pi_reads(&file);

        // Persyk's reading: the default path's messages and custom messages (pi applies no
        // removal, so none are taken out here), the labels and the name.
        let index = scan_path(&file).expect("scan");
        let p = project(&index, &LeafSelector::Default).expect("project");
        let by_id: HashMap<String, Value> = entries(&file)
            .into_iter()
            .map(|e| (e["id"].as_str().unwrap_or_default().to_owned(), e))
            .collect();
        let ours: Vec<Value> = p
            .path
            .iter()
            .map(|&q| &by_id[&*index.id(q)])
            .filter(|e| e["type"] == "message" || e["type"] == "custom_message")
            .map(|e| {
                if e["type"] == "message" {
                    json!({"role": e["message"]["role"], "customType": null,
                           "text": e["message"]["content"][0]["text"]})
                } else {
                    json!({"role": "custom", "customType": e["customType"], "text": e["content"]})
                }
            })
            .collect();
        assert_eq!(pi["messages"], Value::Array(ours));
        let leaf = p.leaf.map(|l| index.id(l).into_owned());
        assert_eq!(pi["leafId"], json!(leaf));
        let labels: serde_json::Map<String, Value> = index
            .labels()
            .map(|(t, l)| (index.id(t).into_owned(), json!(l)))
            .collect();
        assert_eq!(pi["labels"], Value::Object(labels));
        assert_eq!(pi["name"], json!(index.name()));
    }
    // The example as pi shows it: the spoken words, the other Mac's clean-up, and
    // the first Mac's label.
    let tmp = tempfile::tempdir().expect("tmp");
    let (store, dir) =
        session_with_copy(tmp.path(), &a.bytes(), Some((SYNCTHING_COPY, &b.bytes())));
    merge(&store, SYNCTHING_COPY);
    let pi = pi_reads(&dir.join("session.jsonl"));
    assert_eq!(
        pi["messages"],
        json!([
            {"role": "user", "customType": null, "text": "buy milk and call the bank"},
            {"role": "custom", "customType": "persyk.cleanup", "text": "Buy milk and call the bank."}
        ])
    );
    assert_eq!(pi["labels"]["base-1"], "groceries");
}

/// Issue #37 item 4: files a sync engine is still bringing are never read as sessions. A
/// folder holding only iCloud's placeholder of `session.jsonl` is listed as syncing (not
/// damaged) and search skips it with `sync.not-downloaded`; a session whose WAV is still a
/// Syncthing temporary file is syncing, and that file is not an asset or a copy; a finished
/// session beside them reads as usual.
#[test]
fn files_still_arriving_are_syncing_never_damage() {
    let (a, _) = label_here_cleanup_there();
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path();
    // Only the placeholder of the session file is here (iCloud keeps `.NAME.icloud`).
    let cloud = root.join("cloud");
    fs::create_dir_all(&cloud).expect("dir");
    fs::write(cloud.join(".session.jsonl.icloud"), b"bplist00 placeholder").expect("write");
    // The words are here, the recording still arriving through Syncthing.
    let wav = root.join("wav");
    fs::create_dir_all(wav.join("assets")).expect("dir");
    fs::write(wav.join("session.jsonl"), a.bytes()).expect("write");
    fs::write(wav.join("assets/.syncthing.rec-1.wav.tmp"), b"RIFF").expect("write");
    // An ordinary session.
    let done = root.join("done");
    fs::create_dir_all(done.join("assets")).expect("dir");
    fs::write(done.join("session.jsonl"), a.bytes()).expect("write");

    let r = root.to_str().expect("utf-8");
    let out = persyk(&["sessions", "--root", r, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("JSON rows");
    let row = |name: &str| {
        rows.iter()
            .find(|r| {
                r["location"]
                    .as_str()
                    .is_some_and(|l| Path::new(l).file_name() == Some(name.as_ref()))
            })
            .unwrap_or_else(|| panic!("{name} listed: {rows:#?}"))
    };
    assert_eq!(row("cloud")["syncing"], true, "{rows:#?}");
    assert_eq!(row("wav")["syncing"], true, "{rows:#?}");
    assert!(row("done")["syncing"].as_bool() != Some(true), "{rows:#?}");
    for name in ["wav", "done"] {
        assert!(row(name)["diagnostic"].is_null(), "{name}: {rows:#?}");
        assert!(
            row(name)["copies"].as_u64().unwrap_or(0) == 0,
            "a temporary file is not a conflict copy"
        );
    }

    // Search finds the words of both readable sessions and says why it skipped the other.
    let out = persyk(&["search", "milk", "--root", r, "--json"]);
    let hits: Vec<Value> = serde_json::from_slice(&out.stdout).expect("JSON rows");
    assert_eq!(hits.len(), 2, "{hits:#?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cloud") && stderr.contains("sync.not-downloaded"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("bplist00"),
        "a placeholder is never read: {stderr}"
    );
    // The placeholder's folder is untouched: nothing was written or repaired.
    let names: Vec<_> = fs::read_dir(&cloud)
        .expect("read")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

// ---------------------------------------------------------------------------------------------
// One writer per session per moment (issue #37 item 5, `session::presence`).

/// A store over `root` that knows itself as `device` (None: it knows no device).
fn store_of(root: &Path, device: Option<&str>) -> Store {
    let mut store = Store::new(Roots::new(root.to_path_buf(), Vec::new()).expect("roots"));
    if let Some(d) = device {
        store.set_device(d);
    }
    store
}

/// What every kind of write of another Mac gets while `dir`'s recording marker is fresh:
/// `sync.recording-elsewhere` naming the recording Mac, and not one byte written.
fn assert_nothing_written_by(store: &Store, dir: &Path, recording_mac: &str) {
    let name = dir.file_name().and_then(|n| n.to_str()).expect("name");
    let before = fs::read(dir.join("session.jsonl")).expect("read");
    let handle = store.open_session(0, name).expect("open");
    assert_eq!(handle.recording_elsewhere().as_deref(), Some(recording_mac));
    let elsewhere = |e: &persyk::session::StoreError| {
        assert_eq!(e.code(), "sync.recording-elsewhere", "{e}");
        match e {
            persyk::session::StoreError::RecordingElsewhere { device_name } => {
                assert_eq!(device_name, recording_mac)
            }
            other => panic!("{other}"),
        }
    };
    let mut continuation = handle.continuation(&LeafSelector::Default).expect("leaf");
    let label = EntryBody::SessionInfo(SessionInfo {
        name: Some("too early".into()),
        archived: None,
    });
    elsewhere(&continuation.append_one(label).expect_err("append"));
    elsewhere(&store.delete(&handle).expect_err("delete"));
    match store.recover(0, name).expect_err("recover") {
        persyk::session::recover::RecoverError::Store(e) => elsewhere(&e),
        other => panic!("{other}"),
    }
    elsewhere(
        &handle
            .claim_recording("mac-b", "Mac B")
            .expect_err("a second recording"),
    );
    assert_eq!(fs::read(dir.join("session.jsonl")).expect("read"), before);
    assert!(dir.exists());
}

#[test]
fn nobody_writes_to_a_session_another_mac_is_recording() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path();
    let mac_a = store_of(root, Some("mac-a"));
    let handle = mac_a.create_session().expect("create");
    let dir = handle.dir().to_path_buf();
    let mut recording = handle.continuation(&LeafSelector::Default).expect("leaf");
    recording
        .claim_recording("mac-a", "Mac A")
        .expect("A records it");
    let message = say;
    recording.append_one(message("one")).expect("A appends");

    // Mac B (another device), and a reader that knows no device: refused, nothing written.
    let mac_b = store_of(root, Some("mac-b"));
    assert_nothing_written_by(&mac_b, &dir, "Mac A");
    assert_nothing_written_by(&store_of(root, None), &dir, "Mac A");

    // Another process of Mac A itself (another store, the same device) is not stopped.
    let name = dir.file_name().and_then(|n| n.to_str()).expect("name");
    let same_mac = store_of(root, Some("mac-a"));
    let other = same_mac.open_session(0, name).expect("open");
    assert_eq!(other.recording_elsewhere(), None);
    other
        .continuation(&LeafSelector::Default)
        .expect("leaf")
        .append_one(EntryBody::SessionInfo(SessionInfo {
            name: Some("named on A".into()),
            archived: None,
        }))
        .expect("A's other process appends");
    recording.append_one(message("two")).expect("A appends");

    // The recording stops: the marker is gone and B's writes go through.
    drop(recording);
    assert!(!dir.join(persyk::session::presence::MARKER_FILE).exists());
    let b = mac_b.open_session(0, name).expect("open");
    assert_eq!(b.recording_elsewhere(), None);
    b.continuation(&LeafSelector::Default)
        .expect("leaf")
        .append_one(EntryBody::SessionInfo(SessionInfo {
            name: Some("named on B".into()),
            archived: None,
        }))
        .expect("B appends after the recording");
    assert!(
        scan_path(&dir.join("session.jsonl"))
            .expect("scan")
            .diagnostics()
            .is_empty()
    );
}

#[test]
fn a_marker_left_by_a_mac_that_stopped_beating_holds_nothing_for_long() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mac_b = store_of(tmp.path(), Some("mac-b"));
    let handle = mac_b.create_session().expect("create");
    let dir = handle.dir().to_path_buf();
    let name = dir.file_name().and_then(|n| n.to_str()).expect("name");
    let marker = |beat: OffsetDateTime| {
        json!({
            "deviceId": "mac-a",
            "deviceName": "Mac A",
            "sessionId": handle.session_id(),
            "heartbeat": beat.format(&Rfc3339).expect("format"),
        })
        .to_string()
    };
    let path = dir.join(persyk::session::presence::MARKER_FILE);
    // Mac A crashed mid-recording: its last heartbeat 30 s ago still counts …
    fs::write(
        &path,
        marker(OffsetDateTime::now_utc() - Duration::from_secs(30)),
    )
    .expect("w");
    assert_nothing_written_by(&mac_b, &dir, "Mac A");
    // … 61 s ago it no longer does, and B may even record into it.
    fs::write(
        &path,
        marker(OffsetDateTime::now_utc() - Duration::from_secs(61)),
    )
    .expect("w");
    let b = mac_b.open_session(0, name).expect("open");
    assert_eq!(b.recording_elsewhere(), None);
    let mut c = b.continuation(&LeafSelector::Default).expect("leaf");
    c.append_one(EntryBody::SessionInfo(SessionInfo {
        name: Some("after the crash".into()),
        archived: None,
    }))
    .expect("append");
    c.claim_recording("mac-b", "Mac B").expect("claim");
    assert_eq!(
        persyk::session::presence::read_marker(&dir).map(|m| m.device_name),
        Some("Mac B".to_owned())
    );
    drop(c);
    assert!(!path.exists());
}
