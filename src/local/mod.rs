//! On-device recognition: Whisper through whisper.cpp, beside the Realtime provider.
//!
//! This module owns what recognizing one utterance on the device means: the model file
//! ([`check_model_file`] before whisper.cpp ever sees it), the options (threads, language),
//! the result ([`Recognition`]) and the guard that keeps Whisper's inventions on silence
//! ("Thank you.", "[BLANK_AUDIO]") out of a transcript ([`judge`]). The engine itself,
//! [`whisper::LocalModel`], sits behind the `local` cargo feature (on by default), because it
//! builds whisper.cpp from source. [`dictation`] is the live engine the recording pipeline
//! feeds when recognition is local (segmenter → recognizer thread → canonical messages);
//! [`models`] is the catalog of downloadable models and the models folder (no whisper.cpp
//! needed); [`model_path`] turns the setting into a checked model file.
//!
//! Invariants:
//! - A file is handed to whisper.cpp only after [`ggml::validate`] read its header, mel
//!   filters, vocabulary and tensor table and found every field one the loader handles and
//!   every tensor's bytes inside the file; anything else is `local.model-invalid` (through the
//!   models folder `models.invalid-file`), never an abort inside whisper.cpp.
//! - An utterance becomes text only if the guard accepts it: no speech, a blank result or a
//!   high no-speech probability is [`Verdict::NoSpeech`], never a message.
//! - Recognition never runs on the UI thread or a tokio worker: callers run it on a thread of
//!   their own (inference blocks for as long as the utterance takes).

pub mod check;
pub mod dictation;
pub mod ggml;
pub mod languages;
pub mod models;
#[cfg(feature = "local")]
pub mod vocabulary;
#[cfg(feature = "local")]
pub mod whisper;

use std::io::Read;
use std::path::{Path, PathBuf};

pub use ggml::GGML_MAGIC;

/// The rate whisper.cpp takes audio at.
pub const WHISPER_RATE_HZ: u32 = 16_000;

/// Why on-device recognition could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    #[error("local.model-missing: the model file does not exist")]
    ModelMissing,
    #[error("local.model-unreadable: the model file cannot be read")]
    ModelUnreadable,
    #[error("local.model-invalid: the file is not a Whisper model whisper.cpp can load ({0})")]
    ModelInvalid(ggml::Invalid),
    #[error("local.unavailable: this build of Persyk has no on-device recognition")]
    Unavailable,
    #[error("local.inference-failed: recognizing the utterance failed")]
    InferenceFailed,
    #[error("local.resample-failed: the audio could not be prepared for the model")]
    ResampleFailed,
    /// The engine abandoned an inference whose result it no longer needs (a window still
    /// open when the stop came); never recorded, the audio is recognized again.
    #[error("local.aborted: the recognition was abandoned")]
    Aborted,
    /// The app quit before this audio was recognized: its deadline was near, so recognition
    /// stopped for good (`whisper::LocalModel::stop_recognition`); recorded as a gap, the
    /// audio stays in the recording.
    #[error("local.quit: Persyk quit before this audio was recognized")]
    Quit,
}

impl LocalError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            LocalError::ModelMissing => "local.model-missing",
            LocalError::ModelUnreadable => "local.model-unreadable",
            LocalError::ModelInvalid(_) => "local.model-invalid",
            LocalError::Unavailable => "local.unavailable",
            LocalError::InferenceFailed => "local.inference-failed",
            LocalError::ResampleFailed => "local.resample-failed",
            LocalError::Aborted => "local.aborted",
            LocalError::Quit => "local.quit",
        }
    }
}

/// The model file a choice names, checked before whisper.cpp sees it: a path as given (a
/// ggml file), a catalog name through the models folder ([`models::ModelStore::resolve`]:
/// downloaded, complete, a ggml file).
pub fn model_path(choice: &models::LocalModelChoice) -> Result<PathBuf, models::ModelError> {
    models::ModelStore::from_env()?.resolve(choice)
}

/// Options from the settings' thread count (`None`: the available cores, at most 8) and the
/// model (English-only models get the `en` hint).
pub fn options_for(threads: Option<usize>, english_only: bool) -> LocalOptions {
    let mut options = LocalOptions::default();
    if let Some(n) = threads {
        options.threads = n.max(1);
    }
    if english_only {
        options.language = Some("en".into());
    }
    options
}

/// Opens `path` for a check: a regular file, with its length.
fn open_model(path: &Path) -> Result<(std::fs::File, u64), LocalError> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: a FIFO at the path must not block the open; regular files ignore it.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => LocalError::ModelMissing,
            _ => LocalError::ModelUnreadable,
        })?;
    let meta = file.metadata().map_err(|_| LocalError::ModelUnreadable)?;
    if !meta.is_file() {
        return Err(LocalError::ModelInvalid(ggml::Invalid {
            reason: "it is not a regular file",
            offset: 0,
        }));
    }
    Ok((file, meta.len()))
}

/// Checks that `path` is a ggml Whisper model whisper.cpp can load without aborting: the
/// whole structure ([`ggml::validate`]: header, filters, vocabulary, tensor table, every
/// tensor inside the file). Reads the header and the table, not the tensor data (a few
/// milliseconds).
pub fn check_model_file(path: &Path) -> Result<(), LocalError> {
    inspect_model_file(path).map(|_| ())
}

/// [`check_model_file`], returning what the file holds.
pub fn inspect_model_file(path: &Path) -> Result<ggml::Summary, LocalError> {
    let (file, len) = open_model(path)?;
    ggml::validate(file, len).map_err(|e| match e {
        ggml::CheckError::Io(_) => LocalError::ModelUnreadable,
        ggml::CheckError::Invalid(why) => LocalError::ModelInvalid(why),
    })
}

/// Checks only that `path` is a regular file that starts with the ggml magic (a download
/// whose pinned SHA-256 matched; [`check_model_file`] runs before any use).
pub fn sniff_model_file(path: &Path) -> Result<(), LocalError> {
    let (mut file, _) = open_model(path)?;
    let mut magic = [0u8; 4];
    let invalid = LocalError::ModelInvalid(ggml::Invalid {
        reason: "the file does not start with the ggml magic",
        offset: 0,
    });
    match file.read_exact(&mut magic) {
        Ok(()) if u32::from_le_bytes(magic) == GGML_MAGIC => Ok(()),
        Ok(()) => Err(invalid),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(invalid),
        Err(_) => Err(LocalError::ModelUnreadable),
    }
}

/// How to recognize.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalOptions {
    /// Inference threads.
    pub threads: usize,
    /// A language hint (`"en"`); `None` lets a multilingual model detect it.
    pub language: Option<String>,
    /// Whisper's translate task: the words come out in English, whatever was spoken
    /// (multilingual models only; English-only models ignore it).
    pub translate: bool,
    /// "Words Persyk should know": names and terms written as listed where the model
    /// misheard them ([`vocabulary`]: a window with a stretch that sounds like one is
    /// decoded again with them as Whisper's prompt, at most [`MAX_VOCABULARY_TOKENS`]
    /// tokens of them, and only the confirmed stretch changes).
    pub vocabulary: Vec<String>,
}

/// The most prompt tokens the vocabulary takes (whisper.cpp allows half its 448-token text
/// context for a prompt; the rest is left to the window's own words).
pub const MAX_VOCABULARY_TOKENS: usize = 100;

impl LocalOptions {
    /// The pieces of the vocabulary prompt, in order ("Persyk", ", Zoë Kravitz", …): the
    /// prompt is their concatenation, cut at a piece boundary when it would pass
    /// [`MAX_VOCABULARY_TOKENS`]. Empty words and words with a NUL are left out.
    pub fn vocabulary_pieces(&self) -> Vec<String> {
        self.vocabulary
            .iter()
            .map(|w| w.trim())
            .filter(|w| !w.is_empty() && !w.contains('\0'))
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    w.to_owned()
                } else {
                    format!(", {w}")
                }
            })
            .collect()
    }
}

/// The most threads recognition uses by default.
pub const MAX_DEFAULT_THREADS: usize = 8;

impl Default for LocalOptions {
    fn default() -> LocalOptions {
        LocalOptions {
            threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .clamp(1, MAX_DEFAULT_THREADS),
            language: None,
            translate: false,
            vocabulary: Vec::new(),
        }
    }
}

/// What whisper.cpp made of one utterance, before the guard.
#[derive(Debug, Clone, PartialEq)]
pub struct Recognition {
    pub text: String,
    /// The highest no-speech probability among the result's segments (0 when none).
    pub no_speech_probability: f32,
}

/// The guard's decision about a recognition.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Speech: this text becomes the message.
    Text(String),
    /// Nothing was said; no message.
    NoSpeech,
}

/// Above this no-speech probability a result is taken for silence.
pub const NO_SPEECH_THRESHOLD: f32 = 0.6;

/// Keeps Whisper's inventions out: blank results, annotations (`[BLANK_AUDIO]`, `(silence)`,
/// `[Music]`, `*cough*`) and results the model itself rated as probably not speech. Only
/// whole annotations go ([`is_annotation`]); every other word stays, brackets and stars
/// included ("Multiply 5 * 3", "the meeting (the one on Friday)").
pub fn judge(recognition: &Recognition) -> Verdict {
    let text = strip_annotations(&recognition.text);
    let text = text.trim();
    if text.is_empty() || !text.chars().any(char::is_alphanumeric) {
        return Verdict::NoSpeech;
    }
    if recognition.no_speech_probability > NO_SPEECH_THRESHOLD {
        return Verdict::NoSpeech;
    }
    Verdict::Text(text.to_owned())
}

/// Words Whisper uses in its sound annotations (`(upbeat music)`, `[ Laughter ]`,
/// `*clears throat*`). A bracketed group is an annotation only if every word in it is one of
/// these and at least one is not a joining word.
const ANNOTATION_WORDS: &[&str] = &[
    "applause",
    "applauding",
    "audio",
    "audience",
    "background",
    "barking",
    "beep",
    "beeping",
    "bell",
    "bells",
    "birds",
    "blank",
    "blank_audio",
    "breath",
    "breathes",
    "breathing",
    "buzzing",
    "chatter",
    "cheering",
    "cheers",
    "chirping",
    "chuckles",
    "chuckling",
    "clapping",
    "claps",
    "clears",
    "clearing",
    "click",
    "clicking",
    "clicks",
    "cough",
    "coughing",
    "coughs",
    "crowd",
    "door",
    "dramatic",
    "exhales",
    "footsteps",
    "gentle",
    "giggles",
    "inaudible",
    "indistinct",
    "inhales",
    "instrumental",
    "intense",
    "knocking",
    "laugh",
    "laughing",
    "laughs",
    "laughter",
    "light",
    "loud",
    "mumbles",
    "mumbling",
    "murmuring",
    "music",
    "musical",
    "noise",
    "noises",
    "ominous",
    "pause",
    "playing",
    "plays",
    "quiet",
    "rain",
    "ringing",
    "sigh",
    "sighing",
    "sighs",
    "silence",
    "silent",
    "singing",
    "sneeze",
    "sneezes",
    "sneezing",
    "sniff",
    "sniffing",
    "sniffs",
    "soft",
    "sound",
    "sounds",
    "speaking",
    "speech",
    "static",
    "suspenseful",
    "talking",
    "throat",
    "thunder",
    "typing",
    "unintelligible",
    "upbeat",
    "whispering",
    "whispers",
    "wind",
];

/// Joining words that may stand between annotation words but never make one alone.
const JOINING_WORDS: &[&str] = &["a", "and", "in", "no", "of", "the", "with"];

/// Whether the inside of a bracketed group is an annotation rather than words someone said:
/// Whisper's own markers in square brackets (`[BLANK_AUDIO]`, `[_TT_150]`: capitals, digits
/// and underscores), or sound words only ([`ANNOTATION_WORDS`]).
fn is_annotation(open: char, inner: &str) -> bool {
    let inner = inner.trim();
    if inner.is_empty() {
        return false;
    }
    if open == '['
        && inner.chars().any(|c| c.is_ascii_uppercase())
        && inner
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        return true;
    }
    let mut sound = false;
    for word in inner.split_whitespace() {
        let word = word
            .trim_matches(|c: char| !c.is_alphanumeric() && c != '_')
            .to_lowercase();
        if word.is_empty() {
            continue;
        }
        if ANNOTATION_WORDS.contains(&word.as_str()) {
            sound = true;
        } else if !JOINING_WORDS.contains(&word.as_str()) {
            return false;
        }
    }
    sound
}

/// Removes whole annotations (`[…]`, `(…)`, `*…*` whose inside [`is_annotation`]) and
/// collapses whitespace. Everything else is kept as it was, unmatched brackets included.
fn strip_annotations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(['[', '(', '*']) {
        let open = rest[start..].chars().next().unwrap_or('[');
        let close = match open {
            '[' => ']',
            '(' => ')',
            _ => '*',
        };
        let after = &rest[start + open.len_utf8()..];
        match after.find(close) {
            Some(end) if is_annotation(open, &after[..end]) => {
                out.push_str(&rest[..start]);
                out.push(' ');
                rest = &after[end + close.len_utf8()..];
            }
            _ => {
                // Not an annotation: keep the opening character and go on after it.
                out.push_str(&rest[..start + open.len_utf8()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// 24 kHz mono PCM16 (what Persyk records) to 16 kHz `f32` (what whisper.cpp takes).
pub fn to_whisper_rate(pcm_24k: &[i16]) -> Result<Vec<f32>, LocalError> {
    use rubato::audioadapter_buffers::direct::InterleavedSlice;
    use rubato::{Fft, FixedSync, Resampler};

    if pcm_24k.is_empty() {
        return Ok(Vec::new());
    }
    let input: Vec<f32> = pcm_24k
        .iter()
        .map(|&s| crate::audio::convert::i16_to_f32(s))
        .collect();
    let mut fft = Fft::<f32>::new(24_000, WHISPER_RATE_HZ as usize, 2_400, 1, FixedSync::Both)
        .map_err(|_| LocalError::ResampleFailed)?;
    let needed = fft.process_all_needed_output_len(input.len());
    let mut output = vec![0.0f32; needed];
    let inp =
        InterleavedSlice::new(&input, 1, input.len()).map_err(|_| LocalError::ResampleFailed)?;
    let mut outp = InterleavedSlice::new_mut(&mut output, 1, needed)
        .map_err(|_| LocalError::ResampleFailed)?;
    let (_, written) = fft
        .process_all_into_buffer(&inp, &mut outp, input.len(), None)
        .map_err(|_| LocalError::ResampleFailed)?;
    output.truncate(written);
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(text: &str, p: f32) -> Recognition {
        Recognition {
            text: text.into(),
            no_speech_probability: p,
        }
    }

    #[test]
    fn the_guard_keeps_speech_and_drops_inventions() {
        assert_eq!(
            judge(&rec(" Ask not what your country can do for you.", 0.01)),
            Verdict::Text("Ask not what your country can do for you.".into())
        );
        for blank in [
            "",
            "   ",
            "[BLANK_AUDIO]",
            " (silence) ",
            "[Music]",
            "*cough*",
            " ... ",
        ] {
            assert_eq!(judge(&rec(blank, 0.0)), Verdict::NoSpeech, "{blank:?}");
        }
        assert_eq!(judge(&rec(" Thank you.", 0.9)), Verdict::NoSpeech);
        assert_eq!(
            judge(&rec("[BLANK_AUDIO] Hello there.", 0.1)),
            Verdict::Text("Hello there.".into())
        );
    }

    #[test]
    fn resampling_keeps_the_duration_and_the_tone() {
        // 1 s of a 440 Hz tone at 24 kHz becomes 1 s at 16 kHz with the same frequency.
        let pcm: Vec<i16> = (0..24_000)
            .map(|i| {
                let t = f64::from(i) / 24_000.0;
                ((2.0 * std::f64::consts::PI * 440.0 * t).sin() * 16_000.0) as i16
            })
            .collect();
        let out = to_whisper_rate(&pcm).expect("resample");
        assert!((out.len() as i64 - 16_000).abs() <= 2, "{}", out.len());
        // Count zero crossings in the middle half: 440 Hz → 2 × 440 × 0.5 s = 440.
        let mid = &out[4_000..12_000];
        let crossings = mid
            .windows(2)
            .filter(|w| (w[0] < 0.0) != (w[1] < 0.0))
            .count();
        assert!((crossings as i64 - 440).abs() <= 2, "{crossings}");
        assert!(to_whisper_rate(&[]).expect("empty").is_empty());
    }

    #[test]
    fn the_vocabulary_is_comma_separated_pieces_without_blanks() {
        let o = LocalOptions {
            vocabulary: vec![
                " Persyk ".into(),
                "".into(),
                "Zoë Kravitz".into(),
                "a\0b".into(),
            ],
            ..LocalOptions::default()
        };
        assert_eq!(o.vocabulary_pieces(), ["Persyk", ", Zoë Kravitz"]);
        assert!(LocalOptions::default().vocabulary_pieces().is_empty());
    }

    #[test]
    fn options_follow_the_settings_and_the_model() {
        let o = options_for(Some(3), true);
        assert_eq!((o.threads, o.language.as_deref()), (3, Some("en")));
        let o = options_for(None, false);
        assert!((1..=MAX_DEFAULT_THREADS).contains(&o.threads));
        assert_eq!(o.language, None);
        assert_eq!(
            dictation::model_id(Path::new("/m/ggml-base.en.bin")),
            "ggml-base.en"
        );
    }

    #[test]
    fn only_ggml_files_are_models() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("none.bin");
        assert_eq!(
            check_model_file(&missing).map_err(|e| e.code()),
            Err("local.model-missing")
        );
        let short = dir.path().join("short.bin");
        std::fs::write(&short, b"gg").expect("write");
        assert_eq!(
            check_model_file(&short).map_err(|e| e.code()),
            Err("local.model-invalid")
        );
        let html = dir.path().join("page.bin");
        std::fs::write(&html, b"<html>not a model</html>").expect("write");
        assert_eq!(
            check_model_file(&html).map_err(|e| e.code()),
            Err("local.model-invalid")
        );
        assert_eq!(
            check_model_file(dir.path()).map_err(|e| e.code()),
            Err("local.model-invalid")
        );
        // The magic alone passes the sniff a verified download gets, not the check.
        let magic = dir.path().join("model.bin");
        std::fs::write(&magic, GGML_MAGIC.to_le_bytes()).expect("write");
        assert!(sniff_model_file(&magic).is_ok());
        assert_eq!(
            check_model_file(&magic).map_err(|e| e.code()),
            Err("local.model-invalid")
        );
        assert_eq!(
            sniff_model_file(&html).map_err(|e| e.code()),
            Err("local.model-invalid")
        );
    }
}
