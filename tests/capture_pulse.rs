//! A real microphone capture on Linux, through cpal's native PulseAudio host.
//!
//! The test starts a private PulseAudio server (its own runtime directory, anonymous auth, a
//! null sink `vsink`), makes `vsink.monitor` the default source, plays speech made with
//! `espeak-ng` into `vsink` with `paplay`, captures the default input through
//! [`CpalSource`], converts it to 24 kHz mono, and checks that what was captured correlates
//! with what was played (normalized cross-correlation peak over lags > 0.5), not merely that
//! it is non-zero. The server is killed at the end, whatever happens.
//!
//! `live_turns_from_real_speech` plays three espeak-ng phrases separated by pauses into the
//! null sink while the real pipeline records the default input with `gpt-live-transcribe`
//! against the fake provider: one client commit per phrase, each at least 100 ms, and the
//! transcripts in speech order.
//!
//! Needs `pulseaudio`, `pulseaudio-utils` (pactl, paplay) and `espeak-ng`; fails with what to
//! install when they are missing, unless `PERSYK_SKIP_PULSE=1`. Run it alone with
//! `scripts/test-pulse` or `cargo test --test capture_pulse -- --nocapture`.

#![cfg(all(feature = "app", target_os = "linux"))]

mod support;

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use persyk::audio::convert::{Converter, OUTPUT_RATE_HZ, i16_to_f32, i32_to_f32, u16_to_f32};
use persyk::capture::source::{
    AudioSource, CpalSource, EVENT_QUEUE_DEPTH, FileSource, Silence, SilenceDetector, SourceEvent,
    input_devices,
};
use support::pulse::{PulseServer, missing_tools};

/// The tests of this binary set `PULSE_SERVER` for cpal: one at a time.
static PULSE: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    PULSE.lock().unwrap_or_else(PoisonError::into_inner)
}

const SPEECH: &str = "Persyk dictation check. One, two, three, four.";

/// Whole-file conversion to 24 kHz mono.
fn to_24k(rate_hz: u32, channels: u16, frames: &[f32]) -> Vec<f32> {
    let mut c = Converter::new(rate_hz, channels).unwrap();
    let mut out = Vec::new();
    c.push(frames, &mut out);
    c.flush(&mut out);
    out.into_iter().map(i16_to_f32).collect()
}

/// Energy per 10 ms frame.
fn envelope(x: &[f32]) -> Vec<f64> {
    x.chunks(240)
        .map(|c| c.iter().map(|&s| f64::from(s).powi(2)).sum())
        .collect()
}

/// Normalized cross-correlation of `reference` against `captured` at `lag` (captured offset),
/// over the overlap.
fn ncc_at(reference: &[f32], captured: &[f32], lag: usize) -> f64 {
    let n = reference.len().min(captured.len().saturating_sub(lag));
    let (mut xy, mut xx, mut yy) = (0.0f64, 0.0f64, 0.0f64);
    for i in 0..n {
        let x = f64::from(reference[i]);
        let y = f64::from(captured[lag + i]);
        xy += x * y;
        xx += x * x;
        yy += y * y;
    }
    if xx == 0.0 || yy == 0.0 {
        0.0
    } else {
        xy / (xx * yy).sqrt()
    }
}

/// The peak normalized cross-correlation over lags: a coarse search on 10 ms energy envelopes,
/// then every sample lag within ±40 ms of the best envelope lag.
fn ncc_peak(reference: &[f32], captured: &[f32]) -> (f64, usize) {
    let er = envelope(reference);
    let ec = envelope(captured);
    let mut best_frame = 0;
    let mut best = f64::MIN;
    for k in 0..ec.len().saturating_sub(er.len() / 2) {
        let (mut xy, mut yy) = (0.0, 0.0);
        for (i, &r) in er.iter().enumerate() {
            let c = ec.get(k + i).copied().unwrap_or(0.0);
            xy += r * c;
            yy += c * c;
        }
        let score = if yy > 0.0 { xy / yy.sqrt() } else { 0.0 };
        if score > best {
            best = score;
            best_frame = k;
        }
    }
    let centre = best_frame * 240;
    let lo = centre.saturating_sub(960);
    let hi = (centre + 960).min(captured.len());
    (lo..hi)
        .map(|lag| (ncc_at(reference, captured, lag), lag))
        .fold((f64::MIN, 0), |a, b| if b.0 > a.0 { b } else { a })
}

#[test]
fn captures_what_pulseaudio_plays() {
    // The sample helpers agree with cpal's own conversions (what CpalSource uses).
    {
        use cpal::Sample as _;
        for s in [i16::MIN, -12_345, -1, 0, 1, 777, i16::MAX] {
            assert_eq!(s.to_sample::<f32>(), i16_to_f32(s));
        }
        for s in [0u16, 1, 32_767, 32_768, 40_000, u16::MAX] {
            assert_eq!(s.to_sample::<f32>(), u16_to_f32(s));
        }
        for s in [i32::MIN, -(1 << 20), 0, 1 << 30, i32::MAX] {
            assert!((s.to_sample::<f32>() - i32_to_f32(s)).abs() <= f32::EPSILON);
        }
    }

    let _serial = serial();
    if std::env::var("PERSYK_SKIP_PULSE").as_deref() == Ok("1") {
        eprintln!("capture_pulse: skipped (PERSYK_SKIP_PULSE=1)");
        return;
    }
    let missing = missing_tools();
    assert!(
        missing.is_empty(),
        "capture_pulse needs {} on PATH: install them with \
         `apt-get install -y pulseaudio pulseaudio-utils espeak-ng` \
         (CI does, through scripts/setup), or set PERSYK_SKIP_PULSE=1 to skip this test",
        missing.join(", ")
    );

    let dir = tempfile::tempdir().unwrap();
    let server = PulseServer::start(dir.path());
    // cpal's PulseAudio host finds the server through the environment; the tests of this
    // binary hold PULSE while they use it, so nothing reads it concurrently.
    unsafe {
        std::env::set_var("PULSE_SERVER", server.server_env());
    }
    server
        .pactl(&["set-default-source", "vsink.monitor"])
        .expect("set-default-source");

    let speech = dir.path().join("speech.wav");
    let status = Command::new("espeak-ng")
        .arg("-w")
        .arg(&speech)
        .arg(SPEECH)
        .status()
        .unwrap();
    assert!(status.success(), "espeak-ng failed");

    let host = cpal::default_host();
    eprintln!("cpal host: {:?}", host.id());
    assert_eq!(
        host.id(),
        cpal::HostId::PulseAudio,
        "cpal should pick its PulseAudio host when PULSE_SERVER is reachable"
    );
    let devices = input_devices();
    eprintln!("input devices: {devices:?}");
    assert!(!devices.is_empty());

    assert_eq!(
        CpalSource::open(Some("no-such-device-persyk"))
            .unwrap_err()
            .code(),
        "capture.device-not-found"
    );
    // By backend id as well as by display name.
    let by_id = CpalSource::open(Some("vsink.monitor")).expect("open vsink.monitor");
    drop(by_id);

    let mut source = CpalSource::open(None).expect("open the default input");
    let format = source.format();
    eprintln!(
        "default input: {:?}, {format:?}, {}",
        source.device_name(),
        source.sample_format()
    );
    let mut converter = Converter::new(format.rate_hz, format.channels).unwrap();
    let mut silence = SilenceDetector::new();
    let (tx, rx) = sync_channel(EVENT_QUEUE_DEPTH);
    source.start(tx).expect("start capture");
    let started = Instant::now();

    let mut captured = Vec::new();
    let mut player: Option<Child> = None;
    let mut played_at = None;
    let mut player_done = None;
    let mut overruns = 0;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(SourceEvent::Frames(frames)) => {
                let before = captured.len();
                converter.push(&frames, &mut captured);
                silence.feed(&captured[before..]);
            }
            Ok(SourceEvent::Error(e)) => {
                assert!(!e.is_fatal(), "capture failed: {e}");
                overruns += 1;
            }
            Ok(SourceEvent::Ended) => panic!("a microphone does not end"),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => panic!("capture stopped by itself"),
        }
        let now = started.elapsed();
        silence.poll(now);
        if player.is_none() && now >= Duration::from_millis(300) {
            player = Some(
                server
                    .command("paplay")
                    .args(["--device=vsink", "--latency-msec=100"])
                    .arg(&speech)
                    .spawn()
                    .expect("paplay"),
            );
            played_at = Some(now);
        }
        if player_done.is_none()
            && let Some(p) = player.as_mut()
            && let Ok(Some(status)) = p.try_wait()
        {
            assert!(status.success(), "paplay failed");
            player_done = Some(now);
        }
        let finished = player_done.is_some_and(|t| now >= t + Duration::from_millis(300));
        if finished || now >= Duration::from_secs(12) {
            break;
        }
    }
    let capture_wall = started.elapsed();
    source.stop();
    // Anything still queued, then the channel closes.
    while let Ok(event) = rx.recv_timeout(Duration::from_secs(2)) {
        if let SourceEvent::Frames(frames) = event {
            converter.push(&frames, &mut captured);
        }
    }
    converter.flush(&mut captured);
    if let Some(mut p) = player {
        let _ = p.kill();
        let _ = p.wait();
    }
    let captured: Vec<f32> = captured.into_iter().map(i16_to_f32).collect();
    eprintln!(
        "captured {:.2} s, playback started at {played_at:?}, ended at {player_done:?}, {overruns} overrun reports",
        captured.len() as f64 / f64::from(OUTPUT_RATE_HZ)
    );
    assert!(player_done.is_some(), "paplay did not finish in time");
    // Nothing was dropped on the way: the audio covers the wall-clock time of the capture
    // (less the stream's start-up and the last callback period).
    let captured_s = captured.len() as f64 / f64::from(OUTPUT_RATE_HZ);
    assert!(
        captured_s > capture_wall.as_secs_f64() - 0.25
            && captured_s < capture_wall.as_secs_f64() + 0.25,
        "captured {captured_s:.2} s of audio in {capture_wall:?}"
    );
    assert_eq!(silence.verdict(), Silence::Sound, "speech was not heard");

    // The reference: the played file, through the same converter.
    let mut file = FileSource::open(&speech, 0.0).unwrap();
    let file_format = file.format();
    let (tx, rx) = sync_channel(64);
    file.start(tx).unwrap();
    let mut played = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
            SourceEvent::Frames(f) => played.extend(f),
            SourceEvent::Ended => break,
            SourceEvent::Error(e) => panic!("{e}"),
        }
    }
    let reference = to_24k(file_format.rate_hz, file_format.channels, &played);

    let (peak, lag) = ncc_peak(&reference, &captured);
    eprintln!(
        "normalized cross-correlation peak {peak:.3} at lag {:.1} ms",
        lag as f64 * 1000.0 / f64::from(OUTPUT_RATE_HZ)
    );
    assert!(
        peak > 0.5,
        "captured audio does not match what was played (peak {peak:.3})"
    );
    drop(server);
}

#[test]
fn live_turns_from_real_speech() {
    use persyk::pipeline::{self, SourceKind};
    use persyk::realtime::fake::{self, Scenario};
    use persyk::session::store::Roots;
    use persyk::session::{LeafSelector, Store};

    let _serial = serial();
    if std::env::var("PERSYK_SKIP_PULSE").as_deref() == Ok("1") {
        eprintln!("capture_pulse: skipped (PERSYK_SKIP_PULSE=1)");
        return;
    }
    let missing = missing_tools();
    assert!(
        missing.is_empty(),
        "capture_pulse needs {}",
        missing.join(", ")
    );
    let dir = tempfile::tempdir().unwrap();
    let server = PulseServer::start(dir.path());
    unsafe {
        std::env::set_var("PULSE_SERVER", server.server_env());
    }
    server
        .pactl(&["set-default-source", "vsink.monitor"])
        .expect("set-default-source");
    let phrases = [
        "Persyk listens now",
        "the second phrase follows",
        "and this is the last one",
    ];
    let wavs: Vec<PathBuf> = phrases
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let path = dir.path().join(format!("phrase{i}.wav"));
            let ok = Command::new("espeak-ng")
                .arg("-w")
                .arg(&path)
                .arg(text)
                .status()
                .unwrap()
                .success();
            assert!(ok, "espeak-ng failed");
            path
        })
        .collect();

    let rt = support::runtime();
    let scenario = Scenario::from_json(
        r#"{"name": "pulse-live", "connections": [{"utterances": [
            {"end_ms": 1, "transcript": "Persyk listens now.", "delay_ms": 300},
            {"end_ms": 2, "transcript": "The second phrase follows.", "delay_ms": 300},
            {"end_ms": 3, "transcript": "And this is the last one.", "delay_ms": 300}]}]}"#,
    )
    .unwrap();
    let fake = rt.block_on(fake::spawn(scenario)).expect("fake binds");
    let roots = Roots::new(dir.path().join("sessions"), Vec::new()).unwrap();
    let store = Store::new(roots);
    let handle = store.create_session().unwrap();
    let continuation = handle.continuation(&LeafSelector::Default).unwrap();
    // A fresh install's provider settings: gpt-live-transcribe, client turns.
    let mut settings = persyk::settings::Settings::default().provider().unwrap();
    settings.base_url = format!("ws://{}/v1", fake.addr);
    assert_eq!(settings.transcription_model, "gpt-live-transcribe");

    let source = CpalSource::open(None).expect("open the default input");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let recording = rt.spawn(pipeline::record(
        continuation,
        settings,
        "sk-test-pulse-0000000000000000".into(),
        Box::new(source),
        SourceKind::Live,
        stop_rx,
    ));
    // Pauses of 1.2 s: longer than the turn rule's 600 ms, shorter than the 2 s of digital
    // silence that halts a live capture.
    std::thread::sleep(Duration::from_millis(500));
    for wav in &wavs {
        let ok = server
            .command("paplay")
            .args(["--device=vsink", "--latency-msec=50"])
            .arg(wav)
            .status()
            .expect("paplay")
            .success();
        assert!(ok, "paplay failed");
        std::thread::sleep(Duration::from_millis(1_200));
    }
    stop_tx.send(true).unwrap();
    let transcription = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(30), recording).await })
        .expect("the recording stops in time")
        .expect("the recording task")
        .expect("the recording runs");
    fake.shutdown();
    let log = rt
        .block_on(fake.finish(Duration::from_secs(5)))
        .expect("the fake finishes");

    // One commit per phrase, each with at least 100 ms of audio.
    let mut commits = Vec::new();
    let mut pending = 0usize;
    for e in log.connections[0].received() {
        match e["type"].as_str() {
            Some("input_audio_buffer.append") => {
                use base64::Engine as _;
                pending += base64::engine::general_purpose::STANDARD
                    .decode(e["audio"].as_str().unwrap_or(""))
                    .unwrap()
                    .len();
            }
            Some("input_audio_buffer.commit") => commits.push(std::mem::take(&mut pending)),
            _ => {}
        }
    }
    eprintln!(
        "live_turns_from_real_speech: {} commits for {} phrases, ms {:?}, halted {:?}",
        commits.len(),
        phrases.len(),
        commits.iter().map(|b| b / 48).collect::<Vec<_>>(),
        transcription.halted
    );
    assert_eq!(transcription.halted, None);
    assert_eq!(commits.len(), phrases.len(), "one commit per phrase");
    assert!(commits.iter().all(|&b| b >= 4_800), "{commits:?}");
    assert!(log.connections[0].sent().all(|e| {
        e["type"] != "error"
            && !e["type"]
                .as_str()
                .unwrap_or("")
                .starts_with("input_audio_buffer.speech_")
    }));
    assert_eq!(
        transcription.report.transcript(),
        [
            "Persyk listens now.",
            "The second phrase follows.",
            "And this is the last one."
        ]
    );
    assert!(transcription.report.complete);
    drop(server);
}
