//! Capture halts end to end: a live source that delivers only silence (what cpal shows for a
//! microphone the OS blocks) halts the recording visibly after the 2 s window with
//! `capture.silent-input`; the session is saved, valid and marked incomplete, and the WAV
//! holds what was captured until the halt.

use persyk::pipeline::{self, SamplesSource, SourceKind};
use persyk::realtime::fake::{self, Scenario};
use persyk::realtime::protocol::Settings;
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store, scan_path};

#[test]
fn a_silent_live_input_halts_with_a_code_and_the_session_stays_valid() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().canonicalize().expect("root");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let scenario = Scenario::from_json(
        r#"{"name": "silence", "connections": [{"utterances": [], "close_after_commit_ms": 200}]}"#,
    )
    .expect("scenario");
    let server = rt.block_on(fake::spawn(scenario)).expect("fake");
    let store = Store::new(Roots::new(root.clone(), Vec::new()).expect("roots"));
    let handle = store.create_session().expect("session");
    let continuation = handle
        .continuation(&LeafSelector::Default)
        .expect("continuation");
    let settings = Settings {
        base_url: format!("ws://{}/v1", server.addr),
        ..Settings::default()
    };
    // 20 s of digital silence in real time; nobody presses Stop.
    let source = SamplesSource::new(vec![0i16; 24_000 * 20], 1.0);
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let t = rt
        .block_on(pipeline::record(
            continuation,
            settings,
            "sk-test-silence".into(),
            Box::new(source),
            SourceKind::Live,
            stop_rx,
        ))
        .expect("the recording ends, it does not fail");
    assert_eq!(t.halted.as_deref(), Some("capture.silent-input"));
    // Halted near the 2 s window, long before the 20 s of input ran out.
    assert!(
        (1_500..10_000).contains(&t.duration_ms),
        "duration {} ms",
        t.duration_ms
    );
    let file = handle.dir().join("session.jsonl");
    let index = scan_path(&file).expect("scan");
    assert!(index.is_valid(), "{:?}", index.diagnostics());
    let text = std::fs::read_to_string(&file).expect("read");
    assert!(text.contains(r#""outcome":"incomplete""#), "{text}");
    let wav = handle
        .dir()
        .join("assets")
        .join(format!("{}.wav", t.recording_id));
    let reader = hound::WavReader::open(&wav).expect("the WAV reads back");
    assert_eq!(reader.spec().sample_rate, 24_000);
    assert_eq!(
        u64::from(reader.duration()) * 1000 / 24_000,
        t.duration_ms,
        "the WAV holds exactly the recorded duration"
    );
}
