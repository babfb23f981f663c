//! Vocabulary on the device: "Words Persyk should know" applied where the model misheard
//! them, and nowhere else.
//!
//! Whisper's prompt alone is the obvious tool and a bad one: put before every window, a list
//! of names changed the words of clips that hold none of them (measured on tiny.en and base,
//! docs/app.md). So the prompt is asked only as a second opinion, and only its verdict on
//! one stretch of words is taken:
//!
//! 1. A window is recognized **without** the prompt, as always.
//! 2. [`Vocabulary::suspects`] looks in that text for stretches of one to four words that
//!    *sound* like a listed entry (Double Metaphone keys of the words, compared by edit
//!    distance) without being written as it. No suspect, nothing more happens: a clip
//!    without a near-sound of a listed name is never decoded twice and never changes.
//! 3. With a suspect, the same audio is recognized again **with** the vocabulary as prompt,
//!    and [`Vocabulary::confirm`] aligns the two texts word by word: a suspect stretch is
//!    replaced by the entry only where the prompted text has exactly the entry's words in its
//!    place, between words both texts share. Every other difference the prompt made is
//!    ignored — the first text stands.
//!
//! Invariants:
//! - Only a suspect stretch changes, and only into a listed entry's own spelling; every other
//!   word, punctuation mark and the order of words is the unprompted recognition's.
//! - The words the model heard are kept: [`Confirmed::heard`] is the text before the change
//!   (stored beside the message, `replay.heard`).
//! - Matching is bounded whatever the list says (a hand-edited settings file reaches here
//!   too, and the settings refuse it on the way: `settings.bad-keyword`): entries of at most
//!   [`MAX_ENTRY_WORDS`] words and [`MAX_ENTRY_CHARS`] characters, at most [`MAX_ENTRIES`]
//!   of them (the limits the settings and the Realtime API keep), stretches of at most the
//!   entry's words plus two, and at most [`MAX_WORK_PER_TEXT`] units of comparison per text
//!   searched ([`Vocabulary::search`]): past it the search stops with what it found, so a
//!   pathological list costs a bounded time per window instead of a second.

use rphonetic::DoubleMetaphone;

/// Entries with more words are left out of matching (they still go to the prompt).
pub const MAX_ENTRY_WORDS: usize = 4;
/// The most entries matched against a text (the settings' limit on "Words Persyk should
/// know", `realtime::protocol::MAX_KEYWORDS`).
pub const MAX_ENTRIES: usize = 100;
/// Entries longer than this many characters are left out of matching (the settings' limit,
/// `realtime::protocol::MAX_KEYWORD_CHARS`).
pub const MAX_ENTRY_CHARS: usize = 100;
/// The comparison work one [`Vocabulary::search`] may do: the sum, over the pairs of keys
/// and of spellings compared, of the product of their lengths (the cells of an edit-distance
/// table). A list of 100 ordinary names against a 100-word window needs well under a tenth
/// of it (benches/local.rs, part 9); the worst list the limits allow stops there.
pub const MAX_WORK_PER_TEXT: u64 = 4_000_000;
/// How alike the phonetic keys of a stretch and an entry must at least be (1 − edit
/// distance / the longer key's length), their first sounds equal.
pub const SUSPECT_SOUNDS: f64 = 0.6;
/// The mean of that and the Jaro-Winkler similarity of the two spellings (letters only) a
/// stretch must reach to be a suspect. Set on the corpus: the misheard name scores 0.76, the
/// nearest innocent words ("fresh", "fairest" against "Persyk") 0.65–0.67. A suspect only
/// costs a second decode; the prompted decode decides what changes.
pub const SUSPECT_SIMILARITY: f64 = 0.7;
/// Keys shorter than this (in both the stretch and the entry) must match exactly: a
/// two-sound word is too easy to match by chance.
const SHORT_KEY: usize = 3;

/// The listed words, prepared for matching.
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    entries: Vec<Entry>,
    /// The entries by the first sound of either key (a suspect shares it).
    by_first_sound: std::collections::HashMap<u8, Vec<usize>>,
}

#[derive(Debug, Clone)]
struct Entry {
    /// As the user wrote it ("Siobhan Kowalczyk").
    written: String,
    /// Its words, normalized ([`normal`]).
    words: Vec<String>,
    /// Its letters folded to ASCII, without spaces ("siobhankowalczyk").
    spelled: String,
    /// Its phonetic keys: every word's primary code joined, and every word's alternate.
    keys: [String; 2],
}

/// A stretch of a text that sounds like an entry: words `start..end` of the text's words
/// ([`words`]), entry `entry`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Suspect {
    pub start: usize,
    pub end: usize,
    entry: usize,
    similarity: f64,
}

/// What [`Vocabulary::search`] found in one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// The suspects, as [`Vocabulary::suspects`] returns them.
    pub suspects: Vec<Suspect>,
    /// Whether every stretch was compared with every candidate entry; `false` when the
    /// search stopped at [`MAX_WORK_PER_TEXT`].
    pub complete: bool,
}

/// The outcome of [`Vocabulary::confirm`] for one text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    /// The text with the confirmed stretches written as their entries.
    pub text: String,
    /// The text as the model heard it, unchanged.
    pub heard: String,
}

/// A run of a text's words as matched: its phonetic keys and its letters.
struct Stretch {
    keys: [String; 2],
    spelled: String,
}

/// One word of a text: where it sits among the whitespace-separated tokens and its
/// normalized form.
#[derive(Debug, Clone)]
struct Word {
    token: usize,
    normal: String,
}

impl Vocabulary {
    /// Prepares `listed` (blank entries, entries longer than [`MAX_ENTRY_WORDS`] words or
    /// [`MAX_ENTRY_CHARS`] characters, entries with a control character and entries without
    /// a letter are left out; at most [`MAX_ENTRIES`] are kept).
    pub fn new(listed: &[String]) -> Vocabulary {
        let coder = coder();
        let mut entries = Vec::new();
        for written in listed {
            let written = written.trim();
            if written.chars().count() > MAX_ENTRY_CHARS || written.chars().any(char::is_control) {
                continue;
            }
            let words: Vec<String> = written
                .split_whitespace()
                .map(normal)
                .filter(|w| !w.is_empty())
                .collect();
            if words.is_empty() || words.len() > MAX_ENTRY_WORDS {
                continue;
            }
            let keys = keys(&coder, &words);
            if keys[0].is_empty() {
                continue;
            }
            let spelled = words
                .iter()
                .flat_map(|w| w.chars().filter_map(fold))
                .collect();
            entries.push(Entry {
                written: written.to_owned(),
                spelled,
                words,
                keys,
            });
            if entries.len() == MAX_ENTRIES {
                break;
            }
        }
        let mut by_first_sound: std::collections::HashMap<u8, Vec<usize>> = Default::default();
        for (i, entry) in entries.iter().enumerate() {
            let mut firsts: Vec<u8> = entry
                .keys
                .iter()
                .filter_map(|k| k.as_bytes().first().copied())
                .collect();
            firsts.dedup();
            for b in firsts {
                by_first_sound.entry(b).or_default().push(i);
            }
        }
        Vocabulary {
            entries,
            by_first_sound,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Stretches of `text` that sound like an entry and are not written as it, in text
    /// order, none overlapping another (where two overlap, the more alike one is kept).
    pub fn suspects(&self, text: &str) -> Vec<Suspect> {
        self.search(text).suspects
    }

    /// [`Self::suspects`], and whether the search was complete: it stops once it has done
    /// [`MAX_WORK_PER_TEXT`] of comparison, keeping the suspects found until then.
    pub fn search(&self, text: &str) -> Search {
        if self.entries.is_empty() {
            return Search {
                suspects: Vec::new(),
                complete: true,
            };
        }
        let mut work = Work(MAX_WORK_PER_TEXT);
        let coder = coder();
        let words = words(text);
        let codes: Vec<[String; 2]> = words.iter().map(|w| code(&coder, &w.normal)).collect();
        // Every stretch's keys and letters, once (entries share them).
        let longest = self
            .entries
            .iter()
            .map(|e| e.words.len())
            .max()
            .unwrap_or(0)
            + 2;
        let stretches: Vec<Vec<Stretch>> = (0..words.len())
            .map(|start| {
                (start + 1..=(start + longest).min(words.len()))
                    .map(|end| Stretch {
                        keys: [0, 1].map(|i| {
                            codes[start..end]
                                .iter()
                                .map(|c| c[i].as_str())
                                .collect::<String>()
                        }),
                        spelled: words[start..end]
                            .iter()
                            .flat_map(|w| w.normal.chars().filter_map(fold))
                            .collect(),
                    })
                    .collect()
            })
            .collect();
        let mut found = Vec::new();
        // Per entry, where it is already written (nothing around that is a suspect of it),
        // found when the entry is first a candidate.
        let mut written: Vec<Option<Vec<usize>>> = vec![None; self.entries.len()];
        'search: for (start, from_here) in stretches.iter().enumerate() {
            for (len, stretch) in from_here.iter().enumerate() {
                let end = start + len + 1;
                let firsts = stretch
                    .keys
                    .each_ref()
                    .map(|k| k.as_bytes().first().copied());
                let mut candidates: Vec<usize> = firsts
                    .iter()
                    .flatten()
                    .filter_map(|b| self.by_first_sound.get(b))
                    .flatten()
                    .copied()
                    .collect();
                candidates.sort_unstable();
                candidates.dedup();
                for e in candidates {
                    let entry = &self.entries[e];
                    let n = entry.words.len();
                    if end - start > n + 2 {
                        continue;
                    }
                    // A stretch that begins or ends with a function word ("to thine", "married
                    // a") is that word and something else, not a misheard name — unless the
                    // entry itself begins or ends with it.
                    let first = &words[start].normal;
                    let last = &words[end - 1].normal;
                    if (is_function_word(first) && entry.words.first() != Some(first))
                        || (is_function_word(last) && entry.words.last() != Some(last))
                    {
                        continue;
                    }
                    let at = written[e].get_or_insert_with(|| {
                        (0..words.len().saturating_sub(n - 1))
                            .filter(|&i| {
                                words[i..i + n]
                                    .iter()
                                    .map(|w| w.normal.as_str())
                                    .eq(entry.words.iter().map(String::as_str))
                            })
                            .collect()
                    });
                    if at.iter().any(|&w| start < w + n && w < end) {
                        continue;
                    }
                    let Some(sounds) = best_similarity(&stretch.keys, &entry.keys, &mut work)
                    else {
                        break 'search;
                    };
                    if sounds < SUSPECT_SOUNDS {
                        continue;
                    }
                    if !work.spend(stretch.spelled.len(), entry.spelled.len()) {
                        break 'search;
                    }
                    let similarity =
                        (sounds + strsim::jaro_winkler(&stretch.spelled, &entry.spelled)) / 2.0;
                    if similarity >= SUSPECT_SIMILARITY {
                        found.push(Suspect {
                            start,
                            end,
                            entry: e,
                            similarity,
                        });
                    }
                }
            }
        }
        // Best first; then the shorter stretch, then the earlier.
        found.sort_by(|a, b| {
            b.similarity
                .total_cmp(&a.similarity)
                .then((a.end - a.start).cmp(&(b.end - b.start)))
                .then(a.start.cmp(&b.start))
        });
        let mut kept: Vec<Suspect> = Vec::new();
        for s in found {
            if kept.iter().all(|k| s.end <= k.start || s.start >= k.end) {
                kept.push(s);
            }
        }
        kept.sort_by_key(|s| s.start);
        if std::env::var_os("VOCAB_WORK").is_some() {
            eprintln!("work {}", MAX_WORK_PER_TEXT - work.0);
        }
        Search {
            suspects: kept,
            complete: !work.spent(),
        }
    }

    /// `heard` (recognized without the prompt) with each of its `suspects` written as its
    /// entry where `prompted` (the same audio recognized with the vocabulary as prompt)
    /// confirms it; `None` when nothing is confirmed.
    pub fn confirm(&self, heard: &str, suspects: &[Suspect], prompted: &str) -> Option<Confirmed> {
        let a = words(heard);
        let b = words(prompted);
        let pairs = align(&a, &b);
        // For each word of `a`, the word of `b` it is paired with.
        let mut partner = vec![None; a.len()];
        for &(i, j) in &pairs {
            partner[i] = Some(j);
        }
        let tokens: Vec<&str> = heard.split_whitespace().collect();
        let mut replaced: Vec<Option<String>> = vec![None; tokens.len()];
        let mut dropped = vec![false; tokens.len()];
        let mut any = false;
        for s in suspects {
            let Some(entry) = self.entries.get(s.entry) else {
                continue;
            };
            if s.end > a.len() || (s.start..s.end).any(|i| partner[i].is_some()) {
                continue;
            }
            // The words of `b` between the shared words around the stretch.
            let from = match s.start {
                0 => Some(0),
                i => partner[i - 1].map(|j| j + 1),
            };
            let to = match s.end {
                e if e == a.len() => Some(b.len()),
                e => partner[e],
            };
            let (Some(from), Some(to)) = (from, to) else {
                continue;
            };
            if from > to {
                continue;
            }
            let between = b[from..to].iter().map(|w| w.normal.as_str());
            if !between.eq(entry.words.iter().map(String::as_str)) {
                continue;
            }
            let first = a[s.start].token;
            let last = a[s.end - 1].token;
            let lead: String = tokens[first]
                .chars()
                .take_while(|c| !c.is_alphanumeric())
                .collect();
            let trail = trailing_punctuation(tokens[last]);
            replaced[first] = Some(format!("{lead}{}{trail}", entry.written));
            for d in dropped.iter_mut().take(last + 1).skip(first + 1) {
                *d = true;
            }
            any = true;
        }
        if !any {
            return None;
        }
        let mut out: Vec<String> = Vec::with_capacity(tokens.len());
        for (i, token) in tokens.iter().enumerate() {
            if dropped[i] {
                continue;
            }
            out.push(replaced[i].clone().unwrap_or_else(|| (*token).to_owned()));
        }
        let lead = &heard[..heard.len() - heard.trim_start().len()];
        Some(Confirmed {
            text: format!("{lead}{}", out.join(" ")),
            heard: heard.to_owned(),
        })
    }
}

/// The Double Metaphone code of a normalized word (primary, alternate), from its letters
/// folded to ASCII (the coder reads bytes; "Zoë" is coded as "Zoe").
fn code(coder: &DoubleMetaphone, word: &str) -> [String; 2] {
    let ascii: String = word.chars().filter_map(fold).collect();
    if ascii.is_empty() {
        return [String::new(), String::new()];
    }
    let r = coder.double_metaphone(&ascii);
    [coarse(&r.primary()), coarse(&r.alternate())]
}

/// A Double Metaphone code with sounds a listener (and Whisper) easily confuses made one:
/// P and F (so B, V), S and X (SH), T and TH (`0`), K and J.
fn coarse(code: &str) -> String {
    code.chars()
        .map(|c| match c {
            'F' => 'P',
            'X' => 'S',
            '0' => 'T',
            'J' => 'K',
            c => c,
        })
        .collect()
}

/// English function words: articles, pronouns, prepositions, conjunctions and auxiliaries
/// (with the archaic forms read aloud in the corpus), which no misheard name begins or ends
/// with.
const FUNCTION_WORDS: &[&str] = &[
    "a", "about", "after", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but",
    "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her",
    "him", "his", "i", "if", "in", "into", "is", "it", "its", "may", "me", "might", "must", "my",
    "no", "not", "of", "on", "or", "our", "shall", "she", "should", "so", "than", "that", "the",
    "thee", "their", "them", "then", "there", "these", "they", "thine", "this", "those", "thou",
    "thy", "to", "too", "up", "us", "was", "we", "were", "what", "when", "which", "who", "will",
    "with", "would", "you", "your",
];

fn is_function_word(word: &str) -> bool {
    FUNCTION_WORDS.binary_search(&word).is_ok()
}

/// A lower-case letter as the ASCII letter it is read as (accents dropped); `None` for
/// anything else (digits, apostrophes, scripts Double Metaphone does not read).
fn fold(c: char) -> Option<char> {
    if c.is_ascii_lowercase() {
        return Some(c);
    }
    Some(match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => 'a',
        'ç' | 'ć' | 'č' => 'c',
        'ď' | 'đ' => 'd',
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ė' | 'ę' | 'ě' => 'e',
        'ğ' => 'g',
        'ì' | 'í' | 'î' | 'ï' | 'ī' | 'į' | 'ı' => 'i',
        'ł' | 'ľ' => 'l',
        'ñ' | 'ń' | 'ň' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ő' => 'o',
        'ř' => 'r',
        'ś' | 'š' | 'ş' | 'ß' => 's',
        'ť' | 'ţ' => 't',
        'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' | 'ű' => 'u',
        'ý' | 'ÿ' => 'y',
        'ź' | 'ż' | 'ž' => 'z',
        _ => return None,
    })
}

/// A Double Metaphone coder with codes long enough for a whole name.
fn coder() -> DoubleMetaphone {
    DoubleMetaphone::new(Some(24))
}

/// An entry's keys: every word's primary code joined, and every word's alternate joined.
fn keys(coder: &DoubleMetaphone, words: &[String]) -> [String; 2] {
    let mut primary = String::new();
    let mut alternate = String::new();
    for w in words {
        let [p, a] = code(coder, w);
        primary.push_str(&p);
        alternate.push_str(&a);
    }
    [primary, alternate]
}

/// What is left of a search's comparison work ([`MAX_WORK_PER_TEXT`]).
struct Work(u64);

impl Work {
    /// Takes the work of comparing strings of `a` and `b` bytes; `false` (and nothing
    /// left) when there is not enough.
    fn spend(&mut self, a: usize, b: usize) -> bool {
        let cost = (a.max(1) as u64).saturating_mul(b.max(1) as u64);
        match self.0.checked_sub(cost) {
            Some(left) => {
                self.0 = left;
                true
            }
            None => {
                self.0 = 0;
                false
            }
        }
    }

    fn spent(&self) -> bool {
        self.0 == 0
    }
}

/// The best similarity between any key of a stretch and any key of an entry; `None` when
/// `work` ran out before every pair was measured.
fn best_similarity(span: &[String; 2], entry: &[String; 2], work: &mut Work) -> Option<f64> {
    let mut best: f64 = 0.0;
    for s in span {
        for e in entry {
            if s.is_empty() || e.is_empty() {
                continue;
            }
            // A misheard name keeps its first sound ("Siobhan" heard as "Shivon").
            if s.as_bytes()[0] != e.as_bytes()[0] {
                continue;
            }
            // Codes are ASCII. The distance is at least the difference in length: a pair
            // that cannot reach the threshold is not measured.
            let longest = s.len().max(e.len());
            let shortest = s.len().min(e.len());
            if ((longest - shortest) as f64) > (1.0 - SUSPECT_SOUNDS) * longest as f64 {
                continue;
            }
            if longest < SHORT_KEY {
                if s == e {
                    best = best.max(1.0);
                }
                continue;
            }
            if !work.spend(s.len(), e.len()) {
                return None;
            }
            let d = strsim::levenshtein(s, e);
            best = best.max(1.0 - d as f64 / longest as f64);
        }
    }
    Some(best)
}

/// A word as compared: lower case, letters, digits and inner apostrophes only.
fn normal(token: &str) -> String {
    let kept: String = token
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '\'' || *c == '’')
        .flat_map(char::to_lowercase)
        .collect();
    kept.trim_matches(['\'', '’']).to_owned()
}

/// The words of `text`: its whitespace-separated tokens that hold a letter or digit.
fn words(text: &str) -> Vec<Word> {
    text.split_whitespace()
        .enumerate()
        .filter_map(|(token, t)| {
            let normal = normal(t);
            (!normal.is_empty()).then_some(Word { token, normal })
        })
        .collect()
}

/// What follows a token's last letter or digit ("Kzik." → ".").
fn trailing_punctuation(token: &str) -> &str {
    let end = token
        .char_indices()
        .rfind(|(_, c)| c.is_alphanumeric())
        .map_or(0, |(i, c)| i + c.len_utf8());
    &token[end..]
}

/// The longest common subsequence of two word lists, as index pairs in order.
fn align(a: &[Word], b: &[Word]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let mut table = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            table[at(i, j)] = if a[i].normal == b[j].normal {
                table[at(i + 1, j + 1)] + 1
            } else {
                table[at(i + 1, j)].max(table[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut pairs = Vec::new();
    while i < n && j < m {
        if a[i].normal == b[j].normal {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if table[at(i + 1, j)] >= table[at(i, j + 1)] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary(words: &[&str]) -> Vocabulary {
        Vocabulary::new(&words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn a_misheard_name_is_a_suspect_and_a_written_one_is_not() {
        let v = vocabulary(&["Siobhan Kowalczyk", "Kubernetes"]);
        let heard = " Please send the quarterly report to Shivon Kao Kzik before Thursday.";
        let s = v.suspects(heard);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!((s[0].start, s[0].end), (6, 9));
        assert!(
            v.suspects("Please send it to Siobhan Kowalczyk today.")
                .is_empty()
        );
        assert!(v.suspects("The cat sat on the mat.").is_empty());
    }

    #[test]
    fn a_confirmed_suspect_takes_the_listed_spelling_and_nothing_else_changes() {
        let v = vocabulary(&["Siobhan Kowalczyk"]);
        let heard = " Please send the quarterly report to Shivon Kao Kzik before Thursday.";
        // The prompted decode also changed "quarterly" and the full stop: ignored.
        let prompted = " Please send the quartly report to Siobhan Kowalczyk before Thursday!";
        let s = v.suspects(heard);
        let c = v.confirm(heard, &s, prompted).expect("confirmed");
        assert_eq!(
            c.text,
            " Please send the quarterly report to Siobhan Kowalczyk before Thursday."
        );
        assert_eq!(c.heard, heard);
        // At the end of the text, the punctuation of the last word stays.
        let heard = "It goes to Shivon Kao Kzik.";
        let s = v.suspects(heard);
        let c = v
            .confirm(heard, &s, "It goes to Siobhan Kowalczyk.")
            .expect("confirmed");
        assert_eq!(c.text, "It goes to Siobhan Kowalczyk.");
    }

    #[test]
    fn an_unconfirmed_suspect_changes_nothing() {
        let v = vocabulary(&["Siobhan Kowalczyk"]);
        let heard = "Send it to Shivon Kao Kzik today.";
        let s = v.suspects(heard);
        assert!(!s.is_empty());
        // The prompt heard the same words; or wrote something else there; or moved the
        // surrounding words so the stretch has no shared word beside it.
        for prompted in [
            "Send it to Shivon Kao Kzik today.",
            "Send it to Siobhan Kowalski today.",
            "Send to Siobhan Kowalczyk.",
            "",
        ] {
            assert_eq!(v.confirm(heard, &s, prompted), None, "{prompted}");
        }
    }

    #[test]
    fn ordinary_speech_holds_no_suspect_of_unusual_names() {
        let v = vocabulary(&["Siobhan Kowalczyk", "Zoë Kravitz", "Kubernetes"]);
        let text = "Shall I compare thee to a summer's day? Thou art more lovely and more \
                    temperate. Rough winds do shake the darling buds of May, and summer's \
                    lease hath all too short a date. Four of clubs, seven of hearts.";
        assert_eq!(v.suspects(text), Vec::new());
    }

    #[test]
    fn near_sounds_with_other_spellings_are_not_suspects() {
        let v = vocabulary(&["Persyk", "Kubernetes", "Zoë Kravitz"]);
        // Words of the corpus readings that sound a little like the list.
        for text in [
            "From fairest creatures",
            "fresh ornament",
            "buriest thy content",
            "eight of spades",
            "go forward",
        ] {
            assert_eq!(v.suspects(text), Vec::new(), "{text}");
        }
        // Spelled near enough, and sounding so: suspects.
        assert_eq!(v.suspects("deploy it on Kubernetis now").len(), 1);
        assert_eq!(v.suspects("Zoe Kravits starred").len(), 1);
    }

    #[test]
    fn function_words_at_the_edges_make_no_suspect() {
        assert!(
            FUNCTION_WORDS.windows(2).all(|w| w[0] < w[1]),
            "sorted for the search"
        );
        // Invented names that, before this rule, matched "as the", "lies thy", "married a"
        // in the corpus readings.
        let v = vocabulary(&["Ostley", "Leyost", "Mardal", "The Verge"]);
        let text = "as the lies thy married a";
        let words: Vec<&str> = text.split_whitespace().collect();
        for s in v.suspects(text) {
            let stretch = &words[s.start..s.end];
            assert!(!is_function_word(stretch[0]), "{stretch:?}");
            assert!(!is_function_word(stretch[stretch.len() - 1]), "{stretch:?}");
        }
        // An entry that begins with the word may match there.
        assert_eq!(v.suspects("I read the verb yesterday").len(), 1);
    }

    #[test]
    fn entries_are_bounded_and_blank_ones_left_out() {
        let long = "Supercalifragilistic".repeat(6);
        let v = vocabulary(&["", "   ", "a b c d e", "!!", "Persyk", &long, "Zo\u{1b}ë"]);
        assert_eq!(v.entries.len(), 1);
        let many: Vec<String> = (0..500).map(|i| format!("Term{i}")).collect();
        assert_eq!(Vocabulary::new(&many).entries.len(), MAX_ENTRIES);
    }

    #[test]
    fn a_search_stops_at_its_work_limit_and_keeps_what_it_found() {
        // The worst list the limits allow: 100 entries of four 24-letter words sharing
        // their first sound, against 200 words that all begin with it.
        let word = |i: usize, j: usize| {
            let letters: String = (0..23)
                .map(|k| (b'a' + ((i * 7 + j * 3 + k * 5) % 26) as u8) as char)
                .collect();
            format!("s{letters}")
        };
        let list: Vec<String> = (0..MAX_ENTRIES)
            .map(|i| (0..4).map(|j| word(i, j)).collect::<Vec<_>>().join(" "))
            .collect();
        assert!(list.iter().all(|e| e.chars().count() <= MAX_ENTRY_CHARS));
        let v = Vocabulary::new(&list);
        assert_eq!(v.entries.len(), MAX_ENTRIES);
        let text: String = (0..200)
            .map(|i| word(i + 1000, 1))
            .collect::<Vec<_>>()
            .join(" ");
        let search = v.search(&text);
        assert!(!search.complete);
        // An ordinary text against an ordinary list is searched completely.
        let v = vocabulary(&["Siobhan Kowalczyk", "Kubernetes"]);
        let search = v.search("Please send the report to Shivon Kao Kzik before Thursday.");
        assert!(search.complete);
        assert_eq!(search.suspects.len(), 1);
    }

    #[test]
    fn words_and_punctuation() {
        assert_eq!(normal("“Kzik.”"), "kzik");
        assert_eq!(normal("summer's"), "summer's");
        assert_eq!(trailing_punctuation("Kzik.”"), ".”");
        assert_eq!(trailing_punctuation("..."), "...");
        let w: Vec<String> = words(" a - b, c").into_iter().map(|w| w.normal).collect();
        assert_eq!(w, ["a", "b", "c"]);
    }

    proptest::proptest! {
        /// Whatever the two decodes say (any text, any script), matching never panics, and
        /// a confirmed text keeps every token outside the replaced stretches.
        #[test]
        fn any_text_is_matched_safely(
            heard in "[ a-zA-Zëł'.,!?0-9\u{00A0}\u{4E00}-\u{4E10}]{0,80}",
            prompted in "[ a-zA-Zëł'.,!?0-9]{0,80}",
            name in "[a-zA-Zë ]{1,20}",
        ) {
            let v = Vocabulary::new(&[name, "Siobhan Kowalczyk".to_owned()]);
            let suspects = v.suspects(&heard);
            if let Some(c) = v.confirm(&heard, &suspects, &prompted) {
                proptest::prop_assert_eq!(&c.heard, &heard);
                let kept = heard.split_whitespace().count();
                proptest::prop_assert!(c.text.split_whitespace().count() <= kept + 8);
            }
        }
    }
}
