//! The speech corpus helpers (`tests/support/corpus.rs`): the manifest that
//! `scripts/fetch-corpus` writes, and the loop count the benches report. Skips the manifest
//! checks when the corpus was not fetched.

mod support;

use support::corpus::{self, Set};

#[test]
fn loops_counts_repeated_runs_not_natural_repetition() {
    assert_eq!(corpus::loops("five five"), 0);
    assert_eq!(corpus::loops("It is very, very clear."), 0);
    assert_eq!(corpus::loops("highway 123 123 123 123 123 123 123"), 6);
    assert_eq!(
        corpus::loops("We had a long discussion about. We had a long discussion about."),
        1
    );
    assert_eq!(corpus::loops("of clubs of clubs of clubs"), 2);
    assert_eq!(corpus::loops(""), 0);
}

#[test]
fn the_ci_subset_is_short_and_every_clip_is_described() {
    let entries = match corpus::manifest() {
        Ok(e) => e,
        Err(why) => {
            eprintln!("skipping: {why}");
            return;
        }
    };
    assert!(entries.len() >= 4, "{} clips", entries.len());
    let ci: f64 = entries.iter().filter(|e| e.ci).map(|e| e.seconds).sum();
    assert!((20.0..=60.0).contains(&ci), "CI subset: {ci:.1} s of audio");
    for e in &entries {
        assert!(e.wav.exists(), "{}", e.wav.display());
        assert!(
            e.speech_seconds > 0.0 && e.speech_seconds <= e.seconds,
            "{}",
            e.name
        );
        assert_eq!(e.sha256.len(), 64, "{}", e.name);
    }
    assert!(entries.iter().any(|e| e.reference.is_none()));
    let clips = corpus::clips(Set::Ci);
    assert_eq!(clips.len(), entries.iter().filter(|e| e.ci).count());
    for c in &clips {
        // 24 kHz as recorded, as long as the manifest says.
        assert!((c.seconds() - c.entry.seconds).abs() < 0.01, "{}", c.name());
        let speech: f64 = c.speech.iter().map(|(a, b)| b - a).sum();
        assert!(
            (speech - c.entry.speech_seconds).abs() < 0.01,
            "{}",
            c.name()
        );
        // Nothing sent: all its speech is missed; everything sent: none.
        assert!(
            (c.speech_outside(&[]) - speech).abs() < 1e-6,
            "{}",
            c.name()
        );
        let all = [(0, c.samples.len() as u64)];
        assert!(c.speech_outside(&all) < 1e-6, "{}", c.name());
    }
}
