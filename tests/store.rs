//! The session store through its library API: layout of a new session, durable appends and
//! their acknowledgements, continuations, several handles and writers, paged reads, an
//! injected fsync failure followed by a simulated crash and explicit recovery, path attacks,
//! assets and capture locks, and deletion.
//!
//! Contract: `session-format.md` ("Native writes, assets and recovery", "Branches and
//! context") and `schema-v1.md`.

mod support;

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use persyk::session::assets::AssetLockState;
use persyk::session::format::{AssetRef, ByteRange, Custom, Entry, EntryBody};
use persyk::session::fsio::Storage;
use persyk::session::recover::TailOutcome;
use persyk::session::store::{AckStatus, AppendReport, MAX_PAGE, Roots, TRASH_DIR};
use persyk::session::{LeafSelector, SessionHandle, Store, StoreError, scan_path};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::Rng;
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A temporary root, canonicalized (handles report canonical paths).
fn temp_root() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let root = dir
        .path()
        .canonicalize()
        .expect("canonicalize the temp root");
    (dir, root)
}

fn roots(root: &Path) -> Roots {
    Roots::new(root.to_path_buf(), Vec::new()).expect("absolute root")
}

fn store_at(root: &Path) -> Store {
    Store::new(roots(root))
}

fn name_of(h: &SessionHandle) -> String {
    h.dir()
        .file_name()
        .and_then(|n| n.to_str())
        .expect("session folder name is UTF-8")
        .to_owned()
}

fn session_file(h: &SessionHandle) -> PathBuf {
    h.dir().join("session.jsonl")
}

fn custom(data: Value) -> EntryBody {
    EntryBody::Custom(Custom {
        custom_type: "test".into(),
        data,
    })
}

/// A complete raw `custom` record line (no "\n").
fn raw(id: &str, parent: Option<&str>, data: Value) -> String {
    Entry {
        id: id.into(),
        parent_id: parent.map(str::to_owned),
        timestamp: "2026-01-01T00:00:00.000Z".into(),
        body: custom(data),
    }
    .to_line()
}

fn err_code(report: &AppendReport) -> Option<&'static str> {
    report.error.as_ref().map(StoreError::code)
}

/// Parses every line of a session file after the header.
fn entries_of(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).expect("read session file");
    text.lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("entry line is JSON"))
        .collect()
}

fn entry_by_id<'a>(entries: &'a [Value], id: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("entry {id} is in the file"))
}

fn assert_valid(path: &Path) -> persyk::session::SessionIndex {
    let index = scan_path(path).expect("scan the session file");
    assert!(
        index.is_valid(),
        "session file is not valid: {:?}",
        index.diagnostics()
    );
    index
}

/// Kills and reaps a helper process when dropped (also on panic).
struct ChildGuard(Child);
impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `python3` holding `flock(LOCK_EX)` on `path` (a capture in another process) until
/// its stdin closes or it is killed; returns once the lock is held.
fn foreign_capture(path: &Path) -> ChildGuard {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import fcntl, sys\n\
             f = open(sys.argv[1], 'rb+')\n\
             fcntl.flock(f.fileno(), fcntl.LOCK_EX)\n\
             sys.stdout.write('locked\\n'); sys.stdout.flush()\n\
             sys.stdin.read()\n",
        ])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("python stdout"))
        .read_line(&mut line)
        .expect("read python's lock confirmation");
    assert_eq!(line.trim(), "locked", "python3 took the lock");
    ChildGuard(child)
}

// ---------------------------------------------------------------------------------------------
// Layout, appends, acknowledgements
// ---------------------------------------------------------------------------------------------

#[test]
fn create_session_writes_exactly_a_header_and_assets_dir() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().expect("create session");
    let name = name_of(&h);
    assert!(
        uuid::Uuid::parse_str(&name).is_ok(),
        "folder name {name} is a UUID"
    );
    assert_eq!(h.dir(), root.join(&name));
    assert!(root.join(&name).join("assets").is_dir(), "assets/ exists");

    let text = fs::read_to_string(session_file(&h)).unwrap();
    assert!(text.ends_with('\n'));
    assert_eq!(text.lines().count(), 1, "exactly one line: {text:?}");
    let header: Value = serde_json::from_str(text.trim_end()).unwrap();
    let obj = header.as_object().unwrap();
    let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    assert_eq!(keys, ["type", "version", "id", "timestamp"]);
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], 1);
    assert_eq!(header["id"], name.as_str());
    assert_eq!(h.session_id(), name);
    assert_valid(&session_file(&h));

    // Nothing else in the root: no staging folder left behind.
    let children: Vec<String> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(children, std::slice::from_ref(&name));

    // Opening (again, and from a fresh store) creates no entry.
    let before = fs::read(session_file(&h)).unwrap();
    drop(h);
    let other = store_at(&root);
    let h2 = other.open_session(0, &name).expect("open");
    let _c = h2
        .continuation(&LeafSelector::Default)
        .expect("continuation");
    assert_eq!(h2.with_index(|i| i.len()), 0);
    assert!(h2.read_page(0, 10).unwrap().is_empty());
    assert_eq!(fs::read(session_file(&h2)).unwrap(), before);
}

#[test]
fn continuation_append_acks_committed_and_file_validates() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let mut c = h.continuation(&LeafSelector::Default).unwrap();
    assert_eq!(c.leaf(), None);
    let report = c.append((0..5).map(|i| custom(json!({ "i": i }))).collect());
    assert!(report.error.is_none(), "{:?}", report.error);
    assert_eq!(report.acks.len(), 5);
    assert!(report.acks.iter().all(|a| a.status == AckStatus::Committed));
    assert_eq!(c.leaf(), Some(report.acks[4].id.as_str()));

    let index = assert_valid(&session_file(&h));
    assert_eq!(index.len(), 5);
    // Chained below the (empty) leaf, in order.
    let entries = entries_of(&session_file(&h));
    assert_eq!(entries[0]["parentId"], Value::Null);
    for i in 1..5 {
        assert_eq!(entries[i]["parentId"], entries[i - 1]["id"]);
        assert_eq!(entries[i]["id"], report.acks[i].id.as_str());
    }
}

#[test]
fn identical_retry_is_already_committed_and_changes_nothing() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let lines = vec![
        raw("r1", None, json!({"a": 1})),
        raw("r2", Some("r1"), json!({"b": [1, 2, 3]})),
        raw("r3", Some("r2"), json!("é🙂")),
    ];
    let first = h.append(&lines).into_result().expect("first append");
    assert!(first.iter().all(|a| a.status == AckStatus::Committed));
    let bytes = fs::read(session_file(&h)).unwrap();

    let retry = h.append(&lines).into_result().expect("identical retry");
    assert_eq!(
        retry
            .iter()
            .map(|a| (a.id.as_str(), a.status))
            .collect::<Vec<_>>(),
        [
            ("r1", AckStatus::AlreadyCommitted),
            ("r2", AckStatus::AlreadyCommitted),
            ("r3", AckStatus::AlreadyCommitted),
        ]
    );
    assert_eq!(
        fs::read(session_file(&h)).unwrap(),
        bytes,
        "retry wrote nothing"
    );

    // A retry from another store (another process after a crash) behaves the same.
    let other = store_at(&root);
    let h2 = other.open_session(0, &name_of(&h)).unwrap();
    let retry = h2.append(&lines).into_result().expect("retry elsewhere");
    assert!(
        retry
            .iter()
            .all(|a| a.status == AckStatus::AlreadyCommitted)
    );
    assert_eq!(fs::read(session_file(&h)).unwrap(), bytes);

    // Retry of a committed prefix plus new records: the new ones commit.
    let mut more = lines.clone();
    more.push(raw("r4", Some("r3"), json!(4)));
    let acks = h.append(&more).into_result().unwrap();
    assert_eq!(acks[2].status, AckStatus::AlreadyCommitted);
    assert_eq!(acks[3].status, AckStatus::Committed);
    assert_valid(&session_file(&h));
}

#[test]
fn conflicting_retry_fails_after_committing_the_prefix() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    h.append(&[raw("a", None, json!(1))]).into_result().unwrap();
    let batch = vec![
        raw("b", Some("a"), json!(2)),
        raw("c", Some("b"), json!(3)),
        raw("a", None, json!("different")), // same id, different content
        raw("d", Some("c"), json!(4)),
    ];
    let report = h.append(&batch);
    assert!(
        matches!(
            report.error,
            Some(StoreError::ConflictingRetry { index: 2 })
        ),
        "{:?}",
        report.error
    );
    assert_eq!(err_code(&report), Some("store.conflicting-retry"));
    assert_eq!(report.acks.len(), 2, "b and c committed");
    let index = assert_valid(&session_file(&h));
    let ids: Vec<String> = (0..index.len())
        .map(|p| index.id(p as u32).into_owned())
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
    // The committed record is unchanged.
    assert_eq!(entry_by_id(&entries_of(&session_file(&h)), "a")["data"], 1);
}

#[test]
fn invalid_record_mid_batch_commits_the_prefix_and_names_the_index() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let batch = vec![
        raw("x1", None, json!(1)),
        raw("x2", Some("x1"), json!(2)),
        raw("x3", Some("no-such-parent"), json!(3)),
        raw("x4", Some("x2"), json!(4)),
    ];
    let report = h.append(&batch);
    match &report.error {
        Some(StoreError::InvalidRecord { index, diagnostics }) => {
            assert_eq!(*index, 2);
            assert!(
                diagnostics
                    .iter()
                    .any(|d| d.code.as_str() == "entry.parent-missing"),
                "{diagnostics:?}"
            );
        }
        other => panic!("expected invalid-record, got {other:?}"),
    }
    assert_eq!(report.acks.len(), 2);
    let index = assert_valid(&session_file(&h));
    assert_eq!(index.len(), 2);

    // Syntax errors and embedded newlines are refused the same way.
    for bad in [
        "{\"type\":\"custom\"".to_owned(),
        format!(
            "{}\n{}",
            raw("n1", None, json!(1)),
            raw("n2", None, json!(2))
        ),
        raw("bad id!", None, json!(1)),
    ] {
        let report = h.append(&[raw("ok-before", Some("x2"), json!(0)), bad]);
        assert_eq!(err_code(&report), Some("store.invalid-record"));
        assert!(matches!(
            report.error,
            Some(StoreError::InvalidRecord { index: 1, .. })
        ));
        assert_eq!(report.acks.len(), 1);
    }
    let index = assert_valid(&session_file(&h));
    assert_eq!(
        index.len(),
        3,
        "x1, x2, ok-before (retried identically twice)"
    );
}

#[test]
fn batch_limits_are_256_records_and_4_mib() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let before = fs::read(session_file(&h)).unwrap();

    let too_many: Vec<String> = (0..257)
        .map(|i| raw(&format!("m{i}"), None, json!(i)))
        .collect();
    let report = h.append(&too_many);
    assert_eq!(err_code(&report), Some("store.batch-too-large"));
    assert!(report.acks.is_empty());
    assert_eq!(fs::read(session_file(&h)).unwrap(), before);

    // Five records of ~900 KB: each is under the 1 MiB record limit, together over 4 MiB.
    let big: Vec<String> = (0..5)
        .map(|i| raw(&format!("big{i}"), None, json!("x".repeat(900_000))))
        .collect();
    let report = h.append(&big);
    assert_eq!(err_code(&report), Some("store.batch-too-large"));
    assert!(report.acks.is_empty());
    assert_eq!(fs::read(session_file(&h)).unwrap(), before);

    // Exactly 256 records is fine.
    let acks = h
        .append(&too_many[..256])
        .into_result()
        .expect("256 records");
    assert_eq!(acks.len(), 256);
    assert_eq!(assert_valid(&session_file(&h)).len(), 256);
}

#[test]
fn supplied_parent_ids_are_preserved_byte_for_byte() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let lines = vec![
        raw("p1", None, json!(1)),
        raw("p2", Some("p1"), json!(2)),
        raw("p3", Some("p2"), json!(3)),
        // Not the latest entry: a branch below p1, and a second root.
        raw("p4", Some("p1"), json!(4)),
        raw("p5", None, json!(5)),
    ];
    h.append(&lines).into_result().unwrap();
    // A continuation with a different leaf does not rewrite a supplied parent either.
    let mut c = h.continuation(&LeafSelector::Id("p3".into())).unwrap();
    let supplied = Entry::from_line(&raw("p6", Some("p4"), json!(6))).unwrap();
    c.append_entries(&[supplied]).into_result().unwrap();
    assert_eq!(c.leaf(), Some("p6"));

    let text = fs::read_to_string(session_file(&h)).unwrap();
    let body: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(
        &body[..5],
        &lines.iter().map(String::as_str).collect::<Vec<_>>()[..]
    );
    assert_eq!(entries_of(&session_file(&h))[5]["parentId"], "p4");
    assert_valid(&session_file(&h));
}

// ---------------------------------------------------------------------------------------------
// Continuations, handles, other writers
// ---------------------------------------------------------------------------------------------

#[test]
fn continuations_at_the_same_leaf_become_siblings_and_never_rebase() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let mut base = h.continuation(&LeafSelector::Null).unwrap();
    let root_id = base.append_one(custom(json!("root"))).unwrap();

    let mut a = h.continuation(&LeafSelector::Id(root_id.clone())).unwrap();
    let mut b = h.continuation(&LeafSelector::Default).unwrap();
    assert_eq!(a.leaf(), Some(root_id.as_str()));
    assert_eq!(b.leaf(), Some(root_id.as_str()));

    let a1 = a.append_one(custom(json!("a1"))).unwrap();
    assert_eq!(a.leaf(), Some(a1.as_str()));
    assert_eq!(
        b.leaf(),
        Some(root_id.as_str()),
        "b does not move on a's ack"
    );
    let b1 = b.append_one(custom(json!("b1"))).unwrap();
    assert_eq!(b.leaf(), Some(b1.as_str()));
    assert_eq!(a.leaf(), Some(a1.as_str()), "a does not move on b's ack");

    let a2 = a.append_one(custom(json!("a2"))).unwrap();
    let b2 = b.append_one(custom(json!("b2"))).unwrap();

    let entries = entries_of(&session_file(&h));
    assert_eq!(entry_by_id(&entries, &a1)["parentId"], root_id.as_str());
    assert_eq!(entry_by_id(&entries, &b1)["parentId"], root_id.as_str());
    assert_eq!(entry_by_id(&entries, &a2)["parentId"], a1.as_str());
    assert_eq!(entry_by_id(&entries, &b2)["parentId"], b1.as_str());
    assert_valid(&session_file(&h));

    // A failed append leaves the leaf where it was.
    let leaf = a.leaf().map(str::to_owned);
    let report = a.append_entries(&[Entry::from_line(&raw("q", Some("nope"), json!(0))).unwrap()]);
    assert_eq!(err_code(&report), Some("store.invalid-record"));
    assert_eq!(a.leaf().map(str::to_owned), leaf);

    // An explicit leaf that does not exist fails rather than falling back.
    assert_eq!(
        h.continuation(&LeafSelector::Id("absent".into()))
            .unwrap_err()
            .code(),
        "store.leaf-not-found"
    );
}

#[test]
fn two_handles_in_one_process_share_state() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let name = name_of(&store.create_session().unwrap());
    let h1 = store.open_session(0, &name).unwrap();
    let h2 = store.open_session(0, &name).unwrap();
    let acks = h1
        .append(&[raw("one", None, json!(1))])
        .into_result()
        .unwrap();
    assert_eq!(acks[0].status, AckStatus::Committed);
    // The second handle sees it without a refresh and can build on it.
    assert_eq!(h2.with_index(|i| i.position("one")), Some(0));
    let mut c2 = h2.continuation(&LeafSelector::Default).unwrap();
    assert_eq!(c2.leaf(), Some("one"));
    c2.append_one(custom(json!(2))).unwrap();
    assert_eq!(h1.with_index(|i| i.len()), 2);
    // Identical retry through the other handle.
    let acks = h2
        .append(&[raw("one", None, json!(1))])
        .into_result()
        .unwrap();
    assert_eq!(acks[0].status, AckStatus::AlreadyCommitted);
    assert_valid(&h1.dir().join("session.jsonl"));
}

#[test]
fn another_writer_appends_and_the_first_handle_catches_up() {
    let (_tmp, root) = temp_root();
    let store_a = store_at(&root);
    let ha = store_a.create_session().unwrap();
    let name = name_of(&ha);
    let mut ca = ha.continuation(&LeafSelector::Null).unwrap();
    let start = ca.append_one(custom(json!("start"))).unwrap();

    // "Another process": a second store on the same root.
    let store_b = store_at(&root);
    let hb = store_b.open_session(0, &name).unwrap();
    let mut cb = hb.continuation(&LeafSelector::Default).unwrap();
    assert_eq!(cb.leaf(), Some(start.as_str()));
    let from_b = cb.append_one(custom(json!("from b"))).unwrap();

    // A names B's record as parent: catch-up happens under the lock, no parent-missing.
    let acks = ha
        .append(&[raw("child-of-b", Some(&from_b), json!(1))])
        .into_result()
        .expect("append after another writer");
    assert_eq!(acks[0].status, AckStatus::Committed);

    // A's continuation was at `start`; B's record does not rebase it.
    let a2 = ca.append_one(custom(json!("a2"))).unwrap();
    let entries = entries_of(&session_file(&ha));
    assert_eq!(entry_by_id(&entries, &a2)["parentId"], start.as_str());
    assert_eq!(entry_by_id(&entries, &from_b)["parentId"], start.as_str());

    // B catches up with A's records too.
    hb.refresh().unwrap();
    assert_eq!(hb.with_index(|i| i.len()), 4);
    let acks = hb
        .append(&[raw("child-of-a", Some(&a2), json!(2))])
        .into_result()
        .unwrap();
    assert_eq!(acks.len(), 1);
    assert_eq!(assert_valid(&session_file(&ha)).len(), 5);
}

#[test]
fn paged_reads_are_bounded_and_in_order() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let mut c = h.continuation(&LeafSelector::Null).unwrap();
    let mut ids = Vec::new();
    for chunk in 0..3 {
        let report = c.append((0..200).map(|i| custom(json!([chunk, i]))).collect());
        ids.extend(report.into_result().unwrap().into_iter().map(|a| a.id));
    }
    assert_eq!(ids.len(), 600);

    let page = h.read_page(0, 10_000).unwrap();
    assert_eq!(page.len(), MAX_PAGE);
    assert_eq!(MAX_PAGE, 256);
    let got: Vec<&str> = page.iter().map(|p| &*p.id).collect();
    assert_eq!(
        got,
        ids[..256].iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(page[3].entry.id, ids[3]);
    assert!(page[3].raw.get().contains(&ids[3]));

    let page = h.read_page(512, 256).unwrap();
    assert_eq!(page.len(), 88);
    assert_eq!(&*page[87].id, ids[599].as_str());
    let page = h.read_page(300, 5).unwrap();
    assert_eq!(
        page.iter().map(|p| p.id.to_string()).collect::<Vec<_>>(),
        ids[300..305]
    );
    assert!(h.read_page(600, 10).unwrap().is_empty());
    assert!(h.read_page(usize::MAX, usize::MAX).unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Injected I/O failure, crash and recovery
// ---------------------------------------------------------------------------------------------

/// A storage seam that fails the `fail_at`-th `sync_data` (or, in torn mode, writes only part
/// of the `fail_at`-th append and fails it), and remembers the session file's bytes at every
/// successful sync: the durable state a crash would leave.
#[derive(Debug)]
struct FailingStorage {
    fail_at: usize,
    torn: bool,
    syncs: AtomicUsize,
    appends: AtomicUsize,
    durable: Mutex<Vec<u8>>,
}

impl Storage for FailingStorage {
    fn append(&self, file: &mut File, buf: &[u8]) -> io::Result<()> {
        let n = self.appends.fetch_add(1, Ordering::SeqCst) + 1;
        if self.torn && n == self.fail_at {
            file.write_all(&buf[..buf.len() / 2])?;
            return Err(io::Error::other("injected short write"));
        }
        file.write_all(buf)
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        let n = self.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        if !self.torn && n == self.fail_at {
            return Err(io::Error::other("injected fsync failure"));
        }
        file.sync_data()?;
        let len = file.metadata()?.len() as usize;
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, 0)?;
        *self.durable.lock().unwrap() = bytes;
        Ok(())
    }
}

#[test]
fn io_failure_poisons_the_handle_and_recovery_keeps_every_ack() {
    let mut rng = Rng(0x5EED_0000_0001);
    let mut outcomes = [0usize; 3];
    for n in 1..=40usize {
        let torn = n % 5 == 0;
        let (_tmp, root) = temp_root();
        let name = name_of(&store_at(&root).create_session().unwrap());
        let header = fs::read(root.join(&name).join("session.jsonl")).unwrap();
        let storage = Arc::new(FailingStorage {
            fail_at: n,
            torn,
            syncs: AtomicUsize::new(0),
            appends: AtomicUsize::new(0),
            durable: Mutex::new(header),
        });
        let store = Store::with_storage(roots(&root), storage.clone());
        let h = store.open_session(0, &name).unwrap();
        let path = session_file(&h);
        let mut c = h.continuation(&LeafSelector::Default).unwrap();

        let mut acked: Vec<String> = Vec::new();
        let mut batch_no = 0;
        loop {
            batch_no += 1;
            assert!(batch_no <= n, "the failure at sync {n} never came");
            let count = 1 + rng.below(8) as usize;
            let bodies = (0..count)
                .map(|i| custom(json!({"n": n, "batch": batch_no, "i": i, "t": "é🙂\"\\"})))
                .collect();
            let report = c.append(bodies);
            match &report.error {
                None => {
                    assert_eq!(report.acks.len(), count);
                    acked.extend(report.acks.iter().map(|a| a.id.clone()));
                }
                Some(e) => {
                    assert_eq!(batch_no, n, "only the injected failure fails");
                    assert_eq!(e.code(), "store.io", "{e}");
                    assert!(
                        report.acks.is_empty(),
                        "n={n}: nothing of the batch is acked"
                    );
                    break;
                }
            }
        }
        // The handle (and every clone) is poisoned.
        for _ in 0..2 {
            let report = c.append(vec![custom(json!("after"))]);
            assert_eq!(err_code(&report), Some("store.previous-io"), "n={n}");
            assert!(report.acks.is_empty());
        }
        let retry = h.append(&[raw("retry", None, json!(0))]);
        assert_eq!(err_code(&retry), Some("store.previous-io"));

        // Crash: what survives is the durable state plus a torn prefix of what came after.
        let durable = storage.durable.lock().unwrap().clone();
        let written = fs::read(&path).unwrap();
        assert!(written.starts_with(&durable), "append-only");
        let after = &written[durable.len()..];
        // Cut anywhere, or exactly after a record's newline, or exactly before it.
        let newlines: Vec<usize> = (0..after.len()).filter(|&i| after[i] == b'\n').collect();
        let cut = match (n % 4, newlines.len() as u64) {
            (1, k) => match rng.below(k + 1) as usize {
                0 => 0,
                i => newlines[i - 1] + 1,
            },
            (2, k) if k > 0 => newlines[rng.below(k) as usize],
            _ => rng.below(after.len() as u64 + 1) as usize,
        };
        drop((c, h, store));
        let mut crashed = durable.clone();
        crashed.extend_from_slice(&after[..cut]);
        fs::write(&path, &crashed).unwrap();

        let partial = &after[..cut];
        let fragment = match partial.iter().rposition(|&b| b == b'\n') {
            Some(p) => &partial[p + 1..],
            None => partial,
        };
        let report = store_at(&root).recover(0, &name).expect("recover");
        match &report.tail {
            TailOutcome::Clean => {
                assert!(fragment.is_empty(), "n={n}");
                outcomes[0] += 1;
            }
            TailOutcome::AddedNewline => {
                assert!(serde_json::from_slice::<Value>(fragment).is_ok(), "n={n}");
                outcomes[1] += 1;
            }
            TailOutcome::PreservedFragment { file_name, bytes } => {
                assert_eq!(*bytes as usize, fragment.len(), "n={n}");
                let saved = fs::read(root.join(&name).join(file_name)).unwrap();
                assert_eq!(saved, fragment, "n={n}: the fragment is preserved exactly");
                outcomes[2] += 1;
            }
        }
        let index = assert_valid(&path);
        for id in &acked {
            assert!(index.position(id).is_some(), "n={n}: acked {id} survived");
        }
        // The recovered session is writable again.
        let fresh = store_at(&root);
        let h = fresh.open_session(0, &name).unwrap();
        let mut c = h.continuation(&LeafSelector::Default).unwrap();
        c.append_one(custom(json!("after recovery"))).unwrap();
        assert_valid(&path);
    }
    // The deterministic cuts exercise every tail outcome.
    assert!(
        outcomes.iter().all(|&k| k > 0),
        "tail outcomes {outcomes:?}"
    );
}

/// The store's own invariant (store.rs module docs): after a failed write "a fresh open
/// (after explicit recovery, if needed) is the way on". In one process that must not depend
/// on whether some clone of the poisoned handle is still alive.
#[test]
fn reopen_in_the_same_store_after_io_failure_gets_a_working_handle() {
    let (_tmp, root) = temp_root();
    let name = name_of(&store_at(&root).create_session().unwrap());
    let header = fs::read(root.join(&name).join("session.jsonl")).unwrap();
    let storage = Arc::new(FailingStorage {
        fail_at: 1,
        torn: false,
        syncs: AtomicUsize::new(0),
        appends: AtomicUsize::new(0),
        durable: Mutex::new(header),
    });
    let store = Store::with_storage(roots(&root), storage);
    let poisoned = store.open_session(0, &name).unwrap();
    let report = poisoned.append(&[raw("lost", None, json!(1))]);
    assert_eq!(err_code(&report), Some("store.io"));
    assert_eq!(
        err_code(&poisoned.append(&[raw("x", None, json!(1))])),
        Some("store.previous-io")
    );
    // `poisoned` is still alive (a UI or capture task holds a clone).
    store
        .recover(0, &name)
        .expect("explicit recovery in the same store");
    let fresh = store.open_session(0, &name).expect("fresh open");
    let acks = fresh
        .append(&[raw("next", None, json!(2))])
        .into_result()
        .expect("a fresh open is the way on");
    assert_eq!(acks.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Path attacks and handle identity
// ---------------------------------------------------------------------------------------------

#[test]
fn session_names_that_are_not_one_plain_component_are_refused() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    store.create_session().unwrap();
    fs::create_dir(root.join(".hidden")).unwrap();
    for name in ["..", ".", "a/b", "/etc", ".hidden", "", "..\\x", "x\0y"] {
        let err = store.open_session(0, name).unwrap_err();
        assert_eq!(err.code(), "store.invalid-name", "name {name:?}: {err}");
        let err = store.recover(0, name).unwrap_err();
        assert_eq!(err.code(), "store.invalid-name", "recover {name:?}");
    }
    assert_eq!(
        store.open_session(7, "x").unwrap_err().code(),
        "store.unknown-root"
    );
    assert_eq!(
        store.open_session(0, "missing").unwrap_err().code(),
        "store.not-a-session"
    );
    let outside = tempfile::tempdir().unwrap();
    assert_eq!(
        store.open_path(outside.path()).unwrap_err().code(),
        "store.escapes-root"
    );
    assert_eq!(
        Roots::new(PathBuf::from("relative"), Vec::new())
            .unwrap_err()
            .code(),
        "store.root-not-absolute"
    );
}

#[test]
fn symlinked_session_folders_may_not_leave_the_root() {
    let (_tmp, root) = temp_root();
    let (_out, outside) = temp_root();
    let store = store_at(&root);
    let outside_store = store_at(&outside);
    let victim = outside_store.create_session().unwrap();
    let victim_bytes = fs::read(session_file(&victim)).unwrap();

    symlink(victim.dir(), root.join("evil")).unwrap();
    assert_eq!(
        store.open_session(0, "evil").unwrap_err().code(),
        "store.escapes-root"
    );
    assert_eq!(
        store.recover(0, "evil").unwrap_err().code(),
        "store.escapes-root"
    );
    assert_eq!(
        store.open_path(&root.join("evil")).unwrap_err().code(),
        "store.escapes-root"
    );
    // A symlink to the root itself is no session either.
    symlink(&root, root.join("loop")).unwrap();
    assert!(store.open_session(0, "loop").is_err());
    assert_eq!(fs::read(session_file(&victim)).unwrap(), victim_bytes);

    // A symlink inside the root to another session inside the root is allowed, and is the
    // same session.
    let real = store.create_session().unwrap();
    symlink(real.dir(), root.join("alias")).unwrap();
    let alias = store
        .open_session(0, "alias")
        .expect("alias inside the root");
    assert_eq!(alias.session_id(), real.session_id());
    alias
        .append(&[raw("via-alias", None, json!(1))])
        .into_result()
        .unwrap();
    assert_eq!(real.with_index(|i| i.position("via-alias")), Some(0));
    assert_valid(&session_file(&real));
}

#[test]
fn a_symlinked_session_file_is_not_a_session() {
    let (_tmp, root) = temp_root();
    let (_out, outside) = temp_root();
    let victim = store_at(&outside).create_session().unwrap();
    let dir = root.join("sneaky");
    fs::create_dir_all(dir.join("assets")).unwrap();
    symlink(session_file(&victim), dir.join("session.jsonl")).unwrap();
    let store = store_at(&root);
    assert_eq!(
        store.open_session(0, "sneaky").unwrap_err().code(),
        "store.not-a-session"
    );
    assert_eq!(
        store.recover(0, "sneaky").unwrap_err().code(),
        "store.not-a-session"
    );
    // A folder whose session.jsonl is a directory is not a session either.
    fs::create_dir_all(root.join("odd").join("session.jsonl")).unwrap();
    assert_eq!(
        store.open_session(0, "odd").unwrap_err().code(),
        "store.not-a-session"
    );
}

#[test]
fn asset_names_must_be_plain() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    for name in ["a/b", "..", "../x.wav", ".x", "", "/etc/passwd", "x y"] {
        assert_eq!(
            h.create_asset(name, false).unwrap_err().code(),
            "store.invalid-name",
            "{name:?}"
        );
        assert_eq!(
            h.write_asset(name, b"x", "audio/wav", None)
                .unwrap_err()
                .code(),
            "store.invalid-name"
        );
        assert_eq!(
            h.start_capture(name).unwrap_err().code(),
            "store.invalid-name"
        );
        assert_eq!(
            h.asset_lock_state(name).unwrap_err().code(),
            "store.invalid-name"
        );
    }
    assert!(!root.join("x.wav").exists());
    assert!(!h.dir().join("x.wav").exists());
}

#[test]
fn a_planted_asset_symlink_is_never_written_through() {
    let (_tmp, root) = temp_root();
    let (_out, outside) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let assets = h.dir().join("assets");
    let elsewhere = outside.join("elsewhere");
    symlink(&elsewhere, assets.join("x.wav")).unwrap();
    assert_eq!(
        h.create_asset("x.wav", true).unwrap_err().code(),
        "store.asset-exists"
    );
    assert_eq!(
        h.write_asset("x.wav", b"data", "audio/wav", None)
            .unwrap_err()
            .code(),
        "store.asset-exists"
    );
    assert_eq!(
        h.start_capture("x.wav").unwrap_err().code(),
        "store.asset-exists"
    );
    assert!(!elsewhere.exists(), "nothing was created outside");

    // Also when the target exists: it is neither truncated nor written.
    fs::write(&elsewhere, b"precious").unwrap();
    assert_eq!(
        h.write_asset("x.wav", b"data", "audio/wav", None)
            .unwrap_err()
            .code(),
        "store.asset-exists"
    );
    assert_eq!(fs::read(&elsewhere).unwrap(), b"precious");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
}

#[test]
fn a_file_swapped_in_after_open_makes_the_handle_stale() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    h.append(&[raw("e1", None, json!(1))])
        .into_result()
        .unwrap();
    // Another valid session file, renamed over session.jsonl.
    let replacement = h.dir().join("replacement.jsonl");
    fs::copy(session_file(&h), &replacement).unwrap();
    fs::rename(&replacement, session_file(&h)).unwrap();
    let swapped = fs::read(session_file(&h)).unwrap();
    let report = h.append(&[raw("e2", Some("e1"), json!(2))]);
    assert_eq!(err_code(&report), Some("store.stale-handle"));
    assert!(report.acks.is_empty());
    assert_eq!(
        fs::read(session_file(&h)).unwrap(),
        swapped,
        "nothing written"
    );
    // A fresh open sees the new file and works.
    drop(h);
    let h = store_at(&root)
        .open_session(0, &name_of_dir(&root))
        .unwrap();
    h.append(&[raw("e2", Some("e1"), json!(2))])
        .into_result()
        .unwrap();
}

fn name_of_dir(root: &Path) -> String {
    let mut names: Vec<String> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names.pop().unwrap()
}

#[test]
fn a_deleted_or_moved_session_makes_the_handle_stale() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);

    let deleted = store.create_session().unwrap();
    fs::remove_dir_all(deleted.dir()).unwrap();
    let report = deleted.append(&[raw("x", None, json!(1))]);
    assert_eq!(err_code(&report), Some("store.stale-handle"));
    let mut c = deleted.continuation(&LeafSelector::Null).unwrap();
    assert_eq!(
        err_code(&c.append(vec![custom(json!(1))])),
        Some("store.stale-handle")
    );

    let moved = store.create_session().unwrap();
    let old_dir = moved.dir().to_path_buf();
    fs::rename(&old_dir, root.join("moved-away")).unwrap();
    let report = moved.append(&[raw("x", None, json!(1))]);
    assert_eq!(err_code(&report), Some("store.stale-handle"));
    assert_eq!(
        entries_of(&root.join("moved-away").join("session.jsonl")).len(),
        0
    );
}

/// Another process deletes the session (`Store::delete` renames the folder away while it
/// holds the session lock) while this handle waits for that lock. The wait must not end in an
/// acknowledgement of records written into the deleted file.
#[test]
fn append_waiting_for_the_lock_of_a_session_being_deleted_is_stale() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let dir = h.dir().to_path_buf();
    let blocker = File::open(session_file(&h)).unwrap();
    blocker.lock().unwrap();
    let writer = h.clone();
    let t = std::thread::spawn(move || writer.append(&[raw("late", None, json!(1))]));
    std::thread::sleep(Duration::from_millis(300)); // `late` passed revalidation; waits for the lock
    let trash = root.join(".persyk-trash");
    fs::create_dir(&trash).unwrap();
    fs::rename(&dir, trash.join("staged")).unwrap();
    fs::remove_dir_all(&trash).unwrap();
    blocker.unlock().unwrap();
    let report = t.join().unwrap();
    assert!(
        report.acks.is_empty(),
        "acknowledged {:?} into a deleted session",
        report.acks
    );
    assert_eq!(err_code(&report), Some("store.stale-handle"));
}

// ---------------------------------------------------------------------------------------------
// Assets and captures
// ---------------------------------------------------------------------------------------------

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn write_asset_is_exclusive_and_reports_its_sha256() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let asset = h
        .write_asset("clip-1.wav", &bytes, "audio/wav", Some("pcm_s16le"))
        .expect("write asset");
    assert_eq!(
        asset,
        AssetRef::Available {
            path: "assets/clip-1.wav".into(),
            mime_type: "audio/wav".into(),
            byte_range: Some(ByteRange {
                start: 0,
                end: bytes.len() as u64
            }),
            encoding: Some("pcm_s16le".into()),
            sha256: Some(hex_sha256(&bytes)),
        }
    );
    let path = h.dir().join("assets").join("clip-1.wav");
    assert_eq!(fs::read(&path).unwrap(), bytes);

    let err = h
        .write_asset("clip-1.wav", b"other", "audio/wav", None)
        .unwrap_err();
    assert_eq!(err.code(), "store.asset-exists");
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "never truncated or overwritten"
    );

    // A streamed asset hashes the same.
    let mut w = h.create_asset("clip-2.bin", true).unwrap();
    w.write(&bytes[..1234]).unwrap();
    w.write(&bytes[1234..]).unwrap();
    assert_eq!(w.len(), bytes.len() as u64);
    let streamed = w.finish("application/octet-stream", None).unwrap();
    match streamed {
        AssetRef::Available {
            sha256, byte_range, ..
        } => {
            assert_eq!(sha256, Some(hex_sha256(&bytes)));
            assert_eq!(byte_range, None);
        }
        other => panic!("{other:?}"),
    }

    // The reference is valid in a record.
    let record = json!({
        "type": "message", "id": "m1", "parentId": null,
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "timestamp": 1, "content": [
            {"type": "audio", "asset": serde_json::to_value(&asset).unwrap()}
        ]}
    });
    h.append(&[record.to_string()]).into_result().unwrap();
    assert_valid(&session_file(&h));
}

#[test]
fn a_capture_holds_its_asset_lock_until_dropped() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    assert_eq!(
        h.asset_lock_state("rec.wav").unwrap(),
        AssetLockState::Missing
    );
    let mut cap = h.start_capture("rec.wav").unwrap();
    assert_eq!(cap.asset_path(), "assets/rec.wav");
    cap.append(b"RIFF").unwrap();
    cap.sync().unwrap();
    assert_eq!(h.asset_lock_state("rec.wav").unwrap(), AssetLockState::Held);
    // Seen from "another process" (another store) too.
    let other = store_at(&root).open_session(0, &name_of(&h)).unwrap();
    assert_eq!(
        other.asset_lock_state("rec.wav").unwrap(),
        AssetLockState::Held
    );
    assert_eq!(
        h.start_capture("rec.wav").unwrap_err().code(),
        "store.asset-exists"
    );
    drop(cap);
    assert_eq!(h.asset_lock_state("rec.wav").unwrap(), AssetLockState::Free);
    assert_eq!(fs::read(h.dir().join("assets/rec.wav")).unwrap(), b"RIFF");
}

// ---------------------------------------------------------------------------------------------
// Deletion
// ---------------------------------------------------------------------------------------------

#[test]
fn deletion_is_refused_while_another_process_captures() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    drop(h.start_capture("rec.wav").unwrap());
    let wav = h.dir().join("assets").join("rec.wav");
    let before = fs::read(session_file(&h)).unwrap();

    let python = foreign_capture(&wav);
    assert_eq!(h.asset_lock_state("rec.wav").unwrap(), AssetLockState::Held);
    let err = store.delete(&h).unwrap_err();
    assert_eq!(err.code(), "store.capture-live");
    assert!(h.dir().is_dir());
    assert_eq!(fs::read(session_file(&h)).unwrap(), before);
    assert!(!h.is_revoked());
    h.append(&[raw("still-works", None, json!(1))])
        .into_result()
        .expect("the handle survives a refused deletion");

    drop(python); // the other capture ends
    store.delete(&h).expect("delete once the capture is gone");
    assert!(!h.dir().exists());
}

#[test]
fn deletion_stops_a_local_capture_first() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let cap = h.start_capture("rec.wav").unwrap();
    let t = std::thread::spawn(move || {
        while !cap.stop_requested() {
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(cap);
    });
    store
        .delete(&h)
        .expect("the local capture stops, then deletion proceeds");
    t.join().unwrap();
    assert!(!h.dir().exists());
}

#[test]
fn deletion_removes_only_that_session_and_revokes_its_handles() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let keep = store.create_session().unwrap();
    keep.append(&[raw("k", None, json!(1))])
        .into_result()
        .unwrap();
    keep.write_asset("a.bin", b"abc", "application/octet-stream", None)
        .unwrap();
    let keep_bytes = fs::read(session_file(&keep)).unwrap();

    let doomed = store.create_session().unwrap();
    doomed
        .append(&[raw("d", None, json!(1))])
        .into_result()
        .unwrap();
    doomed
        .write_asset("b.bin", b"xyz", "application/octet-stream", None)
        .unwrap();
    let name = name_of(&doomed);
    let mut cont = doomed.continuation(&LeafSelector::Default).unwrap();
    let second = store.open_session(0, &name).unwrap();
    let other_store = store_at(&root);
    let foreign = other_store.open_session(0, &name).unwrap();

    store.delete(&doomed).expect("delete");
    assert!(!root.join(&name).exists());
    assert!(!root.join(TRASH_DIR).exists(), "staging is cleaned up");
    assert_eq!(fs::read(session_file(&keep)).unwrap(), keep_bytes);
    assert_eq!(fs::read(keep.dir().join("assets/a.bin")).unwrap(), b"abc");

    assert!(doomed.is_revoked() && second.is_revoked());
    for h in [&doomed, &second, &foreign] {
        let report = h.append(&[raw("late", None, json!(1))]);
        assert_eq!(err_code(&report), Some("store.stale-handle"));
    }
    assert_eq!(
        err_code(&cont.append(vec![custom(json!(1))])),
        Some("store.stale-handle")
    );
    assert_eq!(
        doomed.read_page(0, 10).unwrap_err().code(),
        "store.stale-handle"
    );
    assert_eq!(
        doomed
            .write_asset("c.bin", b"", "x/y", None)
            .unwrap_err()
            .code(),
        "store.stale-handle"
    );
    assert_eq!(
        store.delete(&doomed).unwrap_err().code(),
        "store.stale-handle"
    );
    assert_eq!(
        store.open_session(0, &name).unwrap_err().code(),
        "store.not-a-session"
    );
    // The untouched session keeps working.
    keep.append(&[raw("k2", Some("k"), json!(2))])
        .into_result()
        .unwrap();
}

#[test]
fn a_deletion_interrupted_after_staging_is_finished_by_the_next_store() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let keep = store.create_session().unwrap();
    keep.append(&[raw("k", None, json!(1))])
        .into_result()
        .unwrap();
    let keep_bytes = fs::read(session_file(&keep)).unwrap();
    let staged = root.join(TRASH_DIR).join("0190aaaa-deleted-1234");
    fs::create_dir_all(staged.join("assets")).unwrap();
    fs::write(
        staged.join("session.jsonl"),
        b"{\"type\":\"session\",\"version\":1,\"id\":\"gone\",\"timestamp\":\"2026-01-01T00:00:00Z\"}\n",
    )
    .unwrap();
    fs::write(staged.join("assets/rec.wav"), b"RIFF....").unwrap();
    drop(store);

    let store = store_at(&root);
    assert!(!staged.exists(), "staged data is gone");
    assert!(!root.join(TRASH_DIR).exists());
    assert_eq!(fs::read(session_file(&keep)).unwrap(), keep_bytes);
    store.open_session(0, &name_of(&keep)).unwrap();
}

/// Storage that, once armed, starts "another process" (a new `Store` on the same root) the
/// moment a deletion has staged its folder under the trash, before the cleanup runs.
#[derive(Debug)]
struct StoreStartsDuringDeletion {
    root: PathBuf,
    armed: std::sync::atomic::AtomicBool,
}

impl Storage for StoreStartsDuringDeletion {
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let trash = self.root.join(TRASH_DIR);
        let staged = fs::read_dir(&trash).map(|d| d.count() > 0).unwrap_or(false);
        if staged && self.armed.swap(false, Ordering::SeqCst) {
            drop(store_at(&self.root));
        }
        persyk::session::fsio::sync_dir(dir)
    }
}

/// "Stages outside discovery before retryable cleanup": once the folder is staged the
/// deletion has happened; another process finishing the cleanup first must not turn the
/// confirmed deletion into an error.
#[test]
fn deletion_succeeds_when_another_process_finishes_the_cleanup() {
    let (_tmp, root) = temp_root();
    let storage = Arc::new(StoreStartsDuringDeletion {
        root: root.clone(),
        armed: std::sync::atomic::AtomicBool::new(false),
    });
    let store = Store::with_storage(roots(&root), storage.clone());
    let h = store.create_session().unwrap();
    storage.armed.store(true, Ordering::SeqCst);
    let result = store.delete(&h);
    assert!(!storage.armed.load(Ordering::SeqCst), "the other store ran");
    assert!(!h.dir().exists(), "the session is gone either way");
    result.expect("the confirmed deletion succeeded");
}

#[test]
fn a_trash_symlink_does_not_lead_cleanup_outside_the_root() {
    let (_tmp, root) = temp_root();
    let (_out, outside) = temp_root();
    fs::create_dir(outside.join("precious")).unwrap();
    fs::write(outside.join("precious/file"), b"keep me").unwrap();
    symlink(&outside, root.join(TRASH_DIR)).unwrap();
    let _store = store_at(&root);
    assert_eq!(fs::read(outside.join("precious/file")).unwrap(), b"keep me");
}

// ---------------------------------------------------------------------------------------------
// Recovery never writes through a symlink
// ---------------------------------------------------------------------------------------------

/// A 44-byte PCM16 mono 24 kHz WAV header whose RIFF and data sizes are 0.
fn unfinished_wav_header() -> Vec<u8> {
    let mut h = Vec::with_capacity(44);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&24_000u32.to_le_bytes());
    h.extend_from_slice(&48_000u32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&0u32.to_le_bytes());
    h
}

/// "Reject traversal and escaping symlinks": a recording whose asset is a planted symlink to a
/// file outside the session must not have that outside file truncated or rewritten.
#[test]
fn recovery_does_not_repair_a_wav_through_a_symlink() {
    let (_tmp, root) = temp_root();
    let (_out, outside) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    let started = json!({
        "type": "recording.started", "id": "r", "parentId": null,
        "timestamp": "2026-01-01T00:00:00Z",
        "recordingId": "rec1", "asset": "assets/rec1.wav"
    });
    h.append(&[started.to_string()]).into_result().unwrap();
    let victim = outside.join("victim.wav");
    let mut bytes = unfinished_wav_header();
    bytes.extend((0..301u32).map(|i| i as u8)); // 150 samples and an odd byte
    fs::write(&victim, &bytes).unwrap();
    symlink(&victim, h.dir().join("assets/rec1.wav")).unwrap();
    let name = name_of(&h);
    drop((h, store));

    let _ = store_at(&root).recover(0, &name);
    let after = fs::read(&victim).unwrap();
    assert!(
        after == bytes,
        "a file outside the session was modified: {} -> {} bytes, header {:?} -> {:?}",
        bytes.len(),
        after.len(),
        &bytes[..44],
        &after[..44.min(after.len())]
    );
}

#[test]
fn write_new_assets_land_only_inside_assets() {
    // A session created by hand without assets/ gets the folder on first use.
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().unwrap();
    fs::remove_dir(h.dir().join("assets")).unwrap();
    h.write_asset("late.bin", b"1", "application/octet-stream", None)
        .unwrap();
    assert_eq!(fs::read(h.dir().join("assets/late.bin")).unwrap(), b"1");

    // An assets "folder" that is a symlink to elsewhere is refused.
    let (_out, outside) = temp_root();
    let h2 = store.create_session().unwrap();
    fs::remove_dir(h2.dir().join("assets")).unwrap();
    symlink(&outside, h2.dir().join("assets")).unwrap();
    assert!(
        h2.write_asset("x.bin", b"1", "application/octet-stream", None)
            .is_err()
    );
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    let seen: HashSet<String> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(seen.len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Refusals: appends to a file that needs a person's decision, and recovery that will not guess
// ---------------------------------------------------------------------------------------------

/// A session with one committed custom entry, and its file.
fn session_with_one_entry(store: &Store) -> (SessionHandle, PathBuf) {
    let h = store.create_session().expect("create session");
    h.append(&[raw("e1", None, json!({"n": 1}))])
        .into_result()
        .expect("append e1");
    let file = session_file(&h);
    (h, file)
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open for append");
    f.write_all(bytes).expect("append bytes");
}

#[test]
fn appends_are_refused_while_a_tail_needs_recovery_and_after_it_work_again() {
    let (_dir, root) = temp_root();
    let store = store_at(&root);
    let (h, file) = session_with_one_entry(&store);
    // Another writer died mid-record.
    append_bytes(&file, br#"{"type":"custom","id":"cut","par"#);
    let before = fs::read(&file).expect("read");
    let report = h.append(&[raw("e2", Some("e1"), json!({"n": 2}))]);
    assert_eq!(err_code(&report), Some("store.needs-recovery"));
    assert!(report.acks.is_empty());
    assert_eq!(
        fs::read(&file).expect("read"),
        before,
        "a refused append writes nothing"
    );
    // Explicit recovery, then the same append goes through.
    let name = name_of(&h);
    drop(h);
    let outcome = store.recover(0, &name).expect("recover").tail;
    assert!(matches!(outcome, TailOutcome::PreservedFragment { .. }));
    let h = store.open_session(0, &name).expect("reopen");
    h.append(&[raw("e2", Some("e1"), json!({"n": 2}))])
        .into_result()
        .expect("append after recovery");
    assert_valid(&file);
}

#[test]
fn appends_are_refused_on_a_file_with_contract_violations() {
    let (_dir, root) = temp_root();
    let store = store_at(&root);
    let (h, file) = session_with_one_entry(&store);
    // A complete record whose parent does not exist: the file is no longer authoritative.
    append_bytes(
        &file,
        format!("{}\n", raw("bad", Some("nope"), json!({}))).as_bytes(),
    );
    let before = fs::read(&file).expect("read");
    let report = h.append(&[raw("e2", Some("e1"), json!({"n": 2}))]);
    assert_eq!(err_code(&report), Some("store.not-authoritative"));
    assert_eq!(fs::read(&file).expect("read"), before);
    // Recovery does not guess either: interior damage is a person's decision.
    let name = name_of(&h);
    drop(h);
    let err = store.recover(0, &name).expect_err("interior damage");
    assert_eq!(err.code(), "recover.interior-damage");
    assert_eq!(
        fs::read(&file).expect("read"),
        before,
        "recovery changed nothing"
    );
}

#[test]
fn recovery_refuses_tails_that_are_not_cut_short_records() {
    let (_dir, root) = temp_root();
    let store = store_at(&root);
    let cases: [(&str, Vec<u8>); 3] = [
        // Bytes that no JSON record starts with.
        ("recover.tail-malformed", b"}{ not a record".to_vec()),
        // More than a record may ever be (1 MiB), still open.
        (
            "recover.tail-too-large",
            [
                br#"{"type":"custom","id":"big","parentId":"e1","timestamp":"2026-01-01T00:00:00.000Z","customType":"t","data":""#.as_slice(),
                &vec![b'x'; 1 << 20],
            ]
            .concat(),
        ),
        // A complete record without its newline, but invalid (unknown parent).
        (
            "recover.tail-invalid-record",
            raw("late", Some("nope"), json!({})).into_bytes(),
        ),
    ];
    for (code, tail) in cases {
        let (h, file) = session_with_one_entry(&store);
        append_bytes(&file, &tail);
        let before = fs::read(&file).expect("read");
        let name = name_of(&h);
        drop(h);
        let err = store.recover(0, &name).expect_err(code);
        assert_eq!(err.code(), code);
        assert_eq!(
            fs::read(&file).expect("read"),
            before,
            "{code}: nothing changed"
        );
        let leftovers: Vec<_> = fs::read_dir(file.parent().expect("dir"))
            .expect("list")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("fragment"))
            .collect();
        assert!(leftovers.is_empty(), "{code}: no fragment file");
    }
}

#[test]
fn the_first_session_creates_a_missing_write_root_and_other_roots_stay_untouched() {
    let (_dir, base) = temp_root();
    let write = base.join("Documents").join("persyk").join("sessions");
    let other = base.join("elsewhere");
    fs::create_dir_all(&other).expect("other root");
    fs::write(other.join("keep.txt"), b"untouched").expect("file");
    assert!(!write.exists());
    let store = Store::new(Roots::new(write.clone(), vec![other.clone()]).expect("roots"));
    assert!(!write.exists(), "opening a store creates nothing");
    let h = store.create_session().expect("create");
    assert!(h.dir().starts_with(write.canonicalize().expect("created")));
    assert_valid(&session_file(&h));
    // The discovery-only root is never written to.
    let names: Vec<_> = fs::read_dir(&other)
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["keep.txt"]);
}
