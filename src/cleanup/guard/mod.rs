//! The fidelity guard: does a clean-up still say what was spoken? Every model output passes
//! it before it may be pasted; what fails is stored as a refused attempt and the spoken
//! words are delivered instead.
//!
//! It reads both texts as tokens ([`tokens`]: words with contractions spelled out, numbers
//! folded whatever way they were written) and judges by mode:
//! - **Tidy** ([`tidy`]): the clean-up must be the spoken words with listed edits only —
//!   fillers, discourse openers, repetitions, false starts before a correction cue, spoken
//!   punctuation, and the same words written otherwise (case, punctuation, contractions,
//!   digits). Any other edit refuses; there is no tolerance.
//! - **Polish, Email, My instruction** ([`meaning`]): wording may change and sentences may
//!   move, but the words that carry meaning may not — negation, yes/no, numbers with their
//!   units and order, days and months, names, who does what, modality, direction and order,
//!   quantifiers, opposites — every spoken content word stays, and no sentence is mostly new.
//!   A clean-up that passes Tidy's rule passes these too.
//! - **Translate**: numbers, names, questions and length; the rest cannot be checked in
//!   another language, so an accepted translation is marked `checked: "partial"`.
//!
//! In every mode a question stays a question: fewer questions than were spoken refuses
//! ("it answered your question" when a yes or a no came with it), and a question mark on
//! words that do not ask ("Move the money to checking?") refuses too.
//!
//! Invariants:
//! - Pure and deterministic; a [`Rejection`] and the stored [`Fidelity`] carry codes and
//!   counts, never words. Only [`report`], for the user's own command line, quotes text.
//! - The identity passes every mode; dropping only fillers passes every mode.
//! - Bounded: texts over [`MAX_WORDS`] tokens are refused (`cleanup.too-long`) before any
//!   table is built; memory is one `u16` per pair of token positions.

pub mod lexicon;
pub mod meaning;
pub mod tidy;
pub mod tokens;

use tidy::{EditKind, align};
use tokens::Text;

/// The most tokens either text may have (a dictation of about 20 minutes).
pub const MAX_WORDS: usize = 3_000;

/// How much a mode may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Strictness {
    /// Tidy: listed edits only.
    Strict,
    /// Polish, Email, custom prompts: wording may change, the meaning may not.
    Rewrite,
    /// Translate: numbers, names, questions and length.
    Translate,
}

impl Strictness {
    /// Whether an accepted output counts as rewritten (shown so in history).
    pub fn rewrites(self) -> bool {
        !matches!(self, Strictness::Strict)
    }
}

/// How far the guard could check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Checked {
    /// Every edit was classified (Tidy, or a rewrite that only made Tidy's edits).
    Edits,
    /// The meaning words class by class (a rewrite).
    Meaning,
    /// Numbers, names, questions and length only (a translation): not checked for meaning.
    Partial,
}

/// The listed edits found (Tidy's path).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditCounts {
    pub fillers: usize,
    pub discourse: usize,
    pub repetitions: usize,
    pub false_starts: usize,
    pub spoken_punctuation: usize,
    pub joined: usize,
    pub conjunctions: usize,
    /// Edits of no listed kind on the cheapest path (0 when Tidy's rule holds; for a rewrite
    /// checked for meaning, 1: its edits are not priced one by one).
    pub unlisted: usize,
}

/// What the guard measured (stored in the clean-up's details: counts, never words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fidelity {
    pub checked: Checked,
    pub spoken_words: usize,
    pub output_words: usize,
    pub spoken_questions: usize,
    pub output_questions: usize,
    pub edits: EditCounts,
}

/// Why an output was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    #[error("cleanup.empty: the clean-up has no words")]
    Empty,
    #[error("cleanup.too-long: the text is too long to check")]
    TooLong,
    #[error("cleanup.question-answered: the clean-up answered the question")]
    QuestionAnswered,
    #[error("cleanup.question-changed: the clean-up turned a question into a statement")]
    QuestionChanged,
    #[error("cleanup.question-added: the clean-up turned a statement into a question")]
    QuestionAdded,
    #[error("cleanup.negation-changed: the clean-up changed a negation")]
    NegationChanged,
    #[error("cleanup.yes-no-changed: the clean-up changed a yes or a no")]
    YesNoChanged,
    #[error("cleanup.numbers-changed: the numbers differ from the spoken ones")]
    NumbersChanged,
    #[error("cleanup.date-changed: the clean-up changed a day, a month or a date")]
    DateChanged,
    #[error("cleanup.name-changed: the clean-up changed a name")]
    NameChanged,
    #[error("cleanup.person-changed: the clean-up changed who does what")]
    PersonChanged,
    #[error("cleanup.modality-changed: the clean-up changed a must, may, can or will")]
    ModalityChanged,
    #[error("cleanup.direction-changed: the clean-up changed a direction or an order")]
    DirectionChanged,
    #[error("cleanup.quantity-changed: the clean-up changed how many (all, some, none)")]
    QuantityChanged,
    #[error("cleanup.opposite-word: the clean-up turned a word into its opposite")]
    OppositeWord,
    #[error("cleanup.sentence-added: the clean-up added a sentence that was not spoken")]
    SentenceAdded,
    #[error("cleanup.words-added: the clean-up says things that were not spoken")]
    WordsAdded,
    #[error("cleanup.words-missing: spoken words are missing from the clean-up")]
    WordsMissing,
    #[error("cleanup.words-changed: the clean-up changed spoken words")]
    WordsChanged,
    #[error("cleanup.length: the clean-up is much shorter or longer than what was spoken")]
    Length,
}

impl Rejection {
    pub const ALL: [Rejection; 20] = [
        Rejection::Empty,
        Rejection::TooLong,
        Rejection::QuestionAnswered,
        Rejection::QuestionChanged,
        Rejection::QuestionAdded,
        Rejection::NegationChanged,
        Rejection::YesNoChanged,
        Rejection::NumbersChanged,
        Rejection::DateChanged,
        Rejection::NameChanged,
        Rejection::PersonChanged,
        Rejection::ModalityChanged,
        Rejection::DirectionChanged,
        Rejection::QuantityChanged,
        Rejection::OppositeWord,
        Rejection::SentenceAdded,
        Rejection::WordsAdded,
        Rejection::WordsMissing,
        Rejection::WordsChanged,
        Rejection::Length,
    ];

    pub fn code(self) -> &'static str {
        match self {
            Rejection::Empty => "cleanup.empty",
            Rejection::TooLong => "cleanup.too-long",
            Rejection::QuestionAnswered => "cleanup.question-answered",
            Rejection::QuestionChanged => "cleanup.question-changed",
            Rejection::QuestionAdded => "cleanup.question-added",
            Rejection::NegationChanged => "cleanup.negation-changed",
            Rejection::YesNoChanged => "cleanup.yes-no-changed",
            Rejection::NumbersChanged => "cleanup.numbers-changed",
            Rejection::DateChanged => "cleanup.date-changed",
            Rejection::NameChanged => "cleanup.name-changed",
            Rejection::PersonChanged => "cleanup.person-changed",
            Rejection::ModalityChanged => "cleanup.modality-changed",
            Rejection::DirectionChanged => "cleanup.direction-changed",
            Rejection::QuantityChanged => "cleanup.quantity-changed",
            Rejection::OppositeWord => "cleanup.opposite-word",
            Rejection::SentenceAdded => "cleanup.sentence-added",
            Rejection::WordsAdded => "cleanup.words-added",
            Rejection::WordsMissing => "cleanup.words-missing",
            Rejection::WordsChanged => "cleanup.words-changed",
            Rejection::Length => "cleanup.length",
        }
    }

    pub fn from_code(code: &str) -> Option<Rejection> {
        Rejection::ALL.into_iter().find(|r| r.code() == code)
    }

    /// The end of "Pasted as spoken: …", naming the kind of change refused.
    pub fn sentence(self) -> &'static str {
        match self {
            Rejection::Empty => "the model answered with nothing.",
            Rejection::TooLong => "the dictation is too long to check a clean-up.",
            Rejection::QuestionAnswered => "it answered your question.",
            Rejection::QuestionChanged => "it turned your question into a statement.",
            Rejection::QuestionAdded => "it turned what you said into a question.",
            Rejection::NegationChanged => "it changed a “not”.",
            Rejection::YesNoChanged => "it changed a “yes” or a “no”.",
            Rejection::NumbersChanged => "it changed a number.",
            Rejection::DateChanged => "it changed a day or a date.",
            Rejection::NameChanged => "it changed a name.",
            Rejection::PersonChanged => "it changed who does what (I, you, we, they).",
            Rejection::ModalityChanged => "it changed a “must”, “may”, “can” or “will”.",
            Rejection::DirectionChanged => {
                "it changed a direction or an order (to/from, before/after)."
            }
            Rejection::QuantityChanged => "it changed how many (all, some, none).",
            Rejection::OppositeWord => "it turned a word into its opposite.",
            Rejection::SentenceAdded => "it added a sentence you did not say.",
            Rejection::WordsAdded => "it added words you did not say.",
            Rejection::WordsMissing => "it left out words you said.",
            Rejection::WordsChanged => "it changed words you said.",
            Rejection::Length => "it was much shorter or longer than what you said.",
        }
    }
}

/// One edit found, quoted, for the user's own command line (`persyk cleanup --json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QuotedEdit {
    pub kind: EditKind,
    pub spoken: String,
    pub output: String,
}

/// Everything the guard found.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub fidelity: Fidelity,
    pub verdict: Result<(), Rejection>,
    pub edits: Vec<QuotedEdit>,
}

/// Measures and judges `output` against `spoken` under `strictness`.
pub fn check(
    spoken: &str,
    output: &str,
    strictness: Strictness,
) -> (Fidelity, Result<(), Rejection>) {
    let r = judge(spoken, output, strictness, false);
    (r.fidelity, r.verdict)
}

/// [`check`] with the edits quoted (for the command line only: it copies text).
pub fn report(spoken: &str, output: &str, strictness: Strictness) -> Report {
    judge(spoken, output, strictness, true)
}

fn judge(spoken: &str, output: &str, strictness: Strictness, quote: bool) -> Report {
    let s = Text::new(spoken);
    let o = Text::new(output);
    let mut fidelity = Fidelity {
        checked: match strictness {
            Strictness::Strict => Checked::Edits,
            Strictness::Rewrite => Checked::Meaning,
            Strictness::Translate => Checked::Partial,
        },
        spoken_words: s.len(),
        output_words: o.len(),
        spoken_questions: s.questions(),
        output_questions: o.questions(),
        edits: EditCounts::default(),
    };
    let done =
        |fidelity: Fidelity, verdict: Result<(), Rejection>, edits: Vec<QuotedEdit>| Report {
            fidelity,
            verdict,
            edits,
        };
    if o.is_empty() && !s.is_empty() {
        return done(fidelity, Err(Rejection::Empty), Vec::new());
    }
    if s.len() > MAX_WORDS || o.len() > MAX_WORDS {
        return done(fidelity, Err(Rejection::TooLong), Vec::new());
    }
    let question = questions_kept(&s, &o, strictness);
    // The full alignment (every edit priced) only where its edits are needed: to name a
    // refused Tidy's change, or to quote them; a rewrite needs only to know whether the free
    // path exists.
    let alignment = if strictness == Strictness::Strict || quote {
        align(&s, &o)
    } else {
        match tidy::free_path(&s, &o) {
            Some(edits) => tidy::Alignment { cost: 0, edits },
            None => tidy::Alignment {
                cost: 1,
                edits: Vec::new(),
            },
        }
    };
    for e in &alignment.edits {
        let c = &mut fidelity.edits;
        match e.kind {
            EditKind::Filler => c.fillers += 1,
            EditKind::Discourse => c.discourse += 1,
            EditKind::Repetition => c.repetitions += 1,
            EditKind::FalseStart => c.false_starts += 1,
            EditKind::SpokenPunctuation => c.spoken_punctuation += 1,
            EditKind::Joined => c.joined += 1,
            EditKind::Conjunction => c.conjunctions += 1,
            EditKind::Dropped | EditKind::Added | EditKind::Changed => c.unlisted += 1,
        }
    }
    if alignment.cost > 0 {
        // A rewrite's edits are not priced one by one: at least one was not Tidy's.
        fidelity.edits.unlisted = fidelity.edits.unlisted.max(1);
    }
    let quoted = if quote {
        alignment
            .edits
            .iter()
            .map(|e| QuotedEdit {
                kind: e.kind,
                spoken: quote_tokens(&s, e.spoken.clone()),
                output: quote_tokens(&o, e.output.clone()),
            })
            .collect()
    } else {
        Vec::new()
    };
    if let Err(q) = question {
        return done(fidelity, Err(q), quoted);
    }
    if alignment.cost == 0 {
        fidelity.checked = Checked::Edits;
        return done(fidelity, Ok(()), quoted);
    }
    let verdict = match strictness {
        Strictness::Strict => Err(tidy_reason(&s, &o, &alignment.edits)),
        Strictness::Translate => meaning::judge_translation(&s, &o),
        Strictness::Rewrite => {
            let corrected = meaning::spoken_keep(&s, meaning::SpokenView::Corrected);
            meaning::judge_rewrite(&s, &corrected, &o).or_else(|first| {
                let plain = meaning::spoken_keep(&s, meaning::SpokenView::Plain);
                meaning::judge_rewrite(&s, &plain, &o).map_err(|_| first)
            })
        }
    };
    done(fidelity, verdict, quoted)
}

/// A question stays a question: the clean-up asks at least as many as were spoken, and asks
/// nothing the speaker stated.
fn questions_kept(s: &Text, o: &Text, strictness: Strictness) -> Result<(), Rejection> {
    let (asked, kept) = (s.questions(), o.questions());
    if kept >= asked {
        // No new question mark on words that do not ask (read in English only).
        if strictness != Strictness::Translate && o.unopened_questions() > s.unopened_questions() {
            return Err(Rejection::QuestionAdded);
        }
        return Ok(());
    }
    let yes_or_no = |t: &Text| {
        t.tokens
            .iter()
            .filter(|x| lexicon::is_in(lexicon::YES, &x.key) || x.key == "no" || x.key == "sure")
            .count()
    };
    if yes_or_no(o) > yes_or_no(s) {
        Err(Rejection::QuestionAnswered)
    } else {
        Err(Rejection::QuestionChanged)
    }
}

/// Names the kind of change for a refused Tidy from the unlisted edits.
fn tidy_reason(s: &Text, o: &Text, edits: &[tidy::Edit]) -> Rejection {
    const ORDER: [Rejection; 11] = [
        Rejection::NegationChanged,
        Rejection::YesNoChanged,
        Rejection::NumbersChanged,
        Rejection::DateChanged,
        Rejection::NameChanged,
        Rejection::PersonChanged,
        Rejection::ModalityChanged,
        Rejection::DirectionChanged,
        Rejection::QuantityChanged,
        Rejection::OppositeWord,
        Rejection::WordsChanged,
    ];
    let unlisted: Vec<&tidy::Edit> = edits.iter().filter(|e| !e.kind.listed()).collect();
    // Words after everything that was spoken: whatever they say, they were added.
    let all = |k: EditKind| unlisted.iter().all(|e| e.kind == k);
    if all(EditKind::Added) && unlisted.iter().all(|e| e.spoken.start == s.len()) {
        let new_sentence = unlisted
            .first()
            .is_some_and(|e| o.tokens[e.output.start].sentence_start);
        return if new_sentence {
            Rejection::SentenceAdded
        } else {
            Rejection::WordsAdded
        };
    }
    // Most of what was said is gone: that is the change, whatever the words were.
    let lost: usize = unlisted
        .iter()
        .filter(|e| e.kind != EditKind::Added)
        .map(|e| e.spoken.len())
        .sum();
    if lost * 2 > s.len() {
        return Rejection::WordsMissing;
    }
    let mut found: Vec<Rejection> = Vec::new();
    // A word changed, added or dropped here and there names its kind; a long stretch
    // dropped or added is words missing or added, whatever it held.
    for e in unlisted
        .iter()
        .filter(|e| e.spoken.len() <= 3 && e.output.len() <= 3)
    {
        for i in e.spoken.clone() {
            found.extend(meaning::class_of(&s.tokens, i));
        }
        for j in e.output.clone() {
            found.extend(meaning::class_of(&o.tokens, j));
        }
    }
    if let Some(r) = ORDER.iter().find(|r| found.contains(r)) {
        return *r;
    }
    if all(EditKind::Added) {
        Rejection::WordsAdded
    } else if all(EditKind::Dropped) {
        Rejection::WordsMissing
    } else {
        Rejection::WordsChanged
    }
}

fn quote_tokens(t: &Text, range: std::ops::Range<usize>) -> String {
    if range.is_empty() {
        return String::new();
    }
    let (Some(a), Some(b)) = (t.tokens.get(range.start), t.tokens.get(range.end - 1)) else {
        return String::new();
    };
    t.source
        .get(a.span.start..b.span.end)
        .unwrap_or("")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn verdict(spoken: &str, output: &str, s: Strictness) -> Result<(), &'static str> {
        check(spoken, output, s).1.map_err(Rejection::code)
    }

    const ALL_MODES: [Strictness; 3] = [
        Strictness::Strict,
        Strictness::Rewrite,
        Strictness::Translate,
    ];

    #[test]
    fn every_code_round_trips_and_says_a_sentence() {
        for r in Rejection::ALL {
            assert_eq!(Rejection::from_code(r.code()), Some(r));
            assert!(r.to_string().starts_with(r.code()));
            assert!(r.sentence().ends_with('.'));
        }
    }

    #[test]
    fn a_tidy_that_keeps_the_words_passes() {
        let spoken = "um so I I think we should uh move the meeting to Friday at three";
        let tidy = "I think we should move the meeting to Friday at 3.";
        assert_eq!(verdict(spoken, tidy, Strictness::Strict), Ok(()));
        for s in ALL_MODES {
            assert_eq!(verdict(spoken, spoken, s), Ok(()));
        }
    }

    #[test]
    fn the_peers_failures_are_refused() {
        let strict = Strictness::Strict;
        assert!(
            verdict(
                "what is the capital of France",
                "The capital of France is Paris.",
                strict
            )
            .is_err()
        );
        assert!(verdict(
            "please send the report to Anna by Monday",
            "Sure! Here is a cleaned version of your request, with improved grammar and punctuation for clarity.",
            strict
        )
        .is_err());
        assert_eq!(
            verdict("we need twenty five chairs", "We need 52 chairs.", strict),
            Err("cleanup.numbers-changed")
        );
        assert_eq!(
            verdict("thanks for the update", "", strict),
            Err("cleanup.empty")
        );
    }

    #[test]
    fn the_stored_figures_hold_no_words() {
        let (f, _) = check("so um call me back", "Call me back.", Strictness::Strict);
        let json = serde_json::to_string(&f).expect("json");
        assert!(!json.contains("call"), "{json}");
        assert_eq!(f.edits.fillers, 1);
        assert_eq!(f.edits.discourse, 1);
    }

    #[test]
    fn over_long_texts_are_refused_before_any_table() {
        let long = "word ".repeat(MAX_WORDS + 1);
        assert_eq!(
            verdict(&long, &long, Strictness::Strict),
            Err("cleanup.too-long")
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The identity passes every mode.
        #[test]
        fn identity_is_accepted(text in "[a-zA-Z0-9 ,.']{0,200}") {
            for s in ALL_MODES {
                let (f, v) = check(&text, &text, s);
                prop_assert!(v.is_ok(), "{:?} {:?}", s, f);
            }
        }

        /// Deleting only fillers passes every mode.
        #[test]
        fn deleting_fillers_is_accepted(
            picks in proptest::collection::vec((0usize..12, any::<bool>()), 1..60),
        ) {
            let vocab = ["send", "the", "report", "to", "Anna", "by", "Monday", "42",
                "meeting", "notes", "please", "seven"];
            let mut spoken = Vec::new();
            let mut clean = Vec::new();
            for (i, filler) in picks {
                if filler {
                    spoken.push("uh");
                }
                spoken.push(vocab[i]);
                clean.push(vocab[i]);
            }
            for s in ALL_MODES {
                let (f, v) = check(&spoken.join(" "), &clean.join(" "), s);
                prop_assert!(v.is_ok(), "{:?} {:?}", s, f);
            }
        }

        /// A "not" dropped anywhere from a Tidy or a rewrite is refused as a negation change.
        #[test]
        fn a_dropped_not_is_always_refused(
            // Consonants only: no English word that is itself a cue, a filler or a negation.
            words in proptest::collection::vec("[b-df-hj-np-tv-z]{2,8}", 2..30),
            at in 0usize..30,
        ) {
            let at = at % words.len();
            let mut spoken = words.clone();
            spoken.insert(at, "not".to_owned());
            let spoken = spoken.join(" ");
            let output = words.join(" ");
            for s in [Strictness::Strict, Strictness::Rewrite] {
                prop_assert_eq!(verdict(&spoken, &output, s), Err("cleanup.negation-changed"));
            }
        }
    }
}
