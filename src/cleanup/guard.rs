//! The fidelity guard: does a clean-up still say what was spoken? Every model output passes
//! it before it may be pasted; what fails is stored as a rejected attempt and the spoken
//! words are delivered instead.
//!
//! Both texts are reduced to normalized words: lower case, contractions spelled out ("don't"
//! → "do not"), fillers dropped ("um", "uh"), number words as digits ("twenty five" → "25",
//! "1,000" → "1000"). On those words it measures:
//! - **recall**: the share of the spoken *content* words (stop words aside) found in the
//!   output in the same order (longest common subsequence);
//! - **novelty**: the share of the output's content words that were never spoken;
//! - **length ratio**: output words / spoken words;
//! - **numbers**: the multiset of numbers, which must be equal.
//!
//! Invariants:
//! - Pure and deterministic; no text leaves this module except in the caller's hands, and a
//!   [`Rejection`] carries codes and figures, never words.
//! - The identity passes every mode; dropping only fillers passes every mode.
//! - Memory is linear in the longer text (the LCS keeps one row).

use std::collections::HashMap;

/// How much a mode may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Strictness {
    /// Tidy: fillers, false starts, punctuation; every content word stays.
    Strict,
    /// Polish, Email, custom prompts: wording may change, the content may not.
    Rewrite,
    /// Translate: other words by design; numbers and length still checked.
    Translate,
}

/// The limits for one strictness.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub min_recall: f64,
    pub max_novelty: f64,
    pub min_length_ratio: f64,
    pub max_length_ratio: f64,
}

impl Strictness {
    pub fn thresholds(self) -> Thresholds {
        match self {
            Strictness::Strict => Thresholds {
                min_recall: 0.9,
                max_novelty: 0.15,
                min_length_ratio: 0.6,
                max_length_ratio: 1.3,
            },
            Strictness::Rewrite => Thresholds {
                min_recall: 0.6,
                max_novelty: 0.5,
                min_length_ratio: 0.4,
                max_length_ratio: 2.0,
            },
            Strictness::Translate => Thresholds {
                min_recall: 0.0,
                max_novelty: 1.0,
                min_length_ratio: 0.5,
                max_length_ratio: 2.0,
            },
        }
    }

    /// Whether an accepted output counts as rewritten (shown so in history).
    pub fn rewrites(self) -> bool {
        !matches!(self, Strictness::Strict)
    }
}

/// What the guard measured (stored in the clean-up's details).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fidelity {
    pub recall: f64,
    pub novelty: f64,
    pub length_ratio: f64,
    pub numbers_equal: bool,
    pub spoken_words: usize,
    pub output_words: usize,
}

/// Why an output was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    #[error("cleanup.words-missing: spoken content words are missing from the clean-up")]
    WordsMissing,
    #[error("cleanup.words-added: the clean-up says things that were not spoken")]
    WordsAdded,
    #[error("cleanup.length: the clean-up is much shorter or longer than what was spoken")]
    Length,
    #[error("cleanup.numbers-changed: the numbers differ from the spoken ones")]
    NumbersChanged,
    #[error("cleanup.empty: the clean-up has no words")]
    Empty,
}

impl Rejection {
    pub fn code(self) -> &'static str {
        match self {
            Rejection::WordsMissing => "cleanup.words-missing",
            Rejection::WordsAdded => "cleanup.words-added",
            Rejection::Length => "cleanup.length",
            Rejection::NumbersChanged => "cleanup.numbers-changed",
            Rejection::Empty => "cleanup.empty",
        }
    }
}

/// Measures `output` against `spoken`.
pub fn measure(spoken: &str, output: &str) -> Fidelity {
    let s = normalize(spoken);
    let o = normalize(output);
    let sc: Vec<&str> = content(&s);
    let oc: Vec<&str> = content(&o);
    let recall = if sc.is_empty() {
        1.0
    } else {
        lcs(&sc, &oc) as f64 / sc.len() as f64
    };
    let novelty = if oc.is_empty() {
        0.0
    } else {
        let mut have: HashMap<&str, usize> = HashMap::new();
        for w in &sc {
            *have.entry(w).or_default() += 1;
        }
        let mut novel = 0usize;
        for w in &oc {
            match have.get_mut(w) {
                Some(n) if *n > 0 => *n -= 1,
                _ => novel += 1,
            }
        }
        novel as f64 / oc.len() as f64
    };
    let length_ratio = if s.is_empty() {
        if o.is_empty() { 1.0 } else { f64::INFINITY }
    } else {
        o.len() as f64 / s.len() as f64
    };
    Fidelity {
        recall,
        novelty,
        length_ratio,
        numbers_equal: numbers(&s) == numbers(&o),
        spoken_words: s.len(),
        output_words: o.len(),
    }
}

/// Accepts or refuses measured figures under `strictness`.
pub fn judge(f: &Fidelity, strictness: Strictness) -> Result<(), Rejection> {
    let t = strictness.thresholds();
    if f.output_words == 0 && f.spoken_words > 0 {
        return Err(Rejection::Empty);
    }
    if !f.numbers_equal {
        return Err(Rejection::NumbersChanged);
    }
    if f.recall < t.min_recall {
        return Err(Rejection::WordsMissing);
    }
    if f.novelty > t.max_novelty {
        return Err(Rejection::WordsAdded);
    }
    if !(t.min_length_ratio..=t.max_length_ratio).contains(&f.length_ratio) {
        return Err(Rejection::Length);
    }
    Ok(())
}

/// Measures and judges in one step.
pub fn check(
    spoken: &str,
    output: &str,
    strictness: Strictness,
) -> (Fidelity, Result<(), Rejection>) {
    let f = measure(spoken, output);
    let verdict = judge(&f, strictness);
    (f, verdict)
}

const FILLERS: &[&str] = &[
    "um", "umm", "uh", "uhh", "uhm", "er", "erm", "ah", "ahh", "hmm", "hm", "mm", "mhm",
];

const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "so", "of", "to", "in", "on", "at", "by", "for", "with",
    "from", "as", "is", "are", "was", "were", "be", "been", "am", "it", "its", "this", "that",
    "these", "those", "i", "you", "he", "she", "we", "they", "me", "him", "her", "us", "them",
    "my", "your", "our", "their", "his", "do", "does", "did", "have", "has", "had", "will",
    "would", "can", "could", "should", "just", "then", "there", "here", "if", "not", "no", "yes",
    "oh", "well", "okay", "ok", "like", "really", "very", "also", "too",
];

/// Normalized words of `text`.
pub fn normalize(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for raw in split_words(text) {
        let lower: String = raw
            .chars()
            .flat_map(char::to_lowercase)
            .map(|c| if c == '’' { '\'' } else { c })
            .collect();
        if FILLERS.contains(&lower.as_str()) {
            continue;
        }
        expand(&lower, &mut words);
    }
    numbers_as_digits(words)
}

/// Words for the guard: letters, digits, and apostrophes, dots or commas inside a word (so
/// "don't", "3.5" and "1,000" stay whole).
fn split_words(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let inner = |i: usize| -> bool {
        let c = chars[i].1;
        if c.is_alphanumeric() {
            return true;
        }
        let between = i > 0
            && i + 1 < chars.len()
            && chars[i - 1].1.is_alphanumeric()
            && chars[i + 1].1.is_alphanumeric();
        match c {
            '\'' | '’' => between,
            '.' | ',' => {
                between && chars[i - 1].1.is_ascii_digit() && chars[i + 1].1.is_ascii_digit()
            }
            _ => false,
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !inner(i) {
            i += 1;
            continue;
        }
        let start = chars[i].0;
        let mut j = i;
        while j < chars.len() && inner(j) {
            j += 1;
        }
        let end = chars.get(j).map_or(text.len(), |c| c.0);
        out.push(&text[start..end]);
        i = j;
    }
    out
}

/// Spells out contractions; drops a possessive "'s".
fn expand(word: &str, out: &mut Vec<String>) {
    let special = match word {
        "won't" => Some(["will", "not"]),
        "can't" => Some(["can", "not"]),
        "shan't" => Some(["shall", "not"]),
        "cannot" => Some(["can", "not"]),
        _ => None,
    };
    if let Some(pair) = special {
        out.extend(pair.iter().map(|w| (*w).to_owned()));
        return;
    }
    for (suffix, full) in [
        ("n't", "not"),
        ("'re", "are"),
        ("'m", "am"),
        ("'ve", "have"),
        ("'ll", "will"),
        ("'d", "would"),
    ] {
        if let Some(stem) = word.strip_suffix(suffix)
            && !stem.is_empty()
        {
            out.push(stem.to_owned());
            out.push(full.to_owned());
            return;
        }
    }
    if let Some(stem) = word.strip_suffix("'s")
        && !stem.is_empty()
    {
        out.push(stem.to_owned());
        return;
    }
    if word.chars().any(|c| c.is_ascii_digit()) {
        // "1,000" → "1000"; "25th" → "25".
        let digits: String = word.chars().filter(|c| *c != ',').collect();
        let trimmed = ["st", "nd", "rd", "th"]
            .iter()
            .find_map(|s| digits.strip_suffix(s).filter(|d| is_number(d)))
            .unwrap_or(&digits);
        out.push(trimmed.to_owned());
        return;
    }
    out.push(word.to_owned());
}

fn is_number(w: &str) -> bool {
    !w.is_empty()
        && w.chars().all(|c| c.is_ascii_digit() || c == '.')
        && w.chars().next().is_some_and(|c| c.is_ascii_digit())
        && w.chars().last().is_some_and(|c| c.is_ascii_digit())
}

fn small_number(w: &str) -> Option<u64> {
    const UNITS: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const ORDINALS: [&str; 20] = [
        "zeroth",
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "eleventh",
        "twelfth",
        "thirteenth",
        "fourteenth",
        "fifteenth",
        "sixteenth",
        "seventeenth",
        "eighteenth",
        "nineteenth",
    ];
    const TENS: [&str; 8] = [
        "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    const TENS_ORD: [&str; 8] = [
        "twentieth",
        "thirtieth",
        "fortieth",
        "fiftieth",
        "sixtieth",
        "seventieth",
        "eightieth",
        "ninetieth",
    ];
    // "second" is a unit of time far more often than an ordinal: left as a word.
    if w == "second" {
        return None;
    }
    if let Some(i) = UNITS.iter().position(|u| *u == w) {
        return Some(i as u64);
    }
    if let Some(i) = ORDINALS.iter().position(|u| *u == w) {
        return Some(i as u64);
    }
    if let Some(i) = TENS.iter().position(|u| *u == w) {
        return Some(20 + 10 * i as u64);
    }
    TENS_ORD
        .iter()
        .position(|u| *u == w)
        .map(|i| 20 + 10 * i as u64)
}

fn scale(w: &str) -> Option<u64> {
    match w {
        "hundred" | "hundredth" => Some(100),
        "thousand" | "thousandth" => Some(1_000),
        "million" | "millionth" => Some(1_000_000),
        "billion" | "billionth" => Some(1_000_000_000),
        _ => None,
    }
}

/// Folds runs of number words into one digit string ("twenty five" → "25", "two hundred
/// and six" → "206"); a run joined with "-" ("twenty-five") counts the same.
fn numbers_as_digits(words: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let parts: Vec<&str> = words[i].split('-').collect();
        if parts
            .iter()
            .all(|p| small_number(p).is_some() || scale(p).is_some())
            && small_number(parts[0]).is_some()
        {
            // Collect the run: number words, scales, and "and" between them.
            let mut run: Vec<&str> = Vec::new();
            let mut j = i;
            while j < words.len() {
                let ps: Vec<&str> = words[j].split('-').collect();
                let numeric = ps
                    .iter()
                    .all(|p| small_number(p).is_some() || scale(p).is_some());
                let and_inside = words[j] == "and"
                    && !run.is_empty()
                    && words
                        .get(j + 1)
                        .is_some_and(|n| small_number(n.split('-').next().unwrap_or("")).is_some())
                    && run.last().is_some_and(|l| scale(l).is_some());
                if numeric {
                    run.extend(ps);
                } else if !and_inside {
                    break;
                }
                j += 1;
            }
            out.push(value_of(&run).to_string());
            i = j;
        } else {
            out.push(words[i].clone());
            i += 1;
        }
    }
    out
}

fn value_of(run: &[&str]) -> u64 {
    let mut total: u64 = 0;
    let mut current: u64 = 0;
    for w in run {
        if let Some(n) = small_number(w) {
            current = current.saturating_add(n);
        } else if let Some(s) = scale(w) {
            if s == 100 {
                current = current.max(1).saturating_mul(100);
            } else {
                total = total.saturating_add(current.max(1).saturating_mul(s));
                current = 0;
            }
        }
    }
    total.saturating_add(current)
}

fn content(words: &[String]) -> Vec<&str> {
    words
        .iter()
        .map(String::as_str)
        .filter(|w| !STOP_WORDS.contains(w))
        .collect()
}

fn numbers(words: &[String]) -> Vec<&str> {
    let mut n: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| is_number(w))
        .collect();
    n.sort_unstable();
    n
}

/// Length of the longest common subsequence, one row of memory.
fn lcs(a: &[&str], b: &[&str]) -> usize {
    let mut row = vec![0usize; b.len() + 1];
    for x in a {
        let mut diag = 0;
        for (j, y) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if x == y { diag + 1 } else { up.max(row[j]) };
            diag = up;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn verdict(spoken: &str, output: &str, s: Strictness) -> Result<(), &'static str> {
        check(spoken, output, s).1.map_err(Rejection::code)
    }

    #[test]
    fn normalizes_fillers_contractions_and_numbers() {
        assert_eq!(
            normalize("Um, I don't think twenty-five is 1,000, uh, right?"),
            ["i", "do", "not", "think", "25", "is", "1000", "right"]
        );
        assert_eq!(normalize("two hundred and six people"), ["206", "people"]);
        assert_eq!(normalize("three thousand four hundred"), ["3400"]);
        assert_eq!(
            normalize("the 25th and the twenty fifth"),
            ["the", "25", "and", "the", "25"]
        );
        assert_eq!(normalize("one and two"), ["1", "and", "2"]);
        assert_eq!(normalize("wait a second"), ["wait", "a", "second"]);
        assert_eq!(normalize("3.5 percent"), ["3.5", "percent"]);
    }

    /// What a good Tidy does: fillers and a false start out, punctuation in.
    #[test]
    fn a_tidy_that_keeps_the_words_passes() {
        let spoken = "um so I I think we should uh move the meeting to Friday at three";
        let tidy = "I think we should move the meeting to Friday at 3.";
        assert_eq!(verdict(spoken, tidy, Strictness::Strict), Ok(()));
        assert_eq!(verdict(spoken, spoken, Strictness::Strict), Ok(()));
    }

    /// The peers' real failures: each is refused.
    #[test]
    fn the_peers_failures_are_refused() {
        let strict = Strictness::Strict;
        // Answering the question instead of cleaning it (Handy #1201, VoiceInk #349).
        assert_eq!(
            verdict(
                "what is the capital of France",
                "The capital of France is Paris.",
                strict
            ),
            Err("cleanup.words-missing")
        );
        // Explaining.
        assert_eq!(
            verdict(
                "please send the report to Anna by Monday",
                "Sure! Here is a cleaned version of your request, with improved grammar and punctuation for clarity.",
                strict
            ),
            Err("cleanup.words-missing")
        );
        // Schema text pasted.
        assert_eq!(
            verdict(
                "remind me to call the dentist tomorrow morning",
                "{\"cleaned_text\": \"string\", \"changes\": []}",
                strict
            ),
            Err("cleanup.words-missing")
        );
        // A dropped sentence (VoiceInk #318).
        assert_eq!(
            verdict(
                "The build is green. The release goes out on Tuesday. Tell the support team. Update the website afterwards.",
                "The build is green. The release goes out on Tuesday. Update the website afterwards.",
                strict
            ),
            Err("cleanup.words-missing")
        );
        // A changed number.
        assert_eq!(
            verdict("we need 25 chairs", "We need 52 chairs.", strict),
            Err("cleanup.numbers-changed")
        );
        assert_eq!(
            verdict("we need twenty five chairs", "We need 52 chairs.", strict),
            Err("cleanup.numbers-changed")
        );
        // Runaway length.
        let spoken = "thanks for the update on the budget";
        let long = format!(
            "{spoken} {}",
            "thanks for the update on the budget ".repeat(3)
        );
        assert!(verdict(spoken, &long, strict).is_err());
        // Empty output.
        assert_eq!(verdict(spoken, "", strict), Err("cleanup.empty"));
        // Novel content even with all words kept.
        assert_eq!(
            verdict(
                "send the file to Bob",
                "Send the file to Bob. Also remember to buy milk, eggs, bread and coffee today.",
                strict
            ),
            Err("cleanup.words-added")
        );
    }

    #[test]
    fn rewrite_and_translate_are_looser_but_keep_numbers() {
        let spoken = "hey can you send me the numbers for Q3 by friday thanks";
        let email = "Hi,\n\nCould you send me the numbers for Q3 by Friday?\n\nThanks";
        assert_eq!(verdict(spoken, email, Strictness::Rewrite), Ok(()));
        assert!(Strictness::Rewrite.rewrites());
        let german = "Kannst du mir die Zahlen für Q3 bis Freitag schicken? Danke";
        assert_eq!(verdict(spoken, german, Strictness::Translate), Ok(()));
        assert_eq!(
            verdict(
                "we need 25 chairs",
                "Wir brauchen 52 Stühle",
                Strictness::Translate
            ),
            Err("cleanup.numbers-changed")
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The identity passes every mode.
        #[test]
        fn identity_is_accepted(text in "[a-zA-Z0-9 ,.']{0,200}") {
            for s in [Strictness::Strict, Strictness::Rewrite, Strictness::Translate] {
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
            let (f, v) = check(&spoken.join(" "), &clean.join(" "), Strictness::Strict);
            prop_assert!(v.is_ok(), "{:?}", f);
        }
    }
}
