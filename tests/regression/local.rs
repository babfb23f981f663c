//! Regressions in on-device recognition (issue #12).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use persyk::capture::source::{AudioSource, SourceError, SourceEvent, SourceFormat};
use persyk::local::dictation::{LocalSetup, Provenance, Recognize};
use persyk::local::{LocalError, Verdict};
use persyk::pipeline::{self, Recognition, RecordOptions, SourceKind};
use persyk::session::store::Roots;
use persyk::session::{LeafSelector, Store};

const RATE: usize = 24_000;

/// Says how many samples it heard; logs each call's length and whether the audio had ended
/// by then, and tells the source it was called.
struct Logged {
    calls: Arc<Mutex<Vec<(usize, bool)>>>,
    ended: Arc<AtomicBool>,
    called: SyncSender<()>,
}

impl Recognize for Logged {
    fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((pcm_24k.len(), self.ended.load(Ordering::SeqCst)));
        let _ = self.called.try_send(());
        // Only the tone is speech; room noise is not.
        if pcm_24k.iter().any(|s| s.unsigned_abs() > 1_000) {
            Ok(Verdict::Text(format!("heard {}", pcm_24k.len())))
        } else {
            Ok(Verdict::NoSpeech)
        }
    }
}

/// Quiet room noise, 1.5 s of a 300 Hz tone ("speech"), then 400 ms of room noise: a pause
/// too short to end the utterance. Then the source waits until the recognizer was called
/// (at most 10 s) before it ends: the end of the audio is the user's stop.
struct StopDuringAPause {
    called: Option<Receiver<()>>,
    ended: Arc<AtomicBool>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl AudioSource for StopDuringAPause {
    fn format(&self) -> SourceFormat {
        SourceFormat {
            rate_hz: RATE as u32,
            channels: 1,
        }
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        let called = self.called.take().expect("started once");
        let ended = self.ended.clone();
        self.worker = Some(std::thread::spawn(move || {
            let mut seed = 9u64;
            let mut noise = move || {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((seed >> 33) % 33) as f32 - 16.0
            };
            let mut samples: Vec<f32> = (0..RATE / 2).map(|_| noise()).collect();
            samples.extend((0..RATE * 3 / 2).map(|n| {
                let t = n as f32 / RATE as f32;
                (t * 300.0 * std::f32::consts::TAU).sin() * 6_000.0 + noise()
            }));
            samples.extend((0..RATE * 2 / 5).map(|_| noise()));
            for chunk in samples.chunks(RATE / 10) {
                let frames = chunk.iter().map(|s| s / 32_768.0).collect();
                if events.send(SourceEvent::Frames(frames)).is_err() {
                    return;
                }
            }
            let _ = called.recv_timeout(Duration::from_secs(10));
            ended.store(true, Ordering::SeqCst);
            let _ = events.send(SourceEvent::Ended);
        }));
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// Stop → text waited for the whole last utterance: nothing was recognized before the stop
/// closed it, so a stop in the pause after the last word still paid for all of it (0.9–1.3 s
/// for an 11 s utterance with tiny.en on 2 cores). Now a pause of 300 ms inside the open
/// utterance starts recognizing it ahead, and a stop during that pause uses that result:
/// the speech is recognized before the audio ends; after it only the rest of the pause is
/// (every sample reaches the recognizer since #22, the pause's room noise too).
#[test]
fn issue12_01_a_stop_in_the_pause_after_the_last_word_finds_it_recognized() {
    let tmp = tempfile::tempdir().expect("tmp");
    let store = Store::new(Roots::new(tmp.path().to_path_buf(), Vec::new()).expect("roots"));
    let continuation = store
        .create_session()
        .and_then(|h| h.continuation(&LeafSelector::Default))
        .expect("session");
    let calls = Arc::new(Mutex::new(Vec::new()));
    let ended = Arc::new(AtomicBool::new(false));
    let (called_tx, called_rx) = sync_channel(4);
    let setup = LocalSetup {
        recognizer: Box::new(Logged {
            calls: calls.clone(),
            ended: ended.clone(),
            called: called_tx,
        }),
        provenance: Provenance {
            model_id: "logged".into(),
            api: "test".into(),
            language: None,
            translated: false,
        },
        drain_deadline: Duration::from_secs(30),
    };
    let source = StopDuringAPause {
        called: Some(called_rx),
        ended,
        worker: None,
    };
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
            Box::new(source),
            SourceKind::Live,
            stop_rx,
            RecordOptions::default(),
        ))
        .expect("recording");
    assert!(t.report.complete, "{:?}", t.report.gaps);
    let transcript = t.report.transcript();
    assert_eq!(transcript.len(), 1, "one utterance: {transcript:?}");
    let calls = calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // Everything up to the tone's end and the hangover (0.5 s of room, 1.5 s of tone, 200 ms)
    // was recognized once, ahead, before the audio ended; after the stop only the rest of
    // the pause (room noise, no tone) is left to recognize.
    let (heard, after_the_end) = calls[0];
    assert!(!after_the_end, "recognized only after the stop: {calls:?}");
    assert!((RATE * 2..RATE * 12 / 5).contains(&heard), "{calls:?}");
    assert_eq!(transcript[0], format!("heard {heard}"));
    for &(rest, after) in &calls[1..] {
        assert!(after && heard + rest <= RATE * 12 / 5, "{calls:?}");
    }
    assert!(calls.len() <= 2, "{calls:?}");
}
