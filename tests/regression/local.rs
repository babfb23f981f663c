//! Regressions in on-device recognition (issue #12).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use persyk::capture::source::{AudioSource, SourceError, SourceEvent, SourceFormat};
use persyk::local::dictation::{LocalSetup, Provenance, Recognize};
use persyk::local::{LocalError, Verdict};
use persyk::pipeline::{self, Recognition, RecordOptions, SourceKind};
use persyk::session::store::Continuation;

use super::realtime::support::{new_session, runtime};

const RATE: usize = 24_000;

/// `samples` transcribed as a file is (read unpaced; the caller's stop cancels), by `setup`.
fn transcribe_file(
    continuation: Continuation,
    setup: LocalSetup,
    samples: Vec<i16>,
    stop: tokio::sync::watch::Receiver<bool>,
    tap: Option<pipeline::LiveTap>,
) -> pipeline::Transcription {
    runtime()
        .block_on(pipeline::record_to(
            continuation,
            Recognition::Local(setup),
            Box::new(pipeline::SamplesSource::new(samples, 0.0)),
            SourceKind::Replay,
            stop,
            RecordOptions {
                stop_cancels: true,
                tap,
                ..RecordOptions::default()
            },
        ))
        .expect("recording")
}

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
    let (_, continuation) = new_session(tmp.path());
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
        hold: None,
    };
    let source = StopDuringAPause {
        called: Some(called_rx),
        ended,
        worker: None,
    };
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let t = runtime()
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

/// One second of a 300 Hz tone ("speech") then two of digital silence, `n` times.
fn bursts(n: usize) -> Vec<i16> {
    let mut samples = Vec::new();
    for _ in 0..n {
        samples.extend((0..RATE).map(|i| {
            ((i as f64 * 300.0 * std::f64::consts::TAU / RATE as f64).sin() * 6_000.0) as i16
        }));
        samples.extend(std::iter::repeat_n(0i16, RATE * 2));
    }
    samples
}

fn setup_with(
    recognizer: Box<dyn Recognize>,
    drain: Duration,
    hold: Option<Arc<AtomicBool>>,
) -> LocalSetup {
    LocalSetup {
        recognizer,
        provenance: Provenance {
            model_id: "test".into(),
            api: "test".into(),
            language: None,
            translated: false,
        },
        drain_deadline: drain,
        hold,
    }
}

/// The gaps `recording.finished` names in the session file.
fn finished_gaps(session: &std::path::Path) -> (String, Vec<serde_json::Value>) {
    let text = std::fs::read_to_string(session.join("session.jsonl")).expect("session");
    let finished: serde_json::Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "recording.finished")
        .expect("recording.finished");
    let gaps = finished["gaps"].as_array().cloned().unwrap_or_default();
    (finished["outcome"].as_str().unwrap_or("").to_owned(), gaps)
}

/// Notes, per window, whether the hold was set when it started.
struct HoldAware {
    hold: Arc<AtomicBool>,
    started_while_held: Arc<Mutex<Vec<bool>>>,
}

impl Recognize for HoldAware {
    fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
        self.started_while_held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.hold.load(Ordering::SeqCst));
        if pcm_24k.iter().any(|s| s.unsigned_abs() > 1_000) {
            Ok(Verdict::Text("a burst".into()))
        } else {
            Ok(Verdict::NoSpeech)
        }
    }
}

/// Issue #38, found by a clean-clone CI run (app_local issue38_03 with `local.deadline`
/// gaps): a file is read faster than real time, so a short one is all in the engine and
/// its source has ended while a dictation still holds the recognizer; the stop's drain
/// deadline (30 s, counted from the stop) then ran out under load and the file lost its
/// rest. Holding the decoder back did not hold the recognizer at all. Now the hold is the
/// engine's: no window starts while it is set, and the drain deadline counts only time in
/// which recognition could have progressed. Here the hold lasts three times the deadline.
#[test]
fn issue38_04_a_file_held_by_a_dictation_longer_than_the_drain_deadline_loses_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (session, continuation) = new_session(tmp.path());
    let hold = Arc::new(AtomicBool::new(true));
    let starts = Arc::new(Mutex::new(Vec::new()));
    let setup = setup_with(
        Box::new(HoldAware {
            hold: hold.clone(),
            started_while_held: starts.clone(),
        }),
        Duration::from_secs(1),
        Some(hold.clone()),
    );
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let release = {
        let hold = hold.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(3));
            hold.store(false, Ordering::SeqCst);
        })
    };
    let t = transcribe_file(continuation, setup, bursts(12), stop_rx, None);
    release.join().expect("release");
    let starts = starts.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(!starts.is_empty());
    assert!(
        starts.iter().all(|held| !held),
        "a window started while held: {starts:?}"
    );
    assert!(t.report.complete, "{:?}", t.report.gaps);
    let transcript = t.report.transcript();
    assert!(!transcript.is_empty());
    assert!(
        transcript.iter().all(|m| m.contains("a burst")),
        "{transcript:?}"
    );
    let (outcome, gaps) = finished_gaps(&session);
    assert_eq!((outcome.as_str(), gaps.len()), ("complete", 0), "{gaps:?}");
}

/// Waits for its abort flag (at most 20 s a window); counts the windows it was given and
/// says when one was aborted.
struct Patient {
    windows: Arc<Mutex<u32>>,
    started: SyncSender<()>,
    aborted: Arc<AtomicBool>,
}

impl Recognize for Patient {
    fn transcribe(&mut self, _pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
        std::thread::sleep(Duration::from_secs(20));
        Ok(Verdict::Text("recognized after all".into()))
    }

    fn decode(
        &mut self,
        _pcm_24k: &[i16],
        how: &persyk::local::dictation::Decode,
    ) -> Result<Vec<persyk::local::dictation::Segment>, LocalError> {
        *self.windows.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        let _ = self.started.try_send(());
        for _ in 0..2_000 {
            if how
                .abort
                .as_ref()
                .is_some_and(|a| a.load(Ordering::Relaxed))
            {
                self.aborted.store(true, Ordering::SeqCst);
                return Err(LocalError::Aborted);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(LocalError::InferenceFailed)
    }
}

/// Issue #38 item 3: Cancel keeps what was recognized and waits for nothing else. A file is
/// read faster than it is recognized, so a Cancel usually comes after the whole file is in
/// the engine; the stop then drained all of it (within the drain deadline), so the user
/// waited and the "cancelled" file was recognized anyway. Now the cancel reaches the engine
/// during its drain: the window in hand is aborted, no other starts, and what was read but
/// not recognized is a `local.cancelled` gap.
#[test]
fn issue38_05_cancel_abandons_what_the_engine_has_not_recognized() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (session, continuation) = new_session(tmp.path());
    let windows = Arc::new(Mutex::new(0u32));
    let aborted = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = sync_channel(8);
    let setup = setup_with(
        Box::new(Patient {
            windows: windows.clone(),
            started: started_tx,
            aborted: aborted.clone(),
        }),
        persyk::local::dictation::FILE_DRAIN_DEADLINE,
        None,
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (view_tx, view_rx) = tokio::sync::oneshot::channel();
    let (_removals_tx, removals) = tokio::sync::mpsc::channel(1);
    let tap = pipeline::LiveTap {
        view: view_tx,
        level: Arc::new(std::sync::atomic::AtomicU32::new(0)),
        removals,
    };
    // The Cancel comes once the whole file is read and the engine drains it, with a window
    // in hand: the case a file's Cancel nearly always meets.
    let cancel = std::thread::spawn(move || {
        let view = view_rx.blocking_recv().expect("the engine's view");
        started_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a window started");
        for _ in 0..6_000 {
            if view.borrow().state == persyk::recognize::EngineState::Finishing {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            view.borrow().state,
            persyk::recognize::EngineState::Finishing,
            "the engine drains"
        );
        stop_tx.send_replace(true);
        stop_tx
    });
    let t = transcribe_file(continuation, setup, bursts(20), stop_rx, Some(tap));
    let _stop_tx = cancel.join().expect("cancel");
    assert_eq!(
        *windows.lock().unwrap_or_else(|p| p.into_inner()),
        1,
        "only the window in hand was started, and it was abandoned"
    );
    assert!(!t.report.complete);
    assert!(t.report.transcript().is_empty());
    let written = std::fs::read(session.join("session.jsonl")).expect("session");
    let (outcome, gaps) = finished_gaps(&session);
    assert_eq!(outcome, "incomplete");
    assert!(
        gaps.iter().any(|g| g["reason"] == "local.cancelled"),
        "{gaps:?}"
    );
    // The whole file was read before the Cancel: all of it is the engine's gap.
    assert!(
        gaps.iter().all(|g| g["reason"] == "local.cancelled"),
        "{gaps:?}"
    );
    // Every burst of "speech" lies in a gap: nothing unheard is passed off as heard.
    for i in 0..20u64 {
        let mid = i * 3_000 + 500;
        assert!(
            gaps.iter().any(|g| {
                g["startMs"].as_u64().is_some_and(|s| s <= mid)
                    && g["endMs"].as_u64().is_none_or(|e| e > mid)
            }),
            "burst {i} is in no gap: {gaps:?}"
        );
    }
    // The window in hand is aborted, not left to run (the recognizer would give up on its
    // own only after 20 s; this waits at most 15).
    let mut waited = 0;
    while !aborted.load(Ordering::SeqCst) && waited < 1_500 {
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
    }
    assert!(
        aborted.load(Ordering::SeqCst),
        "the window in hand was not aborted"
    );
    // The abandoned window's end writes nothing.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        std::fs::read(session.join("session.jsonl")).expect("session"),
        written
    );
}
