//! Issue #23 item 5 on the real binary: the provider's failure never stops the microphone.
//!
//! `persyk app` runs on its own Xvfb display, its microphone the default source of a private
//! PulseAudio server (as in `tests/app_journey.rs`), its settings pointing at a provider
//! that cannot be reached (a closed loopback port) and then at one that refuses the key
//! (`persyk fake-provider` answering every upgrade with HTTP 401). Each time the user presses
//! the hotkey, speaks and presses it again: the WAV holds the spoken audio (read by Python's
//! `wave`), the recording ends `incomplete` with a gap named `provider.unreachable` or
//! `provider.unauthorized`, and a later `persyk transcribe` of that WAV against a working
//! provider yields the words. No on-device model is installed (a private data folder), so
//! nothing is recognized locally.
//!
//! Needs Xvfb, xdotool, pulseaudio, pulseaudio-utils and espeak-ng (`scripts/setup`);
//! skipped with `PERSYK_SKIP_PULSE=1`.
#![cfg(all(feature = "app", target_os = "linux"))]

mod app_support;
mod fake_cli;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use app_support::real_app::{App, WAV_FACTS, persyk, sessions, wait_for};
use app_support::x11::{in_xvfb_child, press};
use fake_cli::FakeProvider;
use support::pulse::{PulseServer, missing_tools};
use support::show;

const SPOKEN: &str = "Dear team, the numbers are in. Persyk wrote this down.";

/// A loopback URL where nothing listens.
fn unreachable_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("ws://{addr}/v1")
}

/// One dictation by hotkey against `base_url`; returns the session folder.
fn dictate(dir: &Path, name: &str, pulse: &PulseServer, speech: &Path, base_url: &str) -> PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).expect("sessions folder");
    let settings = dir.join(format!("{name}.json"));
    let json = serde_json::json!({
        "sessions": {"directory": root},
        "provider": {"baseUrl": base_url, "transcriptionModel": "gpt-transcribe"},
        "afterDictation": {"action": "copy"},
        "feedback": {"sounds": false},
    });
    std::fs::write(&settings, json.to_string()).expect("write settings");
    let log = dir.join(format!("{name}.log"));
    let (mut app, persyk_window) = App::launch_hidden_with_key(
        &settings,
        &pulse.server_env(),
        "sk-failure-test-key",
        &dir.join("data"),
        &log,
    );
    press("alt+space");
    let session = wait_for("a published session folder", &log, || {
        sessions(&root).into_iter().next()
    });
    let folder = session.parent().expect("session folder").to_path_buf();
    wait_for("the recording's WAV asset", &log, || {
        std::fs::read_dir(folder.join("assets"))
            .ok()?
            .flatten()
            .find(|e| e.path().extension().is_some_and(|x| x == "wav"))
    });
    // The provider fails at once; the user talks on, as users do.
    std::thread::sleep(Duration::from_millis(500));
    let played = pulse
        .command("paplay")
        .args(["--device=vsink", "--latency-msec=50"])
        .arg(speech)
        .output()
        .expect("paplay");
    assert!(played.status.success(), "paplay: {}", show(&played));
    std::thread::sleep(Duration::from_millis(300));
    press("alt+space");
    wait_for("recording.finished", &log, || {
        std::fs::read_to_string(&session)
            .ok()
            .filter(|t| t.contains("\"recording.finished\""))
    });
    let focus = Command::new("xdotool")
        .args(["windowfocus", "--sync", &persyk_window])
        .status()
        .expect("xdotool windowfocus");
    assert!(focus.success());
    press("ctrl+q");
    let status = wait_for("the app to quit", &log, || {
        app.child.try_wait().ok().flatten()
    });
    assert!(status.success(), "persyk app: {status}\n{}", app.log_text());
    folder
}

#[test]
fn issue23_05_the_real_app_keeps_recording_when_the_provider_fails() {
    if std::env::var("PERSYK_SKIP_PULSE").as_deref() == Ok("1") {
        eprintln!("SKIPPED: PERSYK_SKIP_PULSE=1");
        return;
    }
    let missing = missing_tools();
    assert!(
        missing.is_empty(),
        "this test needs {} on PATH (scripts/setup installs them), or PERSYK_SKIP_PULSE=1",
        missing.join(", ")
    );
    if !in_xvfb_child("issue23_05_the_real_app_keeps_recording_when_the_provider_fails") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (pulse, _room) = PulseServer::microphone(dir.path(), 180);
    let speech = dir.path().join("speech.wav");
    let made = Command::new("espeak-ng")
        .arg("-w")
        .arg(&speech)
        .arg(SPOKEN)
        .output()
        .expect("espeak-ng");
    assert!(made.status.success(), "espeak-ng: {}", show(&made));
    let refusing = dir.path().join("refusing.json");
    std::fs::write(
        &refusing,
        r#"{"name": "refusing", "reject_every_key": true, "accept_timeout_ms": 120000,
            "connections": [{"utterances": []}]}"#,
    )
    .expect("scenario");
    let refusing = FakeProvider::start_file(&refusing);
    let cases = [
        ("unreachable", unreachable_url(), "provider.unreachable"),
        (
            "unauthorized",
            refusing.url.clone(),
            "provider.unauthorized",
        ),
    ];
    for (name, url, code) in cases {
        let folder = dictate(dir.path(), name, &pulse, &speech, &url);
        let text = std::fs::read_to_string(folder.join("session.jsonl")).expect("session");
        let finished: serde_json::Value = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["type"] == "recording.finished")
            .expect("recording.finished");
        assert_eq!(finished["outcome"], "incomplete", "{name}: {finished}");
        assert!(
            finished["gaps"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g["reason"] == code)),
            "{name}: {finished}"
        );
        let check = persyk(&["check", folder.to_str().expect("UTF-8")]);
        assert!(
            check.status.success(),
            "{name}: persyk check: {}",
            show(&check)
        );
        let wav = std::fs::read_dir(folder.join("assets"))
            .expect("assets")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "wav"))
            .expect("a WAV asset");
        let facts = Command::new("python3")
            .arg("-c")
            .arg(WAV_FACTS)
            .arg(&wav)
            .output()
            .expect("python3 wave");
        assert!(facts.status.success(), "wave: {}", show(&facts));
        let facts: serde_json::Value = serde_json::from_slice(&facts.stdout).expect("facts");
        let seconds = facts["frames"].as_f64().unwrap_or(0.0) / 24_000.0;
        let spoken = speech_seconds(&speech);
        assert!(
            seconds >= spoken,
            "{name}: the recording ({seconds:.2} s) is shorter than the speech ({spoken:.2} s)"
        );
        assert!(
            facts["loudest_db"].as_f64().unwrap_or(-200.0) > -30.0,
            "{name}: no speech in the recording: {facts}"
        );
        // "Transcribe again" against a working provider yields the words.
        let working = FakeProvider::start("journey");
        let settings = dir.path().join("working.json");
        std::fs::write(
            &settings,
            serde_json::json!({"provider": {"transcriptionModel": "gpt-transcribe"}}).to_string(),
        )
        .expect("settings");
        let again = Command::new(env!("CARGO_BIN_EXE_persyk"))
            .arg("transcribe")
            .arg(&wav)
            .args(["--provider", "openai", "--provider-url", &working.url])
            .args(["--realtime-factor", "0", "--root"])
            .arg(dir.path().join(format!("{name}-again")))
            .env("PERSYK_CONFIG", &settings)
            .env("OPENAI_API_KEY", "sk-failure-test-key")
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .stdin(Stdio::null())
            .output()
            .expect("persyk transcribe");
        assert!(
            again.status.success()
                && String::from_utf8_lossy(&again.stdout).contains("the numbers are in"),
            "{name}: transcribe again: {}",
            show(&again)
        );
    }
}

/// The length of a WAV by its header (espeak-ng writes plain PCM).
fn speech_seconds(path: &Path) -> f64 {
    let reader = hound::WavReader::open(path).expect("espeak-ng's WAV");
    reader.duration() as f64 / reader.spec().sample_rate as f64
}
