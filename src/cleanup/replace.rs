//! Replacements: the user's list of spoken phrases and what to write instead ("persic" →
//! "Persyk", "new line" → a line break, "comma" → ","), applied to the delivered text.
//!
//! Invariants:
//! - Deterministic and total: the same rules and text give the same output, with no model,
//!   no network and no failure once the rules are accepted.
//! - Whole words only, compared without case: a rule never matches inside a word ("comma"
//!   does not touch "commas"), and the words of one match sit on one line.
//! - One left-to-right pass; the longest rule wins at each word; replaced text is never
//!   scanned again, so rules cannot feed each other or loop.
//! - Text outside a match is kept byte for byte, except the separator characters next to a
//!   punctuation or line-break replacement, which that replacement takes the place of
//!   ("Hello, comma, world" → "Hello, world").

use std::collections::HashMap;

/// The most rules a list may hold.
pub const MAX_RULES: usize = 1000;
/// The longest spoken phrase or replacement, in characters.
pub const MAX_RULE_CHARS: usize = 200;

/// One rule as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rule {
    /// The spoken phrase, e.g. "new line".
    pub from: String,
    /// What to write instead, e.g. "\n".
    pub to: String,
}

/// Why a list of rules was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplaceError {
    #[error("replace.no-words: rule {index} has no word to listen for")]
    NoWords { index: usize },
    #[error("replace.too-long: rule {index} is longer than {MAX_RULE_CHARS} characters")]
    TooLong { index: usize },
    #[error("replace.too-many: more than {MAX_RULES} rules")]
    TooMany,
    #[error("replace.duplicate: rule {index} listens for the same words as an earlier one")]
    Duplicate { index: usize },
}

impl ReplaceError {
    pub fn code(&self) -> &'static str {
        match self {
            ReplaceError::NoWords { .. } => "replace.no-words",
            ReplaceError::TooLong { .. } => "replace.too-long",
            ReplaceError::TooMany => "replace.too-many",
            ReplaceError::Duplicate { .. } => "replace.duplicate",
        }
    }
}

/// How a replacement joins the text around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// Plain words: the separators around the match stay.
    Words,
    /// Closing punctuation (",", "?", "…"): sticks to the word before it.
    Left,
    /// Opening punctuation ("(", "“"): sticks to the word after it.
    Right,
    /// Whitespace holding a line break: replaces the spaces on both sides.
    Break,
}

#[derive(Debug, Clone)]
struct Compiled {
    words: Vec<String>,
    to: String,
    join: Join,
}

/// An accepted list of rules, ready to apply.
#[derive(Debug, Clone, Default)]
pub struct Replacements {
    /// Rules by their first word, longest first.
    by_first: HashMap<String, Vec<Compiled>>,
    len: usize,
}

/// The result of applying the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub text: String,
    /// How many matches were replaced.
    pub count: usize,
}

/// Punctuation a spoken-punctuation rule absorbs next to it (what a recognizer writes around
/// the spoken word "comma").
const SENTENCE_PUNCT: &[char] = &[',', '.', ';', ':', '!', '?', '…'];
const OPENING: &[char] = &['(', '[', '{', '“', '‘', '«', '¿', '¡'];

impl Replacements {
    /// Checks and compiles `rules`. An empty list is valid and changes nothing.
    pub fn new(rules: &[Rule]) -> Result<Replacements, ReplaceError> {
        if rules.len() > MAX_RULES {
            return Err(ReplaceError::TooMany);
        }
        let mut by_first: HashMap<String, Vec<Compiled>> = HashMap::new();
        for (index, rule) in rules.iter().enumerate() {
            if rule.from.chars().count() > MAX_RULE_CHARS
                || rule.to.chars().count() > MAX_RULE_CHARS
            {
                return Err(ReplaceError::TooLong { index });
            }
            let words: Vec<String> = tokens(&rule.from)
                .into_iter()
                .filter_map(|t| match t {
                    Token::Word(w) => Some(fold(w)),
                    Token::Sep(_) => None,
                })
                .collect();
            if words.is_empty() {
                return Err(ReplaceError::NoWords { index });
            }
            let list = by_first.entry(words[0].clone()).or_default();
            if list.iter().any(|c| c.words == words) {
                return Err(ReplaceError::Duplicate { index });
            }
            list.push(Compiled {
                join: join_of(&rule.to),
                to: rule.to.clone(),
                words,
            });
        }
        for list in by_first.values_mut() {
            // Stable: among equally long rules the earlier one is tried first (and they
            // cannot both match, being different words of the same length).
            list.sort_by_key(|c| std::cmp::Reverse(c.words.len()));
        }
        Ok(Replacements {
            by_first,
            len: rules.len(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Applies the rules to `text` in one pass.
    pub fn apply(&self, text: &str) -> Applied {
        if self.is_empty() {
            return Applied {
                text: text.to_owned(),
                count: 0,
            };
        }
        let toks = tokens(text);
        // Word positions in `toks`, and their folded forms.
        let word_at: Vec<usize> = toks
            .iter()
            .enumerate()
            .filter(|(_, t)| matches!(t, Token::Word(_)))
            .map(|(i, _)| i)
            .collect();
        let folded: Vec<String> = word_at
            .iter()
            .map(|&i| match toks[i] {
                Token::Word(w) => fold(w),
                Token::Sep(_) => String::new(),
            })
            .collect();

        let mut out = String::with_capacity(text.len());
        let mut count = 0;
        // Set after a Left/Right/Break replacement: how to treat the next separator.
        let mut pending: Option<Join> = None;
        let mut t = 0; // index into toks
        let mut w = 0; // index into word_at
        while t < toks.len() {
            match toks[t] {
                Token::Sep(s) => {
                    push_sep(&mut out, s, pending.take());
                    t += 1;
                }
                Token::Word(word) => {
                    let found = self.match_at(&toks, &word_at, &folded, w);
                    match found {
                        Some(rule) => {
                            let n = rule.words.len();
                            let last_tok = word_at[w + n - 1];
                            match rule.join {
                                Join::Words => {
                                    out.push_str(&cased(&rule.to, word));
                                    pending = None;
                                }
                                Join::Left => {
                                    trim_end_matching(&mut out, |c| {
                                        c.is_whitespace() || SENTENCE_PUNCT.contains(&c)
                                    });
                                    out.push_str(&rule.to);
                                    pending = Some(Join::Left);
                                }
                                Join::Right => {
                                    out.push_str(&rule.to);
                                    pending = Some(Join::Right);
                                }
                                Join::Break => {
                                    trim_end_matching(&mut out, |c| c == ' ' || c == '\t');
                                    out.push_str(&rule.to);
                                    pending = Some(Join::Break);
                                }
                            }
                            count += 1;
                            t = last_tok + 1;
                            w += n;
                        }
                        None => {
                            out.push_str(word);
                            pending = None;
                            t += 1;
                            w += 1;
                        }
                    }
                }
            }
        }
        Applied { text: out, count }
    }

    /// The longest rule whose words start at word `w`, with no line break inside the match.
    fn match_at(
        &self,
        toks: &[Token<'_>],
        word_at: &[usize],
        folded: &[String],
        w: usize,
    ) -> Option<&Compiled> {
        let candidates = self.by_first.get(&folded[w])?;
        candidates.iter().find(|rule| {
            let n = rule.words.len();
            if w + n > folded.len() || folded[w..w + n] != rule.words[..] {
                return false;
            }
            // The separators between the matched words stay on one line.
            (word_at[w]..word_at[w + n - 1]).all(|i| match toks[i] {
                Token::Sep(s) => !s.contains('\n'),
                Token::Word(_) => true,
            })
        })
    }
}

/// Appends a separator, shaped by the replacement just before it.
fn push_sep(out: &mut String, sep: &str, after: Option<Join>) {
    match after {
        None | Some(Join::Words) => out.push_str(sep),
        Some(Join::Left) => {
            // "Hello, comma, world" → the ", " after the spoken comma loses its comma.
            out.push_str(sep.trim_start_matches(|c| SENTENCE_PUNCT.contains(&c)));
        }
        Some(Join::Right) => {
            out.push_str(sep.trim_start_matches(|c: char| c.is_whitespace()));
        }
        Some(Join::Break) => {
            out.push_str(sep.trim_start_matches(|c: char| {
                c == ' ' || c == '\t' || SENTENCE_PUNCT.contains(&c)
            }));
        }
    }
}

fn trim_end_matching(out: &mut String, f: impl Fn(char) -> bool) {
    let keep = out.trim_end_matches(f).len();
    out.truncate(keep);
}

/// The replacement, capitalized when the spoken word was and the rule is written in lower
/// case ("Gonna go" with "gonna" → "going to" gives "Going to go").
fn cased(to: &str, spoken: &str) -> String {
    let spoken_upper = spoken.chars().next().is_some_and(char::is_uppercase);
    let mut chars = to.chars();
    match chars.next() {
        Some(first) if spoken_upper && first.is_lowercase() => {
            first.to_uppercase().chain(chars).collect()
        }
        _ => to.to_owned(),
    }
}

fn join_of(to: &str) -> Join {
    if !to.is_empty() && to.chars().all(char::is_whitespace) && to.contains('\n') {
        return Join::Break;
    }
    let punct = |c: char| !c.is_alphanumeric() && !c.is_whitespace();
    if !to.is_empty() && to.chars().all(punct) {
        if to.chars().all(|c| OPENING.contains(&c)) {
            return Join::Right;
        }
        return Join::Left;
    }
    Join::Words
}

/// Case folding for comparison.
fn fold(word: &str) -> String {
    word.chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c == '’' { '\'' } else { c })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Sep(&'a str),
}

/// Splits text into words and the separators between them. A word is a run of letters and
/// digits; an apostrophe or hyphen inside one ("don't", "well-known") belongs to it.
fn tokens(text: &str) -> Vec<Token<'_>> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let is_word = |i: usize| -> bool {
        let c = chars[i].1;
        if c.is_alphanumeric() {
            return true;
        }
        matches!(c, '\'' | '’' | '-')
            && i > 0
            && chars[i - 1].1.is_alphanumeric()
            && i + 1 < chars.len()
            && chars[i + 1].1.is_alphanumeric()
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let word = is_word(i);
        let start = chars[i].0;
        let mut j = i + 1;
        while j < chars.len() && is_word(j) == word {
            j += 1;
        }
        let end = chars.get(j).map_or(text.len(), |c| c.0);
        let s = &text[start..end];
        out.push(if word { Token::Word(s) } else { Token::Sep(s) });
        i = j;
    }
    out
}

/// The words of `text` as [`Replacements`] sees them (for tests and the guard).
pub fn words(text: &str) -> Vec<&str> {
    tokens(text)
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w),
            Token::Sep(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules(list: &[(&str, &str)]) -> Replacements {
        let rules: Vec<Rule> = list
            .iter()
            .map(|(f, t)| Rule {
                from: (*f).to_owned(),
                to: (*t).to_owned(),
            })
            .collect();
        Replacements::new(&rules).expect("valid rules")
    }

    fn apply(list: &[(&str, &str)], text: &str) -> String {
        rules(list).apply(text).text
    }

    #[test]
    fn words_are_replaced_whole_and_without_case() {
        let r = [("persic", "Persyk")];
        assert_eq!(apply(&r, "I use persic daily."), "I use Persyk daily.");
        assert_eq!(apply(&r, "Persic, again"), "Persyk, again");
        assert_eq!(apply(&r, "persics are not it"), "persics are not it");
        assert_eq!(apply(&r, "unpersic"), "unpersic");
    }

    #[test]
    fn a_lower_case_replacement_takes_the_capital_of_the_spoken_word() {
        let r = [("gonna", "going to")];
        assert_eq!(
            apply(&r, "Gonna go. I'm gonna stay."),
            "Going to go. I'm going to stay."
        );
    }

    #[test]
    fn spoken_punctuation_sticks_to_the_word_before() {
        let r = [("comma", ","), ("question mark", "?"), ("full stop", ".")];
        assert_eq!(apply(&r, "Hello comma world"), "Hello, world");
        // What a recognizer writes around the spoken word.
        assert_eq!(apply(&r, "Hello, comma, world."), "Hello, world.");
        assert_eq!(apply(&r, "Is it ready question mark"), "Is it ready?");
        assert_eq!(apply(&r, "Is it ready? Question mark."), "Is it ready?");
        assert_eq!(apply(&r, "Done full stop Next"), "Done. Next");
    }

    #[test]
    fn a_line_break_replaces_the_spaces_around_it() {
        let r = [("new line", "\n"), ("new paragraph", "\n\n")];
        assert_eq!(apply(&r, "first new line second"), "first\nsecond");
        assert_eq!(
            apply(&r, "First line. New line. Second."),
            "First line.\nSecond."
        );
        assert_eq!(apply(&r, "One new paragraph two"), "One\n\ntwo");
        // Longest first: "new paragraph" is not "new" + "paragraph".
        assert_eq!(apply(&r, "new"), "new");
    }

    #[test]
    fn opening_punctuation_sticks_to_the_word_after() {
        let r = [("open paren", "("), ("close paren", ")")];
        assert_eq!(
            apply(
                &r,
                "the meeting open paren the one on Friday close paren is moved"
            ),
            "the meeting (the one on Friday) is moved"
        );
    }

    #[test]
    fn the_longest_rule_wins_and_replaced_text_is_not_scanned_again() {
        let r = [("new", "old"), ("new york", "NYC"), ("old", "new")];
        assert_eq!(apply(&r, "new york is new"), "NYC is old");
    }

    #[test]
    fn a_match_does_not_span_lines() {
        let r = [("new line", "\n")];
        assert_eq!(apply(&r, "new\nline"), "new\nline");
    }

    #[test]
    fn apostrophes_and_hyphens_belong_to_words() {
        let r = [("dont", "do not"), ("known", "KNOWN")];
        assert_eq!(
            apply(&r, "don't, well-known, known"),
            "don't, well-known, KNOWN"
        );
        assert_eq!(
            words("don’t stop-and-go 'quoted'"),
            ["don’t", "stop-and-go", "quoted"]
        );
    }

    #[test]
    fn bad_rules_are_refused_with_a_code() {
        let bad = |from: &str| {
            Replacements::new(&[Rule {
                from: from.to_owned(),
                to: "x".to_owned(),
            }])
            .map(|_| ())
            .map_err(|e| e.code())
        };
        assert_eq!(bad(" , "), Err("replace.no-words"));
        assert_eq!(bad(&"a".repeat(201)), Err("replace.too-long"));
        let dup = Replacements::new(&[
            Rule {
                from: "Persic".into(),
                to: "a".into(),
            },
            Rule {
                from: "persic".into(),
                to: "b".into(),
            },
        ]);
        assert_eq!(
            dup.map(|_| ()).map_err(|e| e.code()),
            Err("replace.duplicate")
        );
        let many: Vec<Rule> = (0..=MAX_RULES)
            .map(|i| Rule {
                from: format!("w{i}"),
                to: "x".into(),
            })
            .collect();
        assert_eq!(
            Replacements::new(&many).map(|_| ()).map_err(|e| e.code()),
            Err("replace.too-many")
        );
    }

    #[test]
    fn counts_the_matches() {
        let r = rules(&[("uh", "")]);
        let applied = r.apply("uh so uh yes");
        assert_eq!(applied.count, 2);
        assert_eq!(applied.text, " so  yes");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// No rule, or no rule that matches: the text comes back byte for byte.
        #[test]
        fn text_without_a_match_is_unchanged(text in "\\PC{0,80}") {
            prop_assert_eq!(Replacements::default().apply(&text).text, text.clone());
            let r = rules(&[("zzqx", "Persyk"), ("new line", "\n"), ("comma", ",")]);
            let applied = r.apply(&text);
            if applied.count == 0 {
                prop_assert_eq!(applied.text, text);
            }
        }

        /// Word rules change exactly the matched words: the output's words are the input's
        /// words with each match swapped for the replacement's words.
        #[test]
        fn word_rules_change_only_matched_words(
            picks in proptest::collection::vec(0usize..6, 0..30),
        ) {
            let vocab = ["alpha", "beta", "Alpha", "gamma", "delta", "beta,"];
            let text = picks.iter().map(|&i| vocab[i]).collect::<Vec<_>>().join(" ");
            let r = rules(&[("alpha beta", "omega"), ("gamma", "zeta eta")]);
            let out = r.apply(&text).text;
            let mut expected = Vec::new();
            let input: Vec<String> = words(&text).iter().map(|w| fold(w)).collect();
            let mut i = 0;
            while i < input.len() {
                if input[i] == "alpha" && input.get(i + 1).map(String::as_str) == Some("beta") {
                    expected.push("omega".to_owned());
                    i += 2;
                } else if input[i] == "gamma" {
                    expected.push("zeta".to_owned());
                    expected.push("eta".to_owned());
                    i += 1;
                } else {
                    expected.push(input[i].clone());
                    i += 1;
                }
            }
            let got: Vec<String> = words(&out).iter().map(|w| fold(w)).collect();
            prop_assert_eq!(got, expected);
        }
    }
}
