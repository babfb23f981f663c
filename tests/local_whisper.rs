//! On-device recognition with a real Whisper model (tiny.en, built offline from registry
//! packages by `scripts/fetch-test-model`, which `scripts/setup` runs).
//!
//! Human speech (jfk.wav, 16 kHz) goes through the capture converter to the 24 kHz PCM16 that
//! Persyk records, then through the recognizer, and must come back word for word; silence and
//! noise must come back as no speech; broken model files must be refused with a code.
#![cfg(feature = "local")]

mod support;

use persyk::local::whisper::LocalModel;
use persyk::local::{LocalOptions, Verdict};
use support::test_model_dir;

fn model() -> LocalModel {
    let path = test_model_dir().join("ggml-tiny.en.bin");
    assert!(
        path.exists(),
        "the test model is missing: run scripts/fetch-test-model (scripts/setup does)"
    );
    LocalModel::load(&path).expect("tiny.en loads")
}

fn options() -> LocalOptions {
    LocalOptions {
        threads: 2,
        language: Some("en".into()),
    }
}

/// jfk.wav as Persyk records it: 24 kHz mono PCM16.
fn jfk_24k() -> Vec<i16> {
    support::wav_as_recorded(&test_model_dir().join("jfk.wav"))
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric() || *c == '\'')
                .collect::<String>()
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word error rate: word-level edit distance over the reference length.
fn wer(reference: &str, hypothesis: &str) -> f64 {
    let (r, h) = (words(reference), words(hypothesis));
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for i in 1..=r.len() {
        let mut cur = vec![i; h.len() + 1];
        for j in 1..=h.len() {
            let sub = prev[j - 1] + usize::from(r[i - 1] != h[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[h.len()] as f64 / r.len().max(1) as f64
}

const JFK: &str = "And so my fellow Americans, ask not what your country can do for you, \
                   ask what you can do for your country.";

#[test]
fn jfk_comes_back_word_for_word() {
    let model = model();
    assert!(!model.is_multilingual());
    let mut recognizer = model.recognizer(options()).expect("state");
    let Verdict::Text(text) = recognizer.transcribe(&jfk_24k()).expect("transcribe") else {
        panic!("speech judged as none");
    };
    let error = wer(JFK, &text);
    assert!(error <= 0.05, "WER {error}: {text:?}");
}

#[test]
fn silence_and_noise_are_no_speech() {
    let model = model();
    let mut recognizer = model.recognizer(options()).expect("state");
    let silence = vec![0i16; 24_000 * 3];
    let mut seed = 1u64;
    let noise: Vec<i16> = (0..24_000 * 3)
        .map(|_| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            ((seed >> 33) % 201) as i16 - 100
        })
        .collect();
    for (name, audio) in [("silence", silence), ("noise", noise)] {
        // Whatever the model alone makes of it (with timestamps off it said "you" to
        // silence), the guarded path must say no speech.
        let raw = recognizer.recognize(&audio).expect("recognize");
        eprintln!("{name}: the model alone says {raw:?}");
        let verdict = recognizer.transcribe(&audio).expect("transcribe");
        assert_eq!(verdict, Verdict::NoSpeech, "{name}");
    }
}

#[test]
fn broken_model_files_are_refused_with_a_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = std::fs::read(test_model_dir().join("ggml-tiny.en.bin")).expect("model");
    let truncated = dir.path().join("truncated.bin");
    std::fs::write(&truncated, &real[..real.len() / 2]).expect("write");
    let garbage = dir.path().join("garbage.bin");
    std::fs::write(&garbage, b"<!doctype html><title>404</title>").expect("write");
    for path in [truncated, garbage, dir.path().join("missing.bin")] {
        let err = LocalModel::load(&path).expect_err("refused");
        assert!(
            ["local.model-invalid", "local.model-missing"].contains(&err.code()),
            "{path:?}: {}",
            err.code()
        );
    }
}

#[test]
fn the_word_error_rate_helper_counts_edits() {
    assert_eq!(wer("a b c d", "a b c d"), 0.0);
    assert_eq!(wer("a b c d", "a x c"), 0.5);
    assert_eq!(wer("Ask, not!", "ask not"), 0.0);
}
