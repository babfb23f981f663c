//! Capture CPU cost per second of audio, beside the WAV write alone from the same run.
//!
//! A synthetic recording (default 10 minutes; `PERSYK_BENCH_CAPTURE_SECONDS`) is processed as
//! fast as possible in 10 ms callback-sized pushes, the way the microphone delivers it:
//!
//! 1. the capture path: convert (48 kHz stereo f32 → 24 kHz mono i16, rubato FFT) + WAV write
//!    (hound into a temp file, flushed every 250 ms of audio; with `PERSYK_BENCH_FSYNC=1` also
//!    fsynced) + base64 of each 100 ms chunk for the socket;
//! 2. the same at 44.1 kHz stereo;
//! 3. convert alone (48 kHz stereo);
//! 4. baseline: the WAV write alone of the same 24 kHz mono output.
//!
//! Each figure is CPU time (from `/proc/self/stat` utime+stime, 10 ms ticks) and wall time per
//! second of audio, as a percentage of one core. The target for (1) is < 2 %.
//!
//! Run: `cargo bench --bench capture`. Nothing is asserted.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use persyk::audio::convert::{Converter, OUTPUT_RATE_HZ, ResamplerKind, extend_pcm16_le};

/// Samples per provider chunk (100 ms at 24 kHz), as `pipeline::CHUNK_SAMPLES`.
const CHUNK_SAMPLES: usize = OUTPUT_RATE_HZ as usize / 10;
/// WAV flush cadence in output samples (250 ms).
const FLUSH_SAMPLES: usize = OUTPUT_RATE_HZ as usize / 4;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Process CPU time (user + system) so far.
fn cpu_time(ticks_per_second: f64) -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesized command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_secs_f64(ticks as f64 / ticks_per_second)
}

/// One second of interleaved input: a chord plus a little noise, different on each channel.
fn one_second(rate_hz: u32, channels: usize) -> Vec<f32> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut v = Vec::with_capacity(rate_hz as usize * channels);
    for n in 0..rate_hz as usize {
        let t = n as f64 / f64::from(rate_hz);
        for c in 0..channels {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let noise = (seed >> 40) as f64 / (1u64 << 24) as f64 - 0.5;
            let s = 0.3 * (2.0 * std::f64::consts::PI * 220.0 * (c + 1) as f64 * t).sin()
                + 0.2 * (2.0 * std::f64::consts::PI * 1375.0 * t).sin()
                + 0.02 * noise;
            v.push(s as f32);
        }
    }
    v
}

struct Figure {
    cpu: Duration,
    wall: Duration,
    audio_s: f64,
    out_bytes: u64,
}

impl Figure {
    fn line(&self, label: &str) {
        let cpu_pct = self.cpu.as_secs_f64() / self.audio_s * 100.0;
        let wall_pct = self.wall.as_secs_f64() / self.audio_s * 100.0;
        println!(
            "  {label:<44} cpu {:>7.3} s  wall {:>7.3} s  → {cpu_pct:>6.3} % of a core (wall {wall_pct:>6.3} %)  {:.1} MB written",
            self.cpu.as_secs_f64(),
            self.wall.as_secs_f64(),
            self.out_bytes as f64 / 1e6
        );
    }
}

fn wav_writer(path: &Path) -> hound::WavWriter<BufWriter<File>> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: OUTPUT_RATE_HZ,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    hound::WavWriter::new(BufWriter::new(File::create(path).unwrap()), spec).unwrap()
}

/// The capture WAV: 24 kHz mono PCM16, flushed (header sizes current) every 250 ms of audio.
struct WavSink {
    wav: hound::WavWriter<BufWriter<File>>,
    file: File,
    fsync: bool,
    since_flush: usize,
    written: u64,
}

impl WavSink {
    fn new(path: &Path, fsync: bool) -> WavSink {
        let wav = wav_writer(path);
        let file = File::open(path).unwrap();
        WavSink {
            wav,
            file,
            fsync,
            since_flush: 0,
            written: 0,
        }
    }

    fn write(&mut self, samples: &[i16]) {
        // Per sample, as `pipeline::transcribe_samples` writes.
        for &s in samples {
            self.wav.write_sample(s).unwrap();
        }
        self.since_flush += samples.len();
        self.written += samples.len() as u64;
        if self.since_flush >= FLUSH_SAMPLES {
            self.since_flush = 0;
            self.wav.flush().unwrap();
            if self.fsync {
                self.file.sync_data().unwrap();
            }
        }
    }

    fn finish(self) -> u64 {
        self.wav.finalize().unwrap();
        self.written * 2 + 44
    }
}

/// The capture path (`convert`: also convert; `wav`: also write; `b64`: also encode).
fn run(
    dir: &Path,
    rate_hz: u32,
    channels: u16,
    seconds: u64,
    (convert, wav, b64): (bool, bool, bool),
    ticks: f64,
) -> Figure {
    let input = one_second(rate_hz, usize::from(channels));
    let push = rate_hz as usize / 100 * usize::from(channels);
    // For the WAV-only baseline: the converted output of that second, written as is.
    let mut converted_second = Vec::new();
    {
        let mut c = Converter::new(rate_hz, channels).unwrap();
        c.push(&input, &mut converted_second);
        c.flush(&mut converted_second);
    }
    let baseline_push = OUTPUT_RATE_HZ as usize / 100;
    let path = dir.join(format!("bench-{rate_hz}-{convert}-{wav}-{b64}.wav"));
    let fsync = env_u64("PERSYK_BENCH_FSYNC", 0) == 1;
    let mut sink = wav.then(|| WavSink::new(&path, fsync));
    let mut converter = Converter::new(rate_hz, channels).unwrap();
    let mut out: Vec<i16> = Vec::with_capacity(4096);
    let mut chunk: Vec<i16> = Vec::with_capacity(CHUNK_SAMPLES * 2);
    let mut pcm: Vec<u8> = Vec::with_capacity(CHUNK_SAMPLES * 2);
    let mut encoded = String::with_capacity(CHUNK_SAMPLES * 3);
    let mut b64_bytes = 0u64;

    let cpu0 = cpu_time(ticks);
    let t0 = Instant::now();
    for _ in 0..seconds {
        if convert {
            for block in input.chunks(push) {
                out.clear();
                converter.push(block, &mut out);
                if let Some(s) = sink.as_mut() {
                    s.write(&out);
                }
                if b64 {
                    chunk.extend_from_slice(&out);
                    while chunk.len() >= CHUNK_SAMPLES {
                        pcm.clear();
                        extend_pcm16_le(&chunk[..CHUNK_SAMPLES], &mut pcm);
                        encoded.clear();
                        B64.encode_string(&pcm, &mut encoded);
                        b64_bytes += encoded.len() as u64;
                        chunk.drain(..CHUNK_SAMPLES);
                    }
                }
            }
        } else if let Some(s) = sink.as_mut() {
            for block in converted_second.chunks(baseline_push) {
                s.write(block);
            }
        }
    }
    out.clear();
    converter.flush(&mut out);
    if let Some(s) = sink.as_mut() {
        s.write(&out);
    }
    let out_bytes = sink.map_or(0, WavSink::finish);
    let wall = t0.elapsed();
    let cpu = cpu_time(ticks).saturating_sub(cpu0);
    std::hint::black_box(b64_bytes);
    let _ = std::fs::remove_file(&path);
    Figure {
        cpu,
        wall,
        audio_s: seconds as f64,
        out_bytes,
    }
}

fn main() {
    let seconds = env_u64("PERSYK_BENCH_CAPTURE_SECONDS", 600);
    let ticks = clock_ticks_per_second();
    let dir = tempfile::tempdir().unwrap();
    let kind = |rate| Converter::new(rate, 2).unwrap().resampler_kind();
    let describe = |k: ResamplerKind| match k {
        ResamplerKind::Fft {
            block_in,
            block_out,
        } => format!("rubato Fft, FixedSync::Both, {block_in} → {block_out} frames per call"),
        other => format!("{other:?}"),
    };
    println!(
        "capture bench: {seconds} s of synthetic audio per run, 10 ms pushes, WAV flush every 250 ms{}",
        if env_u64("PERSYK_BENCH_FSYNC", 0) == 1 {
            " + fsync"
        } else {
            ""
        }
    );
    println!("  48 kHz: {}", describe(kind(48_000)));
    println!("  44.1 kHz: {}", describe(kind(44_100)));

    let full = run(dir.path(), 48_000, 2, seconds, (true, true, true), ticks);
    full.line("convert + WAV + base64, 48 kHz stereo f32");
    let cd = run(dir.path(), 44_100, 2, seconds, (true, true, true), ticks);
    cd.line("convert + WAV + base64, 44.1 kHz stereo f32");
    let convert_only = run(dir.path(), 48_000, 2, seconds, (true, false, false), ticks);
    convert_only.line("convert only, 48 kHz stereo f32");
    let wav_only = run(dir.path(), 48_000, 2, seconds, (false, true, false), ticks);
    wav_only.line("baseline: WAV write alone (24 kHz mono i16)");
    let pct = full.cpu.as_secs_f64() / full.audio_s * 100.0;
    println!(
        "  48 kHz stereo capture path: {pct:.3} % of one core (target < 2 %), {:.2}× the WAV write alone",
        full.cpu.as_secs_f64() / wav_only.cpu.as_secs_f64().max(1e-9)
    );
}
