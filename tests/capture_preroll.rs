//! Pre-roll: a warm input hands a recording the last ≤ 500 ms before it started, then the live
//! frames, with no gap and no repeat.

mod support;

use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use persyk::audio::convert::f32_to_i16;
use persyk::capture::preroll::{MAX_PRE_ROLL, WarmInput};
use persyk::capture::source::{AudioSource, FileSource, SourceEvent};

#[test]
fn recording_starts_with_the_last_half_second_and_stays_contiguous() {
    let tmp = tempfile::tempdir().expect("tmp");
    let path = tmp.path().join("ramp.wav");
    // Each sample encodes its own position, so order and gaps are visible.
    let input: Vec<i16> = (0..24_000 * 4).map(|i| (i % 30_000) as i16).collect();
    support::write_wav_24k(&path, &input);

    let source = FileSource::open(&path, 1.0).expect("file source");
    let warm = WarmInput::start(Box::new(source), Duration::from_secs(2)).expect("warm");
    std::thread::sleep(Duration::from_millis(1200));
    let held = warm.held_frames();
    assert!(held <= 12_000, "never more than 500 ms held ({held})");
    assert!(held >= 11_000, "the ring is full after a second ({held})");
    assert_eq!(MAX_PRE_ROLL, Duration::from_millis(500));

    let mut rec = warm.recording_source();
    let (tx, rx) = sync_channel(1024);
    rec.start(tx).expect("start recording");
    let mut got: Vec<i16> = Vec::new();
    let mut first_event = None;
    let until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < until {
        if let Ok(SourceEvent::Frames(f)) = rx.recv_timeout(Duration::from_millis(50)) {
            first_event.get_or_insert(f.len());
            got.extend(f.iter().map(|&x| f32_to_i16(x)));
        }
    }
    rec.stop();
    let first = first_event.expect("some audio");
    assert!(
        (11_000..=12_000).contains(&first),
        "first event is the pre-roll ({first} frames)"
    );
    assert!(
        got.len() > first + 10_000,
        "live frames follow ({} total)",
        got.len()
    );
    let start = input
        .iter()
        .position(|&s| s == got[0])
        .expect("from the input");
    assert_eq!(
        &got[..],
        &input[start..start + got.len()],
        "contiguous: no gap, no repeat"
    );
    warm.stop();
}
