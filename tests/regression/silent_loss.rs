//! Regressions of issue #23 on the realtime side and in the pipeline: recordings that lost
//! words and still ended "complete", and a provider failure that stopped the microphone.
//!
//! The engine runs inside the real pipeline against the fake provider over loopback
//! websockets and writes a real session folder; the outcome is read back from
//! `session.jsonl`.

use std::path::Path;
use std::time::Duration;

use persyk::pipeline::{self, FileOptions, Transcription};
use persyk::realtime::fake::{self, FakeLog, Scenario};
use persyk::realtime::protocol::{Mode, Settings};
use serde_json::Value;

use super::realtime::support::{self, fresh_session};

use super::realtime::{KEY, runtime};

/// The on-device fallback with the tiny.en test model, loaded now.
#[cfg(feature = "local")]
fn tiny_fallback() -> pipeline::Fallback {
    use persyk::local::whisper::{self, LocalModel};
    let model = LocalModel::load(&support::test_model()).expect("tiny.en loads");
    let setup = whisper::setup(
        &model,
        persyk::local::options_for(None, true),
        Duration::from_secs(60),
    )
    .expect("setup");
    Box::new(move || Some(setup))
}

/// `ms` of a 440 Hz tone at `amplitude` (24 kHz mono).
fn tone(ms: u64, amplitude: f64) -> Vec<i16> {
    (0..ms as usize * 24)
        .map(|i| {
            let t = i as f64 / 24_000.0;
            ((t * 440.0 * std::f64::consts::TAU).sin() * amplitude) as i16
        })
        .collect()
}

/// The `recording.finished` entry of a session folder.
fn finished(dir: &Path) -> Value {
    support::entries(dir)
        .into_iter()
        .find(|e| e["type"] == "recording.finished")
        .expect("recording.finished")
}

/// Streams `samples` in real time through the pipeline against `scenario` with `model`;
/// returns the transcription, the fake's log and the `recording.finished` entry.
fn record_against(scenario: &str, model: &str, samples: &[i16]) -> (Transcription, FakeLog, Value) {
    let rt = runtime();
    let (_tmp, dir, continuation) = fresh_session();
    let scenario = Scenario::from_json(scenario).expect("scenario");
    let (t, log) = rt.block_on(async {
        let server = fake::spawn(scenario).await.expect("fake");
        let settings = Settings {
            base_url: format!("ws://{}/v1", server.addr),
            mode: Mode::Transcription,
            transcription_model: model.into(),
            ..Settings::default()
        };
        let t = tokio::time::timeout(
            Duration::from_secs(60),
            pipeline::transcribe_samples(
                continuation,
                settings,
                KEY.into(),
                samples,
                FileOptions {
                    realtime_factor: 1.0,
                },
            ),
        )
        .await
        .expect("the recording ends")
        .expect("the recording runs");
        server.shutdown();
        let log = server
            .finish(Duration::from_secs(5))
            .await
            .expect("fake finishes");
        (t, log)
    });
    let f = finished(&dir);
    (t, log, f)
}

fn commits(log: &FakeLog) -> usize {
    log.connections
        .iter()
        .flat_map(|c| c.received())
        .filter(|e| e["type"] == "input_audio_buffer.commit")
        .count()
}

/// A 2 s phrase: 300 ms of silence, then 1.7 s of a tone.
fn phrase() -> Vec<i16> {
    let mut s = vec![0i16; 300 * 24];
    s.extend(tone(1_700, 8_000.0));
    s
}

/// A slow service: `session.created` 2.5 s after the upgrade.
const SLOW_SESSION: &str = r#"{"name": "slow-session", "connections": [{
    "session_created_delay_ms": 2500,
    "utterances": [{"end_ms": 1500, "transcript": "Held until the session exists.", "delay_ms": 50}],
    "final_utterance": {"transcript": "And the rest.", "delay_ms": 50},
    "close_after_commit_ms": 400
}]}"#;

/// Issue 23, item 1 (client turns, the default model): a 2 s phrase stopped before the
/// provider created the session. The audio waiting for the session was never sent nor
/// committed, and the recording ended "complete" with no text.
#[test]
fn issue23_01_stop_before_session_created_client_turns() {
    let (t, log, finished) = record_against(SLOW_SESSION, "gpt-live-transcribe", &phrase());
    let sent: u64 = log.connections.iter().map(|c| c.audio_bytes).sum();
    assert_eq!(
        sent,
        2_000 * 48,
        "every sample reaches the provider: {:?} {finished}",
        t.report
    );
    assert!(commits(&log) >= 1, "the phrase is committed");
    assert_eq!(
        t.report.transcript(),
        ["Held until the session exists."],
        "{:?}",
        t.report
    );
    assert_eq!(finished["outcome"], "complete", "{finished}");
}

/// Issue 23, item 1 (server VAD): the stop's commit went out before any audio, was answered
/// `input_audio_buffer_commit_empty`, and the recording ended "complete" with no text.
#[test]
fn issue23_01_stop_before_session_created_server_vad() {
    let (t, log, finished) = record_against(SLOW_SESSION, "gpt-transcribe", &phrase());
    let sent: u64 = log.connections.iter().map(|c| c.audio_bytes).sum();
    assert_eq!(
        sent,
        2_000 * 48,
        "every sample reaches the provider: {:?} {finished}",
        t.report
    );
    assert_eq!(
        t.report.transcript(),
        ["Held until the session exists.", "And the rest."],
        "{:?}",
        t.report
    );
    assert_eq!(finished["outcome"], "complete", "{finished}");
}

/// Issue 23, item 1: when the session never comes before the stop's drain deadline, the audio
/// that waited for it is a gap over its time range and the outcome is incomplete.
#[test]
fn issue23_01_no_session_by_the_deadline_is_a_gap() {
    let scenario = r#"{"name": "no-session", "connections": [{
        "session_created_delay_ms": 20000, "utterances": []
    }]}"#;
    let (t, _log, finished) = record_against(scenario, "gpt-live-transcribe", &phrase());
    assert_eq!(finished["outcome"], "incomplete", "{finished}");
    let gaps = finished["gaps"].as_array().expect("gaps");
    assert_eq!(gaps.len(), 1, "{finished}");
    assert_eq!(gaps[0]["reason"], "provider.no-session");
    assert_eq!(gaps[0]["startMs"], 0);
    assert_eq!(gaps[0]["endMs"], 2_000);
    assert!(!t.report.complete);
}

/// A service with client turns that transcribes whatever the client commits.
const CLIENT_TURNS: &str = r#"{"name": "client-turns", "connections": [{
    "utterances": [{"end_ms": 1, "transcript": "Please send the report.", "delay_ms": 50}],
    "close_after_commit_ms": 400
}]}"#;

/// Issue 23, item 2 (client turns): quiet speech, about −56 dBFS RMS, under the segmenter's
/// −50 dBFS gate. The provider received the audio and no commit; the recording ended
/// "complete" with no text.
#[test]
fn issue23_02_quiet_speech_is_committed() {
    let amplitude = 32_768.0 * 10f64.powf(-56.0 / 20.0) * std::f64::consts::SQRT_2;
    let mut samples = vec![0i16; 300 * 24];
    samples.extend(tone(2_000, amplitude));
    samples.extend(vec![0i16; 300 * 24]);
    let (t, log, finished) = record_against(CLIENT_TURNS, "gpt-live-transcribe", &samples);
    assert!(
        commits(&log) >= 1,
        "the quiet phrase is committed: {:?}",
        t.report
    );
    assert_eq!(
        t.report.transcript(),
        ["Please send the report."],
        "{finished}"
    );
    assert_eq!(finished["outcome"], "complete", "{finished}");
}

/// Issue 23, item 2 (client turns): speech from the very first sample at a steady level (the
/// segmenter's noise floor starts at the speech itself) never opened an utterance. At about
/// −44 dBFS RMS it is above the gate, and under the fake's loudness for streamed deltas (so
/// no delta rescues it).
#[test]
fn issue23_02_speech_at_the_start_is_committed() {
    let amplitude = 200.0 * std::f64::consts::SQRT_2;
    let (t, log, finished) =
        record_against(CLIENT_TURNS, "gpt-live-transcribe", &tone(2_000, amplitude));
    assert!(
        commits(&log) >= 1,
        "the phrase is committed: {:?}",
        t.report
    );
    assert_eq!(
        t.report.transcript(),
        ["Please send the report."],
        "{finished}"
    );
    assert_eq!(finished["outcome"], "complete", "{finished}");
}

// ---------------------------------------------------------------------------------------------
// Item 5: the provider's failure must not stop the microphone.

/// A service that answers every upgrade with HTTP 401 (the key refused).
const UNAUTHORIZED: &str = r#"{"name": "unauthorized", "reject_every_key": true,
    "connections": [{"utterances": []}]}"#;

/// A loopback URL where nothing listens (connection refused).
fn unreachable_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("ws://{addr}/v1")
}

/// The samples of the recording's WAV, read back with hound.
fn wav_samples(dir: &Path, finished: &Value) -> Vec<i16> {
    let started = support::entries(dir)
        .into_iter()
        .find(|e| e["type"] == "recording.started" && e["recordingId"] == finished["recordingId"])
        .expect("recording.started");
    let asset = started["asset"].as_str().expect("asset");
    hound::WavReader::open(dir.join(asset))
        .expect("the WAV opens")
        .samples::<i16>()
        .map(|s| s.expect("a sample"))
        .collect()
}

/// Records `samples` (as a file source at 4× real time) against `base_url` with `fallback`;
/// the session folder stays in the returned temp dir.
fn record_failing(
    base_url: &str,
    samples: &[i16],
    fallback: Option<pipeline::Fallback>,
) -> (tempfile::TempDir, std::path::PathBuf, Transcription) {
    let rt = runtime();
    let (tmp, dir, continuation) = fresh_session();
    let settings = Settings {
        base_url: base_url.to_owned(),
        ..Settings::default()
    };
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let options = pipeline::RecordOptions {
        fallback,
        ..pipeline::RecordOptions::default()
    };
    let source = Box::new(pipeline::SamplesSource::new(samples.to_vec(), 4.0));
    let t = rt
        .block_on(async {
            tokio::time::timeout(
                Duration::from_secs(120),
                pipeline::record_with(
                    continuation,
                    settings,
                    KEY.into(),
                    source,
                    pipeline::SourceKind::Replay,
                    stop_rx,
                    options,
                ),
            )
            .await
        })
        .expect("the recording ends")
        .expect("the recording runs");
    (tmp, dir, t)
}

fn persyk_cli() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_persyk"));
    c.stdin(std::process::Stdio::null());
    c
}

/// Issue 23, item 5 (no fallback): the provider answers 401. The recording ended at 0.0 s and
/// the speech was lost. Now the WAV holds all of it, the outcome is incomplete with a
/// `provider.unauthorized` gap over it, `persyk status` lists it, and "Transcribe again"
/// against a working provider yields the words.
#[test]
fn issue23_05_unauthorized_keeps_the_whole_recording() {
    let speech = support::jfk_as_recorded();
    let rt = runtime();
    let server = rt
        .block_on(fake::spawn(
            Scenario::from_json(UNAUTHORIZED).expect("scenario"),
        ))
        .expect("fake");
    let (tmp, dir, t) = record_failing(&format!("ws://{}/v1", server.addr), &speech, None);
    server.shutdown();
    let finished = finished(&dir);
    assert_eq!(
        wav_samples(&dir, &finished),
        speech,
        "the WAV holds the whole speech"
    );
    let duration = speech.len() as u64 * 1000 / 24_000;
    assert_eq!(finished["durationMs"], duration, "{finished}");
    assert_eq!(finished["outcome"], "incomplete", "{finished}");
    let gaps = finished["gaps"].as_array().expect("gaps");
    assert_eq!(gaps.len(), 1, "{finished}");
    assert_eq!(gaps[0]["reason"], "provider.unauthorized", "{finished}");
    assert_eq!(
        (gaps[0]["startMs"].as_u64(), gaps[0]["endMs"].as_u64()),
        (Some(0), Some(duration))
    );
    assert!(t.report.transcript().is_empty());

    // `persyk status` lists it as unfinished work.
    let out = persyk_cli()
        .arg("status")
        .arg(&dir)
        .output()
        .expect("status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "incomplete recording: {}",
            finished["recordingId"].as_str().expect("id")
        )) && text.contains("provider.unauthorized"),
        "{}",
        support::show(&out)
    );

    // "Transcribe again": the WAV against a working provider yields the words.
    let scenario = tmp.path().join("working.json");
    std::fs::write(
        &scenario,
        r#"{"name": "working", "connections": [{"utterances": [
            {"end_ms": 1, "transcript": "And so my fellow Americans, ask not what your country can do for you,"},
            {"end_ms": 2, "transcript": "ask what you can do for your country."}
        ]}]}"#,
    )
    .expect("scenario");
    let fake = super::capture::fake_cli::FakeProvider::start_file(&scenario);
    let started = support::entries(&dir)
        .into_iter()
        .find(|e| e["type"] == "recording.started")
        .expect("started");
    let wav = dir.join(started["asset"].as_str().expect("asset"));
    let out = persyk_cli()
        .arg("transcribe")
        .arg(&wav)
        .args([
            "--provider",
            "openai",
            "--provider-url",
            &fake.url,
            "--realtime-factor",
            "0",
        ])
        .arg("--root")
        .arg(tmp.path().join("again"))
        .env("OPENAI_API_KEY", KEY)
        .env("PERSYK_CONFIG", tmp.path().join("no-settings.json"))
        .output()
        .expect("transcribe");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("fellow Americans"),
        "{}",
        support::show(&out)
    );
}

/// Issue 23, item 5 (no fallback): nothing listens at the provider's address. The WAV holds
/// the whole speech and the gap says `provider.unreachable`, distinct from a refused key.
#[test]
fn issue23_05_unreachable_keeps_the_whole_recording() {
    let speech = support::jfk_as_recorded();
    let (_tmp, dir, _t) = record_failing(&unreachable_url(), &speech, None);
    let finished = finished(&dir);
    assert_eq!(
        wav_samples(&dir, &finished),
        speech,
        "the WAV holds the whole speech"
    );
    assert_eq!(finished["outcome"], "incomplete", "{finished}");
    let gaps = finished["gaps"].as_array().expect("gaps");
    assert_eq!(gaps.len(), 1, "{finished}");
    assert_eq!(gaps[0]["reason"], "provider.unreachable", "{finished}");
    assert_eq!(gaps[0]["startMs"], 0, "{finished}");
}

/// Issue 23, item 5 (fallback): with an on-device model at hand, the speech the provider never
/// heard (401) is recognized locally through the same seam; the local engine records its own
/// `model_change` (provider `local`) and the words are JFK's.
#[cfg(feature = "local")]
#[test]
fn issue23_05_unauthorized_falls_back_to_the_device() {
    let speech = support::jfk_as_recorded();
    let rt = runtime();
    let server = rt
        .block_on(fake::spawn(
            Scenario::from_json(UNAUTHORIZED).expect("scenario"),
        ))
        .expect("fake");
    let fallback = tiny_fallback();
    let (_tmp, dir, t) =
        record_failing(&format!("ws://{}/v1", server.addr), &speech, Some(fallback));
    server.shutdown();
    let finished = finished(&dir);
    assert_eq!(
        wav_samples(&dir, &finished),
        speech,
        "the WAV holds the whole speech"
    );
    assert_eq!(finished["outcome"], "complete", "{finished}");
    assert!(finished.get("gaps").is_none(), "{finished}");
    let text = t.report.transcript().join(" ");
    let wer = support::wer(support::JFK, &text);
    assert!(wer < 0.2, "WER {wer}: {text}");
    let entries = support::entries(&dir);
    assert!(
        entries
            .iter()
            .any(|e| e["type"] == "model_change" && e["provider"] == "local"),
        "the local engine names itself"
    );
    let local_messages = entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .count();
    assert_eq!(local_messages, t.report.transcript().len());
    assert_eq!(t.engine_failure.as_deref(), Some("provider.unauthorized"));
    assert!(t.recovered_locally);
}

/// Issue 23, item 5 (a dropped connection, fallback): the connection is reset after 3 s of
/// audio. The microphone goes on; after the stop the device recognizes what the provider did
/// not, so the end of the speech is in the transcript and no `provider.disconnected` gap is
/// left.
#[cfg(feature = "local")]
#[test]
fn issue23_05_a_dropped_connection_falls_back_to_the_device() {
    let speech = support::jfk_as_recorded();
    let rt = runtime();
    let scenario = r#"{"name": "drop", "connections": [{
        "utterances": [{"end_ms": 1, "transcript": "Never completed.", "delay_ms": 5000}],
        "actions": [{"on": {"append": 30}, "do": "disconnect"}]
    }]}"#;
    let server = rt
        .block_on(fake::spawn(
            Scenario::from_json(scenario).expect("scenario"),
        ))
        .expect("fake");
    let fallback = tiny_fallback();
    let (_tmp, dir, t) =
        record_failing(&format!("ws://{}/v1", server.addr), &speech, Some(fallback));
    server.shutdown();
    let finished = finished(&dir);
    let wav = wav_samples(&dir, &finished);
    assert_eq!(wav.len(), speech.len(), "the WAV holds the whole speech");
    assert_eq!(t.engine_failure.as_deref(), Some("provider.disconnected"));
    assert!(t.recovered_locally);
    let text = t.report.transcript().join(" ");
    assert!(text.contains("your country"), "{text}");
    let gaps = finished["gaps"].as_array().cloned().unwrap_or_default();
    assert!(
        gaps.iter().all(|g| g["reason"] != "provider.disconnected"),
        "{finished}"
    );
    assert!(
        support::entries(&dir)
            .iter()
            .any(|e| e["type"] == "model_change" && e["provider"] == "local"),
        "the local engine names itself"
    );
}

/// Issue 23, item 5 (the CLI): `persyk transcribe` against an unreachable provider with an
/// on-device model at hand prints the words and says the device recognized them.
#[cfg(feature = "local")]
#[test]
fn issue23_05_transcribe_falls_back_to_the_device() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = persyk_cli()
        .arg("transcribe")
        .arg(support::test_model_dir().join("jfk.wav"))
        .args(["--provider", "openai", "--provider-url", &unreachable_url()])
        .args(["--realtime-factor", "0", "--model"])
        .arg(support::test_model())
        .arg("--root")
        .arg(tmp.path().join("sessions"))
        .env("OPENAI_API_KEY", KEY)
        .env("PERSYK_CONFIG", tmp.path().join("no-settings.json"))
        .output()
        .expect("transcribe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && stdout.contains("your country")
            && stderr.contains("provider.unreachable")
            && stderr.contains("recognized on this device"),
        "{}",
        support::show(&out)
    );
}
