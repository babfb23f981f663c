//! Text → tokens for the guard: words in lower case with contractions spelled out, numbers
//! folded into one token whatever way they were written, units after numbers named
//! canonically, and for each token where it sits (its bytes, its sentence, whether it opens
//! a clause) so the rules can ask about the signs between words.
//!
//! Invariants:
//! - Every token points into the text it came from (`span`), so an edit can be shown; the
//!   tokens hold lower-case keys only, never the source's case, except the `cap` flag.
//! - A number is one token with every digit string it may be written as ("three thirty" →
//!   `330` or `3:30`; "one two three four" → `1234`, never a sum); two numbers match when
//!   those sets meet and their signs agree.
//! - Linear in the text's length.

use std::ops::Range;

use super::lexicon;

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Word,
    Num(Num),
}

/// A number, however it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Num {
    /// The digit strings it may be written as (`1234`, `3:30`, `25.40`).
    pub readings: Vec<String>,
    pub negative: bool,
    pub ordinal: bool,
}

impl Num {
    /// Same value and sign (the ordinal form aside: "March 3" and "March 3rd" are one date).
    pub fn same(&self, other: &Num) -> bool {
        self.negative == other.negative && self.readings.iter().any(|r| other.readings.contains(r))
    }
}

/// One token.
#[derive(Debug, Clone)]
pub struct Token {
    /// Lower case, contractions spelled out, units canonical; a number's first reading.
    pub key: String,
    /// Other keys this token may stand for ("'s" is "is" or "has").
    pub alts: &'static [&'static str],
    pub kind: Kind,
    /// The bytes of the source it came from.
    pub span: Range<usize>,
    /// Written with a capital first letter.
    pub cap: bool,
    /// First token of a sentence (or of the text, or of a line).
    pub sentence_start: bool,
    /// First token of a clause: a sentence start, or after `,` `;` `:` `—` `(`.
    pub clause_start: bool,
    /// First token of a line.
    pub line_start: bool,
    /// Which sentence it belongs to (0-based).
    pub sentence: u32,
}

impl Token {
    pub fn num(&self) -> Option<&Num> {
        match &self.kind {
            Kind::Num(n) => Some(n),
            Kind::Word => None,
        }
    }

    pub fn is_word(&self, key: &str) -> bool {
        matches!(self.kind, Kind::Word) && self.key == key
    }

    /// Whether two tokens say the same thing.
    pub fn matches(&self, other: &Token) -> bool {
        match (&self.kind, &other.kind) {
            (Kind::Num(a), Kind::Num(b)) => a.same(b),
            (Kind::Word, Kind::Word) => {
                self.key == other.key
                    || self.alts.contains(&other.key.as_str())
                    || other.alts.contains(&self.key.as_str())
            }
            _ => false,
        }
    }
}

/// A tokenized text.
#[derive(Debug, Clone)]
pub struct Text<'a> {
    pub source: &'a str,
    pub tokens: Vec<Token>,
    /// The source between token `i - 1` and token `i` (`gaps[0]` before the first token,
    /// `gaps[len]` after the last).
    pub gaps: Vec<Range<usize>>,
}

impl<'a> Text<'a> {
    pub fn new(source: &'a str) -> Text<'a> {
        let pieces = pieces(source);
        let mut tokens = words(source, &pieces);
        fold_pairs(&mut tokens);
        fold_numbers(&mut tokens);
        scales_after(&mut tokens);
        after_numbers(&mut tokens);
        let gaps = gaps_of(source, &tokens);
        let mut text = Text {
            source,
            tokens,
            gaps,
        };
        text.mark_sentences(&pieces);
        text
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The separator text before token `i` (after the last token for `i == len`).
    pub fn gap(&self, i: usize) -> &str {
        self.gaps
            .get(i)
            .map_or("", |r| self.source.get(r.clone()).unwrap_or(""))
    }

    /// Whether the speaker's text carries sentence punctuation at all (a recognizer's text
    /// does; a typed run-on does not).
    pub fn punctuated(&self) -> bool {
        self.gaps.iter().any(|g| {
            self.source
                .get(g.clone())
                .is_some_and(|s| s.contains(['.', '?', '!', '？', '。']))
        })
    }

    /// How many questions the text asks: its question marks when it is punctuated, else
    /// the openings that read as questions ("is the server …", "can you …", "what time
    /// does …").
    pub fn questions(&self) -> usize {
        if self.punctuated() {
            return self
                .gaps
                .iter()
                .map(|g| {
                    self.source
                        .get(g.clone())
                        .map_or(0, |s| s.matches(['?', '？', '؟']).count())
                })
                .sum();
        }
        let t = &self.tokens;
        let mut n = 0;
        for i in 0..t.len() {
            if self.opens_question(i) {
                n += 1;
            }
        }
        n
    }

    /// Sentences that end in a question mark but do not read as questions ("Move the money
    /// to checking?"): a question mark that turns a statement or a command into a question.
    pub fn unopened_questions(&self) -> usize {
        let t = &self.tokens;
        let mut n = 0;
        let mut start = 0;
        while start < t.len() {
            let mut end = start + 1;
            while end < t.len() && t[end].sentence == t[start].sentence {
                end += 1;
            }
            let asks = self.gap(end).contains(['?', '？']);
            if asks && !(start..end).any(|i| self.opens_question(i)) {
                n += 1;
            }
            start = end;
        }
        n
    }

    fn opens_question(&self, i: usize) -> bool {
        let t = &self.tokens;
        let key = |k: usize| t.get(k).map(|x| x.key.as_str());
        let lead = i == 0
            || t[i].clause_start
            || key(i - 1).is_some_and(|p| {
                [
                    "and", "so", "but", "or", "then", "also", "okay", "well", "hey", "hi", "thanks",
                ]
                .contains(&p)
            })
            || (t[i - 1].cap && !t[i - 1].sentence_start && t[i - 1].key != "i");
        if !lead {
            return false;
        }
        let here = t[i].key.as_str();
        let subject_next = key(i + 1).is_some_and(|n| lexicon::is_in(lexicon::SUBJECT_STARTS, n))
            || t.get(i + 1).is_some_and(|n| n.cap && n.key != "i");
        if lexicon::is_in(lexicon::QUESTION_AUX, here) && subject_next {
            return true;
        }
        if lexicon::is_in(lexicon::QUESTION_WORDS, here) {
            let aux = |k: usize| key(k).is_some_and(|w| lexicon::is_in(lexicon::QUESTION_AUX, w));
            return aux(i + 1) || (aux(i + 2) && key(i + 1).is_none_or(|w| w != "the"));
        }
        false
    }

    fn mark_sentences(&mut self, pieces: &[Piece]) {
        // Which token ends an abbreviation: pieces and tokens both run in source order.
        let mut abbrev_at = vec![Abbrev::None; self.tokens.len()];
        let mut p = 0;
        for (i, t) in self.tokens.iter().enumerate() {
            while p < pieces.len() && pieces[p].range.end < t.span.end {
                p += 1;
            }
            if let Some(piece) = pieces.get(p)
                && piece.range.end == t.span.end
            {
                abbrev_at[i] = piece.abbreviation;
            }
        }
        let mut sentence = 0u32;
        for i in 0..self.tokens.len() {
            let gap = self.gap(i);
            let line = i == 0 || gap.contains('\n');
            let stops = gap.contains(['.', '?', '!', '？', '。', '…']);
            let mut ends = line || stops;
            let prev_abbrev = if i > 0 {
                abbrev_at[i - 1]
            } else {
                Abbrev::None
            };
            if ends && !line && !gap.contains(['?', '!']) && prev_abbrev != Abbrev::None {
                // "9 a.m. on Wednesday", "Mr. Okafor": the dot is the abbreviation's, unless a
                // capital follows an "a.m." (a new sentence).
                ends = prev_abbrev == Abbrev::Dotted && self.tokens[i].cap;
            }
            let clause = ends
                || gap.contains([',', ';', ':', '—', '–', '(', ')', '"', '“', '”'])
                || gap.contains(" - ");
            if ends && i > 0 {
                sentence += 1;
            }
            let tok = &mut self.tokens[i];
            tok.sentence_start = ends || i == 0;
            tok.clause_start = clause || i == 0;
            tok.line_start = line;
            tok.sentence = sentence;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abbrev {
    None,
    /// "a.m.", "p.m.", "etc.": a following capital starts a sentence.
    Dotted,
    /// "Mr.", "Dr.": never ends one.
    Honorific,
}

/// A run of word characters in the source.
#[derive(Debug, Clone)]
struct Piece {
    range: Range<usize>,
    negative: bool,
    currency: Option<&'static str>,
    /// A sign right after the number: `%`, `°`.
    after: Option<(&'static str, Range<usize>)>,
    abbreviation: Abbrev,
}

const HONORIFICS: &[&str] = &["mr", "mrs", "ms", "dr", "st", "prof", "jr", "sr", "mt"];

fn pieces(text: &str) -> Vec<Piece> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let at = |i: usize| chars.get(i).map(|c| c.1);
    let byte = |i: usize| chars.get(i).map_or(text.len(), |c| c.0);
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].1.is_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        let mut j = i;
        while j < chars.len() {
            let c = chars[j].1;
            if c.is_alphanumeric() {
                j += 1;
                continue;
            }
            let prev = if j > start { at(j - 1) } else { None };
            let next = at(j + 1);
            let inner = match c {
                '\'' | '’' => {
                    prev.is_some_and(char::is_alphanumeric) && next.is_some_and(char::is_alphabetic)
                }
                '.' | ':' => {
                    prev.is_some_and(|p| p.is_ascii_digit())
                        && next.is_some_and(|n| n.is_ascii_digit())
                }
                ',' => {
                    // A thousands separator: a digit before, exactly three after.
                    prev.is_some_and(|p| p.is_ascii_digit())
                        && (1..=3).all(|k| at(j + k).is_some_and(|d| d.is_ascii_digit()))
                        && !at(j + 4).is_some_and(|d| d.is_ascii_digit())
                }
                _ => false,
            };
            // Dotted single letters: "a.m", "p.m", "e.g", "i.e", "o.k".
            let dotted = c == '.'
                && j - start == 1
                && next.is_some_and(char::is_alphabetic)
                && !at(j + 2).is_some_and(char::is_alphanumeric);
            if inner || dotted {
                j += 1;
            } else {
                break;
            }
        }
        let range = byte(start)..byte(j);
        let word = &text[range.clone()];
        let first_digit = word.starts_with(|c: char| c.is_ascii_digit());
        // A sign or a currency right before a number.
        let mut k = start;
        let mut negative = false;
        let mut currency = None;
        if first_digit {
            if k > 0 && matches!(at(k - 1), Some('-' | '−')) {
                let before = if k >= 2 { at(k - 2) } else { None };
                if before.is_none_or(|b| b.is_whitespace() || "($€£¥".contains(b)) {
                    negative = true;
                    k -= 1;
                }
            }
            if k > 0
                && let Some(sign) = at(k - 1)
            {
                currency = lexicon::CURRENCY_SIGNS
                    .iter()
                    .find(|(c, _)| *c == sign)
                    .map(|(_, u)| *u);
                if currency.is_some() && !negative && k >= 2 && matches!(at(k - 2), Some('-' | '−'))
                {
                    negative = true;
                }
            }
        }
        let after = if first_digit {
            match at(j) {
                Some('%') => Some(("percent", byte(j)..byte(j + 1))),
                Some('°') => Some(("degree", byte(j)..byte(j + 1))),
                _ => None,
            }
        } else {
            None
        };
        let lower = word.to_lowercase();
        let dotted_word = matches!(lower.as_str(), "a.m" | "p.m" | "e.g" | "i.e" | "etc");
        let abbreviation = if at(j) == Some('.') && HONORIFICS.contains(&lower.as_str()) {
            Abbrev::Honorific
        } else if at(j) == Some('.') && dotted_word {
            Abbrev::Dotted
        } else {
            Abbrev::None
        };
        out.push(Piece {
            range,
            negative,
            currency,
            after,
            abbreviation,
        });
        i = j;
    }
    out
}

fn blank(key: String, span: Range<usize>, cap: bool) -> Token {
    Token {
        key,
        alts: &[],
        kind: Kind::Word,
        span,
        cap,
        sentence_start: false,
        clause_start: false,
        line_start: false,
        sentence: 0,
    }
}

fn number(readings: Vec<String>, negative: bool, ordinal: bool, span: Range<usize>) -> Token {
    let key = readings.first().cloned().unwrap_or_default();
    Token {
        kind: Kind::Num(Num {
            readings,
            negative,
            ordinal,
        }),
        ..blank(key, span, false)
    }
}

/// Readings of a digit string: "1,250" → 1250, "06:00" → 6:00 and 6.
fn digit_readings(s: &str) -> Vec<String> {
    let plain: String = s.chars().filter(|c| *c != ',').collect();
    if let Some((h, m)) = plain.split_once(':') {
        let h = h.trim_start_matches('0');
        let h = if h.is_empty() { "0" } else { h };
        let mut r = vec![format!("{h}:{m}")];
        if m == "00" {
            r.push(h.to_owned());
        }
        return r;
    }
    vec![plain]
}

fn is_digits(s: &str) -> bool {
    !s.is_empty()
        && s.starts_with(|c: char| c.is_ascii_digit())
        && s.ends_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_digit() || ".,:".contains(c))
}

/// Pieces → word and number tokens, contractions spelled out.
fn words(text: &str, pieces: &[Piece]) -> Vec<Token> {
    let mut out = Vec::with_capacity(pieces.len() + pieces.len() / 4);
    for p in pieces {
        let raw = &text[p.range.clone()];
        let cap = raw.starts_with(char::is_uppercase);
        let lower: String = raw
            .chars()
            .flat_map(char::to_lowercase)
            .map(|c| if c == '’' { '\'' } else { c })
            .collect();
        let span = p.range.clone();
        if is_digits(&lower) {
            out.push(number(
                digit_readings(&lower),
                p.negative,
                false,
                span.clone(),
            ));
            push_units(&mut out, p, span);
            continue;
        }
        if lower.starts_with(|c: char| c.is_ascii_digit()) {
            // "21st", "9am", "3pm": digits with a suffix.
            let split = lower
                .find(|c: char| !(c.is_ascii_digit() || ".,:".contains(c)))
                .unwrap_or(lower.len());
            let (digits, suffix) = lower.split_at(split);
            if is_digits(digits) {
                match suffix {
                    "st" | "nd" | "rd" | "th" => {
                        out.push(number(
                            digit_readings(digits),
                            p.negative,
                            true,
                            span.clone(),
                        ));
                        push_units(&mut out, p, span);
                        continue;
                    }
                    "am" | "pm" | "a.m" | "p.m" => {
                        out.push(number(
                            digit_readings(digits),
                            p.negative,
                            false,
                            span.clone(),
                        ));
                        out.push(blank(suffix.replace('.', ""), span, false));
                        continue;
                    }
                    _ => {}
                }
            }
            out.push(blank(lower, span, cap));
            continue;
        }
        match lower.as_str() {
            "a.m" => {
                out.push(blank("am".into(), span, cap));
                continue;
            }
            "p.m" => {
                out.push(blank("pm".into(), span, cap));
                continue;
            }
            _ => {}
        }
        expand(&lower, span, cap, &mut out);
    }
    out
}

fn push_units(out: &mut Vec<Token>, p: &Piece, span: Range<usize>) {
    if let Some(unit) = p.currency {
        out.push(blank(unit.to_owned(), span.clone(), false));
    }
    if let Some((unit, at)) = &p.after {
        out.push(blank((*unit).to_owned(), at.clone(), false));
    }
}

/// Spells out a contraction into `out`.
fn expand(word: &str, span: Range<usize>, cap: bool, out: &mut Vec<Token>) {
    if let Some((_, full)) = lexicon::EXPANSIONS.iter().find(|(w, _)| *w == word) {
        for (k, w) in full.iter().enumerate() {
            out.push(blank((*w).to_owned(), span.clone(), cap && k == 0));
        }
        return;
    }
    if let Some(stem) = word.strip_suffix("n't")
        && !stem.is_empty()
    {
        out.push(blank(stem.to_owned(), span.clone(), cap));
        out.push(blank("not".into(), span, false));
        return;
    }
    for (suffix, full, alts) in [
        ("'re", "are", &[][..]),
        ("'m", "am", &[][..]),
        ("'ve", "have", &[][..]),
        ("'ll", "will", &[][..]),
        ("'d", "'d", &["would", "had"][..]),
        ("'s", "'s", &["is", "has"][..]),
    ] {
        if let Some(stem) = word.strip_suffix(suffix)
            && !stem.is_empty()
        {
            out.push(blank(stem.to_owned(), span.clone(), cap));
            let mut t = blank(full.to_owned(), span, false);
            t.alts = alts;
            out.push(t);
            return;
        }
    }
    let mut t = blank(word.to_owned(), span, cap);
    t.alts = match word {
        // Written out, these stand for their contracted forms too.
        "is" | "has" => &["'s"],
        "would" | "had" => &["'d"],
        _ => &[],
    };
    out.push(t);
}

/// Two words that are one: "all right" → "alright", "no one" → "noone", "per cent".
fn fold_pairs(tokens: &mut Vec<Token>) {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if i + 1 < tokens.len() {
            let pair = [tokens[i].key.as_str(), tokens[i + 1].key.as_str()];
            let one = match pair {
                ["all", "right"] => Some("alright"),
                ["no", "one"] => Some("noone"),
                ["per", "cent"] => Some("percent"),
                ["o", "clock"] => Some("o'clock"),
                _ => None,
            };
            if let Some(one) = one {
                let mut t = tokens[i].clone();
                t.key = one.to_owned();
                t.span = t.span.start..tokens[i + 1].span.end;
                out.push(t);
                i += 2;
                continue;
            }
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    *tokens = out;
}

const UNITS_WORDS: [&str; 20] = [
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
const ORDINAL_WORDS: [&str; 20] = [
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
const TENS_WORDS: [&str; 8] = [
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
const TENS_ORDINALS: [&str; 8] = [
    "twentieth",
    "thirtieth",
    "fortieth",
    "fiftieth",
    "sixtieth",
    "seventieth",
    "eightieth",
    "ninetieth",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumWord {
    /// 0–19 (and whether written as an ordinal).
    Small(u64, bool),
    /// 20–90.
    Tens(u64, bool),
    /// hundred, thousand, million, billion.
    Scale(u64, bool),
    /// "oh" as zero inside a run.
    Oh,
}

fn num_word(w: &str) -> Option<NumWord> {
    if let Some(i) = UNITS_WORDS.iter().position(|u| *u == w) {
        return Some(NumWord::Small(i as u64, false));
    }
    if let Some(i) = ORDINAL_WORDS.iter().position(|u| *u == w) {
        return Some(NumWord::Small(i as u64, true));
    }
    if let Some(i) = TENS_WORDS.iter().position(|u| *u == w) {
        return Some(NumWord::Tens(20 + 10 * i as u64, false));
    }
    if let Some(i) = TENS_ORDINALS.iter().position(|u| *u == w) {
        return Some(NumWord::Tens(20 + 10 * i as u64, true));
    }
    match w {
        "hundred" => Some(NumWord::Scale(100, false)),
        "hundredth" => Some(NumWord::Scale(100, true)),
        "thousand" => Some(NumWord::Scale(1_000, false)),
        "thousandth" => Some(NumWord::Scale(1_000, true)),
        "million" => Some(NumWord::Scale(1_000_000, false)),
        "millionth" => Some(NumWord::Scale(1_000_000, true)),
        "billion" => Some(NumWord::Scale(1_000_000_000, false)),
        "billionth" => Some(NumWord::Scale(1_000_000_000, true)),
        _ => None,
    }
}

fn is_month_key(k: &str) -> bool {
    lexicon::month(k).is_some()
}

/// Whether token `i` starts or continues a run of number words.
fn number_word_at(tokens: &[Token], i: usize, in_run: bool) -> Option<NumWord> {
    let t = &tokens[i];
    if !matches!(t.kind, Kind::Word) {
        return None;
    }
    let w = t.key.as_str();
    if w == "second" {
        // A unit of time, unless it is a date's ordinal: "the second of", "March second".
        let prev = i.checked_sub(1).map(|p| tokens[p].key.as_str());
        let next = tokens.get(i + 1).map(|n| n.key.as_str());
        let date = prev == Some("the") || prev.is_some_and(is_month_key) || next == Some("of");
        return date.then_some(NumWord::Small(2, true));
    }
    if w == "oh" && in_run {
        return tokens
            .get(i + 1)
            .and_then(|n| num_word(&n.key))
            .filter(|n| matches!(n, NumWord::Small(1..=9, false)))
            .map(|_| NumWord::Oh);
    }
    num_word(w)
}

/// Parses a run as one cardinal ("two hundred and six", "three thousand four hundred").
fn cardinal(run: &[NumWord]) -> Option<u64> {
    #[derive(PartialEq, Clone, Copy)]
    enum Prev {
        Start,
        Small,
        Teen,
        Tens,
        Hundred,
        Big(u64),
    }
    let mut total: u64 = 0;
    let mut current: u64 = 0;
    let mut prev = Prev::Start;
    let mut last_big = u64::MAX;
    // A scale alone is a word ("millions of"), not a number.
    if matches!(run.first(), Some(NumWord::Scale(..))) {
        return None;
    }
    for w in run {
        match *w {
            NumWord::Small(n, _) if n < 10 && n > 0 => {
                if !matches!(
                    prev,
                    Prev::Start | Prev::Tens | Prev::Hundred | Prev::Big(_)
                ) {
                    return None;
                }
                current += n;
                prev = Prev::Small;
            }
            NumWord::Small(n, _) => {
                if !matches!(prev, Prev::Start | Prev::Hundred | Prev::Big(_)) {
                    return None;
                }
                current += n;
                prev = Prev::Teen;
            }
            NumWord::Tens(n, _) => {
                if !matches!(prev, Prev::Start | Prev::Hundred | Prev::Big(_)) {
                    return None;
                }
                current += n;
                prev = Prev::Tens;
            }
            NumWord::Scale(100, _) => {
                if !matches!(prev, Prev::Small | Prev::Teen | Prev::Start) || current >= 100 {
                    return None;
                }
                current = current.max(1) * 100;
                prev = Prev::Hundred;
            }
            NumWord::Scale(s, _) => {
                if matches!(prev, Prev::Big(_)) || s >= last_big {
                    return None;
                }
                total = total.checked_add(current.max(1).checked_mul(s)?)?;
                current = 0;
                last_big = s;
                prev = Prev::Big(s);
            }
            NumWord::Oh => return None,
        }
    }
    Some(total + current)
}

/// Readings of a run that is not one cardinal: digit groups read one after another
/// ("one two three four" → 1234, "twenty twenty five" → 2025, "three thirty" → 330 or 3:30).
fn grouped(run: &[NumWord]) -> Option<Vec<String>> {
    let mut groups: Vec<String> = Vec::new();
    let mut i = 0;
    while i < run.len() {
        match run[i] {
            NumWord::Tens(t, _) => {
                if let Some(NumWord::Small(u, _)) = run.get(i + 1)
                    && (1..10).contains(u)
                {
                    groups.push((t + u).to_string());
                    i += 2;
                } else {
                    groups.push(t.to_string());
                    i += 1;
                }
            }
            NumWord::Small(n, _) => {
                groups.push(n.to_string());
                i += 1;
            }
            NumWord::Oh => {
                if let Some(NumWord::Small(u, _)) = run.get(i + 1) {
                    groups.push(format!("0{u}"));
                    i += 2;
                } else {
                    return None;
                }
            }
            NumWord::Scale(..) => return None,
        }
    }
    if groups.len() < 2 {
        return None;
    }
    let mut readings = vec![groups.concat()];
    if groups.len() == 2
        && let (Ok(h), Ok(m)) = (groups[0].parse::<u32>(), groups[1].parse::<u32>())
        && (1..=24).contains(&h)
        && groups[1].len() == 2
        && m < 60
    {
        readings.push(format!("{h}:{}", groups[1]));
    }
    Some(readings)
}

/// Folds runs of number words (and digits with a scale: "5 thousand") into number tokens;
/// "minus" or "negative" before one makes it negative; "point" adds decimals.
fn fold_numbers(tokens: &mut Vec<Token>) {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let sign_word = matches!(tokens[i].key.as_str(), "minus" | "negative")
            && matches!(tokens[i].kind, Kind::Word);
        let start = i;
        let mut j = if sign_word { i + 1 } else { i };
        // "a hundred", "a thousand".
        let article = j < tokens.len()
            && tokens[j].is_word("a")
            && tokens
                .get(j + 1)
                .and_then(|n| num_word(&n.key))
                .is_some_and(|n| matches!(n, NumWord::Scale(..)));
        if article {
            j += 1;
        }
        // A digit token followed by a scale word: "5 thousand", "2.5 million".
        if let Some(n) = tokens.get(j).and_then(Token::num)
            && let Some(NumWord::Scale(s, ord)) = tokens.get(j + 1).and_then(|t| num_word(&t.key))
            && let Some(r) = n.readings.first()
            && let Ok(v) = r.parse::<f64>()
        {
            let value = v * s as f64;
            let negative = n.negative || sign_word;
            let span = tokens[start].span.start..tokens[j + 1].span.end;
            out.push(number(vec![format_value(value)], negative, ord, span));
            i = j + 2;
            continue;
        }
        let mut run: Vec<NumWord> = Vec::new();
        let mut k = j;
        if article {
            run.push(NumWord::Small(1, false));
        }
        while k < tokens.len() {
            if let Some(w) = number_word_at(tokens, k, !run.is_empty()) {
                // A new ordinal ends a run ("the twenty first second" is not one number).
                run.push(w);
                k += 1;
                if matches!(
                    w,
                    NumWord::Small(_, true) | NumWord::Tens(_, true) | NumWord::Scale(_, true)
                ) {
                    break;
                }
                continue;
            }
            // A filler inside a run: "five five uh five".
            if !run.is_empty()
                && matches!(tokens[k].kind, Kind::Word)
                && lexicon::is_in(lexicon::FILLERS, &tokens[k].key)
                && k + 1 < tokens.len()
                && number_word_at(tokens, k + 1, true).is_some()
            {
                k += 1;
                continue;
            }
            // "and" inside a run after a scale: "two hundred and six".
            if tokens[k].is_word("and")
                && matches!(run.last(), Some(NumWord::Scale(..)))
                && tokens
                    .get(k + 1)
                    .and_then(|n| num_word(&n.key))
                    .is_some_and(|n| !matches!(n, NumWord::Scale(..)))
            {
                k += 1;
                continue;
            }
            break;
        }
        if run.is_empty() || (article && run.len() == 1) {
            if sign_word && let Some(n) = tokens.get(i + 1).and_then(Token::num) {
                // "minus 18".
                let mut t = tokens[i + 1].clone();
                t.kind = Kind::Num(Num {
                    negative: true,
                    ..n.clone()
                });
                t.span = tokens[i].span.start..t.span.end;
                out.push(t);
                i += 2;
                continue;
            }
            out.push(tokens[i].clone());
            i += 1;
            continue;
        }
        let ordinal = run.iter().any(|w| {
            matches!(
                w,
                NumWord::Small(_, true) | NumWord::Tens(_, true) | NumWord::Scale(_, true)
            )
        });
        let mut readings = match cardinal(&run) {
            Some(v) => vec![v.to_string()],
            None => match grouped(&run) {
                Some(r) => r,
                None => {
                    // Not a number after all (e.g. "hundred" alone): keep the words.
                    out.push(tokens[i].clone());
                    i += 1;
                    continue;
                }
            },
        };
        // "three point five".
        if tokens.get(k).is_some_and(|t| t.is_word("point")) {
            let mut digits = String::new();
            let mut d = k + 1;
            while let Some(NumWord::Small(n, false)) = tokens.get(d).and_then(|t| num_word(&t.key))
            {
                if n > 9 {
                    break;
                }
                digits.push_str(&n.to_string());
                d += 1;
            }
            if !digits.is_empty() {
                readings = readings.iter().map(|r| format!("{r}.{digits}")).collect();
                k = d;
            }
        }
        // "nine o'clock".
        if tokens.get(k).is_some_and(|t| t.is_word("o'clock")) {
            let extra: Vec<String> = readings.iter().map(|r| format!("{r}:00")).collect();
            readings.extend(extra);
            k += 1;
        }
        let span = tokens[start].span.start..tokens[k - 1].span.end;
        let mut t = number(readings, sign_word, ordinal, span);
        t.cap = tokens[start].cap;
        out.push(t);
        i = k;
    }
    *tokens = out;
}

/// A scale word after a folded number, with a currency sign between or not: "$1.5
/// million", "one point five million" → 1500000.
fn scales_after(tokens: &mut Vec<Token>) {
    let mut i = 0;
    while i < tokens.len() {
        let Some(n) = tokens[i].num() else {
            i += 1;
            continue;
        };
        let value = match n.readings.as_slice() {
            [r] if !r.contains(':') => r.parse::<f64>().ok(),
            _ => None,
        };
        let currency = |t: &Token| ["dollar", "euro", "pound", "yen"].contains(&t.key.as_str());
        let at = if tokens.get(i + 1).is_some_and(currency) {
            i + 2
        } else {
            i + 1
        };
        let scale = tokens
            .get(at)
            .filter(|t| matches!(t.kind, Kind::Word))
            .and_then(|t| num_word(&t.key));
        if let (Some(v), Some(NumWord::Scale(s, false))) = (value, scale) {
            let reading = format_value(v * s as f64);
            let end = tokens[at].span.end;
            let t = &mut tokens[i];
            t.key = reading.clone();
            t.span.end = t.span.end.max(end);
            if let Kind::Num(n) = &mut t.kind {
                n.readings = vec![reading];
            }
            tokens.remove(at);
            continue;
        }
        i += 1;
    }
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e18 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// After numbers: unit words named canonically ("kilometres" → `kilometre`), "in the
/// morning" as `am`, "N dollars and M cents" as one amount, and "o'clock" after digits.
fn after_numbers(tokens: &mut Vec<Token>) {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].clone();
        let follows_number = out.last().is_some_and(|p: &Token| p.num().is_some());
        if follows_number && matches!(t.kind, Kind::Word) {
            let key = t.key.as_str();
            if key == "o'clock"
                && let Some(Kind::Num(n)) = out.last_mut().map(|p| &mut p.kind)
            {
                let extra: Vec<String> = n.readings.iter().map(|r| format!("{r}:00")).collect();
                n.readings.extend(extra);
                i += 1;
                continue;
            }
            let rest: Vec<&str> = tokens[i..tokens.len().min(i + 3)]
                .iter()
                .map(|t| t.key.as_str())
                .collect();
            let period = match rest.as_slice() {
                ["in", "the", "morning", ..] => Some(("am", 3)),
                ["in", "the", "afternoon" | "evening", ..] => Some(("pm", 3)),
                ["at", "night", ..] => Some(("pm", 2)),
                _ => None,
            };
            if let Some((p, n)) = period {
                let span = t.span.start..tokens[i + n - 1].span.end;
                out.push(blank(p.to_owned(), span, false));
                i += n;
                continue;
            }
            if let Some(unit) = lexicon::unit(key) {
                let mut u = t.clone();
                u.key = unit.to_owned();
                // "25 dollars and 40 cents" → 25.40 dollar.
                if ["dollar", "euro", "pound"].contains(&unit)
                    && tokens.get(i + 1).is_some_and(|a| a.is_word("and"))
                    && let Some(cents) = tokens.get(i + 2).and_then(Token::num)
                    && tokens
                        .get(i + 3)
                        .is_some_and(|c| lexicon::unit(&c.key) == Some("cent"))
                    && let Some(c) = cents.readings.first().and_then(|r| r.parse::<u32>().ok())
                    && c < 100
                    && let Some(amount) = out.last_mut()
                    && let Kind::Num(n) = &mut amount.kind
                {
                    n.readings = n.readings.iter().map(|r| format!("{r}.{c:02}")).collect();
                    amount.key = n.readings.first().cloned().unwrap_or_default();
                    u.span = t.span.start..tokens[i + 3].span.end;
                    out.push(u);
                    i += 4;
                    continue;
                }
                out.push(u);
                i += 1;
                continue;
            }
        }
        out.push(t);
        i += 1;
    }
    *tokens = out;
}

fn gaps_of(source: &str, tokens: &[Token]) -> Vec<Range<usize>> {
    let mut gaps = Vec::with_capacity(tokens.len() + 1);
    let mut at = 0;
    for t in tokens {
        let start = t.span.start.max(at);
        gaps.push(at.min(start)..start);
        at = at.max(t.span.end);
    }
    gaps.push(at.min(source.len())..source.len());
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(s: &str) -> Vec<String> {
        Text::new(s).tokens.iter().map(|t| t.key.clone()).collect()
    }

    fn nums(s: &str) -> Vec<Vec<String>> {
        Text::new(s)
            .tokens
            .iter()
            .filter_map(|t| t.num().map(|n| n.readings.clone()))
            .collect()
    }

    #[test]
    fn contractions_are_spelled_out() {
        assert_eq!(
            keys("I don't think we're ready"),
            ["i", "do", "not", "think", "we", "are", "ready"]
        );
        assert_eq!(
            keys("we cannot, they can't, it won't"),
            [
                "we", "can", "not", "they", "can", "not", "it", "will", "not"
            ]
        );
        assert_eq!(
            keys("Lena's group, it's done"),
            ["lena", "'s", "group", "it", "'s", "done"]
        );
        assert_eq!(keys("let's go, gonna"), ["let", "us", "go", "going", "to"]);
    }

    #[test]
    fn numbers_fold_into_one_token_with_their_readings() {
        assert_eq!(nums("one two three four"), [["1234"]]);
        assert_eq!(nums("twenty twenty five"), [["2025", "20:25"]]);
        assert_eq!(nums("nineteen ninety nine"), [["1999"]]);
        assert_eq!(nums("three thirty"), [["330", "3:30"]]);
        assert_eq!(nums("twenty five"), [["25"]]);
        assert_eq!(nums("two hundred and six"), [["206"]]);
        assert_eq!(nums("three thousand four hundred"), [["3400"]]);
        assert_eq!(nums("a hundred chairs"), [["100"]]);
        assert_eq!(nums("twelve hundred euros"), [["1200"]]);
        assert_eq!(nums("three point five"), [["3.5"]]);
        assert_eq!(
            nums("1,250 and 3.5 and 3:30"),
            [["1250"], ["3.5"], ["3:30"]]
        );
        assert_eq!(nums("nine o'clock"), [["9", "9:00"]]);
        assert_eq!(nums("at 9:00"), [["9:00", "9"]]);
        assert_eq!(nums("twenty five dollars and forty cents"), [["25.40"]]);
        assert_eq!(
            keys("twenty five dollars and forty cents"),
            ["25.40", "dollar"]
        );
        assert_eq!(keys("$25.40"), ["25.40", "dollar"]);
        assert_eq!(
            keys("15% and fifteen percent"),
            ["15", "percent", "and", "15", "percent"]
        );
        assert_eq!(keys("wait a second"), ["wait", "a", "second"]);
        assert_eq!(nums("on the second of February"), [["2"]]);
        assert_eq!(keys("eight in the morning"), ["8", "am"]);
        assert_eq!(keys("9 a.m. on Wednesday"), ["9", "am", "on", "wednesday"]);
        assert_eq!(keys("9am"), ["9", "am"]);
        assert_eq!(keys("12 kilometres"), ["12", "kilometre"]);
        assert_eq!(keys("$1.5 million"), ["1500000", "dollar"]);
        assert_eq!(
            keys("one point five million dollars"),
            ["1500000", "dollar"]
        );
        let t = Text::new("minus eighteen and -18 and 18");
        let signs: Vec<bool> = t
            .tokens
            .iter()
            .filter_map(|t| t.num().map(|n| n.negative))
            .collect();
        assert_eq!(signs, [true, true, false]);
        let t = Text::new("the 21st and the twenty first");
        let ords: Vec<bool> = t
            .tokens
            .iter()
            .filter_map(|t| t.num().map(|n| n.ordinal))
            .collect();
        assert_eq!(ords, [true, true]);
    }

    #[test]
    fn sentences_clauses_and_questions() {
        let t = Text::new("Hi Mr. Okafor, the call is at 9 a.m. on Monday. Is that fine? Yes.");
        let starts: Vec<&str> = t
            .tokens
            .iter()
            .filter(|t| t.sentence_start)
            .map(|t| t.key.as_str())
            .collect();
        assert_eq!(starts, ["hi", "is", "yes"]);
        assert_eq!(t.questions(), 1);
        assert_eq!(Text::new("is the server down right now").questions(), 1);
        assert_eq!(Text::new("do not send the email").questions(), 0);
        assert_eq!(Text::new("when you get this call me back").questions(), 0);
        assert_eq!(Text::new("what time does the train leave").questions(), 1);
        assert_eq!(
            Text::new("hey Anna can you send me the numbers").questions(),
            1
        );
        assert_eq!(Text::new("the report is the best one").questions(), 0);
        assert!(!Text::new("no punctuation here").punctuated());
        assert_eq!(
            Text::new("Move the money to checking?").unopened_questions(),
            1
        );
        assert_eq!(
            Text::new("Hey, can you move it? Thanks.").unopened_questions(),
            0
        );
    }
}
