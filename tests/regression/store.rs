//! Regressions in the store side of Persyk.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use persyk::session::fsio::Storage;
use persyk::session::store::Roots;
use persyk::session::{SessionHandle, Store};
use persyk::settings::Settings;
use serde_json::{Value, json};
use tempfile::TempDir;

/// A temporary root, canonicalized (handles report canonical paths).
fn temp_root() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let root = dir.path().canonicalize().expect("canonicalize");
    (dir, root)
}

fn store_at(root: &Path) -> Store {
    Store::new(Roots::new(root.to_path_buf(), Vec::new()).expect("absolute root"))
}

fn name_of(h: &SessionHandle) -> String {
    h.dir()
        .file_name()
        .and_then(|n| n.to_str())
        .expect("UTF-8 folder name")
        .to_owned()
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Runs `persyk <args>` with `stdin` as its input.
fn persyk_with_input(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_persyk"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run persyk");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("persyk finishes")
}

/// The acknowledgement statuses `persyk append` printed, in order.
fn statuses(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("an ack is JSON");
            v["status"].as_str().expect("status").to_owned()
        })
        .collect()
}

/// A WAV header as Persyk's capture writes it (24 kHz mono PCM16), sizes still zero.
fn persyk_wav_header() -> Vec<u8> {
    wav_header(1, 24_000, 48_000, 2, 16)
}

fn wav_header(channels: u16, rate: u32, byte_rate: u32, block_align: u16, bits: u16) -> Vec<u8> {
    let mut h = Vec::with_capacity(44);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&channels.to_le_bytes());
    h.extend_from_slice(&rate.to_le_bytes());
    h.extend_from_slice(&byte_rate.to_le_bytes());
    h.extend_from_slice(&block_align.to_le_bytes());
    h.extend_from_slice(&bits.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&0u32.to_le_bytes());
    h
}

/// A session with one unfinished recording whose asset is `assets/<rec>.wav`.
fn session_with_unfinished_recording(store: &Store, rec: &str) -> SessionHandle {
    let h = store.create_session().expect("create");
    let started = json!({
        "type": "recording.started", "id": format!("start-{rec}"), "parentId": null,
        "timestamp": "2026-01-01T00:00:00Z",
        "recordingId": rec, "asset": format!("assets/{rec}.wav")
    });
    h.append(&[started.to_string()])
        .into_result()
        .expect("append recording.started");
    h
}

/// Runs `body` on its own thread and fails (instead of hanging the suite) if it has not
/// finished within `deadline`: a deadlocked body is reported, its threads are left behind.
fn within_deadline(deadline: Duration, what: &str, body: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        body();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(deadline) {
        Ok(()) => worker.join().expect("the worker finished"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: surface its panic.
            if let Err(p) = worker.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: no progress within {deadline:?} (deadlock)")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Item 6: a retried `persyk append` line that leaves out timestamp/parentId conflicted.
// ---------------------------------------------------------------------------------------------

/// `persyk append` filled a missing `timestamp`/`parentId` with "now" and the current leaf, so
/// retrying the identical stable-id line produced different content and failed with
/// `store.conflicting-retry`. A retry of an identical input line is `already-committed`
/// (within one run and across runs); a line that changes what it does say still conflicts.
#[test]
fn issue16_06_append_retry_of_an_identical_line_is_already_committed() {
    let (_tmp, root) = temp_root();
    let session = store_at(&root).create_session().expect("create");
    let dir = session.dir().to_str().expect("UTF-8").to_owned();
    let line = r#"{"type":"custom","id":"stable-1","customType":"t","data":{"n":1}}"#;

    let first = persyk_with_input(&["append", &dir], &format!("{line}\n"));
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert_eq!(statuses(&first), ["committed"]);
    // Another record moves the default leaf on, so a fresh fill would pick another parent.
    let other = r#"{"type":"custom","id":"other","customType":"t","data":2}"#;
    let out = persyk_with_input(&["append", &dir], &format!("{other}\n"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let retry = persyk_with_input(&["append", &dir], &format!("{line}\n{line}\n"));
    assert_eq!(
        (retry.status.code(), statuses(&retry)),
        (Some(0), vec!["already-committed".to_owned(); 2]),
        "stderr: {}",
        String::from_utf8_lossy(&retry.stderr)
    );
    // Changing what the line says is still a conflict, not an acknowledgement.
    let changed = r#"{"type":"custom","id":"stable-1","customType":"t","data":{"n":2}}"#;
    let out = persyk_with_input(&["append", &dir], &format!("{changed}\n"));
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("store.conflicting-retry"),
        "{out:?}"
    );
    let text = fs::read_to_string(session.dir().join("session.jsonl")).expect("read");
    assert_eq!(text.matches(r#""id":"stable-1""#).count(), 1, "{text}");
}

// ---------------------------------------------------------------------------------------------
// Item 8: transcripts and audio were world-readable.
// ---------------------------------------------------------------------------------------------

/// Folders, the records file, assets, capture WAVs, recovery fragments, `.persyk-trash` and
/// the settings file were created under the process umask (0755/0644 with umask 022). The
/// body runs in a child process of this test binary started under `umask 022`, so the check
/// holds whatever umask the suite itself runs with.
#[test]
fn issue16_08_new_files_and_folders_are_private_under_a_permissive_umask() {
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"umask 022 && exec "$0" "$@""#)
        .arg(exe)
        .args([
            "store::issue16_08_private_modes_body",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .expect("run the body under umask 022");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the body failed under umask 022:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Records the mode of `<root>/.persyk-trash` when deletion syncs the root after creating it
/// (the folder is removed again once the deletion is done).
#[derive(Debug, Default)]
struct TrashModeSpy {
    trash_mode: Mutex<Option<u32>>,
}

impl Storage for TrashModeSpy {
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        let trash = dir.join(persyk::session::store::TRASH_DIR);
        if let Ok(m) = fs::symlink_metadata(&trash) {
            self.trash_mode
                .lock()
                .expect("spy")
                .get_or_insert(m.permissions().mode() & 0o777);
        }
        persyk::session::fsio::sync_dir(dir)
    }
}

#[test]
#[ignore = "the body of issue16_08_new_files_and_folders_are_private_under_a_permissive_umask, \
            which runs it under umask 022"]
fn issue16_08_private_modes_body() {
    let (_tmp, base) = temp_root();
    // The default root is created by the first session, parents included.
    let root = base.join("Documents").join("persyk").join("sessions");
    let spy = Arc::new(TrashModeSpy::default());
    let store = Store::with_storage(
        Roots::new(root.clone(), Vec::new()).expect("roots"),
        spy.clone(),
    );
    let h = session_with_unfinished_recording(&store, "rec1");
    let dir = h.dir().to_owned();
    let mut modes = vec![
        ("created parent folder", mode_of(&base.join("Documents"))),
        ("write root", mode_of(&root)),
        ("session folder", mode_of(&dir)),
        ("assets/", mode_of(&dir.join("assets"))),
        ("session.jsonl", mode_of(&dir.join("session.jsonl"))),
    ];
    h.write_asset("protocol-1.bin", b"bytes", "application/octet-stream", None)
        .expect("write asset");
    modes.push((
        "protocol asset",
        mode_of(&dir.join("assets/protocol-1.bin")),
    ));
    let capture = h.start_capture("rec2.wav").expect("capture");
    modes.push(("capture WAV", mode_of(&dir.join("assets/rec2.wav"))));
    drop(capture);
    // A torn tail, preserved by recovery in a fragment file.
    fs::OpenOptions::new()
        .append(true)
        .open(dir.join("session.jsonl"))
        .and_then(|mut f| f.write_all(br#"{"type":"custom","id":"torn","#))
        .expect("tear the tail");
    let name = name_of(&h);
    drop(h);
    store.recover(0, &name).expect("recover");
    let fragment = fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_string_lossy().contains(".fragment-"))
        .expect("a fragment was preserved");
    modes.push(("recovery fragment", mode_of(&fragment)));
    // A new assets/ (a session made by hand without one) is private too.
    let h = store.open_session(0, &name).expect("reopen");
    let h2 = store.create_session().expect("second session");
    fs::remove_dir(h2.dir().join("assets")).expect("remove assets");
    h2.write_asset("a.bin", b"x", "application/octet-stream", None)
        .expect("asset into a fresh assets/");
    modes.push(("re-created assets/", mode_of(&h2.dir().join("assets"))));
    store.delete(&h).expect("delete");
    modes.push((
        ".persyk-trash",
        spy.trash_mode
            .lock()
            .expect("spy")
            .expect("trash was created"),
    ));
    // The settings file, and the config folder it creates.
    let config = base.join("config").join("persyk");
    Settings::default()
        .save(&config.join("settings.json"))
        .expect("save settings");
    modes.push(("config folder", mode_of(&config)));
    modes.push(("settings file", mode_of(&config.join("settings.json"))));

    let public: Vec<String> = modes
        .iter()
        .filter(|(_, m)| m & 0o077 != 0)
        .map(|(what, m)| format!("{what}: {m:o}"))
        .collect();
    assert!(
        public.is_empty(),
        "readable by others under umask 022: {public:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Item 9: recovery wrote through a symlinked assets/ and trusted the WAV's frame size.
// ---------------------------------------------------------------------------------------------

/// With `assets -> elsewhere`, `persyk recover` "repaired" (truncated and rewrote) a WAV
/// outside the session. Recovery refuses with `store.escapes-root` and leaves it as it was.
#[test]
fn issue16_09_recovery_never_repairs_a_wav_through_a_symlinked_assets_folder() {
    let (_tmp, root) = temp_root();
    let (_out, outside) = temp_root();
    let store = store_at(&root);
    let h = session_with_unfinished_recording(&store, "rec1");
    let mut bytes = persyk_wav_header();
    bytes.extend((0..301u32).map(|i| i as u8)); // 150 samples and an odd byte
    fs::write(outside.join("rec1.wav"), &bytes).expect("outside WAV");
    fs::remove_dir(h.dir().join("assets")).expect("remove assets");
    symlink(&outside, h.dir().join("assets")).expect("assets -> outside");
    let name = name_of(&h);
    let before = fs::read(h.dir().join("session.jsonl")).expect("read");
    drop((h, store));

    let result = store_at(&root).recover(0, &name);
    let after = fs::read(outside.join("rec1.wav")).expect("outside WAV");
    assert!(
        after == bytes,
        "a WAV outside the session was modified: {} -> {} bytes",
        bytes.len(),
        after.len()
    );
    assert_eq!(
        result.map(|_| ()).map_err(|e| e.code()),
        Err("store.escapes-root")
    );
    assert_eq!(
        fs::read(root.join(&name).join("session.jsonl")).expect("read"),
        before,
        "nothing was appended for a recording recovery refused"
    );
}

/// A WAV whose header claims another frame size (here a 65,535-byte `block_align`) had all
/// its samples truncated away by recovery, which took the frame size from the file. Only the
/// 24 kHz mono PCM16 format Persyk writes is repaired; anything else is left untouched.
#[test]
fn issue16_09_recovery_trusts_only_the_wav_format_persyk_writes() {
    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = session_with_unfinished_recording(&store, "rec1");
    let mut bytes = wav_header(1, 24_000, 48_000, u16::MAX, 16);
    bytes.extend((0..4_000u32).map(|i| i as u8));
    let wav = h.dir().join("assets/rec1.wav");
    fs::write(&wav, &bytes).expect("WAV");
    let name = name_of(&h);
    drop((h, store));

    store_at(&root).recover(0, &name).expect("recover");
    let after = fs::read(&wav).expect("WAV");
    assert!(
        after == bytes,
        "recovery changed a WAV it does not understand: {} -> {} bytes",
        bytes.len(),
        after.len()
    );
}

// ---------------------------------------------------------------------------------------------
// Item 11: lock-order inversion between open and delete.
// ---------------------------------------------------------------------------------------------

/// `open_session` held the store's registry and then took the session's writer lock, while
/// deletion held the writer lock and then took the registry to revoke handles: an open racing
/// a delete of the same session deadlocked both threads. Races them repeatedly; a deadlock
/// fails the test at the deadline instead of hanging it.
#[test]
fn issue16_11_delete_racing_open_of_the_same_session_never_deadlocks() {
    within_deadline(Duration::from_secs(60), "delete racing open", || {
        let (_tmp, root) = temp_root();
        let store = Arc::new(store_at(&root));
        for _ in 0..100 {
            let h = store.create_session().expect("create");
            let name = name_of(&h);
            let opener = {
                let store = store.clone();
                std::thread::spawn(move || {
                    // Opens until the session is gone; every open races the deletion.
                    let mut opened = 0u32;
                    while let Ok(h) = store.open_session(0, &name) {
                        opened += 1;
                        drop(h);
                    }
                    opened
                })
            };
            // Let the opener get going, then delete under its feet.
            std::thread::yield_now();
            store.delete(&h).expect("delete");
            opener.join().expect("the opener ends");
            assert!(!h.dir().exists());
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Item 14: deletion never stopped a local capture.
// ---------------------------------------------------------------------------------------------

/// The capture loop never read `CaptureAsset::stop_requested`, so deleting a session that
/// was recording waited 5 s and failed with `store.capture-live`. Now the capture notices
/// the request and ends, and the deletion goes through.
#[test]
fn issue16_14_deleting_a_recording_session_stops_its_capture() {
    use persyk::pipeline::{self, SamplesSource, SourceKind};
    use persyk::realtime::fake::{self, Scenario};
    use persyk::realtime::protocol::Settings as Provider;
    use persyk::session::LeafSelector;

    let (_tmp, root) = temp_root();
    let rt = crate::realtime::runtime();
    let scenario = Scenario::from_json(r#"{"name": "long", "connections": [{"utterances": []}]}"#)
        .expect("scenario");
    let server = rt.block_on(fake::spawn(scenario)).expect("fake provider");
    let store = store_at(&root);
    let handle = store.create_session().expect("session");
    let continuation = handle
        .continuation(&LeafSelector::Default)
        .expect("continuation");
    let settings = Provider {
        base_url: format!("ws://{}/v1", server.addr),
        ..Provider::default()
    };
    // 60 s of a tone in real time; nobody presses Stop.
    let tone: Vec<i16> = (0..24_000 * 60)
        .map(|i| if (i / 40) % 2 == 0 { 8_000 } else { -8_000 })
        .collect();
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let recording = rt.spawn(pipeline::record(
        continuation,
        settings,
        "sk-test-delete".into(),
        Box::new(SamplesSource::new(tone, 1.0)),
        SourceKind::Replay,
        stop_rx,
    ));
    // Wait until the capture holds its WAV.
    let assets = handle.dir().join("assets");
    let live = (0..2_000).any(|_| {
        let held = fs::read_dir(&assets).ok().and_then(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|n| n.ends_with(".wav"))
        });
        if let Some(n) = held
            && handle.asset_lock_state(&n).ok()
                == Some(persyk::session::assets::AssetLockState::Held)
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
        false
    });
    assert!(live, "the capture started");

    let deleted = store.delete(&handle).map_err(|e| e.code());
    assert_eq!(deleted, Ok(()), "deletion stops the local capture");
    assert!(!handle.dir().exists());
    // The recording ends too (its session is gone, so it may end in an error).
    let ended =
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), recording).await });
    assert!(
        matches!(ended, Ok(Ok(_))),
        "the recording task ended after the deletion: {ended:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Item 15: an explicit missing write root was re-created.
// ---------------------------------------------------------------------------------------------

/// A configured `sessions.directory` on an unmounted drive was silently re-created, parents
/// and all, and the recording went there. Only the default root is created; an explicit
/// missing one refuses with `store.root-missing` and creates nothing.
#[test]
fn issue16_15_a_missing_configured_write_root_is_refused_not_created() {
    let (_tmp, base) = temp_root();
    let volume = base.join("Volumes").join("External");
    let configured = volume.join("persyk-sessions");
    let mut settings = Settings::default();
    settings.sessions.directory = Some(configured.clone());
    let store = Store::new(settings.roots(false).expect("roots"));
    let err = store
        .create_session()
        .map(|h| h.dir().to_owned())
        .expect_err("a missing explicit root is refused");
    assert_eq!(err.code(), "store.root-missing");
    assert!(!volume.exists(), "nothing was created on the missing drive");

    // `persyk new --root <missing>` is explicit too.
    let missing = base.join("not-mounted");
    let out = persyk_with_input(&["new", "--root", missing.to_str().expect("UTF-8")], "");
    assert_eq!(out.status.code(), Some(2), "cannot run: {out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("store.root-missing"),
        "{out:?}"
    );
    assert!(!missing.exists());
}

// ---------------------------------------------------------------------------------------------
// Other promises of issue #16 on the store side.
// ---------------------------------------------------------------------------------------------

/// The format allows 128 nested containers, but `persyk append` parsed records with
/// serde_json's default limit (127) and refused them as "not a JSON object"; the identical
/// retry compared them the same way. A 128-deep record is committed (with and without the
/// envelope filled in), retried as already committed, and a 129-deep one is refused with
/// the validator's `record.too-deep`.
#[test]
fn issue16_append_accepts_records_nested_128_deep() {
    let (_tmp, root) = temp_root();
    let session = store_at(&root).create_session().expect("create");
    let dir = session.dir().to_str().expect("UTF-8").to_owned();
    // The record's own object is depth 1; `data` adds `inner` more.
    let deep = |id: &str, inner: usize, envelope: bool| {
        let data = format!("{}{}", "[".repeat(inner), "]".repeat(inner));
        if envelope {
            format!(
                r#"{{"type":"custom","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:00Z","customType":"t","data":{data}}}"#
            )
        } else {
            format!(r#"{{"type":"custom","id":"{id}","customType":"t","data":{data}}}"#)
        }
    };
    let input = format!(
        "{}\n{}\n",
        deep("deep-full", 127, true),
        deep("deep-filled", 127, false)
    );
    let out = persyk_with_input(&["append", &dir], &input);
    assert_eq!(
        (out.status.code(), statuses(&out)),
        (Some(0), vec!["committed".to_owned(); 2]),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = persyk_with_input(&["append", &dir], &input);
    assert_eq!(
        (out.status.code(), statuses(&out)),
        (Some(0), vec!["already-committed".to_owned(); 2]),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = persyk_with_input(
        &["append", &dir],
        &format!("{}\n", deep("too-deep", 128, true)),
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("record.too-deep"),
        "{out:?}"
    );
    let index = persyk::session::scan_path(&session.dir().join("session.jsonl")).expect("scan");
    assert!(index.is_valid(), "{:?}", index.diagnostics());
    assert_eq!(index.len(), 2);
}

/// History reads the projected entries back by offset. If the file changed after the scan
/// (here: a line replaced, at the same offset and length, by one nested 100,000 deep), the
/// read must re-check the record limits and say `history.changed`, not overflow the stack.
#[test]
fn issue16_history_read_of_a_line_replaced_by_a_too_deep_one_is_history_changed() {
    use persyk::session::history;

    let (_tmp, root) = temp_root();
    let store = store_at(&root);
    let h = store.create_session().expect("create");
    let depth = 100_000;
    // A valid line exactly as long as the deep replacement below.
    let deep_line = format!(
        r#"{{"type":"custom","id":"x","parentId":null,"timestamp":"2026-01-01T00:00:00Z","customType":"t","data":{}{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let prefix = r#"{"type":"custom","id":"x","parentId":null,"timestamp":"2026-01-01T00:00:00Z","customType":"t","data":""#;
    let pad = deep_line.len() - prefix.len() - 2;
    let line = format!("{prefix}{}\"}}", "a".repeat(pad));
    assert_eq!(line.len(), deep_line.len());
    h.append(&[line]).into_result().expect("append");
    let file = h.dir().join("session.jsonl");
    let index = persyk::session::scan_path(&file).expect("scan");
    assert!(index.is_valid());
    let entry = index.entry(0);
    let text = fs::read(&file).expect("read");
    let mut changed = text.clone();
    changed[entry.offset() as usize..entry.offset() as usize + entry.len_bytes() as usize]
        .copy_from_slice(deep_line.as_bytes());
    fs::write(&file, &changed).expect("rewrite behind the index's back");

    // A small stack makes an unbounded recursion fail for certain, not only sometimes.
    let result = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let mut f = fs::File::open(&file).expect("open");
            history::read_entries(&mut f, &index, &[0])
                .map(|_| ())
                .map_err(|e| e.code())
        })
        .expect("spawn")
        .join()
        .expect("the read returns instead of crashing");
    assert_eq!(result, Err("history.changed"));
}
