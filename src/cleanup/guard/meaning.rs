//! The rewrite modes' rule (Polish, Email, My instruction) and what Translate can check.
//! A rewrite may change wording and reorder sentences; it may not change the words that carry
//! meaning, drop what was said or add what was not. Each class is compared on its own:
//!
//! | class | compared as |
//! |---|---|
//! | negation (not, no, never, nothing, without, rather than, …) | the word each negates, as a multiset |
//! | yes | count |
//! | numbers | (sign, value, unit) as a multiset, in spoken order within each spoken sentence |
//! | days, months, today/tomorrow | multiset |
//! | names (capitalized mid-sentence) | each spoken name present, no new one |
//! | person | first person by role exactly; no new second or third person, no other gender |
//! | modality | count per class (must · should · can/could/may/might · will/would) |
//! | direction and order | what follows each "from"; before/after, up/down, … never swapped |
//! | quantifiers | count per class (all · some · many · few · only · least) |
//! | opposites | increase/decrease, open/close, accept/reject, … never swapped |
//! | everything else | every spoken content word present (by stem); no sentence mostly new |
//!
//! A greeting line ("Hi Anna,") and a closing ("Thanks,", "Best regards,") made of listed
//! words and spoken names are the message's frame, not its content.
//!
//! Translate keeps numbers (as digits), names and questions, and its length; its words are in
//! another language, so nothing else is checked — the clean-up is marked "partial".

use std::collections::HashMap;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

use super::Rejection;
use super::lexicon::{self, Person, Role};
use super::tidy::{Drops, EditKind};
use super::tokens::{Kind, Num, Text, Token};

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// A word's stem (Snowball English), remembered: a dictation repeats its words, and the guard
/// asks about each several times. The memory is emptied past 20,000 words.
pub fn stem(word: &str) -> String {
    thread_local! {
        static SEEN: std::cell::RefCell<HashMap<String, String>> = std::cell::RefCell::new(HashMap::new());
    }
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        if let Some(s) = seen.get(word) {
            return s.clone();
        }
        if seen.len() >= 20_000 {
            seen.clear();
        }
        let s = stemmer().stem(word).into_owned();
        seen.insert(word.to_owned(), s.clone());
        s
    })
}

/// Which of the spoken tokens a rewrite is compared with.
pub enum SpokenView {
    /// Fillers, discourse openers, repetitions and spoken punctuation left out.
    Plain,
    /// The same, and every false start taken back by its correction.
    Corrected,
}

/// The spoken tokens to compare: `keep[i]` is false for what the speaker did not mean.
pub fn spoken_keep(s: &Text, view: SpokenView) -> Vec<bool> {
    let drops = Drops::of(s);
    let n = s.len();
    let mut keep = vec![true; n];
    let mut i = 0;
    while i < n {
        let plain = drops.at[i]
            .iter()
            .filter(|(_, k)| {
                matches!(
                    k,
                    EditKind::Filler | EditKind::Discourse | EditKind::Repetition
                )
            })
            .map(|(end, _)| *end)
            .max();
        let sign = drops.signs[i].map(|(end, _)| end);
        if let Some(end) = plain.or(sign) {
            keep[i..end].iter_mut().for_each(|k| *k = false);
            i = end;
            continue;
        }
        i += 1;
    }
    if matches!(view, SpokenView::Corrected) {
        // Each cue takes back its shortest false start.
        let mut shortest: HashMap<usize, usize> = HashMap::new();
        for (x, ends) in drops.at.iter().enumerate() {
            for &(end, kind) in ends {
                if kind == EditKind::FalseStart {
                    let e = shortest.entry(end).or_insert(x);
                    *e = (*e).max(x);
                }
            }
        }
        for (end, x) in shortest {
            keep[x..end].iter_mut().for_each(|k| *k = false);
        }
    }
    keep
}

/// A number with its unit and its sentence.
#[derive(Debug, Clone)]
struct Atom {
    num: Num,
    unit: Option<String>,
    sentence: u32,
}

/// What one text says, class by class.
#[derive(Debug, Default)]
struct Features {
    negations: Vec<String>,
    yes: usize,
    modals: HashMap<&'static str, usize>,
    first_person: Vec<(Person, Role)>,
    second: usize,
    third: HashMap<Person, usize>,
    quantifiers: HashMap<&'static str, usize>,
    directions: HashMap<(usize, usize), usize>,
    opposites: HashMap<(usize, usize), usize>,
    from: Vec<String>,
    names: Vec<String>,
    dates: Vec<&'static str>,
    numbers: Vec<Atom>,
    /// (stem, sentence) of content words.
    content: Vec<(String, u32)>,
    /// Every key, for "was this said at all".
    keys: Vec<String>,
    /// Who and what, in order: (item, position among the kept tokens) — names, persons,
    /// days, opposite sides.
    items: Vec<(String, usize, u32)>,
    /// Items said as "a and b" / "a or b", whose order says nothing.
    coordinated: Vec<(String, String)>,
}

fn is_content(t: &Token) -> bool {
    if !matches!(t.kind, Kind::Word) {
        return false;
    }
    let k = t.key.as_str();
    !(lexicon::is_in(lexicon::FUNCTION_WORDS, k)
        || lexicon::is_in(lexicon::FILLERS, k)
        || matches!(k, "so" | "okay" | "alright" | "oh" | "anyway" | "anyways")
        || lexicon::is_in(lexicon::DROPPABLE_IN_REWRITE, k)
        || lexicon::is_in(lexicon::NEGATIONS, k)
        || lexicon::is_in(lexicon::YES, k)
        || lexicon::modal_class(k).is_some()
        || lexicon::pronoun(k).is_some()
        || lexicon::quantifier_class(k).is_some()
        || lexicon::is_in(lexicon::RELATIVE_DAYS, k)
        || lexicon::weekday(k).is_some()
        || lexicon::unit(k).is_some()
        || k == "to"
        || k == "from"
        || k == "'s"
        || k == "'d")
}

/// (from `DIRECTIONS`, pair, side) for each stem of the opposite lists.
type OppositeIndex = HashMap<String, Vec<(bool, usize, usize)>>;

fn opposite_side(table: &[(&[&str], &[&str])], stemmed: &str) -> Option<(usize, usize)> {
    static CACHE: OnceLock<OppositeIndex> = OnceLock::new();
    let map = CACHE.get_or_init(|| {
        let mut m = OppositeIndex::new();
        for (directions, list) in [(true, lexicon::DIRECTIONS), (false, lexicon::OPPOSITES)] {
            for (p, (a, b)) in list.iter().enumerate() {
                for (side, words) in [a, b].iter().enumerate() {
                    for w in words.iter() {
                        m.entry(stem(w)).or_default().push((directions, p, side));
                    }
                }
            }
        }
        m
    });
    let directions = std::ptr::eq(table, lexicon::DIRECTIONS);
    map.get(stemmed)?
        .iter()
        .find(|(d, _, _)| *d == directions)
        .map(|(_, p, side)| (*p, *side))
}

/// Whether token `i` is a month: "May" only when written so mid-sentence.
fn month_at(t: &[Token], i: usize) -> Option<&'static str> {
    let m = lexicon::month(&t[i].key)?;
    if t[i].key == "may" && (!t[i].cap || t[i].sentence_start) {
        return None;
    }
    // "Mar", "Jan" … are months only when capitalized.
    if t[i].key.len() <= 4 && t[i].key != m && !t[i].cap {
        return None;
    }
    if t[i].key == "march" && !t[i].cap {
        return None;
    }
    Some(m)
}

/// The token after `i` that says what a negation or a "from" is about. A negation right
/// before a modal is about the modal ("don't have to" is not "must not").
fn anchor(t: &[Token], keep: &[bool], i: usize) -> String {
    let next: Vec<&str> = (i + 1..t.len())
        .filter(|&k| keep[k])
        .take(2)
        .map(|k| t[k].key.as_str())
        .collect();
    if let Some(first) = next.first() {
        let pair = lexicon::MODAL_PAIRS
            .iter()
            .find(|(p, _)| next.len() == 2 && p[0] == *first && p[1] == next[1])
            .map(|(_, c)| *c);
        if let Some(class) = lexicon::modal_class(first).or(pair) {
            return format!("modal:{class}");
        }
    }
    let mut k = i + 1;
    while k < t.len() {
        if keep[k] {
            let tok = &t[k];
            match &tok.kind {
                Kind::Num(n) => {
                    return format!("#{}", n.readings.first().cloned().unwrap_or_default());
                }
                Kind::Word => {
                    let w = tok.key.as_str();
                    let skip = lexicon::is_in(lexicon::FUNCTION_WORDS, w)
                        || lexicon::is_in(lexicon::DROPPABLE_IN_REWRITE, w)
                        || lexicon::modal_class(w).is_some()
                        || lexicon::is_in(lexicon::NEGATIONS, w)
                        || w == "to"
                        || w == "'s";
                    if !skip {
                        return stem(w);
                    }
                }
            }
        }
        k += 1;
    }
    String::new()
}

/// Names of a text: capitalized words that do not open a sentence.
fn names_of<'t>(text: &'t Text<'_>) -> Vec<&'t str> {
    text.tokens
        .iter()
        .filter(|t| t.cap && !t.sentence_start && t.key != "i")
        .map(|t| t.key.as_str())
        .collect()
}

/// `other_names`: the other text's names, so a name that opens a sentence here is still
/// known as one ("Anna owes Tom" beside "Tom owes Anna").
fn features(text: &Text, keep: &[bool], other_names: &[&str]) -> Features {
    let t = &text.tokens;
    let mut f = Features::default();
    let kept: Vec<usize> = (0..t.len()).filter(|&i| keep[i]).collect();
    let next_kept = |pos: usize| kept.get(pos + 1).map(|&k| &t[k]);
    for (pos, &i) in kept.iter().enumerate() {
        let tok = &t[i];
        f.keys.push(tok.key.clone());
        if let Kind::Num(n) = &tok.kind {
            let unit = next_kept(pos)
                .filter(|u| matches!(u.kind, Kind::Word) && lexicon::unit(&u.key).is_some())
                .map(|u| u.key.clone());
            f.numbers.push(Atom {
                num: n.clone(),
                unit,
                sentence: tok.sentence,
            });
            continue;
        }
        let k = tok.key.as_str();
        let next = next_kept(pos).map(|n| n.key.as_str());
        let prev = pos.checked_sub(1).map(|p| t[kept[p]].key.as_str());
        if lexicon::is_in(lexicon::NEGATIONS, k) || k == "noone" {
            f.negations.push(anchor(t, keep, i));
        }
        if lexicon::NEGATION_PAIRS
            .iter()
            .any(|p| k == p[0] && next == Some(p[1]))
        {
            f.negations
                .push(anchor(t, keep, kept.get(pos + 1).copied().unwrap_or(i)));
        }
        if lexicon::is_in(lexicon::YES, k) {
            f.yes += 1;
        }
        let modal = lexicon::modal_class(k)
            .filter(|_| !(k == "may" && month_at(t, i).is_some()))
            .or_else(|| {
                lexicon::MODAL_PAIRS
                    .iter()
                    .find(|(p, _)| k == p[0] && next == Some(p[1]))
                    .map(|(_, c)| *c)
            })
            .or_else(|| (k == "'d" && next != Some("been")).then_some("future"));
        if let Some(c) = modal {
            *f.modals.entry(c).or_default() += 1;
        }
        if let Some((p, mut role)) = lexicon::pronoun(k) {
            // "me and Tom", "Tom and I": English does not tell the role there.
            let before_and = pos.checked_sub(2).map(|q| &t[kept[q]]).is_some_and(|w| {
                (w.cap && !w.sentence_start) || lexicon::pronoun(&w.key).is_some()
            });
            if (k == "me" && (prev == Some("and") || next == Some("and")))
                || (k == "i" && prev == Some("and") && before_and)
            {
                role = Role::Any;
            }
            match p {
                Person::FirstSingular | Person::FirstPlural => f.first_person.push((p, role)),
                Person::Second => f.second += 1,
                _ => *f.third.entry(p).or_default() += 1,
            }
        }
        let quant = if k == "a" && matches!(next, Some("few" | "little" | "couple")) {
            Some("some")
        } else if matches!(prev, Some("a")) && matches!(k, "few" | "little") {
            None
        } else if k == "most" && prev == Some("at") {
            Some("at-most")
        } else if lexicon::is_in(lexicon::GREETED_GROUPS, k)
            && prev.is_some_and(|p| lexicon::is_in(lexicon::GREETINGS, p))
        {
            // "Hi everyone": whom a greeting addresses, not how many.
            None
        } else {
            lexicon::quantifier_class(k)
        };
        if let Some(q) = quant {
            *f.quantifiers.entry(q).or_default() += 1;
        }
        if k == "from" {
            f.from.push(anchor(t, keep, i));
        }
        let st = stem(k);
        if let Some(side) = opposite_side(lexicon::DIRECTIONS, &st) {
            *f.directions.entry(side).or_default() += 1;
        }
        if let Some(side) = opposite_side(lexicon::OPPOSITES, &st) {
            *f.opposites.entry(side).or_default() += 1;
        }
        if let Some(d) = lexicon::weekday(k).filter(|_| k.len() > 3 || tok.cap) {
            f.dates.push(d);
        } else if let Some(m) = month_at(t, i) {
            f.dates.push(m);
        } else if let Some(r) = lexicon::RELATIVE_DAYS.iter().find(|r| **r == k) {
            f.dates.push(r);
        }
        if tok.cap
            && !tok.sentence_start
            && k != "i"
            && month_at(t, i).is_none()
            && lexicon::weekday(k).is_none()
        {
            f.names.push(k.to_owned());
        }
        let name = tok.cap
            && k != "i"
            && month_at(t, i).is_none()
            && lexicon::weekday(k).is_none()
            && (!tok.sentence_start || other_names.contains(&k));
        let item = if name {
            Some(format!("name:{k}"))
        } else if let Some((p, _)) = lexicon::pronoun(k) {
            Some(format!("person:{p:?}"))
        } else if let Some(d) = f
            .dates
            .last()
            .filter(|_| lexicon::weekday(k).is_some() || month_at(t, i).is_some())
        {
            Some(format!("date:{d}"))
        } else if let Some((p, side)) = opposite_side(lexicon::DIRECTIONS, &st) {
            Some(format!("direction:{p}:{side}"))
        } else if lexicon::is_in(lexicon::FUNCTION_WORDS, k) {
            // Connectives and tense count for swaps only: their place is free.
            None
        } else {
            opposite_side(lexicon::OPPOSITES, &st).map(|(p, side)| format!("opposite:{p}:{side}"))
        };
        if let Some(item) = item {
            if let Some((prev_item, prev_pos, _)) = f.items.last()
                && matches!(prev, Some("and" | "or"))
                && prev_pos + 2 == pos
            {
                f.coordinated.push((prev_item.clone(), item.clone()));
            }
            f.items.push((item, pos, tok.sentence));
        }
        if is_content(tok) && month_at(t, i).is_none() {
            f.content.push((st, tok.sentence));
        }
    }
    f.negations.sort();
    f.first_person.sort();
    f.from.sort();
    f.names.sort();
    f.dates.sort();
    f
}

/// The output's frame lines (greeting, closing, a signature of spoken names): their tokens
/// are left out of the comparison. Returns `keep` for the output.
fn frame_keep(o: &Text, spoken_keys: &[String]) -> Vec<bool> {
    let t = &o.tokens;
    let mut keep = vec![true; t.len()];
    // Lines as token ranges.
    let mut lines: Vec<(usize, usize)> = Vec::new();
    for (i, tok) in t.iter().enumerate() {
        if tok.line_start || i == 0 {
            lines.push((i, i + 1));
        } else if let Some(l) = lines.last_mut() {
            l.1 = i + 1;
        }
    }
    let said = |k: &str| spoken_keys.iter().any(|s| s == k);
    let count = lines.len();
    for (li, &(a, b)) in lines.iter().enumerate() {
        let words: Vec<&str> = t[a..b].iter().map(|x| x.key.as_str()).collect();
        let greeting = li == 0
            && words.len() <= 5
            && lexicon::is_in(lexicon::GREETINGS, words[0])
            && words[1..].iter().all(|w| {
                lexicon::is_in(lexicon::GREETINGS, w)
                    || lexicon::is_in(lexicon::GREETED_GROUPS, w)
                    || said(w)
                    || *w == "mr"
                    || *w == "mrs"
                    || *w == "ms"
                    || *w == "dr"
            });
        let closing = li + 2 >= count
            && li > 0
            && words.len() <= 4
            && words.iter().all(|w| lexicon::is_in(lexicon::CLOSINGS, w));
        let signature = li + 1 == count
            && li > 0
            && words.len() <= 2
            && t[a..b].iter().all(|x| x.cap && said(&x.key));
        if greeting || closing || signature {
            keep[a..b].iter_mut().for_each(|k| *k = false);
        }
    }
    keep
}

/// Numbers: the same (sign, value, unit) multiset, and each spoken sentence's numbers in the
/// same order in the clean-up.
fn numbers_agree(s: &[Atom], o: &[Atom], units: bool) -> bool {
    if s.len() != o.len() {
        return false;
    }
    let mut used = vec![false; o.len()];
    let mut place = Vec::with_capacity(s.len());
    for a in s {
        let found = o
            .iter()
            .enumerate()
            .position(|(k, b)| !used[k] && a.num.same(&b.num) && (!units || a.unit == b.unit));
        match found {
            Some(k) => {
                used[k] = true;
                place.push(k);
            }
            None => return false,
        }
    }
    // Within each spoken sentence, the matched places ascend.
    s.windows(2)
        .zip(place.windows(2))
        .all(|(a, p)| a[0].sentence != a[1].sentence || p[0] < p[1])
}

fn multiset_eq<T: Eq + std::hash::Hash + Clone>(
    a: &HashMap<T, usize>,
    b: &HashMap<T, usize>,
) -> bool {
    let get = |m: &HashMap<T, usize>, k: &T| m.get(k).copied().unwrap_or(0);
    a.keys().chain(b.keys()).all(|k| get(a, k) == get(b, k))
}

/// One side of a pair went up while the other went down.
fn swapped(s: &HashMap<(usize, usize), usize>, o: &HashMap<(usize, usize), usize>) -> bool {
    let get =
        |m: &HashMap<(usize, usize), usize>, k: (usize, usize)| m.get(&k).copied().unwrap_or(0);
    s.keys().chain(o.keys()).any(|&(p, side)| {
        let other = (p, 1 - side);
        get(o, (p, side)) > get(s, (p, side)) && get(o, other) < get(s, other)
    })
}

/// Judges a rewrite against one view of the spoken words.
pub fn judge_rewrite(s: &Text, keep_s: &[bool], o: &Text) -> Result<(), Rejection> {
    let fs = features(s, keep_s, &names_of(o));
    let keep_o = frame_keep(o, &fs.keys);
    let fo = features(o, &keep_o, &names_of(s));
    if fo.content.is_empty() && fo.numbers.is_empty() && !fs.content.is_empty() {
        return Err(Rejection::WordsMissing);
    }
    if fs.negations != fo.negations {
        return Err(Rejection::NegationChanged);
    }
    if fs.yes != fo.yes {
        return Err(Rejection::YesNoChanged);
    }
    if !numbers_agree(&fs.numbers, &fo.numbers, true) {
        return Err(Rejection::NumbersChanged);
    }
    if fs.dates != fo.dates {
        return Err(Rejection::DateChanged);
    }
    let all_o: Vec<&str> = o.tokens.iter().map(|t| t.key.as_str()).collect();
    let all_s: Vec<&str> = s.tokens.iter().map(|t| t.key.as_str()).collect();
    if fs.names.iter().any(|n| !all_o.contains(&n.as_str()))
        || fo.names.iter().any(|n| !all_s.contains(&n.as_str()))
    {
        return Err(Rejection::NameChanged);
    }
    // A rewrite may leave a pronoun out ("… but will keep"), never bring one in: "I owe
    // you" → "you owe me" brings in an object "me".
    let mut left = fs.first_person.clone();
    let first_ok = fo.first_person.iter().all(|x| {
        left.iter()
            .position(|y| y.0 == x.0 && (y.1 == x.1 || y.1 == Role::Any || x.1 == Role::Any))
            .map(|k| left.remove(k))
            .is_some()
    });
    let person_ok = first_ok
        && fo.second <= fs.second
        && fo
            .third
            .iter()
            .all(|(p, n)| *n <= fs.third.get(p).copied().unwrap_or(0));
    if !person_ok {
        return Err(Rejection::PersonChanged);
    }
    if !multiset_eq(&fs.modals, &fo.modals) {
        return Err(Rejection::ModalityChanged);
    }
    if fs.from != fo.from || swapped(&fs.directions, &fo.directions) {
        return Err(Rejection::DirectionChanged);
    }
    if !multiset_eq(&fs.quantifiers, &fo.quantifiers) {
        return Err(Rejection::QuantityChanged);
    }
    if swapped(&fs.opposites, &fo.opposites) {
        return Err(Rejection::OppositeWord);
    }
    if let Some(item) = order_changed(&fs, &fo) {
        return Err(match item.split(':').next() {
            Some("date") => Rejection::DateChanged,
            Some("direction") => Rejection::DirectionChanged,
            Some("opposite") => Rejection::OppositeWord,
            _ => Rejection::PersonChanged,
        });
    }
    // Every spoken content word is still there.
    let out_stems: Vec<&str> = fo.content.iter().map(|(s, _)| s.as_str()).collect();
    let all_o_stems: Vec<String> = o.tokens.iter().map(|t| stem(&t.key)).collect();
    if fs
        .content
        .iter()
        .any(|(st, _)| !out_stems.contains(&st.as_str()) && !all_o_stems.contains(st))
    {
        return Err(Rejection::WordsMissing);
    }
    // No sentence mostly of words never spoken; not much new overall.
    let spoken_stems: Vec<String> = s.tokens.iter().map(|t| stem(&t.key)).collect();
    let novel = |st: &str| !spoken_stems.iter().any(|x| x == st);
    let mut per_sentence: HashMap<u32, (usize, usize)> = HashMap::new();
    let mut novel_total = 0;
    for (st, sentence) in &fo.content {
        let e = per_sentence.entry(*sentence).or_default();
        e.1 += 1;
        if novel(st) {
            e.0 += 1;
            novel_total += 1;
        }
    }
    if per_sentence
        .values()
        .any(|&(nv, all)| nv > 0 && nv * 2 > all)
    {
        return Err(Rejection::SentenceAdded);
    }
    if novel_total * 3 > fo.content.len().max(1) || fo.content.len() > fs.content.len() * 3 / 2 + 4
    {
        return Err(Rejection::WordsAdded);
    }
    Ok(())
}

/// Who and what said close together keep their order wherever the clean-up also has them
/// close together ("Anna owes Tom" is not "Tom owes Anna"; "open the window and close the
/// door" is not "close the window and open the door"). Returns an item whose order changed.
fn order_changed(s: &Features, o: &Features) -> Option<String> {
    const NEAR: usize = 6;
    // Only items said once on each side: a repeated "you" has no one place.
    let once = |f: &Features, x: &str| f.items.iter().filter(|(y, _, _)| y == x).count() == 1;
    let at = |f: &Features, x: &str| f.items.iter().find(|(y, _, _)| y == x).map(|(_, p, _)| *p);
    for (ai, (a, pa, sa)) in s.items.iter().enumerate() {
        for (b, pb, sb) in s.items[ai + 1..].iter() {
            if pb - pa > NEAR || sa != sb || a == b {
                continue;
            }
            if !(once(s, a) && once(s, b) && once(o, a) && once(o, b)) {
                continue;
            }
            let free = s
                .coordinated
                .iter()
                .any(|(x, y)| (x == a && y == b) || (x == b && y == a));
            if free {
                continue;
            }
            if let (Some(oa), Some(ob)) = (at(o, a), at(o, b))
                && ob < oa
                && oa - ob <= NEAR
            {
                return Some(a.clone());
            }
        }
    }
    None
}

/// What Translate can check: numbers (as digit values), names, questions and length.
pub fn judge_translation(s: &Text, o: &Text) -> Result<(), Rejection> {
    let keep_s = spoken_keep(s, SpokenView::Corrected);
    let fs = features(s, &keep_s, &[]);
    let keep_o = vec![true; o.len()];
    let fo = features(o, &keep_o, &[]);
    // Values only: units and order are words of another language.
    let mut left: Vec<&Num> = fo.numbers.iter().map(|x| &x.num).collect();
    let same_values = fs.numbers.len() == left.len()
        && fs.numbers.iter().all(|x| {
            left.iter()
                .position(|y| x.num.same(y))
                .map(|k| left.swap_remove(k))
                .is_some()
        });
    if !same_values {
        return Err(Rejection::NumbersChanged);
    }
    let out_keys: Vec<&str> = o.tokens.iter().map(|t| t.key.as_str()).collect();
    if fs
        .names
        .iter()
        .any(|n| !out_keys.iter().any(|k| k.starts_with(n.as_str())))
    {
        return Err(Rejection::NameChanged);
    }
    let words_s = keep_s.iter().filter(|k| **k).count().max(1) as f64;
    let cjk = o
        .source
        .chars()
        .any(|c| ('\u{3040}'..='\u{9fff}').contains(&c) || ('\u{ac00}'..='\u{d7af}').contains(&c));
    let ratio = o.len() as f64 / words_s;
    if !cjk && !(0.5..=2.0).contains(&ratio) && (o.len() as isize - words_s as isize).abs() > 3 {
        return Err(Rejection::Length);
    }
    Ok(())
}

/// The class of a token for naming why an edit was refused.
pub fn class_of(t: &[Token], i: usize) -> Option<Rejection> {
    let tok = &t[i];
    if tok.num().is_some() {
        return Some(Rejection::NumbersChanged);
    }
    let k = tok.key.as_str();
    if i > 0 && t[i - 1].num().is_some() && lexicon::unit(k).is_some() {
        return Some(Rejection::NumbersChanged);
    }
    if lexicon::is_in(lexicon::NEGATIONS, k) || k == "noone" {
        return Some(Rejection::NegationChanged);
    }
    if lexicon::is_in(lexicon::YES, k) {
        return Some(Rejection::YesNoChanged);
    }
    if lexicon::weekday(k).is_some()
        || month_at(t, i).is_some()
        || lexicon::is_in(lexicon::RELATIVE_DAYS, k)
    {
        return Some(Rejection::DateChanged);
    }
    if lexicon::pronoun(k).is_some() {
        return Some(Rejection::PersonChanged);
    }
    if lexicon::modal_class(k).is_some() {
        return Some(Rejection::ModalityChanged);
    }
    let st = stem(k);
    if k == "to" || k == "from" || opposite_side(lexicon::DIRECTIONS, &st).is_some() {
        return Some(Rejection::DirectionChanged);
    }
    if lexicon::quantifier_class(k).is_some() {
        return Some(Rejection::QuantityChanged);
    }
    if opposite_side(lexicon::OPPOSITES, &st).is_some() {
        return Some(Rejection::OppositeWord);
    }
    if tok.cap && !tok.sentence_start && k != "i" {
        return Some(Rejection::NameChanged);
    }
    None
}
