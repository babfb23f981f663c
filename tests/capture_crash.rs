//! kill -9 during capture: the recording is reported unfinished after restart, explicit
//! recovery fixes the WAV, and every sample up to the last fsync is there, byte for byte.

mod fake_cli;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use fake_cli::FakeProvider;

fn persyk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_persyk"))
}

fn input_wav(path: &Path, seconds: u32) -> Vec<i16> {
    let mut x: u32 = 0x1234_5678;
    let samples: Vec<i16> = (0..24_000 * seconds)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 20) as i16 - 2048
        })
        .collect();
    support::write_wav_24k(path, &samples);
    samples
}

fn session_dir(root: &Path) -> PathBuf {
    std::fs::read_dir(root)
        .expect("root")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| !n.to_string_lossy().starts_with('.'))
        })
        .expect("a session folder")
}

#[test]
fn kill_during_capture_then_recover_keeps_every_fsynced_sample() {
    let tmp = tempfile::tempdir().expect("tmp");
    let input = tmp.path().join("input.wav");
    let samples = input_wav(&input, 8);
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).expect("root");

    let fake = FakeProvider::start("normal-dictation");
    let url = fake.url.clone();

    let mut child = persyk()
        .arg("transcribe")
        .arg(&input)
        .args(["--provider-url", &url, "--realtime-factor", "1"])
        .arg("--root")
        .arg(&root)
        .env("OPENAI_API_KEY", "sk-test-crash-0123456789abcdef")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("transcribe");
    std::thread::sleep(Duration::from_millis(2500));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    drop(fake);

    let session = session_dir(&root);
    let status = persyk()
        .arg("status")
        .arg(&session)
        .output()
        .expect("status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("unfinished recording"), "status said: {text}");

    let recover = persyk()
        .arg("recover")
        .arg(&session)
        .output()
        .expect("recover");
    let out = String::from_utf8_lossy(&recover.stdout);
    assert!(
        recover.status.success(),
        "recover failed: {out} {}",
        String::from_utf8_lossy(&recover.stderr)
    );
    assert!(out.contains("interrupted"), "recover said: {out}");
    let check = persyk().arg("check").arg(&session).status().expect("check");
    assert!(check.success(), "the recovered session validates");

    let wav = std::fs::read_dir(session.join("assets"))
        .expect("assets")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "wav"))
        .expect("the capture wav");
    // An independent reader: Python's wave module.
    let py = Command::new("python3")
        .args(["-c", "import wave,sys; w=wave.open(sys.argv[1]); print(w.getnframes(), w.getframerate(), w.getnchannels())"])
        .arg(&wav)
        .output()
        .expect("python3");
    let fields: Vec<u64> = String::from_utf8_lossy(&py.stdout)
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    assert_eq!(
        fields.len(),
        3,
        "python wave: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert_eq!((fields[1], fields[2]), (24_000, 1));
    let frames = fields[0] as usize;
    // 2.5 s of real-time streaming with an fsync at least every 250 ms / 1 s of audio: well
    // over a second of audio must have been durable.
    assert!(frames >= 24_000, "only {frames} frames survived");
    let mut reader = hound::WavReader::open(&wav).expect("hound reads it");
    let got: Vec<i16> = reader
        .samples::<i16>()
        .map(|s| s.expect("sample"))
        .collect();
    assert_eq!(got.len(), frames);
    assert_eq!(
        &got[..],
        &samples[..frames],
        "every kept sample is the input's, in order"
    );
}
