//! Merging a sync engine's conflict copy (issue #37): a session of about 10 MiB
//! (`PERSYK_BENCH_MB`) forked — both Macs append to the same tip, one of them as a Syncthing
//! conflict copy — merged by `session::merge::merge_copy`, beside reading the same session
//! (`scan_path`: validate + index, what opening it costs) in the same run. Target: merging
//! ≤ 2× reading.
//!
//! Each merge runs on a fresh copy of the forked folder (the merge appends and removes the
//! copy); the time to lay the folder out is not counted. Best of `PERSYK_BENCH_RUNS` (5).
//!
//! Run: `cargo bench --bench merge`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use persyk::session::format::{Block, EntryBody, Label, Message, Role};
use persyk::session::merge::merge_copy;
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store, scan_path};

mod support;
use support::{generate_in, write_assets};

const COPY: &str = "session.sync-conflict-20261205-101500-ABCDEFG.jsonl";

fn say(text: &str) -> EntryBody {
    EntryBody::Message(Message::new(Role::User, vec![Block::text(text)], 1))
}

/// What one Mac appends at the common tip: `n` dictations and a label on the first.
fn append_side(store: &Store, folder: &str, tag: &str, n: usize) {
    let handle = store.open_session(0, folder).expect("open");
    let mut c = handle.continuation(&LeafSelector::Default).expect("tip");
    let mut first = None;
    for i in 0..n {
        let id = c
            .append_one(say(&format!(
                "{tag} dictation {i}: the meeting moves to Thursday"
            )))
            .expect("append");
        first.get_or_insert(id);
    }
    c.append_one(EntryBody::Label(Label {
        target_id: first.expect("one dictation at least"),
        label: Some(format!("from {tag}")),
    }))
    .expect("label");
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to.join("assets")).expect("dir");
    for e in fs::read_dir(from.join("assets")).expect("assets") {
        let e = e.expect("entry");
        fs::copy(e.path(), to.join("assets").join(e.file_name())).expect("copy asset");
    }
    for name in ["session.jsonl", COPY] {
        if from.join(name).exists() {
            fs::copy(from.join(name), to.join(name)).expect("copy");
        }
    }
}

/// A root holding folder `s`: the session with this Mac's appends and the other Mac's file
/// beside it as a conflict copy.
fn forked(work: &Path, source: &Path, appends: usize) -> PathBuf {
    let root = work.join("forked");
    fs::create_dir_all(&root).expect("root");
    for folder in ["s", "b"] {
        let dir = root.join(folder);
        fs::create_dir_all(&dir).expect("dir");
        fs::copy(source, dir.join("session.jsonl")).expect("copy");
        write_assets(&dir.join("session.jsonl"), &dir.join("assets"));
    }
    let store = Store::new(Roots::new(root.clone(), Vec::new()).expect("roots"));
    append_side(&store, "b", "Mac B", appends);
    append_side(&store, "s", "Mac A", appends);
    fs::rename(root.join("b/session.jsonl"), root.join("s").join(COPY)).expect("the copy");
    fs::remove_dir_all(root.join("b")).expect("rm b");
    root.join("s")
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let mb: u64 = std::env::var("PERSYK_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let runs: usize = std::env::var("PERSYK_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let appends = 50;
    let work = tempfile::tempdir().expect("tempdir");
    let source = generate_in(
        &PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-data"),
        mb,
    );
    let forked_dir = forked(work.path(), &source, appends);
    let session = forked_dir.join("session.jsonl");
    let size = fs::metadata(&session).expect("size").len() as f64 / 1_048_576.0;
    let copy_size = fs::metadata(forked_dir.join(COPY)).expect("size").len() as f64 / 1_048_576.0;

    // Reading: the session as opening it reads it (warm page cache).
    let mut read = Duration::MAX;
    let mut entries = 0;
    scan_path(&session).expect("scan");
    for _ in 0..runs {
        let t = Instant::now();
        let index = scan_path(&session).expect("scan");
        read = read.min(t.elapsed());
        assert!(index.is_valid(), "the forked session validates");
        entries = index.entries().len();
    }

    // Merging: a fresh copy of the forked folder each run.
    let mut merge = Duration::MAX;
    let mut written = (0, 0, 0);
    for i in 0..runs {
        let root = work.path().join(format!("run{i}"));
        copy_dir(&forked_dir, &root.join("s"));
        let store = Store::new(Roots::new(root.clone(), Vec::new()).expect("roots"));
        // Warm the page cache as for the read.
        scan_path(&root.join("s/session.jsonl")).expect("scan");
        scan_path(&root.join("s").join(COPY)).expect("scan copy");
        let t = Instant::now();
        let handle = store.open_session(0, "s").expect("open");
        let report = merge_copy(&handle, COPY).expect("merge");
        merge = merge.min(t.elapsed());
        written = (report.appended, report.carried, report.written);
        assert!(!root.join("s").join(COPY).exists(), "the copy is gone");
        assert!(
            scan_path(&root.join("s/session.jsonl"))
                .expect("scan")
                .is_valid()
        );
        fs::remove_dir_all(&root).expect("clean");
    }
    println!(
        "merge: session {size:.1} MiB ({entries} entries), conflict copy {copy_size:.1} MiB, {appends} dictations and a label on each side"
    );
    println!(
        "merge: reading the session (scan_path, validate + index), baseline  {:8.1} ms",
        read.as_secs_f64() * 1e3
    );
    println!(
        "merge: opening it and merging the copy                          {:8.1} ms  ({} entries of the copy appended, {} carried onto the default path, {} records written)",
        merge.as_secs_f64() * 1e3,
        written.0,
        written.1,
        written.2
    );
    println!(
        "merge: ratio merge/read = {:.2}x (target <= 2x)",
        merge.as_secs_f64() / read.as_secs_f64()
    );
}
