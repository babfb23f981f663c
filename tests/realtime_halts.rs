//! The engine halts visibly when persistence fails: once the session file can no longer be
//! made durable, the engine reports `Halted` with the store's code (capture stops on it),
//! nothing after the failure is acknowledged, and what was acknowledged before stays in a
//! file that validates.

use std::fs::File;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use persyk::realtime::engine::{self};
use persyk::realtime::fake::{self, Scenario};
use persyk::realtime::protocol::Settings;
use persyk::recognize::{AudioChunk, EngineState};
use persyk::session::fsio::Storage;
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store, scan_path};

/// The real file system until armed; then every fsync of the session file fails.
#[derive(Debug, Default)]
struct FailWhenArmed {
    armed: AtomicBool,
}

impl Storage for FailWhenArmed {
    fn sync_data(&self, file: &File) -> io::Result<()> {
        if self.armed.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        file.sync_data()
    }
}

/// 100 ms of a 440 Hz tone as PCM16 LE.
fn tone_chunk(n: usize) -> Vec<u8> {
    (0..2_400)
        .flat_map(|i| {
            let t = (n * 2_400 + i) as f64 / 24_000.0;
            (((t * 440.0 * std::f64::consts::TAU).sin() * 8_000.0) as i16).to_le_bytes()
        })
        .collect()
}

#[test]
fn a_failing_fsync_halts_the_engine_and_keeps_what_was_acknowledged() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().canonicalize().expect("root");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let scenario = Scenario::from_json(
        r#"{"name": "halt", "connections": [{
            "utterances": [
                {"end_ms": 300, "transcript": "Saved before the disk failed.", "delay_ms": 20},
                {"end_ms": 1500, "transcript": "Never acknowledged.", "delay_ms": 20}],
            "close_after_commit_ms": 200}]}"#,
    )
    .expect("scenario");
    let server = rt.block_on(fake::spawn(scenario)).expect("fake");
    let storage = Arc::new(FailWhenArmed::default());
    let store = Store::with_storage(
        Roots::new(root.clone(), Vec::new()).expect("roots"),
        storage.clone(),
    );
    let handle = store.create_session().expect("session");
    let continuation = handle
        .continuation(&LeafSelector::Default)
        .expect("continuation");
    // The scenario scripts a server-VAD turn, which `gpt-transcribe` keeps.
    let settings = Settings {
        base_url: format!("ws://{}/v1", server.addr),
        transcription_model: "gpt-transcribe".into(),
        ..Settings::default()
    };
    let report = rt.block_on(async {
        let engine = engine::start(settings, "sk-test-halt".into(), continuation, None);
        let view = engine.view();
        let mut n = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        // Stream until the first message is published (and so durable).
        while view.borrow().messages.is_empty() {
            assert!(Instant::now() < deadline, "no first message");
            engine
                .send_audio_wait(AudioChunk {
                    pcm: tone_chunk(n),
                    wav: None,
                })
                .await
                .expect("send");
            n += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        storage.armed.store(true, Ordering::SeqCst);
        // Keep streaming: the next observation's append cannot be made durable.
        while !matches!(view.borrow().state, EngineState::Halted(_)) {
            assert!(Instant::now() < deadline, "the engine never halted");
            let _ = engine
                .send_audio_wait(AudioChunk {
                    pcm: tone_chunk(n),
                    wav: None,
                })
                .await;
            n += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        engine.stop().await
    });
    let reason = report.halted.clone().expect("a halt reason");
    assert_eq!(reason, "store.io", "the store's code, no text");
    assert!(!report.complete);
    let texts = report.transcript();
    assert_eq!(texts, ["Saved before the disk failed."]);
    // Everything acknowledged is on disk in a file that validates (possibly after the
    // explicit recovery of an unsynced tail).
    drop(handle);
    drop(store);
    let file = std::fs::read_dir(&root)
        .expect("list")
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("session.jsonl"))
        .find(|p| p.is_file())
        .expect("session file");
    let index = scan_path(&file).expect("scan");
    assert!(index.is_authoritative(), "{:?}", index.diagnostics());
    let text = std::fs::read_to_string(&file).expect("read");
    assert!(text.contains("Saved before the disk failed."));
}
