//! The capture converter (any rate / channels → 24 kHz mono PCM16), the file source, and the
//! silence detector. Runs without the `app` feature:
//! `cargo test --no-default-features --test capture_convert`.

use std::path::Path;
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::{Duration, Instant};

use persyk::audio::convert::{
    ConvertError, Converter, OUTPUT_RATE_HZ, ResamplerKind, extend_pcm16_le, f32_to_i16,
    i16_to_f32, i32_to_f32, int_to_f32, u16_to_f32,
};
use persyk::capture::source::{
    AudioSource, FileSource, Silence, SilenceDetector, SourceError, SourceEvent, SourceFormat,
};

const OUT: f64 = OUTPUT_RATE_HZ as f64;

/// `frames` frames of a sine at `freq_hz`, the same on every channel.
fn sine(freq_hz: f64, rate_hz: u32, frames: usize, channels: usize, amp: f64) -> Vec<f32> {
    let mut v = Vec::with_capacity(frames * channels);
    for n in 0..frames {
        let s = (amp * (2.0 * std::f64::consts::PI * freq_hz * n as f64 / f64::from(rate_hz)).sin())
            as f32;
        for _ in 0..channels {
            v.push(s);
        }
    }
    v
}

/// Runs `input` through a fresh converter in pushes of `push_frames` frames, then flushes.
fn convert(rate_hz: u32, channels: u16, input: &[f32], push_frames: usize) -> Vec<i16> {
    let mut c = Converter::new(rate_hz, channels).unwrap();
    let mut out = Vec::new();
    for chunk in input.chunks(push_frames * usize::from(channels)) {
        c.push(chunk, &mut out);
    }
    c.flush(&mut out);
    out
}

fn expected_len(frames: usize, rate_hz: u32) -> usize {
    (frames as f64 * OUT / f64::from(rate_hz)).round() as usize
}

/// Goertzel power of `x` (24 kHz) at `freq_hz`.
fn goertzel(x: &[i16], freq_hz: f64) -> f64 {
    let w = 2.0 * std::f64::consts::PI * freq_hz / OUT;
    let coeff = 2.0 * w.cos();
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for &v in x {
        let s = f64::from(v) + coeff * s1 - s2;
        s2 = s1;
        s1 = s;
    }
    s1 * s1 + s2 * s2 - coeff * s1 * s2
}

/// Frequency by counting sign changes over the middle of `x` (24 kHz), ignoring the edges.
fn zero_crossing_hz(x: &[i16]) -> f64 {
    let edge = x.len() / 10;
    let mid = &x[edge..x.len() - edge];
    let crossings = mid.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count();
    crossings as f64 / 2.0 / (mid.len() as f64 / OUT)
}

fn rms(x: &[i16]) -> f64 {
    (x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / x.len() as f64).sqrt()
}

/// Asserts `out` carries a sine at `freq_hz`: the zero-crossing estimate within 0.5 %, the
/// Goertzel power at the frequency 1000× that at ±10 %, and the expected RMS within 2 %.
fn assert_sine(out: &[i16], freq_hz: f64, amp: f64) {
    let est = zero_crossing_hz(out);
    assert!(
        (est - freq_hz).abs() / freq_hz < 0.005,
        "estimated {est:.1} Hz, expected {freq_hz} Hz"
    );
    let edge = out.len() / 10;
    let mid = &out[edge..out.len() - edge];
    let at = goertzel(mid, freq_hz);
    for off in [0.9, 1.1] {
        let side = goertzel(mid, freq_hz * off);
        assert!(
            at > 1000.0 * side,
            "power at {freq_hz} Hz ({at:.3e}) not ≫ at {:.0} Hz ({side:.3e})",
            freq_hz * off
        );
    }
    let want = amp * 32768.0 / 2f64.sqrt();
    let got = rms(mid);
    assert!(
        (got - want).abs() / want < 0.02,
        "rms {got:.1}, expected {want:.1}"
    );
}

#[test]
fn resamples_44k1_stereo_f32() {
    let frames = 44_100 * 3;
    let input = sine(1000.0, 44_100, frames, 2, 0.5);
    let c = Converter::new(44_100, 2).unwrap();
    assert!(matches!(
        c.resampler_kind(),
        ResamplerKind::Fft {
            block_in: 882,
            block_out: 480
        }
    ));
    let out = convert(44_100, 2, &input, 512);
    assert_eq!(out.len(), expected_len(frames, 44_100));
    assert_sine(&out, 1000.0, 0.5);
}

#[test]
fn resamples_48k_mono_i16() {
    let frames = 48_000 * 2 + 123;
    let pcm: Vec<i16> = sine(440.0, 48_000, frames, 1, 0.8)
        .iter()
        .map(|&s| f32_to_i16(s))
        .collect();
    let input: Vec<f32> = pcm.iter().map(|&s| i16_to_f32(s)).collect();
    let out = convert(48_000, 1, &input, 480);
    assert_eq!(out.len(), expected_len(frames, 48_000));
    assert_sine(&out, 440.0, 0.8);
}

#[test]
fn resamples_16k_mono_up_without_images() {
    let frames = 16_000 * 2;
    let input = sine(1500.0, 16_000, frames, 1, 0.5);
    let out = convert(16_000, 1, &input, 160);
    assert_eq!(out.len(), expected_len(frames, 16_000));
    assert_sine(&out, 1500.0, 0.5);
    // Upsampling must not create the image at 16000 − 1500 = 14.5 kHz, which would fold to
    // 24000 − 14500 = 9.5 kHz.
    let edge = out.len() / 10;
    let mid = &out[edge..out.len() - edge];
    assert!(goertzel(mid, 1500.0) > 1e6 * goertzel(mid, 9500.0));
}

#[test]
fn downsampling_removes_content_above_12_khz() {
    // 15 kHz at 48 kHz would alias to 9 kHz at 24 kHz without the anti-aliasing filter.
    let frames = 48_000;
    let input = sine(15_000.0, 48_000, frames, 1, 0.5);
    let out = convert(48_000, 1, &input, 1000);
    let edge = out.len() / 10;
    let peak = out[edge..out.len() - edge]
        .iter()
        .map(|&s| i32::from(s).abs())
        .max()
        .unwrap();
    assert!(peak < 40, "15 kHz leaked through as {peak}");
}

#[test]
fn odd_rate_uses_sinc_and_keeps_length_and_pitch() {
    let rate = 44_099;
    let frames = rate as usize * 2;
    assert!(matches!(
        Converter::new(rate, 1).unwrap().resampler_kind(),
        ResamplerKind::Sinc { .. }
    ));
    let input = sine(700.0, rate, frames, 1, 0.5);
    let out = convert(rate, 1, &input, 333);
    assert_eq!(out.len(), expected_len(frames, rate));
    assert_sine(&out, 700.0, 0.5);
}

#[test]
fn opposite_stereo_channels_cancel() {
    let mono = sine(440.0, 48_000, 48_000, 1, 0.9);
    let mut input = Vec::with_capacity(mono.len() * 2);
    for s in &mono {
        input.push(*s);
        input.push(-*s);
    }
    let out = convert(48_000, 2, &input, 1024);
    assert_eq!(out.len(), 24_000);
    assert!(out.iter().all(|&s| s.abs() <= 1), "downmix left a residue");
}

#[test]
fn passthrough_at_24k_is_exact() {
    // Every i16 value, in a scrambled order, through f32 and back.
    let pcm: Vec<i16> = (0..65_536u32)
        .map(|i| (i.wrapping_mul(40_503) % 65_536) as u16 as i16)
        .collect();
    let input: Vec<f32> = pcm.iter().map(|&s| i16_to_f32(s)).collect();
    let c = Converter::new(24_000, 1).unwrap();
    assert_eq!(c.resampler_kind(), ResamplerKind::Passthrough);
    for push in [1, 7, 10_000, 65_536] {
        assert_eq!(convert(24_000, 1, &input, push), pcm, "push size {push}");
    }
    // Stereo with equal channels downmixes to the same samples.
    let stereo: Vec<f32> = input.iter().flat_map(|&s| [s, s]).collect();
    assert_eq!(convert(24_000, 2, &stereo, 7), pcm);
    // And the bytes are PCM16 LE.
    let mut bytes = Vec::new();
    extend_pcm16_le(&pcm[..3], &mut bytes);
    let want: Vec<u8> = pcm[..3].iter().flat_map(|s| s.to_le_bytes()).collect();
    assert_eq!(bytes, want);
}

#[test]
fn push_size_does_not_change_output() {
    // The resampler always sees the same blocks, so the output is bit-identical however the
    // input is split (tolerance: none).
    let cases: [(u32, u16, f64); 5] = [
        (44_100, 2, 1000.0),
        (48_000, 1, 440.0),
        (16_000, 1, 1500.0),
        (48_000, 6, 300.0),
        (44_099, 1, 700.0),
    ];
    for (rate, ch, f) in cases {
        let frames = rate as usize + 4321;
        let input = sine(f, rate, frames, usize::from(ch), 0.5);
        let whole = convert(rate, ch, &input, frames);
        assert_eq!(whole.len(), expected_len(frames, rate));
        for push in [1, 7, 10_000] {
            assert_eq!(
                convert(rate, ch, &input, push),
                whole,
                "{rate} Hz × {ch}, push {push}"
            );
        }
    }
}

#[test]
fn partial_frames_are_carried_between_pushes() {
    let input = sine(500.0, 48_000, 9_600, 2, 0.5);
    let whole = convert(48_000, 2, &input, 9_600);
    // Pushes of 3 samples split frames in half every other time.
    let mut c = Converter::new(48_000, 2).unwrap();
    let mut out = Vec::new();
    for chunk in input.chunks(3) {
        c.push(chunk, &mut out);
    }
    c.flush(&mut out);
    assert_eq!(out, whole);
}

#[test]
fn output_lines_up_with_input_time() {
    // A click at 1.0 s comes out at sample 24,000 (the resampler delay is trimmed).
    for (rate, ch) in [(48_000u32, 1u16), (44_100, 2), (16_000, 1), (44_099, 1)] {
        let frames = rate as usize * 2;
        let mut input = vec![0.0f32; frames * usize::from(ch)];
        for c in 0..usize::from(ch) {
            input[rate as usize * usize::from(ch) + c] = 0.9;
        }
        let out = convert(rate, ch, &input, 256);
        let peak = out
            .iter()
            .enumerate()
            .max_by_key(|(_, s)| s.abs())
            .unwrap()
            .0;
        assert!(
            (peak as i64 - 24_000).abs() <= 1,
            "{rate} Hz: click at {peak}, expected 24000"
        );
    }
}

#[test]
fn flush_resets_for_a_new_stream() {
    let a = sine(440.0, 44_100, 30_000, 1, 0.5);
    let b = sine(880.0, 44_100, 20_000, 1, 0.5);
    let mut c = Converter::new(44_100, 1).unwrap();
    let mut first = Vec::new();
    c.push(&a, &mut first);
    c.flush(&mut first);
    assert_eq!(c.frames_in(), 0);
    let mut second = Vec::new();
    c.push(&b, &mut second);
    c.flush(&mut second);
    assert_eq!(first, convert(44_100, 1, &a, 30_000));
    assert_eq!(second, convert(44_100, 1, &b, 20_000));
}

#[test]
fn empty_stream_flushes_to_nothing() {
    let mut c = Converter::new(48_000, 2).unwrap();
    let mut out = Vec::new();
    c.flush(&mut out);
    assert!(out.is_empty());
}

#[test]
fn rejects_unsupported_formats() {
    for (rate, ch) in [
        (0, 1),
        (48_000, 0),
        (1_000, 1),
        (2_000_000, 2),
        (48_000, 65),
    ] {
        let err = Converter::new(rate, ch).unwrap_err();
        assert_eq!(err.code(), "capture.unsupported-format");
        assert!(matches!(err, ConvertError::UnsupportedFormat { .. }));
        assert!(err.to_string().starts_with("capture.unsupported-format:"));
    }
}

#[test]
fn sample_helpers() {
    for s in i16::MIN..=i16::MAX {
        assert_eq!(f32_to_i16(i16_to_f32(s)), s);
    }
    assert_eq!(f32_to_i16(2.0), i16::MAX);
    assert_eq!(f32_to_i16(-2.0), i16::MIN);
    assert_eq!(f32_to_i16(f32::NAN), 0);
    assert_eq!(u16_to_f32(32_768), 0.0);
    assert_eq!(u16_to_f32(0), -1.0);
    assert_eq!(f32_to_i16(u16_to_f32(65_535)), i16::MAX);
    assert_eq!(i32_to_f32(i32::MIN), -1.0);
    assert_eq!(i32_to_f32(0), 0.0);
    assert_eq!(i32_to_f32(1 << 30), 0.5);
    assert_eq!(int_to_f32(-128, 8), -1.0);
    assert_eq!(int_to_f32(1 << 22, 24), 0.5);
    assert_eq!(int_to_f32(-16_384, 16), i16_to_f32(-16_384));
}

// ---------------------------------------------------------------------------------------------
// File source

/// Drains `rx` until `Ended`, returning the frames; panics on an error event or a stall.
fn collect(rx: &Receiver<SourceEvent>) -> Vec<f32> {
    let mut all = Vec::new();
    loop {
        match rx
            .recv_timeout(Duration::from_secs(10))
            .expect("source stalled")
        {
            SourceEvent::Frames(f) => all.extend(f),
            SourceEvent::Ended => return all,
            SourceEvent::Error(e) => panic!("source error: {e}"),
        }
    }
}

fn write_wav(path: &Path, spec: hound::WavSpec, samples: &[f32]) {
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    match spec.sample_format {
        hound::SampleFormat::Float => {
            for &s in samples {
                w.write_sample(s).unwrap();
            }
        }
        hound::SampleFormat::Int => {
            let scale = f64::from(1u32 << (spec.bits_per_sample - 1));
            for &s in samples {
                let v = (f64::from(s) * scale).round().min(scale - 1.0) as i32;
                if spec.bits_per_sample == 8 {
                    w.write_sample(v as i8).unwrap();
                } else {
                    w.write_sample(v).unwrap();
                }
            }
        }
    }
    w.finalize().unwrap();
}

#[test]
fn file_source_reads_any_wav() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // (rate, channels, bits, format)
        (44_100u32, 2u16, 16u16, hound::SampleFormat::Int),
        (48_000, 1, 24, hound::SampleFormat::Int),
        (22_050, 2, 32, hound::SampleFormat::Float),
        (16_000, 1, 8, hound::SampleFormat::Int),
        (96_000, 3, 32, hound::SampleFormat::Int),
    ];
    for (i, (rate, ch, bits, fmt)) in cases.into_iter().enumerate() {
        let spec = hound::WavSpec {
            channels: ch,
            sample_rate: rate,
            bits_per_sample: bits,
            sample_format: fmt,
        };
        let frames = rate as usize + 17;
        let input = sine(600.0, rate, frames, usize::from(ch), 0.5);
        let path = dir.path().join(format!("in{i}.wav"));
        write_wav(&path, spec, &input);

        let mut src = FileSource::open(&path, 0.0).unwrap();
        assert_eq!(
            src.format(),
            SourceFormat {
                rate_hz: rate,
                channels: ch
            }
        );
        assert_eq!(src.len_frames(), Some(frames as u64));
        let (tx, rx) = sync_channel(4);
        src.start(tx).unwrap();
        let got = collect(&rx);
        src.stop();
        assert!(rx.recv().is_err(), "channel disconnects after stop");
        assert_eq!(got.len(), input.len(), "{bits}-bit {fmt:?}");
        let tolerance = 1.0 / f64::from(1u32 << (bits.min(24) - 1));
        for (a, b) in got.iter().zip(&input) {
            assert!(
                (f64::from(*a) - f64::from(*b)).abs() <= tolerance,
                "{bits}-bit {fmt:?}: {a} vs {b}"
            );
        }
        // And through the converter: the pitch survives.
        let out = convert(rate, ch, &got, 480);
        assert_eq!(out.len(), expected_len(frames, rate));
        let est = zero_crossing_hz(&out);
        assert!((est - 600.0).abs() < 6.0, "{bits}-bit: {est} Hz");
    }
}

#[test]
fn file_source_paces_at_the_realtime_factor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one-second.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 24_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    write_wav(&path, spec, &sine(300.0, 24_000, 24_000, 1, 0.3));
    let mut src = FileSource::open(&path, 4.0).unwrap();
    let (tx, rx) = sync_channel(256);
    let started = Instant::now();
    src.start(tx).unwrap();
    assert_eq!(collect(&rx).len(), 24_000);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(230) && took < Duration::from_secs(3),
        "1 s at 4× took {took:?}"
    );
}

#[test]
fn file_source_stops_while_the_receiver_is_not_reading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.wav");
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 48_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    write_wav(&path, spec, &sine(300.0, 48_000, 48_000 * 5, 2, 0.3));
    let mut src = FileSource::open(&path, 0.0).unwrap();
    let (tx, rx) = sync_channel(1);
    src.start(tx).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    src.stop();
    assert!(t.elapsed() < Duration::from_secs(1));
    // One queued event at most, then the channel is closed.
    let mut n = 0;
    while rx.recv().is_ok() {
        n += 1;
    }
    assert!(n <= 1);
    assert_eq!(
        src.start(sync_channel(1).0).unwrap_err().code(),
        "capture.already-started"
    );
}

#[test]
fn file_source_errors_have_codes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not.wav");
    std::fs::write(&path, b"this is not a wav file at all").unwrap();
    assert_eq!(
        FileSource::open(&path, 0.0).unwrap_err().code(),
        "capture.input-unreadable"
    );
    assert_eq!(
        FileSource::open(&dir.path().join("missing.wav"), 0.0)
            .unwrap_err()
            .code(),
        "capture.input-unreadable"
    );
    // A truncated data chunk: the frames that are there, then an error or the end.
    let good = dir.path().join("good.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 24_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    write_wav(&good, spec, &sine(300.0, 24_000, 2_400, 1, 0.3));
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.wav");
    std::fs::write(&cut, &bytes[..bytes.len() - 1001]).unwrap();
    let mut src = FileSource::open(&cut, 0.0).unwrap();
    let (tx, rx) = sync_channel(64);
    src.start(tx).unwrap();
    let mut frames = 0;
    let last = loop {
        match rx.recv_timeout(Duration::from_secs(5)).unwrap() {
            SourceEvent::Frames(f) => frames += f.len(),
            other => break other,
        }
    };
    assert!(frames < 2_400);
    assert!(
        matches!(
            last,
            SourceEvent::Error(SourceError::InputUnreadable) | SourceEvent::Ended
        ),
        "{last:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Silence

#[test]
fn silence_detector() {
    // Two seconds of digital zeros: silent.
    let mut d = SilenceDetector::new();
    assert_eq!(d.feed(&vec![0; 47_999]), Silence::Undecided);
    assert_eq!(d.error(), None);
    assert_eq!(d.feed(&[0, 0]), Silence::Silent);
    assert_eq!(d.error().unwrap().code(), "capture.silent-input");
    // The verdict is final.
    assert_eq!(d.feed(&[1000; 10]), Silence::Silent);

    // A single non-zero sample inside the window: sound.
    let mut d = SilenceDetector::new();
    let mut x = vec![0i16; 48_000];
    x[47_999] = -1;
    assert_eq!(d.feed(&x), Silence::Sound);
    assert_eq!(d.poll(Duration::from_secs(10)), Silence::Sound);
    assert_eq!(d.error(), None);

    // Sound after the window does not rescue it.
    let mut d = SilenceDetector::new();
    let mut x = vec![0i16; 48_001];
    x[48_000] = 5000;
    assert_eq!(d.feed(&x), Silence::Silent);

    // No callbacks at all: silent once two seconds have passed.
    let mut d = SilenceDetector::new();
    assert_eq!(d.poll(Duration::from_millis(1999)), Silence::Undecided);
    assert_eq!(d.poll(Duration::from_secs(2)), Silence::Silent);
    assert!(!d.error().unwrap().is_fatal());

    // Through the converter: a zero input at 48 kHz stereo stays exactly zero.
    let mut c = Converter::new(48_000, 2).unwrap();
    let mut out = Vec::new();
    c.push(&vec![0.0; 48_000 * 2 * 2], &mut out);
    c.flush(&mut out);
    assert_eq!(out.len(), 48_000);
    assert_eq!(SilenceDetector::new().feed(&out), Silence::Silent);
}
