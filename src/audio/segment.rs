//! Voice-activity segmentation: the one rule for where an utterance starts and ends.
//!
//! Client-side turns (Realtime models without server turn detection commit each turn
//! themselves) and on-device recognition (each utterance is recognized while the user keeps
//! talking) both cut the recording with this [`Segmenter`]. It sees the 24 kHz mono PCM16
//! samples the pipeline writes to the WAV asset, in order, in pushes of any size, and reports
//! utterances as sample ranges of that recording — so every consumer can turn a segment into
//! the WAV byte range it came from.
//!
//! The rule (all durations are [`SegmenterConfig`] fields; defaults in brackets):
//! - The signal is cut into frames [20 ms]; a frame's level is its RMS in dBFS.
//! - The noise floor is the quietest frame of the last [5 s] (a sliding minimum); a frame is
//!   *voiced* when it is [12 dB] above that floor and above an absolute gate [-50 dBFS]. Inside
//!   an utterance the threshold is [4 dB] lower (hysteresis), so soft word ends stay voiced.
//! - An utterance opens after [60 ms] of consecutive voiced frames (clicks and bumps shorter
//!   than that never open one) and starts [200 ms] before its first voiced frame (lead-in),
//!   never before the end of the previous utterance.
//! - It ends once [600 ms] pass without a voiced frame; the end is [200 ms] (hangover) after
//!   the last voiced frame, so word ends are kept.
//! - An utterance never exceeds [28 s]: at the limit it is cut at the quietest frame of its last
//!   [2 s], and the next utterance continues from exactly there (no sample is lost or doubled).
//! - [`Segmenter::finish`] closes an open utterance at the end of the audio.
//!
//! Invariants:
//! - The events depend only on the samples, never on how they were split into pushes.
//! - Utterances are reported in order and never overlap: each starts at or after the end of
//!   the one before, and ends at or before the last sample pushed.
//! - Memory is bounded by the configuration (two rings of frame levels), never by the length
//!   of the recording; a push allocates nothing but the events it reports.

use std::collections::VecDeque;

/// How the segmenter decides; see the module doc for the rule.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmenterConfig {
    pub rate_hz: u32,
    pub frame_ms: u32,
    /// Non-speech that ends an utterance.
    pub min_pause_ms: u32,
    /// Kept after the last voiced frame.
    pub hangover_ms: u32,
    /// Kept before the first voiced frame.
    pub lead_in_ms: u32,
    /// Consecutive voiced audio needed to open an utterance.
    pub onset_ms: u32,
    /// The longest utterance.
    pub max_utterance_ms: u32,
    /// How far back a cut at the length limit looks for the quietest frame.
    pub cut_search_ms: u32,
    /// The window of the noise floor's sliding minimum.
    pub floor_window_ms: u32,
    /// How far above the floor a frame must be to open or extend an utterance.
    pub speech_margin_db: f32,
    /// How much lower the threshold is while an utterance is open.
    pub hysteresis_db: f32,
    /// Frames quieter than this are never voiced, whatever the floor.
    pub absolute_gate_dbfs: f32,
}

impl SegmenterConfig {
    /// The defaults for `rate_hz` (Persyk records at 24 kHz).
    pub fn for_rate(rate_hz: u32) -> SegmenterConfig {
        SegmenterConfig {
            rate_hz,
            frame_ms: 20,
            min_pause_ms: 600,
            hangover_ms: 200,
            lead_in_ms: 200,
            onset_ms: 60,
            max_utterance_ms: 28_000,
            cut_search_ms: 2_000,
            floor_window_ms: 5_000,
            speech_margin_db: 12.0,
            hysteresis_db: 4.0,
            absolute_gate_dbfs: -50.0,
        }
    }

    fn frame_samples(&self) -> u64 {
        (u64::from(self.rate_hz) * u64::from(self.frame_ms.max(1)) / 1000).max(1)
    }

    fn frames(&self, ms: u32) -> usize {
        ms.div_ceil(self.frame_ms.max(1)) as usize
    }

    fn samples(&self, ms: u32) -> u64 {
        u64::from(self.rate_hz) * u64::from(ms) / 1000
    }
}

/// Why an utterance ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// A pause of at least `min_pause_ms`.
    Pause,
    /// The length limit; the next utterance starts where this one ends.
    MaxLength,
    /// The audio ended ([`Segmenter::finish`]).
    Finish,
}

/// One utterance, as sample indices of the recording (`start..end`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Utterance {
    pub start_sample: u64,
    pub end_sample: u64,
    /// Voiced audio inside it.
    pub voiced_ms: u64,
    /// The loudest frame, in dBFS.
    pub peak_dbfs: f32,
    pub reason: EndReason,
}

impl Utterance {
    pub fn duration_samples(&self) -> u64 {
        self.end_sample - self.start_sample
    }
}

/// An utterance still open ([`Segmenter::open_utterance`]), as sample indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenUtterance {
    pub start_sample: u64,
    /// End of its last voiced frame so far.
    pub last_voiced_end: u64,
    /// Where it ends if no voiced frame follows: the end of a pause ([`EndReason::Pause`])
    /// and of [`Segmenter::finish`] once the audio reaches it.
    pub hangover_end: u64,
    pub voiced_ms: u64,
}

/// What the segmenter reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SegmentEvent {
    /// An utterance opened; it starts at `start_sample` (lead-in included).
    Started { start_sample: u64 },
    /// The utterance that was open ended.
    Ended(Utterance),
}

/// An open utterance.
#[derive(Debug, Clone, Copy)]
struct Open {
    start_sample: u64,
    /// End of the last voiced frame.
    last_voiced_end: u64,
    voiced_frames: u64,
    peak_dbfs: f32,
}

/// The streaming segmenter. Push samples in order; collect events.
#[derive(Debug)]
pub struct Segmenter {
    config: SegmenterConfig,
    frame_samples: u64,
    /// Samples consumed so far (the index of the next sample).
    position: u64,
    /// The frame being filled.
    acc_sum_sq: f64,
    acc_len: u64,
    /// Monotonic deque of (frame index, level) for the sliding minimum.
    floor_window: VecDeque<(u64, f32)>,
    frame_index: u64,
    /// (frame end sample, level) of the most recent frames, for cuts at the length limit.
    recent: VecDeque<(u64, f32)>,
    /// Consecutive voiced frames while no utterance is open, and where the run began.
    onset_run: usize,
    onset_start: u64,
    onset_peak: f32,
    open: Option<Open>,
    /// End of the last utterance: the next one never starts before it.
    last_end: u64,
}

impl Segmenter {
    pub fn new(config: SegmenterConfig) -> Segmenter {
        let frame_samples = config.frame_samples();
        let floor_cap = config.frames(config.floor_window_ms) + 1;
        let recent_cap = config.frames(config.cut_search_ms) + 1;
        Segmenter {
            config,
            frame_samples,
            position: 0,
            acc_sum_sq: 0.0,
            acc_len: 0,
            floor_window: VecDeque::with_capacity(floor_cap),
            frame_index: 0,
            recent: VecDeque::with_capacity(recent_cap),
            onset_run: 0,
            onset_start: 0,
            onset_peak: f32::NEG_INFINITY,
            open: None,
            last_end: 0,
        }
    }

    pub fn config(&self) -> &SegmenterConfig {
        &self.config
    }

    /// Samples consumed so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Whether an utterance is open.
    pub fn in_utterance(&self) -> bool {
        self.open.is_some()
    }

    /// The open utterance as far as it goes, if one is open (read-only: a consumer may act
    /// on an utterance before it ends, e.g. recognize it speculatively during a pause).
    pub fn open_utterance(&self) -> Option<OpenUtterance> {
        self.open.map(|open| OpenUtterance {
            start_sample: open.start_sample,
            last_voiced_end: open.last_voiced_end,
            hangover_end: open.last_voiced_end + self.config.samples(self.config.hangover_ms),
            voiced_ms: open.voiced_frames * u64::from(self.config.frame_ms),
        })
    }

    /// The current noise floor estimate in dBFS (`None` before the first frame).
    pub fn noise_floor_dbfs(&self) -> Option<f32> {
        self.floor_window.front().map(|&(_, l)| l)
    }

    /// Consumes the next samples of the recording; events go to `out`.
    pub fn push(&mut self, samples: &[i16], out: &mut Vec<SegmentEvent>) {
        let mut rest = samples;
        while !rest.is_empty() {
            let want = (self.frame_samples - self.acc_len) as usize;
            let take = want.min(rest.len());
            for &s in &rest[..take] {
                let x = f64::from(s) / 32768.0;
                self.acc_sum_sq += x * x;
            }
            self.acc_len += take as u64;
            self.position += take as u64;
            rest = &rest[take..];
            if self.acc_len == self.frame_samples {
                let mean = self.acc_sum_sq / self.frame_samples as f64;
                let level = level_dbfs(mean);
                self.acc_sum_sq = 0.0;
                self.acc_len = 0;
                self.frame(level, out);
            }
        }
    }

    /// Ends the audio: an open utterance closes at its hangover (or the last sample).
    pub fn finish(&mut self, out: &mut Vec<SegmentEvent>) {
        if let Some(open) = self.open.take() {
            let end = (open.last_voiced_end + self.config.samples(self.config.hangover_ms))
                .min(self.position);
            out.push(SegmentEvent::Ended(self.close(
                open,
                end,
                EndReason::Finish,
            )));
        }
        self.onset_run = 0;
    }

    fn frame(&mut self, level: f32, out: &mut Vec<SegmentEvent>) {
        let frame_end = self.position;
        let frame_start = frame_end - self.frame_samples;
        // The sliding minimum over the floor window (this frame included).
        let window = self.config.frames(self.config.floor_window_ms) as u64;
        while self.floor_window.back().is_some_and(|&(_, l)| l >= level) {
            self.floor_window.pop_back();
        }
        self.floor_window.push_back((self.frame_index, level));
        while self
            .floor_window
            .front()
            .is_some_and(|&(i, _)| i + window <= self.frame_index)
        {
            self.floor_window.pop_front();
        }
        self.frame_index += 1;
        let floor = self.noise_floor_dbfs().unwrap_or(level);

        let recent_cap = self.config.frames(self.config.cut_search_ms);
        if self.recent.len() == recent_cap {
            self.recent.pop_front();
        }
        self.recent.push_back((frame_end, level));

        let margin = if self.open.is_some() {
            self.config.speech_margin_db - self.config.hysteresis_db
        } else {
            self.config.speech_margin_db
        };
        let voiced = level >= self.config.absolute_gate_dbfs && level >= floor + margin;

        match self.open.as_mut() {
            Some(open) => {
                if voiced {
                    open.last_voiced_end = frame_end;
                    open.voiced_frames += 1;
                    open.peak_dbfs = open.peak_dbfs.max(level);
                }
                let open = *open;
                if frame_end - open.last_voiced_end >= self.config.samples(self.config.min_pause_ms)
                {
                    self.open = None;
                    let end = open.last_voiced_end + self.config.samples(self.config.hangover_ms);
                    out.push(SegmentEvent::Ended(self.close(open, end, EndReason::Pause)));
                } else if frame_end - open.start_sample
                    >= self.config.samples(self.config.max_utterance_ms)
                {
                    self.cut_at_limit(open, out);
                }
            }
            None if voiced => {
                if self.onset_run == 0 {
                    self.onset_start = frame_start;
                    self.onset_peak = level;
                }
                self.onset_run += 1;
                self.onset_peak = self.onset_peak.max(level);
                if self.onset_run >= self.config.frames(self.config.onset_ms) {
                    let start = self
                        .onset_start
                        .saturating_sub(self.config.samples(self.config.lead_in_ms))
                        .max(self.last_end);
                    self.open = Some(Open {
                        start_sample: start,
                        last_voiced_end: frame_end,
                        voiced_frames: self.onset_run as u64,
                        peak_dbfs: self.onset_peak,
                    });
                    self.onset_run = 0;
                    out.push(SegmentEvent::Started {
                        start_sample: start,
                    });
                }
            }
            None => self.onset_run = 0,
        }
    }

    /// Closes `open` at the quietest recent frame and opens its continuation there.
    fn cut_at_limit(&mut self, open: Open, out: &mut Vec<SegmentEvent>) {
        // The quietest frame of the search window that lies inside the utterance; its end is
        // the cut. Ties go to the latest frame, so the first part is as long as possible.
        let cut = self
            .recent
            .iter()
            .filter(|&&(end, _)| end > open.start_sample)
            .fold(None::<(u64, f32)>, |best, &(end, level)| match best {
                Some((_, l)) if l < level => best,
                _ => Some((end, level)),
            })
            .map_or(self.position, |(end, _)| end);
        let continues_voiced = open.last_voiced_end > cut;
        let first = Open {
            last_voiced_end: open.last_voiced_end.min(cut),
            ..open
        };
        out.push(SegmentEvent::Ended(self.close(
            first,
            cut,
            EndReason::MaxLength,
        )));
        let voiced_after = self.recent.iter().filter(|&&(end, _)| end > cut).count() as u64;
        self.open = Some(Open {
            start_sample: cut,
            last_voiced_end: if continues_voiced {
                open.last_voiced_end
            } else {
                cut
            },
            voiced_frames: voiced_after.min(open.voiced_frames),
            peak_dbfs: self
                .recent
                .iter()
                .filter(|&&(end, _)| end > cut)
                .map(|&(_, l)| l)
                .fold(f32::NEG_INFINITY, f32::max),
        });
        out.push(SegmentEvent::Started { start_sample: cut });
    }

    fn close(&mut self, open: Open, end: u64, reason: EndReason) -> Utterance {
        let end = end.min(self.position).max(open.start_sample);
        self.last_end = end;
        Utterance {
            start_sample: open.start_sample,
            end_sample: end,
            voiced_ms: open.voiced_frames * u64::from(self.config.frame_ms),
            peak_dbfs: open.peak_dbfs,
            reason,
        }
    }
}

/// The level of a frame whose mean square (of samples in -1..1) is `mean_square`.
fn level_dbfs(mean_square: f64) -> f32 {
    // -120 dBFS stands for digital silence (log of zero).
    (10.0 * mean_square.max(1e-12).log10()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: u32 = 24_000;

    /// A deterministic signal builder: noise at a floor plus "speech" bursts.
    struct Signal {
        samples: Vec<i16>,
        seed: u64,
    }

    impl Signal {
        fn new() -> Signal {
            Signal {
                samples: Vec::new(),
                seed: 0x9e37_79b9_7f4a_7c15,
            }
        }

        fn noise_sample(&mut self) -> f64 {
            self.seed = self
                .seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.seed >> 33) as f64 / f64::from(1u32 << 31)) * 2.0 - 1.0
        }

        /// `ms` of noise at `dbfs` (RMS of uniform noise is amplitude/√3).
        fn noise(mut self, ms: u32, dbfs: f64) -> Signal {
            let amp = 10f64.powf(dbfs / 20.0) * 3f64.sqrt();
            for _ in 0..RATE as u64 * u64::from(ms) / 1000 {
                let v = self.noise_sample() * amp;
                self.samples.push((v * 32767.0) as i16);
            }
            self
        }

        /// `ms` of a 220 Hz tone at `dbfs` RMS over a -60 dBFS noise bed.
        fn tone(mut self, ms: u32, dbfs: f64) -> Signal {
            let amp = 10f64.powf(dbfs / 20.0) * 2f64.sqrt();
            let bed = 10f64.powf(-60.0 / 20.0) * 3f64.sqrt();
            let start = self.samples.len();
            for i in 0..RATE as usize * ms as usize / 1000 {
                let t = (start + i) as f64 / f64::from(RATE);
                let v = amp * (2.0 * std::f64::consts::PI * 220.0 * t).sin()
                    + self.noise_sample() * bed;
                self.samples.push((v.clamp(-1.0, 1.0) * 32767.0) as i16);
            }
            self
        }

        /// Speech-like: syllables of 240 ms separated by 80 ms dips, for `ms`.
        fn syllables(mut self, ms: u32) -> Signal {
            let mut left = ms;
            while left > 0 {
                let on = left.min(240);
                self = self.tone(on, -22.0);
                left -= on;
                let off = left.min(80);
                self = self.noise(off, -60.0);
                left -= off;
            }
            self
        }

        /// These samples followed by `ms` more of the -60 dBFS noise.
        fn clone_samples_with_noise(&self, ms: u32) -> Vec<i16> {
            Signal {
                samples: self.samples.clone(),
                seed: self.seed,
            }
            .noise(ms, -60.0)
            .samples
        }

        fn len_ms(&self) -> u64 {
            self.samples.len() as u64 * 1000 / u64::from(RATE)
        }
    }

    fn run(samples: &[i16], push: usize) -> Vec<SegmentEvent> {
        let mut seg = Segmenter::new(SegmenterConfig::for_rate(RATE));
        let mut out = Vec::new();
        for chunk in samples.chunks(push.max(1)) {
            seg.push(chunk, &mut out);
        }
        seg.finish(&mut out);
        out
    }

    fn utterances(events: &[SegmentEvent]) -> Vec<Utterance> {
        events
            .iter()
            .filter_map(|e| match e {
                SegmentEvent::Ended(u) => Some(*u),
                SegmentEvent::Started { .. } => None,
            })
            .collect()
    }

    fn ms(samples: u64) -> i64 {
        (samples * 1000 / u64::from(RATE)) as i64
    }

    #[test]
    fn the_open_utterance_during_a_pause_ends_where_the_pause_or_finish_ends_it() {
        let s = Signal::new()
            .noise(1_000, -60.0)
            .syllables(1_500)
            .noise(400, -60.0);
        let mut seg = Segmenter::new(SegmenterConfig::for_rate(RATE));
        let mut out = Vec::new();
        seg.push(&s.samples, &mut out);
        let open = seg.open_utterance().expect("open during a 400 ms pause");
        assert!(open.last_voiced_end < seg.position());
        assert!(open.hangover_end <= seg.position());
        assert!(open.voiced_ms >= 1_000);
        // The pause goes on: the utterance ends exactly at the hangover end seen before.
        let mut paused = Segmenter::new(SegmenterConfig::for_rate(RATE));
        let mut events = Vec::new();
        paused.push(&s.clone_samples_with_noise(600), &mut events);
        let ended = utterances(&events);
        assert_eq!(ended.len(), 1);
        assert_eq!(
            (ended[0].start_sample, ended[0].end_sample),
            (open.start_sample, open.hangover_end)
        );
        assert!(paused.open_utterance().is_none());
        // The audio ends instead: the same range.
        seg.finish(&mut out);
        let finished = utterances(&out);
        assert_eq!(
            (finished[0].start_sample, finished[0].end_sample),
            (open.start_sample, open.hangover_end)
        );
    }

    #[test]
    fn two_phrases_separated_by_a_pause_are_two_utterances_with_lead_in_and_hangover() {
        let s = Signal::new()
            .noise(1_000, -60.0)
            .syllables(1_500)
            .noise(900, -60.0)
            .syllables(1_200)
            .noise(1_000, -60.0);
        let u = utterances(&run(&s.samples, 2_400));
        assert_eq!(u.len(), 2, "{u:?}");
        assert!(u.iter().all(|u| u.reason == EndReason::Pause));
        // Speech at 1000..2500 ms and 3400..4600 ms; 200 ms of lead-in and hangover.
        assert!((ms(u[0].start_sample) - 800).abs() <= 20, "{u:?}");
        assert!((ms(u[0].end_sample) - 2_700).abs() <= 20, "{u:?}");
        assert!((ms(u[1].start_sample) - 3_200).abs() <= 20, "{u:?}");
        assert!((ms(u[1].end_sample) - 4_800).abs() <= 20, "{u:?}");
        assert!(u[0].peak_dbfs > -25.0 && u[0].peak_dbfs < -19.0, "{u:?}");
        assert!(u[0].voiced_ms >= 1_000, "{u:?}");
    }

    #[test]
    fn a_short_pause_keeps_one_utterance() {
        let s = Signal::new()
            .noise(500, -60.0)
            .syllables(1_000)
            .noise(400, -60.0)
            .syllables(1_000)
            .noise(1_000, -60.0);
        let u = utterances(&run(&s.samples, 480));
        assert_eq!(u.len(), 1, "{u:?}");
    }

    #[test]
    fn silence_and_clicks_open_nothing() {
        let mut s = Signal::new().noise(2_000, -60.0);
        for _ in 0..10 {
            s = s.tone(40, -10.0).noise(500, -60.0);
        }
        s = s.noise(3_000, -90.0);
        assert!(run(&s.samples, 1_000).is_empty());
        assert!(run(&vec![0i16; 48_000], 4_800).is_empty());
    }

    #[test]
    fn quiet_audio_under_the_absolute_gate_is_never_speech() {
        // 20 dB over a -80 dBFS floor, but under the -50 dBFS gate.
        let s = Signal::new()
            .noise(1_000, -80.0)
            .noise(1_000, -58.0)
            .noise(1_000, -80.0);
        assert!(run(&s.samples, 2_400).is_empty());
    }

    #[test]
    fn events_do_not_depend_on_push_sizes() {
        let s = Signal::new()
            .noise(700, -60.0)
            .syllables(2_000)
            .noise(800, -60.0)
            .syllables(700)
            .noise(300, -60.0);
        let reference = run(&s.samples, s.samples.len());
        assert_eq!(utterances(&reference).len(), 2);
        for push in [1, 7, 479, 480, 481, 2_400, 10_007] {
            assert_eq!(run(&s.samples, push), reference, "push {push}");
        }
    }

    #[test]
    fn a_long_utterance_is_cut_at_the_limit_at_a_quiet_frame_and_continues_contiguously() {
        let s = Signal::new()
            .noise(500, -60.0)
            .syllables(40_000)
            .noise(1_000, -60.0);
        let u = utterances(&run(&s.samples, 2_400));
        assert_eq!(u.len(), 2, "{u:?}");
        assert_eq!(u[0].reason, EndReason::MaxLength);
        assert_eq!(u[1].reason, EndReason::Pause);
        assert!(u[0].duration_samples() <= u64::from(RATE) * 28, "{u:?}");
        assert!(u[0].duration_samples() >= u64::from(RATE) * 26, "{u:?}");
        assert_eq!(u[0].end_sample, u[1].start_sample);
        // The cut lies in a dip: the frame before it is quiet.
        let cut = u[0].end_sample as usize;
        let frame = &s.samples[cut - 480..cut];
        let rms = (frame.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / 480.0).sqrt();
        assert!(rms < 100.0, "cut in a loud frame: rms {rms}");
        assert!((ms(u[1].end_sample) - 40_700).abs() <= 400, "{u:?}");
    }

    #[test]
    fn finish_closes_an_open_utterance_at_the_last_sample_at_most() {
        let s = Signal::new().noise(500, -60.0).syllables(1_000);
        let events = run(&s.samples, 2_400);
        let u = utterances(&events);
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].reason, EndReason::Finish);
        assert!(u[0].end_sample <= s.samples.len() as u64);
        assert!(matches!(events[0], SegmentEvent::Started { .. }));
    }

    #[test]
    fn the_floor_follows_steady_noise_so_a_fan_is_not_speech() {
        // A loud steady fan starts after a quiet second; within the floor window it stops
        // counting as speech, and speech over it still opens an utterance.
        let s = Signal::new()
            .noise(1_000, -75.0)
            .noise(20_000, -40.0)
            .tone(1_000, -15.0)
            .noise(2_000, -40.0);
        let u = utterances(&run(&s.samples, 2_400));
        let last = u.last().copied().expect("the loud phrase");
        assert!((ms(last.start_sample) - 20_800).abs() <= 40, "{u:?}");
        // At most the fan's onset was taken for speech, and only until the floor caught up.
        assert!(u.len() <= 2, "{u:?}");
        assert!(
            u.iter()
                .all(|u| u.duration_samples() <= u64::from(RATE) * 7),
            "{u:?}"
        );
        assert!(s.len_ms() > 20_000);
    }

    #[test]
    fn utterances_never_overlap_and_stay_in_order() {
        let mut s = Signal::new().noise(300, -60.0);
        for i in 0..12u32 {
            s = s.syllables(300 + 250 * i).noise(500 + 100 * (i % 4), -60.0);
        }
        let u = utterances(&run(&s.samples, 1_111));
        assert!(u.len() >= 8, "{u:?}");
        for w in u.windows(2) {
            assert!(w[0].end_sample <= w[1].start_sample, "{w:?}");
        }
        assert!(u.iter().all(|u| u.start_sample < u.end_sample));
    }
}
