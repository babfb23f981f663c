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

/// Each clip of the CI subset through Persyk's on-device path (`pace` 0: as fast as the
/// file reads, `persyk transcribe FILE --provider local`; 1: in real time, a live
/// dictation stopped at the clip's end) beside one whole-file call on the same model: the
/// recording is complete, its WER against the transcript is at most 0.02 above the
/// whole-file call's (against the whole-file call's text, where the clip has no transcript,
/// at most `untranscribed`), and it has no loop the whole-file call has not. Returns the
/// clips below that bar.
#[cfg(feature = "local")]
fn below_the_bar(names: Option<&[&str]>, pace: f64, untranscribed: f64) -> Vec<String> {
    use persyk::local::options_for;
    use persyk::local::whisper::{self, LocalModel};
    use persyk::pipeline::{self, Recognition, RecordOptions, SamplesSource, SourceKind};
    use persyk::session::{LeafSelector, Store, store::Roots};
    use std::time::Duration;

    let mut clips = corpus::clips(Set::Ci);
    if let Some(names) = names {
        clips.retain(|c| names.contains(&c.name()));
    }
    if clips.is_empty() {
        eprintln!("skipping: the corpus was not fetched (scripts/fetch-corpus)");
        return Vec::new();
    }
    let model_path = support::test_model();
    let model = LocalModel::load(&model_path).expect("tiny.en");
    let options = options_for(None, true);
    let ctx = corpus::whole_file_context(&model_path);
    let rt = support::runtime();
    let mut failures = Vec::new();
    for clip in &clips {
        let whole = corpus::whole_file_text(&ctx, &clip.samples, options.threads, Some("en"));
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(Roots::new(dir.path().to_path_buf(), Vec::new()).expect("roots"));
        let continuation = store
            .create_session()
            .and_then(|h| h.continuation(&LeafSelector::Default))
            .expect("session");
        let setup =
            whisper::setup(&model, options.clone(), Duration::from_secs(600)).expect("setup");
        let kind = if pace > 0.0 {
            SourceKind::Live
        } else {
            SourceKind::Replay
        };
        let t = rt
            .block_on(async {
                let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
                let recording = tokio::spawn(pipeline::record_to(
                    continuation,
                    Recognition::Local(setup),
                    Box::new(SamplesSource::new(clip.samples.clone(), pace)),
                    kind,
                    stop_rx,
                    RecordOptions::default(),
                ));
                if pace > 0.0 {
                    // The user stops at the clip's end.
                    tokio::time::sleep(Duration::from_secs_f64(clip.seconds() / pace)).await;
                    let _ = stop_tx.send(true);
                }
                let t = recording.await.expect("task");
                drop(stop_tx);
                t
            })
            .expect("recording");
        let ours = t.report.transcript().join(" ");
        let (wer, bound) = match clip.reference() {
            Some(reference) => (
                support::wer(reference, &ours),
                support::wer(reference, &whole) + 0.02,
            ),
            None => (support::wer(&whole, &ours), untranscribed),
        };
        let extra_loops = corpus::loops(&ours).saturating_sub(corpus::loops(&whole));
        eprintln!(
            "{} (pace {pace}): WER {wer:.3} (bound {bound:.3}), loops {extra_loops}, complete {}\n  ours:  {ours}\n  whole: {whole}",
            clip.name(),
            t.report.complete
        );
        if wer > bound || extra_loops > 0 || !t.report.complete {
            failures.push(clip.name().to_owned());
        }
    }
    failures
}

/// Issue #22: on-device recognition hears every word of real speech. Each clip of the CI
/// subset (real human speech: numbers with pauses, a spontaneous meeting, speech from the
/// first 40 ms in steady noise) through the path of `persyk transcribe FILE --provider
/// local` is as accurate as one whole-file call ([`below_the_bar`]).
#[cfg(feature = "local")]
#[test]
fn issue22_01_every_ci_clip_is_recognized_as_well_as_one_whole_file_call() {
    let _turn = support::whisper_turn();
    let failures = below_the_bar(None, 0.0, 0.25);
    assert!(failures.is_empty(), "clips below the bar: {failures:?}");
}

/// Issue #22, the live path: speech from the first 30–40 ms (one in steady noise 10 dB
/// under it), dictated in real time and stopped at the end (windows decoded while the user
/// speaks and ahead of pauses), is as accurate as one whole-file call on the same samples.
/// (cards-pauses is left to the bench here: tiny.en hears "clubs" or "clothes" depending on
/// where a live window starts, which depends on the machine's load.)
#[cfg(feature = "local")]
#[test]
fn issue22_02_a_live_dictation_is_recognized_as_well_as_one_whole_file_call() {
    let _turn = support::whisper_turn();
    let failures = below_the_bar(Some(&["start-noisy", "goforward-start"]), 1.0, 0.25);
    assert!(failures.is_empty(), "clips below the bar: {failures:?}");
}
