//! The voice-activity segmenter on real synthetic speech: espeak-ng phrases, converted to
//! 24 kHz by the capture converter and separated by pauses over a noise bed, come out as one
//! utterance per phrase, each covering its phrase.
//!
//! Needs `espeak-ng` (installed by `scripts/setup`).

mod support;

use persyk::audio::segment::{EndReason, SegmentEvent, Segmenter, SegmenterConfig, Utterance};

const RATE: u32 = 24_000;

/// Deterministic noise at about -66 dBFS RMS.
struct Bed(u64);

impl Bed {
    fn next(&mut self) -> i16 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % 33) as i16 - 16
    }
}

#[test]
fn espeak_phrases_separated_by_pauses_are_one_utterance_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let phrases = [
        "Persyk keeps every word you say.",
        "The second sentence has a comma, and then it goes on a little longer.",
        "Done.",
    ];
    let mut bed = Bed(7);
    let mut recording: Vec<i16> = Vec::new();
    let mut silence = |rec: &mut Vec<i16>, ms: u32| {
        for _ in 0..RATE * ms / 1000 {
            rec.push(bed.next());
        }
    };
    // The voiced extent of each phrase inside the recording.
    let mut extents = Vec::new();
    silence(&mut recording, 800);
    for (i, text) in phrases.iter().enumerate() {
        let speech = support::espeak_as_recorded(dir.path(), &format!("phrase-{i}"), text);
        let first = speech
            .iter()
            .position(|s| s.unsigned_abs() > 300)
            .expect("voiced");
        let last = speech
            .iter()
            .rposition(|s| s.unsigned_abs() > 300)
            .expect("voiced");
        let base = recording.len() as u64;
        extents.push((base + first as u64, base + last as u64 + 1));
        recording.extend_from_slice(&speech);
        silence(&mut recording, 1_300);
    }

    let mut seg = Segmenter::new(SegmenterConfig::for_rate(RATE));
    let mut events = Vec::new();
    for chunk in recording.chunks(2_400) {
        seg.push(chunk, &mut events);
    }
    seg.finish(&mut events);
    let utterances: Vec<Utterance> = events
        .iter()
        .filter_map(|e| match e {
            SegmentEvent::Ended(u) => Some(*u),
            SegmentEvent::Started { .. } => None,
        })
        .collect();

    assert_eq!(
        utterances.len(),
        phrases.len(),
        "{utterances:?} vs {extents:?}"
    );
    for (u, (first, last)) in utterances.iter().zip(&extents) {
        assert_eq!(u.reason, EndReason::Pause, "{u:?}");
        assert!(
            u.start_sample <= *first,
            "{u:?} starts after its phrase {first}"
        );
        assert!(u.end_sample >= *last, "{u:?} ends before its phrase {last}");
        // At least the 100 ms a Realtime commit needs.
        assert!(u.duration_samples() >= u64::from(RATE) / 10, "{u:?}");
    }
}
