//! Playback through a real output device on Linux: cpal's native PulseAudio host.
//!
//! A private PulseAudio server (its own runtime directory, anonymous auth) has one null sink,
//! `vsink`, the default output. A recording's range is read from a session's WAV asset
//! (`audio::clip`) and played with the app's real [`OutputPlayer`] while `parec` records
//! `vsink.monitor`; what the sink received must be that range: about its length of sound at
//! its tone's frequency (the WAV holds a different tone before and after it), and the player
//! must say it is playing, then idle. The server is killed at the end, whatever happens.
//!
//! Needs `pulseaudio` and `pulseaudio-utils` (pactl, parec); fails with what to install when
//! they are missing, unless `PERSYK_SKIP_PULSE=1` (then it says it skipped).

#![cfg(all(feature = "app", target_os = "linux"))]

mod support;

use std::time::{Duration, Instant};

use persyk::app::playback::{OutputPlayer, Player, PlayerState};
use persyk::audio::clip::{ClipRequest, Span, read_clip};
use persyk::session::format::MsRange;
use support::pulse::PulseServer;

const RATE: u32 = 24_000;

/// `seconds` of `hz` at 24 kHz.
fn tone(hz: f64, seconds: f64) -> Vec<i16> {
    (0..(seconds * f64::from(RATE)) as usize)
        .map(|i| {
            ((i as f64 * hz * std::f64::consts::TAU / f64::from(RATE)).sin() * 12_000.0) as i16
        })
        .collect()
}

/// Zero crossings per second of `x` (twice its frequency for a pure tone).
fn frequency(x: &[i16], rate: u32) -> f64 {
    let crossings = x.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count();
    crossings as f64 / 2.0 / (x.len() as f64 / f64::from(rate))
}

#[test]
fn a_range_plays_through_the_default_output() {
    if std::env::var("PERSYK_SKIP_PULSE").as_deref() == Ok("1") {
        eprintln!("playback_pulse: skipped (PERSYK_SKIP_PULSE=1)");
        return;
    }
    let missing = support::pulse::missing(&["pulseaudio", "pactl", "parec"]);
    assert!(
        missing.is_empty(),
        "playback_pulse needs {} on PATH: install them with \
         `apt-get install -y pulseaudio pulseaudio-utils` (CI does, through scripts/setup), \
         or set PERSYK_SKIP_PULSE=1 to skip this test",
        missing.join(", ")
    );

    // A recording: 1 s at 300 Hz, 1.5 s at 700 Hz, 1 s at 300 Hz. The range is the middle.
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session");
    std::fs::create_dir_all(session.join("assets")).unwrap();
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(session.join("assets/rec.wav"), spec).unwrap();
    for s in [tone(300.0, 1.0), tone(700.0, 1.5), tone(300.0, 1.0)].concat() {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
    let range = ClipRequest {
        asset: "rec.wav".into(),
        span: Span::Ms(MsRange {
            start_ms: 1_000,
            end_ms: 2_500,
        }),
    };
    let clip = read_clip(&session, &range, u64::MAX).unwrap();
    assert_eq!(clip.samples.len(), 36_000);

    let server = PulseServer::start(&dir.path().join("pulse"));
    // cpal's PulseAudio host finds the server through the environment; this binary's only
    // test sets it before any thread of its own reads it.
    unsafe {
        std::env::set_var("PULSE_SERVER", server.server_env());
    }
    server
        .pactl(&["set-default-sink", "vsink"])
        .expect("set-default-sink");
    // The recorder is attached before anything plays.
    let monitor = server.record_monitor(&dir.path().join("monitor.raw"));
    assert_eq!(
        cpal::default_host().id(),
        cpal::HostId::PulseAudio,
        "cpal should pick its PulseAudio host when PULSE_SERVER is reachable"
    );
    let started = Instant::now();
    let mut player = OutputPlayer::new(|| {});
    player.play(clip.samples.clone(), clip.sample_rate);
    let mut seen_playing = false;
    // A guard against hangs only (never a performance threshold).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match player.state() {
            PlayerState::Playing { length_ms, .. } => {
                assert_eq!(length_ms, 1_500);
                seen_playing = true;
            }
            PlayerState::Idle => break,
            PlayerState::Failed(e) => panic!("{e}\n{}", server.log_text()),
        }
        assert!(Instant::now() < deadline, "playback did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("played for {:?}", started.elapsed());
    assert!(seen_playing, "the player never said it was playing");
    std::thread::sleep(Duration::from_millis(500));
    let heard = monitor.finish();
    drop(player);

    // The stretch with sound: from the first to the last sample above a quarter of the tone.
    let loud = |s: &i16| s.unsigned_abs() > 3_000;
    let first = heard
        .iter()
        .position(loud)
        .expect("the sink received no sound");
    let last = heard.len() - heard.iter().rev().position(loud).unwrap_or(0);
    let sound = &heard[first..last];
    let seconds = sound.len() as f64 / f64::from(RATE);
    eprintln!(
        "recorded {:.2} s, sound for {seconds:.3} s at {:.0} Hz",
        heard.len() as f64 / f64::from(RATE),
        frequency(sound, RATE)
    );
    assert!(
        (1.4..=1.6).contains(&seconds),
        "the sink received {seconds:.3} s of sound, not the range's 1.5 s"
    );
    let hz = frequency(sound, RATE);
    assert!(
        (680.0..=720.0).contains(&hz),
        "the sink received {hz:.0} Hz, not the range's 700 Hz tone"
    );
}
