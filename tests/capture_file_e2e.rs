//! The file source end to end: a 44.1 kHz stereo float WAV streamed through `persyk
//! transcribe` against the fake provider. The capture WAV reads back with Python's `wave`
//! and `sox --i`, its samples equal the converter's output for the same input, and every
//! media reference's byte range holds exactly the bytes that were sent for that append.

mod fake_cli;

use std::process::Command;

use fake_cli::FakeProvider;
use persyk::audio::convert::Converter;
use serde_json::Value;

fn persyk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_persyk"))
}

#[test]
fn resampled_file_capture_matches_the_converter_and_its_media_ranges() {
    let tmp = tempfile::tempdir().expect("tmp");
    let input = tmp.path().join("in.wav");
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 44_100,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut w = hound::WavWriter::create(&input, spec).expect("wav");
    let mut interleaved = Vec::new();
    for i in 0..44_100 * 3 {
        let t = i as f32 / 44_100.0;
        let l = 0.3 * (2.0 * std::f32::consts::PI * 440.0 * t).sin();
        let r = 0.2 * (2.0 * std::f32::consts::PI * 660.0 * t).sin();
        for s in [l, r] {
            w.write_sample(s).expect("sample");
            interleaved.push(s);
        }
    }
    w.finalize().expect("finalize");
    let mut expected = Vec::new();
    let mut conv = Converter::new(44_100, 2).expect("converter");
    conv.push(&interleaved, &mut expected);
    conv.flush(&mut expected);

    let fake = FakeProvider::start("normal-dictation");
    let url = fake.url.clone();
    let root = tmp.path().join("root");
    let out = persyk()
        .arg("transcribe")
        .arg(&input)
        .args(["--provider-url", &url, "--realtime-factor", "0"])
        .arg("--root")
        .arg(&root)
        .env("OPENAI_API_KEY", "sk-test-file-0123456789abcdef")
        .output()
        .expect("transcribe");
    drop(fake);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let session = std::fs::read_dir(&root)
        .expect("root")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .expect("session");
    let wav = std::fs::read_dir(session.join("assets"))
        .expect("assets")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "wav"))
        .expect("wav");
    let py = Command::new("python3")
        .args(["-c", "import wave,sys; w=wave.open(sys.argv[1]); print(w.getnframes(), w.getframerate(), w.getnchannels(), w.getsampwidth())"])
        .arg(&wav)
        .output()
        .expect("python3");
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        format!("{} 24000 1 2", expected.len())
    );
    let sox = Command::new("sox")
        .args(["--i", "-s"])
        .arg(&wav)
        .output()
        .expect("sox");
    assert_eq!(
        String::from_utf8_lossy(&sox.stdout).trim(),
        expected.len().to_string()
    );
    let got: Vec<i16> = hound::WavReader::open(&wav)
        .expect("read")
        .samples::<i16>()
        .map(|s| s.expect("sample"))
        .collect();
    assert_eq!(got, expected, "the WAV holds exactly the converted input");

    // Every outgoing append references WAV bytes; together they are the whole data chunk.
    let wav_bytes = std::fs::read(&wav).expect("wav bytes");
    let text = std::fs::read_to_string(session.join("session.jsonl")).expect("session");
    let mut covered = 0u64;
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).expect("json");
        if v["type"] != "realtime_event" || v["payload"]["type"] != "input_audio_buffer.append" {
            continue;
        }
        assert!(v["payload"]["audio"].is_null());
        let asset = &v["media"][0]["asset"];
        assert_eq!(asset["encoding"], "base64");
        let path = asset["path"].as_str().expect("path");
        assert!(path.ends_with(".wav"), "append stored as {path}");
        let (s, e) = (
            asset["byteRange"]["start"].as_u64().expect("start") as usize,
            asset["byteRange"]["end"].as_u64().expect("end") as usize,
        );
        assert!(e <= wav_bytes.len());
        // The bytes at the range decode to the same samples as the converter produced.
        let samples: Vec<i16> = wav_bytes[s..e]
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        let first = (s - 44) / 2;
        assert_eq!(&samples[..], &expected[first..first + samples.len()]);
        covered += (e - s) as u64;
    }
    assert_eq!(
        covered as usize,
        expected.len() * 2,
        "appends cover the whole recording"
    );
    let check = persyk().arg("check").arg(&session).status().expect("check");
    assert!(check.success());
}
