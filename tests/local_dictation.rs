//! Live on-device dictation end to end with the real tiny.en model (offline; built by
//! `scripts/fetch-test-model`): WAV files through `persyk transcribe --provider local` (the
//! capture pipeline, the segmenter, the recognizer thread) into sessions `persyk check`
//! accepts, and a paced in-memory source through the library pipeline with a live tap.
#![cfg(feature = "local")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod support;

use support::{JFK, entries, test_model_dir, wer};

const BIN: &str = env!("CARGO_BIN_EXE_persyk");
const RATE: u32 = 24_000;

fn model_path() -> PathBuf {
    support::test_model()
}

/// `persyk transcribe FILE --provider local` with the test model into `root`, with settings
/// of its own (none) so the developer's settings never leak in.
fn transcribe(root: &Path, wav: &Path, env: &[(&str, &str)]) -> (Output, PathBuf) {
    let mut cmd = Command::new(BIN);
    cmd.arg("transcribe")
        .arg(wav)
        .args(["--provider", "local", "--model"])
        .arg(model_path())
        .arg("--root")
        .arg(root)
        .env("PERSYK_CONFIG", root.join("no-settings.json"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run persyk");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let session = stderr
        .lines()
        .find_map(|l| l.strip_prefix("persyk: session "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no session line in {stderr}"));
    (out, session)
}

fn check(session: &Path) {
    let out = Command::new(BIN)
        .arg("check")
        .arg(session)
        .output()
        .expect("run persyk check");
    assert!(
        out.status.success(),
        "persyk check refused the session: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn messages(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect()
}

fn text_of(message: &Value) -> String {
    message["content"]
        .as_array()
        .expect("content")
        .iter()
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().expect("text"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn finished(entries: &[Value]) -> &Value {
    entries
        .iter()
        .find(|e| e["type"] == "recording.finished")
        .expect("recording.finished")
}

/// 24 kHz mono PCM16 from a WAV of any format (the capture converter).
fn read_24k(path: &Path) -> Vec<i16> {
    support::wav_as_recorded(path)
}

#[test]
fn transcribing_jfk_locally_gives_a_checked_session_with_the_sentence_and_its_wav_range() {
    let _turn = support::whisper_turn();
    let dir = tempfile::tempdir().expect("tempdir");
    // jfk.wav is 16 kHz: the pipeline converts it like any input.
    let (out, session) = transcribe(dir.path(), &test_model_dir().join("jfk.wav"), &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check(&session);
    let entries = entries(&session);
    let provenance = entries
        .iter()
        .find(|e| e["type"] == "model_change")
        .expect("model_change");
    assert_eq!(provenance["provider"], "local");
    assert_eq!(provenance["modelId"], "ggml-tiny.en");
    assert!(
        provenance["api"]
            .as_str()
            .is_some_and(|a| a.starts_with("whisper.cpp ")),
        "{provenance}"
    );
    let messages = messages(&entries);
    assert!(!messages.is_empty());
    let text: Vec<String> = messages.iter().map(|m| text_of(m)).collect();
    let joined = text.join(" ");
    let error = wer(JFK, &joined);
    assert!(error <= 0.05, "WER {error:.3}: {joined:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        text.join("\n"),
        "stdout is the transcript"
    );
    // Each audio block references a range of the recording's WAV, inside its data.
    let started = entries
        .iter()
        .find(|e| e["type"] == "recording.started")
        .expect("recording.started");
    let wav_path = session.join(started["asset"].as_str().expect("asset"));
    let wav_len = std::fs::metadata(&wav_path).expect("wav").len();
    let mut last_end = 0;
    for m in &messages {
        assert_eq!(m["role"], "user");
        assert_eq!(m["provider"], "local");
        let audio = m["content"]
            .as_array()
            .expect("content")
            .iter()
            .find(|b| b["type"] == "audio")
            .expect("an audio block");
        assert_eq!(audio["asset"]["path"], started["asset"]);
        assert_eq!(audio["recordingId"], started["recordingId"]);
        let start = audio["asset"]["byteRange"]["start"]
            .as_u64()
            .expect("start");
        let end = audio["asset"]["byteRange"]["end"].as_u64().expect("end");
        assert!(
            44 <= start && start < end && end <= wav_len,
            "{start}..{end} of {wav_len}"
        );
        assert_eq!((end - start) % 2, 0);
        assert!(start >= last_end, "ranges in speech order");
        last_end = end;
    }
    let fin = finished(&entries);
    assert_eq!(fin["outcome"], "complete");
    assert!(fin.get("gaps").is_none());
}

/// Half a second of silence, then each phrase spoken by espeak-ng followed by `pause_ms` of
/// silence, as Persyk records it.
fn spoken(dir: &Path, phrases: &[&str], pause_ms: usize) -> Vec<i16> {
    let mut audio = vec![0i16; RATE as usize / 2];
    for (n, text) in phrases.iter().enumerate() {
        audio.extend(support::espeak_as_recorded(
            dir,
            &format!("phrase-{n}"),
            text,
        ));
        audio.extend(std::iter::repeat_n(0i16, RATE as usize * pause_ms / 1000));
    }
    audio
}

#[test]
fn phrases_separated_by_pauses_become_messages_in_speech_order() {
    let _turn = support::whisper_turn();
    let dir = tempfile::tempdir().expect("tempdir");
    let phrases = [
        "The weather is very nice today.",
        "Please close the door when you leave the room.",
        "I would like a cup of coffee.",
    ];
    let recording = spoken(dir.path(), &phrases, 1_500);
    let wav = dir.path().join("phrases.wav");
    support::write_wav_24k(&wav, &recording);
    let (out, session) = transcribe(dir.path(), &wav, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check(&session);
    let entries = entries(&session);
    let texts: Vec<String> = messages(&entries).iter().map(|m| text_of(m)).collect();
    // A file is recognized in windows of up to 25 s (the three phrases in one, as one
    // whole-file call would), and its text is split into messages at the pauses where
    // Whisper's segments end: here two or three messages, in speech order. espeak through
    // tiny.en is rough ("The weather is very nice today." comes back as "But when there is
    // very nice to me."): together the phrases are as right as one decode of the whole
    // recording, and the last message ends with the last phrase.
    assert!((2..=phrases.len()).contains(&texts.len()), "{texts:?}");
    let together = wer(&phrases.join(" "), &texts.join(" "));
    let mut whole = persyk::local::whisper::LocalModel::load(&model_path())
        .and_then(|m| m.recognizer(persyk::local::options_for(None, true)))
        .expect("model");
    let whole = whole.recognize(&recording).expect("one decode").text;
    let bound = wer(&phrases.join(" "), &whole) + 0.05;
    assert!(
        together <= bound,
        "WER {together:.2} > {bound:.2}: {texts:?} / {whole:?}"
    );
    let last = texts.last().expect("a message");
    assert!(wer(phrases[2], last) < wer(phrases[0], last), "{texts:?}");
}

#[test]
fn a_silent_wav_gives_no_message_and_exit_0() {
    let _turn = support::whisper_turn();
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("silence.wav");
    support::write_wav_24k(&wav, &vec![0i16; RATE as usize * 5]);
    let (out, session) = transcribe(dir.path(), &wav, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check(&session);
    let entries = entries(&session);
    assert!(messages(&entries).is_empty());
    assert_eq!(finished(&entries)["outcome"], "complete");
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty());
}

#[test]
fn a_failing_recognizer_records_a_gap_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, session) = transcribe(
        dir.path(),
        &test_model_dir().join("jfk.wav"),
        &[("PERSYK_TEST_LOCAL_FAIL", "1")],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check(&session);
    let entries = entries(&session);
    assert!(messages(&entries).is_empty(), "a failure is never text");
    let fin = finished(&entries);
    assert_eq!(fin["outcome"], "incomplete");
    let gaps = fin["gaps"].as_array().expect("gaps");
    assert!(!gaps.is_empty());
    for gap in gaps {
        assert_eq!(gap["reason"], "local.inference-failed");
        let (s, e) = (gap["startMs"].as_u64(), gap["endMs"].as_u64());
        assert!(s.is_some() && e.is_some() && s < e, "{gap}");
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("local.inference-failed"));
}

/// jfk.wav at 24 kHz between quiet stretches, paced at twice real time through the library
/// pipeline with a live tap until the user stops: the utterance shows as provisional while it is recognized, then
/// as a canonical message, which a removal takes out by appending `message.removed`.
#[test]
fn live_local_dictation_shows_provisional_then_canonical_and_removes_without_a_provider() {
    let _turn = support::whisper_turn();
    use persyk::local::whisper::{self, LocalModel};
    use persyk::pipeline::{
        self, LiveTap, Recognition, RecordOptions, RemovalRequest, SamplesSource, SourceKind,
    };
    use persyk::recognize::RemovalOutcome;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;
    use tokio::sync::{mpsc, oneshot, watch};

    let dir = tempfile::tempdir().expect("tempdir");
    let mut samples = vec![0i16; RATE as usize];
    samples.extend(read_24k(&test_model_dir().join("jfk.wav")));
    samples.extend(std::iter::repeat_n(0i16, RATE as usize * 120));
    let model = LocalModel::load(&model_path()).expect("model");
    let setup = whisper::setup(
        &model,
        persyk::local::options_for(None, true),
        persyk::local::dictation::DRAIN_DEADLINE,
    )
    .expect("setup");
    let (session, continuation) = support::new_session(dir.path());
    let rt = support::runtime();
    let (view_tx, view_rx) = oneshot::channel();
    let (removals, removals_rx) = mpsc::channel(4);
    let tap = LiveTap {
        view: view_tx,
        level: Arc::new(AtomicU32::new(0)),
        removals: removals_rx,
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let (transcription, saw_provisional, removed_id, outcome) = rt.block_on(async move {
        let recording = tokio::spawn(pipeline::record_to(
            continuation,
            Recognition::Local(setup),
            Box::new(SamplesSource::new(samples, 2.0)),
            SourceKind::Replay,
            stop_rx,
            RecordOptions {
                tap: Some(tap),
                ..RecordOptions::default()
            },
        ));
        let mut view = view_rx.await.expect("the engine's view");
        let mut saw_provisional = false;
        let first = loop {
            {
                let v = view.borrow_and_update();
                if !v.provisional.is_empty() {
                    // Provisional: the marker, or text not yet committed (never a message).
                    assert!(v.provisional.iter().all(|(_, t)| !t.is_empty()));
                    saw_provisional = true;
                }
                if let Some(m) = v.messages.first() {
                    break m.clone();
                }
            }
            view.changed()
                .await
                .expect("the view ended before a message");
        };
        let (reply, answer) = oneshot::channel();
        removals
            .send(RemovalRequest {
                entry_id: first.entry_id.clone(),
                reply,
            })
            .await
            .expect("removal queued");
        let outcome = answer.await.expect("an answer while recording");
        // The user's stop (the source would go on for two more minutes).
        stop_tx.send(true).expect("stop");
        let t = recording.await.expect("task").expect("recording");
        (t, saw_provisional, first, outcome)
    });
    assert!(
        saw_provisional,
        "the utterance was provisional while recognized"
    );
    assert_eq!(outcome, RemovalOutcome::Removed);
    assert!(wer(JFK, &removed_id.text) <= 0.05, "{:?}", removed_id.text);
    assert!(
        transcription.report.transcript().is_empty(),
        "removed text does not survive"
    );
    check(&session);
    let entries = entries(&session);
    let removal = entries
        .iter()
        .find(|e| e["type"] == "message.removed")
        .expect("message.removed");
    assert_eq!(removal["targetId"], removed_id.entry_id.as_str());
    assert_eq!(finished(&entries)["outcome"], "complete");
}

/// A recognizer slower than the stop deadline: each utterance not recognized by then is a
/// `local.deadline` gap, the recording is incomplete, and the late result is never written.
#[test]
fn utterances_left_at_the_stop_deadline_are_gaps_and_nothing_is_written_after_stop() {
    let _turn = support::whisper_turn();
    use persyk::local::dictation::{LocalSetup, Provenance, Recognize};
    use persyk::local::{LocalError, Verdict};
    use persyk::pipeline::{self, Recognition, RecordOptions, SamplesSource, SourceKind};
    use std::time::Duration;

    struct Slow;
    impl Recognize for Slow {
        fn transcribe(&mut self, _pcm: &[i16]) -> Result<Verdict, LocalError> {
            std::thread::sleep(Duration::from_secs(2));
            Ok(Verdict::Text("too late".into()))
        }
    }

    // Two one-second tone bursts between quiet stretches: two utterances.
    let tone = |n: usize| {
        (0..n)
            .map(|i| ((i as f64 * 300.0 * std::f64::consts::TAU / 24_000.0).sin() * 6000.0) as i16)
    };
    let mut samples = vec![0i16; RATE as usize];
    for _ in 0..2 {
        samples.extend(tone(RATE as usize));
        samples.extend(std::iter::repeat_n(0i16, RATE as usize * 2));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (session, continuation) = support::new_session(dir.path());
    let setup = LocalSetup {
        recognizer: Box::new(Slow),
        provenance: Provenance {
            model_id: "slow".into(),
            api: "test".into(),
            language: None,
            translated: false,
        },
        drain_deadline: Duration::from_millis(300),
        hold: None,
    };
    let rt = support::runtime();
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
    assert!(!t.report.complete);
    assert!(t.report.messages.is_empty());
    assert_eq!(t.report.gaps.len(), 2, "{:?}", t.report.gaps);
    assert!(t.report.gaps.iter().all(|g| g.reason == "local.deadline"));
    let written = std::fs::read(session.join("session.jsonl")).expect("session");
    // The recognizer finishes its late result after stop: it must not reach the file.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        std::fs::read(session.join("session.jsonl")).expect("session"),
        written
    );
    check(&session);
    let entries = entries(&session);
    assert!(messages(&entries).is_empty());
    assert_eq!(finished(&entries)["outcome"], "incomplete");
}

/// Issue #36 item 7: quitting stops on-device recognition for good. With the real model
/// decoding a window ("transcribing…" shown), `stop_recognition` abandons that inference at
/// whisper.cpp's next abort check and every later window fails at once: the stop then ends
/// with `local.quit` gaps over what was not recognized (the audio stays in the WAV), the
/// session is valid and incomplete, and nothing keeps the model's memory afterwards.
#[test]
fn issue36_07_stopped_recognition_ends_the_recording_with_quit_gaps() {
    let _turn = support::whisper_turn();
    use persyk::local::whisper::{self, LocalModel};
    use persyk::pipeline::{self, LiveTap, Recognition, RecordOptions, SamplesSource, SourceKind};
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;
    use tokio::sync::{mpsc, oneshot, watch};

    let dir = tempfile::tempdir().expect("tempdir");
    let mut samples = vec![0i16; RATE as usize];
    samples.extend(read_24k(&test_model_dir().join("jfk.wav")));
    samples.extend(std::iter::repeat_n(0i16, RATE as usize * 120));
    let model = LocalModel::load(&model_path()).expect("model");
    let model_watch = model.watch();
    let setup = whisper::setup(
        &model,
        persyk::local::options_for(None, true),
        persyk::local::dictation::DRAIN_DEADLINE,
    )
    .expect("setup");
    drop(model);
    let (session, continuation) = support::new_session(dir.path());
    let rt = support::runtime();
    let (view_tx, view_rx) = oneshot::channel();
    let (_removals, removals_rx) = mpsc::channel(4);
    let tap = LiveTap {
        view: view_tx,
        level: Arc::new(AtomicU32::new(0)),
        removals: removals_rx,
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopping = model_watch.clone();
    let t = rt.block_on(async move {
        let recording = tokio::spawn(pipeline::record_to(
            continuation,
            Recognition::Local(setup),
            Box::new(SamplesSource::new(samples, 2.0)),
            SourceKind::Replay,
            stop_rx,
            RecordOptions {
                tap: Some(tap),
                ..RecordOptions::default()
            },
        ));
        let mut view = view_rx.await.expect("the engine's view");
        loop {
            let decoding = view
                .borrow_and_update()
                .provisional
                .iter()
                .any(|(_, t)| t == persyk::local::dictation::PROVISIONAL_TEXT);
            if decoding {
                break;
            }
            view.changed()
                .await
                .expect("the view ended before a decode");
        }
        // The app quits now: recognition stops, then the recording is stopped.
        stopping.stop_recognition();
        stop_tx.send(true).expect("stop");
        recording.await.expect("task").expect("recording")
    });
    assert!(!t.report.complete);
    assert!(
        t.report.gaps.iter().any(|g| g.reason == "local.quit"),
        "{:?}",
        t.report.gaps
    );
    check(&session);
    let entries = entries(&session);
    assert_eq!(finished(&entries)["outcome"], "incomplete");
    // Every holder let go of the model once the recording ended (its recognizer thread
    // returns right after the stop; a guard against a hang, not a timing).
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !model_watch.is_released() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(model_watch.is_released());
}

/// How the capture lets the engine down in [`a_wav_range_that_is_not_durable_or_not_equal_falls_back_to_an_asset_of_its_own`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum CaptureFault {
    /// The WAV holds other bytes than the chunks handed to the engine.
    Mismatch,
    /// The WAV is never reported durable.
    NeverDurable,
}

/// The engine driven directly by a capture that writes a WAV beside it (like the pipeline):
/// when the WAV range of an utterance cannot be verified (other bytes, or not durable within
/// the wait), the message's audio goes to an exclusive asset holding exactly the recognized
/// samples, and the session still passes `persyk check`.
#[test]
fn a_wav_range_that_is_not_durable_or_not_equal_falls_back_to_an_asset_of_its_own() {
    use persyk::audio::WAV_HEADER_BYTES;
    use persyk::local::dictation::{self, LocalSetup, Provenance, Recognize};
    use persyk::local::{LocalError, Verdict};
    use persyk::recognize::{AudioChunk, CaptureLink, WavRange};
    use persyk::session::format::{EntryBody, Outcome, RecordingFinished, RecordingStarted};
    use persyk::session::store::new_id;
    use persyk::session::{LeafSelector, Store, store::Roots};
    use std::io::BufWriter;
    use std::time::Duration;

    // Hears the tone as speech and the faint noise around it as nothing, as Whisper would
    // (every sample reaches the recognizer; it decides what is speech).
    struct Heard;
    impl Recognize for Heard {
        fn transcribe(&mut self, pcm: &[i16]) -> Result<Verdict, LocalError> {
            if pcm.iter().all(|s| s.unsigned_abs() < 1_000) {
                return Ok(Verdict::NoSpeech);
            }
            Ok(Verdict::Text(format!("{} samples", pcm.len())))
        }
    }

    for fault in [CaptureFault::Mismatch, CaptureFault::NeverDurable] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(Roots::new(dir.path().to_path_buf(), Vec::new()).expect("roots"));
        let handle = store.create_session().expect("session");
        let session = handle.dir().to_path_buf();
        let mut continuation = handle.continuation(&LeafSelector::Default).expect("cont");
        let recording_id = new_id();
        let asset = format!("{recording_id}.wav");
        continuation
            .append_one(EntryBody::RecordingStarted(RecordingStarted {
                recording_id: recording_id.clone(),
                asset: format!("assets/{asset}"),
            }))
            .expect("recording.started");
        let capture = handle.start_capture(&asset).expect("capture");
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: RATE,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut wav = hound::WavWriter::new(
            BufWriter::new(capture.try_clone_file().expect("clone")),
            spec,
        )
        .expect("wav");
        let (durable, durable_rx) = tokio::sync::watch::channel(0u64);
        let link = CaptureLink {
            asset: asset.clone(),
            file: std::sync::Arc::new(capture.try_clone_file().expect("clone")),
            durable: durable_rx,
        };
        let setup = LocalSetup {
            recognizer: Box::new(Heard),
            provenance: Provenance {
                model_id: "heard".into(),
                api: "test".into(),
                language: None,
                translated: false,
            },
            drain_deadline: Duration::from_secs(30),
            hold: None,
        };
        let engine = dictation::start(setup, continuation.clone(), &recording_id, link);
        let sender = engine.sender().expect("sender");
        // Quiet, a one-second tone, quiet: one utterance.
        let mut seed = 3u64;
        let mut samples: Vec<i16> = Vec::new();
        for i in 0..RATE as usize * 7 / 2 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let noise = ((seed >> 33) % 33) as i16 - 16;
            let tone = if (RATE as usize..RATE as usize * 2).contains(&i) {
                ((i as f64 * 300.0 * std::f64::consts::TAU / f64::from(RATE)).sin() * 6000.0) as i16
            } else {
                0
            };
            samples.push(noise + tone);
        }
        let mut offset = WAV_HEADER_BYTES;
        for chunk in samples.chunks(RATE as usize / 10) {
            for &s in chunk {
                let written = if fault == CaptureFault::Mismatch {
                    s ^ 1
                } else {
                    s
                };
                wav.write_sample(written).expect("sample");
            }
            wav.flush().expect("flush");
            capture.sync().expect("sync");
            let start = offset;
            offset += chunk.len() as u64 * 2;
            if fault != CaptureFault::NeverDurable {
                durable.send_replace(offset);
            }
            let mut pcm = Vec::new();
            for &s in chunk {
                pcm.extend_from_slice(&s.to_le_bytes());
            }
            sender
                .blocking_send(AudioChunk {
                    pcm,
                    wav: Some(WavRange {
                        asset: asset.clone(),
                        offset: start,
                    }),
                })
                .expect("send");
        }
        drop(sender);
        let rt = support::runtime();
        let report = rt.block_on(engine.stop());
        wav.finalize().expect("finalize");
        capture.sync().expect("sync");
        drop(capture);
        continuation.set_leaf(report.leaf.clone());
        continuation
            .append_one(EntryBody::RecordingFinished(RecordingFinished {
                recording_id: recording_id.clone(),
                duration_ms: (offset - WAV_HEADER_BYTES) / 2 * 1000 / u64::from(RATE),
                outcome: if report.complete {
                    Outcome::Complete
                } else {
                    Outcome::Incomplete
                },
                gaps: (!report.gaps.is_empty()).then(|| report.gaps.clone()),
            }))
            .expect("recording.finished");

        assert!(report.complete, "{fault:?}: {:?}", report.gaps);
        assert_eq!(report.messages.len(), 1, "{fault:?}");
        check(&session);
        let entries = entries(&session);
        let messages = messages(&entries);
        assert_eq!(messages.len(), 1, "{fault:?}");
        let audio = messages[0]["content"]
            .as_array()
            .expect("content")
            .iter()
            .find(|b| b["type"] == "audio")
            .expect("audio block");
        let path = audio["asset"]["path"].as_str().expect("path");
        assert_ne!(path, format!("assets/{asset}"), "{fault:?}: not the WAV");
        assert_eq!(audio["asset"]["encoding"], "pcm_s16le");
        assert!(audio["asset"]["sha256"].is_string(), "{audio}");
        assert_eq!(audio["recordingId"], recording_id.as_str());
        // The asset holds exactly the samples the recognizer heard: a contiguous part of
        // what the engine was given, as long as the text says.
        let bytes = std::fs::read(session.join(path)).expect("the asset exists");
        assert_eq!(audio["asset"]["byteRange"]["start"], 0, "{audio}");
        assert_eq!(
            audio["asset"]["byteRange"]["end"].as_u64(),
            Some(bytes.len() as u64),
            "the whole asset"
        );
        // The text is what the recognizer made of its window (the tone and the faint noise
        // around it); the message's audio is the stretch of that window up to the pause.
        let heard = text_of(messages[0]);
        let window: usize = heard
            .strip_suffix(" samples")
            .and_then(|n| n.parse().ok())
            .expect("the recognizer's text");
        assert!(window >= bytes.len() / 2, "{fault:?}: {heard}");
        let given: Vec<i16> = samples;
        let asset_samples: Vec<i16> = bytes
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert!(
            given
                .windows(asset_samples.len())
                .any(|w| w == asset_samples.as_slice()),
            "{fault:?}: the asset is not the samples given to the engine"
        );
        // Inside the tone, with its lead-in and hangover.
        assert!(asset_samples.len() >= RATE as usize, "{fault:?}");
    }
}

/// Wraps a recognizer and logs the length of every window it is given.
struct WindowLog {
    inner: Box<dyn persyk::local::dictation::Recognize>,
    windows: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
}

impl persyk::local::dictation::Recognize for WindowLog {
    fn transcribe(
        &mut self,
        pcm_24k: &[i16],
    ) -> Result<persyk::local::Verdict, persyk::local::LocalError> {
        self.inner.transcribe(pcm_24k)
    }

    fn decode(
        &mut self,
        pcm_24k: &[i16],
        how: &persyk::local::dictation::Decode,
    ) -> Result<Vec<persyk::local::dictation::Segment>, persyk::local::LocalError> {
        self.windows
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(pcm_24k.len());
        self.inner.decode(pcm_24k, how)
    }

    fn file_window_ms(&self) -> u64 {
        self.inner.file_window_ms()
    }
}

/// Issue #38: a file read with a model bigger than tiny is cut into windows of up to 29 s
/// (every window costs the encoder 30 s, so fuller ones cost less), still only at pauses,
/// and loses nothing: the session is complete, with no gap, every sentence is there, and its
/// words are as right as one whole-file whisper.cpp call's on the same audio. Tiny models
/// keep 25 s windows (they drop passages from longer ones). The real base and tiny.en
/// models.
#[test]
fn issue38_06_a_bigger_model_reads_a_file_in_fuller_windows_and_loses_nothing() {
    let _turn = support::whisper_turn();
    use persyk::local::dictation::{FILE_DRAIN_DEADLINE, FILE_WINDOW_MS, MAX_WINDOW_MS};
    use persyk::local::whisper::{self, LocalModel};
    use persyk::pipeline::{self, Recognition, RecordOptions, SamplesSource, SourceKind};

    let dir = tempfile::tempdir().expect("tempdir");
    let sentences = [
        "The garden behind the house is full of roses.",
        "My brother drives a small blue car to work.",
        "We bought fresh bread at the market this morning.",
        "The train to the city leaves at half past nine.",
        "Please send the report to the whole team today.",
        "The children played football in the park after school.",
        "She keeps her old letters in a wooden box.",
        "The museum opens again on the first day of spring.",
        "A cold wind came down from the mountains at night.",
        "I will call you when the package arrives.",
    ];
    // Each sentence, then 0.8 s of silence: a pause every 3 s or so, so that the last pause
    // within 25 s and the last within 29 s are different ones.
    let audio = spoken(dir.path(), &sentences, 800);
    let reference = sentences.join(" ");
    let seconds = audio.len() as f64 / f64::from(RATE);
    assert!(
        seconds > 30.0,
        "{seconds:.1} s of speech: more than one window"
    );

    for (model_path, longest_ms) in [
        (support::multilingual_model(), FILE_WINDOW_MS),
        (model_path(), MAX_WINDOW_MS),
    ] {
        let model = LocalModel::load(&model_path).expect("the model");
        let mut setup = whisper::setup(
            &model,
            persyk::local::options_for(None, true),
            FILE_DRAIN_DEADLINE,
        )
        .expect("setup");
        let windows = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        setup.recognizer = Box::new(WindowLog {
            inner: setup.recognizer,
            windows: windows.clone(),
        });
        let root = dir.path().join(model_path.file_stem().expect("a name"));
        let (session, continuation) = support::new_session(&root);
        let (_stop_tx, stop) = tokio::sync::watch::channel(false);
        support::runtime()
            .block_on(pipeline::record_to(
                continuation,
                Recognition::Local(setup),
                Box::new(SamplesSource::new(audio.clone(), 0.0)),
                SourceKind::Replay,
                stop,
                RecordOptions::default(),
            ))
            .expect("recording");
        check(&session);
        let entries = entries(&session);
        let fin = finished(&entries);
        assert_eq!(fin["outcome"], "complete", "{fin}");
        assert!(fin.get("gaps").is_none(), "{fin}");
        let text: Vec<String> = messages(&entries).iter().map(|m| text_of(m)).collect();
        let text = text.join(" ");

        let windows = windows.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let longest = windows.iter().copied().max().unwrap_or(0) as u64 * 1000 / u64::from(RATE);
        assert!(longest <= longest_ms, "{windows:?}");
        if longest_ms > MAX_WINDOW_MS {
            assert!(
                longest > MAX_WINDOW_MS,
                "no window past 25 s: {windows:?} ({})",
                model_path.display()
            );
        }

        eprintln!(
            "{}: windows {:?} s, WER {:.3}",
            model_path.display(),
            windows
                .iter()
                .map(|&n| format!("{:.1}", n as f64 / f64::from(RATE)))
                .collect::<Vec<_>>(),
            wer(&reference, &text)
        );
        // No passage is lost: every sentence is there by one of its longer words at least.
        let heard = support::words(&text);
        for s in sentences {
            assert!(
                support::words(s)
                    .iter()
                    .any(|w| w.len() >= 5 && heard.contains(w)),
                "{s:?} is missing ({}):\n{text}",
                model_path.display()
            );
        }
        // The product's default size (base.en; base here) is as right as the whole-file call
        // (tiny.en's windows cost it a few words here: its gap is measured in `benches/files`).
        if longest_ms > MAX_WINDOW_MS {
            let ctx = support::corpus::whole_file_context(&model_path);
            let whole = support::corpus::whole_file_text(&ctx, &audio, 2, Some("en"));
            let (ours, theirs) = (wer(&reference, &text), wer(&reference, &whole));
            assert!(
                ours <= theirs + 0.02,
                "WER {ours:.3} against the whole-file call's {theirs:.3}:\n{text}\n{whole}"
            );
        }
    }
}
