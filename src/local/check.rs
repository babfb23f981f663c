//! When a short encoder window may be trusted: the check of a decode with a reduced
//! `audio_ctx`.
//!
//! whisper.cpp encodes 30 s of audio whatever the input's length; on two cores that one
//! encoding (about 0.8–1 s for tiny.en) is the floor of stop → text. Encoding only the audio
//! plus [`REDUCED_PAD_MS`] of the zero padding after it costs a fraction (0.1 s for 1 s of
//! speech, 0.5 s for 10 s), but whisper.cpp lists `audio_ctx` among its experimental
//! speed-ups: the standard models were trained on full windows, and on a short one they can
//! lose track of the end — repeat a phrase, invent words in the padding, or stop early.
//!
//! So a reduced window is decoded once, greedily, with its tokens bounded ([`max_tokens`]),
//! and its result is used only when nothing about it looks like that ([`doubt`]); any doubt
//! and the same audio is decoded again with the full window, which costs time, never words. The padding matters: with a second of it tiny.en repeated
//! phrases on live clips; with [`REDUCED_PAD_MS`] the model sees the silence it was trained
//! to stop at.
//!
//! Invariants:
//! - [`doubt`] is a pure function of the decode (segments with their raw timestamps, which may
//!   run past the audio), the audio's length and where the segmenter last heard a voice.
//! - A doubt is never an error and never text: the caller decodes with the full window.

use super::dictation::Segment;
use crate::audio::PCM_RATE_HZ;

/// The zero padding a reduced window encodes after the audio.
pub const REDUCED_PAD_MS: u64 = 4_000;
/// Encoder frames per second of audio (whisper.cpp: 1500 frames for 30 s).
const FRAMES_PER_SECOND: u64 = 50;
/// whisper.cpp's full window in encoder frames.
pub const FULL_WINDOW_FRAMES: u64 = 1_500;
/// A segment may end this far past the audio (Whisper's 20 ms timestamps round up).
const PAST_THE_END_MS: u64 = 500;
/// More words than this per second of audio is not speech (fast talk is about four).
const MAX_WORDS_PER_SECOND: u64 = 6;
/// The text must reach to within this of the last voiced frame the segmenter heard.
const EARLY_END_MS: u64 = 1_000;

/// The encoder window (frames) for `len` samples (24 kHz) of audio: the audio and
/// [`REDUCED_PAD_MS`] of padding, at most the full window.
pub fn reduced_frames(len: u64) -> u64 {
    let ms = len * 1000 / u64::from(PCM_RATE_HZ) + REDUCED_PAD_MS;
    (ms * FRAMES_PER_SECOND)
        .div_ceil(1000)
        .min(FULL_WINDOW_FRAMES)
}

/// The most tokens a reduced window's decode may write per segment for `seconds` of audio:
/// about twice what fast speech needs (English runs near four tokens a second), so a
/// decode that loses track of the end stops early and is doubted, instead of running on.
pub fn max_tokens(seconds: usize) -> usize {
    16 + 8 * seconds
}

/// What makes a reduced window's decode untrustworthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doubt {
    /// A segment ends in the padding, past the audio: words invented in silence.
    PastTheAudio,
    /// A run of words repeats itself ([`loops`]).
    Loop,
    /// More words than anyone says in that time.
    TooManyWords,
    /// The text stops (or is empty) more than a second before the voice did.
    EndsEarly,
}

impl Doubt {
    /// A stable name, for figures.
    pub fn code(self) -> &'static str {
        match self {
            Doubt::PastTheAudio => "past-the-audio",
            Doubt::Loop => "loop",
            Doubt::TooManyWords => "too-many-words",
            Doubt::EndsEarly => "ends-early",
        }
    }
}

/// Why the decode of `len` samples with a reduced window is not to be trusted, if it is
/// not. `segments` carry their raw timestamps (samples from the window's start, possibly
/// past `len`); `voiced_end` is the end of the last frame the segmenter heard as voice,
/// in the same units, when it heard one in this audio.
pub fn doubt(segments: &[Segment], len: u64, voiced_end: Option<u64>) -> Option<Doubt> {
    let rate = u64::from(PCM_RATE_HZ);
    if segments
        .iter()
        .any(|s| s.end_sample > len + rate * PAST_THE_END_MS / 1000)
    {
        return Some(Doubt::PastTheAudio);
    }
    let text: Vec<&str> = segments.iter().map(|s| s.text.as_str()).collect();
    let text = text.join(" ");
    if loops(&text) > 0 {
        return Some(Doubt::Loop);
    }
    let seconds = len.max(rate).div_ceil(rate);
    if words(&text).len() as u64 > MAX_WORDS_PER_SECOND * seconds {
        return Some(Doubt::TooManyWords);
    }
    if let Some(voiced) = voiced_end.filter(|&v| v > 0) {
        let reached = segments
            .iter()
            .filter(|s| s.text.chars().any(char::is_alphanumeric))
            .map(|s| s.end_sample)
            .max();
        let early = rate * EARLY_END_MS / 1000;
        if reached.is_none_or(|end| end + early < voiced.min(len)) {
            return Some(Doubt::EndsEarly);
        }
    }
    None
}

/// The words of `text`: letters, digits and apostrophes, lowercase (the words a loop and a
/// word error rate are counted in).
pub fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric() || *c == '\'')
                .collect::<String>()
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Loops in `text`: how many extra copies of a run of up to 8 words follow it directly ("we
/// had a long we had a long" is one; "123 123 123 123" three), each loop counted at its
/// shortest period. A multi-word run counts from its first repeat, a single word from its
/// second ("five five" and "very, very" are speech, not loops).
pub fn loops(text: &str) -> usize {
    let w = words(text);
    let mut count = 0;
    let mut i = 0;
    while i < w.len() {
        let mut found = None;
        for n in 1..=8 {
            let copies = (1..)
                .take_while(|&k| {
                    i + (k + 1) * n <= w.len() && w[i..i + n] == w[i + k * n..i + (k + 1) * n]
                })
                .count();
            // One repeat of a multi-word run, or two of a single word.
            if (n >= 2 && copies >= 1) || copies >= 2 {
                found = Some((n, copies));
                break;
            }
        }
        match found {
            Some((n, copies)) => {
                count += copies;
                i += (copies + 1) * n;
            }
            None => i += 1,
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = PCM_RATE_HZ as u64;

    fn seg(start_s: f64, end_s: f64, text: &str) -> Segment {
        Segment {
            start_sample: (start_s * S as f64) as u64,
            end_sample: (end_s * S as f64) as u64,
            text: text.to_owned(),
            no_speech_probability: 0.0,
            heard: None,
        }
    }

    #[test]
    fn the_window_is_the_audio_and_four_seconds_of_padding_at_most_the_full_one() {
        assert_eq!(reduced_frames(S), 250);
        assert_eq!(reduced_frames(S * 3 / 2), 275);
        assert_eq!(reduced_frames(S * 10), 700);
        assert_eq!(reduced_frames(S * 26), 1_500);
        assert_eq!(reduced_frames(S * 40), 1_500);
    }

    /// Decodes of a reduced window seen on the speech corpus (tiny.en), each with the doubt
    /// it must raise; and good ones that must pass.
    #[test]
    fn doubts_seen_on_real_speech() {
        /// Segments, the audio's length, the voiced end, the doubt.
        type Row<'a> = (&'a [Segment], u64, Option<u64>, Option<Doubt>);
        let table: &[Row] = &[
            // "a woman." (1 s) came back looping into the padding.
            (
                &[seg(
                    0.0,
                    7.0,
                    "capable woman, he may be unable to be unable to be unable",
                )],
                S,
                Some(S),
                Some(Doubt::PastTheAudio),
            ),
            // The same loop inside the audio.
            (
                &[seg(0.0, 2.9, "he may be unable to be unable to be unable")],
                3 * S,
                None,
                Some(Doubt::Loop),
            ),
            (
                &[seg(0.0, 1.0, "123 123 123 123")],
                S,
                None,
                Some(Doubt::Loop),
            ),
            // Eight words in one second.
            (
                &[seg(0.0, 1.0, "one two three four five six seven eight")],
                S,
                None,
                Some(Doubt::TooManyWords),
            ),
            // Stops at 2 s of 6 s the segmenter heard as voice.
            (
                &[seg(0.0, 2.0, "And Mr. John Dashwood")],
                6 * S,
                Some(6 * S),
                Some(Doubt::EndsEarly),
            ),
            // Nothing at all where a voice was heard.
            (&[], 3 * S, Some(2 * S), Some(Doubt::EndsEarly)),
            // Good: reaches the voiced end.
            (
                &[
                    seg(0.0, 3.0, "And Mr. John Dashwood had then leisure"),
                    seg(3.0, 5.0, "to consider how much"),
                ],
                6 * S,
                Some(5 * S + S / 2),
                None,
            ),
            // Good: silence after a pause, nothing heard, nothing said.
            (&[], 2 * S, None, None),
            // Good: natural repetition.
            (&[seg(0.0, 2.0, "very, very clear")], 2 * S, None, None),
            (&[seg(0.0, 2.0, "five five eight")], 2 * S, None, None),
            // Good: a timestamp rounded just past the end.
            (&[seg(0.0, 1.2, "within the")], S, Some(S), None),
        ];
        for (i, (segments, len, voiced, want)) in table.iter().enumerate() {
            assert_eq!(doubt(segments, *len, *voiced), *want, "row {i}");
        }
    }
}
