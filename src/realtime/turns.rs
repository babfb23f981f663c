//! Client-side turns: when the engine commits the input buffer for models without server
//! turn detection ([`super::protocol::Turns::Client`]).
//!
//! The engine feeds every chunk it appended to the provider, in order, to [`ClientTurns`],
//! which runs the one voice-activity rule of the project ([`crate::audio::segment`]) over
//! the same samples. The rule:
//! - When the segmenter reports the end of an utterance (a pause, or the length limit), the
//!   engine commits: everything appended since the previous commit becomes one provider item.
//! - A commit never carries under [`MIN_COMMIT_MS`] of audio (the service refuses it as
//!   "buffer too small"); a shorter buffer waits for the next turn end.
//! - At stop ([`ClientTurns::finish`]), the tail is committed unless it is *provably silent*
//!   (every 20 ms frame of it, counted from its start, at or below [`SILENT_RMS`], about
//!   −60 dBFS: digital zeros or a quiet room's noise floor, below any speech level). A tail that holds voice by the
//!   segmenter's rule and is long enough is committed as before; so is any tail that is not
//!   provably silent, whether or not the segmenter opened an utterance in it (quiet speech
//!   under its gate, speech at the very start in steady noise). A tail shorter than
//!   [`MIN_COMMIT_MS`] is padded with zeros ([`Turn::pad_bytes`], sent but not in the WAV).
//!   [`ClientTurns::flush`] commits whatever is pending when the provider already streams
//!   deltas for it.
//!
//! **Invariant (no silent loss):** every sample the engine appended is either inside a
//! commit, or in the uncommitted tail at stop and provably silent — or, when a commit is
//! refused or the connection ends before a commit, inside a gap the engine records over
//! the same WAV range ([`ClientTurns::unsent`]). Commits tile the appended audio in order
//! from its first byte. Property-tested below over random audio (levels, lengths, chunk
//! sizes, stop points).
//!
//! Each commit carries the WAV byte range of the audio it covers (`start..end`, offsets in
//! the capture WAV: sample `n` is at byte `44 + 2n`), when the chunks named their WAV range;
//! the engine keeps it with the provider item the commit produced.

use crate::audio::segment::{SegmentEvent, Segmenter, SegmenterConfig};

use crate::audio::PCM_RATE_HZ;

/// Least audio in one commit.
pub const MIN_COMMIT_MS: u64 = 100;
/// [`MIN_COMMIT_MS`] in PCM16 bytes at 24 kHz.
pub const MIN_COMMIT_BYTES: u64 = MIN_COMMIT_MS * (PCM_RATE_HZ as u64) * 2 / 1000;
/// A 20 ms frame whose RMS is at most this (about −60 dBFS of full scale: digital zeros or a
/// quiet room's noise floor) is silent. Speech, even quiet speech at −56 dBFS on average,
/// has syllables well above it, so a tail of speech is never "provably silent".
pub const SILENT_RMS: f64 = 32.0;
/// Samples per silence frame (20 ms at 24 kHz).
pub const SILENCE_FRAME_SAMPLES: usize = PCM_RATE_HZ as usize / 50;

/// The capture WAV bytes one commit covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnAudio {
    /// File name under `assets/`.
    pub asset: String,
    pub start: u64,
    pub end: u64,
}

/// What one commit covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// PCM bytes appended since the previous commit.
    pub bytes: u64,
    /// Zero bytes to append before the commit so it holds [`MIN_COMMIT_MS`] (a short tail at
    /// stop); not part of the capture WAV.
    pub pad_bytes: u64,
    /// Where they are in the capture WAV (`None` when a chunk had no WAV range).
    pub audio: Option<TurnAudio>,
}

/// Decides client commits from the audio the engine appended.
#[derive(Debug)]
pub struct ClientTurns {
    segmenter: Segmenter,
    events: Vec<SegmentEvent>,
    samples: Vec<i16>,
    /// PCM bytes appended since the last commit.
    pending_bytes: u64,
    /// WAV range of those bytes, while every chunk named one and they were contiguous.
    pending_audio: Option<TurnAudio>,
    contiguous: bool,
    /// An utterance opened or ended since the last commit.
    voiced: bool,
    /// A turn ended but the buffer was under the minimum: commit at the next chance.
    owed: bool,
    /// A 20 ms frame of the pending audio was louder than [`SILENT_RMS`].
    loud: bool,
    /// The pending audio's current (partial) silence frame: sum of squares and samples.
    frame_energy: f64,
    frame_len: usize,
}

impl Default for ClientTurns {
    fn default() -> ClientTurns {
        ClientTurns::new()
    }
}

impl ClientTurns {
    pub fn new() -> ClientTurns {
        ClientTurns {
            segmenter: Segmenter::new(SegmenterConfig::for_rate(PCM_RATE_HZ)),
            events: Vec::new(),
            samples: Vec::new(),
            pending_bytes: 0,
            pending_audio: None,
            contiguous: true,
            voiced: false,
            owed: false,
            loud: false,
            frame_energy: 0.0,
            frame_len: 0,
        }
    }

    /// Feeds a chunk that was appended (PCM16 LE mono 24 kHz; `wav` is the asset and byte
    /// offset of the chunk in the capture WAV). Returns the turn to commit now, if any.
    pub fn appended(&mut self, pcm: &[u8], wav: Option<(&str, u64)>) -> Option<Turn> {
        let len = pcm.len() as u64;
        match (wav, &mut self.pending_audio) {
            (Some((asset, offset)), Some(a))
                if self.contiguous && a.asset == asset && a.end == offset =>
            {
                a.end = offset + len;
            }
            (Some((asset, offset)), None) if self.pending_bytes == 0 => {
                self.pending_audio = Some(TurnAudio {
                    asset: asset.to_owned(),
                    start: offset,
                    end: offset + len,
                });
            }
            _ => self.contiguous = false,
        }
        self.pending_bytes += len;
        self.samples.clear();
        self.samples.extend(
            pcm.chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]])),
        );
        for i in 0..self.samples.len() {
            let x = f64::from(self.samples[i]);
            self.frame_energy += x * x;
            self.frame_len += 1;
            if self.frame_len == SILENCE_FRAME_SAMPLES {
                self.close_frame();
            }
        }
        self.events.clear();
        self.segmenter.push(&self.samples, &mut self.events);
        for e in &self.events {
            self.voiced = true;
            if matches!(e, SegmentEvent::Ended(_)) {
                self.owed = true;
            }
        }
        if self.owed && self.pending_bytes >= MIN_COMMIT_BYTES {
            return Some(self.take());
        }
        None
    }

    /// The audio ended (stop): the tail to commit, if it is not provably silent (padded to
    /// [`MIN_COMMIT_MS`] when shorter), or if it holds voice and is long enough.
    pub fn finish(&mut self) -> Option<Turn> {
        self.events.clear();
        self.segmenter.finish(&mut self.events);
        if !self.events.is_empty() {
            self.voiced = true;
        }
        if self.pending_bytes == 0 {
            return None;
        }
        if !self.pending_silent() {
            let mut turn = self.take();
            turn.pad_bytes = MIN_COMMIT_BYTES.saturating_sub(turn.bytes);
            return Some(turn);
        }
        (self.voiced && self.pending_bytes >= MIN_COMMIT_BYTES).then(|| self.take())
    }

    /// Whatever is pending, if it is at least [`MIN_COMMIT_MS`] (the provider heard speech
    /// the segmenter did not).
    pub fn flush(&mut self) -> Option<Turn> {
        (self.pending_bytes >= MIN_COMMIT_BYTES).then(|| self.take())
    }

    /// Whether every 20 ms frame of the pending audio (the last one possibly partial) is at
    /// most [`SILENT_RMS`].
    pub fn pending_silent(&self) -> bool {
        !self.loud && !frame_loud(self.frame_energy, self.frame_len)
    }

    /// The pending audio as a turn that was never committed (the connection ended first), if
    /// it is not provably silent: the engine records it as a gap.
    pub fn unsent(&self) -> Option<Turn> {
        (self.pending_bytes > 0 && !self.pending_silent()).then(|| Turn {
            bytes: self.pending_bytes,
            pad_bytes: 0,
            audio: self.pending_audio.clone().filter(|_| self.contiguous),
        })
    }

    /// Bytes appended since the last commit.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    fn take(&mut self) -> Turn {
        let audio = self.pending_audio.take().filter(|_| self.contiguous);
        let turn = Turn {
            bytes: self.pending_bytes,
            pad_bytes: 0,
            audio,
        };
        self.pending_bytes = 0;
        self.loud = false;
        self.frame_energy = 0.0;
        self.frame_len = 0;
        self.contiguous = true;
        // An utterance still open continues into the next turn.
        self.voiced = self.segmenter.in_utterance();
        self.owed = false;
        turn
    }

    fn close_frame(&mut self) {
        self.loud |= frame_loud(self.frame_energy, self.frame_len);
        self.frame_energy = 0.0;
        self.frame_len = 0;
    }
}

/// Whether a frame of `len` samples with `energy` (sum of squares) is louder than silence.
fn frame_loud(energy: f64, len: usize) -> bool {
    len > 0 && energy / len as f64 > SILENT_RMS * SILENT_RMS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 ms chunks of `ms` silence or a 440 Hz tone.
    fn chunks(plan: &[(bool, u64)]) -> Vec<Vec<u8>> {
        let mut samples = Vec::new();
        for &(tone, ms) in plan {
            for i in 0..(ms * 24) as usize {
                let v = if tone {
                    ((i as f64 * 440.0 * std::f64::consts::TAU / 24_000.0).sin() * 8_000.0) as i16
                } else {
                    0
                };
                samples.push(v);
            }
        }
        samples
            .chunks(2_400)
            .map(|c| c.iter().flat_map(|s| s.to_le_bytes()).collect())
            .collect()
    }

    #[test]
    fn one_commit_per_phrase_with_wav_ranges() {
        let mut t = ClientTurns::new();
        let mut offset = 44;
        let mut turns = Vec::new();
        let plan = [
            (false, 500),
            (true, 700),
            (false, 1_000),
            (true, 400),
            (false, 1_000),
            (true, 300),
        ];
        for c in chunks(&plan) {
            if let Some(turn) = t.appended(&c, Some(("r.wav", offset))) {
                turns.push(turn);
            }
            offset += c.len() as u64;
        }
        // The last phrase is still open at the end: stop commits it.
        turns.extend(t.finish());
        assert_eq!(turns.len(), 3, "{turns:?}");
        let mut expect_start = 44;
        for turn in &turns {
            let a = turn.audio.as_ref().expect("range");
            assert_eq!(a.start, expect_start, "ranges tile the WAV");
            assert_eq!(a.end - a.start, turn.bytes);
            assert!(turn.bytes >= MIN_COMMIT_BYTES);
            expect_start = a.end;
        }
        assert_eq!(
            expect_start, offset,
            "the tail is committed to the last byte"
        );
    }

    #[test]
    fn silence_is_never_committed() {
        let mut t = ClientTurns::new();
        for c in chunks(&[(false, 3_000)]) {
            assert_eq!(t.appended(&c, None), None);
        }
        assert_eq!(t.finish(), None);
        assert_eq!(t.pending_bytes(), 72_000 * 2);
    }

    #[test]
    fn a_tail_of_silence_after_the_last_turn_stays_uncommitted() {
        let mut t = ClientTurns::new();
        let mut n = 0;
        for c in chunks(&[(false, 300), (true, 500), (false, 2_000)]) {
            n += usize::from(t.appended(&c, None).is_some());
        }
        assert_eq!(n, 1);
        assert_eq!(t.finish(), None);
    }

    /// Random audio: segments of zeros, noise or a tone at random levels (dBFS RMS).
    fn audio(plan: &[(u8, i32, u64)], seed: u64) -> Vec<i16> {
        let mut rng = seed | 1;
        let mut out = Vec::new();
        for &(kind, db, ms) in plan {
            let rms = 32_768.0 * 10f64.powf(f64::from(db) / 20.0);
            for i in 0..(ms * 24) as usize {
                let v = match kind % 3 {
                    0 => 0.0,
                    1 => {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        // Uniform in [-1, 1): RMS 1/sqrt(3).
                        ((rng >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * rms * 3f64.sqrt()
                    }
                    _ => {
                        (i as f64 * 440.0 * std::f64::consts::TAU / 24_000.0).sin()
                            * rms
                            * std::f64::consts::SQRT_2
                    }
                };
                out.push(v.clamp(-32_768.0, 32_767.0) as i16);
            }
        }
        out
    }

    /// The oracle of "provably silent", computed independently: every 20 ms frame from the
    /// start (the last possibly partial) has RMS at most [`SILENT_RMS`].
    fn silent(samples: &[i16]) -> bool {
        samples.chunks(SILENCE_FRAME_SAMPLES).all(|f| {
            let energy: f64 = f.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
            energy / f.len() as f64 <= SILENT_RMS * SILENT_RMS
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// The invariant of the module: every appended sample is inside a commit, or in a
        /// provably silent tail; commits tile the audio from its first byte and each holds
        /// at least the minimum (padding included).
        #[test]
        fn every_sample_is_committed_or_provably_silent(
            plan in proptest::collection::vec((0u8..3, -90i32..-10, 0u64..1_500), 1..8),
            chunk_ms in proptest::collection::vec(1u64..250, 1..6),
            stop_ms in 0u64..8_000,
            seed in proptest::prelude::any::<u64>(),
        ) {
            let mut samples = audio(&plan, seed);
            samples.truncate((stop_ms * 24) as usize);
            let mut t = ClientTurns::new();
            let mut turns = Vec::new();
            let (mut at, mut k) = (0usize, 0usize);
            while at < samples.len() {
                let n = (chunk_ms[k % chunk_ms.len()] * 24) as usize;
                k += 1;
                let end = (at + n).min(samples.len());
                let pcm: Vec<u8> = samples[at..end].iter().flat_map(|x| x.to_le_bytes()).collect();
                let offset = 44 + 2 * at as u64;
                if let Some(turn) = t.appended(&pcm, Some(("r.wav", offset))) {
                    proptest::prop_assert_eq!(turn.pad_bytes, 0);
                    turns.push(turn);
                }
                at = end;
            }
            turns.extend(t.finish());
            let mut next = 44u64;
            for turn in &turns {
                let a = turn.audio.as_ref().expect("a range");
                proptest::prop_assert_eq!(a.start, next, "commits tile the audio");
                proptest::prop_assert_eq!(a.end - a.start, turn.bytes);
                proptest::prop_assert!(turn.bytes + turn.pad_bytes >= MIN_COMMIT_BYTES);
                next = a.end;
            }
            let committed = ((next - 44) / 2) as usize;
            let tail = &samples[committed..];
            proptest::prop_assert!(silent(tail), "an uncommitted tail of {} samples is not silent", tail.len());
            proptest::prop_assert_eq!(t.pending_bytes(), 2 * tail.len() as u64);
            proptest::prop_assert!(t.unsent().is_none());
        }
    }

    #[test]
    fn quiet_speech_under_the_gate_is_committed_at_stop() {
        // About -56 dBFS RMS: below the segmenter's -50 dBFS gate, far above silence.
        let quiet: Vec<i16> = audio(&[(0, 0, 300), (2, -56, 2_000), (0, 0, 300)], 7);
        let mut t = ClientTurns::new();
        for c in quiet.chunks(2_400) {
            let pcm: Vec<u8> = c.iter().flat_map(|x| x.to_le_bytes()).collect();
            assert_eq!(t.appended(&pcm, None), None);
        }
        let turn = t.finish().expect("committed at stop");
        assert_eq!(turn.bytes, 2 * quiet.len() as u64);
    }

    #[test]
    fn a_short_loud_tail_is_padded_to_the_minimum() {
        let mut t = ClientTurns::new();
        let pcm: Vec<u8> = audio(&[(2, -20, 40)], 1)
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(t.appended(&pcm, None), None);
        let turn = t.finish().expect("committed");
        assert_eq!(turn.bytes, 40 * 48);
        assert_eq!(turn.bytes + turn.pad_bytes, MIN_COMMIT_BYTES);
    }
}
