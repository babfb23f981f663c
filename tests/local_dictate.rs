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
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;

use support::{JFK, test_model_dir, wer};

const BIN: &str = env!("CARGO_BIN_EXE_persyk");
const TOOLS: [&str; 3] = ["pulseaudio", "pactl", "paplay"];

/// A private PulseAudio server with a null sink `vsink`, killed on drop.
struct PulseServer {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl PulseServer {
    fn start(dir: &Path) -> PulseServer {
        let run = dir.join("run");
        let home = dir.join("home");
        for d in [&run, &home] {
            std::fs::create_dir_all(d).expect("dir");
        }
        let socket = run.join("native");
        let log = dir.join("pulseaudio.log");
        let child = Command::new("pulseaudio")
            .args([
                "-n",
                "--daemonize=no",
                "--system=false",
                "--exit-idle-time=-1",
                "--use-pid-file=no",
                "--log-target=stderr",
            ])
            .arg("-L")
            .arg(format!(
                "module-native-protocol-unix auth-anonymous=1 socket={}",
                socket.display()
            ))
            .args(["-L", "module-null-sink sink_name=vsink"])
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", &run)
            .env("PULSE_RUNTIME_PATH", &run)
            .env("PULSE_STATE_PATH", dir.join("state"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("pulseaudio could not be started");
        let mut server = PulseServer { child, socket, log };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if server.socket.exists() && server.pactl(&["info"]) {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("pulseaudio exited ({status}):\n{}", server.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "pulseaudio did not come up:\n{}",
                server.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn address(&self) -> String {
        format!("unix:{}", self.socket.display())
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("PULSE_SERVER", self.address());
        c
    }

    fn pactl(&self, args: &[&str]) -> bool {
        self.command("pactl")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// `paplay` of `wav` into the null sink, in the background.
    fn play(&self, wav: &Path) -> KillOnDrop {
        KillOnDrop(
            self.command("paplay")
                .args(["--device=vsink", "--latency-msec=50"])
                .arg(wav)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("paplay"),
        )
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for PulseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_wav(path: &Path, rate: u32, samples: impl Iterator<Item = i16>) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).expect("wav");
    for s in samples {
        w.write_sample(s).expect("sample");
    }
    w.finalize().expect("wav");
}

fn entries(session: &Path) -> Vec<Value> {
    std::fs::read_to_string(session.join("session.jsonl"))
        .expect("session.jsonl")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

#[test]
fn dictating_locally_from_the_default_input_gives_a_checked_session_with_the_speech() {
    if std::env::var("PERSYK_SKIP_PULSE").as_deref() == Ok("1") {
        eprintln!("local_dictate: skipped (PERSYK_SKIP_PULSE=1)");
        return;
    }
    let missing: Vec<_> = TOOLS
        .into_iter()
        .filter(|t| {
            Command::new(t)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_err()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "local_dictate needs {} on PATH: `apt-get install -y pulseaudio pulseaudio-utils` \
         (scripts/setup does), or set PERSYK_SKIP_PULSE=1 to skip this test",
        missing.join(", ")
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let server = PulseServer::start(dir.path());
    assert!(server.pactl(&["set-default-source", "vsink.monitor"]));
    // Room noise (about -66 dBFS) for longer than the test, under everything.
    let noise = dir.path().join("room.wav");
    let mut seed = 7u64;
    write_wav(
        &noise,
        24_000,
        (0..24_000 * 90).map(|_| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) % 33) as i16 - 16
        }),
    );
    let _room = server.play(&noise);
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
