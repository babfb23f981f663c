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
//! - At stop, the tail is committed if it holds voice (an utterance open or ended since the
//!   last commit) — or if the provider already streams deltas for it ([`ClientTurns::flush`])
//!   — and at least [`MIN_COMMIT_MS`]; silence after the last turn is not sent for
//!   transcription (it stays in the WAV).
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

    /// The audio ended (stop): the tail to commit, if it holds voice and is long enough.
    pub fn finish(&mut self) -> Option<Turn> {
        self.events.clear();
        self.segmenter.finish(&mut self.events);
        if !self.events.is_empty() {
            self.voiced = true;
        }
        (self.voiced && self.pending_bytes >= MIN_COMMIT_BYTES).then(|| self.take())
    }

    /// Whatever is pending, if it is at least [`MIN_COMMIT_MS`] (the provider heard speech
    /// the segmenter did not).
    pub fn flush(&mut self) -> Option<Turn> {
        (self.pending_bytes >= MIN_COMMIT_BYTES).then(|| self.take())
    }

    /// Bytes appended since the last commit.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    fn take(&mut self) -> Turn {
        let audio = self.pending_audio.take().filter(|_| self.contiguous);
        let turn = Turn {
            bytes: self.pending_bytes,
            audio,
        };
        self.pending_bytes = 0;
        self.contiguous = true;
        // An utterance still open continues into the next turn.
        self.voiced = self.segmenter.in_utterance();
        self.owed = false;
        turn
    }
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
}
