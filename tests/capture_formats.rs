//! File transcription's decoding (issue #38 item 2): jfk.wav encoded by ffmpeg at setup
//! (`scripts/make-test-media`) as MP3, M4A/AAC, ALAC, FLAC, Ogg Vorbis, AIFF and the audio
//! tracks of an MP4 and an MKV video decodes to the same speech (duration, and the loudness
//! over time against an independent hound read of the WAV); every bad input — Opus, no audio
//! track, an empty or renamed file, a cut-off or damaged stream — gives its stable code, after
//! the audio that came before the damage and never as a clean end; and `persyk transcribe`
//! turns the files into sessions with the words, the file's name only, and a named gap where
//! a file breaks off.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::mpsc::sync_channel;
use std::time::Duration;

use persyk::capture::open_file;
use persyk::capture::source::{SourceError, SourceEvent, SourceFormat};
use serde_json::Value;
use support::{test_media, test_model, test_model_dir};

/// Every frame a file gives (mono, averaged), its format, and how it ended.
fn decode(path: &Path) -> (SourceFormat, Vec<f32>, SourceEvent) {
    let mut source = open_file(path, 0.0).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let format = source.format();
    let (tx, rx) = sync_channel(64);
    source.start(tx).expect("start");
    let channels = usize::from(format.channels);
    let mut mono = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(30)).expect("an event") {
            SourceEvent::Frames(f) => mono.extend(
                f.chunks(channels)
                    .map(|c| c.iter().sum::<f32>() / channels as f32),
            ),
            end => return (format, mono, end),
        }
    }
}

/// Loudness per 50 ms.
fn envelope(samples: &[f32], rate: u32) -> Vec<f32> {
    let step = (rate / 20) as usize;
    samples
        .chunks(step)
        .map(|c| (c.iter().map(|s| s * s).sum::<f32>() / c.len() as f32).sqrt())
        .collect()
}

/// The best correlation of two envelopes within ±4 steps (codec delay).
fn similarity(a: &[f32], b: &[f32]) -> f32 {
    let corr = |lag: isize| {
        let pairs: Vec<(f32, f32)> = (0..a.len() as isize)
            .filter_map(|i| {
                let j = i + lag;
                (j >= 0 && (j as usize) < b.len()).then(|| (a[i as usize], b[j as usize]))
            })
            .collect();
        let n = pairs.len() as f32;
        let (ma, mb) = (
            pairs.iter().map(|p| p.0).sum::<f32>() / n,
            pairs.iter().map(|p| p.1).sum::<f32>() / n,
        );
        let cov: f32 = pairs.iter().map(|(x, y)| (x - ma) * (y - mb)).sum();
        let va: f32 = pairs.iter().map(|(x, _)| (x - ma).powi(2)).sum();
        let vb: f32 = pairs.iter().map(|(_, y)| (y - mb).powi(2)).sum();
        cov / (va * vb).sqrt()
    };
    (-4..=4).map(corr).fold(f32::MIN, f32::max)
}

fn the_wav() -> (u32, Vec<f32>) {
    let mut reader = hound::WavReader::open(test_model_dir().join("jfk.wav")).expect("jfk.wav");
    let spec = reader.spec();
    let ch = usize::from(spec.channels);
    let samples: Vec<f32> = reader
        .samples::<i16>()
        .map(|s| f32::from(s.expect("sample")) / 32768.0)
        .collect::<Vec<_>>()
        .chunks(ch)
        .map(|c| c.iter().sum::<f32>() / ch as f32)
        .collect();
    (spec.sample_rate, samples)
}

#[test]
fn issue38_02_every_format_decodes_to_the_same_speech() {
    let (rate, wav) = the_wav();
    let reference = envelope(&wav, rate);
    let seconds = wav.len() as f64 / f64::from(rate);
    for name in [
        "jfk.mp3",
        "jfk.m4a",
        "jfk-alac.m4a",
        "jfk.flac",
        "jfk.ogg",
        "jfk.aiff",
        "video.mp4",
        "video.mkv",
    ] {
        let (format, mono, end) = decode(&test_media(name));
        assert_eq!(end, SourceEvent::Ended, "{name}");
        let got = mono.len() as f64 / f64::from(format.rate_hz);
        assert!(
            (got - seconds).abs() < 0.15,
            "{name}: {got:.3} s of {seconds:.3} s"
        );
        let env = envelope(&mono, format.rate_hz);
        let r = similarity(&reference, &env);
        assert!(
            r > 0.97,
            "{name}: loudness over time correlates {r:.3} with the WAV's"
        );
    }
}

#[test]
fn issue38_02_bad_inputs_give_their_code_and_never_a_clean_end() {
    let code = |name: &str| open_file(&test_media(name), 0.0).err().map(|e| e.code());
    assert_eq!(code("jfk.opus"), Some("capture.unsupported-codec"));
    let opus = open_file(&test_media("jfk.opus"), 0.0)
        .err()
        .expect("refused");
    assert!(opus.to_string().contains("Opus"), "{opus}");
    assert_eq!(code("noaudio.mp4"), Some("capture.no-audio-track"));
    assert_eq!(code("empty.m4a"), Some("capture.unrecognized-file"));
    assert_eq!(code("notes.mp3"), Some("capture.unrecognized-file"));
    // An MP4 cut off before its index: damaged from the start.
    assert_eq!(code("cut.m4a"), Some("capture.input-damaged"));
    // The others give what came before the damage, then say it.
    for name in ["cut.mp3", "cut.flac", "damaged.mp3", "damaged.ogg"] {
        let (format, mono, end) = decode(&test_media(name));
        assert_eq!(end, SourceEvent::Error(SourceError::InputDamaged), "{name}");
        let seconds = mono.len() as f64 / f64::from(format.rate_hz);
        assert!(
            seconds > 1.0 && seconds < 10.0,
            "{name}: {seconds:.2} s before the damage"
        );
    }
}

fn transcribe(file: &Path, root: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_persyk"))
        .arg("transcribe")
        .arg(file)
        .args(["--provider", "local", "--model"])
        .arg(test_model())
        .arg("--root")
        .arg(root)
        .env("PERSYK_CONFIG", root.join("settings.json"))
        .output()
        .expect("persyk transcribe")
}

fn only_session(root: &Path) -> Vec<Value> {
    let dir = std::fs::read_dir(root)
        .expect("root")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("session.jsonl").is_file())
        .expect("a session");
    let check = Command::new(env!("CARGO_BIN_EXE_persyk"))
        .arg("check")
        .arg(&dir)
        .output()
        .expect("persyk check");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    std::fs::read_to_string(dir.join("session.jsonl"))
        .expect("session")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

#[test]
fn issue38_01_persyk_transcribe_reads_a_video_and_names_the_file_only() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = transcribe(&test_media("video.mkv"), tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let words = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(
        words.contains("ask not what your country can do for you"),
        "{words}"
    );
    let entries = only_session(tmp.path());
    let source = entries
        .iter()
        .find(|e| e["customType"] == "persyk.source-file")
        .expect("the source entry");
    assert_eq!(source["data"], serde_json::json!({"name": "video.mkv"}));
    let all = serde_json::to_string(&entries).expect("json");
    assert!(
        !all.contains("test-media"),
        "no folder of the disk in the session"
    );
    let finished = entries
        .iter()
        .find(|e| e["type"] == "recording.finished")
        .expect("finished");
    assert_eq!(finished["outcome"], "complete");
}

#[test]
fn issue38_02_a_cut_off_file_keeps_its_words_and_a_named_gap() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = transcribe(&test_media("cut.mp3"), tmp.path());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("capture.input-damaged"));
    let words = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(words.contains("my fellow americans"), "{words}");
    let entries = only_session(tmp.path());
    let finished = entries
        .iter()
        .find(|e| e["type"] == "recording.finished")
        .expect("finished");
    assert_eq!(finished["outcome"], "incomplete");
    assert_eq!(finished["gaps"][0]["reason"], "capture.input-damaged");
    assert!(
        finished["gaps"][0]["startMs"]
            .as_u64()
            .is_some_and(|ms| ms > 1000)
    );
}
