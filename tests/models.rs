//! Model downloads against the loopback HTTP server of tests/model_server (std `TcpListener`,
//! one thread per connection): progress, resume after a cut with `Range`, a cancel that keeps the part,
//! wrong hash / wrong size / not-a-model refused with nothing installed, delete, the lock
//! between two downloads; and the real `persyk models` binary: list, a full disk
//! (`RLIMIT_FSIZE` on the child) and Ctrl+C leaving a `.part` the next run resumes.

mod model_server;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use model_server::{
    MODEL_LEN, Serve, Server, model_byte, not_a_model_byte, serve, sha256_of, whisper_model,
};
use persyk::local::GGML_MAGIC;
use persyk::local::models::LocalModelChoice;
use persyk::local::models::{self, CatalogModel, ModelState, ModelStore, Phase, Progress};

fn test_model(sha256: &'static str) -> &'static CatalogModel {
    Box::leak(Box::new(CatalogModel {
        name: "test.en",
        bytes: MODEL_LEN as u64,
        sha256,
        description: "a test model",
    }))
}

fn good_model() -> &'static CatalogModel {
    test_model(sha256_of(MODEL_LEN, model_byte))
}

fn store_for(server: &Server, dir: &Path) -> ModelStore {
    ModelStore::new(dir.join("models"))
        .with_base_url(&server.url())
        .unwrap()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The folder after an install: the model and its (hidden) verification record.
const INSTALLED: [&str; 2] = [".ggml-test.en.bin.verified", "ggml-test.en.bin"];

fn never() -> AtomicBool {
    AtomicBool::new(false)
}

// ---------------------------------------------------------------------------------------------
// The library.

#[test]
fn a_download_reports_progress_verifies_and_installs_privately() {
    let server = serve(MODEL_LEN, model_byte, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    let store = store_for(&server, dir.path());
    let model = good_model();
    assert_eq!(store.state(model), ModelState::Absent);
    let mut seen: Vec<Progress> = Vec::new();
    let started = Instant::now();
    let path = store
        .download(model, &never(), &mut |p| seen.push(p))
        .expect("download");
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "loopback download: {:.1} MiB in {:.3} s = {:.1} MiB/s (debug build, SHA-256 included)",
        MODEL_LEN as f64 / 1048576.0,
        secs,
        MODEL_LEN as f64 / 1048576.0 / secs
    );
    assert_eq!(path, store.dir().join("ggml-test.en.bin"));
    assert_eq!(server.paths.lock().unwrap()[0], "/models/ggml-test.en.bin");
    assert_eq!(server.ranges(), vec![None]);
    // Progress: several reports, increasing, ending at the full size.
    assert!(seen.len() > 10, "{}", seen.len());
    assert!(seen.windows(2).all(|w| w[0].done_bytes < w[1].done_bytes));
    assert!(seen.iter().all(|p| p.phase == Phase::Downloading));
    assert_eq!(seen.last().unwrap().done_bytes, MODEL_LEN as u64);
    assert_eq!(seen.last().unwrap().fraction(), 1.0);
    // The file is the served content, private, in a private folder, with no part left.
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.iter().enumerate().all(|(i, b)| *b == model_byte(i)));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(store.dir()), 0o700);
    assert_eq!(files_in(store.dir()), INSTALLED);
    assert_eq!(store.state(model), ModelState::Installed);
    // A second download finds it installed and asks nothing.
    store.download(model, &never(), &mut |_| {}).unwrap();
    assert_eq!(server.ranges().len(), 1);
}

#[test]
fn a_cut_download_resumes_from_the_part_with_range() {
    let cut = 1_000_000;
    let server = serve(
        MODEL_LEN,
        model_byte,
        vec![Serve::CutAfter(cut), Serve::Full],
    );
    let dir = tempfile::tempdir().unwrap();
    let store = store_for(&server, dir.path());
    let model = good_model();
    let err = store.download(model, &never(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "models.network");
    assert!(err.is_resumable());
    // The part holds exactly what arrived; nothing is at the final name.
    assert_eq!(
        store.state(model),
        ModelState::Partial { bytes: cut as u64 }
    );
    assert_eq!(files_in(store.dir()), vec!["ggml-test.en.bin.part"]);
    assert!(matches!(
        store.resolve(&LocalModelChoice::Catalog("test.en".into())),
        Err(ref e) if e.code() == "models.unknown"
    ));
    let mut phases = Vec::new();
    store
        .download(model, &never(), &mut |p| phases.push(p.phase))
        .expect("resumed download");
    assert_eq!(
        server.ranges(),
        vec![None, Some(format!("bytes={cut}-"))],
        "the second request continues where the part ends"
    );
    // The resumed run first re-hashed what the part had, then downloaded the rest.
    assert_eq!(phases.first(), Some(&Phase::Checking));
    assert_eq!(phases.last(), Some(&Phase::Downloading));
    let bytes = std::fs::read(store.path("test.en")).unwrap();
    assert_eq!(bytes.len(), MODEL_LEN);
    assert!(bytes.iter().enumerate().all(|(i, b)| *b == model_byte(i)));
    assert_eq!(files_in(store.dir()), INSTALLED);
}

#[test]
fn a_server_that_ignores_range_restarts_the_file_cleanly() {
    let server = serve(
        MODEL_LEN,
        model_byte,
        vec![Serve::CutAfter(500_000), Serve::IgnoreRange],
    );
    let dir = tempfile::tempdir().unwrap();
    let store = store_for(&server, dir.path());
    let model = good_model();
    assert!(store.download(model, &never(), &mut |_| {}).is_err());
    store.download(model, &never(), &mut |_| {}).expect("full");
    assert_eq!(server.ranges()[1].as_deref(), Some("bytes=500000-"));
    assert_eq!(
        std::fs::metadata(store.path("test.en")).unwrap().len(),
        MODEL_LEN as u64
    );
}

#[test]
fn a_wrong_hash_is_refused_and_nothing_stays() {
    let server = serve(MODEL_LEN, model_byte, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    let store = store_for(&server, dir.path());
    // The pinned hash of other bytes.
    let model = test_model(sha256_of(MODEL_LEN, not_a_model_byte));
    let err = store.download(model, &never(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "models.hash-mismatch");
    assert!(!err.is_resumable());
    assert_eq!(files_in(store.dir()), Vec::<String>::new());
    assert_eq!(store.state(model), ModelState::Absent);
}

#[test]
fn a_truncated_file_is_refused_and_nothing_stays() {
    let half: Vec<u8> = (0..MODEL_LEN / 2).map(model_byte).collect();
    let server = serve(MODEL_LEN, model_byte, vec![Serve::Body(half)]);
    let dir = tempfile::tempdir().unwrap();
    let store = store_for(&server, dir.path());
    let model = good_model();
    let err = store.download(model, &never(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "models.size-mismatch");
    assert_eq!(files_in(store.dir()), Vec::<String>::new());
}

#[test]
fn a_file_that_is_not_a_ggml_model_is_never_installed() {
    // The hash matches what is served, but it is not a model.
    let server = serve(MODEL_LEN, not_a_model_byte, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    let store = store_for(&server, dir.path());
    let model = test_model(sha256_of(MODEL_LEN, not_a_model_byte));
    let err = store.download(model, &never(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "models.invalid-file");
    assert_eq!(files_in(store.dir()), Vec::<String>::new());
}

/// The resumed download starts at once: the cancelled one released the part's lock before
/// it returned (explicitly, so a child process forked meanwhile by a parallel test cannot
/// keep it; see regression `issue23_08_a_cancelled_download_releases_its_lock_…`).
#[test]
fn cancel_keeps_the_part_and_the_next_download_finishes_it() {
    let server = serve(MODEL_LEN, model_byte, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    let store = store_for(&server, dir.path());
    let model = good_model();
    let cancel = AtomicBool::new(false);
    let err = store
        .download(model, &cancel, &mut |p| {
            if p.done_bytes > 1_000_000 {
                cancel.store(true, Ordering::SeqCst);
            }
        })
        .unwrap_err();
    assert_eq!(err.code(), "models.cancelled");
    let ModelState::Partial { bytes } = store.state(model) else {
        panic!("a part stays: {:?}", store.state(model));
    };
    assert!(bytes > 1_000_000 && bytes < MODEL_LEN as u64);
    store
        .download(model, &never(), &mut |_| {})
        .expect("resume");
    assert_eq!(server.ranges()[1], Some(format!("bytes={bytes}-")));
    assert_eq!(store.state(model), ModelState::Installed);
}

#[test]
fn one_download_per_model_at_a_time_and_delete_removes_everything() {
    let server = serve(
        MODEL_LEN,
        model_byte,
        vec![Serve::CutAfter(200_000), Serve::Full],
    );
    let dir = tempfile::tempdir().unwrap();
    let store = store_for(&server, dir.path());
    let model = good_model();
    assert!(store.download(model, &never(), &mut |_| {}).is_err());
    let part = store.dir().join("ggml-test.en.bin.part");
    // Another download holds the part.
    let held = std::fs::File::open(&part).unwrap();
    held.try_lock().unwrap();
    let err = store.download(model, &never(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "models.busy");
    assert_eq!(store.delete("test.en").unwrap_err().code(), "models.busy");
    drop(held);
    assert!(store.delete("test.en").unwrap());
    assert_eq!(files_in(store.dir()), Vec::<String>::new());
    store.download(model, &never(), &mut |_| {}).unwrap();
    assert!(store.delete("test.en").unwrap());
    assert!(!store.delete("test.en").unwrap());
    assert_eq!(files_in(store.dir()), Vec::<String>::new());
}

#[test]
fn resolving_checks_size_and_header_and_accepts_any_model_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().to_path_buf());
    let catalog = |n: &str| LocalModelChoice::Catalog(n.into());
    assert_eq!(
        store.resolve(&catalog("base.en")).unwrap_err().code(),
        "models.not-downloaded"
    );
    assert_eq!(
        store.resolve(&catalog("nonesuch")).unwrap_err().code(),
        "models.unknown"
    );
    // A catalog file of the wrong size (truncated, or planted) is never handed on.
    std::fs::write(store.path("base.en"), GGML_MAGIC.to_le_bytes()).unwrap();
    assert_eq!(
        store.resolve(&catalog("base.en")).unwrap_err().code(),
        "models.damaged"
    );
    // A model someone put in the folder under another name, and a model file anywhere: a
    // whole model, not just its magic.
    std::fs::write(store.path("stub"), GGML_MAGIC.to_le_bytes()).unwrap();
    assert_eq!(
        store.resolve(&catalog("stub")).unwrap_err().code(),
        "models.invalid-file"
    );
    std::fs::write(store.path("custom"), whisper_model(1)).unwrap();
    assert_eq!(
        store.resolve(&catalog("custom")).unwrap(),
        store.path("custom")
    );
    let file = dir.path().join("elsewhere.bin");
    std::fs::write(&file, b"<html>").unwrap();
    assert_eq!(
        store
            .resolve(&LocalModelChoice::File(file.clone()))
            .unwrap_err()
            .code(),
        "models.invalid-file"
    );
    std::fs::write(&file, whisper_model(2)).unwrap();
    assert_eq!(
        store
            .resolve(&LocalModelChoice::File(file.clone()))
            .unwrap(),
        file
    );
    // Plain http to another host is refused before anything is asked.
    assert_eq!(
        ModelStore::new(dir.path().into())
            .with_base_url("http://example.com/m")
            .unwrap_err()
            .code(),
        "models.insecure-url"
    );
}

#[test]
fn a_verification_is_remembered_privately_and_redone_after_a_change() {
    let server = serve(MODEL_LEN, model_byte, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    let store = store_for(&server, dir.path());
    let model = good_model();
    assert!(!store.is_verified(model));
    store.download(model, &never(), &mut |_| {}).unwrap();
    // The download hashed the file: that is remembered, privately, for the file as it is.
    assert!(store.is_verified(model));
    let record = store.dir().join(".ggml-test.en.bin.verified");
    let mode = std::fs::metadata(&record).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(store.state(model), ModelState::Installed);
    // The same bytes written again are a changed file: hashed once more, then remembered.
    let bytes = std::fs::read(store.path("test.en")).unwrap();
    let fresh = store.dir().join("fresh");
    std::fs::write(&fresh, &bytes).unwrap();
    std::fs::rename(&fresh, store.path("test.en")).unwrap();
    assert!(
        !store.is_verified(model),
        "a new inode is not the verified file"
    );
    assert_eq!(store.state(model), ModelState::Installed);
    assert!(store.is_verified(model));
    // A record that is not one (a symlink, garbage) is never trusted.
    std::fs::remove_file(&record).unwrap();
    std::fs::write(&record, b"garbage").unwrap();
    assert!(!store.is_verified(model));
    std::fs::remove_file(&record).unwrap();
    std::os::unix::fs::symlink(store.path("test.en"), &record).unwrap();
    assert!(!store.is_verified(model));
    // Delete removes the record with the model.
    assert!(store.delete("test.en").unwrap());
    assert_eq!(files_in(store.dir()), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// The binary. The catalog is fixed there, so the server sends `tiny.en`'s size in junk.

fn junk(i: usize) -> u8 {
    (i % 251) as u8
}

fn tiny() -> &'static CatalogModel {
    models::find("tiny.en").unwrap()
}

fn persyk(server: &Server, dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_persyk"));
    c.env(models::MODELS_DIR_ENV, dir)
        .env(models::MODELS_URL_ENV, server.url())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

#[test]
fn cli_lists_the_catalog_and_the_folder() {
    let server = serve(1, junk, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    let out = persyk(&server, dir.path())
        .args(["models", "list"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(&format!("{}\n", dir.path().display())));
    for m in models::CATALOG {
        assert!(text.contains(m.name), "{text}");
    }
    let out = persyk(&server, dir.path())
        .args(["models", "download", "nonesuch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("models.unknown"));
}

#[test]
fn cli_full_disk_is_a_clear_error_and_installs_nothing() {
    let server = serve(tiny().bytes as usize, junk, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    // A 2 MiB file-size limit on the child; SIGXFSZ ignored so the write fails with EFBIG
    // the way a full disk fails with ENOSPC.
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 2048; exec \"$0\" models download tiny.en")
        .arg(env!("CARGO_BIN_EXE_persyk"))
        .env(models::MODELS_DIR_ENV, dir.path())
        .env(models::MODELS_URL_ENV, server.url())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("models.disk-full"), "{stderr}");
    assert!(stderr.contains("again to resume"), "{stderr}");
    assert!(!dir.path().join("ggml-tiny.en.bin").exists());
    let part = std::fs::metadata(dir.path().join("ggml-tiny.en.bin.part")).unwrap();
    assert!(part.len() <= 2048 * 1024, "{}", part.len());
}

fn part_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("ggml-tiny.en.bin.part")).map_or(0, |m| m.len())
}

#[test]
fn cli_ctrl_c_keeps_a_part_that_the_next_run_resumes() {
    let server = serve(
        tiny().bytes as usize,
        junk,
        vec![Serve::Trickle, Serve::Full],
    );
    let dir = tempfile::tempdir().unwrap();
    let child = persyk(&server, dir.path())
        .args(["models", "download", "tiny.en"])
        .spawn()
        .unwrap();
    let started = Instant::now();
    while part_len(dir.path()) < 1 << 20 {
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("models.cancelled"), "{stderr}");
    assert!(stderr.contains("% "), "progress was shown: {stderr}");
    let kept = part_len(dir.path());
    assert!(kept >= 1 << 20 && kept < tiny().bytes, "{kept}");
    assert!(!dir.path().join("ggml-tiny.en.bin").exists());
    // The next run asks for the rest only; the junk then fails the pinned hash and nothing
    // is installed or kept.
    let out = persyk(&server, dir.path())
        .args(["models", "download", "tiny.en"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        server.ranges()[1],
        Some(format!("bytes={kept}-")),
        "{stderr}"
    );
    assert!(stderr.contains("models.hash-mismatch"), "{stderr}");
    assert_eq!(files_in(dir.path()), Vec::<String>::new());
}
