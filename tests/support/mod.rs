//! Helpers shared by test files (declared with `mod support;`). Each file uses a part of
//! them, so unused items are expected per test binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use persyk::capture::convert::Converter;

/// Where `scripts/fetch-test-model` keeps the tiny.en model and jfk.wav.
pub fn test_model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-model")
}

/// A WAV file as Persyk records it: through the capture converter to 24 kHz mono PCM16.
pub fn wav_as_recorded(path: &Path) -> Vec<i16> {
    let mut reader =
        hound::WavReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let spec = reader.spec();
    let frames: Vec<f32> = reader
        .samples::<i16>()
        .map(|s| f32::from(s.expect("sample")) / 32768.0)
        .collect();
    let mut conv = Converter::new(spec.sample_rate, spec.channels).expect("converter");
    let mut out = Vec::new();
    conv.push(&frames, &mut out);
    conv.flush(&mut out);
    out
}

/// `text` spoken by espeak-ng into `dir/name.wav`, as Persyk records it.
pub fn espeak_as_recorded(dir: &Path, name: &str, text: &str) -> Vec<i16> {
    let path = dir.join(format!("{name}.wav"));
    let status = std::process::Command::new("espeak-ng")
        .arg("-w")
        .arg(&path)
        .arg(text)
        .status()
        .expect("espeak-ng missing: run scripts/setup (apt-get install -y espeak-ng)");
    assert!(status.success(), "espeak-ng failed");
    wav_as_recorded(&path)
}
