//! The evaluation corpus of real human speech `scripts/fetch-corpus` builds under
//! `target/corpus/` (issue #22): LibriVox readings, spoken playing cards, a meeting
//! recording and stress clips made from them, each with its reference transcript (or none)
//! and the spans where its clean signal holds speech.
//!
//! [`clips`] returns nothing, after saying so once on stderr, when the corpus was not
//! fetched, so a test or bench skips cleanly instead of failing on a machine without it.

use std::path::{Path, PathBuf};

use super::{wav_as_recorded, words};

/// Where `scripts/fetch-corpus` keeps the corpus.
pub fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/corpus")
}

/// Which clips to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    /// The short subset marked `ci` in the manifest (a few clips, under a minute of audio).
    Ci,
    /// Every clip.
    All,
}

/// One line of `manifest.tsv`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub wav: PathBuf,
    pub seconds: f64,
    pub ci: bool,
    /// Seconds of speech in the clip (the sum of [`Clip::speech`]).
    pub speech_seconds: f64,
    pub speech_spans: PathBuf,
    pub source: String,
    pub sha256: String,
    /// The normalized transcript (lowercase words, apostrophes kept), `None` when the
    /// recording has none (`chan3`: compare with one whole-file whisper.cpp call instead).
    pub reference: Option<String>,
}

/// A clip as Persyk records it.
#[derive(Debug, Clone)]
pub struct Clip {
    pub entry: Entry,
    /// 24 kHz mono PCM16, through the capture converter ([`wav_as_recorded`]).
    pub samples: Vec<i16>,
    /// Where the clean signal holds speech, as (start, end) seconds.
    pub speech: Vec<(f64, f64)>,
}

impl Clip {
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    pub fn reference(&self) -> Option<&str> {
        self.entry.reference.as_deref()
    }

    pub fn seconds(&self) -> f64 {
        self.samples.len() as f64 / 24_000.0
    }

    /// Seconds of speech outside every `(start, end)` sample range (24 kHz) in `sent`: the
    /// speech a recognizer that hears only those ranges never gets.
    pub fn speech_outside(&self, sent: &[(u64, u64)]) -> f64 {
        let mut covered: Vec<(f64, f64)> = sent
            .iter()
            .map(|&(a, b)| (a as f64 / 24_000.0, b as f64 / 24_000.0))
            .collect();
        covered.sort_by(|x, y| x.0.total_cmp(&y.0));
        self.speech
            .iter()
            .map(|&(a, b)| {
                let inside: f64 = covered
                    .iter()
                    .map(|&(c, d)| (b.min(d) - a.max(c)).max(0.0))
                    .sum();
                (b - a - inside).max(0.0)
            })
            .sum()
    }
}

/// The manifest's entries, or `None` (with the reason) when the corpus was not fetched.
pub fn manifest() -> Result<Vec<Entry>, String> {
    let dir = corpus_dir();
    let path = dir.join("manifest.tsv");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e}; run scripts/fetch-corpus (scripts/setup does)",
            path.display()
        )
    })?;
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let [
                name,
                wav,
                seconds,
                set,
                speech,
                spans,
                source,
                sha256,
                reference,
            ] = f[..]
            else {
                return Err(format!("{}: a line without 9 fields", path.display()));
            };
            let number = |v: &str| {
                v.parse::<f64>()
                    .map_err(|e| format!("{}: {name}: {v}: {e}", path.display()))
            };
            Ok(Entry {
                name: name.to_owned(),
                wav: dir.join(wav),
                seconds: number(seconds)?,
                ci: set == "ci",
                speech_seconds: number(speech)?,
                speech_spans: dir.join(spans),
                source: source.to_owned(),
                sha256: sha256.to_owned(),
                reference: (reference != "none").then(|| words(reference).join(" ")),
            })
        })
        .collect()
}

fn read_spans(path: &Path) -> Vec<(f64, f64)> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter_map(|l| {
            let (a, b) = l.split_once('\t')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect()
}

/// The clips of `set` as Persyk records them, in manifest order; empty (after one line on
/// stderr saying why) when the corpus was not fetched.
pub fn clips(set: Set) -> Vec<Clip> {
    let entries = match manifest() {
        Ok(e) => e,
        Err(why) => {
            eprintln!("skipping the speech corpus: {why}");
            return Vec::new();
        }
    };
    entries
        .into_iter()
        .filter(|e| set == Set::All || e.ci)
        .map(|entry| Clip {
            samples: wav_as_recorded(&entry.wav),
            speech: read_spans(&entry.speech_spans),
            entry,
        })
        .collect()
}

/// Loops in `text` (extra copies of repeated word runs): the library's own count, the
/// one that makes a reduced encoder window's decode doubtful.
#[allow(unused_imports)] // not every test binary counts loops
pub use persyk::local::check::loops;

/// The baseline every on-device figure stands beside: one whole-file whisper.cpp call on
/// 24 kHz `samples` with whisper.cpp's defaults (30 s windows), the given threads and
/// language — the peers' method. Its text.
#[cfg(feature = "local")]
pub fn whole_file_text(
    ctx: &whisper_rs::WhisperContext,
    samples: &[i16],
    threads: usize,
    language: Option<&str>,
) -> String {
    use whisper_rs::{FullParams, SamplingStrategy};
    let mut state = ctx.create_state().expect("state");
    let mut params = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
    params.set_n_threads(threads as i32);
    params.set_language(language);
    params.set_print_progress(false);
    params.set_print_realtime(false);
    params.set_print_timestamps(false);
    state
        .full(
            params,
            &persyk::local::to_whisper_rate(samples).expect("16 kHz"),
        )
        .expect("whisper.cpp");
    state
        .as_iter()
        .map(|s| s.to_str_lossy().expect("text").into_owned())
        .collect()
}

/// A whisper.cpp context of its own for [`whole_file_text`] (the baseline never shares the
/// model Persyk's path loaded).
#[cfg(feature = "local")]
pub fn whole_file_context(model: &Path) -> whisper_rs::WhisperContext {
    whisper_rs::WhisperContext::new_with_params(
        model.to_str().expect("utf-8 path"),
        whisper_rs::WhisperContextParameters::default(),
    )
    .expect("whisper.cpp loads the model")
}
