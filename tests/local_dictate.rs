//! `persyk dictate --provider local` end to end: the real binary records the default input of
//! a private PulseAudio server (cpal's PulseAudio host) while jfk.wav plays into it, and
//! recognizes it on the device with the real tiny.en model (offline).
//!
//! The server has a null sink `vsink` whose monitor is the default source. Quiet room noise
//! plays into the sink for the whole test, so the input is never digital silence (a live
//! capture halts on 2 s of it at the start); jfk.wav plays once the recording has started.
//! Needs `pulseaudio` and `pulseaudio-utils` (pactl, paplay), like `tests/capture_pulse.rs`;
//! fails with what to install when they are missing, unless `PERSYK_SKIP_PULSE=1`.
#![cfg(all(feature = "local", feature = "app", target_os = "linux"))]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod support;

use support::pulse::{PulseServer, missing_tools};
use support::{JFK, entries, test_model_dir, wer};

const BIN: &str = env!("CARGO_BIN_EXE_persyk");

#[test]
fn dictating_locally_from_the_default_input_gives_a_checked_session_with_the_speech() {
    if std::env::var("PERSYK_SKIP_PULSE").as_deref() == Ok("1") {
        eprintln!("local_dictate: skipped (PERSYK_SKIP_PULSE=1)");
        return;
    }
    let missing = missing_tools();
    assert!(
        missing.is_empty(),
        "local_dictate needs {} on PATH: `apt-get install -y pulseaudio pulseaudio-utils espeak-ng` \
         (scripts/setup does), or set PERSYK_SKIP_PULSE=1 to skip this test",
        missing.join(", ")
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let server = PulseServer::start(dir.path());
    server
        .pactl(&["set-default-source", "vsink.monitor"])
        .expect("set-default-source");
    // Room noise for longer than the test, under everything.
    let _room = server.room_noise(dir.path(), 90);
    std::thread::sleep(Duration::from_millis(300));

    let root = dir.path().join("sessions");
    let mut child = server
        .command(BIN)
        .arg("dictate")
        .args(["--provider", "local", "--model"])
        .arg(support::test_model())
        .args(["--seconds", "16", "--pre-roll-ms", "0", "--root"])
        .arg(&root)
        .env("PERSYK_CONFIG", dir.path().join("no-settings.json"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("persyk dictate");
    // The session line comes just before the recording starts: play the speech then.
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    let session = loop {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).expect("stderr");
        assert!(n > 0, "dictate ended before its session line: {seen}");
        seen.push_str(&line);
        if let Some(path) = line.trim_end().strip_prefix("persyk: session ") {
            break PathBuf::from(path);
        }
    };
    std::thread::sleep(Duration::from_millis(500));
    let speech = server.play(&test_model_dir().join("jfk.wav"));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).expect("stderr");
    let out = child.wait_with_output().expect("dictate exits");
    drop(speech);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{seen}{rest}");
    let error = wer(JFK, &stdout);
    assert!(error <= 0.1, "WER {error:.3}: {stdout:?}");

    let check = Command::new(BIN)
        .arg("check")
        .arg(&session)
        .output()
        .expect("persyk check");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let entries = entries(&session);
    let model_change = entries
        .iter()
        .find(|e| e["type"] == "model_change")
        .expect("model_change");
    assert_eq!(model_change["provider"], "local");
    assert_eq!(model_change["modelId"], "ggml-tiny.en");
    let started = entries
        .iter()
        .find(|e| e["type"] == "recording.started")
        .expect("recording.started");
    let messages: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect();
    assert!(!messages.is_empty());
    let printed: Vec<&str> = stdout.lines().collect();
    assert_eq!(printed.len(), messages.len(), "one line per message");
    for (m, line) in messages.iter().zip(&printed) {
        assert_eq!(m["provider"], "local");
        let content = m["content"].as_array().expect("content");
        let text = content
            .iter()
            .find(|b| b["type"] == "text")
            .and_then(|b| b["text"].as_str())
            .expect("text");
        assert_eq!(text, *line);
        let audio = content
            .iter()
            .find(|b| b["type"] == "audio")
            .expect("audio block");
        // The microphone's own WAV, by range: no copy.
        assert_eq!(audio["asset"]["path"], started["asset"]);
        assert!(
            audio["asset"]["byteRange"]["end"].as_u64()
                > audio["asset"]["byteRange"]["start"].as_u64()
        );
    }
    let finished = entries
        .iter()
        .find(|e| e["type"] == "recording.finished")
        .expect("recording.finished");
    assert_eq!(finished["outcome"], "complete");
    // At most the sixteen seconds asked for, and at least the speech.
    let duration_ms = finished["durationMs"].as_u64().expect("durationMs");
    assert!((11_000..=16_500).contains(&duration_ms), "{duration_ms}");
}
