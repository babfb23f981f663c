//! Regressions in on-device recognition (issue #12).

use std::sync::{Arc, Mutex};

use persyk::capture::pipeline::{self, Recognition, RecordOptions, SamplesSource, SourceKind};
use persyk::local::dictation::{LocalSetup, Provenance, Recognize};
use persyk::local::{LocalError, Verdict};
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store};

const RATE: usize = 24_000;

/// Says how many samples it heard and logs each call's length.
struct Logged(Arc<Mutex<Vec<usize>>>);

impl Recognize for Logged {
    fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(pcm_24k.len());
        Ok(Verdict::Text(format!("heard {}", pcm_24k.len())))
    }
}

/// Quiet room noise with `tone_ms` bursts of a 300 Hz tone separated by `pause_ms`.
fn bursts(tones_ms: &[usize], pause_ms: usize) -> Vec<i16> {
    let mut seed = 9u64;
    let mut noise = move || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) % 33) as i16 - 16
    };
    let mut out: Vec<i16> = (0..RATE / 2).map(|_| noise()).collect();
    for (i, &ms) in tones_ms.iter().enumerate() {
        if i > 0 {
            out.extend((0..RATE * pause_ms / 1000).map(|_| noise()));
        }
        let start = out.len();
        out.extend((0..RATE * ms / 1000).map(|n| {
            let t = (start + n) as f64 / RATE as f64;
            ((t * 300.0 * std::f64::consts::TAU).sin() * 6_000.0) as i16 + noise()
        }));
    }
    out
}

/// Stop → text grew with the last utterance: the stop recognized all of it, from its start,
/// after the stop (0.9–1.3 s for an 11 s utterance with tiny.en on 2 cores). Now a pause
/// inside it (400 ms here: too short to end it) is used to recognize it ahead, and the stop
/// only recognizes what follows that pause; the message is still one utterance with one text.
#[test]
fn issue12_01_stop_recognizes_only_the_speech_after_the_last_pause() {
    let tmp = tempfile::tempdir().expect("tmp");
    let store = Store::new(Roots::new(tmp.path().to_path_buf(), Vec::new()).expect("roots"));
    let continuation = store
        .create_session()
        .and_then(|h| h.continuation(&LeafSelector::Default))
        .expect("session");
    let calls = Arc::new(Mutex::new(Vec::new()));
    let setup = LocalSetup {
        recognizer: Box::new(Logged(calls.clone())),
        provenance: Provenance {
            model_id: "logged".into(),
            api: "test".into(),
        },
        drain_deadline: std::time::Duration::from_secs(30),
    };
    // 1.5 s of "speech", a 400 ms pause, 1 s more; the audio ends while it is voiced (the
    // source's end is the stop).
    let samples = bursts(&[1_500, 1_000], 400);
    let total = samples.len();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let t = rt
        .block_on(pipeline::record_to(
            continuation,
            Recognition::Local(setup),
            Box::new(SamplesSource::new(samples, 0.0)),
            SourceKind::Replay,
            stop_rx,
            RecordOptions::default(),
        ))
        .expect("recording");
    assert!(t.report.complete, "{:?}", t.report.gaps);
    let transcript = t.report.transcript();
    assert_eq!(transcript.len(), 1, "one utterance: {transcript:?}");
    let calls = calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // The guess (lead-in, 1.5 s, hangover) and then only the rest, never the whole again.
    assert_eq!(calls.len(), 2, "{calls:?}");
    let (guess, tail) = (calls[0], calls[1]);
    assert!((RATE * 3 / 2..RATE * 2).contains(&guess), "{calls:?}");
    assert!(tail < RATE * 3 / 2, "{calls:?}");
    assert!(guess + tail <= total);
    // One message whose text is both parts, in order.
    assert_eq!(transcript[0], format!("heard {guess} heard {tail}"));
}
